"""loadtest/loopback_limit.py: a small transfer through each path counts every byte of the
file, at a positive rate, through the function API and through the CLI's --json output."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from loadtest import loopback_limit
from loadtest.loopback_limit import MIB

pytestmark = pytest.mark.timeout(120)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def _check_mode(result: dict, mode: str, size: int, runs: int) -> None:
    summary = result[mode]
    assert len(summary["runs"]) == runs
    for run in summary["runs"]:
        assert run["mode"] == mode
        assert run["bytes"] == size, f"{mode}: the reader counted {run['bytes']} of {size} bytes"
        assert run["bytes_sent"] == size
        assert run["mib_per_s"] > 0 and run["seconds"] > 0
        assert run["sender_cpu_s"] >= 0 and run["reader_cpu_s"] >= 0
        assert run["recv_calls"] >= 1 and run["send_calls"] >= size // result["chunk_bytes"]
    assert summary["median_mib_per_s"] > 0
    assert summary["min_mib_per_s"] <= summary["median_mib_per_s"] <= summary["max_mib_per_s"]


def test_function_api_counts_every_byte(tmp_path):
    result = loopback_limit.measure(size_mib=32, chunk_mib=1, repeat=1, directory=str(tmp_path),
                                    modes=("sendfile", "copy", "read_send"))
    size = 32 * MIB
    assert result["size_bytes"] == size and result["file_created"]
    for mode in ("sendfile", "copy", "read_send"):
        _check_mode(result, mode, size, runs=1)
    assert result["sendfile_over_copy"] > 0
    assert not os.path.exists(result["file"]), "the file is removed without keep"


def test_file_is_kept_and_reused(tmp_path):
    first = loopback_limit.measure(size_mib=4, chunk_mib=0.25, repeat=1, directory=str(tmp_path), keep=True,
                                   modes=("sendfile",))
    assert first["file_created"] and os.path.getsize(first["file"]) == 4 * MIB
    second = loopback_limit.measure(size_mib=4, chunk_mib=0.25, repeat=2, directory=str(tmp_path), modes=("sendfile",))
    assert not second["file_created"] and second["file"] == first["file"]
    _check_mode(second, "sendfile", 4 * MIB, runs=2)
    assert not os.path.exists(second["file"])


def test_odd_sizes_are_sent_exactly(tmp_path):
    path, _created = loopback_limit.prepare_file(str(tmp_path), 3 * MIB + 12345)
    for mode in loopback_limit.MODES:
        run = loopback_limit.run_once(path, 3 * MIB + 12345, mode, chunk_bytes=MIB, recv_bytes=64 * 1024, timeout=60)
        assert run["bytes"] == 3 * MIB + 12345


def test_bad_arguments_are_refused(tmp_path):
    with pytest.raises(ValueError):
        loopback_limit.measure(size_mib=0, directory=str(tmp_path))
    with pytest.raises(ValueError):
        loopback_limit.measure(size_mib=1, directory=str(tmp_path), modes=("splice",))


def test_cli_json(tmp_path):
    completed = subprocess.run(
        [sys.executable, "-m", "loadtest.loopback_limit", "--size-mib", "32", "--chunk-mib", "1", "--repeat", "1",
         "--dir", str(tmp_path), "--json"],
        cwd=ROOT, capture_output=True, text=True, timeout=100)
    assert completed.returncode == 0, completed.stderr
    result = json.loads(completed.stdout)
    assert result["size_bytes"] == 32 * MIB and result["repeat"] == 1 and result["cpus"] >= 1
    for mode in ("sendfile", "copy"):
        _check_mode(result, mode, 32 * MIB, runs=1)
    assert "read_send" not in result  # not a default mode
    assert os.listdir(tmp_path) == []
    assert "loopback_limit:" in completed.stderr  # progress goes to stderr, not into the JSON


def test_cli_human_output(tmp_path):
    completed = subprocess.run(
        [sys.executable, "-m", "loadtest.loopback_limit", "--size-mib", "8", "--repeat", "1", "--dir", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=100)
    assert completed.returncode == 0, completed.stderr
    assert "sendfile  median" in completed.stdout and "copy      median" in completed.stdout
