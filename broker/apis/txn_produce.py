"""Produce's transactional half: verifying a transaction's first batch on a partition
(KIP-890; Kafka's ReplicaManager.appendRecords with AddPartitionsToTxnManager).

The owner answers a transactional batch that would open its producer's transaction on
the partition with VERIFICATION_NEEDED and a guard (storage/producer_state.py). The
transaction coordinator is asked about all such partitions of the request at once
(broker/process/txn_verifier.py): verify-only for a v1 client (Produce up to v11: it added the
partitions itself), add for a v2 client (Produce v12). The confirmed batches are appended
with their guards; a transaction that ended meanwhile has dropped the guard, and the batch
is refused INVALID_TXN_STATE instead of opening a transaction no coordinator will end.

Answers as Kafka gives them: a partition not in the transaction is INVALID_TXN_STATE
(TRANSACTION_ABORTABLE from Produce v11, which knows it); PRODUCER_FENCED is
INVALID_PRODUCER_EPOCH; the coordinator's transient errors (CONCURRENT_TRANSACTIONS, it
moving or loading, the network) are NOT_ENOUGH_REPLICAS, which every client retries without
a metadata refresh.
"""

from __future__ import annotations

from typing import Protocol, Sequence

from broker.context import WorkerServices
from broker.links.forwarding import on_owners
from broker.partitions.partition_ops import VERIFICATION_NEEDED, AppendItem, AppendResult
from broker.protocol.errors import ErrorCode, code_for_exception
from storage.batch import parse_header
from storage.types import TopicPartition

ABORTABLE_FROM = 11  # Produce v11+ clients know TRANSACTION_ABORTABLE
ADDS_PARTITIONS_FROM = 12  # Produce v12: transaction.version 2, the broker adds the partition

_RETRIABLE = frozenset({int(ErrorCode.concurrent_transactions), int(ErrorCode.network_exception),
                        int(ErrorCode.coordinator_load_in_progress), int(ErrorCode.coordinator_not_available),
                        int(ErrorCode.not_coordinator), int(ErrorCode.request_timed_out)})


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
    return version >= ADDS_PARTITIONS_FROM and node.config.get_int("transaction.version") >= 2


async def verify_transactional(node: WorkerServices, transactional_id: str, version: int, items: list[AppendItem],
                               slots: Sequence[Slot]) -> None:
    """Every item answered VERIFICATION_NEEDED: asked about, then appended or refused."""
    waiting = [(item, slot) for item, slot in zip(items, slots) if slot.result.error_code == VERIFICATION_NEEDED]
    guards: dict[TopicPartition, int] = {item.tp: slot.result.base_offset for item, slot in waiting}
    first = parse_header(memoryview(waiting[0][0].records), 0)
    producers = {(h.producer_id, h.producer_epoch) for h in (parse_header(memoryview(i.records), 0) for i, _ in waiting)}
    if len(producers) > 1:  # Kafka: one request, one producer
        for _item, slot in waiting:
            slot.result = AppendResult(ErrorCode.invalid_producer_id_mapping,
                                       error_message="transactional records of more than one producer id")
        return
    try:
        codes = await node.check_transaction(transactional_id, first.producer_id, first.producer_epoch,
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
