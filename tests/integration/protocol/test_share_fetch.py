"""Share partitions on a real broker (KIP-932), by raw ShareFetch and ShareAcknowledge
requests: records acquired by one member at a time, released records delivered again with a
higher delivery count, rejected ones never, acknowledgements persisted through the share
coordinator (a killed coordinator process, then a restarted broker, deliver nothing twice),
a member's records given back when its session's connection closes, and bad input answered
with Kafka's error codes without changing the state."""

from __future__ import annotations

import os
import signal
import uuid
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from storage.records import iter_batches
from tests.integration.clients import Rec, confluent_create_topic, confluent_produce
from tests.integration.conftest import Broker, shared_broker, wait_until
from tests.integration.coordination.test_consumer_protocol import topic_id
from tests.integration.coordination.test_group_protocol import request
from tests.integration.kio_client import KioClient

# Two workers: the partitions' owners are not always the worker a connection landed on.
SHARE_BROKER = {"offsets.topic.num.partitions": 3, "share.coordinator.state.topic.num.partitions": 3}
pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def broker(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """One broker for the tests that each keep to a topic and a share group of their own; the
    test that kills the coordinator and restarts the broker starts one of its own."""
    request.param = dict(SHARE_BROKER)  # type: ignore[attr-defined]
    yield from shared_broker(request, tmp_path_factory)

SHARE_FETCH, SHARE_ACK = 78, 79
GAP, ACCEPT, RELEASE, REJECT = 0, 1, 2, 3


class Member:
    """One share consumer's connection and its share session."""

    def __init__(self, broker: Broker, group: str, member_id: str | None = None) -> None:
        self.client = KioClient(broker.bootstrap)
        self.group = group
        self.member_id = member_id or str(uuid.uuid4())
        self.epoch = 0

    def fetch(self, topics: dict[uuid.UUID, dict[int, list[tuple[int, int, list[int]]]]],
              max_wait_ms: int = 0, epoch: int | None = None, forget: dict[uuid.UUID, list[int]] | None = None) -> Any:
        body = request(SHARE_FETCH, 1, group_id=self.group, member_id=self.member_id,
                       share_session_epoch=self.epoch if epoch is None else epoch, max_wait=max_wait_ms,
                       min_bytes=1, max_bytes=1 << 20, max_records=500, batch_size=500,
                       topics=[{"topic_id": t, "partitions": [
                           {"partition_index": p, "acknowledgement_batches": [
                               {"first_offset": a, "last_offset": b, "acknowledge_types": types}
                               for a, b, types in acks]} for p, acks in parts.items()]}
                           for t, parts in topics.items()],
                       forgotten_topics_data=[{"topic_id": t, "partitions": ps} for t, ps in (forget or {}).items()])
        answer = self.client.call(SHARE_FETCH, 1, body)
        if answer.error_code == 0 and epoch is None:
            self.epoch = 1 if self.epoch == 0 else self.epoch + 1
        return answer

    def acknowledge(self, topics: dict[uuid.UUID, dict[int, list[tuple[int, int, list[int]]]]],
                    epoch: int | None = None) -> Any:
        body = request(SHARE_ACK, 1, group_id=self.group, member_id=self.member_id,
                       share_session_epoch=self.epoch if epoch is None else epoch,
                       topics=[{"topic_id": t, "partitions": [
                           {"partition_index": p, "acknowledgement_batches": [
                               {"first_offset": a, "last_offset": b, "acknowledge_types": types}
                               for a, b, types in acks]} for p, acks in parts.items()]}
                           for t, parts in topics.items()])
        answer = self.client.call(SHARE_ACK, 1, body)
        if answer.error_code == 0 and epoch is None:
            self.epoch += 1
        return answer

    def close(self) -> None:
        self.client.close()


def delivered(answer: Any) -> dict[int, list[tuple[int, bytes, int]]]:
    """partition -> (offset, value, delivery count) of every acquired record in the answer."""
    out: dict[int, list[tuple[int, bytes, int]]] = {}
    for topic in answer.responses:
        for p in topic.partitions:
            counts = {o: a.delivery_count for a in p.acquired_records for o in range(a.first_offset, a.last_offset + 1)}
            records = [(r.offset, r.value) for _h, rs in iter_batches(p.records or b"") for r in rs]
            got = [(offset, value, counts[offset]) for offset, value in records if offset in counts]
            if got:
                out.setdefault(p.partition_index, []).extend(got)
    return out


def codes(answer: Any) -> dict[int, tuple[int, int]]:
    return {p.partition_index: (p.error_code, getattr(p, "acknowledge_error_code", 0))
            for t in answer.responses for p in t.partitions}


def produce(broker: Broker, topic: str, values: list[bytes]) -> None:
    """Into partition 0, one batch per call."""
    confluent_produce(broker.bootstrap, topic, [Rec(0, None, v, (), 1_700_000_000_000 + i) for i, v in enumerate(values)])


def test_members_share_a_partition_and_acknowledgements_decide_redelivery(broker: Broker) -> None:
    name = "share-raw"
    confluent_create_topic(broker.bootstrap, name, 1)
    with KioClient(broker.bootstrap) as admin:
        tid = topic_id(admin, name)
    produce(broker, name, [b"before-%d" % i for i in range(3)])
    first, second = Member(broker, "sg-raw"), Member(broker, "sg-raw")
    try:
        # The first fetch starts the share partition at the log end (share.auto.offset.reset
        # latest): records produced before are not delivered.
        opened = first.fetch({tid: {0: []}})
        assert opened.error_code == 0 and delivered(opened) == {}
        produce(broker, name, [b"v%d" % i for i in range(10)])
        got = wait_until(lambda: delivered(first.fetch({tid: {}}, max_wait_ms=500)).get(0), 10, "records acquired")
        assert [(o, v, c) for o, v, c in got] == [(3 + i, b"v%d" % i, 1) for i in range(10)]
        # Everything is held by the first member: the second gets nothing.
        assert delivered(second.fetch({tid: {0: []}})) == {}
        # Accept 3-5, release 6-9, reject 10-12 (one type per record for the last range).
        answer = first.acknowledge({tid: {0: [(3, 5, [ACCEPT]), (6, 9, [RELEASE]), (10, 12, [REJECT, REJECT, REJECT])]}})
        assert answer.error_code == 0 and codes(answer) == {0: (0, 0)}
        again = delivered(second.fetch({tid: {}}))
        assert [(o, c) for o, _v, c in again[0]] == [(6, 2), (7, 2), (8, 2), (9, 2)]
        # Acknowledging records another member holds, or already accepted, changes nothing.
        refused = first.acknowledge({tid: {0: [(6, 9, [ACCEPT])]}})
        assert codes(refused) == {0: (ErrorCode.invalid_record_state, 0)}
        done = second.acknowledge({tid: {0: [(6, 9, [ACCEPT])]}})
        assert codes(done) == {0: (0, 0)}
        assert delivered(first.fetch({tid: {}})) == {}
    finally:
        first.close()
        second.close()


def test_bad_share_session_requests_get_kafkas_errors(broker: Broker) -> None:
    name = "share-bad"
    confluent_create_topic(broker.bootstrap, name, 2)
    with KioClient(broker.bootstrap) as admin:
        tid = topic_id(admin, name)
    member = Member(broker, "sg-bad")
    try:
        assert member.fetch({tid: {0: []}}, epoch=3).error_code == ErrorCode.share_session_not_found
        assert member.acknowledge({tid: {0: [(0, 0, [ACCEPT])]}}, epoch=0).error_code == \
            ErrorCode.invalid_share_session_epoch
        # The first fetch of a session may not acknowledge.
        assert member.fetch({tid: {0: [(0, 0, [ACCEPT])]}}).error_code == ErrorCode.invalid_request
        assert member.fetch({tid: {0: [], 1: []}}).error_code == 0
        assert member.fetch({tid: {}}, epoch=7).error_code == ErrorCode.invalid_share_session_epoch
        # Malformed batches (unordered, bad types, a type list of the wrong length, first after
        # last) fail that partition's acknowledgements only, as Kafka's.
        for acks in ([(5, 6, [ACCEPT]), (0, 1, [ACCEPT])], [(0, 1, [9])], [(0, 3, [ACCEPT, ACCEPT])], [(4, 2, [ACCEPT])]):
            answer = member.fetch({tid: {0: acks}})
            assert answer.error_code == 0 and codes(answer)[0] == (0, ErrorCode.invalid_request)
        refused = member.acknowledge({tid: {0: [(0, 1, [9])], 1: [(0, 0, [ACCEPT])]}})
        assert codes(refused) == {0: (ErrorCode.invalid_request, 0), 1: (ErrorCode.invalid_record_state, 0)}
        # Records nobody acquired.
        assert codes(member.fetch({tid: {0: [(0, 0, [ACCEPT])]}}))[0][1] == ErrorCode.invalid_record_state
        unknown = uuid.uuid4()
        answer = member.fetch({unknown: {0: []}})
        assert codes(answer) == {0: (ErrorCode.unknown_topic_id, 0)}
        assert codes(member.fetch({tid: {9: []}}))[9][0] == ErrorCode.unknown_topic_or_partition
        nameless = Member(broker, "")
        assert nameless.fetch({tid: {0: []}}).error_code == ErrorCode.invalid_request
        nameless.close()
        # A closed session is gone: a fetch or an acknowledgement on it is SHARE_SESSION_NOT_FOUND.
        assert member.fetch({}, epoch=-1).error_code == 0
        assert member.fetch({tid: {}}).error_code == ErrorCode.share_session_not_found
        assert member.acknowledge({tid: {0: [(0, 0, [ACCEPT])]}}).error_code == ErrorCode.share_session_not_found
    finally:
        member.close()


def test_a_closed_connection_gives_its_records_back_at_once(broker: Broker) -> None:
    name = "share-close"
    confluent_create_topic(broker.bootstrap, name, 1)
    with KioClient(broker.bootstrap) as admin:
        tid = topic_id(admin, name)
    holder, other = Member(broker, "sg-close"), Member(broker, "sg-close")
    try:
        holder.fetch({tid: {0: []}})
        produce(broker, name, [b"c%d" % i for i in range(5)])
        held = wait_until(lambda: delivered(holder.fetch({tid: {}}, max_wait_ms=500)).get(0), 10, "records acquired")
        assert len(held) == 5
        holder.close()
        # Released with the session (not after the 30 s lock): delivered again, count 2.
        again = delivered(other.fetch({tid: {0: []}})).get(0) or wait_until(
            lambda: delivered(other.fetch({tid: {}}, max_wait_ms=200)).get(0), 10, "records released")
        assert [(o, c) for o, _v, c in again] == [(o, 2) for o, _v, _c in held]
    finally:
        other.close()


def test_acknowledged_records_stay_acknowledged_after_the_coordinator_and_the_broker_die(broker_factory: Any) -> None:
    broker = broker_factory(overrides=dict(SHARE_BROKER))
    name = "share-durable"
    confluent_create_topic(broker.bootstrap, name, 1)
    with KioClient(broker.bootstrap) as admin:
        tid = topic_id(admin, name)
    member = Member(broker, "sg-durable")
    member.fetch({tid: {0: []}})
    produce(broker, name, [b"d%d" % i for i in range(6)])
    got = wait_until(lambda: delivered(member.fetch({tid: {}}, max_wait_ms=500)).get(0), 10, "records acquired")
    offsets = [o for o, _v, _c in got]
    assert codes(member.acknowledge({tid: {0: [(offsets[0], offsets[2], [ACCEPT])]}})) == {0: (0, 0)}
    member.close()
    coordinator = broker.coordinator_pid()
    assert coordinator is not None
    os.kill(coordinator, signal.SIGKILL)
    wait_until(lambda: broker.coordinator_pid() not in (None, coordinator), 20, "a new coordinator process")
    broker.restart()
    after = Member(broker, "sg-durable")
    try:
        again = delivered(after.fetch({tid: {0: []}})).get(0) or wait_until(
            lambda: delivered(after.fetch({tid: {}}, max_wait_ms=500)).get(0), 20, "records again")
        # The accepted three never come back; the three held at the restart do, their
        # delivery count as last written (acquisitions are not persisted, as in Kafka).
        assert [o for o, _v, _c in again] == offsets[3:]
    finally:
        after.close()


def test_the_group_features_are_finalized_with_their_apis(broker: Broker) -> None:
    from tests.integration.protocol.test_transactions_v2 import features

    with KioClient(broker.bootstrap) as client:
        supported, finalized, versions = features(client)
    assert supported["group.version"] == (0, 1) and finalized["group.version"] == (1, 1)
    assert supported["share.version"] == (0, 1) and finalized["share.version"] == (1, 1)
    assert {k: versions[k] for k in (68, 76, 77, 78, 79)} == {68: 1, 76: 1, 77: 1, 78: 1, 79: 1}
