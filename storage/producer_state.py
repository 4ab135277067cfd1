"""Idempotent-producer state of one partition, and its snapshot files.

For every producer id that wrote to the partition we remember its epoch, the sequence
numbers and offsets of its last batches, and its open transaction. That is what lets
the broker drop a retried batch instead of appending it twice (exactly-once appends)
and fence a zombie producer with an old epoch.

The state is rebuilt on startup by loading the newest snapshot and replaying the log
from the snapshot's offset; snapshots bound that replay. They are written when a
segment rolls and on clean shutdown, named after the offset up to which they reflect
the log: ``<offset, 20 digits>.snapshot`` in the partition dir (Kafka's name and format,
so Kafka's tools can read ours).

Snapshot file layout (Kafka's ProducerSnapshot version 1; big-endian)::

    offset  size  field
    ------  ----  -------------------------------------------------------------
         0     2  version                i16   must be 1
         2     4  crc                    u32   CRC-32C of bytes [6, end)
         6     4  entryCount             i32
        10  46*n  entries, each:
                  +0   8  producerId              i64
                  +8   2  producerEpoch           i16
                  +10  4  lastSequence            i32   -1: no data batch in this epoch
                  +14  8  lastOffset              i64   last offset of that batch, -1: none
                  +22  4  offsetDelta             i32   lastOffset - firstOffset of that batch
                  +26  8  timestamp               i64   max timestamp of the last batch/marker
                  +34  4  coordinatorEpoch        i32   -1 until a txn marker arrives
                  +38  8  currentTxnFirstOffset   i64   -1: no open transaction

A snapshot keeps only each producer's *last* batch. In memory we keep the last
``BATCHES_TO_RETAIN`` (5, as Kafka) so a producer with 5 requests in flight can retry
any of them and be recognised as a duplicate rather than rejected as out of order.

Transactions: a producer's first transactional batch opens its transaction (the
entry's currentTxnFirstOffset); its COMMIT or ABORT marker closes it. The manager keeps
the open ones (``ongoing``, producer id -> first offset, in first-offset order since
offsets only grow) and the closed ones whose marker is not yet below the high watermark
(``unreplicated``, Kafka's unreplicatedTxns: were they dropped at the marker, the LSO
would jump over a transaction a new leader may still see open, then move back). The
first unstable offset, the smallest first offset of both, is cached in
``first_unstable`` (-1: none) so the LSO costs two attribute reads on the fetch path.

Verification (KIP-890): a transactional batch that would open a transaction here is
appended only once the transaction coordinator confirmed the partition is in the
producer's transaction. While that question is out, ``verifying`` holds a guard per
producer id (Kafka's VerificationStateEntry); the transaction opening here, or a marker
ending the transaction it was for (``marker_written``), removes it, so an answer that
comes back after the transaction ended no longer matches and the late batch is refused instead of opening a transaction no
coordinator knows (a hanging transaction). Guards live in memory only.

Not thread-safe: the owning partition log serialises calls under its append lock.
Producer-id expiry (producer.id.expiration.ms, a broker setting: the log manager's
periodic task calls ``remove_expired_producers``) forgets producers idle that long,
never one with an open transaction (its entry holds the transaction's first offset).
"""

from __future__ import annotations

import itertools
import logging
import os
import re
import struct
from collections import deque
from dataclasses import dataclass, field
from typing import Iterable, NamedTuple, Union

import crc32c

from storage import files
from storage.batch import BatchHeader
from storage.checkpoint import TMP_SUFFIX, read_bytes_if_exists, write_bytes_atomically
from storage.errors import LogDirOfflineError, StorageError
from storage.records import ControlRecord
from storage.releaser import RELEASER

log = logging.getLogger(__name__)

StrPath = Union[str, "os.PathLike[str]"]

SNAPSHOT_VERSION = 1
SNAPSHOT_SUFFIX = ".snapshot"
_SNAPSHOT_NAME_RE = re.compile(r"([0-9]{20})\.snapshot")

SNAPSHOT_HEADER = struct.Struct(">hIi")  # version, crc, entryCount
SNAPSHOT_HEADER_SIZE = 10
assert SNAPSHOT_HEADER.size == SNAPSHOT_HEADER_SIZE

SNAPSHOT_ENTRY = struct.Struct(">qhiqiqiq")
SNAPSHOT_ENTRY_SIZE = 46
assert SNAPSHOT_ENTRY.size == SNAPSHOT_ENTRY_SIZE

CRC_POS = 2
CRC_START = 6  # the CRC covers everything after itself, entryCount included
_U32 = struct.Struct(">I")

SEQUENCE_MODULUS = 1 << 31  # sequences wrap from 2^31 - 1 to 0
BATCHES_TO_RETAIN = 5

NO_SEQUENCE = -1
NO_OFFSET = -1
NO_COORDINATOR_EPOCH = -1
NO_TXN = -1

# Kafka error codes returned by check_sequence.
NONE = 0
OUT_OF_ORDER_SEQUENCE_NUMBER = 45
DUPLICATE_SEQUENCE_NUMBER = 46
INVALID_PRODUCER_EPOCH = 47
TRANSACTION_COORDINATOR_FENCED = 52


# Verifications under way per partition, at most (a bound on memory, not a limit in practice).
MAX_VERIFYING = 10_000
# Guards are unique in the process, so one handed out before a partition was recreated
# never matches the new partition's.
_GUARDS = itertools.count(1)


class CorruptSnapshotError(StorageError):
    """A snapshot file failed its CRC or layout check; it is deleted and an older one used."""


class CompletedTxn(NamedTuple):
    """A transaction closed by a marker: [first_offset, last_offset (the marker)].

    ``last_stable_offset`` is the LSO once it completes, ignoring the high watermark
    (Kafka's): the first offset of the next open transaction of another producer, or the
    offset after the marker. It goes into the ``.txnindex`` entry of an aborted one."""

    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool
    last_stable_offset: int


class RetainedBatch(NamedTuple):
    """What we remember of one appended data batch (memory only, for duplicate detection)."""

    last_sequence: int
    last_offset: int
    offset_delta: int
    timestamp: int

    @property
    def first_sequence(self) -> int:
        return (self.last_sequence - self.offset_delta) % SEQUENCE_MODULUS

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


@dataclass(slots=True)
class Verification:
    """A producer's transaction waiting for the coordinator's word on this partition."""

    epoch: int
    guard: int
    lowest_sequence: int


@dataclass(slots=True)
class ProducerEntry:
    """One producer's state; the first eight fields are exactly a snapshot entry."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_offset: int
    offset_delta: int
    last_timestamp: int
    coordinator_epoch: int
    current_txn_first_offset: int
    # Newest last. Not persisted: after a reload only the snapshot's last batch is known.
    recent_batches: deque[RetainedBatch] = field(
        default_factory=lambda: deque(maxlen=BATCHES_TO_RETAIN), compare=False, repr=False
    )

    def find_batch(self, base_sequence: int, last_sequence: int) -> RetainedBatch | None:
        for batch in self.recent_batches:
            if batch.first_sequence == base_sequence and batch.last_sequence == last_sequence:
                return batch
        return None


# --------------------------------------------------------------------------- snapshot codec


def snapshot_file_name(offset: int) -> str:
    return f"{offset:020d}{SNAPSHOT_SUFFIX}"


def encode_snapshot(entries: Iterable[ProducerEntry]) -> bytes:
    """The snapshot bytes for ``entries``, sorted by producer id (stable output)."""
    ordered = sorted(entries, key=lambda e: e.producer_id)
    buf = bytearray(SNAPSHOT_HEADER_SIZE + SNAPSHOT_ENTRY_SIZE * len(ordered))
    position = SNAPSHOT_HEADER_SIZE
    for e in ordered:
        SNAPSHOT_ENTRY.pack_into(
            buf, position,
            e.producer_id, e.producer_epoch, e.last_sequence, e.last_offset,
            e.offset_delta, e.last_timestamp, e.coordinator_epoch, e.current_txn_first_offset,
        )
        position += SNAPSHOT_ENTRY_SIZE
    SNAPSHOT_HEADER.pack_into(buf, 0, SNAPSHOT_VERSION, 0, len(ordered))
    _U32.pack_into(buf, CRC_POS, crc32c.crc32c(bytes(buf[CRC_START:])))
    return bytes(buf)


def decode_snapshot(data: bytes, source: str = "snapshot") -> list[ProducerEntry]:
    """Parse snapshot bytes; CorruptSnapshotError (naming ``source``) if anything is off."""
    if len(data) < SNAPSHOT_HEADER_SIZE:
        raise CorruptSnapshotError(f"{source}: {len(data)} bytes, shorter than the {SNAPSHOT_HEADER_SIZE}-byte header")
    version, stored_crc, count = SNAPSHOT_HEADER.unpack_from(data, 0)
    if version != SNAPSHOT_VERSION:
        raise CorruptSnapshotError(f"{source}: unknown snapshot version {version}, expected {SNAPSHOT_VERSION}")
    actual_crc = crc32c.crc32c(data[CRC_START:])
    if actual_crc != stored_crc:
        raise CorruptSnapshotError(f"{source}: CRC-32C {actual_crc:#010x} does not match the stored {stored_crc:#010x}")
    expected_size = SNAPSHOT_HEADER_SIZE + SNAPSHOT_ENTRY_SIZE * count
    if count < 0 or len(data) != expected_size:
        raise CorruptSnapshotError(f"{source}: {count} entries need {expected_size} bytes, file has {len(data)}")
    return [_entry_from_fields(fields) for fields in SNAPSHOT_ENTRY.iter_unpack(data[SNAPSHOT_HEADER_SIZE:])]


def _entry_from_fields(fields: tuple[int, ...]) -> ProducerEntry:
    entry = ProducerEntry(*fields)  # type: ignore[arg-type]  # the 8 snapshot fields, in order
    if entry.last_offset >= 0:  # the entry knows its last data batch: retain it for duplicates
        entry.recent_batches.append(
            RetainedBatch(entry.last_sequence, entry.last_offset, entry.offset_delta, entry.last_timestamp)
        )
    return entry


# --------------------------------------------------------------------------- the manager


class ProducerStateManager:
    """Producer id -> ProducerEntry for one partition, plus its snapshot files."""

    def __init__(self, partition_dir: StrPath) -> None:
        self.partition_dir = os.fspath(partition_dir)
        self.entries: dict[int, ProducerEntry] = {}
        # Every batch below this offset has been applied to ``entries``.
        self.map_end_offset = 0
        # Open transactions, producer id -> first offset; insertion order is first-offset
        # order (a transaction opens at the log end), so the first value is the smallest.
        self.ongoing: dict[int, int] = {}
        # Closed transactions whose marker is at or above the high watermark, marker order.
        self.unreplicated: deque[CompletedTxn] = deque()
        self.first_unstable = -1
        # Producer id -> its verification under way (see the module doc).
        self.verifying: dict[int, Verification] = {}

    # ----------------------------------------------------------------- verification

    def in_transaction(self, producer_id: int, producer_epoch: int) -> bool:
        """Whether the producer, at this epoch, has a transaction open on this partition
        (its batches need no verification: the coordinator already confirmed it)."""
        entry = self.entries.get(producer_id)
        return (entry is not None and entry.current_txn_first_offset >= 0
                and entry.producer_epoch == producer_epoch)

    def start_verification(self, producer_id: int, producer_epoch: int, base_sequence: int) -> int:
        """The guard an append verified by the coordinator must present; requests of the
        same producer and epoch verifying at once share it. The lowest sequence waiting is
        kept: until the transaction opens here, a batch above it is refused as out of order
        (a retriable answer for it), so a pipelined later batch whose answer comes back
        first cannot be appended before the first and wedge the producer (Kafka's
        VerificationStateEntry.lowestSequence)."""
        current = self.verifying.get(producer_id)
        if current is not None and current.epoch == producer_epoch:
            current.lowest_sequence = min(current.lowest_sequence, base_sequence)
            return current.guard
        if len(self.verifying) >= MAX_VERIFYING:
            # Guards of producers the coordinator refused stay until a marker; the oldest go first.
            del self.verifying[next(iter(self.verifying))]
        verification = self.verifying[producer_id] = Verification(producer_epoch, next(_GUARDS), base_sequence)
        return verification.guard

    def verified(self, producer_id: int, producer_epoch: int, guard: int) -> bool:
        """Whether ``guard`` is still this producer's: no marker came since it was handed out."""
        current = self.verifying.get(producer_id)
        return current is not None and current.epoch == producer_epoch and current.guard == guard

    def marker_written(self, producer_id: int, producer_epoch: int, transaction_version: int) -> None:
        """A marker ended the producer's transaction here: a verification begun for that
        transaction is void (its batch, late, must not open a transaction no coordinator
        will end). Under transaction.version 2 the marker carries the bumped epoch, which is
        the next transaction's: a verification at that epoch is the next transaction's and
        stays (the client may start it before this marker lands). Under 0-1 the next
        transaction keeps the epoch but cannot send before its AddPartitionsToTxn, which
        waits for every marker, so a verification at the marker's epoch is the ended one's."""
        verification = self.verifying.get(producer_id)
        if verification is None:
            return
        if transaction_version >= 2 and verification.epoch >= producer_epoch:
            return
        del self.verifying[producer_id]

    # ----------------------------------------------------------------- validation

    def check_sequence(self, header: BatchHeader) -> int:
        """Validate a producer's batch *before* appending it; returns a Kafka error code.

        * 0 (NONE): append it.
        * 46 DUPLICATE_SEQUENCE_NUMBER: one of the producer's last 5 batches in the same
          epoch had the same first and last sequence: a retry of something already
          appended. Do not append; like Kafka, answer the producer with success and the
          original offsets (``find_duplicate``); the wire code 46 is for old clients only.
        * 45 OUT_OF_ORDER_SEQUENCE_NUMBER: a gap or a rewind in the sequence; in a new
          epoch, a first sequence other than 0; or a batch without a sequence.
        * 47 INVALID_PRODUCER_EPOCH: the epoch is older than the stored one (zombie).

        A producer we know nothing about is accepted at any sequence, as Kafka does: its
        state may have gone with retention (or DeleteRecords), and refusing would wedge
        a healthy producer forever. Non-idempotent batches (producer_id < 0) pass.
        Control batches (txn markers) carry no sequence; only their epoch is checked.
        """
        if header.producer_id < 0:
            return NONE
        entry = self.entries.get(header.producer_id)
        if header.is_control:
            return INVALID_PRODUCER_EPOCH if entry is not None and header.producer_epoch < entry.producer_epoch else NONE
        if header.base_sequence < 0:
            return OUT_OF_ORDER_SEQUENCE_NUMBER
        verification = self.verifying.get(header.producer_id) if self.verifying else None
        if verification is not None and header.base_sequence > verification.lowest_sequence:
            return OUT_OF_ORDER_SEQUENCE_NUMBER  # a lower sequence of the producer is still verifying
        if entry is None or entry.producer_epoch < 0:
            return NONE
        if header.producer_epoch < entry.producer_epoch:
            return INVALID_PRODUCER_EPOCH
        if header.producer_epoch > entry.producer_epoch:
            # A bumped epoch restarts the producer's sequence space at 0.
            return NONE if header.base_sequence == 0 else OUT_OF_ORDER_SEQUENCE_NUMBER
        if entry.find_batch(header.base_sequence, header.last_sequence) is not None:
            return DUPLICATE_SEQUENCE_NUMBER
        return NONE if _in_sequence(entry.last_sequence, header.base_sequence) else OUT_OF_ORDER_SEQUENCE_NUMBER

    def find_duplicate(self, header: BatchHeader) -> RetainedBatch | None:
        """The already-appended batch that ``header`` repeats (same epoch and sequences)."""
        entry = self.entries.get(header.producer_id)
        if entry is None or header.is_control or entry.producer_epoch != header.producer_epoch:
            return None
        return entry.find_batch(header.base_sequence, header.last_sequence)

    # ----------------------------------------------------------------- applying the log

    def check_marker(self, producer_id: int, producer_epoch: int, coordinator_epoch: int) -> int:
        """Whether a COMMIT/ABORT marker may be written now; a Kafka error code (0: yes).

        * 47 INVALID_PRODUCER_EPOCH: the producer has written with a newer epoch.
        * 52 TRANSACTION_COORDINATOR_FENCED: a marker from a newer coordinator was
          written for this producer (an older coordinator lost the transaction).
        A producer unknown here, or with no open transaction, may get one: Kafka appends
        it too (it is harmless)."""
        entry = self.entries.get(producer_id)
        if entry is None:
            return NONE
        if producer_epoch < entry.producer_epoch:
            return INVALID_PRODUCER_EPOCH
        if coordinator_epoch < entry.coordinator_epoch:
            return TRANSACTION_COORDINATOR_FENCED
        return NONE

    def update(self, header: BatchHeader, marker: ControlRecord | None = None) -> CompletedTxn | None:
        """Apply one appended batch (producer_id >= 0), on the append path and on replay.

        ``header`` must carry its assigned offsets. No checks here: replay must accept
        whatever the log holds. For a control batch pass its ``marker`` (the record
        holds the type and the coordinator epoch, the header does not); the transaction
        it closes is returned, None when it closes none (a marker for a producer with
        no open transaction, or a control record of another type).
        """
        if header.producer_id < 0:
            raise ValueError(f"update() needs an idempotent batch, got producer id {header.producer_id}")
        entry = self.entries.get(header.producer_id)
        if entry is None:
            entry = self.entries[header.producer_id] = _empty_entry(header.producer_id, header.producer_epoch)
        if header.producer_epoch != entry.producer_epoch:
            _start_epoch(entry, header.producer_epoch)
        completed = None
        if header.is_control:
            completed = self._apply_marker(entry, header, marker)
        else:
            _apply_data_batch(entry, header)
            if entry.current_txn_first_offset >= 0 and entry.producer_id not in self.ongoing:
                if self.verifying:
                    self.verifying.pop(header.producer_id, None)  # verified: the transaction is open here
                self.ongoing[entry.producer_id] = entry.current_txn_first_offset
                if self.first_unstable < 0:
                    self.first_unstable = entry.current_txn_first_offset
        self.map_end_offset = max(self.map_end_offset, header.next_offset)
        return completed

    def _apply_marker(self, entry: ProducerEntry, header: BatchHeader, marker: ControlRecord | None) -> CompletedTxn | None:
        # A marker carries no sequence: the producer's sequence state is left as it was.
        entry.last_timestamp = header.max_timestamp
        if marker is None or not (marker.is_commit or marker.is_abort):
            return None  # a control record that ends no transaction (KRaft's, say)
        entry.coordinator_epoch = marker.coordinator_epoch
        first = entry.current_txn_first_offset
        if first < 0:
            return None  # an empty transaction: nothing to show in the LSO or the index
        entry.current_txn_first_offset = NO_TXN
        producer_id = entry.producer_id
        # Kafka's lastStableOffset(completedTxn): the next open transaction of another
        # producer, taken while this one is still among the open ones.
        next_open = next((offset for pid, offset in self.ongoing.items() if pid != producer_id), None)
        marker_offset = header.base_offset
        completed = CompletedTxn(producer_id, first, marker_offset, marker.is_abort,
                                 marker_offset + 1 if next_open is None else next_open)
        self.ongoing.pop(producer_id, None)
        self.unreplicated.append(completed)
        self._update_first_unstable()
        return completed

    def on_high_watermark(self, high_watermark: int) -> None:
        """Forget completed transactions whose marker the high watermark passed."""
        unreplicated = self.unreplicated
        if not unreplicated:
            return
        removed = False
        while unreplicated and unreplicated[0].last_offset < high_watermark:
            unreplicated.popleft()
            removed = True
        if removed:
            self._update_first_unstable()

    def remove_expired_producers(self, now_ms: int, expiration_ms: int) -> list[int]:
        """Forget every producer with no open transaction whose last batch or marker is
        ``expiration_ms`` old (Kafka's isProducerExpired, by the batch's max timestamp);
        returns their ids. A forgotten producer's next batch is accepted at any sequence,
        as a producer never seen is, and the cleaner no longer keeps its last batch."""
        expired = [pid for pid, entry in self.entries.items()
                   if entry.current_txn_first_offset == NO_TXN and now_ms - entry.last_timestamp >= expiration_ms]
        for pid in expired:
            del self.entries[pid]
        return expired

    def first_unstable_offset(self) -> int | None:
        """The first offset a read_committed consumer may not see yet: the first offset of
        the oldest open transaction, or of a completed one whose marker is not yet below
        the high watermark; None when there is none."""
        return self.first_unstable if self.first_unstable >= 0 else None

    def _update_first_unstable(self) -> None:
        lowest = next(iter(self.ongoing.values()), -1)
        for txn in self.unreplicated:
            if lowest < 0 or txn.first_offset < lowest:
                lowest = txn.first_offset
        self.first_unstable = lowest

    def _reset_transactions(self) -> None:
        """Rebuild ``ongoing`` from the entries (a snapshot was loaded, or none)."""
        opened = sorted((e.current_txn_first_offset, e.producer_id) for e in self.entries.values()
                        if e.current_txn_first_offset >= 0)
        self.ongoing = {producer_id: first for first, producer_id in opened}
        self.unreplicated = deque()
        self._update_first_unstable()

    def update_map_end_offset(self, offset: int) -> None:
        """Record that the log up to ``offset`` has been applied (batches without producer ids advance it too)."""
        self.map_end_offset = offset

    # ----------------------------------------------------------------- snapshots

    def snapshot_path(self, offset: int) -> str:
        return os.path.join(self.partition_dir, snapshot_file_name(offset))

    def snapshot_offsets(self) -> list[int]:
        """Offsets of the snapshot files in the partition dir, ascending."""
        try:
            names = os.listdir(self.partition_dir)
        except OSError as exc:
            raise LogDirOfflineError(f"cannot list {self.partition_dir}: {exc}") from exc
        matches = (_SNAPSHOT_NAME_RE.fullmatch(name) for name in names)
        return sorted(int(m.group(1)) for m in matches if m)

    def take_snapshot(self, offset: int, *, in_background: bool = False) -> str:
        """Write the current state as ``<offset>.snapshot`` (atomically) and return its path.

        ``offset`` says the state reflects the log below it, so it cannot be below
        map_end_offset: such a snapshot would carry batches a truncation to ``offset``
        removes. Usually the log end offset at a segment roll or shutdown.

        ``in_background`` (a roll): the state is encoded now and the file written, with
        its two fsyncs, on the block releaser's thread (storage/releaser.py). Kafka also
        takes the roll's fsync off the append path. A snapshot lost to a crash costs only
        a longer replay of the log at the next start.
        """
        if offset < self.map_end_offset:
            raise ValueError(f"snapshot offset {offset} is below map_end_offset {self.map_end_offset}")
        path = self.snapshot_path(offset)
        data = encode_snapshot(self.entries.values())
        if in_background:
            RELEASER.submit(write_bytes_atomically, path, data)
        else:
            write_bytes_atomically(path, data)
        self.map_end_offset = offset
        return path

    def load_latest_snapshot(self, max_offset: int) -> int:
        """Replace the state by the newest readable snapshot at or below ``max_offset``.

        Corrupt snapshots (bad CRC, version or size) are deleted and the next older one
        is tried. Returns the loaded snapshot's offset, which becomes map_end_offset; the
        caller replays the log from there. Returns 0 with an empty state if none is usable.
        """
        self._remove_temp_files()
        self.entries = {}
        self.map_end_offset = 0
        self._reset_transactions()
        for offset in reversed(self.snapshot_offsets()):
            if offset > max_offset:
                continue
            loaded = self._read_snapshot(offset)
            if loaded is None:
                continue
            self.entries = {e.producer_id: e for e in loaded}
            self.map_end_offset = offset
            self._reset_transactions()
            return offset
        return 0

    def truncate_and_reload(self, log_start: int, log_end: int) -> int:
        """Make the state match a log now spanning [log_start, log_end); returns the offset to replay from.

        Deletes snapshots above log_end (they describe truncated batches) and below
        log_start (retention removed their segments). A snapshot exactly at log_start
        is kept, unlike Kafka: it still describes producers whose batches were deleted,
        which is what keeps their dedup state. If the in-memory state does not already
        end at log_end it is reloaded from the newest remaining snapshot; the caller then
        replays batches in [returned offset, log_end).
        """
        self.delete_snapshots_after(log_end)
        self.delete_snapshots_before(log_start)
        if self.map_end_offset != log_end:
            loaded = self.load_latest_snapshot(log_end)
            # Nothing usable: the state is empty and the whole remaining log must be replayed.
            self.map_end_offset = max(loaded, log_start)
        else:
            self.map_end_offset = max(self.map_end_offset, log_start)
        return self.map_end_offset

    def delete_snapshots_after(self, offset: int) -> None:
        """Delete snapshots with offset > ``offset`` (log truncation)."""
        for snap in self.snapshot_offsets():
            if snap > offset:
                self._delete_snapshot(snap)

    def delete_snapshots_before(self, offset: int) -> None:
        """Delete snapshots with offset < ``offset`` (retention moved the log start)."""
        for snap in self.snapshot_offsets():
            if snap < offset:
                self._delete_snapshot(snap)

    def _read_snapshot(self, offset: int) -> list[ProducerEntry] | None:
        """The snapshot's entries, or None if it was corrupt (and has been deleted)."""
        path = self.snapshot_path(offset)
        # An I/O error (LogDirOfflineError) says nothing about the content: not deleted.
        data = read_bytes_if_exists(path)
        if data is None:
            return None
        try:
            return decode_snapshot(data, path)
        except CorruptSnapshotError as exc:
            log.warning("deleting corrupt producer snapshot: %s", exc)
            self._delete_snapshot(offset)
            return None

    def _delete_snapshot(self, offset: int) -> None:
        _unlink_if_exists(self.snapshot_path(offset))

    def _remove_temp_files(self) -> None:
        """Drop ``*.snapshot.tmp`` left by a crash in the middle of take_snapshot."""
        try:
            names = os.listdir(self.partition_dir)
        except OSError as exc:
            raise LogDirOfflineError(f"cannot list {self.partition_dir}: {exc}") from exc
        for name in names:
            if name.endswith(SNAPSHOT_SUFFIX + TMP_SUFFIX):
                _unlink_if_exists(os.path.join(self.partition_dir, name))


# --------------------------------------------------------------------------- entry updates


def _in_sequence(last_sequence: int, base_sequence: int) -> bool:
    # last_sequence -1: the epoch has no data batch yet, so the next one must start at 0.
    return base_sequence == (last_sequence + 1) % SEQUENCE_MODULUS


def _empty_entry(producer_id: int, producer_epoch: int) -> ProducerEntry:
    return ProducerEntry(
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        last_sequence=NO_SEQUENCE,
        last_offset=NO_OFFSET,
        offset_delta=0,
        last_timestamp=-1,
        coordinator_epoch=NO_COORDINATOR_EPOCH,
        current_txn_first_offset=NO_TXN,
    )


def _start_epoch(entry: ProducerEntry, producer_epoch: int) -> None:
    """A new epoch starts a new sequence space: forget the old epoch's batches."""
    entry.producer_epoch = producer_epoch
    entry.last_sequence = NO_SEQUENCE
    entry.last_offset = NO_OFFSET
    entry.offset_delta = 0
    entry.recent_batches.clear()


def _apply_data_batch(entry: ProducerEntry, header: BatchHeader) -> None:
    entry.last_sequence = header.last_sequence
    entry.last_offset = header.last_offset
    entry.offset_delta = header.last_offset_delta
    entry.last_timestamp = header.max_timestamp
    entry.recent_batches.append(
        RetainedBatch(header.last_sequence, header.last_offset, header.last_offset_delta, header.max_timestamp)
    )
    if header.is_transactional and entry.current_txn_first_offset == NO_TXN:
        entry.current_txn_first_offset = header.base_offset  # the first batch opens the txn


def _unlink_if_exists(path: str) -> None:
    try:
        files.unlink_if_exists(path)
    except OSError as exc:
        raise LogDirOfflineError(f"cannot delete {path}: {exc}") from exc
