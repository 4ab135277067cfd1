"""TxnOffsetCommit (28) from a client's bytes to the coordinator process's answer, on a
real GroupCoordinator over real partition logs: every version a client sends, Kafka's
authorization checks and their error codes, the sender checks of v3+, and OffsetFetch
v7's require_stable while the offsets wait for their transaction."""

from __future__ import annotations

import asyncio
from typing import Any, Callable, Iterator

import pytest
from kio.index import load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader

from broker import apis
from broker.context import CoordinatorContext
from broker.coordinator.api import SERVED
from broker.coordinator.forwarded import Forwarded
from coordination.acls.model import Operation, ResourceType
from coordination.groups import offsets_schema as schema
from coordination.groups.coordinator import GroupCoordinator
from coordination.groups.requests import JoiningMember, MemberRef
from tests.unit.broker.test_coordinator_forwarding import body_of, frame_of, over_the_rings, worker_reads
from tests.unit.coordination.test_coordinator_offsets import PARTITIONS, FileOffsetsLog, coordinator

TXN_COMMIT, FETCH = 28, 9
apis.load_all()

Allowed = Callable[[Operation, ResourceType, str], bool]


def everything(_op: Operation, _type: ResourceType, _name: str) -> bool:
    return True


def exists(topic: str, partition: int) -> bool:
    return topic in ("t", "u") and 0 <= partition < 2


@pytest.fixture
def groups(tmp_path: Any) -> Iterator[GroupCoordinator]:
    offsets_log = FileOffsetsLog(str(tmp_path))
    try:
        yield coordinator(offsets_log)
    finally:
        offsets_log.close()


def served(groups: GroupCoordinator, api_key: int, version: int, body: bytes, allowed: Allowed = everything) -> Any:
    """The client's frame through the worker and the rings to the coordinator process, and its answer decoded."""
    _spec, kept = worker_reads(frame_of(api_key, version, body))
    forwarded = over_the_rings(kept, api_key)

    def context_for(request: Forwarded, as_version: int) -> CoordinatorContext:
        return CoordinatorContext(groups, request.api_key, as_version, request.client_id, request.client_host,
                                  exists, allowed)

    answer = asyncio.run(SERVED[api_key].answer(forwarded, context_for))
    response, _size = entity_reader(load_response_schema(api_key, version))(answer, 0)
    return response


def txn_commit(version: int, topics: dict[str, list[int]], group: str = "g", member: MemberRef | None = None) -> bytes:
    def partition(index: int) -> dict[str, Any]:
        fields: dict[str, Any] = {"partition_index": index, "committed_offset": 100 + index, "committed_metadata": "m"}
        if version >= 2:
            fields["committed_leader_epoch"] = 4
        return fields

    fields: dict[str, Any] = {"transactional_id": "tx-1", "group_id": group, "producer_id": 9000, "producer_epoch": 1,
                              "topics": [{"name": t, "partitions": [partition(p) for p in ps]} for t, ps in topics.items()]}
    if version >= 3:
        member = member or MemberRef(-1, "", None)
        fields.update(generation_id=member.generation, member_id=member.member_id,
                      group_instance_id=member.group_instance_id)
    return body_of(TXN_COMMIT, version, **fields)


def codes(answer: Any) -> dict[tuple[str, int], int]:
    return {(t.name, p.partition_index): p.error_code for t in answer.topics for p in t.partitions}


def stable_fetch(groups: GroupCoordinator, partitions: list[int]) -> dict[int, tuple[int, int]]:
    """OffsetFetch v7 with require_stable: partition -> (offset, error)."""
    answer = served(groups, FETCH, 7, body_of(FETCH, 7, group_id="g", require_stable=True,
                                              topics=[{"name": "t", "partition_indexes": partitions}]))
    return {p.partition_index: (p.committed_offset, p.error_code) for t in answer.topics for p in t.partitions}


@pytest.mark.parametrize("version", range(0, 5))
def test_every_version_writes_pending_offsets_that_a_commit_makes_stable(groups: GroupCoordinator, version: int) -> None:
    answer = served(groups, TXN_COMMIT, version, txn_commit(version, {"t": [0, 1]}))
    assert codes(answer) == {("t", 0): 0, ("t", 1): 0}
    assert stable_fetch(groups, [0, 1]) == {0: (-1, ErrorCode.unstable_offset_commit),
                                            1: (-1, ErrorCode.unstable_offset_commit)}
    groups.complete_transaction(9000, True, schema.partition_for("g", PARTITIONS))
    assert stable_fetch(groups, [0, 1]) == {0: (100, 0), 1: (101, 0)}
    assert groups.groups["g"].offsets[("t", 0)].leader_epoch == (4 if version >= 2 else -1)


@pytest.mark.parametrize("refused,expected", [
    ((Operation.WRITE, ResourceType.TRANSACTIONAL_ID, "tx-1"), ErrorCode.transactional_id_authorization_failed),
    ((Operation.READ, ResourceType.GROUP, "g"), ErrorCode.group_authorization_failed),
])
def test_the_transactional_id_and_the_group_are_authorized_first(groups: GroupCoordinator, refused: tuple[Any, ...],
                                                                  expected: ErrorCode) -> None:
    answer = served(groups, TXN_COMMIT, 3, txn_commit(3, {"t": [0], "u": [1]}),
                    allowed=lambda *resource: resource != refused)
    assert codes(answer) == {("t", 0): expected, ("u", 1): expected}
    assert stable_fetch(groups, [0]) == {0: (-1, 0)}, "nothing written"


def test_unreadable_topics_and_missing_partitions_fail_alone(groups: GroupCoordinator) -> None:
    def allowed(op: Operation, kind: ResourceType, name: str) -> bool:
        return not (kind is ResourceType.TOPIC and name == "u")

    answer = served(groups, TXN_COMMIT, 3, txn_commit(3, {"t": [0, 7], "u": [0], "gone": [0]}), allowed=allowed)
    assert codes(answer) == {("t", 0): 0, ("t", 7): ErrorCode.unknown_topic_or_partition,
                             ("u", 0): ErrorCode.topic_authorization_failed,
                             ("gone", 0): ErrorCode.unknown_topic_or_partition}


def test_v3_senders_are_checked_against_the_group(groups: GroupCoordinator) -> None:
    async def join() -> MemberRef:
        joining = JoiningMember("", None, "consumer", (("range", b""),), 10_000, 10_000, "c", "/h")
        joined = await groups.join_group("g", joining, False)
        return MemberRef(joined.generation, joined.member_id, None)

    member = asyncio.run(join())
    # The member commits even while its group completes the rebalance (Kafka does not refuse it).
    assert codes(served(groups, TXN_COMMIT, 3, txn_commit(3, {"t": [0]}, member=member))) == {("t", 0): 0}
    stranger = MemberRef(member.generation, "stranger", None)
    assert codes(served(groups, TXN_COMMIT, 3, txn_commit(3, {"t": [0]}, member=stranger))) == {
        ("t", 0): ErrorCode.unknown_member_id}
    stale = MemberRef(member.generation + 1, member.member_id, None)
    assert codes(served(groups, TXN_COMMIT, 3, txn_commit(3, {"t": [0]}, member=stale))) == {
        ("t", 0): ErrorCode.illegal_generation}
    assert codes(served(groups, TXN_COMMIT, 3, txn_commit(3, {"t": [0]}, group="unseen", member=member))) == {
        ("t", 0): ErrorCode.illegal_generation}


@pytest.mark.parametrize("version,expected", [(0, ErrorCode.coordinator_not_available),
                                              (1, ErrorCode.coordinator_not_available),
                                              (2, ErrorCode.coordinator_load_in_progress),
                                              (4, ErrorCode.coordinator_load_in_progress)])
def test_a_loading_coordinator_answers_what_each_version_retries(groups: GroupCoordinator, version: int,
                                                                 expected: ErrorCode) -> None:
    groups.loading = True
    assert codes(served(groups, TXN_COMMIT, version, txn_commit(version, {"t": [0]}))) == {("t", 0): expected}
