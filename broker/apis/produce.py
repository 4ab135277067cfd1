"""Produce (key 0), versions 0-12.

Behaviour: the record set of each partition is appended as the client sent it (the
owner parses batch headers, checks CRC-32C, rewrites base offsets; records are
re-encoded only for a topic whose compression.type differs from the batch's codec).
Produce v0-v2 (Kafka 3.9 served them, 4.0 does not) carry message sets of magic 0 or 1:
they are validated (CRC32, wrappers) and converted to one v2 batch here, as Kafka 3.x
did (storage/legacy_records.py); a bad set answers CORRUPT_MESSAGE or INVALID_RECORD. Partitions owned by other workers are forwarded to their owner over the shared-memory rings (broker/links/mesh.py)
and the answers merged in request order. acks=all: NOT_ENOUGH_REPLICAS before the
append when the ISR the cluster records is below min.insync.replicas; after it, the
answer waits (at the owner, bounded by the request's timeout) until the high watermark
passes the batch (NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR shrank below the minimum
meanwhile, REQUEST_TIMED_OUT at the timeout); acks=1 answers after the leader's append;
acks=0 gets no response. Idempotent producers: a retried
batch is acknowledged with its original offset, a gap answers
OUT_OF_ORDER_SEQUENCE_NUMBER, a stale epoch INVALID_PRODUCER_EPOCH. Transactional
producers: a transactional_id needs WRITE on it (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED
on every partition, as Kafka); a transactional batch in a request without one is refused
the same way, on its partition. A transactional batch that would open the producer's
transaction on a partition is verified first (KIP-890, broker/apis/txn_produce.py): the
owner answers it VERIFICATION_NEEDED with a guard, the transaction coordinator is asked
(v12, transaction.version 2: asked to add the partition), and the batch is appended with
its guard, or refused as Kafka refuses it. Later batches of that transaction there, and
every non-transactional batch, are appended at once. zstd batches below v7
answer UNSUPPORTED_COMPRESSION_TYPE.

Decoded and answered by hand (broker/protocol/produce_request.py, fast.encode_produce_response).

Version notes: v1 throttle_time_ms; v2 log_append_time; v3 adds transactional_id and
requires magic v2; v5 log_start_offset;
v7 allows zstd; v8 record_errors and error_message; v9 flexible; v10 current_leader
and node_endpoints (tagged; sent with NOT_LEADER_OR_FOLLOWER: KIP-951); v11 is v10 (the
client knows TRANSACTION_ABORTABLE); v12 is v11 from a transaction.version 2 producer,
whose partitions the broker adds to its transaction (KIP-890).
"""

from __future__ import annotations

from broker.apis.metadata import INTERNAL_TOPICS, current_leader, leader_endpoints
from broker.apis.txn_produce import append_transactional
from broker.authorization import allowed, topic_allowed
from broker.context import NO_RESPONSE, RequestContext, Response, WorkerServices
from broker.dispatch import api
from broker.links.forwarding import on_owners
from broker.partitions.partition_ops import NO_FENCE, AppendItem, AppendResult, CommitItem
from broker.partitions.remote_partition import epoch_from_client_id
from broker.protocol import produce_request
from broker.protocol.errors import ErrorCode
from broker.protocol.fast import encode_produce_response
from broker.protocol.produce_request import ProduceRequest
from broker.quotas.shared_counters import PRODUCE
from coordination.acls.model import Operation, ResourceType
from storage.batch import ATTRIBUTES_POS, TRANSACTIONAL_MASK
from storage.errors import StorageError
from storage.legacy_records import parse_message_set, peek_magic, up_convert
from storage.types import TopicPartition

KEY = 0

TOPIC_REFUSED = AppendResult(ErrorCode.topic_authorization_failed)
NO_TRANSACTIONAL_ID = AppendResult(ErrorCode.transactional_id_authorization_failed,
                                   error_message="a transactional batch needs the request's transactional_id")
ATTRIBUTES_LOW_BYTE = ATTRIBUTES_POS + 1  # the big-endian int16's low byte holds the transactional bit


class _Slot:
    """Where an appended partition's result lands when its owner answers."""

    __slots__ = ("result",)

    def __init__(self) -> None:
        self.result = AppendResult(ErrorCode.unknown_server_error)


def _error_response(request: ProduceRequest, version: int, code: int) -> bytes:
    failed = AppendResult(code)
    return encode_produce_response(version, [(t.name, [(index, failed) for index, _records in t.partition_data])
                                             for t in request.topic_data])


def _below_min_isr(node: WorkerServices, topic: str, partition: int) -> bool:
    view = node.cluster.partition(topic, partition)
    return view is not None and len(view.isr) < node.logs.log_config_for(topic).min_insync_replicas


async def _wait_committed(node: WorkerServices, items: list[AppendItem], slots: list[_Slot], timeout_ms: int) -> None:
    """acks=all: each appended batch's answer waits for its high watermark."""
    # Committed at the append already (no other replica, or a duplicate of a committed
    # batch): no second trip to the owner.
    waiting = [(item, slot) for item, slot in zip(items, slots) if slot.result.error_code == 0
               and slot.result.high_watermark < slot.result.base_offset + max(1, slot.result.record_count)]
    if not waiting:
        return
    commits = [CommitItem(item.tp, slot.result.base_offset + max(1, slot.result.record_count)) for item, slot in waiting]
    codes = await on_owners(node, commits, lambda ops, part: ops.wait_committed(part, timeout_ms), int)
    for (_item, slot), code in zip(waiting, codes):
        if code:
            slot.result = AppendResult(code, error_message="not replicated to the in-sync replicas in time"
                                       if code == ErrorCode.request_timed_out else None)


def _up_converted(records: memoryview) -> memoryview:
    """Produce v0-v2 carry message sets of magic 0 or 1: one v2 batch of the same records,
    as Kafka 3.x stores them (DESIGN.md non-negotiable 4's second exception). A v2 batch
    sent in an old request passes as it is."""
    if peek_magic(records) >= 2:
        return records
    return memoryview(up_convert(parse_message_set(records)))


@api(KEY, "Produce", produce_request.VERSIONS[0], produce_request.VERSIONS[-1], error_response=_error_response,
     decode=produce_request.decode)
async def handle_produce(ctx: RequestContext, request: ProduceRequest) -> Response:
    node = ctx.node
    version = ctx.api_version
    node.stats["produce_requests"] += 1
    throttle_ms = 0
    if node.quotas.table.produce:
        # Kafka records the whole request's size against producer_byte_rate. Here it is done
        # before the first await, so a throttle mutes the connection before its next frame
        # is read: as in Kafka, which reads one request of a connection at a time, a
        # pipelining client cannot slip requests past a throttle.
        throttle_ms = node.quotas.throttle_ms(PRODUCE, ctx.connection.auth.principal, ctx.client_id, ctx.frame_size)
        if throttle_ms:
            node.stats["quota_throttled_produce"] += 1
            ctx.connection.mute_after_answer(throttle_ms)
    acks = int(request.acks)
    layout: list[tuple[str, list[tuple[int, AppendResult | _Slot]]]] = []
    items: list[AppendItem] = []
    slots: list[_Slot] = []
    # The coordinator of another broker writes __consumer_offsets like a client, naming its
    # epoch in the client id; the owner fences an older epoch.
    internal_items: list[AppendItem] = []
    internal_slots: list[_Slot] = []
    coordinator_epoch: int | None = None
    # Request-wide refusals first: the loop below then asks only per-partition questions.
    refused: AppendResult | None = None
    authorizing = node.security.authorizer_on
    if acks not in (0, 1, -1):
        refused = AppendResult(ErrorCode.invalid_required_acks)
    elif (request.transactional_id is not None and authorizing
          and not allowed(ctx, Operation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id)):
        refused = AppendResult(ErrorCode.transactional_id_authorization_failed)
    without_transactional_id = version >= 3 and request.transactional_id is None
    for topic in request.topic_data:
        name = topic.name
        entries: list[tuple[int, AppendResult | _Slot]] = []
        layout.append((name, entries))
        if refused is not None:
            entries.extend((index, refused) for index, _records in topic.partition_data)
            continue
        is_internal = name in INTERNAL_TOPICS
        if authorizing and not topic_allowed(ctx, Operation.WRITE, name) and not (
                is_internal and node.security.is_broker(ctx.connection.auth.principal, ctx.connection.host)):
            entries.extend((index, TOPIC_REFUSED) for index, _records in topic.partition_data)  # Kafka: WRITE on the topic
            continue
        known = node.topic(name)
        if is_internal:
            # Only a broker's coordinator (proven: broker/security/broker_proof.py) writes here;
            # its client id names its epoch, which the owner fences. A client id alone grants nothing.
            coordinator_epoch = (epoch_from_client_id(ctx.client_id)
                                 if node.security.is_broker(ctx.connection.auth.principal, ctx.connection.host) else None)
        for index, records in topic.partition_data:
            if version < 3 and records:
                try:
                    records = _up_converted(records)
                except StorageError as exc:
                    entries.append((index, AppendResult(exc.kafka_error_code, error_message=str(exc))))
                    continue
            if is_internal:
                if coordinator_epoch is not None and records and known is not None and known.has_partition(index):
                    slot = _Slot()
                    entries.append((index, slot))
                    internal_slots.append(slot)
                    internal_items.append(AppendItem(TopicPartition(name, index), records, version))
                else:
                    # Only the coordinator writes __consumer_offsets (fenced by its epoch).
                    entries.append((index, AppendResult(ErrorCode.invalid_topic_exception,
                                                        error_message=f"cannot append to internal topic {name}")))
            elif known is None or not known.has_partition(index):
                entries.append((index, AppendResult(ErrorCode.unknown_topic_or_partition)))
            elif not records:
                entries.append((index, AppendResult(ErrorCode.corrupt_message, error_message="no records")))
            elif without_transactional_id and len(records) > ATTRIBUTES_LOW_BYTE \
                    and records[ATTRIBUTES_LOW_BYTE] & TRANSACTIONAL_MASK:
                entries.append((index, NO_TRANSACTIONAL_ID))
            elif acks == -1 and _below_min_isr(node, name, index):
                entries.append((index, AppendResult(ErrorCode.not_enough_replicas,
                                                    error_message="the ISR is smaller than min.insync.replicas")))
            else:
                slot = _Slot()
                entries.append((index, slot))
                slots.append(slot)
                items.append(AppendItem(TopicPartition(name, index), records, version))
    if items and request.transactional_id is not None:
        await append_transactional(node, request.transactional_id, version, items, slots)
    elif items:
        results = await on_owners(node, items, lambda ops, part: ops.append(part), AppendResult)
        for slot, result in zip(slots, results):
            slot.result = result
    if internal_items:
        epoch = coordinator_epoch if coordinator_epoch is not None else NO_FENCE
        for slot, result in zip(internal_slots, await on_owners(node, internal_items,
                                                                lambda ops, part: ops.append(part, epoch), AppendResult)):
            slot.result = result
    if acks == -1:
        await _wait_committed(node, items + internal_items, slots + internal_slots, request.timeout_ms)
    if acks == 0:
        return NO_RESPONSE
    answers = [(name, [(index, r if isinstance(r, AppendResult) else r.result) for index, r in entries])
               for name, entries in layout]
    if version >= 10:
        leaders, endpoints = _leader_hints(node, ctx.connection.listener.name, answers)
        return encode_produce_response(version, answers, leaders, endpoints, throttle_ms)
    return encode_produce_response(version, answers, throttle_ms=throttle_ms)


def _leader_hints(node: WorkerServices, listener: str, answers: list[tuple[str, list[tuple[int, AppendResult]]]]
                  ) -> tuple[dict[tuple[str, int], tuple[int, int]], list[tuple[int, str, int]]]:
    """KIP-951: for partitions answered NOT_LEADER_OR_FOLLOWER, who leads them now and
    where that broker listens."""
    leaders: dict[tuple[str, int], tuple[int, int]] = {}
    for name, partitions in answers:
        for index, result in partitions:
            if result.error_code == ErrorCode.not_leader_or_follower:
                hint = current_leader(node, name, index)
                if hint is not None:
                    leaders[(name, index)] = hint
    return leaders, leader_endpoints(node, listener, (leader for leader, _epoch in leaders.values()))
