"""Client telemetry (KIP-714): client-metrics subscriptions, the client instances a worker
has seen, the OTLP metrics they push, and their export to the Prometheus endpoint."""
