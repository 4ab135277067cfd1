"""The `consumer` group protocol (KIP-848): server-side partition assignment, driven by heartbeats."""
