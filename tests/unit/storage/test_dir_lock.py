"""The log dir lock, including against a real second process."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import pytest

from storage.dir_lock import LOCK_FILE_NAME, LogDirLock
from storage.errors import LogDirLockedError, StorageError

REPO_ROOT = Path(__file__).resolve().parents[3]
CHILD_TIMEOUT = 20.0

# The child takes the lock, says so on stdout, then waits for stdin to close.
CHILD_SCRIPT = """
import sys
from storage.dir_lock import LogDirLock
lock = LogDirLock().acquire(sys.argv[1])
print("locked", flush=True)
sys.stdin.readline()
"""


def _read_line(proc: subprocess.Popen[bytes], timeout: float) -> bytes:
    """One line of the child's stdout, waiting at most ``timeout`` seconds."""
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    deadline = time.monotonic() + timeout
    data = b""
    while not data.endswith(b"\n"):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise AssertionError(f"child printed no full line within {timeout}s (got {data!r})")
        ready, _, _ = select.select([fd], [], [], remaining)
        if not ready:
            continue
        chunk = os.read(fd, 1024)
        if not chunk:
            raise AssertionError(f"child closed stdout after {data!r} (exit code {proc.wait(timeout)})")
        data += chunk
    return data


@pytest.fixture
def lock_holder(tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A separate python process holding the lock of tmp_path; killed afterwards if still alive."""
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD_SCRIPT, str(tmp_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=REPO_ROOT,
        env=env,
    )
    try:
        line = _read_line(proc, CHILD_TIMEOUT)
        assert line == b"locked\n"
        yield proc
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=CHILD_TIMEOUT)
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()


def test_acquire_creates_lock_file_with_our_pid(tmp_path: Path) -> None:
    lock = LogDirLock().acquire(tmp_path)
    try:
        assert lock.locked and lock.log_dir == str(tmp_path)
        assert (tmp_path / LOCK_FILE_NAME).read_text() == f"{os.getpid()}\n"
    finally:
        lock.release()
    assert not lock.locked
    assert (tmp_path / LOCK_FILE_NAME).read_text() == ""  # pid cleared on release


def test_second_lock_in_same_process_is_refused(tmp_path: Path) -> None:
    # flock belongs to the open file description: a second open() conflicts even here.
    first = LogDirLock().acquire(tmp_path)
    try:
        with pytest.raises(LogDirLockedError) as info:
            LogDirLock().acquire(tmp_path)
        assert str(info.value) == f"log dir {tmp_path} is in use by another process (pid {os.getpid()})"
    finally:
        first.release()


def test_release_then_reacquire(tmp_path: Path) -> None:
    lock = LogDirLock()
    lock.acquire(tmp_path)
    lock.release()
    lock.release()  # idempotent
    lock.acquire(tmp_path)
    lock.release()


def test_acquire_twice_on_same_object_is_a_bug(tmp_path: Path) -> None:
    lock = LogDirLock().acquire(tmp_path)
    try:
        with pytest.raises(RuntimeError):
            lock.acquire(tmp_path)
    finally:
        lock.release()


def test_context_manager_releases(tmp_path: Path) -> None:
    with LogDirLock().acquire(tmp_path) as lock:
        assert lock.locked
    assert not lock.locked
    LogDirLock().acquire(tmp_path).release()


def test_lock_fd_is_close_on_exec(tmp_path: Path) -> None:
    lock = LogDirLock().acquire(tmp_path)
    try:
        assert lock.fd is not None
        assert os.get_inheritable(lock.fd) is False
    finally:
        lock.release()


def test_missing_log_dir_is_a_storage_error_not_locked(tmp_path: Path) -> None:
    with pytest.raises(StorageError) as info:
        LogDirLock().acquire(tmp_path / "missing")
    assert not isinstance(info.value, LogDirLockedError)


def test_lock_held_by_another_process_is_refused_until_it_is_killed(
    tmp_path: Path, lock_holder: subprocess.Popen[bytes]
) -> None:
    with pytest.raises(LogDirLockedError) as info:
        LogDirLock().acquire(tmp_path)
    assert str(info.value) == f"log dir {tmp_path} is in use by another process (pid {lock_holder.pid})"

    # SIGKILL: no cleanup code runs in the child, the kernel drops the flock on exit.
    os.kill(lock_holder.pid, signal.SIGKILL)
    assert lock_holder.wait(timeout=CHILD_TIMEOUT) == -signal.SIGKILL

    lock = LogDirLock().acquire(tmp_path)
    try:
        assert (tmp_path / LOCK_FILE_NAME).read_text() == f"{os.getpid()}\n"
    finally:
        lock.release()


def test_lock_is_free_after_holder_exits_normally(tmp_path: Path, lock_holder: subprocess.Popen[bytes]) -> None:
    assert lock_holder.stdin is not None
    lock_holder.stdin.close()  # the child's readline returns, it exits without release()
    assert lock_holder.wait(timeout=CHILD_TIMEOUT) == 0
    LogDirLock().acquire(tmp_path).release()
