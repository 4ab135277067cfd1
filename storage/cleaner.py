"""Log compaction (cleanup.policy=compact, or compact,delete): keep the latest record per key.

A simpler, single-pass relative of Kafka's LogCleaner. One call of ``clean_log`` does::

    1. cleanable range: the sealed (non-active) segments from the log start, stopping
       at the first one reaching past the last stable offset (Kafka's first uncleanable
       offset: below it every transaction is decided, so a transactional batch not listed
       as aborted in the .txnindex files is committed), or whose newest record is younger
       than min.compaction.lag.ms (a consumer is promised to see every record that long)
    2. pass 1, offset map: key -> offset of its latest record, over the *dirty* part
       of the range (offsets >= first_dirty_offset, i.e. not covered by an earlier
       cleaning). Control batches and batches of aborted transactions add nothing, so an
       aborted write never shadows a committed value
    3. pass 2, per segment of the range, write a cleaned copy ``<B>.log.cleaned``:
       a record is kept when it is the latest of its key (offset >= map[key], or its
       key is not in the map), except a tombstone (value None) older than
       delete.retention.ms, which goes; records without a key go too (Kafka's rule:
       they cannot be compacted); records of aborted transactions all go. Per batch:
         - batches losing nothing are copied byte for byte
         - a batch losing some records is re-encoded with its base offset, last offset
           delta, producer id/epoch/base sequence, partition leader epoch, codec,
           timestamp type, transactional bit, base and max timestamps unchanged
         - a non-transactional batch losing all of them stays as an EMPTY batch (record
           count 0, same base offset and last offset delta, uncompressed, as Kafka
           writes them), so its offsets and producer fields stay
         - a transactional batch losing all of them is removed (cleaner_txn.py says why
           no transactional batch may outlive its marker), unless it is its producer's
           last batch (Kafka's RETAIN_EMPTY: the producer's sequence and epoch survive a
           restart) or its segment's last (then an empty batch with no producer keeps
           the segment's end offset: segments are cleaned one by one, never merged)
         - a marker (control batch) stays while a batch of its transaction is seen in
           this pass (cleaner_txn.TxnTracker). Once none is, the first pass stamps it
           with a delete horizon (now + delete.retention.ms, KIP-534's attribute bit and
           base timestamp) and a pass after the horizon removes it (kept empty when it
           is its producer's last batch): Kafka's two steps, so a consumer that saw the
           aborted data still has delete.retention.ms to read the marker after it.
         - the copy's ``.txnindex`` keeps the entries of aborted transactions whose
           marker stays because their data does
       A segment whose copy would equal it byte for byte is not swapped (idempotence).
    4. swap the cleaned copy in for its source (crash-safe protocol below)

Crash safety (Kafka's protocol; recovery is log.py ``_finish_interrupted_operations``)::

    a. write <B>.log.cleaned, fsync it      crash: the .cleaned file is garbage, deleted
                                            on restart; the source is served
    b. write <B>.txnindex.swap (the         the copy's transaction index (none when it
       copy's aborted txns), then rename    keeps no entry); it goes first: a
       <B>.log.cleaned to <B>.log.swap,     .txnindex.swap without a
       fsync the directory                  .log.swap is garbage. The .log.swap is the
                                            point of no return: on restart it replaces
                                            <B>.log (and its indexes, the .txnindex by its
                                            .swap) whatever else happened after
    c. owner thread, ``swap_in_cleaned_segment``:
       c1. rename the source's files to     frees the name <B>.log; the source keeps its
           .deleted                         open fd, so readers holding the old segment
                                            list snapshot (or a FileRange) keep working
       c2. rename <B>.txnindex.swap and
           <B>.log.swap to their live names
       c3. open a sealed LogSegment on it   no index files exist under that name: the
                                            segment rebuilds them from the log
       c4. PartitionLog.replace_segments    one assignment of the copy-on-write list; the
                                            source (already renamed, so not renamed
                                            twice) waits file.delete.delay.ms to close
       c5. fsync the directory
    A crash anywhere in c leaves the .swap or the final <B>.log holding the cleaned
    data, and only .deleted files (removed on restart) holding the source.

Choices that differ from Kafka, on purpose:

* Tombstone expiry uses the tombstone's own timestamp: it is removed when
  ``record.timestamp < now_ms - delete.retention.ms``. Kafka >= 3.1 (KIP-534) instead
  stamps a delete horizon into the batch on the first cleaning that sees the tombstone
  and removes it on a later cleaning after that horizon. We write no horizon into a
  tombstone's batch (one pass, nothing to remember) but honour one found in a batch Kafka
  wrote (attribute bit 6): then the tombstone goes once now_ms >= the horizon.
* Emptied non-transactional batches are always kept (Kafka keeps them only to
  preserve a producer's last sequence); emptied transactional ones follow Kafka's rule.
  Markers use KIP-534's horizon, tombstones their own timestamp.
* The range stops at the segment holding the LSO (Kafka cleans up to the LSO inside it).
* The offset map is an unbounded dict (Kafka bounds it by log.cleaner.dedupe.buffer.size
  and cleans a prefix of the dirty range per round); segments are not grouped.

Threading: ``clean_log`` reads only sealed segments, but it swaps segments, so it must
run on the log's owner thread, like roll, retention and truncation. The cleaner-offset
checkpoint (``first_dirty_offset`` in and out) is the caller's to persist
(checkpoint.write_offset_checkpoint on ``cleaner-offset-checkpoint``).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from typing import Iterator, NamedTuple, Sequence

from storage import files
from storage.batch import DELETE_HORIZON_MASK, BatchHeader, iter_headers
from storage.checkpoint import write_bytes_atomically
from storage.cleaner_txn import LastRecord, TxnTracker, is_last_batch_of_producer, last_records_of_active_producers
from storage.errors import CorruptRecordError
from storage.log import PartitionLog
from storage.records import ControlRecord, Record, decode_batch, encode_batch, parse_control_record, rebuild_batch
from storage.segment import LogSegment
from storage.txn_index import AbortedTxn, encode_entry

logger = logging.getLogger(__name__)

# Bytes read from a segment per pread; a larger batch is read on its own.
READ_CHUNK_BYTES = 1 << 20

OffsetMap = dict[bytes, int]


@dataclass(frozen=True, slots=True)
class CleanResult:
    """What one ``clean_log`` call did."""

    sources: tuple[int, ...]  # base offsets of the segments replaced by a cleaned copy
    segments_examined: int  # segments in the cleanable range
    bytes_before: int  # size of the cleanable range before
    bytes_after: int  # and after
    records_removed: int  # superseded + expired tombstones + keyless + aborted
    tombstones_removed: int  # expired tombstones (included in records_removed)
    first_dirty_offset: int  # the next cleaner checkpoint: end of the cleanable range
    aborted_removed: int = 0  # records of aborted transactions (included in records_removed)
    markers_removed: int = 0  # transaction markers removed after their delete horizon


@dataclass(frozen=True, slots=True)
class CleanedSegment:
    """Step a's output for one source segment: ``path`` is its ``.log.cleaned`` file."""

    source: LogSegment
    path: str
    size_before: int
    size_after: int
    records_removed: int
    tombstones_removed: int
    changed: bool  # False: the copy equals the source byte for byte (and its .txnindex too)
    txn_entries: tuple[AbortedTxn, ...] = ()  # the copy's .txnindex
    aborted_removed: int = 0
    markers_removed: int = 0


# ----------------------------------------------------------------- range & ratio


def cleanable_segments(log: PartitionLog, now_ms: int | None = None) -> list[LogSegment]:
    """Sealed segments from the log start up to the first one too young to clean.

    ``now_ms`` None ignores min.compaction.lag.ms (the dirty-ratio estimate).
    """
    lag = log.config.min_compaction_lag_ms
    # The LSO is at most the high watermark: records above it may yet be truncated, and
    # transactions from it on are undecided (or their marker not yet replicated).
    first_uncleanable = log.last_stable_offset
    out: list[LogSegment] = []
    for segment in log.segments:
        if segment.is_active or segment.next_offset > first_uncleanable:
            break
        if segment.next_offset <= log.log_start_offset:
            continue  # wholly deleted (DeleteRecords); retention unlinks it
        # retention_timestamp: the newest record's timestamp (file mtime if none has one).
        if now_ms is not None and lag > 0 and segment.retention_timestamp > now_ms - lag:
            break
        out.append(segment)
    return out


def effective_first_dirty_offset(log: PartitionLog, first_dirty_offset: int | None) -> int:
    """The checkpoint, or the log start when there is none or it is out of range.

    Out of range happens after DeleteRecords/retention (below the start) or after a
    truncation the checkpoint missed (past the end): cleaning everything is then safe.
    """
    if first_dirty_offset is None or not log.log_start_offset <= first_dirty_offset <= log.log_end_offset:
        return log.log_start_offset
    return first_dirty_offset


def dirty_ratio(log: PartitionLog, first_dirty_offset: int | None = None, *, now_ms: int | None = None) -> float:
    """Dirty bytes / all bytes of the cleanable range (0.0 when the range is empty).

    A segment counts as dirty when it holds offsets at or after the first dirty offset.
    """
    start = effective_first_dirty_offset(log, first_dirty_offset)
    segments = cleanable_segments(log, now_ms)
    total = sum(s.size for s in segments)
    if total == 0:
        return 0.0
    dirty = sum(s.size for s in segments if s.next_offset > start)
    return dirty / total


def needs_cleaning(log: PartitionLog, first_dirty_offset: int | None = None, *, now_ms: int) -> bool:
    """Compacted log whose dirty ratio reached min.cleanable.dirty.ratio, or whose oldest
    dirty record waited longer than max.compaction.lag.ms (then whatever the ratio)."""
    if not log.config.compact:
        return False
    ratio = dirty_ratio(log, first_dirty_offset, now_ms=now_ms)
    if ratio <= 0.0:
        return False
    return ratio >= log.config.min_cleanable_dirty_ratio or _compaction_overdue(log, first_dirty_offset, now_ms)


def _compaction_overdue(log: PartitionLog, first_dirty_offset: int | None, now_ms: int) -> bool:
    """The first dirty segment's first batch is older than max.compaction.lag.ms (Kafka
    also dates it by its first batch's max timestamp; a batch without one never is)."""
    lag = log.config.max_compaction_lag_ms
    if lag >= now_ms:
        return False  # the default (Long.MAX_VALUE): never overdue
    start = effective_first_dirty_offset(log, first_dirty_offset)
    for segment in cleanable_segments(log, now_ms):
        if segment.next_offset > start:
            header = segment.read_header(0)
            return header is not None and 0 <= header.max_timestamp < now_ms - lag
    return False


# ----------------------------------------------------------------- reading segments


def iter_segment_batches(segment: LogSegment) -> Iterator[tuple[BatchHeader, memoryview]]:
    """(header, whole batch bytes) of every batch of a sealed segment, in order.

    Reads in chunks of READ_CHUNK_BYTES rather than two preads per batch.
    """
    position = 0
    size = segment.size
    while position < size:
        chunk = memoryview(os.pread(segment.fd, min(READ_CHUNK_BYTES, size - position), position))
        used = 0
        for batch_position, header in iter_headers(chunk):
            yield header, chunk[batch_position : batch_position + header.size]
            used = batch_position + header.size
        if used == 0:
            # The next batch is larger than a chunk (or torn): read it alone.
            single = segment.read_header(position)
            if single is None:
                raise CorruptRecordError(f"{segment.path}: no valid batch at {position}", path=segment.path, position=position)
            yield single, memoryview(os.pread(segment.fd, single.size, position))
            used = single.size
        position += used


# ----------------------------------------------------------------- pass 1: offset map


def build_offset_map(segments: Sequence[LogSegment], start_offset: int,
                     aborted: Sequence[tuple[int, int]] = ()) -> OffsetMap:
    """key -> offset of its latest record at or after ``start_offset``, leaving out the
    records of ``aborted`` transactions ((producer id, first offset), as
    ``PartitionLog.aborted_transactions`` lists them): every other transaction below the
    last stable offset is committed."""
    latest: OffsetMap = {}
    tracker = TxnTracker(list(aborted))
    for segment in segments:
        for header, raw in iter_segment_batches(segment):
            if header.last_offset < start_offset:
                continue
            if header.is_control:
                tracker.on_marker(header, _marker_of(raw))
                continue
            if tracker.on_batch(header) or header.record_count == 0:
                continue
            _header, records = decode_batch(raw)
            for record in records:
                if record.key is not None and record.offset >= start_offset:
                    latest[record.key] = record.offset
    return latest


def _marker_of(raw: memoryview) -> ControlRecord | None:
    """The record of a control batch; None when it holds none (emptied by a cleaner) or
    an unreadable one (then it ends no transaction, as on the log's replay)."""
    try:
        _header, records = decode_batch(raw)
        return parse_control_record(records[0]) if records else None
    except CorruptRecordError:
        return None


# ----------------------------------------------------------------- pass 2: cleaned copy


@dataclass(slots=True)
class SegmentCleaner:
    """Pass 2's per-batch rules for one round: the offset map, the transactions met so
    far (one tracker across the round's segments, in offset order) and each live
    producer's last batch."""

    offset_map: OffsetMap
    now_ms: int
    delete_retention_ms: int
    tracker: TxnTracker = field(default_factory=lambda: TxnTracker([]))
    last_records: dict[int, LastRecord] = field(default_factory=dict)

    def clean(self, header: BatchHeader, raw: memoryview, *, segment_last: bool) -> BatchOutcome:
        if header.is_control:
            return self._clean_marker(header, raw, segment_last)
        aborted = header.producer_id >= 0 and self.tracker.on_batch(header)
        if header.record_count == 0:
            return self._all_gone(header, raw, segment_last, BatchOutcome(raw))
        if aborted:
            return self._all_gone(header, raw, segment_last,
                                  BatchOutcome(raw, header.record_count, aborted=header.record_count))
        data, removed, tombstones = clean_batch(header, raw, self.offset_map, now_ms=self.now_ms,
                                                delete_retention_ms=self.delete_retention_ms)
        if removed < header.record_count:
            return BatchOutcome(data, removed, tombstones)
        return self._all_gone(header, raw, segment_last, BatchOutcome(data, removed, tombstones))

    def _clean_marker(self, header: BatchHeader, raw: memoryview, segment_last: bool) -> BatchOutcome:
        marker = _marker_of(raw)
        if not self.tracker.on_marker(header, marker):
            return BatchOutcome(raw)  # a batch of its transaction is still here
        if marker is not None and not header.has_delete_horizon:
            # First pass without its data: the horizon starts now.
            horizon = self.now_ms + self.delete_retention_ms
            stamped = header._replace(attributes=header.attributes | DELETE_HORIZON_MASK, base_timestamp=horizon)
            return BatchOutcome(rebuild_batch(stamped, decode_batch(raw)[1]))
        if marker is not None and header.base_timestamp > self.now_ms:
            return BatchOutcome(raw)
        return self._all_gone(header, raw, segment_last, BatchOutcome(raw, markers=1 if marker is not None else 0))

    def _all_gone(self, header: BatchHeader, raw: memoryview, segment_last: bool, outcome: BatchOutcome) -> BatchOutcome:
        """What stays of a batch none of whose records stay."""
        if is_last_batch_of_producer(header, self.last_records) or not header.is_transactional:
            data: bytes | memoryview | None = raw if header.record_count == 0 else rebuild_batch(header, [])
        elif segment_last:
            data = _offset_placeholder(header)
        else:
            data = None
        return outcome._replace(data=data)


class BatchOutcome(NamedTuple):
    """One batch's cleaned form: ``data`` None when it goes, ``raw`` itself when unchanged."""

    data: bytes | memoryview | None
    removed: int = 0
    tombstones: int = 0
    aborted: int = 0
    markers: int = 0


def _offset_placeholder(header: BatchHeader) -> bytes:
    """An empty batch with no producer over ``header``'s offsets: a segment's end offset
    stays where it was, and it opens no transaction on a replay."""
    return encode_batch([], base_offset=header.base_offset, last_offset_delta=header.last_offset_delta,
                        timestamp_type=header.timestamp_type, partition_leader_epoch=header.partition_leader_epoch,
                        base_timestamp=header.base_timestamp, max_timestamp=header.max_timestamp)


def _tombstone_expired(header: BatchHeader, record: Record, now_ms: int, delete_retention_ms: int) -> bool:
    if header.has_delete_horizon:
        # Written by a Kafka cleaner (KIP-534): baseTimestamp is the delete horizon.
        return header.base_timestamp <= now_ms
    return record.timestamp < now_ms - delete_retention_ms


def clean_batch(header: BatchHeader, raw: memoryview, offset_map: OffsetMap, *, now_ms: int,
                delete_retention_ms: int) -> tuple[bytes | memoryview, int, int]:
    """The cleaned form of one data batch by the offset map and tombstone rule:
    (bytes, records removed, tombstones removed).

    Returns ``raw`` itself when nothing is removed, so unchanged batches are copied.
    """
    if header.is_control or header.record_count == 0:
        return raw, 0, 0
    _header, records = decode_batch(raw)
    kept: list[Record] = []
    tombstones = 0
    for record in records:
        if record.key is None or record.offset < offset_map.get(record.key, record.offset):
            continue  # keyless, or superseded by a later record of the key
        if record.value is None and _tombstone_expired(header, record, now_ms, delete_retention_ms):
            tombstones += 1
            continue
        kept.append(record)
    removed = len(records) - len(kept)
    if removed == 0:
        return raw, 0, 0
    return rebuild_batch(header, kept), removed, tombstones


def write_cleaned_segment(segment: LogSegment, cleaner: SegmentCleaner) -> CleanedSegment:
    """Step a: write and fsync ``<B>.log.cleaned`` next to the sealed ``segment``."""
    if segment.is_active or not segment.path.endswith(files.LOG_SUFFIX):
        raise ValueError(f"{segment.path}: only a sealed, live segment can be cleaned")
    path = segment.path + files.CLEANED_SUFFIX
    removed = tombstones = aborted = markers = size_after = 0
    changed = False
    end = segment.next_offset
    try:
        with open(path, "wb") as out:
            for header, raw in iter_segment_batches(segment):
                outcome = cleaner.clean(header, raw, segment_last=header.next_offset == end)
                if outcome.data is not None:
                    out.write(outcome.data)
                    size_after += len(outcome.data)
                removed += outcome.removed
                tombstones += outcome.tombstones
                aborted += outcome.aborted
                markers += outcome.markers
                changed = changed or outcome.data is not raw
            out.flush()
            os.fsync(out.fileno())
    except BaseException:
        files.unlink_if_exists(path)
        raise
    source_entries = tuple(segment.txn_index.entries)
    retained = cleaner.tracker.retained_aborted
    txn_entries = tuple(e for e in source_entries if (e.producer_id, e.first_offset) in retained)
    changed = changed or txn_entries != source_entries
    return CleanedSegment(segment, path, segment.size, size_after, removed, tombstones, changed, txn_entries,
                          aborted, markers)


def promote_to_swap(cleaned: CleanedSegment) -> str:
    """Step b, the point of no return: ``.log.cleaned`` -> ``.log.swap``, made durable,
    after the copy's transaction index is written to ``.txnindex.swap``."""
    source = cleaned.source
    if cleaned.txn_entries:
        txn_swap = files.txn_index_path(source.directory, source.base_offset) + files.SWAP_SUFFIX
        write_bytes_atomically(txn_swap, b"".join(encode_entry(txn) for txn in cleaned.txn_entries))
    swap_path = cleaned.path[: -len(files.CLEANED_SUFFIX)] + files.SWAP_SUFFIX
    os.replace(cleaned.path, swap_path)
    files.fsync_dir(os.path.dirname(swap_path))
    return swap_path


def swap_in_cleaned_segment(log: PartitionLog, source: LogSegment, swap_path: str) -> LogSegment:
    """Step c (owner thread): the cleaned file takes the source's name and place."""
    if not any(s is source for s in log.segments) or source.is_active:
        raise ValueError(f"{source.path} is no longer a sealed segment of {log.tp}")
    final_path = source.path
    # c1 before c2: the source's files must leave the name the cleaned copy takes.
    # Its fd and index maps stay open, so old snapshots and FileRanges still read.
    source.rename_with_suffix(files.DELETED_SUFFIX)
    txn_index = files.txn_index_path(log.directory, source.base_offset)
    if os.path.exists(txn_index + files.SWAP_SUFFIX):
        os.replace(txn_index + files.SWAP_SUFFIX, txn_index)
    os.replace(swap_path, final_path)
    # No .index/.timeindex under this name any more: the segment rebuilds them.
    cleaned = LogSegment(log.directory, source.base_offset, log.config, active=False)
    log.replace_segments([source], [cleaned])
    files.fsync_dir(log.directory)
    return cleaned


def discard(cleaned: CleanedSegment) -> None:
    """Drop a ``.log.cleaned`` file that will not be swapped in."""
    files.unlink_if_exists(cleaned.path)


# ----------------------------------------------------------------- the whole round


def clean_log(log: PartitionLog, *, now_ms: int, first_dirty_offset: int | None = None) -> CleanResult:
    """Compact the cleanable range of ``log`` (owner thread). See the module docstring.

    ``first_dirty_offset`` is the cleaner checkpoint of the previous round: records
    before it were compacted already, so only later ones feed the offset map (every
    segment of the range is still rewritten: a later record may supersede an earlier
    one, and tombstones expire). None means "clean everything from the log start".
    """
    if not log.config.compact:
        raise ValueError(f"{log.tp}: cleanup.policy {log.config.cleanup_policy!r} does not include compact")
    start = effective_first_dirty_offset(log, first_dirty_offset)
    segments = cleanable_segments(log, now_ms)
    if not segments:
        return CleanResult((), 0, 0, 0, 0, 0, start)
    range_end = segments[-1].next_offset
    offset_map = build_offset_map(segments, start, log.aborted_transactions(start, range_end))
    cleaner = SegmentCleaner(offset_map, now_ms, log.config.delete_retention_ms,
                             TxnTracker(log.aborted_transactions(segments[0].base_offset, range_end)),
                             last_records_of_active_producers(log.producer_state))
    sources: list[int] = []
    bytes_before = bytes_after = removed = tombstones = aborted = markers = 0
    for segment in segments:
        cleaned = write_cleaned_segment(segment, cleaner)
        bytes_before += cleaned.size_before
        bytes_after += cleaned.size_after
        removed += cleaned.records_removed
        tombstones += cleaned.tombstones_removed
        aborted += cleaned.aborted_removed
        markers += cleaned.markers_removed
        if not cleaned.changed:
            discard(cleaned)
            continue
        swap_in_cleaned_segment(log, segment, promote_to_swap(cleaned))
        sources.append(segment.base_offset)
    # The checkpoint never moves back (a checkpoint past a too-young segment stays).
    end = max(segments[-1].next_offset, start)
    result = CleanResult(tuple(sources), len(segments), bytes_before, bytes_after, removed, tombstones, end,
                         aborted, markers)
    _log_summary(log, result)
    return result


def _log_summary(partition_log: PartitionLog, result: CleanResult) -> None:
    if result.sources:
        logger.info("cleaned %s: %d of %d segments rewritten, %d -> %d bytes, %d records removed (%d tombstones), "
                 "first dirty offset now %d", partition_log.tp, len(result.sources), result.segments_examined,
                 result.bytes_before, result.bytes_after, result.records_removed, result.tombstones_removed,
                 result.first_dirty_offset)


__all__ = [
    "BatchOutcome",
    "CleanResult",
    "CleanedSegment",
    "SegmentCleaner",
    "build_offset_map",
    "clean_batch",
    "clean_log",
    "cleanable_segments",
    "dirty_ratio",
    "discard",
    "effective_first_dirty_offset",
    "iter_segment_batches",
    "needs_cleaning",
    "promote_to_swap",
    "swap_in_cleaned_segment",
    "write_cleaned_segment",
]
