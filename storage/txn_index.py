"""The transaction index of one segment: ``<base offset>.txnindex``, Kafka's file.

One entry per transaction aborted by an ABORT marker that this segment holds, in marker
order (so ``last_offset`` grows), appended when the marker is applied: the leader's
append, a follower's and the replay of a recovered segment all go through
PartitionLog._apply_control_batch, so every replica writes the same bytes. A
read_committed fetch asks for the aborted transactions its range overlaps and the
consumer drops their records.

Entry layout (Kafka's AbortedTxn, version 0; big-endian, 34 bytes, no file header)::

    offset  size  field
    ------  ----  ---------------------------------------------------------------
         0     2  version            i16   0
         2     8  producerId         i64
        10     8  firstOffset        i64   the transaction's first batch
        18     8  lastOffset         i64   its ABORT marker
        26     8  lastStableOffset   i64   the LSO once the marker was applied,
                                           ignoring the high watermark

The file is created at the first entry (a segment with no aborted transaction has
none, as in Kafka). Entries are few, so they are also kept in memory: a fetch reads the
list, never the file. Thread-safety: the owner thread appends, truncates and renames;
readers on other threads see a list that is only appended to or replaced whole.
"""

from __future__ import annotations

import logging
import os
import struct
from typing import NamedTuple

from storage import files

log = logging.getLogger(__name__)

ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = 34
assert ENTRY.size == ENTRY_SIZE
VERSION = 0


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


def encode_entry(txn: AbortedTxn) -> bytes:
    return ENTRY.pack(VERSION, txn.producer_id, txn.first_offset, txn.last_offset, txn.last_stable_offset)


def decode_entries(data: bytes) -> list[AbortedTxn]:
    """Every whole entry of ``data`` (a torn last entry is left out)."""
    whole = len(data) - len(data) % ENTRY_SIZE
    return [AbortedTxn(*fields[1:]) for fields in ENTRY.iter_unpack(data[:whole])]


class TxnIndex:
    """The ``.txnindex`` file at ``path`` of the segment starting at ``base_offset``."""

    def __init__(self, path: str, base_offset: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self._fd = -1
        self._dirty = False
        self.entries: list[AbortedTxn] = self._load()

    def _load(self) -> list[AbortedTxn]:
        try:
            with open(self.path, "rb") as handle:
                data = handle.read()
        except FileNotFoundError:
            return []
        entries = decode_entries(data)
        if len(data) % ENTRY_SIZE:
            # A crash in the middle of an entry's write: the rest is whole and in order.
            log.warning("%s: dropping a torn last entry (%d bytes)", self.path, len(data) % ENTRY_SIZE)
            os.truncate(self.path, len(entries) * ENTRY_SIZE)
        return entries

    @property
    def last_offset(self) -> int:
        """The marker offset of the last entry, -1 when there is none."""
        entries = self.entries
        return entries[-1].last_offset if entries else -1

    def append(self, txn: AbortedTxn) -> bool:
        """Add ``txn`` unless an entry at or after its marker is already there (the replay
        of a segment whose index survived); True when written."""
        if txn.last_offset <= self.last_offset:
            return False
        if self._fd < 0:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.write(self._fd, encode_entry(txn))
        self._dirty = True
        self.entries.append(txn)
        return True

    def collect(self, fetch_offset: int, upper_bound_offset: int, out: list[tuple[int, int]]) -> bool:
        """Add (producer id, first offset) of each entry overlapping [fetch_offset,
        upper_bound_offset) to ``out``; True when no later segment can add any (Kafka's
        collectAbortedTxns: an entry whose LSO reached the bound)."""
        for txn in self.entries:
            if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound_offset:
                out.append((txn.producer_id, txn.first_offset))
            if txn.last_stable_offset >= upper_bound_offset:
                return True
        return False

    def truncate_to(self, offset: int) -> None:
        """Drop the entries whose marker is at or after ``offset`` (log truncation)."""
        kept = [txn for txn in self.entries if txn.last_offset < offset]
        if len(kept) == len(self.entries):
            return
        self.entries = kept
        if os.path.exists(self.path):
            os.truncate(self.path, len(kept) * ENTRY_SIZE)
            self._dirty = True

    def reset(self) -> None:
        """Forget every entry and remove the file: a recovered segment's index is
        rebuilt by replaying its markers."""
        self.close()
        self.entries = []
        files.unlink_if_exists(self.path)

    def flush(self) -> None:
        if self._dirty and self._fd >= 0:
            os.fsync(self._fd)
        elif self._dirty and os.path.exists(self.path):
            fd = os.open(self.path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        self._dirty = False

    def rename(self, new_path: str) -> None:
        if os.path.exists(self.path):
            os.rename(self.path, new_path)
        self.path = new_path

    def detach_fd(self) -> int:
        """Hand the open fd (or -1) to the caller, who closes it (the block releaser)."""
        fd, self._fd = self._fd, -1
        return fd

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
