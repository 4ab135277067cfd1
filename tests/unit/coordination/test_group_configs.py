"""Group configs (coordination/group_config*.py): Kafka 4.4's keys and validation, both stores
(a real ZooKeeper, real files) and the reader's cache.

The expected messages and defaults are Kafka 4.4's (GroupConfig, GroupCoordinatorConfig,
ShareGroupConfig, read from the 4.4.0 jars); the znodes are Kafka's config entity layout:
/config/groups/<sanitized group> {"version":1,"config":{...}} and a notification
{"version":2,"entity_path":"groups/<sanitized group>"} under /config/changes.
"""

from __future__ import annotations

import queue
import time
from pathlib import Path

import orjson
import pytest

from coordination.credentials import CHANGES_PATH
from coordination.group_config_keys import KEYS, BrokerValues, InvalidGroupConfig, broker_default, parse, validate
from coordination.group_config_store import (
    FILE_NAME,
    GROUPS_PATH,
    GroupConfigStore,
    LocalGroupConfigs,
    ZooKeeperGroupConfigs,
    group_znode_name,
)
from coordination.group_configs import GroupConfigs
from tests.unit.coordination.store_helpers import WAIT, MakeClient, next_call, run_in_threads, znode_json

pytestmark = pytest.mark.timeout(60)

KAFKA = BrokerValues()  # every broker setting at Kafka's default
LOW = BrokerValues({"group.consumer.min.session.timeout.ms": 1000, "group.consumer.min.heartbeat.interval.ms": 100})


def refused(overrides: dict[str, str], broker: BrokerValues = KAFKA) -> str:
    with pytest.raises(InvalidGroupConfig) as caught:
        validate(overrides, broker)
    return str(caught.value)


# ----------------------------------------------------------------------------- keys
def test_the_keys_are_kafka_4_4s_in_its_order() -> None:
    assert list(KEYS)[:5] == ["consumer.session.timeout.ms", "consumer.heartbeat.interval.ms",
                              "consumer.assignment.interval.ms", "consumer.assignor.offload.enable",
                              "share.session.timeout.ms"]
    assert len(KEYS) == 27
    internal = {name for name, key in KEYS.items() if key.internal}
    assert internal == {"consumer.assignor.offload.enable", "share.assignor.offload.enable",
                        "streams.assignor.offload.enable", "streams.task.offset.interval.ms",
                        "streams.num.warmup.replicas", "streams.acceptable.recovery.lag"}
    assert KEYS["share.auto.offset.reset"].broker_key is None
    assert KEYS["consumer.session.timeout.ms"].broker_key == "group.consumer.session.timeout.ms"


def test_a_group_without_overrides_has_the_brokers_values() -> None:
    broker = BrokerValues({"group.consumer.session.timeout.ms": 7000, "group.streams.assignors": "sticky,other"})
    assert broker_default("consumer.session.timeout.ms", broker) == 7000
    assert broker_default("share.record.lock.duration.ms", broker) == 30_000
    assert broker_default("share.auto.offset.reset", broker) == "latest"
    assert broker_default("share.isolation.level", broker) == "read_uncommitted"
    assert broker_default("share.renew.acknowledge.enable", broker) is True
    assert broker_default("streams.assignor.name", broker) == "sticky"


def test_values_are_parsed_by_type() -> None:
    assert parse("consumer.session.timeout.ms", " 6000 ") == 6000
    assert parse("errors.deadletterqueue.copy.record.enable", "TRUE") is True
    assert parse("streams.rack.aware.assignment.tags", " zone , rack ") == "zone,rack"
    assert parse("share.auto.offset.reset", "by_duration:PT1H30M") == "by_duration:PT1H30M"
    assert parse("share.isolation.level", "read_committed") == "read_committed"


def test_kafkas_refusals_and_messages() -> None:
    assert refused({"consumer.nope": "1"}) == "Unknown group config name: consumer.nope"
    assert refused({"consumer.session.timeout.ms": "abc"}) == (
        "Invalid value abc for configuration consumer.session.timeout.ms: Not a number of type INT")
    assert refused({"share.record.lock.duration.ms": "999"}) == (
        "Invalid value 999 for configuration share.record.lock.duration.ms: Value must be at least 1000")
    assert refused({"consumer.session.timeout.ms": "6000"}) == (
        "consumer.session.timeout.ms must be in the range 45000 to 60000 inclusive.")
    assert refused({"consumer.heartbeat.interval.ms": "20000"}) == (
        "consumer.heartbeat.interval.ms must be in the range 5000 to 15000 inclusive.")
    assert refused({"share.delivery.count.limit": "11"}) == (
        "share.delivery.count.limit must be in the range 2 to 10 inclusive.")
    assert refused({"streams.num.standby.replicas": "3"}) == "streams.num.standby.replicas must be less than or equal to 2"
    assert refused({"streams.task.offset.interval.ms": "100"}) == (
        "streams.task.offset.interval.ms must be greater than or equal to 15000")
    assert refused({"share.isolation.level": "dirty"}) == (
        "Invalid value dirty for configuration share.isolation.level: String must be one of: read_committed, "
        "read_uncommitted")
    assert "share.auto.offset.reset" in refused({"share.auto.offset.reset": "newest"})
    assert "Negative" in refused({"share.auto.offset.reset": "by_duration:-PT1H"})
    assert refused({"streams.assignor.name": "mine"}) == (
        "streams.assignor.name 'mine' is not a registered task assignor. Registered assignors are: [sticky].")
    assert refused({"errors.deadletterqueue.topic.name": "__dlq"}) == (
        "errors.deadletterqueue.topic.name: DLQ topic name must not start with '__'")
    assert refused({"streams.rack.aware.assignment.tags": "a,b,a"}) == (
        "streams.rack.aware.assignment.tags must not contain duplicate tag keys.")


def test_the_session_must_outlast_the_heartbeat_either_side_from_the_broker() -> None:
    # Both bounded by the broker's (lowered) minimums; the pair checked with the broker's
    # heartbeat interval (5000) when only the session is set.
    assert refused({"consumer.session.timeout.ms": "5000"}, LOW) == (
        "consumer.session.timeout.ms must be greater than consumer.heartbeat.interval.ms")
    assert refused({"consumer.session.timeout.ms": "3000", "consumer.heartbeat.interval.ms": "3000"}, LOW) == (
        "consumer.session.timeout.ms must be greater than consumer.heartbeat.interval.ms")
    assert validate({"consumer.session.timeout.ms": "3000", "consumer.heartbeat.interval.ms": "500"}, LOW) == {
        "consumer.session.timeout.ms": 3000, "consumer.heartbeat.interval.ms": 500}


# ----------------------------------------------------------------------------- stores
def test_local_store_round_trip_on_a_real_file(tmp_path: Path) -> None:
    store = LocalGroupConfigs(str(tmp_path))
    try:
        assert store.all() == {} and store.get("g") == {}
        assert store.update("g/1", lambda c: {**c, "consumer.session.timeout.ms": "50000"}) == {
            "consumer.session.timeout.ms": "50000"}
        store.update("g/1", lambda c: {**c, "share.isolation.level": "read_committed"})
        store.update("other", lambda c: {**c, "share.auto.offset.reset": "earliest"})
        doc = orjson.loads((tmp_path / FILE_NAME).read_bytes())
        assert doc == {"version": 1, "groups": {
            "g/1": {"consumer.session.timeout.ms": "50000", "share.isolation.level": "read_committed"},
            "other": {"share.auto.offset.reset": "earliest"}}}
        assert store.update("other", lambda c: {}) == {}
        assert set(store.all()) == {"g/1"}
        # Another store on the same directory (another process of the broker) reads the same.
        assert LocalGroupConfigs(str(tmp_path)).get("g/1")["share.isolation.level"] == "read_committed"
    finally:
        store.close()


def test_local_writers_never_lose_each_others_keys(tmp_path: Path) -> None:
    stores = [LocalGroupConfigs(str(tmp_path)) for _ in range(4)]
    keys = ["consumer.session.timeout.ms", "share.session.timeout.ms", "streams.session.timeout.ms",
            "share.record.lock.duration.ms"]
    errors = run_in_threads(lambda i: stores[i].update("g", lambda c: {**c, keys[i]: str(50000 + i)}), range(4))
    assert errors == []
    assert stores[0].get("g") == {keys[i]: str(50000 + i) for i in range(4)}


@pytest.mark.zookeeper
def test_zookeeper_store_writes_kafkas_znodes(make_client: MakeClient) -> None:
    client = make_client()
    store = ZooKeeperGroupConfigs(client)
    try:
        assert store.all() == {}
        store.update("orders/eu", lambda c: {**c, "consumer.session.timeout.ms": "50000"})
        znode = f"{GROUPS_PATH}/orders%2Feu"
        assert group_znode_name("orders/eu") == "orders%2Feu" and group_znode_name(".") == "%2E"
        assert znode_json(client, znode) == {"version": 1, "config": {"consumer.session.timeout.ms": "50000"}}
        changes = sorted(client.get_children(CHANGES_PATH))
        assert len(changes) == 1 and changes[0].startswith("config_change_")
        assert znode_json(client, f"{CHANGES_PATH}/{changes[0]}") == {"version": 2, "entity_path": "groups/orders%2Feu"}
        assert store.all() == {"orders/eu": {"consumer.session.timeout.ms": "50000"}}
        # Removing the last key keeps the znode, empty, as Kafka does; readers skip it.
        store.update("orders/eu", lambda c: {})
        assert znode_json(client, znode) == {"version": 1, "config": {}}
        assert store.all() == {} and store.get("orders/eu") == {}
        assert len(client.get_children(CHANGES_PATH)) == 2
    finally:
        store.close()


@pytest.mark.zookeeper
def test_zookeeper_concurrent_writers_and_the_watch(make_client: MakeClient) -> None:
    stores = [ZooKeeperGroupConfigs(make_client()) for _ in range(3)]
    calls: queue.Queue[str] = queue.Queue()
    stores[0].watch(lambda: calls.put("changed"))
    assert next_call(calls) == "changed"  # the registration's own call
    keys = ["consumer.session.timeout.ms", "share.session.timeout.ms", "streams.session.timeout.ms"]
    errors = run_in_threads(lambda i: stores[i].update("g", lambda c: {**c, keys[i]: "50000"}), range(3))
    assert errors == []
    assert stores[1].get("g") == {key: "50000" for key in keys}
    assert next_call(calls) == "changed"
    for store in stores:
        store.close()


# ----------------------------------------------------------------------------- the reader
def wait_for(check: object, timeout: float = WAIT) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if callable(check) and check():
            return
        time.sleep(0.02)
    raise AssertionError("not seen in time")


def reader_round_trip(writer_store: GroupConfigStore, reader_store: GroupConfigStore) -> None:
    broker = BrokerValues({"group.consumer.session.timeout.ms": 50_000}, frozenset({"group.consumer.session.timeout.ms"}))
    writer, reader = GroupConfigs(writer_store, broker), GroupConfigs(reader_store, broker)
    writer.start()
    reader.start()
    try:
        assert reader.group_config("g", "consumer.session.timeout.ms") == 50_000
        assert reader.group_config("g", "share.auto.offset.reset") == "latest"
        writer.update("g", lambda c: {**c, "consumer.session.timeout.ms": "55000", "share.auto.offset.reset": "earliest"})
        # The writer reads its own write at once; the other process once the watch fires.
        assert writer.group_config("g", "consumer.session.timeout.ms") == 55_000
        wait_for(lambda: reader.group_config("g", "consumer.session.timeout.ms") == 55_000)
        assert reader.group_config("g", "share.auto.offset.reset") == "earliest"
        assert reader.group_config("other", "consumer.session.timeout.ms") == 50_000
        writer.update("g", lambda c: {})
        wait_for(lambda: reader.group_config("g", "consumer.session.timeout.ms") == 50_000)
        with pytest.raises(KeyError):
            reader.group_config("g", "no.such.key")
    finally:
        writer.close()
        reader.close()


def test_a_group_runs_with_its_override_capped_to_the_brokers_current_bounds(tmp_path: Path) -> None:
    """Set under lowered floors, then read by a broker with Kafka's (45 s .. 60 s): the group
    runs with 45 s (Kafka's GroupConfig.evaluate), while its stored text stays 3000."""
    store = LocalGroupConfigs(str(tmp_path))
    lowered, kafka = GroupConfigs(store, LOW), GroupConfigs(store, KAFKA)
    try:
        lowered.update("g", lambda c: {"consumer.session.timeout.ms": "3000", "share.delivery.count.limit": "10"})
        kafka.start()
        assert kafka.group_config("g", "consumer.session.timeout.ms") == 45_000
        assert kafka.group_config("g", "share.delivery.count.limit") == 10
        assert kafka.overrides("g") == {"consumer.session.timeout.ms": "3000", "share.delivery.count.limit": "10"}
        assert lowered.group_config("g", "consumer.session.timeout.ms") == 3000
    finally:
        kafka.close()
        store.close()


def test_reader_follows_another_process_local(tmp_path: Path) -> None:
    first, second = LocalGroupConfigs(str(tmp_path)), LocalGroupConfigs(str(tmp_path))
    try:
        reader_round_trip(first, second)
    finally:
        first.close()
        second.close()


@pytest.mark.zookeeper
def test_reader_follows_another_process_zookeeper(make_client: MakeClient) -> None:
    first, second = ZooKeeperGroupConfigs(make_client()), ZooKeeperGroupConfigs(make_client())
    try:
        reader_round_trip(first, second)
    finally:
        first.close()
        second.close()
