"""Share groups (KIP-932): the group side, served by the group coordinator."""
