"""The group and offset APIs, every advertised version, over a real broker's socket.

Requests are kio entities encoded by kio (tests/integration/kio_client.py), for the
versions no real client here sends and for bad input. Every version of JoinGroup,
SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch, DescribeGroups, ListGroups,
DeleteGroups, OffsetDelete and FindCoordinator runs through a flow whose answers are
checked, and bad requests get Kafka's error codes without hurting the broker.
"""

from __future__ import annotations

import socket
import struct
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from kio.index import load_request_schema
from kio.schema.errors import ErrorCode

from broker.protocol.build import build
from tests.integration.conftest import Broker, round_trip, shared_broker, wait_until
from tests.integration.kio_client import KioClient

GROUP_BROKER = {"group.initial.rebalance.delay.ms": 0, "group.min.session.timeout.ms": 1000,
                "group.max.session.timeout.ms": 60000, "offsets.topic.num.partitions": 3, "num.partitions": 2}
pytestmark = [pytest.mark.integration, pytest.mark.parametrize("broker", [GROUP_BROKER], indirect=True)]

JOIN, SYNC, HEARTBEAT, LEAVE = 11, 14, 12, 13
COMMIT, FETCH, DESCRIBE, LIST, DELETE, OFFSET_DELETE, FIND = 8, 9, 15, 16, 42, 47, 10
METADATA = 3


def request(api_key: int, version: int, **fields: Any) -> Any:
    """A kio request entity of this version; fields a version lacks are dropped."""
    return build(load_request_schema(api_key, version), fields)


def subscription(*topics: str) -> bytes:
    """ConsumerProtocolSubscription v0: version, topics, user data (null)."""
    out = struct.pack(">hi", 0, len(topics))
    for topic in topics:
        out += struct.pack(">h", len(topic)) + topic.encode()
    return out + struct.pack(">i", -1)


def ensure_topic(client: KioClient, topic: str) -> None:
    client.call(METADATA, 4, request(METADATA, 4, topics=[{"name": topic}], allow_auto_topic_creation=True))


def join(client: KioClient, version: int, group: str, member_id: str = "", protocol_type: str = "consumer",
         session_ms: int = 10000, instance: str | None = None, topics: tuple[str, ...] = ("t",)) -> Any:
    return client.call(JOIN, version, request(
        JOIN, version, group_id=group, session_timeout=session_ms, rebalance_timeout=10000, member_id=member_id,
        group_instance_id=instance, protocol_type=protocol_type, reason=None,
        protocols=[{"name": "range", "metadata": subscription(*topics)}]))


def join_until_member(client: KioClient, version: int, group: str, **kwargs: Any) -> Any:
    """JoinGroup v4+ first answers MEMBER_ID_REQUIRED with an id; join again with it."""
    answer = join(client, version, group, **kwargs)
    if answer.error_code == ErrorCode.member_id_required:
        assert version >= 4 and answer.member_id
        kwargs.pop("member_id", None)
        answer = join(client, version, group, member_id=answer.member_id, **kwargs)
    return answer


def sync(client: KioClient, version: int, group: str, generation: int, member_id: str,
         assignments: list[tuple[str, bytes]], protocol_name: str | None = None, instance: str | None = None) -> Any:
    return client.call(SYNC, version, request(
        SYNC, version, group_id=group, generation_id=generation, member_id=member_id, group_instance_id=instance,
        protocol_type="consumer", protocol_name=protocol_name,
        assignments=[{"member_id": m, "assignment": a} for m, a in assignments]))


def heartbeat(client: KioClient, version: int, group: str, generation: int, member_id: str,
              instance: str | None = None) -> int:
    answer = client.call(HEARTBEAT, version, request(HEARTBEAT, version, group_id=group, generation_id=generation,
                                                     member_id=member_id, group_instance_id=instance))
    return int(answer.error_code)


def commit(client: KioClient, version: int, group: str, offsets: list[tuple[str, int, int]], generation: int = -1,
           member_id: str = "", metadata: str = "meta") -> dict[tuple[str, int], int]:
    answer = client.call(COMMIT, version, request(
        COMMIT, version, group_id=group, generation_id_or_member_epoch=generation, member_id=member_id,
        group_instance_id=None, retention_time=-1,
        topics=[{"name": t, "partitions": [{"partition_index": p, "committed_offset": o, "committed_leader_epoch": 3,
                                            "committed_metadata": metadata}]} for t, p, o in offsets]))
    return {(t.name, p.partition_index): int(p.error_code) for t in answer.topics for p in t.partitions}


def fetch(client: KioClient, version: int, group: str, partitions: list[tuple[str, int]] | None) -> dict[tuple[str, int], tuple[int, int]]:
    """{(topic, partition): (offset, error)} for one group, whatever the version's shape."""
    topics = None if partitions is None else [{"name": t, "partition_indexes": [p]} for t, p in partitions]
    if version >= 8:
        answer = client.call(FETCH, version, request(FETCH, version, require_stable=True, groups=[
            {"group_id": group, "member_id": None, "member_epoch": -1, "topics": topics}]))
        (result,) = answer.groups
        assert result.group_id == group and result.error_code == 0
        found = result.topics
    else:
        answer = client.call(FETCH, version, request(FETCH, version, group_id=group, topics=topics, require_stable=True))
        if version >= 2:
            assert answer.error_code == 0
        found = answer.topics
    return {(t.name, p.partition_index): (int(p.committed_offset), int(p.error_code)) for t in found for p in t.partitions}


@pytest.fixture(scope="module")
def broker(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """One broker for the tests that each keep to groups of their own; a test that kills its
    coordinator or restarts it takes a broker of its own (``own_broker``)."""
    yield from shared_broker(request, tmp_path_factory)


@pytest.fixture
def own_broker(broker_factory: Any) -> Broker:
    started = broker_factory(workers=2, overrides=dict(GROUP_BROKER))
    wait_loaded(started)
    return started


def wait_loaded(broker: Broker) -> None:
    """Right after a start the coordinator answers COORDINATOR_LOAD_IN_PROGRESS (as Kafka's
    does while it reads __consumer_offsets); clients retry, and so do these tests."""
    with KioClient(broker.bootstrap) as client:
        wait_until(lambda: heartbeat(client, 4, "probe", 1, "probe") == ErrorCode.unknown_member_id, 20,
                   "the coordinator to finish loading")


@pytest.fixture(autouse=True)
def coordinator_loaded(broker: Broker) -> None:
    wait_loaded(broker)


# ---------------------------------------------------------------------- every version
@pytest.mark.parametrize("version", range(0, 10))
def test_join_sync_heartbeat_leave_every_version(broker: Any, version: int) -> None:
    group = f"flow-v{version}"
    sync_v, heartbeat_v, leave_v = min(version, 5), min(version, 4), min(version, 5)
    with KioClient(broker.bootstrap) as client:
        joined = join_until_member(client, version, group)
        assert joined.error_code == 0
        assert joined.generation_id == 1 and joined.leader == joined.member_id
        assert [m.member_id for m in joined.members] == [joined.member_id]
        assert joined.members[0].metadata == subscription("t")
        assert joined.protocol_name == "range"
        member, generation = joined.member_id, joined.generation_id
        synced = sync(client, sync_v, group, generation, member, [(member, b"my-assignment")],
                      protocol_name="range" if sync_v >= 5 else None)
        assert synced.error_code == 0 and synced.assignment == b"my-assignment"
        assert heartbeat(client, heartbeat_v, group, generation, member) == 0
        assert heartbeat(client, heartbeat_v, group, generation + 7, member) == ErrorCode.illegal_generation
        if leave_v >= 3:
            left = client.call(LEAVE, leave_v, request(LEAVE, leave_v, group_id=group, members=[
                {"member_id": member, "group_instance_id": None, "reason": "test"}]))
            assert left.error_code == 0 and [(m.member_id, m.error_code) for m in left.members] == [(member, 0)]
        else:
            left = client.call(LEAVE, leave_v, request(LEAVE, leave_v, group_id=group, member_id=member))
            assert left.error_code == 0
        assert heartbeat(client, heartbeat_v, group, generation, member) == ErrorCode.unknown_member_id


@pytest.mark.parametrize("version", range(1, 10))
def test_offset_commit_and_fetch_every_version(broker: Any, version: int) -> None:
    commit_v = max(version, 2)
    group = f"offsets-v{version}"
    with KioClient(broker.bootstrap) as client:
        ensure_topic(client, "t")
        assert commit(client, commit_v, group, [("t", 0, 40 + version), ("t", 1, 7)]) == {("t", 0): 0, ("t", 1): 0}
        assert fetch(client, version, group, [("t", 0), ("t", 1), ("t", 5)]) == {
            ("t", 0): (40 + version, 0), ("t", 1): (7, 0), ("t", 5): (-1, 0)}
        if version >= 2:  # null topics = every committed offset of the group
            assert fetch(client, version, group, None) == {("t", 0): (40 + version, 0), ("t", 1): (7, 0)}


def test_offset_fetch_v8_several_groups(broker: Any) -> None:
    with KioClient(broker.bootstrap) as client:
        ensure_topic(client, "t")
        commit(client, 9, "multi-a", [("t", 0, 11)])
        commit(client, 9, "multi-b", [("t", 0, 22)])
        answer = client.call(FETCH, 8, request(FETCH, 8, require_stable=False, groups=[
            {"group_id": g, "topics": [{"name": "t", "partition_indexes": [0]}]} for g in ("multi-a", "multi-b", "multi-c")]))
        got = {g.group_id: g.topics[0].partitions[0].committed_offset for g in answer.groups}
        assert got == {"multi-a": 11, "multi-b": 22, "multi-c": -1}


@pytest.mark.parametrize("version", range(0, 7))
def test_find_coordinator_every_version(broker: Any, version: int) -> None:
    with KioClient(broker.bootstrap) as client:
        if version >= 4:
            answer = client.call(FIND, version, request(FIND, version, key_type=0, coordinator_keys=["a", "b"]))
            entries = [(c.key, c.error_code, c.node_id, c.host, c.port) for c in answer.coordinators]
            assert entries == [(k, 0, 0, broker.host, broker.port) for k in ("a", "b")]
        else:
            answer = client.call(FIND, version, request(FIND, version, key="a", key_type=0))
            assert (answer.error_code, answer.node_id, answer.host, answer.port) == (0, 0, broker.host, broker.port)
        if version >= 1:  # key type 1: the transaction coordinator, the same elected process
            if version >= 4:
                found = client.call(FIND, version, request(FIND, version, key_type=1, coordinator_keys=["tx"]))
                (coordinator,) = found.coordinators
                assert (coordinator.key, coordinator.error_code, coordinator.node_id, coordinator.host,
                        coordinator.port) == ("tx", 0, 0, broker.host, broker.port)
            else:
                found = client.call(FIND, version, request(FIND, version, key="tx", key_type=1))
                assert (found.error_code, found.node_id, found.host, found.port) == (0, 0, broker.host, broker.port)
            # Key type 2 (SHARE) is v6's, and only brokers may ask (tests/integration/protocol/test_share_state.py).
            unknown = client.call(FIND, version, request(FIND, version, key="k", key_type=2, coordinator_keys=["k"]))
            codes = [c.error_code for c in unknown.coordinators] if version >= 4 else [unknown.error_code]
            assert codes == [ErrorCode.cluster_authorization_failed if version >= 6 else ErrorCode.invalid_request]


@pytest.mark.parametrize("version", range(0, 7))
def test_describe_groups_every_version(broker: Any, version: int) -> None:
    group = f"describe-v{version}"
    with KioClient(broker.bootstrap) as client:
        joined = join_until_member(client, 9, group)
        sync(client, 5, group, joined.generation_id, joined.member_id, [(joined.member_id, b"A")], protocol_name="range")
        answer = client.call(DESCRIBE, version, request(DESCRIBE, version, groups=[group, "no-such-group"],
                                                        include_authorized_operations=False))
        found, missing = answer.groups
        assert (found.error_code, found.group_state, found.protocol_type, found.protocol_data) == (0, "Stable", "consumer", "range")
        assert [(m.member_id, m.member_assignment, m.member_metadata) for m in found.members] == [
            (joined.member_id, b"A", subscription("t"))]
        assert found.members[0].client_host.startswith("/127.0.0.1")
        assert missing.group_state == "Dead"
        assert missing.error_code == (ErrorCode.group_id_not_found if version >= 6 else 0)


@pytest.mark.parametrize("version", range(0, 6))
def test_list_groups_every_version(broker: Any, version: int) -> None:
    # The module's broker holds the other tests' groups too: these two are this version's.
    listed, empty = f"listed-v{version}", f"listed-empty-v{version}"
    with KioClient(broker.bootstrap) as client:
        joined = join_until_member(client, 9, listed)
        sync(client, 5, listed, joined.generation_id, joined.member_id, [(joined.member_id, b"")], protocol_name="range")
        ensure_topic(client, "t")
        commit(client, 9, empty, [("t", 0, 1)])
        answer = client.call(LIST, version, request(LIST, version, states_filter=[], types_filter=[]))
        assert answer.error_code == 0
        groups = {g.group_id: g for g in answer.groups}
        assert groups[listed].protocol_type == "consumer" and groups[empty].protocol_type == ""
        if version >= 4:
            assert groups[listed].group_state == "Stable" and groups[empty].group_state == "Empty"
            stable = client.call(LIST, version, request(LIST, version, states_filter=["stable"], types_filter=[]))
            assert listed in {g.group_id for g in stable.groups} and empty not in {g.group_id for g in stable.groups}
            assert {g.group_state for g in stable.groups} == {"Stable"}
        if version >= 5:
            assert groups[listed].group_type == "classic"
            none = client.call(LIST, version, request(LIST, version, states_filter=[], types_filter=["consumer"]))
            assert none.groups == ()


@pytest.mark.parametrize("version", range(0, 3))
def test_delete_groups_every_version(broker: Any, version: int) -> None:
    with KioClient(broker.bootstrap) as client:
        ensure_topic(client, "t")
        commit(client, 9, f"doomed-{version}", [("t", 0, 5)])
        joined = join_until_member(client, 9, f"busy-{version}")
        assert joined.error_code == 0
        answer = client.call(DELETE, version, request(DELETE, version, groups_names=[
            f"doomed-{version}", f"busy-{version}", "never-was"]))
        assert [(r.group_id, r.error_code) for r in answer.results] == [
            (f"doomed-{version}", 0), (f"busy-{version}", ErrorCode.non_empty_group), ("never-was", ErrorCode.group_id_not_found)]
        assert fetch(client, 9, f"doomed-{version}", [("t", 0)]) == {("t", 0): (-1, 0)}


def test_offset_delete(broker: Any) -> None:
    with KioClient(broker.bootstrap) as client:
        ensure_topic(client, "t")
        ensure_topic(client, "other")
        joined = join_until_member(client, 9, "od", topics=("t",))
        sync(client, 5, "od", joined.generation_id, joined.member_id, [(joined.member_id, b"")], protocol_name="range")
        commit(client, 9, "od", [("t", 0, 3), ("other", 0, 4)], generation=joined.generation_id, member_id=joined.member_id)
        answer = client.call(OFFSET_DELETE, 0, request(OFFSET_DELETE, 0, group_id="od", topics=[
            {"name": "t", "partitions": [{"partition_index": 0}]}, {"name": "other", "partitions": [{"partition_index": 0}]}]))
        assert answer.error_code == 0
        assert {(t.name, p.error_code) for t in answer.topics for p in t.partitions} == {
            ("t", ErrorCode.group_subscribed_to_topic), ("other", 0)}
        assert fetch(client, 9, "od", [("t", 0), ("other", 0)]) == {("t", 0): (3, 0), ("other", 0): (-1, 0)}
        missing = client.call(OFFSET_DELETE, 0, request(OFFSET_DELETE, 0, group_id="nope", topics=[]))
        assert missing.error_code == ErrorCode.group_id_not_found


# ---------------------------------------------------------------------- bad requests
def test_bad_group_requests_get_error_codes(broker: Any) -> None:
    with KioClient(broker.bootstrap) as client:
        ensure_topic(client, "t")
        assert join(client, 9, "").error_code == ErrorCode.invalid_group_id
        assert join(client, 9, "bad", session_ms=500).error_code == ErrorCode.invalid_session_timeout
        assert join(client, 9, "bad", session_ms=600_000).error_code == ErrorCode.invalid_session_timeout
        assert join(client, 9, "bad", member_id="who-am-i").error_code == ErrorCode.unknown_member_id
        joined = join_until_member(client, 9, "bad")
        member, generation = joined.member_id, joined.generation_id
        assert join(client, 9, "bad", protocol_type="connect").error_code == ErrorCode.inconsistent_group_protocol
        # Garbage assignment bytes are opaque to the broker: delivered as sent.
        garbage = bytes(range(256)) * 3
        synced = sync(client, 5, "bad", generation, member, [(member, garbage), ("not-a-member", b"x")], protocol_name="range")
        assert synced.error_code == 0 and synced.assignment == garbage
        assert sync(client, 5, "bad", generation, member, [], protocol_name="roundrobin").error_code == ErrorCode.inconsistent_group_protocol
        assert sync(client, 5, "bad", generation + 1, member, []).error_code == ErrorCode.illegal_generation
        assert sync(client, 5, "bad", generation, "stranger", []).error_code == ErrorCode.unknown_member_id
        assert heartbeat(client, 4, "bad", generation, "stranger") == ErrorCode.unknown_member_id
        assert heartbeat(client, 4, "bad", generation - 1, member) == ErrorCode.illegal_generation
        assert heartbeat(client, 4, "no-such-group", 1, member) == ErrorCode.unknown_member_id
        assert commit(client, 9, "bad", [("t", 0, 1)], generation=generation + 3, member_id=member) == {("t", 0): ErrorCode.illegal_generation}
        assert commit(client, 9, "bad", [("t", 0, 1)], generation=generation, member_id="stranger") == {("t", 0): ErrorCode.unknown_member_id}
        assert commit(client, 9, "bad", [("nope", 0, 1), ("t", 99, 1)], generation=generation, member_id=member) == {
            ("nope", 0): ErrorCode.unknown_topic_or_partition, ("t", 99): ErrorCode.unknown_topic_or_partition}
        assert commit(client, 9, "bad", [("t", 0, 1)], generation=generation, member_id=member, metadata="m" * 5000) == {
            ("t", 0): ErrorCode.offset_metadata_too_large}
        # A group that does not exist: v9 answers GROUP_ID_NOT_FOUND, older versions ILLEGAL_GENERATION (Kafka's split).
        assert commit(client, 9, "ghost", [("t", 0, 1)], generation=4, member_id="m") == {("t", 0): ErrorCode.group_id_not_found}
        assert commit(client, 8, "ghost", [("t", 0, 1)], generation=4, member_id="m") == {("t", 0): ErrorCode.illegal_generation}
        # Still a working group after all that.
        assert heartbeat(client, 4, "bad", generation, member) == 0
        assert commit(client, 9, "bad", [("t", 0, 9)], generation=generation, member_id=member) == {("t", 0): 0}


def test_static_member_replaced_by_its_restart_is_fenced(broker: Any) -> None:
    with KioClient(broker.bootstrap) as first, KioClient(broker.bootstrap) as second:
        old = join(first, 9, "static", instance="instance-1")
        assert old.error_code == 0  # static members need no MEMBER_ID_REQUIRED round
        assert sync(first, 5, "static", old.generation_id, old.member_id, [(old.member_id, b"P0")],
                    protocol_name="range", instance="instance-1").assignment == b"P0"
        new = join(second, 9, "static", instance="instance-1")
        assert new.error_code == 0 and new.member_id != old.member_id
        assert new.generation_id == old.generation_id  # same metadata: no rebalance (KIP-345)
        assert heartbeat(first, 4, "static", old.generation_id, old.member_id, instance="instance-1") == ErrorCode.fenced_instance_id
        assert heartbeat(second, 4, "static", new.generation_id, new.member_id, instance="instance-1") == 0
        assert sync(second, 5, "static", new.generation_id, new.member_id, [], protocol_name="range",
                    instance="instance-1").assignment == b"P0"


def test_truncated_join_request_closes_only_that_connection(broker: Any) -> None:
    body = b"\x00\x03abc\x00\x00\x27"  # a JoinGroup v5 body cut off inside session_timeout
    client_id = b"bad"
    frame = struct.pack(">hhih", JOIN, 5, 1, len(client_id)) + client_id + body
    with socket.create_connection((broker.host, broker.port), timeout=5) as sock:
        sock.sendall(struct.pack(">i", len(frame)) + frame)
        sock.settimeout(5)
        assert sock.recv(1) == b""  # closed by the broker
    assert round_trip(broker.host, broker.port)
    with KioClient(broker.bootstrap) as client:
        assert join_until_member(client, 9, "after-garbage").error_code == 0


def test_clients_cannot_produce_to_consumer_offsets(broker: Any) -> None:
    from tests.integration.protocol.test_protocol_raw import _batch, _produce

    with KioClient(broker.bootstrap) as client:
        ensure_topic(client, "t")
        commit(client, 9, "guarded", [("t", 0, 5)])  # creates __consumer_offsets
        metadata = client.call(METADATA, 12, request(METADATA, 12, topics=None, allow_auto_topic_creation=False,
                                                     include_topic_authorized_operations=False))
        internal = {t.name: t.is_internal for t in metadata.topics}
        assert internal["__consumer_offsets"] is True and internal["t"] is False
        answer = _produce(client, 9, "__consumer_offsets", _batch([b"forged"]))
        assert answer.responses[0].partition_responses[0].error_code == ErrorCode.invalid_topic_exception
        assert fetch(client, 9, "guarded", [("t", 0)]) == {("t", 0): (5, 0)}


def test_a_deposed_coordinators_offset_writes_are_fenced(broker: Any) -> None:
    """Writes to __consumer_offsets come from a proven broker (broker/security/broker_proof.py)
    and carry the coordinator epoch in the client id; the partition's owner refuses an epoch
    older than the current one (NOT_COORDINATOR). Without the proof the epoch is not even read."""
    import os

    from broker.partitions.remote_partition import coordinator_client_id
    from coordination.groups import offsets_schema as schema
    from coordination.znodes import BrokerSecretZNode
    from tests.integration.protocol.test_leader_epochs import _prove_broker

    with open(os.path.join(broker.log_dir, "broker-secret.json"), "rb") as handle:
        secret = BrokerSecretZNode.decode(handle.read())

    with KioClient(broker.bootstrap) as client:
        ensure_topic(client, "t")
        commit(client, 9, "fenced", [("t", 0, 5)])  # the coordinator writes; the topic exists
    with open(os.path.join(broker.log_dir, "coordinator_epoch"), "rb") as handle:
        epoch = int(handle.read())
    assert epoch >= 1
    partition = schema.partition_for("fenced", 3)
    record = (schema.encode_key(schema.OffsetKey("fenced", "t", 0)),
              schema.encode_offset_value(schema.OffsetValue(999, -1, "", int(time.time() * 1000))))

    def write(client_id: str, proven: bool = True) -> int:
        with KioClient(broker.bootstrap, client_id=client_id) as writer:
            if proven:
                assert _prove_broker(writer, secret, 0) == 0
            answer = writer.call(0, 9, request(0, 9, transactional_id=None, acks=-1, timeout=5000, topic_data=[
                {"name": "__consumer_offsets", "partition_data": [
                    {"index": partition, "records": schema.offsets_batch([record], int(time.time() * 1000))}]}]))
            return int(answer.responses[0].partition_responses[0].error_code)

    assert write(coordinator_client_id(epoch - 1)) == ErrorCode.not_coordinator
    assert write(coordinator_client_id(epoch)) == 0
    assert write("castle-coordinator/not-a-number") == ErrorCode.invalid_topic_exception
    assert write(coordinator_client_id(epoch), proven=False) == ErrorCode.invalid_topic_exception


def test_requests_that_come_while_the_coordinator_process_restarts_wait_for_its_successor(own_broker: Broker) -> None:
    """Between a coordinator's kill -9 and its successor serving, FindCoordinator and group
    requests wait for the successor (a few seconds at most) and get its answers: not
    COORDINATOR_NOT_AVAILABLE, which makes clients drop their coordinator connection and
    look for it again, nor a closed connection."""
    import os
    import signal

    def find(client: KioClient) -> int:
        return int(client.call(10, 3, request(10, 3, key="g-down", key_type=0)).error_code)

    def heartbeat(client: KioClient) -> int:
        return int(client.call(12, 4, request(12, 4, group_id="g-down", generation_id=1, member_id="m",
                                              group_instance_id=None)).error_code)

    def reaped(pid: int) -> bool:
        try:
            os.kill(pid, 0)  # a zombie until the supervisor reaps it (and marks its endpoint down)
        except ProcessLookupError:
            return True
        return False

    with KioClient(own_broker.bootstrap, timeout=20) as client:
        wait_until(lambda: find(client) == 0, 20, "the coordinator serving")
        victim = own_broker.coordinator_pid()
        assert victim is not None
        os.kill(victim, signal.SIGKILL)
        wait_until(lambda: reaped(victim), 10, "the supervisor to reap the coordinator")
        time.sleep(0.03)  # it marks the endpoint down right after the reap; a successor comes 0.1 s later
        started = time.monotonic()
        assert find(client) == 0
        assert heartbeat(client) == ErrorCode.unknown_member_id  # the successor's answer: it serves
        assert time.monotonic() - started < 15
        assert own_broker.coordinator_pid() not in (None, victim)


def test_requests_parked_in_a_coordinator_that_dies_are_answered_at_once(own_broker: Broker) -> None:
    """A JoinGroup waiting for a rebalance and a SyncGroup waiting for the leader are parked
    in the coordinator process; kill -9 it and both are answered COORDINATOR_NOT_AVAILABLE
    as soon as the supervisor reaps it (the rings fail calls to a dead endpoint), not at the
    client's timeout; so is the heartbeat of a member that keeps heartbeating meanwhile."""
    import os
    import signal

    from tests.integration.kio_client import decode_response, read_frame

    def group_state(client: KioClient, group: str) -> str:
        (described,) = client.call(DESCRIBE, 5, request(DESCRIBE, 5, groups=[group],
                                                        include_authorized_operations=False)).groups
        return str(described.group_state)

    def answer_of(client: KioClient, api_key: int, version: int, correlation_id: int) -> Any:
        got, entity = decode_response(api_key, version, read_frame(client.sock))
        assert got == correlation_id
        return entity

    with KioClient(own_broker.bootstrap, timeout=20) as first, KioClient(own_broker.bootstrap, timeout=20) as second, \
            KioClient(own_broker.bootstrap, timeout=20) as third, KioClient(own_broker.bootstrap, timeout=20) as beating:
        ensure_topic(first, "t")
        # Group "parked-sync": two members joined; the follower's SyncGroup waits for the leader's.
        leader = join_until_member(first, 9, "parked-sync")
        follower_id = join(second, 9, "parked-sync").member_id
        second.send(JOIN, 9, request(JOIN, 9, group_id="parked-sync", session_timeout=10000, rebalance_timeout=10000,
                                     member_id=follower_id, group_instance_id=None, protocol_type="consumer",
                                     reason=None, protocols=[{"name": "range", "metadata": subscription("t")}]))
        wait_until(lambda: group_state(first, "parked-sync") == "PreparingRebalance", 10, "the follower's join parked")
        rejoined = join(first, 9, "parked-sync", member_id=leader.member_id)  # completes the rebalance
        assert rejoined.error_code == 0 and rejoined.leader == leader.member_id
        follower = answer_of(second, JOIN, 9, second._next)
        assert follower.error_code == 0 and follower.generation_id == rejoined.generation_id
        parked_sync = second.send(SYNC, 5, request(SYNC, 5, group_id="parked-sync", generation_id=follower.generation_id,
                                                   member_id=follower.member_id, group_instance_id=None,
                                                   protocol_type="consumer", protocol_name="range", assignments=[]))
        # Group "parked-join": a Stable member, then a newcomer whose JoinGroup waits for it to rejoin.
        member = join_until_member(beating, 9, "parked-join")
        assert sync(beating, 5, "parked-join", member.generation_id, member.member_id, [(member.member_id, b"")],
                    protocol_name="range").error_code == 0
        newcomer_id = join(third, 9, "parked-join").member_id
        parked_join = third.send(JOIN, 9, request(JOIN, 9, group_id="parked-join", session_timeout=10000,
                                                  rebalance_timeout=10000, member_id=newcomer_id, group_instance_id=None,
                                                  protocol_type="consumer", reason=None,
                                                  protocols=[{"name": "range", "metadata": subscription("t")}]))
        wait_until(lambda: group_state(first, "parked-join") == "PreparingRebalance", 10, "the newcomer's join parked")
        victim = own_broker.coordinator_pid()
        assert victim is not None
        os.kill(victim, signal.SIGKILL)
        killed_at = time.monotonic()
        assert answer_of(third, JOIN, 9, parked_join).error_code == ErrorCode.coordinator_not_available
        assert answer_of(second, SYNC, 5, parked_sync).error_code == ErrorCode.coordinator_not_available
        answered_in = time.monotonic() - killed_at
        assert answered_in < 2.0, f"parked requests answered {answered_in:.2f} s after the kill"
        # A heartbeat during the gap, or already to the successor (loading, then knowing the member
        # of the Stable group it restored from __consumer_offsets): never a wait for a timeout.
        started = time.monotonic()
        code = heartbeat(beating, 4, "parked-join", member.generation_id, member.member_id)
        assert time.monotonic() - started < 2.0
        assert code in (ErrorCode.coordinator_not_available, ErrorCode.coordinator_load_in_progress,
                        ErrorCode.rebalance_in_progress, 0)
        wait_until(lambda: heartbeat(beating, 4, "parked-join", member.generation_id, member.member_id) in (
            0, ErrorCode.rebalance_in_progress), 30, "the successor serving the restored group")
        assert own_broker.coordinator_pid() not in (None, victim)


def test_a_group_its_last_members_left_is_empty_and_deletable_at_once_and_stays_deleted(own_broker: Broker) -> None:
    group = "left-empty"
    with KioClient(own_broker.bootstrap) as client, KioClient(own_broker.bootstrap) as other:
        first = join_until_member(client, 9, group)  # generation 1, alone
        sync(client, 5, group, first.generation_id, first.member_id, [(first.member_id, b"A")], protocol_name="range")
        second_id = join(other, 9, group).member_id  # MEMBER_ID_REQUIRED
        with ThreadPoolExecutor(1) as pool:  # both parked in JoinGroup until both have joined
            wait_for_join = pool.submit(join, other, 9, group, member_id=second_id)
            wait_until(lambda: heartbeat(client, 4, group, 1, first.member_id) == ErrorCode.rebalance_in_progress, 10,
                       "the rebalance to start")
            rejoined = join(client, 9, group, member_id=first.member_id)
            second = wait_for_join.result(10)
        assert rejoined.error_code == 0 and second.error_code == 0 and rejoined.generation_id == 2
        leave_request = request(LEAVE, 5, group_id=group, members=[
            {"member_id": first.member_id, "group_instance_id": None, "reason": "closing"},
            {"member_id": second.member_id, "group_instance_id": None, "reason": "closing"}])
        left = client.call(LEAVE, 5, leave_request)
        assert left.error_code == 0 and [m.error_code for m in left.members] == [0, 0]
        # No wait: the answer to LeaveGroup comes once the group is Empty and written.
        described = client.call(DESCRIBE, 5, request(DESCRIBE, 5, groups=[group], include_authorized_operations=False))
        assert (described.groups[0].error_code, described.groups[0].group_state, described.groups[0].members) == (0, "Empty", ())
        deleted = client.call(DELETE, 2, request(DELETE, 2, groups_names=[group]))
        assert [(r.group_id, r.error_code) for r in deleted.results] == [(group, 0)]
    own_broker.restart()
    with KioClient(own_broker.bootstrap) as client:
        wait_until(lambda: heartbeat(client, 4, "probe", 1, "probe") == ErrorCode.unknown_member_id, 20,
                   "the coordinator to finish loading")
        described = client.call(DESCRIBE, 5, request(DESCRIBE, 5, groups=[group], include_authorized_operations=False))
        assert (described.groups[0].error_code, described.groups[0].group_state) == (0, "Dead"), \
            "not loaded again: the group's tombstone came after its Empty record"
