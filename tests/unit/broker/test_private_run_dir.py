"""Where a broker without run.dir keeps its run dir (broker/process/supervisor.py
private_run_dir): in $XDG_RUNTIME_DIR when set, else in /dev/shm (a memory filesystem
either way); always a new dir of its own, private to the user."""

from __future__ import annotations

import os
import shutil
import stat

import pytest

from broker.process.supervisor import private_run_dir


def test_the_runtime_dir_first(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    first, second = private_run_dir("castle-1-"), private_run_dir("castle-1-")
    assert os.path.dirname(first) == str(tmp_path) and first != second
    assert os.path.basename(first).startswith("castle-1-")
    assert stat.S_IMODE(os.stat(first).st_mode) == 0o700


def test_dev_shm_when_the_runtime_dir_is_missing(tmp_path, monkeypatch) -> None:
    if not os.path.isdir("/dev/shm"):
        pytest.skip("no /dev/shm here")
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "gone"))
    made = private_run_dir("castle-test-")
    try:
        assert os.path.dirname(made) == "/dev/shm"
    finally:
        shutil.rmtree(made)

