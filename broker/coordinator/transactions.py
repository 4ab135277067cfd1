"""The transaction coordinator's APIs: InitProducerId with a transactional id (22, the
worker forwards those; broker/apis/init_producer_id.py), AddPartitionsToTxn (24) 0-5,
AddOffsetsToTxn (25) 0-4, EndTxn (26) 0-5.

Behaviour: served by the coordinator process; the semantics live in
coordination/transactions/coordinator.py, this module translates between kio entities and
the coordinator's values and makes Kafka's KafkaApis checks: WRITE on the transactional id
(TRANSACTIONAL_ID_AUTHORIZATION_FAILED), WRITE on each topic added (TOPIC_AUTHORIZATION_FAILED;
an internal topic is never added by a client), READ on the group of AddOffsetsToTxn.
AddPartitionsToTxn adds all its partitions or none: one unknown or unauthorized partition
fails the request, the others answered OPERATION_NOT_ATTEMPTED.

Version notes: before v2 of AddPartitionsToTxn, AddOffsetsToTxn, EndTxn (v4 of
InitProducerId) clients do not know PRODUCER_FENCED: they get INVALID_PRODUCER_EPOCH, as
Kafka answers them. AddPartitionsToTxn v4+ is the brokers' (KIP-890): a batch of
transactions, each either verified (``verify_only``: is each partition in the producer's
ongoing transaction? TRANSACTION_ABORTABLE if not) or added (a transaction.version 2
producer's partition, added by the broker it produces to); a sender that is not a broker
gets CLUSTER_AUTHORIZATION_FAILED at the top. v5 only lets the answer carry
TRANSACTION_ABORTABLE. EndTxn v5 is transaction.version 2: the epoch is bumped at every end
and the answer carries the producer id and epoch to go on with. InitProducerId v5 only
allows TRANSACTION_ABORTABLE in its answer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kio.static.protocol import Entity

from broker.context import CoordinatorContext
from broker.coordinator.api import coordinator_api, served_in_coordinator
from broker.coordinator.groups import milliseconds
from broker.protocol import codec
from broker.protocol.build import build
from broker.protocol.errors import ErrorCode
from coordination.acls.model import Operation, ResourceType
from coordination.transactions.coordinator import TransactionCoordinator
from coordination.transactions.metadata import TV_1, TV_2
from storage.types import TopicPartition

if TYPE_CHECKING:  # ~200 kio classes, for mypy only: none is imported at run time (requests.py)
    from broker.protocol.requests import (
        AddOffsetsToTxnRequest,
        AddPartitionsToTxnRequest,
        EndTxnRequest,
        InitProducerIdRequest,
    )

INIT_PRODUCER_ID = 22
ADD_PARTITIONS_TO_TXN = 24
ADD_OFFSETS_TO_TXN = 25
END_TXN = 26
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})


def _for_version(code: int, version: int, fenced_from: int = 2) -> int:
    """PRODUCER_FENCED as a client of that version understands it."""
    if code == ErrorCode.producer_fenced and version < fenced_from:
        return int(ErrorCode.invalid_producer_epoch)
    return int(code)


def transaction_coordinator(ctx: CoordinatorContext) -> TransactionCoordinator:
    """The process's transaction coordinator (every coordinator process has one)."""
    if ctx.transactions is None:
        raise RuntimeError("this coordinator process has no transaction coordinator")
    return ctx.transactions


def _write_allowed(ctx: CoordinatorContext, transactional_id: str) -> bool:
    return ctx.allowed(Operation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id)


# ---------------------------------------------------------------------- InitProducerId
def _init_answer(version: int, code: int, producer_id: int = -1, epoch: int = -1) -> Entity:
    return build(codec.response_class(INIT_PRODUCER_ID, version), {
        "throttle_time": 0, "error_code": _for_version(code, version, fenced_from=4),
        "producer_id": producer_id, "producer_epoch": epoch})


def _init_error(request: InitProducerIdRequest, version: int, code: int) -> Entity:
    return _init_answer(version, code)


@served_in_coordinator(INIT_PRODUCER_ID, "InitProducerId", error_response=_init_error)
async def serve_init_producer_id(ctx: CoordinatorContext, request: InitProducerIdRequest) -> Entity:
    version = ctx.api_version
    transactional_id = request.transactional_id or ""
    if not _write_allowed(ctx, transactional_id):
        return _init_answer(version, ErrorCode.transactional_id_authorization_failed)
    producer_id = int(getattr(request, "producer_id", -1))
    epoch = int(getattr(request, "producer_epoch", -1))
    if (producer_id == -1) != (epoch == -1):
        return _init_answer(version, ErrorCode.invalid_request)
    expected = None if producer_id == -1 else (producer_id, epoch)
    result = await transaction_coordinator(ctx).init_producer_id(transactional_id, milliseconds(request.transaction_timeout),
                                                      expected)
    return _init_answer(version, result.error_code, result.producer_id, result.producer_epoch)


# ---------------------------------------------------------------------- AddPartitionsToTxn
def _partitions_of(request: AddPartitionsToTxnRequest) -> list[TopicPartition]:
    return [TopicPartition(topic.name, int(p)) for topic in getattr(request, "v3_and_below_topics", ())
            for p in topic.partitions]


def _add_partitions_answer(version: int, codes: dict[TopicPartition, int]) -> Entity:
    by_topic: dict[str, list[dict[str, int]]] = {}
    for tp, code in codes.items():
        by_topic.setdefault(tp.topic, []).append({"partition_index": tp.partition,
                                                  "partition_error_code": _for_version(code, version)})
    return build(codec.response_class(ADD_PARTITIONS_TO_TXN, version), {
        "throttle_time": 0,
        "results_by_topic_v3_and_below": [{"name": topic, "results_by_partition": results}
                                          for topic, results in by_topic.items()]})


def _add_partitions_error(request: AddPartitionsToTxnRequest, version: int, code: int) -> Entity:
    if version >= BROKER_BATCHES:
        return _batches_answer(version, code, {})
    return _add_partitions_answer(version, {tp: code for tp in _partitions_of(request)})


BROKER_BATCHES = 4  # AddPartitionsToTxn v4+: brokers' batches of transactions


def _batches_answer(version: int, top_code: int, results: dict[str, dict[TopicPartition, int]]) -> Entity:
    def topics(codes: dict[TopicPartition, int]) -> list[dict[str, object]]:
        by_topic: dict[str, list[dict[str, int]]] = {}
        for tp, code in codes.items():
            by_topic.setdefault(tp.topic, []).append({"partition_index": tp.partition, "partition_error_code": code})
        return [{"name": name, "results_by_partition": partitions} for name, partitions in by_topic.items()]

    return build(codec.response_class(ADD_PARTITIONS_TO_TXN, version), {
        "throttle_time": 0, "error_code": top_code,
        "results_by_transaction": [{"transactional_id": txn_id, "topic_results": topics(codes)}
                                   for txn_id, codes in results.items()]})


async def _serve_batches(ctx: CoordinatorContext, request: AddPartitionsToTxnRequest, version: int) -> Entity:
    """A broker's batch: each transaction verified or added, an answer per partition."""
    if not ctx.from_broker():
        return _batches_answer(version, ErrorCode.cluster_authorization_failed, {})
    coordinator = transaction_coordinator(ctx)
    results: dict[str, dict[TopicPartition, int]] = {}
    for txn in getattr(request, "transactions", ()):
        partitions = [TopicPartition(topic.name, int(p)) for topic in txn.topics for p in topic.partitions]
        if txn.verify_only:
            codes = coordinator.verify_partitions(txn.transactional_id, int(txn.producer_id),
                                                  int(txn.producer_epoch), partitions)
        else:
            code = await coordinator.add_partitions(txn.transactional_id, int(txn.producer_id),
                                                    int(txn.producer_epoch), set(partitions), TV_2)
            codes = {tp: code for tp in partitions}
        if version < 5:  # TRANSACTION_ABORTABLE is v5's: older senders get what they know
            codes = {tp: int(ErrorCode.invalid_txn_state) if c == ErrorCode.transaction_abortable else c
                     for tp, c in codes.items()}
        results[txn.transactional_id] = codes
    return _batches_answer(version, 0, results)


@coordinator_api(ADD_PARTITIONS_TO_TXN, "AddPartitionsToTxn", 0, 5, error_response=_add_partitions_error)
async def serve_add_partitions_to_txn(ctx: CoordinatorContext, request: AddPartitionsToTxnRequest) -> Entity:
    version = ctx.api_version
    if version >= BROKER_BATCHES:
        return await _serve_batches(ctx, request, version)
    transactional_id: str = getattr(request, "v3_and_below_transactional_id")
    partitions = _partitions_of(request)
    if not _write_allowed(ctx, transactional_id):
        return _add_partitions_error(request, version, ErrorCode.transactional_id_authorization_failed)
    refused: dict[TopicPartition, int] = {}
    writable: dict[str, bool] = {}
    for tp in partitions:
        if tp.topic not in writable:
            writable[tp.topic] = (tp.topic not in INTERNAL_TOPICS
                                  and ctx.allowed(Operation.WRITE, ResourceType.TOPIC, tp.topic))
        if not writable[tp.topic]:
            refused[tp] = int(ErrorCode.topic_authorization_failed)
        elif not ctx.topic_exists(tp.topic, tp.partition):
            refused[tp] = int(ErrorCode.unknown_topic_or_partition)
    if refused:
        return _add_partitions_answer(version, {tp: refused.get(tp, int(ErrorCode.operation_not_attempted))
                                                for tp in partitions})
    code = await transaction_coordinator(ctx).add_partitions(transactional_id, int(getattr(request, "v3_and_below_producer_id")),
                                                  int(getattr(request, "v3_and_below_producer_epoch")), set(partitions))
    return _add_partitions_error(request, version, code)


# ---------------------------------------------------------------------- AddOffsetsToTxn
def _add_offsets_error(request: AddOffsetsToTxnRequest, version: int, code: int) -> Entity:
    return build(codec.response_class(ADD_OFFSETS_TO_TXN, version),
                 {"throttle_time": 0, "error_code": _for_version(code, version)})


@coordinator_api(ADD_OFFSETS_TO_TXN, "AddOffsetsToTxn", 0, 4, error_response=_add_offsets_error)
async def serve_add_offsets_to_txn(ctx: CoordinatorContext, request: AddOffsetsToTxnRequest) -> Entity:
    version = ctx.api_version
    if not _write_allowed(ctx, request.transactional_id):
        return _add_offsets_error(request, version, ErrorCode.transactional_id_authorization_failed)
    if not ctx.allowed(Operation.READ, ResourceType.GROUP, request.group_id):
        return _add_offsets_error(request, version, ErrorCode.group_authorization_failed)
    code = await transaction_coordinator(ctx).add_offsets(request.transactional_id, int(request.producer_id),
                                               int(request.producer_epoch), request.group_id)
    return _add_offsets_error(request, version, code)


# ---------------------------------------------------------------------- EndTxn
END_TXN_V2 = 5  # EndTxn v5: transaction.version 2


def _end_txn_answer(version: int, code: int, producer_id: int = -1, epoch: int = -1) -> Entity:
    body: dict[str, object] = {"throttle_time": 0, "error_code": _for_version(code, version)}
    if version >= END_TXN_V2:
        body.update(producer_id=producer_id, producer_epoch=epoch)
    return build(codec.response_class(END_TXN, version), body)


def _end_txn_error(request: EndTxnRequest, version: int, code: int) -> Entity:
    return _end_txn_answer(version, code)


@coordinator_api(END_TXN, "EndTxn", 0, 5, error_response=_end_txn_error)
async def serve_end_txn(ctx: CoordinatorContext, request: EndTxnRequest) -> Entity:
    version = ctx.api_version
    if not _write_allowed(ctx, request.transactional_id):
        return _end_txn_error(request, version, ErrorCode.transactional_id_authorization_failed)
    result = await transaction_coordinator(ctx).end_transaction(request.transactional_id, int(request.producer_id),
                                                     int(request.producer_epoch), bool(request.committed),
                                                     TV_2 if version >= END_TXN_V2 else TV_1)
    return _end_txn_answer(version, result.error_code, result.producer_id, result.producer_epoch)
