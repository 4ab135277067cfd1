"""How far ahead of the writer MappedFile pre-faults pages: it grows with the file, so a
file that gets little data (an index, a quiet partition) populates little, and a busy
one populates a full POPULATE_AHEAD ahead. The populating runs on the populator thread
without the GIL, and never on a map that was taken away."""

from __future__ import annotations

import os
import threading
import time

from storage.mmap_file import POPULATE_AHEAD, POPULATE_AHEAD_MIN, POPULATOR, MappedFile, PopulateClock

MIB = 1 << 20


def _populated_by(write) -> int:
    before = PopulateClock.bytes
    write()
    assert POPULATOR.drain(timeout_s=30)
    return PopulateClock.bytes - before


def _hold_populator() -> threading.Event:
    """Keep the populator thread busy until the returned event is set."""
    gate = threading.Event()
    POPULATOR.submit(gate.wait, 30)
    return gate


def test_a_small_first_write_populates_only_the_minimum(tmp_path):
    f = MappedFile(os.path.join(tmp_path, "small"), 64 * MIB, window=16 * MIB, length=0)
    try:
        populated = _populated_by(lambda: f.write(b"x" * 100))
        if populated:  # 0 on a kernel without MADV_POPULATE_WRITE
            assert populated <= POPULATE_AHEAD_MIN + 4096
            assert populated < POPULATE_AHEAD // 4
    finally:
        f.unmap_and_trim()
        os.close(f.fd)


def test_a_growing_file_populates_up_to_the_full_distance_ahead(tmp_path):
    f = MappedFile(os.path.join(tmp_path, "busy"), 64 * MIB, window=16 * MIB, length=0)
    try:
        chunk = b"y" * 65536
        total = _populated_by(lambda: [f.write(chunk) for _ in range(64)])  # 4 MiB written
        if total:
            # Everything written was populated, and at most POPULATE_AHEAD beyond it; the
            # writer asks again halfway, so it stays between half and the full distance ahead.
            assert 4 * MIB <= total <= 4 * MIB + POPULATE_AHEAD
            assert f._populated == f._requested
            assert POPULATE_AHEAD // 2 <= f._populated - f.length <= POPULATE_AHEAD
        with open(f.path, "rb") as handle:
            assert handle.read(65536) == chunk
    finally:
        f.unmap_and_trim()
        os.close(f.fd)


def test_pwrite_appends_are_seen_through_the_map_and_populate_nothing(tmp_path):
    f = MappedFile(os.path.join(tmp_path, "index"), 1 * MIB, window=64 * 1024, length=0, write_with_pwrite=True)
    try:
        populated = _populated_by(lambda: [f.write(i.to_bytes(12, "big")) for i in range(1000)])
        assert populated == 0
        assert f.length == 12_000
        assert bytes(f.map[12 * 999:12_000]) == (999).to_bytes(12, "big")
        f.truncate_to(12 * 500)
        assert bytes(f.map[12 * 500:12 * 501]) == bytes(12)
    finally:
        f.unmap_and_trim()
        os.close(f.fd)
    assert os.path.getsize(f.path) == 12 * 500


def test_the_writer_does_not_wait_for_the_populator(tmp_path):
    """A populator that lags (held here) costs the writer its own page faults, nothing else:
    the write returns, its bytes are there, and the populate runs when the thread is free."""
    f = MappedFile(os.path.join(tmp_path, "lagging"), 64 * MIB, window=16 * MIB, length=0)
    try:
        gate = _hold_populator()
        before = PopulateClock.bytes
        chunk = b"z" * MIB
        for _ in range(3):
            f.write(chunk)
        assert PopulateClock.bytes == before  # nothing populated yet: the thread is held
        assert f._populated == 0 and f._requested > 3 * MIB
        gate.set()
        assert POPULATOR.drain(timeout_s=30)
        if f._populate:  # False on a kernel without MADV_POPULATE_WRITE
            assert f._populated == f._requested
            assert PopulateClock.bytes - before == f._requested
        with open(f.path, "rb") as handle:
            assert handle.read(3 * MIB) == chunk * 3
    finally:
        f.unmap_and_trim()
        os.close(f.fd)


def test_work_queued_for_a_map_taken_away_does_nothing(tmp_path):
    """A roll takes the map away (to unmap it on the releaser) while a populate and the
    next window's reservation are still queued for it: the job finds no map and touches
    nothing. A fallocate past the cut would lengthen the sealed file again."""
    f = MappedFile(os.path.join(tmp_path, "rolled"), 64 * MIB, window=MIB, length=0)
    gate = _hold_populator()
    f.write(b"r" * 600_000)  # past half the first 1 MiB window: the next one is asked for
    assert f._requested > 0 and f._reserve_wanted > f._reserved
    populated = PopulateClock.bytes
    f.unmap_and_trim()  # the map is closed while the job waits behind the gate
    gate.set()
    assert POPULATOR.drain(timeout_s=30)
    assert PopulateClock.bytes == populated
    assert f._populated == 0
    os.close(f.fd)
    assert os.path.getsize(f.path) == 600_000


def test_the_next_window_is_reserved_ahead_of_the_writer(tmp_path):
    """Past half of the reserved window the populator reserves the next one, so the writer
    finds its blocks there and does not call fallocate itself."""
    f = MappedFile(os.path.join(tmp_path, "ahead"), 64 * MIB, window=MIB, length=0)
    try:
        f.write(b"a" * 100_000)
        assert POPULATOR.drain(timeout_s=30)
        assert f._reserved == MIB  # the writer's own first window; not past half of it yet
        f.write(b"b" * 500_000)
        assert POPULATOR.drain(timeout_s=30)
        if f._populate:  # False on a kernel without MADV_POPULATE_WRITE (no work ahead then)
            assert f._reserved == 2 * MIB
            assert os.stat(f.path).st_blocks * 512 >= 2 * MIB
    finally:
        f.unmap_and_trim()
        os.close(f.fd)


def _system_ticks(tid: int) -> int:
    """Clock ticks thread ``tid`` of this process has spent in the kernel (stat field 15)."""
    with open(f"/proc/self/task/{tid}/stat") as stat:
        return int(stat.read().rsplit(")", 1)[1].split()[12])


def test_the_populate_releases_the_gil(tmp_path):
    """The event loop's thread keeps running Python while the populator faults pages in.
    This thread, which needs the GIL to run at all, watches the populator thread's kernel
    time grow while its madvise runs: it sees many values. If the call held the GIL (as
    Python's mmap.madvise does), this thread would run only before the call and after it
    returned, and would see at most two."""
    size = 512 * MIB  # ~0.1 s of population on warm memory, ~1 s on fresh: many 10 ms ticks
    f = MappedFile(os.path.join(tmp_path, "big"), size, window=size, length=0)
    try:
        f.reserve(size)
        f._requested = size
        populator_tid: list[int] = []
        started = threading.Event()

        def populate() -> None:
            populator_tid.append(threading.get_native_id())
            started.set()
            f._work_ahead()

        POPULATOR.submit(populate)
        assert started.wait(30)
        seen: set[int] = set()
        deadline = time.monotonic() + 30
        while f._populated < size and time.monotonic() < deadline:
            seen.add(_system_ticks(populator_tid[0]))
        assert POPULATOR.drain(timeout_s=30)
        if f._populate:  # False on a kernel without MADV_POPULATE_WRITE
            assert f._populated == size
            assert len(seen) >= 3
    finally:
        f.unmap_and_trim()
        os.close(f.fd)
