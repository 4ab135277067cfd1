"""One broker process per log dir: an exclusive flock on ``<log_dir>/.lock``.

Two brokers appending to the same segment files would interleave batches and corrupt
the log, so a broker locks each log dir before touching anything in it and keeps the
lock for its whole life.

Why flock(2):
  * It belongs to the open file description, so the kernel drops it when the process
    dies, however it dies (SIGKILL, OOM killer): no stale lock to clean up by hand.
  * Unlike POSIX fcntl locks it is not released when *some other* fd on the same file
    is closed, and a second open() of the file in the same process conflicts too, so
    one process cannot lock the same dir twice by accident.
  * LOCK_NB: a second broker fails at once with a clear error instead of hanging.

The descriptor is opened close-on-exec (Python's default for os.open, and we ask for
it explicitly): a child we spawn must not inherit the lock and keep it alive after we
die. After locking we write our pid into the file so the loser can name the holder.

Caveat: Apache Kafka locks ``.lock`` with Java's FileChannel.tryLock, i.e. POSIX fcntl
locks, which on Linux do not conflict with flock. A Castle broker and a Kafka broker
pointed at the same dir would therefore not exclude each other.
"""

from __future__ import annotations

import errno
import fcntl
import os
from typing import Union

from storage.errors import LogDirLockedError, StorageError

StrPath = Union[str, "os.PathLike[str]"]

LOCK_FILE_NAME = ".lock"
# The pid is a short decimal line; cap the read so a garbage file cannot blow up a message.
_PID_READ_LIMIT = 64


class LogDirLock:
    """Holds the exclusive lock of at most one log dir.

    Usage::

        lock = LogDirLock()
        lock.acquire("/var/lib/castle/data")   # LogDirLockedError if another process has it
        ...
        lock.release()

    Also a context manager once acquired (``with LogDirLock().acquire(d):``).
    Not thread-safe: one owner (the log manager) acquires and releases.
    """

    def __init__(self) -> None:
        self._fd: int | None = None
        self._log_dir: str | None = None

    @property
    def locked(self) -> bool:
        return self._fd is not None

    @property
    def log_dir(self) -> str | None:
        """The dir currently locked by this object, or None."""
        return self._log_dir

    @property
    def fd(self) -> int | None:
        """The lock file's descriptor while held (for tests and diagnostics)."""
        return self._fd

    def acquire(self, log_dir: StrPath) -> "LogDirLock":
        """Lock ``log_dir`` (which must exist) or raise LogDirLockedError at once.

        Raises StorageError if the lock file cannot be opened (missing dir, EACCES,
        read-only file system), RuntimeError if this object already holds a lock.
        """
        if self._fd is not None:
            raise RuntimeError(f"this LogDirLock already holds {self._log_dir}")
        path_dir = os.fspath(log_dir)
        lock_path = os.path.join(path_dir, LOCK_FILE_NAME)
        fd = _open_lock_file(lock_path)
        try:
            _lock_or_raise(fd, path_dir)
            _record_pid(fd)
        except BaseException:
            os.close(fd)  # closing also drops the lock if we got it
            raise
        self._fd = fd
        self._log_dir = path_dir
        return self

    def release(self) -> None:
        """Unlock and close; a no-op if nothing is held."""
        fd, self._fd, self._log_dir = self._fd, None, None
        if fd is None:
            return
        try:
            # Clear our pid first so nobody later reads it as the holder's.
            os.ftruncate(fd, 0)
        except OSError:
            pass  # cosmetic only; the lock itself goes away with close()
        try:
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    def __enter__(self) -> "LogDirLock":
        if self._fd is None:
            raise RuntimeError("acquire() the LogDirLock before using it as a context manager")
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()

    def __repr__(self) -> str:
        return f"LogDirLock(log_dir={self._log_dir!r}, locked={self.locked})"


def _open_lock_file(lock_path: str) -> int:
    try:
        return os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        raise StorageError(f"cannot open lock file {lock_path}: {exc}") from exc


def _lock_or_raise(fd: int, log_dir: str) -> None:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
            raise StorageError(f"cannot lock log dir {log_dir}: {exc}") from exc
        raise LogDirLockedError(_in_use_message(fd, log_dir)) from None


def _in_use_message(fd: int, log_dir: str) -> str:
    holder = _read_holder_pid(fd)
    # The holder writes its pid just after locking; in that tiny window the file may
    # still be empty (or hold a dead predecessor's pid if it was SIGKILLed).
    who = f" (pid {holder})" if holder is not None else ""
    return f"log dir {log_dir} is in use by another process{who}"


def _read_holder_pid(fd: int) -> int | None:
    try:
        text = os.pread(fd, _PID_READ_LIMIT, 0).decode("ascii", "replace").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _record_pid(fd: int) -> None:
    data = f"{os.getpid()}\n".encode("ascii")
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, data, 0)
    except OSError:
        # The pid only improves an error message elsewhere; holding the lock is what
        # matters, so a full disk must not make acquire() fail.
        pass
