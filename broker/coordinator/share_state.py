"""The share coordinator's APIs (KIP-932), brokers' requests about share-partition state:
InitializeShareGroupState (83) v0, ReadShareGroupState (84) v0, WriteShareGroupState (85)
v0-1, DeleteShareGroupState (86) v0, ReadShareGroupStateSummary (87) v0-1.

Behaviour: served by the coordinator process; the semantics live in
coordination/share/state_coordinator.py, this module translates between kio entities and its
values, one share-partition at a time (Kafka's ShareCoordinatorService does the same). Only
brokers send these (Kafka: CLUSTER_ACTION on the cluster); anyone else gets
CLUSTER_AUTHORIZATION_FAILED on every partition. As Kafka's service answers them, a request
with an empty group id, no topics or a topic without partitions gets an answer without
results; a null topic id or a negative partition is INVALID_REQUEST for that partition.

Version notes: WriteShareGroupState v1 carries the delivery complete count (v0's writes
leave it unknown, -1); ReadShareGroupStateSummary v1 answers it.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any, Awaitable, Callable, Sequence

from kio.static.protocol import Entity

from broker.context import CoordinatorContext
from broker.coordinator.api import coordinator_api
from broker.protocol import codec
from broker.protocol.build import build
from broker.protocol.errors import ErrorCode
from coordination.share.persisted import PersistedState
from coordination.share.records import NO_DELIVERY_COMPLETE_COUNT, StateBatch
from coordination.share.state_coordinator import ShareStateCoordinator

INITIALIZE = 83
READ = 84
WRITE = 85
DELETE = 86
READ_SUMMARY = 87

PartitionAnswer = dict[str, Any]


def share_coordinator(ctx: CoordinatorContext) -> ShareStateCoordinator:
    if ctx.share_state is None:
        raise RuntimeError("this coordinator process has no share coordinator")
    return ctx.share_state


def _message(code: int) -> str | None:
    return None if code == 0 else ErrorCode(code).name


def _answer(api_key: int, version: int, results: list[tuple[uuid.UUID | None, list[PartitionAnswer]]]) -> Entity:
    return build(codec.response_class(api_key, version), {
        "results": [{"topic_id": topic_id, "partitions": partitions} for topic_id, partitions in results]})


def _error_of(api_key: int, fill: Callable[[int, int], PartitionAnswer]) -> Callable[[Any, int, int], Entity]:
    def error(request: Any, version: int, code: int) -> Entity:
        return _answer(api_key, version, [(topic.topic_id, [fill(int(p.partition), code) for p in topic.partitions])
                                          for topic in getattr(request, "topics", ())])
    return error


async def _serve(ctx: CoordinatorContext, api_key: int, request: Any, error: Callable[[Any, int, int], Entity],
                 one: Callable[[ShareStateCoordinator, str, uuid.UUID, Any], Awaitable[PartitionAnswer]]) -> Entity:
    """Each share-partition asked, answered by ``one`` (concurrently: the coordinator orders
    the operations of one share-partition)."""
    version = ctx.api_version
    if not ctx.from_broker():
        return error(request, version, ErrorCode.cluster_authorization_failed)
    topics: Sequence[Any] = request.topics
    if not request.group_id or not topics or any(not topic.partitions for topic in topics):
        return _answer(api_key, version, [])
    coordinator = share_coordinator(ctx)
    results = []
    for topic in topics:
        answers = await asyncio.gather(*(one(coordinator, request.group_id, topic.topic_id, p)
                                         for p in topic.partitions))
        results.append((topic.topic_id, list(answers)))
    return _answer(api_key, version, results)


# ---------------------------------------------------------------------- InitializeShareGroupState
def _code_answer(partition: int, code: int) -> PartitionAnswer:
    return {"partition": partition, "error_code": code, "error_message": _message(code)}


_initialize_error = _error_of(INITIALIZE, _code_answer)


@coordinator_api(INITIALIZE, "InitializeShareGroupState", 0, 0, error_response=_initialize_error)
async def serve_initialize_share_group_state(ctx: CoordinatorContext, request: Any) -> Entity:
    async def one(share: ShareStateCoordinator, group_id: str, topic_id: uuid.UUID, p: Any) -> PartitionAnswer:
        code = await share.initialize(group_id, topic_id, int(p.partition), int(p.state_epoch), int(p.start_offset))
        return _code_answer(int(p.partition), code)

    return await _serve(ctx, INITIALIZE, request, _initialize_error, one)


# ---------------------------------------------------------------------- ReadShareGroupState
def _read_answer(partition: int, state: PersistedState) -> PartitionAnswer:
    code = state.error_code
    return {"partition": partition, "error_code": code, "error_message": _message(code),
            "state_epoch": state.state_epoch, "start_offset": state.start_offset,
            "state_batches": [{"first_offset": b.first_offset, "last_offset": b.last_offset,
                               "delivery_state": b.delivery_state, "delivery_count": b.delivery_count}
                              for b in state.batches]}


_read_error = _error_of(READ, lambda partition, code: _read_answer(partition, PersistedState(code)))


@coordinator_api(READ, "ReadShareGroupState", 0, 0, error_response=_read_error)
async def serve_read_share_group_state(ctx: CoordinatorContext, request: Any) -> Entity:
    async def one(share: ShareStateCoordinator, group_id: str, topic_id: uuid.UUID, p: Any) -> PartitionAnswer:
        state = await share.read(group_id, topic_id, int(p.partition), int(p.leader_epoch))
        return _read_answer(int(p.partition), state)

    return await _serve(ctx, READ, request, _read_error, one)


# ---------------------------------------------------------------------- WriteShareGroupState
_write_error = _error_of(WRITE, _code_answer)


@coordinator_api(WRITE, "WriteShareGroupState", 0, 1, error_response=_write_error)
async def serve_write_share_group_state(ctx: CoordinatorContext, request: Any) -> Entity:
    async def one(share: ShareStateCoordinator, group_id: str, topic_id: uuid.UUID, p: Any) -> PartitionAnswer:
        batches = tuple(StateBatch(int(b.first_offset), int(b.last_offset), int(b.delivery_state),
                                   int(b.delivery_count)) for b in p.state_batches)
        count = int(getattr(p, "delivery_complete_count", NO_DELIVERY_COMPLETE_COUNT))
        code = await share.write(group_id, topic_id, int(p.partition), int(p.state_epoch), int(p.leader_epoch),
                                 int(p.start_offset), count, batches)
        return _code_answer(int(p.partition), code)

    return await _serve(ctx, WRITE, request, _write_error, one)


# ---------------------------------------------------------------------- DeleteShareGroupState
_delete_error = _error_of(DELETE, _code_answer)


@coordinator_api(DELETE, "DeleteShareGroupState", 0, 0, error_response=_delete_error)
async def serve_delete_share_group_state(ctx: CoordinatorContext, request: Any) -> Entity:
    async def one(share: ShareStateCoordinator, group_id: str, topic_id: uuid.UUID, p: Any) -> PartitionAnswer:
        return _code_answer(int(p.partition), await share.delete(group_id, topic_id, int(p.partition)))

    return await _serve(ctx, DELETE, request, _delete_error, one)


# ---------------------------------------------------------------------- ReadShareGroupStateSummary
def _summary_answer(partition: int, state: PersistedState) -> PartitionAnswer:
    code = state.error_code
    return {"partition": partition, "error_code": code, "error_message": _message(code),
            "state_epoch": state.state_epoch, "leader_epoch": state.leader_epoch, "start_offset": state.start_offset,
            "delivery_complete_count": state.delivery_complete_count}


_summary_error = _error_of(READ_SUMMARY, lambda partition, code: _summary_answer(partition, PersistedState(code)))


@coordinator_api(READ_SUMMARY, "ReadShareGroupStateSummary", 0, 1, error_response=_summary_error)
async def serve_read_share_group_state_summary(ctx: CoordinatorContext, request: Any) -> Entity:
    async def one(share: ShareStateCoordinator, group_id: str, topic_id: uuid.UUID, p: Any) -> PartitionAnswer:
        state = await share.summary(group_id, topic_id, int(p.partition), int(p.leader_epoch))
        return _summary_answer(int(p.partition), state)

    return await _serve(ctx, READ_SUMMARY, request, _summary_error, one)
