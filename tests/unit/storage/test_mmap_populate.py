"""How far ahead of the writer MappedFile pre-faults pages: it grows with the file, so a
file that gets little data (an index, a quiet partition) populates little, and a busy
one populates a full POPULATE_AHEAD ahead."""

from __future__ import annotations

import os

from storage.mmap_file import POPULATE_AHEAD, POPULATE_AHEAD_MIN, MappedFile, PopulateClock

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
