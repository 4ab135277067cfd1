"""Committed offsets: OffsetCommit (8) 0-9, OffsetFetch (9) 0-9, OffsetDelete (47) 0,
TxnOffsetCommit (28) 0-5.

Behaviour: answered by the coordinator process; commits are acknowledged once appended to
the group's partition of __consumer_offsets (through its owning worker, fenced by the
coordinator epoch). A commit with generation -1 to a group that has no members is a
"simple consumer" commit and is accepted without membership (as Kafka does); otherwise
the member and generation must be current (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION,
REBALANCE_IN_PROGRESS while the group completes a rebalance). Commits for topics or
partitions that do not exist answer UNKNOWN_TOPIC_OR_PARTITION; metadata longer than
offset.metadata.max.bytes OFFSET_METADATA_TOO_LARGE. OffsetFetch answers -1 for a
partition without a committed offset. OffsetDelete refuses topics the group's members
subscribe to (GROUP_SUBSCRIBED_TO_TOPIC).

TxnOffsetCommit writes a transactional producer's offsets, which count once its
transaction commits (coordination/groups/txn_offsets.py); until then OffsetFetch with
require_stable answers UNSTABLE_OFFSET_COMMIT for those partitions. Checked as Kafka's
KafkaApis checks it: WRITE on the transactional id, READ on the group, READ on each topic;
then partitions that do not exist, then the sender as the group coordinator checks a
transactional commit (v3+ carry generation, member id and instance id).

OffsetCommit v0-1 and OffsetFetch v0 (Kafka 4.0 dropped them) are read by hand as v2 and v1
(broker/protocol/offsets_legacy.py), whose answers are theirs byte for byte; the coordinator
process reads them (the worker forwards the body as it came).

Version notes: OffsetCommit v2-4 retention_time (an explicit expiry), v3 throttle time,
v6 committed_leader_epoch, v7 group_instance_id, v8 flexible, v9 = v8 on the wire, its
generation is a consumer group member's epoch (KIP-848: STALE_MEMBER_EPOCH; a consumer
group's members must use v9+, UNSUPPORTED_VERSION below). OffsetFetch v2 null topics = all and a
top-level error, v5 committed_leader_epoch, v6 flexible, v7 require_stable, v8 several
groups per request, v9 member id and epoch (checked against a consumer group's members: UNKNOWN_MEMBER_ID,
STALE_MEMBER_EPOCH; ignored for classic groups).
TxnOffsetCommit v2 committed_leader_epoch, v3 flexible with generation, member id and
instance id, v4 = v3 (the client may get TRANSACTION_ABORTABLE). v5 is transaction.version
2's (KIP-890): the commit also adds the group's offsets partition to the transaction, as
AddOffsetsToTxn did; below v5 the partition must have been added (Kafka verifies it:
INVALID_TXN_STATE, TRANSACTION_ABORTABLE from v4).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

from kio.schema.offset_fetch.v8.request import OffsetFetchRequest as OffsetFetchV8
from kio.schema.offset_fetch.v9.request import OffsetFetchRequest as OffsetFetchV9
from kio.static.protocol import Entity

from broker.context import CoordinatorContext
from broker.coordinator.api import coordinator_api
from broker.coordinator.groups import milliseconds
from broker.protocol import codec, offsets_legacy
from broker.protocol.build import build
from broker.protocol.errors import ErrorCode
from coordination.acls.model import Operation, ResourceType
from coordination.groups.requests import MemberRef
from coordination.transactions.metadata import TV_2

if TYPE_CHECKING:  # ~200 kio classes, for mypy only: none is imported at run time (requests.py)
    from broker.protocol.requests import (
        OffsetCommitRequest,
        OffsetDeleteRequest,
        OffsetFetchRequest,
        TxnOffsetCommitRequest,
    )

# ---------------------------------------------------------------------- OffsetCommit
OFFSET_COMMIT = 8


def _commit_answer(version: int, request: OffsetCommitRequest, codes: list[int]) -> Entity:
    it = iter(codes)
    return build(codec.response_class(OFFSET_COMMIT, version), {"throttle_time": 0, "topics": [
        {"name": t.name, "partitions": [{"partition_index": p.partition_index, "error_code": next(it)} for p in t.partitions]}
        for t in request.topics]})


def _commit_error(request: OffsetCommitRequest, version: int, code: int) -> Entity:
    count = sum(len(t.partitions) for t in request.topics)
    return _commit_answer(version, request, [code] * count)


# Lost with the coordinator process (see coordinator_api): "loading", which clients retry in
# place (a commit is idempotent); the retry waits for the successor, which has loaded.
@coordinator_api(OFFSET_COMMIT, "OffsetCommit", 2, 9, error_response=_commit_error,
                 legacy={v: (as_version, offsets_legacy.decode_offset_commit)
                         for v, as_version in offsets_legacy.COMMIT_AS.items()},
                 lost=ErrorCode.coordinator_load_in_progress)
async def serve_offset_commit(ctx: CoordinatorContext, request: OffsetCommitRequest) -> Entity:
    # Kafka's checks: READ on the group (else every partition fails), READ on each topic.
    if not ctx.allowed(Operation.READ, ResourceType.GROUP, request.group_id):
        return _commit_error(request, ctx.api_version, ErrorCode.group_authorization_failed)
    readable = {t.name: ctx.allowed(Operation.READ, ResourceType.TOPIC, t.name) for t in request.topics}
    entries = [(t.name, int(p.partition_index), int(p.committed_offset), int(getattr(p, "committed_leader_epoch", -1)),
                p.committed_metadata) for t in request.topics if readable[t.name] for p in t.partitions]
    retention = milliseconds(getattr(request, "retention_time", None))
    member = MemberRef(int(request.generation_id_or_member_epoch), request.member_id,
                       getattr(request, "group_instance_id", None))
    committed = iter(await ctx.coordinator.commit_offsets(request.group_id, member, retention, entries, ctx.topic_exists,
                                                          ctx.api_version)
                     if entries else [])
    codes = [next(committed) if readable[t.name] else ErrorCode.topic_authorization_failed
             for t in request.topics for _p in t.partitions]
    return _commit_answer(ctx.api_version, request, codes)


# ---------------------------------------------------------------------- OffsetFetch
OFFSET_FETCH = 9


def _wanted(topics: Any) -> list[tuple[str, int]] | None:
    if topics is None:
        return None
    return [(t.name, int(p)) for t in topics for p in t.partition_indexes]


def _group_answer(ctx: CoordinatorContext, group_id: str, topics: Any, require_stable: bool,
                  member: tuple[str | None, int] | None = None) -> dict[str, Any]:
    """One group's offsets in the shape every version shares (v8+ nests it in groups).
    Kafka's checks: DESCRIBE on the group (else the group's error), DESCRIBE on each topic
    named (else TOPIC_AUTHORIZATION_FAILED for it); asked for all, only describable topics."""
    if not ctx.allowed(Operation.DESCRIBE, ResourceType.GROUP, group_id):
        return {"group_id": group_id, "error_code": ErrorCode.group_authorization_failed, "topics": []}
    wanted = _wanted(topics)

    def describable(topic: str) -> bool:
        return ctx.allowed(Operation.DESCRIBE, ResourceType.TOPIC, topic)

    asked = None if wanted is None else [(t, p) for t, p in wanted if describable(t)]
    code, found = ctx.coordinator.fetch_offsets(group_id, asked, require_stable, member) if asked is None or asked \
        else (0, [])
    if code:
        found = [(t, p, None, code) for t, p in asked or ()]
    if wanted is None:
        found = [entry for entry in found if describable(entry[0])]
    refused = [] if wanted is None else [(t, p) for t, p in wanted if (t, p) not in set(asked or ())]
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for topic, partition, value, partition_code in found:
        by_topic.setdefault(topic, []).append({
            "partition_index": partition,
            "committed_offset": value.offset if value is not None else -1,
            "committed_leader_epoch": value.leader_epoch if value is not None else -1,
            "metadata": value.metadata if value is not None else "",
            "error_code": partition_code})
    for topic, partition in refused:
        by_topic.setdefault(topic, []).append({"partition_index": partition, "committed_offset": -1,
                                               "committed_leader_epoch": -1, "metadata": "",
                                               "error_code": ErrorCode.topic_authorization_failed})
    return {"group_id": group_id, "error_code": code,
            "topics": [{"name": t, "partitions": parts} for t, parts in by_topic.items()]}


def _fetch_error(request: OffsetFetchRequest, version: int, code: int) -> Entity:
    groups = getattr(request, "groups", None)
    if groups is not None:
        return build(codec.response_class(OFFSET_FETCH, version), {"throttle_time": 0, "groups": [
            {"group_id": g.group_id, "error_code": code, "topics": ()} for g in groups]})
    wanted = _wanted(getattr(request, "topics", None)) or []
    return build(codec.response_class(OFFSET_FETCH, version), {"throttle_time": 0, "error_code": code, "topics": [
        {"name": t, "partitions": [{"partition_index": p, "committed_offset": -1, "committed_leader_epoch": -1,
                                    "metadata": "", "error_code": code}]} for t, p in wanted]})


@coordinator_api(OFFSET_FETCH, "OffsetFetch", 1, 9, error_response=_fetch_error,
                 legacy={v: (as_version, offsets_legacy.decode_offset_fetch)
                         for v, as_version in offsets_legacy.FETCH_AS.items()},
                 lost=ErrorCode.coordinator_load_in_progress)
def serve_offset_fetch(ctx: CoordinatorContext, request: OffsetFetchRequest) -> Entity:
    version = ctx.api_version
    if isinstance(request, (OffsetFetchV8, OffsetFetchV9)):  # v8 asks for several groups at once
        groups = [_group_answer(ctx, g.group_id, g.topics, request.require_stable,
                                (getattr(g, "member_id", None), int(getattr(g, "member_epoch", -1))))
                  for g in request.groups]
        return build(codec.response_class(OFFSET_FETCH, version), {"throttle_time": 0, "groups": groups})
    answer = _group_answer(ctx, request.group_id, request.topics, bool(getattr(request, "require_stable", False)))
    del answer["group_id"]  # before v8 the response is the one group's answer, and does not name it
    return build(codec.response_class(OFFSET_FETCH, version), {"throttle_time": 0, **answer})


# ---------------------------------------------------------------------- OffsetDelete
OFFSET_DELETE = 47


def _delete_answer(code: int, partitions: Sequence[tuple[str, int]], codes: list[int]) -> Entity:
    by_topic: dict[str, list[dict[str, int]]] = {}
    for (topic, partition), c in zip(partitions, codes):
        by_topic.setdefault(topic, []).append({"partition_index": partition, "error_code": c})
    return build(codec.response_class(OFFSET_DELETE, 0), {"error_code": code, "throttle_time": 0, "topics": [
        {"name": t, "partitions": parts} for t, parts in by_topic.items()]})


def _delete_error(request: OffsetDeleteRequest, version: int, code: int) -> Entity:
    return _delete_answer(code, [], [])


@coordinator_api(OFFSET_DELETE, "OffsetDelete", 0, 0, error_response=_delete_error)
async def serve_offset_delete(ctx: CoordinatorContext, request: OffsetDeleteRequest) -> Entity:
    # Kafka's checks: DELETE on the group, READ on each topic.
    if not ctx.allowed(Operation.DELETE, ResourceType.GROUP, request.group_id):
        return _delete_answer(ErrorCode.group_authorization_failed, [], [])
    partitions = [(t.name, int(p.partition_index)) for t in request.topics for p in t.partitions]
    permitted = [(t, p) for t, p in partitions if ctx.allowed(Operation.READ, ResourceType.TOPIC, t)]
    code, codes = await ctx.coordinator.delete_offsets(request.group_id, permitted)
    if code:
        return _delete_answer(code, [], [])
    deleted = dict(zip(permitted, codes))
    return _delete_answer(0, partitions, [deleted.get(tp, ErrorCode.topic_authorization_failed) for tp in partitions])


# ---------------------------------------------------------------------- TxnOffsetCommit
TXN_OFFSET_COMMIT = 28


def _txn_commit_code(version: int, code: int) -> int:
    # Clients before v2 (Kafka 0.11 to 2.0) do not know COORDINATOR_LOAD_IN_PROGRESS
    # here; Kafka answers them COORDINATOR_NOT_AVAILABLE, which they retry.
    if version < 2 and code == ErrorCode.coordinator_load_in_progress:
        return int(ErrorCode.coordinator_not_available)
    return code


def _txn_commit_answer(version: int, request: TxnOffsetCommitRequest, codes: list[int]) -> Entity:
    it = iter(codes)
    return build(codec.response_class(TXN_OFFSET_COMMIT, version), {"throttle_time": 0, "topics": [
        {"name": t.name, "partitions": [{"partition_index": p.partition_index,
                                         "error_code": _txn_commit_code(version, next(it))} for p in t.partitions]}
        for t in request.topics]})


def _txn_commit_error(request: TxnOffsetCommitRequest, version: int, code: int) -> Entity:
    count = sum(len(t.partitions) for t in request.topics)
    return _txn_commit_answer(version, request, [code] * count)


TXN_OFFSET_COMMIT_V2 = 5  # transaction.version 2: the commit adds the offsets partition itself
TXN_ABORTABLE_FROM = 4  # TxnOffsetCommit v4+ clients know TRANSACTION_ABORTABLE


async def _in_transaction(ctx: CoordinatorContext, request: TxnOffsetCommitRequest, version: int) -> int:
    """KIP-890: the group's offsets partition must be in the producer's transaction before
    its offsets are written there. A v2 client (v5) leaves adding it to us; a v1 client
    added it with AddOffsetsToTxn, which is verified."""
    transactions = ctx.transactions
    if transactions is None:
        return 0
    producer_id, epoch = int(request.producer_id), int(request.producer_epoch)
    if version >= TXN_OFFSET_COMMIT_V2:
        code = await transactions.add_offsets(request.transactional_id, producer_id, epoch, request.group_id, TV_2)
    else:
        code = transactions.verify_offsets(request.transactional_id, producer_id, epoch, request.group_id)
    if code == ErrorCode.producer_fenced:
        return int(ErrorCode.invalid_producer_epoch)
    if code == ErrorCode.transaction_abortable and version < TXN_ABORTABLE_FROM:
        return int(ErrorCode.invalid_txn_state)
    return code


@coordinator_api(TXN_OFFSET_COMMIT, "TxnOffsetCommit", 0, 5, error_response=_txn_commit_error,
                 lost=ErrorCode.coordinator_load_in_progress)
async def serve_txn_offset_commit(ctx: CoordinatorContext, request: TxnOffsetCommitRequest) -> Entity:
    # Kafka's checks, in its order: WRITE on the transactional id (it implies the producer
    # id), READ on the group (either refusal fails every partition), READ on each topic,
    # then the partitions that do not exist.
    version = ctx.api_version
    if not ctx.allowed(Operation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id):
        return _txn_commit_error(request, version, ErrorCode.transactional_id_authorization_failed)
    if not ctx.allowed(Operation.READ, ResourceType.GROUP, request.group_id):
        return _txn_commit_error(request, version, ErrorCode.group_authorization_failed)
    codes: list[int] = []
    entries: list[tuple[str, int, int, int, str | None]] = []
    for topic in request.topics:
        readable = ctx.allowed(Operation.READ, ResourceType.TOPIC, topic.name)
        for p in topic.partitions:
            if not readable:
                codes.append(ErrorCode.topic_authorization_failed)
            elif not ctx.topic_exists(topic.name, int(p.partition_index)):
                codes.append(ErrorCode.unknown_topic_or_partition)
            else:
                codes.append(-1)  # the coordinator's answer, below
                entries.append((topic.name, int(p.partition_index), int(p.committed_offset),
                                int(getattr(p, "committed_leader_epoch", -1)), p.committed_metadata))
    if entries and (code := await _in_transaction(ctx, request, version)):
        codes = [code if c == -1 else c for c in codes]
        entries = []
    if entries:
        sender = MemberRef(int(getattr(request, "generation_id", -1)), getattr(request, "member_id", ""),
                           getattr(request, "group_instance_id", None))
        answered = iter(await ctx.coordinator.txn_commit_offsets(
            request.group_id, int(request.producer_id), int(request.producer_epoch), sender, entries))
        codes = [next(answered) if code == -1 else code for code in codes]
    return _txn_commit_answer(version, request, codes)
