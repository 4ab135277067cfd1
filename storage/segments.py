"""The ordered set of a log's segments, replaced copy-on-write.

Writers (the owner thread: roll, retention, truncation, cleaner swap) build a new
``SegmentList`` and assign it in one step; a reader takes one reference and works on
that snapshot without locks. A segment dropped from the list keeps its fd open until
its delayed deletion (file.delete.delay.ms), so a reader holding an old snapshot can
still send its bytes.
"""

from __future__ import annotations

from bisect import bisect_right
from typing import Iterator, Sequence

from storage.segment import LogSegment


class SegmentList:
    """Immutable: segments sorted by base offset, looked up by bisect on base offsets."""

    __slots__ = ("_segments", "_bases")

    def __init__(self, segments: Sequence[LogSegment] = ()) -> None:
        self._segments = tuple(sorted(segments, key=lambda s: s.base_offset))
        self._bases = [s.base_offset for s in self._segments]

    def __len__(self) -> int:
        return len(self._segments)

    def __iter__(self) -> Iterator[LogSegment]:
        return iter(self._segments)

    def __getitem__(self, index: int) -> LogSegment:
        return self._segments[index]

    @property
    def active(self) -> LogSegment:
        return self._segments[-1]

    def floor(self, offset: int) -> int:
        """Index of the segment with the largest base offset <= ``offset`` (-1 if none)."""
        return bisect_right(self._bases, offset) - 1

    def from_offset(self, offset: int) -> Iterator[LogSegment]:
        """Segments that may hold ``offset`` or later offsets, in order."""
        start = max(0, self.floor(offset))
        return iter(self._segments[start:])

    def with_appended(self, segment: LogSegment) -> "SegmentList":
        return SegmentList((*self._segments, segment))

    def without(self, dropped: Sequence[LogSegment]) -> "SegmentList":
        gone = {id(s) for s in dropped}
        return SegmentList([s for s in self._segments if id(s) not in gone])

    def replaced(self, old: Sequence[LogSegment], new: Sequence[LogSegment]) -> "SegmentList":
        gone = {id(s) for s in old}
        return SegmentList([s for s in self._segments if id(s) not in gone] + list(new))

    def size_in_bytes(self) -> int:
        return sum(s.size for s in self._segments)
