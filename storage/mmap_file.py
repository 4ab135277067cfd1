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
  The exception is a writer that appends megabytes at a time (a follower catching up:
  ``populate_in_background``): its loop has nothing else to do, the machine has a core
  to spare, and populating on the loop was 46% of the follower's time (docs/BENCHMARKS.md,
  follower catch-up). ``POPULATOR`` does it there, ahead of the writer, with the GIL
  released; the writer pre-faults only what the populator has not reached.

Thread-safety: one writer (the partition's owner). ``flush`` may run on another thread.
The reserver touches the fd only under ``_guard``, which whoever takes the map away
holds too, so a fallocate never lengthens a file that a roll has cut (or a reused fd).
"""

from __future__ import annotations

import ctypes
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
# Separate from RELEASER: a reservation must not wait behind a discard that takes 0.7 s.
RESERVER = JobThread("castle-block-reserver")
# Background pre-faulting for bulk writers; apart from RESERVER, whose fallocates are short.
POPULATOR = JobThread("castle-page-populator")
POPULATE_CHUNK = 1 << 20
_libc = ctypes.CDLL(None, use_errno=True)  # a CDLL call releases the GIL; mmap.madvise does not
_libc.madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
_libc.madvise.restype = ctypes.c_int


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
            # Held by the populator while libc faults pages of the map in, and by whoever takes
            # the map away: apart from _guard, so the writer's reservations never wait for it.
            self._map_lock = threading.Lock()
            self._populate = True
            self._populated = self.length // PAGE * PAGE
            self._reserve_queued = False  # a job to reserve the next window is queued
            self._populate_queued = False  # a POPULATOR job for this file is queued or running
            self._populate_target = 0  # how far that job populates
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
        try:
            self.map.madvise(MADV_POPULATE_WRITE, start, target - start)
        except OSError:
            self._populate = False  # older kernel: page faults it is
        PopulateClock.seconds += time.perf_counter() - began
        PopulateClock.bytes += target - start
        self._populated = max(self._populated, target)  # the populator may be further

    def populate_in_background(self, end: int) -> None:
        """Have POPULATOR reserve and pre-fault pages up to ``end`` (capped at the map),
        off the writer's thread. One job per file at a time; it follows the furthest end
        asked, and while it runs the writer leaves pre-faulting to it (pages it has not
        reached yet fault in as the writer copies into them)."""
        end = min(_round_up(end, PAGE), self.max_size)
        if not self._populate or self.write_with_pwrite or end <= self._populated:
            return
        self._populate_target = max(self._populate_target, end)
        if not self._populate_queued:
            self._populate_queued = True
            POPULATOR.submit(self._populate_ahead)

    def _populate_ahead(self) -> None:
        """POPULATOR's job, POPULATE_CHUNK at a time: blocks reserved under ``_guard`` (no
        fallocate runs beside ours), pages faulted in under ``_map_lock`` (the map cannot be
        taken away meanwhile); the writer's reservations take only the first."""
        try:
            while True:
                with self._guard:
                    if self._map is None:
                        return
                    end = self._populate_target
                    try:
                        self._extend_reservation(end)
                    except LogDirOfflineError:
                        return  # the writer's own reserve meets it, on the append that needs the space
                    reserved = self._reserved
                with self._map_lock:
                    mapped = self._map
                    if mapped is None:
                        return
                    # From the populated end, or the data's end if the writer's copies passed it.
                    start = max(self._populated, self.length // PAGE * PAGE)
                    target = min(end, reserved, start + POPULATE_CHUNK)
                    if target <= start:
                        return
                    # The map's address; the export taken for it ends with the expression.
                    address = ctypes.addressof(ctypes.c_char.from_buffer(mapped))
                    began = time.perf_counter()
                    if _libc.madvise(address + start, target - start, MADV_POPULATE_WRITE) != 0:
                        return  # an older kernel: the writer's page faults do it
                    PopulateClock.seconds += time.perf_counter() - began
                    PopulateClock.bytes += target - start
                    self._populated = max(self._populated, target)
        finally:
            self._populate_queued = False

    def _take_map(self) -> mmap.mmap | None:
        """Remove the map from this object, after a reservation running on its fd has finished."""
        with self._guard, self._map_lock:
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
        if self._populate and end > self._populated and not self._populate_queued:
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
