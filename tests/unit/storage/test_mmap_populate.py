"""How far ahead of the writer MappedFile pre-faults pages: it grows with the file, so a
file that gets little data (an index, a quiet partition) populates little, and a busy
one populates a full POPULATE_AHEAD ahead. The next fallocate window is reserved on the
reserver thread, never for a map that was taken away."""

from __future__ import annotations

import os
import threading

from storage.mmap_file import POPULATE_AHEAD, POPULATE_AHEAD_MIN, POPULATOR, RESERVER, MappedFile, PopulateClock

MIB = 1 << 20


def _populated_by(write) -> int:
    before = PopulateClock.bytes
    write()
    return PopulateClock.bytes - before


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
            # Everything written was populated first, and at most POPULATE_AHEAD beyond it.
            assert 4 * MIB <= total <= 4 * MIB + POPULATE_AHEAD
            f.write(chunk)  # past the populated end: the next window is the full distance
            assert f._populated - f.length == POPULATE_AHEAD
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


def _hold_reserver() -> threading.Event:
    """Keep the reserver thread busy until the returned event is set."""
    gate = threading.Event()
    RESERVER.submit(gate.wait, 30)
    return gate


def test_the_next_window_is_reserved_ahead_of_the_writer(tmp_path):
    """Past half of the reserved window the reserver thread reserves the next one, so the
    writer finds its blocks there and does not call fallocate itself."""
    f = MappedFile(os.path.join(tmp_path, "ahead"), 64 * MIB, window=MIB, length=0)
    try:
        f.write(b"a" * 100_000)
        assert RESERVER.drain(timeout_s=30)
        assert f._reserved == MIB  # the writer's own first window; not past half of it yet
        gate = _hold_reserver()
        f.write(b"b" * 500_000)  # past half: the next window is asked for, not reserved inline
        assert f._reserved == MIB
        gate.set()
        assert RESERVER.drain(timeout_s=30)
        assert f._reserved == 2 * MIB
        assert os.stat(f.path).st_blocks * 512 >= 2 * MIB
        f.write(b"c" * 1_000_000)  # beyond what the reserver got to: the writer reserves it
        assert f._reserved >= f.length
    finally:
        f.unmap_and_trim()
        os.close(f.fd)


def test_a_reservation_queued_for_a_map_taken_away_does_nothing(tmp_path):
    """A roll takes the map away and cuts the file while the next window's reservation is
    still queued: the job finds no map and leaves the file alone. A fallocate after the
    cut would lengthen the sealed file again."""
    f = MappedFile(os.path.join(tmp_path, "rolled"), 64 * MIB, window=MIB, length=0)
    gate = _hold_reserver()
    f.write(b"r" * 600_000)  # past half the first 1 MiB window: the next one is asked for
    assert f._reserve_queued
    f.unmap_and_trim()  # the map is closed and the file cut while the job waits
    gate.set()
    assert RESERVER.drain(timeout_s=30)
    assert f._reserved == MIB
    os.close(f.fd)
    assert os.path.getsize(f.path) == 600_000


def test_a_bulk_writer_has_pages_populated_off_its_thread(tmp_path):
    """populate_in_background reserves and pre-faults up to the end asked on the populator
    thread; the writer's next writes inside that range populate nothing themselves."""
    f = MappedFile(os.path.join(tmp_path, "bulk"), 64 * MIB, window=MIB, length=0)
    try:
        chunk = b"b" * MIB
        f.write(chunk)
        f.populate_in_background(f.length + 3 * MIB)
        assert POPULATOR.drain(timeout_s=30)
        if f._populated > 2 * MIB:  # 0 on a kernel without MADV_POPULATE_WRITE
            assert f._reserved >= 4 * MIB and f._populated == 4 * MIB
            populated = _populated_by(lambda: [f.write(chunk) for _ in range(2)])
            assert populated == 0  # inside what the populator did (POPULATE_AHEAD short of its end)
        with open(f.path, "rb") as handle:
            assert handle.read(MIB) == chunk
    finally:
        f.unmap_and_trim()
        os.close(f.fd)


def test_a_populate_queued_for_a_map_taken_away_does_nothing(tmp_path):
    """As for a reservation: a roll takes the map away while the populate job waits; the job
    finds no map, does not touch the file, and the cut file keeps its length."""
    f = MappedFile(os.path.join(tmp_path, "rolled-bulk"), 64 * MIB, window=MIB, length=0)
    gate = threading.Event()
    POPULATOR.submit(gate.wait, 30)
    f.write(b"p" * 300_000)
    f.populate_in_background(8 * MIB)
    f.populate_in_background(9 * MIB)  # one job at a time per file
    f.unmap_and_trim()
    gate.set()
    assert POPULATOR.drain(timeout_s=30)
    assert f._reserved < 8 * MIB
    os.close(f.fd)
    assert os.path.getsize(f.path) == 300_000
