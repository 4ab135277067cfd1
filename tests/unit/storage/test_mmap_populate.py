"""How far ahead of the writer MappedFile pre-faults pages: it grows with the file, so a
file that gets little data (an index, a quiet partition) populates little, and a busy
one populates a full POPULATE_AHEAD ahead. The next fallocate window is reserved on the
reserver thread, never for a map that was taken away."""

from __future__ import annotations

import os
import threading

from storage.mmap_file import POPULATE_AHEAD, POPULATE_AHEAD_MIN, RESERVER, MappedFile, PopulateClock

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


def test_pages_past_the_data_are_zeros_and_the_data_is_never_overwritten(tmp_path):
    """Pre-faulting writes zeros with pwrite past the data's end only: every byte written
    through the map stays, and what lies between the data's end and the populated end
    reads as zeros, through the map and through the file."""
    f = MappedFile(os.path.join(tmp_path, "zeros"), 64 * MIB, window=MIB, length=0)
    try:
        pieces = [bytes([65 + i % 26]) * size for i, size in enumerate((100, 4000, 5000, 70_000, 300_000, 1))]
        for piece in pieces:
            f.write(piece)
        data = b"".join(pieces)
        assert f.length == len(data)
        if f._populated > f.length:  # 0 on a kernel without MADV_POPULATE_WRITE
            assert bytes(f.map[f.length:f._populated]) == bytes(f._populated - f.length)
        with open(f.path, "rb") as handle:
            assert handle.read(len(data)) == data
    finally:
        f.unmap_and_trim()
        os.close(f.fd)
    assert os.path.getsize(f.path) == len(data)


def test_a_file_reopened_with_data_keeps_it(tmp_path):
    """A log reopened with data (recovered length) pre-faults from the page after its end:
    the partial page holding the end keeps its bytes."""
    path = os.path.join(tmp_path, "reopened")
    f = MappedFile(path, 64 * MIB, window=MIB, length=0)
    f.write(b"d" * 5000)
    f.unmap_and_trim()
    os.close(f.fd)
    again = MappedFile(path, 64 * MIB, window=MIB)
    try:
        again.write(b"e" * 10_000)
        with open(path, "rb") as handle:
            assert handle.read(15_000) == b"d" * 5000 + b"e" * 10_000
    finally:
        again.unmap_and_trim()
        os.close(again.fd)
