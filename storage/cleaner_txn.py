"""What the cleaner knows of transactions while it walks a log (Kafka's CleanedTransactionMetadata).

The cleaner reads only below the last stable offset, so every transaction it meets is
decided: the aborted ones are listed in the ``.txnindex`` files, every other one
committed. Walking batches in offset order, a ``TxnTracker`` says:

* for a data batch, whether it belongs to an aborted transaction (its records go);
* for a marker, whether it may be discarded: only once no batch of its transaction
  was seen in this walk. A marker is what tells a read_committed consumer (and the
  producer-state replay after a restart) that the producer's transaction ended: were it
  removed while a batch of the transaction remains, the consumer would drop that
  producer's later batches, and the replay would find the transaction open forever.

Which aborted transactions still have data decides which ``.txnindex`` entries the
cleaned segment keeps (``retained_aborted``): an entry whose data is gone would only
make consumers look for a marker that may itself go.

``last_records_of_active_producers`` is Kafka's map of the batch each live producer
must keep: its last data batch (sequence and epoch for duplicate detection and fencing
after a restart), or, when its epoch has no data batch, its last marker.
"""

from __future__ import annotations

from typing import NamedTuple

from storage.batch import BatchHeader
from storage.producer_state import ProducerStateManager
from storage.records import ControlRecord


class LastRecord(NamedTuple):
    """The batch of a live producer the cleaner keeps (as an empty batch if need be)."""

    last_data_offset: int  # last offset of its last data batch; -1: none in this epoch
    producer_epoch: int


def last_records_of_active_producers(producer_state: ProducerStateManager) -> dict[int, LastRecord]:
    return {pid: LastRecord(entry.last_offset, entry.producer_epoch) for pid, entry in producer_state.entries.items()}


def is_last_batch_of_producer(header: BatchHeader, last_records: dict[int, LastRecord]) -> bool:
    last = last_records.get(header.producer_id) if header.producer_id >= 0 else None
    if last is None:
        return False
    if last.last_data_offset >= 0:
        return header.last_offset == last.last_data_offset
    return header.is_control and header.producer_epoch == last.producer_epoch


class _AbortedInProgress:
    __slots__ = ("first_offset", "seen_batch")

    def __init__(self, first_offset: int) -> None:
        self.first_offset = first_offset
        self.seen_batch = False


class TxnTracker:
    """Transactions met while walking batches in offset order from one start offset.

    ``aborted`` is (producer id, first offset) of every aborted transaction overlapping
    the walk, as ``PartitionLog.aborted_transactions`` gives them.
    """

    def __init__(self, aborted: list[tuple[int, int]]) -> None:
        self._upcoming = sorted(aborted, key=lambda txn: txn[1])
        self._next = 0
        self._aborted: dict[int, _AbortedInProgress] = {}  # producer id -> its aborted txn being walked
        self._committed: set[int] = set()  # producers with a batch of a committed txn seen, marker not yet
        # (producer id, first offset) of aborted transactions whose marker was reached while
        # a batch of theirs was still there: their .txnindex entries stay.
        self.retained_aborted: set[tuple[int, int]] = set()

    def _start_aborted_up_to(self, offset: int) -> None:
        upcoming = self._upcoming
        while self._next < len(upcoming) and upcoming[self._next][1] <= offset:
            producer_id, first_offset = upcoming[self._next]
            self._aborted[producer_id] = _AbortedInProgress(first_offset)
            self._next += 1

    def on_batch(self, header: BatchHeader) -> bool:
        """A data batch: True when it belongs to an aborted transaction."""
        self._start_aborted_up_to(header.last_offset)
        if not header.is_transactional:
            return False
        aborted = self._aborted.get(header.producer_id)
        if aborted is not None:
            aborted.seen_batch = True
            return True
        self._committed.add(header.producer_id)
        return False

    def on_marker(self, header: BatchHeader, marker: ControlRecord | None) -> bool:
        """A control batch (``marker`` None: it holds no record): True when it may be
        discarded, no batch of the transaction it ends having been seen."""
        self._start_aborted_up_to(header.last_offset)
        if marker is None:
            return True  # already emptied: nothing to keep
        producer_id = header.producer_id
        if marker.is_abort:
            aborted = self._aborted.pop(producer_id, None)
            if aborted is not None and aborted.seen_batch:
                self.retained_aborted.add((producer_id, aborted.first_offset))
                return False
            return True
        if marker.is_commit:
            if producer_id in self._committed:
                self._committed.discard(producer_id)
                return False
            return True
        return False  # a control record of another kind: kept
