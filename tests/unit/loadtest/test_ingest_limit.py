"""loadtest/ingest_limit.py: every mode writes every byte (one and two writers), the
files are gone afterwards, and the CLI's --json carries the per-run figures."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from loadtest import ingest_limit
from loadtest.ingest_limit import MIB

pytestmark = pytest.mark.timeout(120)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def test_each_mode_and_writer_count_writes_every_byte(tmp_path):
    result = ingest_limit.measure(size_mib=16, modes=("write", "mmap"), writer_counts=(1, 2), repeat=1,
                                  directory=str(tmp_path), window_mib=4)
    assert [(r["mode"], r["writers"]) for r in result["runs"]] == [("write", 1), ("write", 2), ("mmap", 1), ("mmap", 2)]
    for run in result["runs"]:
        assert run["bytes"] == 16 * MIB
        assert run["mib_per_s"] > 0 and run["cpu_s"] >= 0
        assert sum(run["per_second_mib"]) == pytest.approx(16, abs=1e-6)  # every chunk counted once
        assert run["memory_before_mib"]["MemFree"] > 0
    assert set(result["summary"]) == {"writex1", "writex2", "mmapx1", "mmapx2"}
    assert os.listdir(tmp_path) == []  # the files are removed after each run


@pytest.mark.parametrize("mode", ["mmap", "mmap-madvise"])
def test_mmap_modes_leave_the_bytes_in_the_file(tmp_path, mode):
    """The zeros of mode mmap precede each chunk's copy: the chunks are what the file holds."""
    path = str(tmp_path / "f.bin")
    timings = ingest_limit.write_one(mode, path, 3 * MIB, MIB, window=2 * MIB)
    assert len(timings["marks"]) == 3
    with open(path, "rb") as handle:
        data = handle.read()
    assert len(data) == 3 * MIB and data[:MIB] == data[MIB : 2 * MIB] == data[2 * MIB :] != bytes(MIB)


def test_cli_json_and_bad_arguments(tmp_path):
    done = subprocess.run([sys.executable, "-m", "loadtest.ingest_limit", "--size-mib", "4", "--mode", "write",
                           "--dir", str(tmp_path), "--json"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["runs"][0]["bytes"] == 4 * MIB and result["runs"][0]["mode"] == "write"
    bad = subprocess.run([sys.executable, "-m", "loadtest.ingest_limit", "--size-mib", "4", "--chunk-mib", "0.001",
                          "--dir", str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "whole number of pages" in bad.stderr
