"""Kafka's rules for GetTelemetrySubscriptions and PushTelemetry (ClientMetricsManager), on a
controlled clock: ids, subscription ids, throttling, and the push checks in Kafka's order."""

from __future__ import annotations

import uuid

import pytest

from broker.protocol.errors import ErrorCode, KafkaError
from broker.telemetry.instances import ZERO_UUID, ClientInstances
from broker.telemetry.subscriptions import DEFAULT_INTERVAL_MS, Subscription, validate


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Table:
    def __init__(self) -> None:
        self.version = 0
        self.table: dict[str, Subscription] = {}

    def set(self, name: str, config: dict[str, str]) -> None:
        self.table = dict(self.table, **{name: validate(name, config)})
        self.version += 1

    def __call__(self) -> tuple[int, dict[str, Subscription]]:
        return self.version, self.table


ATTRS: dict[str, str | None] = {"client_id": "app-1", "client_software_name": "apache-kafka-java"}


def make() -> tuple[ClientInstances, Table, Clock]:
    table, clock = Table(), Clock()
    return ClientInstances(table, clock), table, clock


def code_of(fn: object, *args: object) -> int:
    with pytest.raises(KafkaError) as caught:
        fn(*args)  # type: ignore[operator]
    return int(caught.value.code)


def test_the_zero_uuid_gets_a_new_id_and_no_subscription_the_default_interval() -> None:
    instances, _table, _clock = make()
    first = instances.get_subscriptions(ZERO_UUID, ATTRS)
    second = instances.get_subscriptions(None, ATTRS)
    assert first.instance_id != ZERO_UUID and second.instance_id not in (ZERO_UUID, first.instance_id)
    assert first.metrics == () and first.interval_ms == DEFAULT_INTERVAL_MS


def test_matching_subscriptions_merge_and_the_id_follows_them() -> None:
    instances, table, clock = make()
    table.set("a", {"metrics": "org.apache.kafka.producer.", "interval.ms": "2000", "match": "client_id=app-.*"})
    table.set("b", {"metrics": "org.apache.kafka.consumer.", "interval.ms": "500"})
    table.set("c", {"metrics": "nothing.", "interval.ms": "100", "match": "client_id=other"})
    got = instances.get_subscriptions(ZERO_UUID, ATTRS)
    assert got.metrics == ("org.apache.kafka.consumer.", "org.apache.kafka.producer.")
    assert got.interval_ms == 500
    old_id = got.subscription_id
    clock.now += 1
    table.set("b", {"metrics": "*", "interval.ms": "500"})
    again = instances.get_subscriptions(got.instance_id, ATTRS)
    assert again.metrics == ("*",)
    assert again.subscription_id != old_id
    # The same subscriptions for another instance: another id (the instance id is hashed in).
    assert instances.get_subscriptions(ZERO_UUID, ATTRS).subscription_id != again.subscription_id


def test_gets_and_pushes_too_early_are_throttled() -> None:
    instances, table, clock = make()
    table.set("all", {"metrics": "*", "interval.ms": "1000"})
    got = instances.get_subscriptions(ZERO_UUID, ATTRS)
    iid, sid = got.instance_id, got.subscription_id
    assert code_of(instances.get_subscriptions, iid, ATTRS) == ErrorCode.throttling_quota_exceeded
    # The first push right after a Get is taken (clients jitter), the next one too early is not.
    instances.check_push(iid, ATTRS, sid, False, 0, 10, 100)
    clock.now += 0.5
    assert code_of(instances.check_push, iid, ATTRS, sid, False, 0, 10, 100) == ErrorCode.throttling_quota_exceeded
    clock.now += 0.6
    instances.check_push(iid, ATTRS, sid, False, 0, 10, 100)


def test_push_checks_in_kafkas_order() -> None:
    instances, table, clock = make()
    table.set("all", {"metrics": "*", "interval.ms": "100"})
    got = instances.get_subscriptions(ZERO_UUID, ATTRS)
    iid, sid = got.instance_id, got.subscription_id
    assert code_of(instances.check_push, ZERO_UUID, ATTRS, sid, False, 0, 1, 100) == ErrorCode.invalid_request
    assert code_of(instances.check_push, None, ATTRS, sid, False, 0, 1, 100) == ErrorCode.invalid_request
    assert code_of(instances.check_push, iid, ATTRS, sid + 1, False, 0, 1, 100) == ErrorCode.unknown_subscription_id
    clock.now += 1
    assert code_of(instances.check_push, iid, ATTRS, sid, False, 9, 1, 100) == ErrorCode.unsupported_compression_type
    clock.now += 1
    assert code_of(instances.check_push, iid, ATTRS, sid, False, 4, 101, 100) == ErrorCode.telemetry_too_large
    clock.now += 1
    instances.check_push(iid, ATTRS, sid, True, 4, 100, 100)  # terminating
    clock.now += 1
    assert code_of(instances.check_push, iid, ATTRS, sid, False, 0, 1, 100) == ErrorCode.invalid_request


def test_an_instance_first_seen_on_a_push_is_taken_when_its_id_matches() -> None:
    """Its connection moved to another worker: the subscription id is the same function."""
    one, table, _clock = make()
    table.set("all", {"metrics": "*", "interval.ms": "100"})
    got = one.get_subscriptions(ZERO_UUID, ATTRS)
    other = ClientInstances(table, Clock())
    assert other.check_push(got.instance_id, ATTRS, got.subscription_id, False, 0, 1, 100).instance_id == got.instance_id


def test_instances_are_bounded_and_expire() -> None:
    table, clock = Table(), Clock()
    instances = ClientInstances(table, clock, max_instances=3)
    ids = [instances.get_subscriptions(ZERO_UUID, ATTRS).instance_id for _ in range(5)]
    assert len(instances) == 3
    clock.now += 3 * DEFAULT_INTERVAL_MS / 1000 + 1
    assert set(instances.expire()) == set(ids[2:])
    assert len(instances) == 0
    assert isinstance(ids[0], uuid.UUID)


def test_client_instance_id_is_matched_in_kafkas_text() -> None:
    """Kafka's Uuid.toString (URL-safe base64), which a client's clientInstanceId() prints."""
    instances, table, _clock = make()
    iid = uuid.UUID("b16b0209-45b5-4854-b807-838ba39f84e0")
    table.set("one", {"metrics": "*", "match": "client_instance_id=sWsCCUW1SFS4B4OLo5-E4A"})
    assert instances.get_subscriptions(iid, ATTRS).metrics == ("*",)
    assert instances.get_subscriptions(ZERO_UUID, ATTRS).metrics == ()
