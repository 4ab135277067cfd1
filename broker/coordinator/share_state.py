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
from typing import TYPE_CHECKING, Any, Awaitable, Callable

from kio.static.protocol import Entity

from broker.context import CoordinatorContext
from broker.coordinator.api import coordinator_api
from broker.protocol import codec
from broker.protocol.build import build
from broker.protocol.errors import ErrorCode
from coordination.share.persisted import PersistedState
from coordination.share.records import NO_DELIVERY_COMPLETE_COUNT, StateBatch
from coordination.share.state_coordinator import ShareStateCoordinator

if TYPE_CHECKING:  # ~200 kio classes, for mypy only: none is imported at run time (requests.py)
    from broker.protocol.requests import (
        DeleteShareGroupStateRequest,
        InitializeShareGroupStateRequest,
        ReadShareGroupStateRequest,
        ReadShareGroupStateSummaryRequest,
        ShareStateRequest,
        WriteShareGroupStateRequest,
    )

INITIALIZE = 83
READ = 84
WRITE = 85
DELETE = 86
READ_SUMMARY = 87

PartitionAnswer = dict[str, object]
# One share-partition of a request (its kio PartitionData) served: the answer's partition result.
PartitionServe = Callable[[ShareStateCoordinator, str, uuid.UUID, object], Awaitable[PartitionAnswer]]


def share_coordinator(ctx: CoordinatorContext) -> ShareStateCoordinator:
    if ctx.share_state is None:
        raise RuntimeError("this coordinator process has no share coordinator")
    return ctx.share_state


def _message(code: int) -> str | None:
    return None if code == 0 else ErrorCode(code).name


def _answer(api_key: int, version: int, results: list[tuple[uuid.UUID | None, list[PartitionAnswer]]]) -> Entity:
    return build(codec.response_class(api_key, version), {
        "results": [{"topic_id": topic_id, "partitions": partitions} for topic_id, partitions in results]})


def _failed(api_key: int, request: ShareStateRequest, version: int, code: int,
            fill: Callable[[int, int], PartitionAnswer]) -> Entity:
    """The answer giving every partition asked ``code``."""
    return _answer(api_key, version, [(topic.topic_id, [fill(int(p.partition), code) for p in topic.partitions])
                                      for topic in request.topics])


async def _serve(ctx: CoordinatorContext, api_key: int, request: ShareStateRequest,
                 fill: Callable[[int, int], PartitionAnswer], one: PartitionServe) -> Entity:
    """Each share-partition asked, answered by ``one`` (concurrently: the coordinator orders
    the operations of one share-partition)."""
    version = ctx.api_version
    if not ctx.from_broker():
        return _failed(api_key, request, version, ErrorCode.cluster_authorization_failed, fill)
    topics = request.topics
    if not request.group_id or not topics or any(not topic.partitions for topic in topics):
        return _answer(api_key, version, [])
    coordinator = share_coordinator(ctx)
    results: list[tuple[uuid.UUID | None, list[PartitionAnswer]]] = []
    for topic in topics:
        topic_id = topic.topic_id
        if topic_id is None:  # Kafka: a null topic id is INVALID_REQUEST
            results.append((None, [fill(int(p.partition), ErrorCode.invalid_request) for p in topic.partitions]))
            continue
        answers = await asyncio.gather(*(one(coordinator, request.group_id, topic_id, p) for p in topic.partitions))
        results.append((topic_id, list(answers)))
    return _answer(api_key, version, results)


# ---------------------------------------------------------------------- InitializeShareGroupState
def _code_answer(partition: int, code: int) -> PartitionAnswer:
    return {"partition": partition, "error_code": code, "error_message": _message(code)}


def _initialize_error(request: InitializeShareGroupStateRequest, version: int, code: int) -> Entity:
    return _failed(INITIALIZE, request, version, code, _code_answer)


@coordinator_api(INITIALIZE, "InitializeShareGroupState", 0, 0, error_response=_initialize_error)
async def serve_initialize_share_group_state(ctx: CoordinatorContext, request: InitializeShareGroupStateRequest) -> Entity:
    async def one(share: ShareStateCoordinator, group_id: str, topic_id: uuid.UUID, p: Any) -> PartitionAnswer:
        code = await share.initialize(group_id, topic_id, int(p.partition), int(p.state_epoch), int(p.start_offset))
        return _code_answer(int(p.partition), code)

    return await _serve(ctx, INITIALIZE, request, _code_answer, one)


# ---------------------------------------------------------------------- ReadShareGroupState
def _read_answer(partition: int, state: PersistedState) -> PartitionAnswer:
    code = state.error_code
    return {"partition": partition, "error_code": code, "error_message": _message(code),
            "state_epoch": state.state_epoch, "start_offset": state.start_offset,
            "state_batches": [{"first_offset": b.first_offset, "last_offset": b.last_offset,
                               "delivery_state": b.delivery_state, "delivery_count": b.delivery_count}
                              for b in state.batches]}


def _read_failed(partition: int, code: int) -> PartitionAnswer:
    return _read_answer(partition, PersistedState(code))


def _read_error(request: ReadShareGroupStateRequest, version: int, code: int) -> Entity:
    return _failed(READ, request, version, code, _read_failed)


@coordinator_api(READ, "ReadShareGroupState", 0, 0, error_response=_read_error)
async def serve_read_share_group_state(ctx: CoordinatorContext, request: ReadShareGroupStateRequest) -> Entity:
    async def one(share: ShareStateCoordinator, group_id: str, topic_id: uuid.UUID, p: Any) -> PartitionAnswer:
        state = await share.read(group_id, topic_id, int(p.partition), int(p.leader_epoch))
        return _read_answer(int(p.partition), state)

    return await _serve(ctx, READ, request, _read_failed, one)


# ---------------------------------------------------------------------- WriteShareGroupState
def _write_error(request: WriteShareGroupStateRequest, version: int, code: int) -> Entity:
    return _failed(WRITE, request, version, code, _code_answer)


@coordinator_api(WRITE, "WriteShareGroupState", 0, 1, error_response=_write_error)
async def serve_write_share_group_state(ctx: CoordinatorContext, request: WriteShareGroupStateRequest) -> Entity:
    async def one(share: ShareStateCoordinator, group_id: str, topic_id: uuid.UUID, p: Any) -> PartitionAnswer:
        batches = tuple(StateBatch(int(b.first_offset), int(b.last_offset), int(b.delivery_state),
                                   int(b.delivery_count)) for b in p.state_batches)
        count = int(getattr(p, "delivery_complete_count", NO_DELIVERY_COMPLETE_COUNT))
        code = await share.write(group_id, topic_id, int(p.partition), int(p.state_epoch), int(p.leader_epoch),
                                 int(p.start_offset), count, batches)
        return _code_answer(int(p.partition), code)

    return await _serve(ctx, WRITE, request, _code_answer, one)


# ---------------------------------------------------------------------- DeleteShareGroupState
def _delete_error(request: DeleteShareGroupStateRequest, version: int, code: int) -> Entity:
    return _failed(DELETE, request, version, code, _code_answer)


@coordinator_api(DELETE, "DeleteShareGroupState", 0, 0, error_response=_delete_error)
async def serve_delete_share_group_state(ctx: CoordinatorContext, request: DeleteShareGroupStateRequest) -> Entity:
    async def one(share: ShareStateCoordinator, group_id: str, topic_id: uuid.UUID, p: Any) -> PartitionAnswer:
        return _code_answer(int(p.partition), await share.delete(group_id, topic_id, int(p.partition)))

    return await _serve(ctx, DELETE, request, _code_answer, one)


# ---------------------------------------------------------------------- ReadShareGroupStateSummary
def _summary_answer(partition: int, state: PersistedState) -> PartitionAnswer:
    code = state.error_code
    return {"partition": partition, "error_code": code, "error_message": _message(code),
            "state_epoch": state.state_epoch, "leader_epoch": state.leader_epoch, "start_offset": state.start_offset,
            "delivery_complete_count": state.delivery_complete_count}


def _summary_failed(partition: int, code: int) -> PartitionAnswer:
    return _summary_answer(partition, PersistedState(code))


def _summary_error(request: ReadShareGroupStateSummaryRequest, version: int, code: int) -> Entity:
    return _failed(READ_SUMMARY, request, version, code, _summary_failed)


@coordinator_api(READ_SUMMARY, "ReadShareGroupStateSummary", 0, 1, error_response=_summary_error)
async def serve_read_share_group_state_summary(ctx: CoordinatorContext, request: ReadShareGroupStateSummaryRequest) -> Entity:
    async def one(share: ShareStateCoordinator, group_id: str, topic_id: uuid.UUID, p: Any) -> PartitionAnswer:
        state = await share.summary(group_id, topic_id, int(p.partition), int(p.leader_epoch))
        return _summary_answer(int(p.partition), state)

    return await _serve(ctx, READ_SUMMARY, request, _summary_failed, one)
