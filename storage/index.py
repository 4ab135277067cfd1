"""Sparse fixed-size-entry indexes (offset index, time index) over mmap'd files.

Both Kafka index files are a flat array of big-endian entries with no header; the
file length is entries x entry size once trimmed. The subclasses document their entry
layout. While a segment is active its index is mapped read-write at its maximum size
(segment.index.bytes rounded down to whole entries) with space reserved ahead like the
log, and entries are appended with pwrite into the page cache the map reads (cheaper
than a first write through the map: see MappedFile); on roll and clean close it is
trimmed to its entries.

The log is the truth and indexes are disposable: ``sanity_check`` refuses an index that
cannot be right, and the segment then rebuilds it from the log.

Thread-safety: one writer; readers on other threads see entries once ``entries`` counts
them (the entry bytes are written before the count moves).
"""

from __future__ import annotations

import mmap
import os
import struct

from storage.errors import CorruptIndexError
from storage.mmap_file import MappedFile, release
from storage.releaser import RELEASER

INDEX_RESERVE_WINDOW = 64 * 1024


class SparseIndex:
    """Base: entries of ``ENTRY.size`` bytes, searched by binary search on a key field."""

    ENTRY: struct.Struct

    def __init__(self, path: str, base_offset: int, max_index_size: int, writable: bool) -> None:
        self.path = path
        self.base_offset = base_offset
        self.entry_size = self.ENTRY.size
        self.max_entries = max(1, max_index_size // self.entry_size)
        self._file: MappedFile | None = None
        self._ro_map: mmap.mmap | None = None
        self._ro_fd = -1
        self.file_length = 0
        if writable:
            exists = os.path.exists(path)
            on_disk = os.path.getsize(path) if exists else 0
            self._file = MappedFile(path, self.max_entries * self.entry_size, INDEX_RESERVE_WINDOW,
                                    length=min(on_disk, self.max_entries * self.entry_size) // self.entry_size * self.entry_size,
                                    write_with_pwrite=True)  # why: MappedFile
            self.entries = self._file.length // self.entry_size
            self.file_length = self._file.length
        else:
            self._open_read_only()

    def _open_read_only(self, length: int | None = None) -> None:
        """Map the file read-only: ``length`` bytes when the caller knows them (a roll,
        whose cut of the file may not have run yet), else the file's size."""
        self._ro_fd = os.open(self.path, os.O_RDONLY | os.O_CREAT, 0o644)
        size = os.fstat(self._ro_fd).st_size if length is None else length
        self.file_length = size
        self.entries = size // self.entry_size
        if size:
            self._ro_map = mmap.mmap(self._ro_fd, size, access=mmap.ACCESS_READ)

    @property
    def _buf(self) -> mmap.mmap | None:
        if self._file is not None:
            return self._file.map
        return self._ro_map

    @property
    def is_full(self) -> bool:
        return self.entries >= self.max_entries

    @property
    def size_in_bytes(self) -> int:
        return self.entries * self.entry_size

    def entry(self, n: int) -> tuple[int, int]:
        buf = self._buf
        assert buf is not None
        return self._decode(self.ENTRY.unpack_from(buf, n * self.entry_size))

    def _decode(self, raw: tuple[int, ...]) -> tuple[int, int]:
        raise NotImplementedError

    def reserve_entries(self, count: int) -> None:
        """Reserve disk blocks for ``count`` more entries before the log is written, so a
        full disk fails the append before any byte of it lands."""
        if self._file is not None:
            self._file.reserve(min(self.entries + count, self.max_entries) * self.entry_size)

    def _append_raw(self, *fields: int) -> None:
        if self._file is None:
            raise ValueError(f"{self.path} is read-only")
        if self.is_full:
            raise ValueError(f"{self.path} is full ({self.entries} entries)")
        self._file.write(self.ENTRY.pack(*fields))
        self.entries += 1

    def _search(self, key_index: int, target: int) -> int:
        """Index of the last entry whose field ``key_index`` is <= target, or -1."""
        low, high = 0, self.entries - 1
        found = -1
        buf = self._buf
        if buf is None:
            return -1
        unpack = self.ENTRY.unpack_from
        size = self.entry_size
        while low <= high:
            mid = (low + high) >> 1
            if unpack(buf, mid * size)[key_index] <= target:
                found = mid
                low = mid + 1
            else:
                high = mid - 1
        return found

    def _check_whole_entries(self) -> None:
        if self.file_length % self.entry_size:
            raise CorruptIndexError(f"{self.path}: {self.file_length} bytes is not a whole number of {self.entry_size}-byte entries")

    def truncate_entries(self, entries: int) -> None:
        """Keep the first ``entries`` entries (used by log truncation)."""
        if self._file is None:
            raise ValueError(f"{self.path} is read-only")
        entries = min(entries, self.entries)
        self._file.truncate_to(entries * self.entry_size)
        self.entries = entries

    def reset(self) -> None:
        self.truncate_entries(0)

    def flush(self) -> None:
        if self._file is not None:
            self._file.flush()
        elif self._ro_fd >= 0:
            os.fsync(self._ro_fd)

    def seal(self) -> None:
        """Trim to the real entries and reopen read-only (segment roll)."""
        if self._file is not None:
            length = self._file.length
            self._file.close_later()  # the cut to ``length`` runs off this thread: storage/releaser.py
            self._file = None
            self._open_read_only(length)

    def close(self, *, for_deletion: bool = False) -> None:
        """``for_deletion``: an active index is let go untrimmed, its unmap and close on
        the block releaser's thread (storage/releaser.py); the caller unlinks the file."""
        if self._file is not None:
            if for_deletion:
                RELEASER.submit(release, *self._file.detach())
            else:
                self._file.close()
            self._file = None
        if self._ro_map is not None:
            self._ro_map.close()
            self._ro_map = None
        if self._ro_fd >= 0:
            os.close(self._ro_fd)
            self._ro_fd = -1

    def rename(self, new_path: str) -> None:
        os.rename(self.path, new_path)
        self.path = new_path


class OffsetIndex(SparseIndex):
    """``.index``: maps an offset to the file position of the batch holding it.

    Entry (8 bytes)::

        0  u32  relative offset (offset - base offset) of the LAST record of a batch
        4  u32  position of that batch in the .log file

    Both columns increase strictly. A lookup returns the entry with the largest offset
    <= target; the batch at that position (or one after it) holds the target.
    """

    ENTRY = struct.Struct(">II")
    assert ENTRY.size == 8

    def _decode(self, raw: tuple[int, ...]) -> tuple[int, int]:
        return self.base_offset + raw[0], raw[1]

    def append(self, offset: int, position: int) -> None:
        if self.entries:
            last_offset, last_position = self.entry(self.entries - 1)
            if offset <= last_offset or position <= last_position:
                raise CorruptIndexError(f"{self.path}: entry ({offset}, {position}) not after ({last_offset}, {last_position})")
        self._append_raw(offset - self.base_offset, position)

    def lookup(self, offset: int) -> tuple[int, int]:
        """(offset, position) of the last entry with offset <= target; (base, 0) if none."""
        n = self._search(0, offset - self.base_offset)
        return (self.base_offset, 0) if n < 0 else self.entry(n)

    def lookup_by_position(self, position: int) -> tuple[int, int]:
        """(offset, position) of the last entry with position <= target; (base, 0) if none."""
        n = self._search(1, position)
        return (self.base_offset, 0) if n < 0 else self.entry(n)

    def sanity_check(self, log_size: int) -> None:
        """O(1), as Kafka's: whole entries; the last two increase and point inside the log.

        A zero-filled tail (a crashed, untrimmed file) fails the increase test.
        """
        self._check_whole_entries()
        if not self.entries:
            return
        offset, position = self.entry(self.entries - 1)
        if position >= log_size or offset < self.base_offset:
            raise CorruptIndexError(f"{self.path}: last entry ({offset}, {position}) outside the log ({log_size} bytes)")
        if self.entries > 1:
            previous_offset, previous_position = self.entry(self.entries - 2)
            if offset <= previous_offset or position <= previous_position:
                raise CorruptIndexError(f"{self.path}: last entry ({offset}, {position}) does not increase")


class TimeIndex(SparseIndex):
    """``.timeindex``: maps a timestamp to the first offset whose batch max reaches it.

    Entry (12 bytes)::

        0  i64  timestamp: the largest timestamp seen in the segment so far
        8  u32  relative offset of the record carrying that timestamp

    Timestamps increase strictly; an entry is appended only when it grows.
    """

    ENTRY = struct.Struct(">qI")
    assert ENTRY.size == 12

    def _decode(self, raw: tuple[int, ...]) -> tuple[int, int]:
        return raw[0], self.base_offset + raw[1]

    def last_entry(self) -> tuple[int, int]:
        """(timestamp, offset) of the last entry; (-1, base offset) when empty."""
        if not self.entries:
            return -1, self.base_offset
        return self.entry(self.entries - 1)

    def maybe_append(self, timestamp: int, offset: int) -> None:
        """Append when ``timestamp`` is larger than the last entry's (Kafka's rule)."""
        if self.is_full:
            return
        last_timestamp, last_offset = self.last_entry()
        if self.entries and (timestamp <= last_timestamp or offset < last_offset):
            return
        if timestamp < 0:
            return
        self._append_raw(timestamp, offset - self.base_offset)

    def lookup(self, timestamp: int) -> tuple[int, int]:
        """(timestamp, offset) of the last entry with timestamp <= target; (-1, base) if none."""
        n = self._search(0, timestamp)
        return (-1, self.base_offset) if n < 0 else self.entry(n)

    def sanity_check(self, next_offset: int) -> None:
        """O(1): whole entries; the last two increase and the last is inside the segment."""
        self._check_whole_entries()
        if not self.entries:
            return
        timestamp, offset = self.entry(self.entries - 1)
        if offset < self.base_offset or offset >= max(next_offset, self.base_offset + 1) or timestamp < 0:
            raise CorruptIndexError(f"{self.path}: last entry ({timestamp}, {offset}) outside the segment")
        if self.entries > 1:
            previous_timestamp, previous_offset = self.entry(self.entries - 2)
            if timestamp <= previous_timestamp or offset < previous_offset:
                raise CorruptIndexError(f"{self.path}: last entry ({timestamp}, {offset}) does not increase")
