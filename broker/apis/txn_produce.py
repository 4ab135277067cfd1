"""Produce's transactional half: verifying a transaction's first batch on a partition
(KIP-890; Kafka's ReplicaManager.appendRecords with AddPartitionsToTxnManager).

The owner answers a transactional batch that would open its producer's transaction on
the partition with VERIFICATION_NEEDED and a guard (storage/producer_state.py). The
transaction coordinator is asked about all such partitions of the request at once
(broker/process/txn_verifier.py): verify-only for a v1 client (Produce up to v11: it added the
partitions itself), add for a v2 client (Produce v12). The confirmed batches are appended
with their guards; a transaction that ended meanwhile has dropped the guard, and the batch
is refused INVALID_TXN_STATE instead of opening a transaction no coordinator will end.

A client pipelines Produce requests on one connection (5 in flight), and this broker
works on them at once where Kafka reads the next only after answering the last. Their
first appends reach each partition in the order they came, but a verification waits, so
what follows it could overtake a later request: a later batch appended, or refused out of
order, before an earlier one. The client gets the answers in order and takes an out-of-
order refusal of the batch right after an acknowledged one as fatal. So a request whose
first appends met VERIFICATION_NEEDED or OUT_OF_ORDER_SEQUENCE_NUMBER waits for the
producer's earlier requests here to finish their appends (``_in_flight``), tries those
partitions again, and only then verifies what still needs it.
"""

from __future__ import annotations

import asyncio
from typing import Protocol, Sequence

from broker.context import WorkerServices
from broker.links.forwarding import on_owners
from broker.partitions.partition_ops import VERIFICATION_NEEDED, AppendItem, AppendResult
from broker.protocol.errors import ErrorCode, code_for_exception
from coordination.finalized_features import TRANSACTION_VERSION
from storage.batch import HEADER_SIZE, parse_header, producer_id_at
from storage.types import TopicPartition

ABORTABLE_FROM = 11  # Produce v11+ clients know TRANSACTION_ABORTABLE
ADDS_PARTITIONS_FROM = 12  # Produce v12: transaction.version 2, the broker adds the partition

_RETRIABLE = frozenset({int(ErrorCode.concurrent_transactions), int(ErrorCode.network_exception),
                        int(ErrorCode.coordinator_load_in_progress), int(ErrorCode.coordinator_not_available),
                        int(ErrorCode.not_coordinator), int(ErrorCode.request_timed_out)})


_RETRY_IN_ORDER = frozenset({VERIFICATION_NEEDED, int(ErrorCode.out_of_order_sequence_number)})


class _InFlight:
    """A producer's transactional requests in this process whose appends are not done,
    by arrival ticket."""

    __slots__ = ("next_ticket", "unfinished")

    def __init__(self) -> None:
        self.next_ticket = 0
        self.unfinished: dict[int, asyncio.Future[None]] = {}


_in_flight: dict[int, _InFlight] = {}


class Slot(Protocol):
    result: AppendResult


def produce_error(code: int, version: int) -> AppendResult:
    """The coordinator's refusal as the producer's partition answer."""
    if code == ErrorCode.producer_fenced:
        return AppendResult(ErrorCode.invalid_producer_epoch)
    if code == ErrorCode.transaction_abortable and version < ABORTABLE_FROM:
        code = int(ErrorCode.invalid_txn_state)
    if code == ErrorCode.invalid_txn_state:
        return AppendResult(code, error_message="Partition was not added to the transaction")
    if code in _RETRIABLE:
        return AppendResult(ErrorCode.not_enough_replicas, error_message=(
            f"Unable to verify the partition has been added to the transaction. Underlying error: "
            f"{ErrorCode(code).name.upper()}"))
    return AppendResult(code)


def _adds_partitions(node: WorkerServices, version: int) -> bool:
    """Produce v12 from a transaction.version 2 producer; an operator who holds the
    cluster at version 1 gets its partitions verified only (a client that sends v12
    anyway did not add them, and is refused)."""
    return version >= ADDS_PARTITIONS_FROM and node.features.level(TRANSACTION_VERSION) >= 2


async def append_transactional(node: WorkerServices, transactional_id: str, version: int, items: list[AppendItem],
                               slots: Sequence[Slot]) -> None:
    """A transactional Produce's appends, in order with the producer's other requests here;
    the batches that would open its transaction on a partition are verified first."""
    producer_id = producer_id_at(items[0].records) if len(items[0].records) >= HEADER_SIZE else -1
    requests = _in_flight.get(producer_id)
    if requests is None:
        requests = _in_flight[producer_id] = _InFlight()
    ticket = requests.next_ticket
    requests.next_ticket += 1
    done = requests.unfinished[ticket] = asyncio.get_running_loop().create_future()
    try:
        await _append(node, items, slots)
        if not any(slot.result.error_code in _RETRY_IN_ORDER for slot in slots):
            return
        earlier = [future for other, future in requests.unfinished.items() if other < ticket]
        if earlier:
            await asyncio.wait(earlier)  # (never cancels them)
            await _append(node, items, slots, only=_RETRY_IN_ORDER)
        await _verify(node, transactional_id, version, items, slots)
    finally:
        done.set_result(None)
        del requests.unfinished[ticket]
        if not requests.unfinished and _in_flight.get(producer_id) is requests:
            del _in_flight[producer_id]


async def _append(node: WorkerServices, items: list[AppendItem], slots: Sequence[Slot],
                  only: frozenset[int] | None = None) -> None:
    """Append ``items`` (``only``: those whose answer so far has one of these codes)."""
    pairs = [(item, slot) for item, slot in zip(items, slots) if only is None or slot.result.error_code in only]
    results = await on_owners(node, [item for item, _slot in pairs], lambda ops, part: ops.append(part), AppendResult)
    for (_item, slot), result in zip(pairs, results):
        slot.result = result


async def _verify(node: WorkerServices, transactional_id: str, version: int, items: list[AppendItem],
                  slots: Sequence[Slot]) -> None:
    """The items answered VERIFICATION_NEEDED: asked about, then appended or refused."""
    waiting = [(item, slot) for item, slot in zip(items, slots) if slot.result.error_code == VERIFICATION_NEEDED]
    if not waiting:
        return
    headers = [parse_header(memoryview(item.records), 0) for item, _slot in waiting]
    if len({(h.producer_id, h.producer_epoch) for h in headers}) > 1:  # Kafka: one request, one producer
        for _item, slot in waiting:
            slot.result = AppendResult(ErrorCode.invalid_producer_id_mapping,
                                       error_message="transactional records of more than one producer id")
        return
    guards: dict[TopicPartition, int] = {item.tp: slot.result.base_offset for item, slot in waiting}
    try:
        codes = await node.check_transaction(transactional_id, headers[0].producer_id, headers[0].producer_epoch,
                                             sorted(guards), add=_adds_partitions(node, version))
    except Exception as exc:  # never let VERIFICATION_NEEDED reach the client
        failed = int(code_for_exception(exc))
        codes = {tp: failed for tp in guards}
    verified: list[tuple[AppendItem, Slot]] = []
    for item, slot in waiting:
        code = codes.get(item.tp, int(ErrorCode.unknown_server_error))
        if code:
            slot.result = produce_error(code, version)
        else:
            verified.append((item, slot))
    if not verified:
        return
    results = await on_owners(node, [item for item, _slot in verified],
                              lambda ops, part: ops.append_verified(part, [guards[i.tp] for i in part]), AppendResult)
    for (_item, slot), result in zip(verified, results):
        slot.result = result
