"""Share groups (KIP-932), group side, on a real broker with raw requests: two members join
with ShareGroupHeartbeat v1 and split a topic's partitions once their share state is
initialized, bad heartbeats get Kafka's errors and change nothing, requests of the other group
kinds answer a share group id as Kafka does, the group is described, listed, left and
deleted; a share group loads back with its epochs and assignments after its coordinator
process is killed -9; and its offsets are described, altered and deleted."""

from __future__ import annotations

import os
import signal
import uuid
from typing import Any, Iterator

import pytest
from kio.schema.errors import ErrorCode

from tests.integration.clients import confluent_create_topic
from tests.integration.conftest import Broker, shared_broker, wait_until
from tests.integration.coordination.test_group_protocol import request
from tests.integration.kio_client import KioClient

SHARE_BROKER = {"group.share.heartbeat.interval.ms": 300, "group.share.min.heartbeat.interval.ms": 100,
                "offsets.topic.num.partitions": 3}
pytestmark = [pytest.mark.integration, pytest.mark.parametrize("broker", [SHARE_BROKER], indirect=True)]

HEARTBEAT, DESCRIBE, METADATA, API_VERSIONS = 76, 77, 3, 18
JOIN_GROUP, OFFSET_COMMIT, LIST_GROUPS, DESCRIBE_GROUPS, DELETE_GROUPS, CONSUMER_HEARTBEAT = 11, 8, 16, 15, 42, 68


@pytest.fixture(scope="module")
def broker(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    yield from shared_broker(request, tmp_path_factory)


def beat(client: KioClient, group: str, member: str, epoch: int, topics: list[str] | None = None,
         rack_id: str | None = None) -> Any:
    return client.call(HEARTBEAT, 1, request(HEARTBEAT, 1, group_id=group, member_id=member, member_epoch=epoch,
                                             rack_id=rack_id, subscribed_topic_names=topics))


def describe(client: KioClient, group: str) -> Any:
    answer = client.call(DESCRIBE, 1, request(DESCRIBE, 1, group_ids=[group], include_authorized_operations=True))
    return answer.groups[0]


def topic_id(client: KioClient, name: str) -> uuid.UUID:
    answer = client.call(METADATA, 12, request(METADATA, 12, topics=[{"name": name, "topic_id": uuid.UUID(int=0)}],
                                               allow_auto_topic_creation=False, include_topic_authorized_operations=False))
    return answer.topics[0].topic_id


def held(answer: Any) -> set[int]:
    return {int(p) for t in answer.assignment.topic_partitions for p in t.partitions}


def assigned(client: KioClient, group: str, member: str, epoch: int, topic: str, count: int) -> Any:
    """Heartbeat (a full request, so the assignment always comes) until the member holds ``count``
    partitions: the first heartbeats come before the share state is initialized."""
    def ready() -> Any:
        answer = beat(client, group, member, epoch, [topic])
        assert answer.error_code == ErrorCode.none, answer
        return answer if len(held(answer)) == count else None

    return wait_until(ready, 20, f"{member} assigned {count} partitions")


def summary(described: Any) -> tuple[Any, ...]:
    return (described.group_state, described.group_epoch, described.assignment_epoch,
            sorted((m.member_id, m.member_epoch, tuple(sorted(int(p) for t in m.assignment.topic_partitions
                                                              for p in t.partitions))) for m in described.members))


def test_the_apis_are_advertised_at_kafkas_versions(broker: Broker) -> None:
    with KioClient(broker.bootstrap) as client:
        answer = client.call(API_VERSIONS, 3, request(API_VERSIONS, 3, client_software_name="t",
                                                      client_software_version="1"))
        ranges = {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in answer.api_keys}
        assert ranges[HEARTBEAT] == (1, 1) and ranges[DESCRIBE] == (1, 1)
        assert (ranges[90], ranges[91], ranges[92]) == ((0, 1), (0, 0), (0, 0))


def test_two_members_split_the_partitions_bad_input_changes_nothing_and_they_leave(broker: Broker) -> None:
    topic, group = "share-split", "share-split-group"
    confluent_create_topic(broker.bootstrap, topic, 4)
    a, b = str(uuid.uuid4()), str(uuid.uuid4())
    with KioClient(broker.bootstrap) as client:
        tid = topic_id(client, topic)
        first = beat(client, group, a, 0, [topic])
        assert (first.error_code, first.member_id, first.member_epoch) == (ErrorCode.none, a, 1)
        assert 0 < first.heartbeat_interval.total_seconds() * 1000 <= 300
        alone = assigned(client, group, a, 1, topic, 4)
        a_epoch = alone.member_epoch
        joined = beat(client, group, b, 0, [topic], rack_id="rack-b")
        assert joined.error_code == ErrorCode.none and len(held(joined)) == 2
        b_epoch = joined.member_epoch
        # No revocation in a share group: a is told its half at its next heartbeat.
        a_half = beat(client, group, a, a_epoch)
        assert a_half.member_epoch == b_epoch and held(a_half) == {0, 1, 2, 3} - held(joined)
        a_epoch = b_epoch
        steady = beat(client, group, a, a_epoch)
        assert (steady.error_code, steady.member_epoch, steady.assignment) == (ErrorCode.none, a_epoch, None)

        before = describe(client, group)
        assert (before.error_code, before.assignor_name, before.authorized_operations != -2147483648) == \
            (ErrorCode.none, "simple", True)
        assert summary(before)[:3] == ("Stable", b_epoch, b_epoch)
        members = {m.member_id: m for m in before.members}
        assert members[b].rack_id == "rack-b" and list(members[b].subscribed_topic_names) == [topic]
        assert [(t.topic_id, t.topic_name) for t in members[b].assignment.topic_partitions] == [(tid, topic)]

        bad = [
            (dict(member=a, epoch=a_epoch + 5), ErrorCode.fenced_member_epoch),
            (dict(member=str(uuid.uuid4()), epoch=a_epoch), ErrorCode.unknown_member_id),
            (dict(member=a, epoch=0), ErrorCode.invalid_request),  # a join names its topics
            (dict(member="", epoch=0, topics=[topic]), ErrorCode.invalid_request),
            (dict(member=a, epoch=-2), ErrorCode.invalid_request),
            (dict(member=a, epoch=a_epoch, rack_id=""), ErrorCode.invalid_request),
        ]
        for fields, code in bad:
            answer = beat(client, group, **fields)
            assert answer.error_code == code, (fields, answer)
            assert answer.error_message
        assert beat(client, "", a, 1).error_code == ErrorCode.invalid_request
        assert beat(client, "share-no-such-group", a, 3).error_code == ErrorCode.group_id_not_found
        assert summary(describe(client, group)) == summary(before)

        # The other kinds' requests for a share group's id.
        join = client.call(JOIN_GROUP, 9, request(
            JOIN_GROUP, 9, group_id=group, session_timeout=10000, rebalance_timeout=10000, member_id="",
            group_instance_id=None, protocol_type="consumer", protocols=[{"name": "range", "metadata": b""}],
            reason=None))
        assert (join.error_code, join.member_id) == (ErrorCode.inconsistent_group_protocol, "")
        consumer = client.call(CONSUMER_HEARTBEAT, 1, request(
            CONSUMER_HEARTBEAT, 1, group_id=group, member_id="m", member_epoch=0, instance_id=None, rack_id=None,
            rebalance_timeout=30000, subscribed_topic_names=[topic], subscribed_topic_regex=None,
            server_assignor=None, topic_partitions=[]))
        assert consumer.error_code == ErrorCode.group_id_not_found
        commit = client.call(OFFSET_COMMIT, 9, request(
            OFFSET_COMMIT, 9, group_id=group, generation_id_or_member_epoch=-1, member_id="",
            group_instance_id=None, topics=[{"name": topic, "partitions": [
                {"partition_index": 0, "committed_offset": 1, "committed_leader_epoch": -1,
                 "committed_metadata": None}]}]))
        assert commit.topics[0].partitions[0].error_code == ErrorCode.group_id_not_found
        classic = client.call(DESCRIBE_GROUPS, 6, request(DESCRIBE_GROUPS, 6, groups=[group],
                                                         include_authorized_operations=False))
        assert classic.groups[0].error_code == ErrorCode.group_id_not_found
        listed = client.call(LIST_GROUPS, 5, request(LIST_GROUPS, 5, states_filter=["stable"], types_filter=["share"]))
        assert (group, "share", "Stable", "share") in {(g.group_id, g.protocol_type, g.group_state, g.group_type)
                                                       for g in listed.groups}
        deleted = client.call(DELETE_GROUPS, 2, request(DELETE_GROUPS, 2, groups_names=[group]))
        assert deleted.results[0].error_code == ErrorCode.non_empty_group
        assert summary(describe(client, group)) == summary(before)

        left = beat(client, group, b, -1)
        assert (left.error_code, left.member_id, left.member_epoch) == (ErrorCode.none, b, -1)
        whole = beat(client, group, a, a_epoch)
        assert whole.error_code == ErrorCode.none and held(whole) == {0, 1, 2, 3}
        assert beat(client, group, a, -1).error_code == ErrorCode.none
        empty = describe(client, group)
        assert (empty.group_state, list(empty.members)) == ("Empty", [])
        deleted = client.call(DELETE_GROUPS, 2, request(DELETE_GROUPS, 2, groups_names=[group]))
        assert deleted.results[0].error_code == ErrorCode.none
        assert describe(client, group).error_code == ErrorCode.group_id_not_found


def test_the_coordinator_killed_9_loads_the_share_group_back(broker: Broker) -> None:
    topic, group = "share-kill", "share-kill-group"
    confluent_create_topic(broker.bootstrap, topic, 3)
    a, b = str(uuid.uuid4()), str(uuid.uuid4())
    with KioClient(broker.bootstrap) as client:
        beat(client, group, a, 0, [topic])
        a_epoch = assigned(client, group, a, 1, topic, 3).member_epoch
        b_answer = beat(client, group, b, 0, [topic])
        a_answer = beat(client, group, a, a_epoch)
        before = describe(client, group)
        assert summary(before)[0] == "Stable" and len(before.members) == 2
    old = broker.coordinator_pid()
    assert old is not None
    os.kill(old, signal.SIGKILL)
    wait_until(lambda: broker.coordinator_pid() not in (None, old), 30, "a new coordinator process")

    def loaded() -> Any:
        try:
            with KioClient(broker.bootstrap) as client:
                described = describe(client, group)
        except OSError:
            return None
        return described if described.error_code == ErrorCode.none else None

    after = wait_until(loaded, 30, "the share group loaded by the new coordinator")
    assert summary(after) == summary(before)
    with KioClient(broker.bootstrap) as client:
        # The members carry on at their epochs: nothing changed, nothing to tell them.
        for member, answer in ((a, a_answer), (b, b_answer)):
            again = beat(client, group, member, answer.member_epoch)
            assert (again.error_code, again.member_epoch, again.assignment) == \
                (ErrorCode.none, answer.member_epoch, None)
        assert summary(describe(client, group)) == summary(before)


DESCRIBE_OFFSETS, ALTER_OFFSETS, DELETE_OFFSETS = 90, 91, 92


def describe_offsets(client: KioClient, group: str, topic: str | None, version: int = 1) -> Any:
    topics = None if topic is None else [{"topic_name": topic, "partitions": [0, 1]}]
    answer = client.call(DESCRIBE_OFFSETS, version, request(DESCRIBE_OFFSETS, version,
                                                            groups=[{"group_id": group, "topics": topics}]))
    return answer.groups[0]


def test_share_group_offsets_are_described_altered_and_deleted(broker: Broker) -> None:
    topic, group = "share-offsets", "share-offsets-group"
    confluent_create_topic(broker.bootstrap, topic, 2)
    a = str(uuid.uuid4())
    with KioClient(broker.bootstrap) as client:
        tid = topic_id(client, topic)
        beat(client, group, a, 0, [topic])
        assigned(client, group, a, 1, topic, 2)
        for version in (0, 1):
            described = describe_offsets(client, group, topic, version)
            assert described.error_code == ErrorCode.none
            [entry] = described.topics
            assert (entry.topic_name, entry.topic_id) == (topic, tid)
            assert [(int(p.partition_index), int(p.start_offset), p.error_code) for p in entry.partitions] == \
                [(0, -1, ErrorCode.none), (1, -1, ErrorCode.none)]  # initialized, no start offset yet
        every = describe_offsets(client, group, None)
        assert [(t.topic_name, sorted(int(p.partition_index) for p in t.partitions)) for t in every.topics] == \
            [(topic, [0, 1])]
        alter = request(ALTER_OFFSETS, 0, group_id=group, topics=[
            {"topic_name": topic, "partitions": [{"partition_index": 0, "start_offset": 5}]}])
        assert client.call(ALTER_OFFSETS, 0, alter).error_code == ErrorCode.non_empty_group
        assert beat(client, group, a, -1).error_code == ErrorCode.none
        altered = client.call(ALTER_OFFSETS, 0, alter)
        assert altered.error_code == ErrorCode.none
        assert [(r.topic_name, r.topic_id, [(int(p.partition_index), p.error_code) for p in r.partitions])
                for r in altered.responses] == [(topic, tid, [(0, ErrorCode.none)])]
        offsets = describe_offsets(client, group, topic).topics[0].partitions
        assert [int(p.start_offset) for p in offsets] == [5, -1]
        deleted = client.call(DELETE_OFFSETS, 0, request(DELETE_OFFSETS, 0, group_id=group,
                                                         topics=[{"topic_name": topic}, {"topic_name": "nope"}]))
        assert deleted.error_code == ErrorCode.none
        assert {(r.topic_name, r.error_code) for r in deleted.responses} == \
            {(topic, ErrorCode.none), ("nope", ErrorCode.unknown_topic_or_partition)}
        assert list(describe_offsets(client, group, None).topics) == []
