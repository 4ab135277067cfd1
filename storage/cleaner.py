"""Log compaction (cleanup.policy=compact, or compact,delete): keep the latest record per key.

A simpler, single-pass relative of Kafka's LogCleaner. One call of ``clean_log`` does::

    1. cleanable range: the sealed (non-active) segments from the log start, stopping
       at the first one whose newest record is younger than min.compaction.lag.ms
       (a consumer is promised to see every record for at least that long)
    2. pass 1, offset map: key -> offset of its latest record, over the *dirty* part
       of the range (offsets >= first_dirty_offset, i.e. not covered by an earlier
       cleaning). Control batches add nothing; transactional records enter the map only
       once their COMMIT marker is seen inside the range, so an aborted (or undecided)
       write never shadows a committed value
    3. pass 2, per segment of the range, write a cleaned copy ``<B>.log.cleaned``:
       a record is kept when it is the latest of its key (offset >= map[key], or its
       key is not in the map), except a tombstone (value None) older than
       delete.retention.ms, which goes; records without a key go too (Kafka's rule:
       they cannot be compacted). Per batch:
         - control batches and batches losing nothing are copied byte for byte
         - a batch losing some records is re-encoded with its base offset, last offset
           delta, producer id/epoch/base sequence, partition leader epoch, codec,
           timestamp type, transactional bit, base and max timestamps unchanged
         - a batch losing all of them stays as an EMPTY batch (record count 0, same
           base offset and last offset delta, uncompressed, as Kafka writes them)
       so every batch keeps its first and last offset: the log end offset, the offsets
       of kept records, the producer state rebuilt from headers and the segment's max
       timestamp (retention, min.compaction.lag.ms) are all what they were.
       A segment whose copy would equal it byte for byte is not swapped (idempotence).
    4. swap the cleaned copy in for its source (crash-safe protocol below)

Crash safety (Kafka's protocol; recovery is log.py ``_finish_interrupted_operations``)::

    a. write <B>.log.cleaned, fsync it      crash: the .cleaned file is garbage, deleted
                                            on restart; the source is served
    b. write <B>.txnindex.swap (the         cleaning keeps every marker and offset, so
       source's aborted txns), then rename  the source's transaction index is the copy's;
       <B>.log.cleaned to <B>.log.swap,     it goes first: a .txnindex.swap without a
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
  and removes it on a later cleaning after that horizon. We write no horizon (one pass,
  nothing to remember) but honour one found in a batch Kafka wrote (attribute bit 6):
  then the tombstone goes once now_ms >= the horizon.
* Empty batches are always kept (Kafka keeps them only to preserve a producer's last
  sequence); control batches (transaction markers) are never removed, and records of
  aborted transactions that are the latest of their key are left in place (a
  read_committed consumer filters them), never used to delete a committed value.
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
from dataclasses import dataclass
from typing import Iterator, Sequence

from storage import files
from storage.batch import BatchHeader, iter_headers
from storage.checkpoint import write_bytes_atomically
from storage.errors import CorruptRecordError
from storage.log import PartitionLog
from storage.records import Record, decode_batch, parse_control_record, rebuild_batch
from storage.segment import LogSegment
from storage.txn_index import encode_entry

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
    records_removed: int  # superseded + expired tombstones + keyless
    tombstones_removed: int  # expired tombstones (included in records_removed)
    first_dirty_offset: int  # the next cleaner checkpoint: end of the cleanable range


@dataclass(frozen=True, slots=True)
class CleanedSegment:
    """Step a's output for one source segment: ``path`` is its ``.log.cleaned`` file."""

    source: LogSegment
    path: str
    size_before: int
    size_after: int
    records_removed: int
    tombstones_removed: int
    changed: bool  # False: the copy equals the source byte for byte


# ----------------------------------------------------------------- range & ratio


def cleanable_segments(log: PartitionLog, now_ms: int | None = None) -> list[LogSegment]:
    """Sealed segments from the log start up to the first one too young to clean.

    ``now_ms`` None ignores min.compaction.lag.ms (the dirty-ratio estimate).
    """
    lag = log.config.min_compaction_lag_ms
    out: list[LogSegment] = []
    for segment in log.segments:
        if segment.is_active or segment.next_offset > log.high_watermark:
            break  # never past the high watermark: uncommitted records may yet be truncated
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


def build_offset_map(segments: Sequence[LogSegment], start_offset: int) -> OffsetMap:
    """key -> offset of its latest committed record at or after ``start_offset``."""
    latest: OffsetMap = {}
    # Transactional writes wait for their producer's marker: COMMIT applies them,
    # ABORT drops them, none inside the range leaves them out (conservative).
    pending: dict[int, list[tuple[bytes, int]]] = {}
    for segment in segments:
        for header, raw in iter_segment_batches(segment):
            if header.last_offset < start_offset:
                continue
            if header.is_control:
                _resolve_transaction(header, raw, pending, latest)
                continue
            _header, records = decode_batch(raw)
            target = pending.setdefault(header.producer_id, []) if header.is_transactional else None
            for record in records:
                if record.key is None or record.offset < start_offset:
                    continue
                if target is not None:
                    target.append((record.key, record.offset))
                else:
                    latest[record.key] = record.offset
    return latest


def _resolve_transaction(header: BatchHeader, raw: memoryview, pending: dict[int, list[tuple[bytes, int]]],
                         latest: OffsetMap) -> None:
    writes = pending.pop(header.producer_id, None)
    if not writes:
        return
    _header, records = decode_batch(raw)
    if not records or not parse_control_record(records[0]).is_commit:
        return
    for key, offset in writes:
        # max: a plain write of the same key may sit between the txn's data and marker.
        if offset > latest.get(key, -1):
            latest[key] = offset


# ----------------------------------------------------------------- pass 2: cleaned copy


def _tombstone_expired(header: BatchHeader, record: Record, now_ms: int, delete_retention_ms: int) -> bool:
    if header.has_delete_horizon:
        # Written by a Kafka cleaner (KIP-534): baseTimestamp is the delete horizon.
        return header.base_timestamp <= now_ms
    return record.timestamp < now_ms - delete_retention_ms


def clean_batch(header: BatchHeader, raw: memoryview, offset_map: OffsetMap, *, now_ms: int,
                delete_retention_ms: int) -> tuple[bytes | memoryview, int, int]:
    """The cleaned form of one batch: (bytes, records removed, tombstones removed).

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
    return _reencode(header, kept), removed, tombstones


def _reencode(header: BatchHeader, kept: list[Record]) -> bytes:
    """Rebuild a batch with fewer records (encode_batch writes an empty one uncompressed)."""
    return rebuild_batch(header, kept)


def write_cleaned_segment(segment: LogSegment, offset_map: OffsetMap, *, now_ms: int,
                          delete_retention_ms: int) -> CleanedSegment:
    """Step a: write and fsync ``<B>.log.cleaned`` next to the sealed ``segment``."""
    if segment.is_active or not segment.path.endswith(files.LOG_SUFFIX):
        raise ValueError(f"{segment.path}: only a sealed, live segment can be cleaned")
    path = segment.path + files.CLEANED_SUFFIX
    removed = tombstones = size_after = 0
    changed = False
    try:
        with open(path, "wb") as out:
            for header, raw in iter_segment_batches(segment):
                data, batch_removed, batch_tombstones = clean_batch(
                    header, raw, offset_map, now_ms=now_ms, delete_retention_ms=delete_retention_ms)
                out.write(data)
                size_after += len(data)
                removed += batch_removed
                tombstones += batch_tombstones
                changed = changed or data is not raw
            out.flush()
            os.fsync(out.fileno())
    except BaseException:
        files.unlink_if_exists(path)
        raise
    return CleanedSegment(segment, path, segment.size, size_after, removed, tombstones, changed)


def promote_to_swap(cleaned: CleanedSegment) -> str:
    """Step b, the point of no return: ``.log.cleaned`` -> ``.log.swap``, made durable,
    after the source's transaction index is copied to ``.txnindex.swap``."""
    source = cleaned.source
    entries = source.txn_index.entries
    if entries:
        txn_swap = files.txn_index_path(source.directory, source.base_offset) + files.SWAP_SUFFIX
        write_bytes_atomically(txn_swap, b"".join(encode_entry(txn) for txn in entries))
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
    offset_map = build_offset_map(segments, start)
    sources: list[int] = []
    bytes_before = bytes_after = removed = tombstones = 0
    for segment in segments:
        cleaned = write_cleaned_segment(segment, offset_map, now_ms=now_ms,
                                        delete_retention_ms=log.config.delete_retention_ms)
        bytes_before += cleaned.size_before
        bytes_after += cleaned.size_after
        removed += cleaned.records_removed
        tombstones += cleaned.tombstones_removed
        if not cleaned.changed:
            discard(cleaned)
            continue
        swap_in_cleaned_segment(log, segment, promote_to_swap(cleaned))
        sources.append(segment.base_offset)
    # The checkpoint never moves back (a checkpoint past a too-young segment stays).
    end = max(segments[-1].next_offset, start)
    result = CleanResult(tuple(sources), len(segments), bytes_before, bytes_after, removed, tombstones, end)
    _log_summary(log, result)
    return result


def _log_summary(partition_log: PartitionLog, result: CleanResult) -> None:
    if result.sources:
        logger.info("cleaned %s: %d of %d segments rewritten, %d -> %d bytes, %d records removed (%d tombstones), "
                 "first dirty offset now %d", partition_log.tp, len(result.sources), result.segments_examined,
                 result.bytes_before, result.bytes_after, result.records_removed, result.tombstones_removed,
                 result.first_dirty_offset)


__all__ = [
    "CleanResult",
    "CleanedSegment",
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
