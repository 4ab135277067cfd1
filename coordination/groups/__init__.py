"""Consumer groups: the classic group state machine and the __consumer_offsets records."""
