"""The consumer group protocol (KIP-848) on a real broker: raw ConsumerGroupHeartbeat and
ConsumerGroupDescribe requests (every advertised version, bad input), librdkafka consumers with
``group.protocol=consumer``, and a group that carries on, with no rebalance, after its
coordinator process is killed -9."""

from __future__ import annotations

import os
import signal
import time
import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from kio.schema.errors import ErrorCode

from tests.integration.clients import confluent_create_topic, confluent_produce, make_records
from tests.integration.conftest import Broker, shared_broker, wait_until
from tests.integration.coordination.test_group_protocol import request
from tests.integration.coordination.test_groups import members  # noqa: F401  (the member processes fixture)
from tests.integration.kio_client import KioClient

CONSUMER_BROKER = {"group.consumer.heartbeat.interval.ms": 300, "group.consumer.session.timeout.ms": 6000,
                   "offsets.topic.num.partitions": 3}
pytestmark = pytest.mark.integration

HEARTBEAT, DESCRIBE, COMMIT, FETCH, METADATA, LIST_GROUPS, DESCRIBE_GROUPS = 68, 69, 8, 9, 3, 16, 15


@pytest.fixture(scope="module")
def broker(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """One broker for the tests that each keep to topics and groups of their own; the test that
    kills the coordinator process starts a broker of its own (``own_broker``)."""
    request.param = dict(CONSUMER_BROKER)  # type: ignore[attr-defined]
    yield from shared_broker(request, tmp_path_factory)


@pytest.fixture
def own_broker(broker_factory: Any) -> Broker:
    return broker_factory(workers=2, overrides=dict(CONSUMER_BROKER))


def beat(client: KioClient, version: int = 1, **fields: Any) -> Any:
    for name, default in (("rebalance_timeout", -1), ("instance_id", None), ("rack_id", None),
                          ("subscribed_topic_names", None), ("subscribed_topic_regex", None),
                          ("server_assignor", None), ("topic_partitions", None)):
        fields.setdefault(name, default)
    return client.call(HEARTBEAT, version, request(HEARTBEAT, version, **fields))


def describe(client: KioClient, group: str, version: int = 1) -> Any:
    answer = client.call(DESCRIBE, version, request(DESCRIBE, version, group_ids=[group], include_authorized_operations=True))
    return answer.groups[0]


def topic_id(client: KioClient, name: str) -> uuid.UUID:
    answer = client.call(METADATA, 12, request(METADATA, 12, topics=[{"name": name, "topic_id": uuid.UUID(int=0)}],
                                               allow_auto_topic_creation=False, include_topic_authorized_operations=False))
    return answer.topics[0].topic_id


def held(answer: Any) -> dict[uuid.UUID, list[int]]:
    return {t.topic_id: sorted(int(p) for p in t.partitions) for t in answer.assignment.topic_partitions}


@pytest.mark.parametrize("version", [0, 1])
def test_raw_heartbeats_join_leave_and_bad_input_changes_nothing(broker: Broker, version: int) -> None:
    name = f"cgh-{version}"
    confluent_create_topic(broker.bootstrap, name, 4)
    group = f"raw-{version}"
    with KioClient(broker.bootstrap) as client:
        tid = topic_id(client, name)
        # Kafka's Java consumer resolves its assignment's topic ids with an empty name.
        by_id = client.call(METADATA, 12, request(METADATA, 12, topics=[{"name": "", "topic_id": tid}],
                                                  allow_auto_topic_creation=False, include_topic_authorized_operations=False))
        assert [(t.error_code, t.name, t.topic_id) for t in by_id.topics] == [(ErrorCode.none, name, tid)]
        first = beat(client, version, group_id=group, member_id="" if version == 0 else "m-1", member_epoch=0,
                     rebalance_timeout=30000, subscribed_topic_names=[name], topic_partitions=[])
        assert first.error_code == ErrorCode.none and first.member_epoch == 1 and first.member_id
        assert held(first) == {tid: [0, 1, 2, 3]}
        assert 0 < first.heartbeat_interval.total_seconds() * 1000 <= 300
        member = first.member_id
        owned = [{"topic_id": tid, "partitions": [0, 1, 2, 3]}]
        steady = beat(client, version, group_id=group, member_id=member, member_epoch=1, topic_partitions=owned)
        assert (steady.error_code, steady.member_epoch, steady.assignment) == (ErrorCode.none, 1, None)
        before = describe(client, group)
        assert (before.group_state, before.group_epoch, before.assignment_epoch, before.assignor_name) == \
            ("Stable", 1, 1, "uniform")
        assert [(m.member_id, m.member_epoch) for m in before.members] == [(member, 1)]

        bad = [
            (dict(member_id=member, member_epoch=9, topic_partitions=owned), ErrorCode.fenced_member_epoch),
            (dict(member_id="nobody", member_epoch=1, topic_partitions=[]), ErrorCode.unknown_member_id),
            (dict(member_id=member, member_epoch=0, rebalance_timeout=30000, subscribed_topic_names=[name],
                  topic_partitions=owned), ErrorCode.invalid_request),
            (dict(member_id=member, member_epoch=0, rebalance_timeout=30000, subscribed_topic_names=[name],
                  topic_partitions=[], server_assignor="sticky"), ErrorCode.unsupported_assignor),
            (dict(member_id=member, member_epoch=-7), ErrorCode.invalid_request),
            (dict(member_id=member, member_epoch=1, instance_id=""), ErrorCode.invalid_request),
        ]
        if version >= 1:
            bad.append((dict(member_id=member, member_epoch=0, rebalance_timeout=30000, subscribed_topic_regex="(?<=x)y",
                             topic_partitions=[]), ErrorCode.invalid_regular_expression))
        for fields, code in bad:
            answer = beat(client, version, group_id=group, **fields)
            assert answer.error_code == code, (fields, answer)
            assert answer.error_message
        assert beat(client, version, group_id="", member_id="x", member_epoch=1).error_code == ErrorCode.invalid_request
        after = describe(client, group)
        assert (after.group_state, after.group_epoch, after.assignment_epoch) == (before.group_state, 1, 1)
        assert [(m.member_id, m.member_epoch) for m in after.members] == [(member, 1)]

        assert describe(client, "no-such-group").error_code == ErrorCode.group_id_not_found
        v0 = describe(client, group, version=0)  # v0 is v1 without the members' type
        assert (v0.group_state, v0.group_epoch, [m.member_id for m in v0.members]) == ("Stable", 1, [member])
        listed = client.call(LIST_GROUPS, 5, request(LIST_GROUPS, 5, states_filter=[], types_filter=["consumer"]))
        assert (group, "Stable", "consumer") in {(g.group_id, g.group_state, g.group_type) for g in listed.groups}
        # DescribeGroups (the classic protocol's) does not describe a consumer group.
        classic = client.call(DESCRIBE_GROUPS, 6, request(DESCRIBE_GROUPS, 6, groups=[group],
                                                         include_authorized_operations=False))
        assert classic.groups[0].error_code == ErrorCode.group_id_not_found

        left = beat(client, version, group_id=group, member_id=member, member_epoch=-1)
        assert (left.error_code, left.member_epoch) == (ErrorCode.none, -1)
        empty = describe(client, group)
        assert (empty.group_state, empty.group_epoch, list(empty.members)) == ("Empty", 2, [])


def _consumer(broker: Broker, group: str, **extra: Any) -> Consumer:
    return Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "group.protocol": "consumer",
                     "auto.offset.reset": "earliest", "enable.auto.commit": False, **extra})


def _poll_all(consumers: list[Consumer], want: int, seen: dict[tuple[int, int], bytes], timeout: float) -> None:
    """Poll each consumer in turn until ``seen`` holds ``want`` distinct records; commit each batch."""
    deadline = time.monotonic() + timeout
    while len(seen) < want and time.monotonic() < deadline:
        for consumer in consumers:
            messages = consumer.consume(200, 0.1)
            for message in messages:
                assert message.error() is None, message.error()
                key = (message.partition(), message.offset())
                assert key not in seen, f"record {key} read twice"
                seen[key] = message.value()
            if messages:
                consumer.commit(asynchronous=False)
    assert len(seen) == want, f"read {len(seen)} of {want}"


def _committed(broker: Broker, group: str, topic: str, partitions: int) -> list[int]:
    probe = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    try:
        return [tp.offset for tp in probe.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=10)]
    finally:
        probe.close()


def _group_that_read_400(broker: Broker, topic: str, group: str) -> tuple[list[Consumer], dict[tuple[int, int], bytes]]:
    """Two consumer-protocol members of ``group`` that read the 400 records of a new 4-partition topic."""
    confluent_create_topic(broker.bootstrap, topic, 4)
    confluent_produce(broker.bootstrap, topic, make_records(400, 4, "a"))
    consumers = [_consumer(broker, group), _consumer(broker, group)]
    for member in consumers:
        member.subscribe([topic])
    seen: dict[tuple[int, int], bytes] = {}
    try:
        _poll_all(consumers, 400, seen, 60)
    except BaseException:
        for member in consumers:
            member.close()
        raise
    return consumers, seen


def test_librdkafka_consumers_share_a_topic_and_one_closing_hands_its_partitions_over(broker: Broker) -> None:
    topic, group = "cgp-share", "cgp-share-group"
    (one, two), seen = _group_that_read_400(broker, topic, group)
    try:
        wait_until(lambda: (one.consume(10, 0.1), two.consume(10, 0.1)) and len(one.assignment()) == 2
                   and len(two.assignment()) == 2, 30, "an even split")
        assert {tp.partition for tp in one.assignment()}.isdisjoint({tp.partition for tp in two.assignment()})
        two.close()
        confluent_produce(broker.bootstrap, topic, make_records(200, 4, "b"))
        _poll_all([one], 600, seen, 60)
        assert len(one.assignment()) == 4
        assert _committed(broker, group, topic, 4) == [150, 150, 150, 150]
    finally:
        one.close()


def test_the_coordinator_killed_9_resumes_the_group_without_a_rebalance(own_broker: Broker) -> None:
    topic, group = "cgp-kill", "cgp-kill-group"
    consumers, seen = _group_that_read_400(own_broker, topic, group)
    try:
        with KioClient(own_broker.bootstrap) as client:
            def stable() -> Any:
                for member in consumers:
                    member.consume(10, 0.1)
                described = describe(client, group)
                return described if described.group_state == "Stable" and len(described.members) == 2 else None

            before = wait_until(stable, 30, "a stable group of two")
        committed_before = _committed(own_broker, group, topic, 4)
        old = own_broker.coordinator_pid()
        assert old is not None
        os.kill(old, signal.SIGKILL)
        wait_until(lambda: own_broker.coordinator_pid() not in (None, old), 30, "a new coordinator process")
        confluent_produce(own_broker.bootstrap, topic, make_records(200, 4, "b"))
        _poll_all(consumers, 600, seen, 90)
        with KioClient(own_broker.bootstrap) as client:
            after = wait_until(stable, 30, "the group stable again")
        assert after.group_epoch == before.group_epoch, "the new coordinator resumed the group: no rebalance"
        assert {(m.member_id, m.member_epoch) for m in after.members} == {(m.member_id, m.member_epoch) for m in before.members}
        committed_after = _committed(own_broker, group, topic, 4)
        assert all(a >= b for a, b in zip(committed_after, committed_before)), (committed_before, committed_after)
        assert committed_after == [150, 150, 150, 150]
    finally:
        for member in consumers:
            member.close()


def test_members_killed_9_lose_no_record_and_never_share_a_partition(broker: Broker, members: Any) -> None:  # noqa: F811
    """Four member processes (librdkafka, group.protocol=consumer) on six partitions while
    records keep coming; two are killed -9 and one more joins. Checked throughout, from the
    coordinator's describes: no partition is held by two members at once, and committed
    offsets never move back. At the end: every record was read by the group."""
    topic, group = "cgp-faults", "cgp-faults-group"
    confluent_create_topic(broker.bootstrap, topic, 6)
    processes = [members("confluent-consumer", broker.bootstrap, group, topic, 120) for _ in range(4)]
    sent: set[str] = set()
    last_committed = [0] * 6
    with KioClient(broker.bootstrap) as client:
        def check() -> Any:
            described = describe(client, group)
            holders: dict[int, str] = {}
            for member in described.members:
                for assigned in member.assignment.topic_partitions:
                    for partition in assigned.partitions:
                        assert int(partition) not in holders, f"partition {partition} held twice: {described}"
                        holders[int(partition)] = member.member_id
            committed = _committed(broker, group, topic, 6)
            for p, offset in enumerate(committed):
                if offset >= 0:
                    assert offset >= last_committed[p], f"partition {p}: committed {offset} after {last_committed[p]}"
                    last_committed[p] = offset
            return described

        def run_for(seconds: float, tag: str) -> None:
            sent.update(produce_values(broker, topic, 6, 120, tag))
            deadline = time.monotonic() + seconds
            while time.monotonic() < deadline:
                check()
                time.sleep(0.2)

        run_for(4, "start")
        processes[0].kill()
        run_for(3, "one-killed")
        processes.append(members("confluent-consumer", broker.bootstrap, group, topic, 120))
        processes[1].kill()
        run_for(3, "two-killed")
        sent.update(produce_values(broker, topic, 6, 120, "end"))
        seen = lambda: {value for m in processes for _p, _o, value in m.records()}  # noqa: E731
        wait_until(lambda: check() and seen() >= sent, 60, "every record read by the group")
        final = wait_until(lambda: (lambda d: d if d.group_state == "Stable" and len(d.members) == 3 else None)(check()),
                           30, "the three live members stable")
        assert sorted(int(p) for m in final.members for t in m.assignment.topic_partitions for p in t.partitions) == \
            list(range(6))


def produce_values(broker: Broker, topic: str, partitions: int, count: int, tag: str) -> set[str]:
    from tests.integration.coordination.test_groups import produce
    return produce(broker.bootstrap, topic, partitions, count, tag)


def _classic_consumer(broker: Broker, group: str, client_id: str) -> Consumer:
    return Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                     "enable.auto.commit": False, "client.id": client_id, "session.timeout.ms": 6000,
                     "heartbeat.interval.ms": 500, "partition.assignment.strategy": "range"})


def test_a_classic_group_upgrades_online_and_downgrades_when_its_last_consumer_member_leaves(broker: Broker) -> None:
    """group.consumer.migration.policy=bidirectional (the default): two classic members, then a
    consumer-protocol member joins (the group becomes a consumer group, the classic members
    keep consuming in it), then it leaves (the group is classic again). Every record is read
    once, and the group reads on through both changes."""
    topic, group = "cgp-migrate", "cgp-migrate-group"
    confluent_create_topic(broker.bootstrap, topic, 4)
    confluent_produce(broker.bootstrap, topic, make_records(200, 4, "a"))
    classic = [_classic_consumer(broker, group, f"classic-{i}") for i in range(2)]
    modern = _consumer(broker, group, **{"client.id": "modern"})
    try:
        for member in classic:
            member.subscribe([topic])
        seen: dict[tuple[int, int], bytes] = {}
        _poll_all(classic, 200, seen, 60)
        modern.subscribe([topic])
        with KioClient(broker.bootstrap) as client:
            def upgraded() -> Any:
                for member in (*classic, modern):
                    member.consume(10, 0.05)
                described = describe(client, group)
                held = [sorted(int(p) for t in m.assignment.topic_partitions for p in t.partitions)
                        for m in described.members]
                return described if described.error_code == 0 and len(described.members) == 3 and all(held) \
                    and sorted(p for h in held for p in h) == [0, 1, 2, 3] else None

            described = wait_until(upgraded, 40, "a consumer group of the two classic members and the new one")
            assert sorted((m.client_id, m.member_type) for m in described.members) == \
                [("classic-0", 0), ("classic-1", 0), ("modern", 1)]
            confluent_produce(broker.bootstrap, topic, make_records(200, 4, "b"))
            _poll_all([*classic, modern], 400, seen, 60)
            modern.close()

            def downgraded() -> Any:
                for member in classic:
                    member.consume(10, 0.05)
                answer = client.call(DESCRIBE_GROUPS, 5, request(DESCRIBE_GROUPS, 5, groups=[group],
                                                                include_authorized_operations=False))
                described = answer.groups[0]
                return described if described.error_code == 0 and described.group_state == "Stable" \
                    and len(described.members) == 2 and all(len(m.member_assignment) > 10 for m in described.members) \
                    else None

            wait_until(downgraded, 40, "the classic group of the two classic members again")
            assert describe(client, group).error_code == ErrorCode.group_id_not_found
        confluent_produce(broker.bootstrap, topic, make_records(200, 4, "c"))
        _poll_all(classic, 600, seen, 60)
        assert _committed(broker, group, topic, 4) == [150, 150, 150, 150]
    finally:
        for member in classic:
            member.close()
