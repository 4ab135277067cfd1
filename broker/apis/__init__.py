"""One module per Kafka API (or per family of thin ones); each registers itself with
broker.dispatch.api. ``broker.dispatch.load_all()`` imports them all."""
