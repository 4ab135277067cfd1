"""Security: SASL authentication (PLAIN, SCRAM-SHA-256/512) and SCRAM credentials, Kafka-compatible."""
