"""A partition's leader epochs: which epoch's leader wrote each stretch of the log.

Entries are (epoch, start offset), both ascending, checkpointed in
``<partition dir>/leader-epoch-checkpoint`` in Kafka's format (written to .tmp, fsynced,
renamed: storage/checkpoint.py). A follower asks its leader where its last epoch ends
(OffsetForLeaderEpoch, or LastFetchedEpoch in a Fetch) and cuts its log where the two
diverged; KIP-101 and KIP-279 give the rules `end_offset_for` follows.
"""

from __future__ import annotations

import bisect
import logging
import os

from storage import checkpoint

log = logging.getLogger(__name__)

FILE_NAME = "leader-epoch-checkpoint"
UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1


class LeaderEpochCache:
    def __init__(self, directory: str) -> None:
        self.path = os.path.join(directory, FILE_NAME)
        entries = checkpoint.read_leader_epoch_checkpoint(self.path)
        self._entries: list[tuple[int, int]] = []
        for epoch, start in entries:  # a hand-edited or torn file: keep the monotonic prefix
            if self._entries and (epoch <= self._entries[-1][0] or start < self._entries[-1][1]):
                log.warning("%s: entry (%d, %d) is not after (%d, %d); ignoring the rest", self.path, epoch, start,
                            *self._entries[-1])
                break
            self._entries.append((epoch, start))
        self.file_existed = os.path.exists(self.path)

    @property
    def entries(self) -> list[tuple[int, int]]:
        return list(self._entries)

    @property
    def latest_epoch(self) -> int:
        return self._entries[-1][0] if self._entries else UNDEFINED_EPOCH

    def assign(self, epoch: int, start_offset: int) -> None:
        """The leader of ``epoch`` wrote from ``start_offset`` on. Entries it contradicts (an
        epoch as new, or a start as late) are dropped first, as Kafka's cache does."""
        if epoch < 0:
            return
        entries = self._entries
        if entries and entries[-1][0] == epoch and entries[-1][1] <= start_offset:
            return
        kept = [(e, s) for e, s in entries if e < epoch and s < start_offset]
        kept.append((epoch, start_offset))
        self._entries = kept
        self._write()

    def end_offset_for(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(the largest epoch <= ``epoch`` this log has, the first offset after it), as
        OffsetForLeaderEpoch answers; (-1, -1) for an undefined or a future epoch."""
        entries = self._entries
        if epoch == UNDEFINED_EPOCH or not entries:
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET
        if entries[-1][0] == epoch:
            return epoch, log_end_offset
        higher = bisect.bisect_right(entries, (epoch, 1 << 63))  # first entry with a larger epoch
        if higher == len(entries):
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET
        next_start = entries[higher][1]
        if higher == 0:
            return epoch, next_start  # older than the oldest epoch we know
        return entries[higher - 1][0], next_start

    def epoch_at(self, offset: int) -> int:
        """The epoch whose leader wrote ``offset`` (-1 before the first entry)."""
        index = bisect.bisect_right([s for _e, s in self._entries], offset) - 1
        return self._entries[index][0] if index >= 0 else UNDEFINED_EPOCH

    def truncate_from_end(self, end_offset: int) -> None:
        """The log now ends at ``end_offset``: forget epochs that start at or after it."""
        kept = [(e, s) for e, s in self._entries if s < end_offset]
        if len(kept) != len(self._entries):
            self._entries = kept
            self._write()

    def truncate_from_start(self, start_offset: int) -> None:
        """The log now starts at ``start_offset``: the epoch holding it starts there."""
        entries = self._entries
        index = bisect.bisect_right([s for _e, s in entries], start_offset) - 1
        if index < 0 or (index == 0 and entries[0][1] == start_offset):
            return
        epoch = entries[index][0]
        self._entries = [(epoch, start_offset), *entries[index + 1 :]]
        self._write()

    def rebuild(self, batches: list[tuple[int, int]]) -> None:
        """From (partition leader epoch, base offset) of every batch, in log order: for a log
        written before this file existed."""
        self._entries = []
        for epoch, base in batches:
            if epoch >= 0 and (not self._entries or epoch > self._entries[-1][0]):
                self._entries.append((epoch, base))
        self._write()

    def clear(self) -> None:
        if self._entries:
            self._entries = []
            self._write()

    def _write(self) -> None:
        checkpoint.write_leader_epoch_checkpoint(self.path, self._entries)
