"""Kafka 4.4's Java producer and client telemetry (KIP-714): it asks for its subscription at
start (enable.metrics.push is on by default), is given a client instance id, and, matched by
a subscription set with kafka-client-metrics.sh semantics, pushes its metrics, which appear on
Castle's Prometheus endpoint labelled with that id."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.broker.test_metrics import scrape
from tests.integration.broker.test_telemetry import SET, alter, wait_seen_by_every_worker
from tests.integration.conftest import Broker, wait_until
from tests.integration.kio_client import KioClient
from tests.java_clients import java_present, start_java

pytestmark = [pytest.mark.integration, pytest.mark.java_clients, pytest.mark.timeout(240)]

__all__ = ["java_present"]  # the autouse fixture: Java must be on PATH


def test_a_java_producer_pushes_its_metrics_to_the_prometheus_endpoint(broker: Broker, tmp_path: Path) -> None:
    with KioClient(broker.bootstrap) as admin:
        answer = alter(admin, "java-producers", ("metrics", SET, "org.apache.kafka.producer."),
                       ("interval.ms", SET, "1000"),
                       ("match", SET, "client_software_name=apache-kafka-java,client_id=java-telemetry"))
        assert answer.error_code == 0, answer.error_message
    wait_seen_by_every_worker(broker.bootstrap, "java-telemetry", ["org.apache.kafka.producer."],
                              software="apache-kafka-java")
    producer = start_java("castle.MetricsProducer", [f"bootstrap={broker.bootstrap}", "topic=java-telemetry",
                                                     "seconds=60", "client.id=java-telemetry"], tmp_path)
    try:
        instance = producer.wait_for_line(r"^INSTANCE (\S+)$", timeout=90).group(1)

        def pushed() -> set[str]:
            return {name for name, labels in scrape(broker)
                    if ("client_instance_id", instance) in labels and name.startswith("org_apache_kafka_producer_")}

        names = wait_until(pushed, 60, "the Java producer's metrics on /metrics", interval=0.5)
        # Only what the subscription asked for: the producer's metrics, no others.
        assert all(name.startswith("org_apache_kafka_producer_") for name in names)
        assert len(names) >= 3, names
    finally:
        producer.kill()
