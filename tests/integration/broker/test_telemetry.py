"""Client telemetry (KIP-714) against a real two-worker broker: client-metrics subscriptions
set, described, listed and refused as Kafka does; raw GetTelemetrySubscriptions /
PushTelemetry with every bad input; and a real client (librdkafka, enable.metrics.push)
whose pushed metrics appear on the Prometheus endpoint."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.describe_configs.v4.request import DescribeConfigsRequest, DescribeConfigsResource
from kio.schema.get_telemetry_subscriptions.v0.request import GetTelemetrySubscriptionsRequest
from kio.schema.incremental_alter_configs.v1.request import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)
from kio.schema.list_config_resources.v0.request import ListConfigResourcesRequest
from kio.schema.push_telemetry.v0.request import PushTelemetryRequest
from kio.static.primitive import i8, i32

from tests.integration.broker.test_metrics import scrape
from tests.integration.conftest import shared_broker, wait_until
from tests.integration.kio_client import KioClient

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

CLIENT_METRICS = i8(16)
SET, DELETE = i8(0), i8(1)
MAX_BYTES = 4096
INVALID_CONFIG, INVALID_REQUEST, INVALID_RECORD = 40, 42, 87
THROTTLED, UNKNOWN_SUBSCRIPTION, UNSUPPORTED_COMPRESSION, TOO_LARGE = 89, 117, 76, 118


@pytest.fixture(scope="module")
def broker(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    request.param = {"workers": 2, "telemetry.max.bytes": MAX_BYTES}  # type: ignore[attr-defined]
    yield from shared_broker(request, tmp_path_factory)


def alter(client: KioClient, name: str, *ops: tuple[str, int, str | None]) -> Any:
    request = IncrementalAlterConfigsRequest(resources=(AlterConfigsResource(
        resource_type=CLIENT_METRICS, resource_name=name,
        configs=tuple(AlterableConfig(name=key, config_operation=i8(op), value=value) for key, op, value in ops)),),
        validate_only=False)
    return client.call(44, 1, request).responses[0]


def describe(client: KioClient, name: str) -> tuple[int, dict[str, tuple[str | None, int]]]:
    answer = client.call(32, 4, DescribeConfigsRequest(resources=(DescribeConfigsResource(
        resource_type=CLIENT_METRICS, resource_name=name, configuration_keys=None),), include_synonyms=False,
        include_documentation=False)).results[0]
    return answer.error_code, {c.name: (c.value, c.config_source) for c in answer.configs}


def listed(client: KioClient) -> list[str]:
    answer = client.call(74, 0, ListConfigResourcesRequest())
    assert answer.error_code == 0
    return sorted(r.resource_name for r in answer.config_resources)


def wait_seen_by_every_worker(bootstrap: str, client_id: str, metrics: list[str], connections: int = 8,
                              software: str = "kio-tests") -> None:
    """Every worker follows the store on its own (a ZooKeeper watch, a file's poll): before a
    client that asks once at start connects, wait until fresh connections (spread over the
    workers by the kernel) all see the subscription."""
    def seen() -> bool:
        for _ in range(connections):
            with KioClient(bootstrap, client_id=client_id) as client:
                client.call(18, 3, ApiVersionsRequest(client_software_name=software, client_software_version="1"))
                if list(get(client, uuid.UUID(int=0)).requested_metrics) != metrics:
                    return False
        return True

    wait_until(seen, 10, f"every worker to see the subscription for {client_id}", interval=0.1)


def test_subscriptions_are_set_described_listed_and_bad_ones_refused_whole(broker: Any) -> None:
    with KioClient(broker.bootstrap) as client:
        ok = alter(client, "sub-a", ("metrics", SET, "org.apache.kafka.producer."), ("interval.ms", SET, "1000"),
                   ("match", SET, "client_id=app-.*"))
        assert ok.error_code == 0, ok.error_message
        code, configs = describe(client, "sub-a")
        assert code == 0
        assert configs == {"metrics": ("org.apache.kafka.producer.", 7), "interval.ms": ("1000", 7),
                           "match": ("client_id=app-.*", 7)}
        assert "sub-a" in listed(client)
        for ops, expected, message in [
            ((("interval.ms", SET, "-5"),), INVALID_REQUEST, "interval must be between 100 and 3600000"),
            ((("metrics", SET, "x."), ("colour", SET, "red")), INVALID_REQUEST, "Unknown client metrics configuration"),
            ((("metrics", SET, "x."), ("match", SET, "client_id=(oops")), INVALID_CONFIG,
             "Illegal client matching pattern"),
        ]:
            refused = alter(client, "sub-a", *ops)
            assert (refused.error_code, message in (refused.error_message or "")) == (expected, True)
        assert describe(client, "sub-a")[1]["metrics"][0] == "org.apache.kafka.producer."  # nothing applied half
        # Only a key set: the others show their defaults (Kafka 4.4). One that does not exist
        # shows the defaults; the empty name is refused.
        assert alter(client, "sub-b", ("metrics", SET, "*")).error_code == 0
        assert describe(client, "sub-b") == (0, {"metrics": ("*", 7), "interval.ms": ("300000", 5), "match": ("", 5)})
        alter(client, "sub-b", ("metrics", DELETE, None))
        assert describe(client, "nobody") == (0, {"metrics": ("", 5), "interval.ms": ("300000", 5), "match": ("", 5)})
        assert describe(client, "")[0] == INVALID_REQUEST
        gone = alter(client, "sub-a", ("metrics", DELETE, None), ("interval.ms", DELETE, None), ("match", DELETE, None))
        assert gone.error_code == 0
        assert "sub-a" not in listed(client)


def get(client: KioClient, instance: uuid.UUID) -> Any:
    return client.call(71, 0, GetTelemetrySubscriptionsRequest(client_instance_id=instance))


def push(client: KioClient, instance: uuid.UUID, sub_id: int, metrics: bytes, compression: int = 0,
         terminating: bool = False) -> int:
    return int(client.call(72, 0, PushTelemetryRequest(client_instance_id=instance, subscription_id=i32(sub_id),
                                                        terminating=terminating, compression_type=i8(compression),
                                                        metrics=metrics)).error_code)


def test_raw_telemetry_requests_get_kafkas_codes_and_the_worker_survives(broker: Any) -> None:
    with KioClient(broker.bootstrap, client_id="raw-telemetry") as admin:
        assert alter(admin, "raw", ("metrics", SET, "*"), ("interval.ms", SET, "200"),
                     ("match", SET, "client_id=raw-telemetry")).error_code == 0
        try:
            with KioClient(broker.bootstrap, client_id="raw-telemetry") as client:
                # Every worker follows the store; this connection's may see the subscription a moment later.
                first = wait_until(lambda: (lambda got: got if list(got.requested_metrics) == ["*"] else None)(
                    get(client, uuid.UUID(int=0))), 10, "the subscription on this connection's worker")
                assert first.error_code == 0
                iid, sid = first.client_instance_id, int(first.subscription_id)
                assert iid != uuid.UUID(int=0)
                assert list(first.requested_metrics) == ["*"]
                assert first.push_interval.total_seconds() * 1000 == 200
                assert first.telemetry_max_bytes == MAX_BYTES and first.delta_temporality is True
                assert sorted(first.accepted_compression_types) == [1, 2, 3, 4]
                assert get(client, iid).error_code == THROTTLED  # a second Get within the interval
                assert push(client, iid, sid + 1, b"") == UNKNOWN_SUBSCRIPTION
                time.sleep(0.25)
                assert push(client, iid, sid, b"\xff" * 10) == INVALID_RECORD  # garbage, not OTLP
                assert push(client, iid, sid, b"") == THROTTLED  # too soon after the last push
                time.sleep(0.25)
                assert push(client, iid, sid, b"", compression=7) == UNSUPPORTED_COMPRESSION
                time.sleep(0.25)
                assert push(client, iid, sid, b"x" * (MAX_BYTES + 1)) == TOO_LARGE
                time.sleep(0.25)
                assert push(client, uuid.UUID(int=0), sid, b"") == INVALID_REQUEST
                assert push(client, iid, sid, b"", terminating=True) == 0
                assert push(client, iid, sid, b"") == INVALID_REQUEST  # after terminating
                # The same connection still serves: a new instance gets its subscription.
                assert get(client, uuid.UUID(int=0)).error_code == 0
        finally:
            alter(admin, "raw", ("metrics", DELETE, None), ("interval.ms", DELETE, None), ("match", DELETE, None))


def test_a_librdkafka_producer_pushes_and_its_metrics_are_scraped(broker: Any) -> None:
    from confluent_kafka import Producer

    with KioClient(broker.bootstrap) as admin:
        assert alter(admin, "producers", ("metrics", SET, "org.apache.kafka.producer."), ("interval.ms", SET, "500"),
                     ("match", SET, "client_id=telemetry-app")).error_code == 0
    wait_seen_by_every_worker(broker.bootstrap, "telemetry-app", ["org.apache.kafka.producer."])
    producer = Producer({"bootstrap.servers": broker.bootstrap, "client.id": "telemetry-app",
                         "enable.metrics.push": True})
    try:
        def pushed() -> list[Any]:
            for i in range(5):
                producer.produce("telemetry-topic", f"m{i}".encode())
            producer.poll(0.2)
            return [key for key in scrape(broker) if key[0].startswith("org_apache_kafka_producer")
                    and any(label == "client_instance_id" for label, _ in key[1])]

        found = wait_until(pushed, 30, "the producer's pushed metrics on /metrics", interval=0.5)
        assert found
    finally:
        producer.flush(10)
