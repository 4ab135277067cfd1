"""The Kafka wire protocol: frames and headers (ours), message bodies (kio), fast paths."""
