"""Share groups (KIP-932): their records in __consumer_offsets and __share_group_state, and the delivery state of a share partition."""
