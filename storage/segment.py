"""LogSegment: one ``.log`` file with its ``.index``, ``.timeindex`` and ``.txnindex``.

The ``.log`` file is a plain concatenation of v2 record batches (layout in batch.py),
nothing before, between or after them; a closed segment is byte for byte Kafka's.

An *active* segment is written through a MappedFile (shared mmap, space reserved ahead,
see mmap_file.py); a *sealed* segment (after roll) is trimmed and read with pread and
os.sendfile through a plain fd. Readers get (fd, position, length) ranges, never copies
of record bytes.

Index entries are added as Kafka adds them: before copying a batch, if more than
index.interval.bytes were appended since the last entry, the batch gets an offset-index
entry (its last offset -> its position) and the time index gets (max timestamp so far,
its offset) when the max grew.

Thread-safety: the owner thread appends, rolls, truncates and recovers; any thread may
read ranges and flush.
"""

from __future__ import annotations

import logging
import os
import random
import time
from dataclasses import dataclass
from mmap import ACCESS_READ, mmap
from typing import Iterator

from storage import files
from storage.batch import (
    HEADER,
    HEADER_SIZE,
    MIN_BATCH_LENGTH,
    BatchHeader,
    check_batch_frame,
    parse_header,
    set_base_offset_and_epoch,
    set_log_append_time,
)
from storage.config import LogConfig
from storage.errors import CorruptIndexError, CorruptRecordError
from storage.index import OffsetIndex, TimeIndex
from storage.mmap_file import MappedFile, release
from storage.releaser import RELEASER
from storage.txn_index import TxnIndex
from storage.types import FileRange, Position

log = logging.getLogger(__name__)

U32_MAX = (1 << 32) - 1


@dataclass(frozen=True, slots=True)
class RecoveryResult:
    valid_bytes: int
    cut_bytes: int
    quarantine_path: str | None
    error: str | None


class LogSegment:
    """A segment starting at ``base_offset``. See the module docstring."""

    def __init__(self, directory: str, base_offset: int, config: LogConfig, *, active: bool, recover: bool = False) -> None:
        self.directory = directory
        self.base_offset = base_offset
        self.config = config
        self.path = files.log_path(directory, base_offset)
        self._log: MappedFile | None = None
        self._fd = -1
        self.recovery: RecoveryResult | None = None
        created = not os.path.exists(self.path)
        indexes_missing = not (os.path.exists(files.index_path(directory, base_offset))
                               and os.path.exists(files.time_index_path(directory, base_offset)))
        self.txn_index = TxnIndex(files.txn_index_path(directory, base_offset), base_offset)
        if recover and not created:
            self.recovery = self._validate_and_cut()
            # Entries written after the last flush may be missing or describe cut
            # batches: the log replays this segment's markers into an empty index.
            self.txn_index.reset()
        if active:
            existing = 0 if created else os.path.getsize(self.path)
            # A file longer than segment.bytes (the setting was lowered) is mapped whole;
            # can_hold then rolls on the next append.
            self._log = MappedFile(self.path, max(config.segment_bytes, existing), config.segment_reserve_bytes,
                                   length=None if created else existing)
            self._fd = self._log.fd
            self.size = self._log.length
            self.inode = os.fstat(self._fd).st_ino
        else:
            self._fd = os.open(self.path, os.O_RDONLY | os.O_CREAT, 0o644)
            stat = os.fstat(self._fd)
            self.size, self.inode = stat.st_size, stat.st_ino
        self.offset_index = OffsetIndex(files.index_path(directory, base_offset), base_offset, config.segment_index_bytes, writable=active)
        self.time_index = TimeIndex(files.time_index_path(directory, base_offset), base_offset, config.segment_index_bytes, writable=active)
        self._next_offset: int | None = base_offset if self.size == 0 else None
        self.max_timestamp = -1
        self.offset_of_max_timestamp = base_offset
        self.bytes_since_last_index_entry = 0
        self.rolling_base_ms: int | None = None
        # segment.jitter.ms: each segment rolls up to this much early, so partitions
        # created together do not all roll at once (Kafka's randomSegmentJitter).
        jitter = min(config.segment_jitter_ms, config.segment_ms)
        self.roll_jitter_ms = random.randrange(jitter) if jitter > 0 else 0
        self.data_end = 0
        if recover or (indexes_missing and not created):
            self._rebuild_indexes()
        elif not created:
            self._load_indexes()

    # ----------------------------------------------------------------- properties
    @property
    def is_active(self) -> bool:
        return self._log is not None

    @property
    def fd(self) -> int:
        return self._fd

    @property
    def next_offset(self) -> int:
        """One past the last offset in this segment (base offset when empty)."""
        if self._next_offset is None:
            self._next_offset = self._scan_next_offset()
        return self._next_offset

    @property
    def retention_timestamp(self) -> int:
        """Max record timestamp in the segment; the file's mtime if no record has one."""
        if self.max_timestamp >= 0:
            return self.max_timestamp
        try:
            return int(os.stat(self.path).st_mtime * 1000)
        except FileNotFoundError:
            return 0

    # ----------------------------------------------------------------- reading headers
    def read_header(self, position: int) -> BatchHeader | None:
        """The batch header at ``position``, or None past the end / for a torn header."""
        if position + HEADER_SIZE > self.size:
            return None
        if self._log is not None:
            header = parse_header(self._log.map, position)
        else:
            raw = os.pread(self._fd, HEADER_SIZE, position)
            if len(raw) < HEADER_SIZE:
                return None
            header = BatchHeader(*HEADER.unpack(raw))
        if header.batch_length < MIN_BATCH_LENGTH or position + header.size > self.size:
            return None
        return header

    def batches_from(self, position: int) -> Iterator[tuple[int, BatchHeader]]:
        """Yield (position, header) from ``position`` to the end of the segment."""
        while True:
            header = self.read_header(position)
            if header is None:
                return
            yield position, header
            position += header.size

    def translate_offset(self, offset: int, start_position: int = 0) -> tuple[int, BatchHeader] | None:
        """The first batch whose last offset >= ``offset``: (position, header), or None."""
        _indexed_offset, position = self.offset_index.lookup(offset)
        position = max(position, start_position)
        for pos, header in self.batches_from(position):
            if header.last_offset >= offset:
                return pos, header
        return None

    def read(self, offset: int, max_bytes: int, max_position: int | None = None, min_one_batch: bool = True) -> FileRange | None:
        """Whole batches from the one holding ``offset``, at most ``max_bytes`` of them.

        The first batch is returned whole even when larger than max_bytes (Kafka's rule,
        so a consumer can always make progress) unless ``min_one_batch`` is False.
        ``max_position`` bounds what a reader may see (e.g. the high watermark's position).
        """
        found = self.translate_offset(offset)
        if found is None:
            return None
        start, first = found
        limit = self.size if max_position is None else min(max_position, self.size)
        if start >= limit:
            return None
        end = start + first.size
        if first.size > max_bytes and not min_one_batch:
            return None
        target = min(limit, start + max_bytes)
        if end < target:
            end = self._last_batch_end_before(start, end, target)
        return FileRange(self._fd, self.path, Position(start), end - start, self.inode)

    def _last_batch_end_before(self, start: int, end: int, target: int) -> int:
        """Largest batch boundary <= target, starting from the known boundary ``end``."""
        # Jump with the index: an entry's position is a batch boundary.
        _offset, indexed = self.offset_index.lookup_by_position(target)
        if indexed > end:
            end = indexed
        while True:
            header = self.read_header(end)
            if header is None or end + header.size > target:
                return end
            end += header.size

    def read_batch(self, position: int, size: int) -> bytes:
        """The ``size`` bytes of the batch at ``position`` (a transaction marker's record)."""
        if self._log is not None:
            return self._log.map[position : position + size]
        return os.pread(self._fd, size, position)

    def read_bytes(self, file_range: FileRange) -> bytes:
        """Copy a range into memory (tests, tools, compaction; never the fetch path)."""
        return os.pread(self._fd, file_range.length, file_range.position)

    # ----------------------------------------------------------------- appending
    def append_batches(self, source: memoryview, headers: list[tuple[int, BatchHeader]], first_offset: int,
                       leader_epoch: int, log_append_time_ms: int | None) -> int:
        """Copy validated batches into the map, then assign offsets in place.

        ``headers`` holds (position in source, header) of every batch in ``source``.
        Returns the next offset after the last appended record.
        """
        base_position = self._write(source, len(headers))
        assert self._log is not None
        buf = self._log.map
        next_offset = first_offset
        for source_position, header in headers:
            position = base_position + source_position
            size = header.size
            batch_base = next_offset
            set_base_offset_and_epoch(buf, position, batch_base, leader_epoch)
            max_timestamp = header.max_timestamp
            if log_append_time_ms is not None:
                with memoryview(buf) as view:
                    set_log_append_time(view, position, size, log_append_time_ms)
                max_timestamp = log_append_time_ms
            next_offset = batch_base + header.last_offset_delta + 1
            self._index_batch(position, size, next_offset - 1, max_timestamp)
        return self._appended(next_offset)

    def append_batches_as_they_are(self, source: memoryview, headers: list[tuple[int, BatchHeader]]) -> int:
        """A follower's append: copy checked batches whose offsets the leader assigned.
        Returns the next offset after the last one."""
        next_offset = self.next_offset
        base_position = self._write(source, len(headers))
        for source_position, header in headers:
            next_offset = header.base_offset + header.last_offset_delta + 1
            self._index_batch(base_position + source_position, header.size, next_offset - 1, header.max_timestamp)
        return self._appended(next_offset)

    def _write(self, source: memoryview, batches: int) -> int:
        """Copy ``source`` into the map (index blocks reserved first when entries may be
        added, so a full disk fails before any byte lands); its position there."""
        log = self._log
        assert log is not None, "append to a sealed segment"
        if self.bytes_since_last_index_entry + len(source) > self.config.index_interval_bytes:
            self.offset_index.reserve_entries(batches)
            self.time_index.reserve_entries(batches)
        return log.write(source)

    def _appended(self, next_offset: int) -> int:
        assert self._log is not None
        self.size = self._log.length
        self._next_offset = next_offset
        if self.rolling_base_ms is None:
            self.rolling_base_ms = int(time.time() * 1000)
        return next_offset

    def _index_batch(self, position: int, size: int, last_offset: int, max_timestamp: int) -> None:
        if max_timestamp > self.max_timestamp:
            self.max_timestamp = max_timestamp
            self.offset_of_max_timestamp = last_offset
        # A full index (segment.index.bytes lowered, or a rebuild) just gets sparser.
        if self.bytes_since_last_index_entry > self.config.index_interval_bytes and not self.offset_index.is_full:
            self.offset_index.append(last_offset, position)
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            self.bytes_since_last_index_entry = 0
        self.bytes_since_last_index_entry += size

    def can_hold(self, size: int, last_offset: int) -> bool:
        """False when appending would pass segment.bytes, fill an index or overflow u32."""
        if self.size and self.size + size > self.config.segment_bytes:
            return False
        if self.offset_index.is_full or self.time_index.is_full:
            return False
        return last_offset - self.base_offset <= U32_MAX

    def should_roll_for_time(self, now_ms: int) -> bool:
        return (self.size > 0 and self.rolling_base_ms is not None
                and now_ms - self.rolling_base_ms > self.config.max_segment_ms - self.roll_jitter_ms)

    # ----------------------------------------------------------------- lifecycle
    def seal(self) -> None:
        """Roll: last time-index entry, trim every file to its real length, read-only."""
        if self._log is None:
            return
        self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
        # The unmap and the cut run on the block releaser's thread (why: storage/releaser.py);
        # readers stay below self.size, which the cut never touches.
        self._log.unmap_and_trim_later()
        self._log = None  # fd stays open (read side), soon over the trimmed file
        self.offset_index.seal()
        self.time_index.seal()
        self.txn_index.close()  # no marker lands here any more; a flush reopens it to sync

    def flush(self) -> None:
        os.fdatasync(self._fd)
        self.offset_index.flush()
        self.time_index.flush()
        self.txn_index.flush()

    def truncate_to(self, offset: int) -> int:
        """Drop every batch at or after the one holding ``offset``; return bytes removed.

        Only on an active segment: truncation of the log first makes the segment that
        holds the new end active again.
        """
        assert self._log is not None, "truncate a sealed segment"
        found = self.translate_offset(offset)
        if found is None:
            return 0
        position, header = found
        if header.base_offset < offset:
            raise CorruptRecordError(f"offset {offset} is inside the batch at {position}; truncate at a batch boundary")
        removed = self.size - position
        self._log.truncate_to(position)
        self.size = position
        self._rebuild_indexes()
        self.txn_index.truncate_to(offset)
        return removed

    def close(self) -> None:
        self.seal()
        self.offset_index.close()
        self.time_index.close()
        self.txn_index.close()
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def rename_with_suffix(self, suffix: str) -> None:
        """Rename all its files (e.g. to ``.deleted``); open fds keep working."""
        for index in (self.offset_index, self.time_index):
            if os.path.exists(index.path):
                index.rename(index.path + suffix)
        self.txn_index.rename(self.txn_index.path + suffix)
        os.rename(self.path, self.path + suffix)
        self.path += suffix

    def delete_files(self) -> None:
        """Close this object and remove its files. Removing them frees their blocks,
        which can wait on the disk (658 ms for a written 1 GiB segment on the benchmark
        VM), so the unlinks and the last close of the log run on the block releaser's
        thread (storage/releaser.py); ``RELEASER.drain()`` waits for them."""
        self.release_files(unlink=True)

    def release_files(self, *, unlink: bool) -> None:
        """Close this object: its maps and fds are let go on the block releaser's thread,
        with the unlinks of its files if ``unlink``. Without, the caller removes the
        files some other way (a deleted topic's directory is renamed, then removed: an
        unlink by name queued before the rename could hit a re-created partition's file)."""
        self.offset_index.close(for_deletion=True)
        self.time_index.close(for_deletion=True)
        self.txn_index.close()  # an fd of a few-entry file: nothing to wait for
        mapped = None
        if self._log is not None:
            mapped, fd = self._log.detach()
            self._log = None
        else:
            fd = self._fd
        self._fd = -1
        paths = (self.path, self.offset_index.path, self.time_index.path, self.txn_index.path) if unlink else ()
        RELEASER.submit(release, mapped, fd, unlink=paths)

    # ----------------------------------------------------------------- recovery
    def _scan_next_offset(self) -> int:
        _offset, position = self.offset_index.lookup(U32_MAX + self.base_offset)
        next_offset = self.base_offset
        end = position
        for pos, header in self.batches_from(position):
            next_offset = header.next_offset
            end = pos + header.size
        self.data_end = end
        return next_offset

    def has_unaccounted_tail(self) -> bool:
        """True when bytes follow the last readable batch: an untrimmed file left by a
        crash during a roll (zeros), or damage. Such a sealed segment needs recovery."""
        if self.size == 0:
            return False
        self.next_offset  # the scan behind it (usually done by _load_indexes) sets data_end
        return self.data_end != self.size

    def _load_indexes(self) -> None:
        """Trust the indexes after a sanity check; rebuild them if it fails."""
        try:
            self.offset_index.sanity_check(self.size)
            self.time_index.sanity_check(self.next_offset)
        except CorruptIndexError as exc:
            log.warning("rebuilding indexes of %s: %s", self.path, exc)
            self._rebuild_indexes()
            return
        timestamp, offset = self.time_index.last_entry()
        self.max_timestamp, self.offset_of_max_timestamp = timestamp, offset
        if self._log is not None:
            # Active: replay the tail after the last index entry to restore counters.
            _o, position = self.offset_index.lookup(U32_MAX + self.base_offset)
            self.bytes_since_last_index_entry = 0
            for _pos, header in self.batches_from(position):
                # The indexed batch counts too: its size was added after its entry.
                self.bytes_since_last_index_entry += header.size
                if header.max_timestamp > self.max_timestamp:
                    self.max_timestamp, self.offset_of_max_timestamp = header.max_timestamp, header.last_offset
            self.rolling_base_ms = self._first_batch_timestamp()

    def _first_batch_timestamp(self) -> int | None:
        header = self.read_header(0)
        if header is None:
            return None
        return header.max_timestamp if header.max_timestamp >= 0 else int(time.time() * 1000)

    def _rebuild_indexes(self) -> None:
        """Recreate both indexes by walking every batch header of the segment."""
        self._reopen_indexes_empty()
        self.max_timestamp = -1
        self.offset_of_max_timestamp = self.base_offset
        self.bytes_since_last_index_entry = 0
        next_offset = self.base_offset
        end = 0
        for position, header in self.batches_from(0):
            self._index_batch(position, header.size, header.last_offset, header.max_timestamp)
            next_offset = header.next_offset
            end = position + header.size
        self._next_offset = next_offset
        self.data_end = end
        if self._log is None:
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            self.offset_index.seal()
            self.time_index.seal()
        else:
            self.rolling_base_ms = self._first_batch_timestamp()

    def _reopen_indexes_empty(self) -> None:
        for index in (self.offset_index, self.time_index):
            index.close()
            # Unlink, never truncate in place: an older LogSegment object (a reader's
            # snapshot) may still map the old file, and a shrunk mapped file is SIGBUS.
            if os.path.exists(index.path):
                os.unlink(index.path)
        self.offset_index = OffsetIndex(self.offset_index.path, self.base_offset, self.config.segment_index_bytes, writable=True)
        self.time_index = TimeIndex(self.time_index.path, self.base_offset, self.config.segment_index_bytes, writable=True)

    def _validate_and_cut(self) -> RecoveryResult:
        """Check size, magic, CRC and offset order of every batch; cut at the first bad one.

        Runs before the file is mapped for writing, so the cut is a real ftruncate and no
        stale bytes survive past the new end. The cut bytes (up to their last non-zero
        byte: a preallocated tail is zeros) are kept in ``<log>.<position>.corrupt``.
        """
        fd = os.open(self.path, os.O_RDWR)
        try:
            file_size = os.fstat(fd).st_size
            valid, error = self._valid_prefix(fd, file_size)
            if valid == file_size:
                return RecoveryResult(valid, 0, None, None)
            quarantine = self._quarantine(fd, valid, file_size)
            os.ftruncate(fd, valid)
            os.fsync(fd)
            log.warning("recovery cut %s at position %d: %d bytes removed (%s)%s", self.path, valid,
                        file_size - valid, error, f", kept in {quarantine}" if quarantine else ", all zeros")
            return RecoveryResult(valid, file_size - valid, quarantine, error)
        finally:
            os.close(fd)

    def _valid_prefix(self, fd: int, file_size: int) -> tuple[int, str | None]:
        if file_size == 0:
            return 0, None
        mapped = mmap(fd, file_size, access=ACCESS_READ)
        view = memoryview(mapped)
        position = 0
        expected = self.base_offset
        error: str | None = None
        try:
            while position < file_size:
                try:
                    header = check_batch_frame(view, position, file_size)
                except CorruptRecordError as exc:
                    error = str(exc)
                    break
                # Offsets are contiguous in a Castle log (the cleaner keeps empty batches,
                # so even compaction leaves no gap): baseOffset lies outside the CRC, and
                # this is what catches damage to it.
                if header.base_offset != expected or header.last_offset - self.base_offset > U32_MAX:
                    error = f"batch base offset {header.base_offset}, expected {expected}"
                    break
                expected = header.next_offset
                position += header.size
        finally:
            view.release()
            mapped.close()
        return position, error

    def _quarantine(self, fd: int, start: int, file_size: int) -> str | None:
        end = _end_of_nonzero_data(fd, start, file_size)
        if end <= start:
            return None
        path = f"{self.path}.{start}{files.CORRUPT_SUFFIX}"
        with open(path, "wb") as out:
            position = start
            while position < end:
                chunk = os.pread(fd, min(1 << 20, end - position), position)
                if not chunk:
                    break
                out.write(chunk)
                position += len(chunk)
        return path


def _end_of_nonzero_data(fd: int, start: int, end: int) -> int:
    """Position after the last non-zero byte in [start, end), skipping holes (SEEK_DATA)."""
    extents: list[tuple[int, int]] = []
    position = start
    while position < end:
        try:
            data_start = os.lseek(fd, position, os.SEEK_DATA)
        except OSError:
            break
        if data_start >= end:
            break
        data_end = min(os.lseek(fd, data_start, os.SEEK_HOLE), end)
        extents.append((data_start, data_end))
        position = data_end
    chunk_size = 1 << 20
    for data_start, data_end in reversed(extents):
        position = data_end
        while position > data_start:
            chunk_start = max(data_start, position - chunk_size)
            chunk = os.pread(fd, position - chunk_start, chunk_start)
            stripped = chunk.rstrip(b"\0")
            if stripped:
                return chunk_start + len(stripped)
            position = chunk_start
    return start

