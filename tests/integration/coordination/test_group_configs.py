"""Per-group configs (ConfigResource GROUP, Kafka 4.4's GroupConfig) on a real broker, with
both coordination backends: raw DescribeConfigs / IncrementalAlterConfigs / AlterConfigs
(kio), the store they write (group-configs.json, or /config/groups and /config/changes in
ZooKeeper), bad input answered with Kafka's codes, and a librdkafka member with
``group.protocol=consumer`` whose group's consumer.session.timeout.ms, set by config, is the
one the coordinator fences it by once it is frozen (SIGSTOP).

Brokers here lower Kafka's floors (group.consumer.min.session.timeout.ms=1000,
group.consumer.min.heartbeat.interval.ms=100) so a group may ask for a short session, and set
group.consumer.session.timeout.ms=30000 so the broker's own value shows as
STATIC_BROKER_CONFIG. Every broker is stopped by its PID by the harness; every wait is bounded.
"""

from __future__ import annotations

import os
import signal
import time
import uuid
from pathlib import Path
from typing import Any, Callable

import orjson
import pytest
from kio.schema.errors import ErrorCode

from tests.integration.conftest import Broker, start_cluster_broker, wait_until
from tests.integration.coordination.test_consumer_protocol import beat
from tests.integration.coordination.test_group_protocol import request
from tests.integration.coordination.test_groups import create_topic, members  # noqa: F401  (fixture)
from tests.integration.kio_client import KioClient

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

DESCRIBE, ALTER, INCREMENTAL, CONSUMER_DESCRIBE = 32, 33, 44, 69
GROUP = 32  # ConfigResource.Type.GROUP
SET, DELETE, APPEND = 0, 1, 2
STATIC_BROKER_CONFIG, DEFAULT_CONFIG, GROUP_CONFIG = 4, 5, 8
TYPE_STRING, TYPE_INT = 2, 3

SETTINGS = {"group.consumer.min.session.timeout.ms": 1000, "group.consumer.min.heartbeat.interval.ms": 100,
            "group.consumer.session.timeout.ms": 30000, "group.initial.rebalance.delay.ms": 0,
            "offsets.topic.num.partitions": 3}

# Kafka 4.4's non-internal group config keys, which DescribeConfigs lists for any group.
DESCRIBED = {"consumer.session.timeout.ms", "consumer.heartbeat.interval.ms", "consumer.assignment.interval.ms",
             "share.session.timeout.ms", "share.heartbeat.interval.ms", "share.record.lock.duration.ms",
             "share.delivery.count.limit", "share.partition.max.record.locks", "share.auto.offset.reset",
             "share.isolation.level", "share.renew.acknowledge.enable", "share.assignment.interval.ms",
             "streams.session.timeout.ms", "streams.heartbeat.interval.ms", "streams.num.standby.replicas",
             "streams.initial.rebalance.delay.ms", "streams.assignment.interval.ms",
             "streams.rack.aware.assignment.tags", "streams.assignor.name", "errors.deadletterqueue.topic.name",
             "errors.deadletterqueue.copy.record.enable"}


# ---------------------------------------------------------------------- raw requests
def describe(client: KioClient, *groups: str, keys: list[str] | None = None) -> list[Any]:
    answer = client.call(DESCRIBE, 4, request(DESCRIBE, 4, resources=[
        {"resource_type": GROUP, "resource_name": g, "configuration_keys": keys} for g in groups],
        include_synonyms=True, include_documentation=True))
    return list(answer.results)


def entries(client: KioClient, group: str) -> dict[str, Any]:
    [result] = describe(client, group)
    assert result.error_code == ErrorCode.none, result
    return {entry.name: entry for entry in result.configs}


def incremental(client: KioClient, group: str, ops: list[tuple[str, int, str | None]],
                validate_only: bool = False) -> tuple[int, str | None]:
    answer = client.call(INCREMENTAL, 1, request(INCREMENTAL, 1, validate_only=validate_only, resources=[
        {"resource_type": GROUP, "resource_name": group,
         "configs": [{"name": n, "config_operation": op, "value": v} for n, op, v in ops]}]))
    [response] = answer.responses
    return int(response.error_code), response.error_message


def alter(client: KioClient, group: str, configs: dict[str, str]) -> tuple[int, str | None]:
    answer = client.call(ALTER, 2, request(ALTER, 2, validate_only=False, resources=[
        {"resource_type": GROUP, "resource_name": group,
         "configs": [{"name": n, "value": v} for n, v in configs.items()]}]))
    [response] = answer.responses
    return int(response.error_code), response.error_message


# ---------------------------------------------------------------------- the two backends
@pytest.fixture(params=["local", pytest.param("zookeeper", marks=pytest.mark.zookeeper)])
def configured(request: pytest.FixtureRequest, broker_factory: Callable[..., Broker]) -> tuple[Broker, Callable[[str], Any]]:
    """A broker of either backend, and a reader of a group's stored overrides as that backend
    keeps them (the JSON file, or the znode)."""
    if request.param == "local":
        broker = broker_factory(workers=2, overrides=SETTINGS)

        def stored_local(group: str) -> Any:
            path = Path(broker.log_dir) / "group-configs.json"
            return orjson.loads(path.read_bytes())["groups"].get(group) if path.exists() else None

        return broker, stored_local
    from kazoo.client import KazooClient

    zk_connect = request.getfixturevalue("zk_connect")
    broker = start_cluster_broker(broker_factory, zk_connect, node_id=1, workers=2, settings=SETTINGS)
    client = KazooClient(hosts=zk_connect)
    client.start(timeout=10)
    request.addfinalizer(lambda: (client.stop(), client.close()))

    def stored_zookeeper(group: str) -> Any:
        found = client.exists(f"/config/groups/{group}")
        if not found:
            return None
        data, _ = client.get(f"/config/groups/{group}")
        doc = orjson.loads(data)
        changes = [orjson.loads(client.get(f"/config/changes/{name}")[0]) for name in client.get_children("/config/changes")]
        assert {"version": 2, "entity_path": f"groups/{group}"} in changes
        assert doc["version"] == 1
        return doc["config"]

    return broker, stored_zookeeper


def test_describe_alter_and_the_store(configured: tuple[Broker, Callable[[str], Any]]) -> None:
    broker, stored = configured
    group = f"gc-{uuid.uuid4().hex[:8]}"
    with KioClient(broker.bootstrap) as client:
        # A group need not exist: it has every key, at the broker's values.
        before = entries(client, group)
        assert set(before) == DESCRIBED
        session = before["consumer.session.timeout.ms"]
        assert (session.value, session.config_source, session.config_type, session.read_only) == (
            "30000", STATIC_BROKER_CONFIG, TYPE_INT, False)
        assert [(s.name, s.value, s.source) for s in session.synonyms] == [
            ("group.consumer.session.timeout.ms", "30000", STATIC_BROKER_CONFIG),
            ("group.consumer.session.timeout.ms", "45000", DEFAULT_CONFIG)]
        assert session.documentation == "The timeout to detect client failures when using the consumer group protocol."
        reset = before["share.auto.offset.reset"]
        assert (reset.value, reset.config_source, reset.config_type) == ("latest", DEFAULT_CONFIG, TYPE_STRING)
        assert [(s.name, s.source) for s in reset.synonyms] == [("share.auto.offset.reset", DEFAULT_CONFIG)]
        assert before["share.record.lock.duration.ms"].value == "30000"

        assert incremental(client, group, [("consumer.session.timeout.ms", SET, "3000"),
                                           ("consumer.heartbeat.interval.ms", SET, "500"),
                                           ("share.isolation.level", SET, "read_committed")]) == (0, None)
        assert stored(group) == {"consumer.session.timeout.ms": "3000", "consumer.heartbeat.interval.ms": "500",
                                 "share.isolation.level": "read_committed"}
        # Every connection may be served by the other worker: both answer the stored values.
        for _ in range(4):
            with KioClient(broker.bootstrap) as other:
                after = entries(other, group)
                assert (after["consumer.session.timeout.ms"].value, after["consumer.session.timeout.ms"].config_source) == (
                    "3000", GROUP_CONFIG)
                assert [s.source for s in after["consumer.session.timeout.ms"].synonyms] == [
                    GROUP_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG]
                assert after["share.isolation.level"].value == "read_committed"
        only = describe(client, group, keys=["consumer.heartbeat.interval.ms"])[0].configs
        assert [(e.name, e.value, e.config_source) for e in only] == [("consumer.heartbeat.interval.ms", "500", GROUP_CONFIG)]

        # validate_only checks and writes nothing; DELETE goes back to the broker's value.
        assert incremental(client, group, [("share.auto.offset.reset", SET, "earliest")], validate_only=True) == (0, None)
        assert incremental(client, group, [("share.isolation.level", DELETE, None)]) == (0, None)
        assert stored(group) == {"consumer.session.timeout.ms": "3000", "consumer.heartbeat.interval.ms": "500"}
        assert entries(client, group)["share.isolation.level"].config_source == DEFAULT_CONFIG
        # AlterConfigs replaces the whole set.
        assert alter(client, group, {"share.auto.offset.reset": "by_duration:PT1H"}) == (0, None)
        assert stored(group) == {"share.auto.offset.reset": "by_duration:PT1H"}
        assert entries(client, group)["consumer.session.timeout.ms"].config_source == STATIC_BROKER_CONFIG


def test_bad_input_is_refused_with_kafkas_codes(configured: tuple[Broker, Callable[[str], Any]]) -> None:
    broker, stored = configured
    group = f"gc-bad-{uuid.uuid4().hex[:8]}"
    with KioClient(broker.bootstrap) as client:
        # The broker's heartbeat interval is 5000: the group's session must stay above it.
        assert incremental(client, group, [("consumer.session.timeout.ms", SET, "3000")]) == (
            ErrorCode.invalid_config, "consumer.session.timeout.ms must be greater than consumer.heartbeat.interval.ms")
        assert incremental(client, group, [("consumer.session.timeout.ms", SET, "8000")]) == (0, None)
        refusals = [
            ([("consumer.nope", SET, "1")], ErrorCode.invalid_config, "Unknown group config name: consumer.nope"),
            ([("consumer.session.timeout.ms", SET, "abc")], ErrorCode.invalid_config, "Not a number of type INT"),
            ([("consumer.session.timeout.ms", SET, "999999")], ErrorCode.invalid_config,
             "consumer.session.timeout.ms must be in the range 1000 to 60000 inclusive."),
            ([("consumer.heartbeat.interval.ms", SET, "9000")], ErrorCode.invalid_config,
             "consumer.session.timeout.ms must be greater than consumer.heartbeat.interval.ms"),
            ([("share.isolation.level", SET, "dirty")], ErrorCode.invalid_config, "String must be one of"),
            ([("share.record.lock.duration.ms", SET, "500")], ErrorCode.invalid_config, "Value must be at least 1000"),
            ([("consumer.session.timeout.ms", APPEND, "1")], ErrorCode.invalid_config,
             "Can't APPEND to key consumer.session.timeout.ms because its type is not LIST."),
            ([("share.auto.offset.reset", SET, None)], ErrorCode.invalid_config, "Null value not supported"),
            ([("share.auto.offset.reset", SET, "latest"), ("share.auto.offset.reset", DELETE, None)],
             ErrorCode.invalid_request, "duplicate config keys"),
        ]
        for ops, code, message in refusals:
            got_code, got_message = incremental(client, group, ops)
            assert got_code == code and message in (got_message or ""), (ops, got_code, got_message)
        assert incremental(client, "", [("consumer.session.timeout.ms", SET, "3000")]) == (
            ErrorCode.invalid_request, "Default group resources are not allowed.")
        [empty] = describe(client, "")
        assert (empty.error_code, empty.error_message) == (ErrorCode.invalid_request, "Group name must not be empty")
        assert alter(client, group, {"share.delivery.count.limit": "50"})[0] == ErrorCode.invalid_config
        # Nothing refused was written.
        assert stored(group) == {"consumer.session.timeout.ms": "8000"}


@pytest.mark.parametrize("broker", [SETTINGS], indirect=True)
def test_the_configs_survive_a_restart(broker: Broker) -> None:
    group = f"gc-durable-{uuid.uuid4().hex[:8]}"
    with KioClient(broker.bootstrap) as client:
        assert incremental(client, group, [("share.record.lock.duration.ms", SET, "20000")]) == (0, None)
    broker.restart()
    with KioClient(broker.bootstrap) as client:
        lock = entries(client, group)["share.record.lock.duration.ms"]
        assert (lock.value, lock.config_source) == ("20000", GROUP_CONFIG)


# ---------------------------------------------------------------------- the coordinator uses them
@pytest.mark.parametrize("broker", [SETTINGS], indirect=True)
def test_a_frozen_consumer_member_is_fenced_after_its_groups_session_timeout(broker: Broker, members: Any) -> None:  # noqa: F811
    """The broker's session is 30 s; the group's, set by config, 3 s. A librdkafka member
    (group.protocol=consumer) frozen with SIGSTOP leaves the group within the group's timeout."""
    topic, group = f"gc-topic-{uuid.uuid4().hex[:6]}", f"gc-fence-{uuid.uuid4().hex[:6]}"
    create_topic(broker.bootstrap, topic, 2)
    with KioClient(broker.bootstrap) as client:
        assert incremental(client, group, [("consumer.session.timeout.ms", SET, "3000"),
                                           ("consumer.heartbeat.interval.ms", SET, "250")]) == (0, None)
        # The heartbeat interval the coordinator hands out is the group's: the coordinator
        # process reads it from its cache, which the store's watch refreshes.
        raw = f"{group}-raw"
        first = beat(client, 1, group_id=raw, member_id="raw-1", member_epoch=0, rebalance_timeout=30000,
                     subscribed_topic_names=[topic], topic_partitions=[])
        assert first.error_code == ErrorCode.none and first.heartbeat_interval.total_seconds() * 1000 == 5000

        def interval_ms() -> float:
            answer = beat(client, 1, group_id=raw, member_id="raw-1", member_epoch=first.member_epoch,
                          topic_partitions=None)
            assert answer.error_code == ErrorCode.none, answer
            return float(answer.heartbeat_interval.total_seconds() * 1000)

        assert incremental(client, raw, [("consumer.heartbeat.interval.ms", SET, "250")]) == (0, None)
        wait_until(lambda: interval_ms() == 250, 10, "the group's heartbeat interval handed out")

    member = members("confluent-consumer", broker.bootstrap, group, topic, 120)

    def described_members() -> list[Any]:
        with KioClient(broker.bootstrap) as client:
            answer = client.call(CONSUMER_DESCRIBE, 0, request(CONSUMER_DESCRIBE, 0, group_ids=[group],
                                                               include_authorized_operations=False))
            return list(answer.groups[0].members)

    wait_until(lambda: member.assignment() == [0, 1], 60, "the member assigned both partitions")
    assert len(described_members()) == 1
    os.kill(member.pid, signal.SIGSTOP)
    frozen = time.monotonic()
    try:
        wait_until(lambda: described_members() == [], 20, "the frozen member fenced")
        elapsed = time.monotonic() - frozen
        # Fenced by the group's 3 s session (a missed heartbeat at most before it), not the broker's 30 s.
        assert 2.0 <= elapsed <= 12.0, elapsed
    finally:
        member.kill()
