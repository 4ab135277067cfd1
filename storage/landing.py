"""A Landing: room in the active segment's map, past the log end, that a producer's
record set is received into straight from the socket (broker/produce_receiver.py).

Why: a large Produce request was received into a buffer and then copied into the map;
the kernel can write the bytes into the map itself (``recv_into`` a view of it), which
leaves one copy, kernel to page cache, instead of two.

The landed bytes are not part of the log until ``PartitionLog.append`` is given
``records`` (the very view object) and commits them in place: it validates them where
they lie, rewrites their offsets, indexes them and moves the log end over them. Until
then they are invisible (every read stops at the log end), and the log may take its end
back at any time: any other change to the log (another append, a roll, a truncation, a
close) first *revokes* the landing, and the receiver copies what it has received so far
out into a buffer of its own before anything else is written there. A landing that is
never committed (a rejected request, a closed connection) is just bytes past the end,
which the next append overwrites; after a crash, recovery's CRC and offset checks cut
them like any torn tail (storage/segment.py ``_valid_prefix``).

One landing per log at a time, and only the owner's loop thread touches it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from storage.log import PartitionLog
    from storage.segment import LogSegment


class Landing:
    """``size`` bytes of the active segment's map at ``position`` (the log end when it
    was opened), exposed as the memoryview ``records``."""

    __slots__ = ("_log", "segment", "position", "records", "_base", "_on_revoke", "committed")

    def __init__(self, log: "PartitionLog", segment: "LogSegment", position: int, size: int, base: memoryview,
                 on_revoke: Callable[["Landing"], None]) -> None:
        self._log = log
        self.segment = segment
        self.position = position
        self._base = base  # a view of the whole map; ``records`` is a slice of it
        self.records = base[position:position + size]
        self._on_revoke: Callable[[Landing], None] | None = on_revoke
        self.committed = False

    def revoke(self) -> None:
        """The log needs its end back: the receiver moves its bytes out, then the views go.
        Called by the log, which has already forgotten this landing."""
        on_revoke, self._on_revoke = self._on_revoke, None
        if on_revoke is not None:
            on_revoke(self)
        self.release()

    def close(self) -> None:
        """The receiver is done with it (committed or not): give the room back, drop the views."""
        self._on_revoke = None
        self._log.forget_landing(self)
        self.release()

    def release(self) -> None:
        # A slice someone still holds keeps the map exported until it is collected; the map
        # is only closed by a roll or a close, which revoke first, so say nothing here.
        for view in (self.records, self._base):
            try:
                view.release()
            except BufferError:
                pass
