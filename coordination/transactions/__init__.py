"""The transaction coordinator: Kafka transactions (transaction.version 1)."""
