"""`castle log dump`: prints batches, verifies CRCs, flags damage (real process)."""

from __future__ import annotations

import os
import subprocess
import sys

import orjson

from storage import files
from storage.config import LogConfig
from tests.unit.storage.helpers import batch, open_log

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def _dump(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "broker", "log", "dump", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=60, env={**os.environ, "PYTHONPATH": ROOT})


def test_dump_lists_every_batch_and_record(tmp_path):
    log = open_log(tmp_path, LogConfig())
    for _ in range(3):
        log.append(batch(count=2, value_size=10))
    directory = log.directory
    log.close()
    result = _dump(directory, "--json", "--records")
    assert result.returncode == 0, result.stderr
    entries = [orjson.loads(line) for line in result.stdout.splitlines()]
    assert [e["base_offset"] for e in entries] == [0, 2, 4]
    assert all(e["crc_valid"] for e in entries)
    assert [r["offset"] for e in entries for r in e["records"]] == list(range(6))


def test_dump_reports_a_corrupt_batch_with_a_failing_status(tmp_path):
    log = open_log(tmp_path, LogConfig())
    for _ in range(3):
        log.append(batch(count=1, value_size=50))
    directory = log.directory
    log.close()
    path = files.log_path(directory, 0)
    size = os.path.getsize(path)
    with open(path, "r+b") as handle:
        handle.seek(size - 5)
        handle.write(b"\x00\x01\x02")
    result = _dump(path)
    assert result.returncode == 1
    assert "INVALID" in result.stdout and "CRC" in result.stdout
