"""Transactional offsets waiting for the end of their transaction (TxnOffsetCommit).

A transactional producer's offsets are written to the group's __consumer_offsets partition
at once, but count only if its transaction commits: until the transaction coordinator's
COMMIT or ABORT marker is in that partition they wait here, per producer id and group,
unseen by OffsetFetch (which answers UNSTABLE_OFFSET_COMMIT for them when a client asks
for stable offsets only).

Each offset keeps its place in the log (``order``): the record's offset when the log is
loaded, a counter beyond every loaded offset for live writes. A committed transaction
must not bring back an offset older than one committed without a transaction after it,
so the more recent record wins, as in Kafka (which compares record offsets for the same
reason: compaction of __consumer_offsets keeps only the latest record of a key).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from coordination.groups.offsets_schema import OffsetValue

Partition = tuple[str, int]  # (topic, partition)


@dataclass(frozen=True, slots=True)
class OrderedOffset:
    value: OffsetValue
    order: int  # its place in the log: later records have larger orders


class PendingTxnOffsets:
    """Every group's pending transactional offsets, by producer id."""

    def __init__(self) -> None:
        self._by_producer: dict[int, dict[str, dict[Partition, OrderedOffset]]] = {}
        self._producers_of: dict[str, set[int]] = {}  # group id -> producers with offsets pending in it

    def add(self, producer_id: int, group_id: str, partition: Partition, offset: OrderedOffset) -> None:
        """A later offset of the same producer for the same partition replaces the earlier one."""
        self._by_producer.setdefault(producer_id, {}).setdefault(group_id, {})[partition] = offset
        self._producers_of.setdefault(group_id, set()).add(producer_id)

    def has(self, group_id: str, partition: Partition) -> bool:
        return any(partition in self._by_producer[producer].get(group_id, {})
                   for producer in self._producers_of.get(group_id, ()))

    def has_group(self, group_id: str) -> bool:
        return group_id in self._producers_of

    def partitions_of(self, group_id: str) -> set[Partition]:
        return {partition for producer in self._producers_of.get(group_id, ())
                for partition in self._by_producer[producer].get(group_id, {})}

    def take(self, producer_id: int, selects: Callable[[str], bool]) -> dict[str, dict[Partition, OrderedOffset]]:
        """Remove and return the producer's pending offsets in the groups ``selects`` keeps
        (those of one __consumer_offsets partition: a marker ends the transaction there only)."""
        groups = self._by_producer.get(producer_id, {})
        taken = {group_id: groups.pop(group_id) for group_id in [g for g in groups if selects(g)]}
        if not groups:
            self._by_producer.pop(producer_id, None)
        for group_id in taken:
            self._forget(group_id, producer_id)
        return taken

    def discard(self, group_id: str, partition: Partition) -> None:
        """A tombstone for the partition's offset also removes its pending offsets (as Kafka's replay does)."""
        for producer in list(self._producers_of.get(group_id, ())):
            offsets = self._by_producer[producer][group_id]
            offsets.pop(partition, None)
            if not offsets:
                self._drop(producer, group_id)

    def discard_group(self, group_id: str) -> None:
        for producer in list(self._producers_of.get(group_id, ())):
            self._drop(producer, group_id)

    def clear(self) -> None:
        self._by_producer.clear()
        self._producers_of.clear()

    def _drop(self, producer_id: int, group_id: str) -> None:
        groups = self._by_producer[producer_id]
        del groups[group_id]
        if not groups:
            del self._by_producer[producer_id]
        self._forget(group_id, producer_id)

    def _forget(self, group_id: str, producer_id: int) -> None:
        producers = self._producers_of[group_id]
        producers.discard(producer_id)
        if not producers:
            del self._producers_of[group_id]
