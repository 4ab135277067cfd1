"""A file written through a shared mmap, with disk space reserved ahead of the writer.

Why this shape (DESIGN.md non-negotiable 3):

* The file is extended (sparse, ftruncate) to its maximum size and mapped once with
  MAP_SHARED. A live map is never resized, so no memoryview handed out during an append
  can be invalidated by a remap.
* Writing into a sparse page of a map when the disk is full kills the process with
  SIGBUS. So before any byte lands at position p, blocks up to p are reserved with
  fallocate, a window at a time (``window`` bytes, not the whole file: a 1 GiB
  reservation per partition does not scale to 1,000 partitions). ENOSPC then surfaces
  as LogDirOfflineError on the append that needed the space.
* On roll and clean close the file is truncated to its real length, so a closed file is
  byte for byte what Kafka writes. After a crash the file keeps its maximum length with
  zeros (or reserved blocks) after the data; recovery cuts them.
* Flushing is os.fdatasync on the fd: on Linux msync(MS_SYNC) of a shared file mapping
  is vfs_fsync_range on the same file, and fdatasync releases the GIL while Python's
  mmap.flush() holds it.
* The next fallocate window is reserved on a background thread of the process,
  ``RESERVER``, when the writer is past half of the current one: fallocate reads block
  bitmaps from the disk, and those waits were the last ones left on the workers' event
  loops (seventh round, `git show 0858314:docs/BENCHMARKS.md`). The writer still reserves for itself
  whatever is not reserved when it gets there, so a full disk fails the append that
  needs the space as before.
* Pages are pre-faulted on the writer's own thread. Populating them on another thread
  (through libc's madvise, which releases the GIL) halved the acknowledgement latency
  under 1 KiB load but cost the broker ~15% more CPU per record, the copy into pages
  zeroed on the other core among it, and lowered the rate on a machine the clients
  already fill (ninth round, `git show 0858314:docs/BENCHMARKS.md`).
  Pages past the data get their page-cache pages from a pwrite of zeros first
  (``_write_zeros`` says why); madvise then only maps them into the map.

Thread-safety: one writer (the partition's owner). ``flush`` may run on another thread.
The reserver touches the fd only under ``_guard``, which whoever takes the map away
holds too, so a fallocate never lengthens a file that a roll has cut (or a reused fd).
"""

from __future__ import annotations

import errno
import mmap
import os
import threading
import time

from storage import files
from storage.errors import LogDirOfflineError
from storage.releaser import RELEASER, JobThread

PAGE = mmap.PAGESIZE
# MADV_POPULATE_WRITE (Linux 5.14+) pre-faults a reserved window in one call, so the
# copy into the map does not take one page fault per 4 KiB. Python 3.11 lacks the name.
MADV_POPULATE_WRITE = getattr(mmap, "MADV_POPULATE_WRITE", 23)
POPULATE_AHEAD = 1 << 20
POPULATE_AHEAD_MIN = 16 * 1024
# What _write_zeros writes from; calloc'd, so reading it maps the shared zero page, never its own.
_ZEROS = memoryview(bytes(4 << 20))
# Separate from RELEASER: a reservation must not wait behind a discard that takes 0.7 s.
RESERVER = JobThread("castle-block-reserver")


class PopulateClock:
    """Wall time and bytes of this process's page pre-faulting (madvise), for the stats.

    Why it is counted: populating new page-cache pages is kernel work whose price depends
    on the machine, not on Castle (on a VM that takes freed memory back it is a host fault
    per page, and it dominated the broker's CPU in benchmarks: docs/BENCHMARKS.md)."""

    seconds = 0.0
    bytes = 0


def _round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


class MappedFile:
    """``path`` mapped read-write at ``max_size`` bytes; ``length`` bytes are real data.

    ``write_with_pwrite``: appends go through os.pwrite into the same page cache the map
    shows (Linux's page cache is unified, so readers of the map see them at once) instead
    of through the map. For index files: their first write through a fresh 10 MiB map
    cost ~2 ms on this VM against ~3 µs for a pwrite (many partitions, in
    `git show 0858314:docs/BENCHMARKS.md`), and an index gets one small entry per 4 KiB of log. The log itself is
    always written through the map (DESIGN.md non-negotiable 3).
    """

    def __init__(self, path: str, max_size: int, window: int, length: int | None = None,
                 write_with_pwrite: bool = False) -> None:
        self.path = path
        self.write_with_pwrite = write_with_pwrite
        self.max_size = max_size
        self.window = max(PAGE, window)
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            on_disk = os.fstat(self.fd).st_size
            self.length = on_disk if length is None else length
            if self.length > max_size:
                raise ValueError(f"{path}: {self.length} bytes exceed the map size {max_size}")
            # Blocks below the existing length are already allocated (or were, before a
            # crash left zeros); reserve from the page holding the end of the data.
            self._reserved = min(on_disk, self.length) // PAGE * PAGE
            if on_disk < max_size:
                os.ftruncate(self.fd, max_size)
            self._map: mmap.mmap | None = mmap.mmap(self.fd, max_size, mmap.MAP_SHARED)
            # Held by the reserver while it uses the fd, by whoever takes the map away, and
            # around every fallocate.
            self._guard = threading.Lock()
            self._populate = True
            self._populated = self.length // PAGE * PAGE
            self._reserve_queued = False  # a job to reserve the next window is queued
        except BaseException:
            os.close(self.fd)
            raise

    @property
    def map(self) -> mmap.mmap:
        if self._map is None:
            raise ValueError(f"{self.path} is not mapped")
        return self._map

    def reserve(self, end: int) -> None:
        """Make sure blocks exist up to ``end``; raise LogDirOfflineError if the disk is full."""
        if end <= self._reserved:
            return
        if end > self.max_size:
            raise ValueError(f"{self.path}: write to {end} past the map size {self.max_size}")
        with self._guard:
            self._extend_reservation(end)

    def _extend_reservation(self, end: int) -> None:
        """fallocate up to ``end``, or a window past what is reserved if that is further.
        Called under ``_guard``, by the writer or the reserver."""
        if end <= self._reserved:
            return
        new_reserved = min(self.max_size, _round_up(max(end, self._reserved + self.window), PAGE))
        try:
            os.posix_fallocate(self.fd, self._reserved, new_reserved - self._reserved)
        except OSError as exc:
            raise LogDirOfflineError(f"cannot reserve space in {self.path}: {os.strerror(exc.errno or errno.EIO)}") from exc
        self._reserved = new_reserved

    def _reserve_ahead(self) -> None:
        """Reserve the next window, on the reserver's thread (the module docstring says why)."""
        self._reserve_queued = False
        with self._guard:
            if self._map is None:
                return  # taken away (roll, close): the file is no longer ours to extend
            if self._reserved >= self.max_size:
                return  # the writer reserved up to the end itself meanwhile
            try:
                self._extend_reservation(self._reserved + 1)  # one window more
            except LogDirOfflineError:
                pass  # the writer's own reserve meets it, on the append that needs the space

    def _prefault(self, end: int) -> None:
        """Pre-fault pages ahead of ``end``, inside the reserved blocks.

        Kept small and separate from the fallocate window: madvise holds the GIL, and
        populating a whole 16 MiB window at once stalled every thread for 5-17 ms and
        dirtied zero pages that a flush then wrote twice (docs/BENCHMARKS.md).

        How far ahead grows with the file, like readahead: as far as the file already
        holds, from POPULATE_AHEAD_MIN up to POPULATE_AHEAD. A fixed 1 MiB made the first
        small write to each of 1,000 partitions populate 3 MiB (log, offset index, time
        index): 3 GiB of page population for a few MB of records, 74% of the broker's
        CPU in the many-partitions benchmark.
        """
        ahead = min(POPULATE_AHEAD, max(POPULATE_AHEAD_MIN, end))
        target = min(self._reserved, _round_up(end + ahead, PAGE))
        if target <= self._populated:
            return
        start = self._populated
        began = time.perf_counter()
        # Pages past the data (whole pages only: the one holding ``length`` has data) get
        # their page-cache pages from a pwrite of zeros first; madvise then only maps them.
        self._write_zeros(max(start, _round_up(self.length, PAGE)), target)
        try:
            self.map.madvise(MADV_POPULATE_WRITE, start, target - start)
        except OSError:
            self._populate = False  # older kernel: page faults it is
        PopulateClock.seconds += time.perf_counter() - began
        PopulateClock.bytes += target - start
        self._populated = target

    def _write_zeros(self, start: int, end: int) -> None:
        """Zeros into [start, end), reserved and past the data, with pwrite: the kernel's
        write path takes new page-cache pages in large folios, where faulting them into the
        map takes them a page at a time. On this VM, 256 MiB at a time in one process, pwrite
        of zeros then madvise ran 1,884-2,815 MiB/s against 388-406 MiB/s for madvise alone
        (docs/BENCHMARKS.md, "Memory state"). The bytes are what the reserved blocks read as
        anyway, and what recovery cuts after a crash; the records are still written
        through the map, and a pwrite never reaches below the data's end."""
        view = _ZEROS
        while start < end:
            count = min(end - start, len(view))
            try:
                written = os.pwrite(self.fd, view[:count], start)
            except OSError as exc:
                raise LogDirOfflineError(f"cannot write {self.path}: {os.strerror(exc.errno or errno.EIO)}") from exc
            start += written

    def _take_map(self) -> mmap.mmap | None:
        """Remove the map from this object, after a reservation running on its fd has finished."""
        with self._guard:
            mapped, self._map = self._map, None
        return mapped

    def write(self, data: bytes | bytearray | memoryview) -> int:
        """Append ``data`` at ``length``; return the position it was written at."""
        position = self.length
        end = position + len(data)
        self.reserve(end)
        if self.write_with_pwrite:
            os.pwrite(self.fd, data, position)
            self.length = end
            return position
        if end > self._reserved - self.window // 2 and not self._reserve_queued and self._reserved < self.max_size:
            self._reserve_queued = True  # past half of the reserved window: the next one, please
            RESERVER.submit(self._reserve_ahead)
        if self._populate and end > self._populated:
            self._prefault(end)
        self.map[position:end] = data
        self.length = end
        return position

    def flush(self) -> None:
        os.fdatasync(self.fd)

    def unmap_and_trim(self) -> None:
        """Drop the map and cut the file to its real length. The fd stays open for reads."""
        mapped = self._take_map()
        if mapped is not None:
            mapped.close()
        os.ftruncate(self.fd, self.length)

    def unmap_and_trim_later(self) -> None:
        """``unmap_and_trim`` on the block releaser's thread (a roll: storage/releaser.py
        says why). The map is gone at once; the file keeps this object's fd for reads and
        is cut to ``length`` soon after, through a dup of it."""
        RELEASER.submit(release, self._take_map(), os.dup(self.fd), cut_to=self.length)

    def close_later(self) -> None:
        """``close`` with the unmap and the cut on the block releaser's thread."""
        if self.fd < 0:
            return
        self.unmap_and_trim_later()
        os.close(self.fd)
        self.fd = -1

    def detach(self) -> tuple[mmap.mmap | None, int]:
        """Give up the map and the fd, untrimmed, to a caller that deletes the file."""
        mapped, fd = self._take_map(), self.fd
        self.fd = -1
        return mapped, fd

    def truncate_to(self, length: int) -> None:
        """Forget data after ``length`` (the map stays; the bytes are zeroed for recovery)."""
        if length > self.length:
            raise ValueError(f"cannot truncate {self.path} forward to {length}")
        self.map[length : self.length] = bytes(self.length - length)
        self.length = length

    def close(self) -> None:
        """Trim and close the fd (clean close)."""
        if self.fd < 0:
            return
        self.unmap_and_trim()
        os.close(self.fd)
        self.fd = -1


def release(mapped: mmap.mmap | None, fd: int, *, cut_to: int | None = None, unlink: tuple[str, ...] = ()) -> None:
    """A file's last steps, run on the block releaser's thread: unmap, cut the file to
    ``cut_to`` (a roll), unlink ``unlink`` (a deletion), close ``fd`` (ours)."""
    try:
        if mapped is not None:
            mapped.close()  # munmap releases the GIL: 15-20 ms for a full 1 GiB map
        if cut_to is not None:
            os.ftruncate(fd, cut_to)
        for path in unlink:
            files.unlink_if_exists(path)
    finally:
        if fd >= 0:
            os.close(fd)
