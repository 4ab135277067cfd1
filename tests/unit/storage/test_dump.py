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


def test_dump_shows_markers_and_the_txnindex_entries(tmp_path):
    from tests.unit.storage.test_transactions import txn_batch

    log = open_log(tmp_path, LogConfig())
    log.append(txn_batch(7, 0, 2), leader_epoch=0)  # 0-1
    log.append_marker(7, 0, True, 4, leader_epoch=0)  # 2
    log.append(txn_batch(7, 2, 1), leader_epoch=0)  # 3
    log.append_marker(7, 0, False, 5, leader_epoch=0)  # 4
    directory = log.directory
    log.close()
    result = _dump(directory, "--json")
    assert result.returncode == 0, result.stderr
    lines = [orjson.loads(line) for line in result.stdout.splitlines()]
    markers = [(e["base_offset"], e["marker"], e["coordinator_epoch"]) for e in lines if e.get("control")]
    assert markers == [(2, "COMMIT", 4), (4, "ABORT", 5)]
    entries = [e for e in lines if e["file"].endswith(".txnindex")]
    assert [(e["producer_id"], e["first_offset"], e["last_offset"], e["last_stable_offset"]) for e in entries] == \
        [(7, 3, 4, 5)]
    # The text form, and a .txnindex file given on its own.
    text = _dump(directory).stdout
    assert "marker: COMMIT coordinator_epoch: 4" in text and "marker: ABORT coordinator_epoch: 5" in text
    alone = _dump(files.txn_index_path(directory, 0))
    assert alone.returncode == 0
    assert "producer_id: 7 first_offset: 3 last_offset: 4 last_stable_offset: 5" in alone.stdout
    with open(files.txn_index_path(directory, 0), "ab") as handle:
        handle.write(b"\x00" * 3)
    assert _dump(files.txn_index_path(directory, 0)).returncode == 1


def test_dump_shows_a_markers_delete_horizon(tmp_path):
    from storage.cleaner import clean_log
    from tests.unit.storage.test_transactions import txn_batch

    log = open_log(tmp_path, LogConfig(cleanup_policy="compact", delete_retention_ms=1_000))
    log.append(txn_batch(7, 0, 1), leader_epoch=0)  # 0: aborted
    log.append_marker(7, 0, False, 4, leader_epoch=0)  # 1
    log.append(txn_batch(8, 0, 1), leader_epoch=0)  # 2
    log.append(txn_batch(7, 1, 1), leader_epoch=0)  # 3: producer 7's last batch, so 0 may go
    log.append_marker(7, 0, True, 4, leader_epoch=0)  # 4
    log.append_marker(8, 0, True, 4, leader_epoch=0)  # 5
    log.roll()
    for _ in range(2):  # the first removes the aborted batch, the second stamps the marker
        clean_log(log, now_ms=5_000)
    directory = log.directory
    log.close()
    result = _dump(directory, "--json")
    assert result.returncode == 0, result.stderr
    lines = [orjson.loads(line) for line in result.stdout.splitlines()]
    stamped = [(e["base_offset"], e["marker"], e.get("delete_horizon_ms")) for e in lines if e.get("control")]
    assert stamped == [(1, "ABORT", 6_000), (4, "COMMIT", None), (5, "COMMIT", None)]
