"""Open segment files by (path, inode) for zero-copy fetch in any worker.

The owner answers a read with the segment's path and inode; we open the path once and
keep the fd (LRU), checking the inode so a file replaced under the same name (compaction
swaps, truncation and re-creation) is never read by mistake. Each fetch gets its own
dup of the fd, closed when its sendfile completes, so eviction never pulls a file from
under a response in flight. A file deleted since the owner read it yields None: the
partition is answered with no records and the client fetches again.

A cached fd keeps its file's blocks allocated after the file is deleted (retention,
compaction, a deleted topic), and an entry that no fetch asks for again is never
evicted: without ``sweep`` a deleted 40 GB topic stayed on disk until the worker
stopped, and a benchmark filled the disk with it.
"""

from __future__ import annotations

import os
from collections import OrderedDict

from storage.releaser import RELEASER


class SegmentFiles:
    # Above the partitions one fetch names: at 512, a fetch of 1,000 partitions through
    # one worker reopened (open, fstat, close) files on every fetch.
    def __init__(self, capacity: int = 2048) -> None:
        self._capacity = capacity
        self._open: OrderedDict[str, tuple[int, int]] = OrderedDict()

    def dup_fd(self, path: str, inode: int) -> int | None:
        cached = self._open.get(path)
        if cached is not None and cached[1] == inode:
            self._open.move_to_end(path)
            return os.dup(cached[0])
        if cached is not None:
            os.close(self._open.pop(path)[0])
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return None
        if os.fstat(fd).st_ino != inode:
            os.close(fd)
            return None
        self._open[path] = (fd, inode)
        while len(self._open) > self._capacity:
            _path, (old_fd, _ino) = self._open.popitem(last=False)
            os.close(old_fd)
        return os.dup(fd)

    def sweep(self) -> int:
        """Close cached fds of files that no longer have a name (deleted); return how
        many. Called from the owner's housekeeping: one fstat per cached file."""
        gone = []
        for path, (fd, _inode) in self._open.items():
            try:
                if os.fstat(fd).st_nlink == 0:
                    gone.append(path)
            except OSError:
                gone.append(path)
        for path in gone:
            fd, _inode = self._open.pop(path)
            # Often the file's last fd: closing it frees the blocks, which can wait for
            # the disk (storage/releaser.py), so not on the owner's loop.
            RELEASER.submit(os.close, fd)
        return len(gone)

    def close(self) -> None:
        for fd, _ino in self._open.values():
            os.close(fd)
        self._open.clear()
