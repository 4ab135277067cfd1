"""A JSON file private to the broker: locked read-modify-write, atomic 0600 replace, a polling watch.

Why a module: the single-machine credential store (coordination/credentials.py, salted SCRAM
keys) and ACL store (coordination/acls/store.py) each keep one small JSON document in the data
directory, written by brokers and by ``castle`` commands in other processes, and need the same
guarantees; they differ only in what the document holds, which they pass in as ``decode``,
``encode`` and ``empty``. The file side is here once::

    <directory>/<name>        the document; mode 0600 whatever the umask
    <directory>/<name>.lock   empty; an flock on it serializes read-modify-write between processes

* ``read`` parses the file (``empty()`` while it does not exist; ValueError "<path>: not JSON:
  ..." for bytes that are not JSON; what ``decode`` refuses it refuses too).
* ``update`` holds the flock (and a mutex for this process's threads) across read, change and
  write, so concurrent writers never lose each other's changes. The change reports what it
  changed; a false report (False, an empty list) writes nothing.
* Writes replace the file atomically: a private tmp file (mode 0600, fchmod'ed too, for a
  stale tmp file's mode), fsync, rename over the file, fsync of the directory. Readers see the
  old document or the new one, never half of one, and a crash leaves one of them.
* ``watch`` polls (mtime_ns, size, inode) every 250 ms, from the process's one file-polling
  thread (coordination/file_poller.py), and fires the watchers when it moves; a rename over
  the file changes the inode, so even a same-size rewrite within the mtime's granularity is
  seen. ``close`` stops the polling of this file.
"""

from __future__ import annotations

import fcntl
import logging
import os
import threading
from typing import Any, Callable, Generic, TypeVar

import orjson

from coordination.file_poller import POLLER
from coordination.watchers import Watcher, Watchers
from storage import files

V = TypeVar("V")
R = TypeVar("R")

FILE_MODE = 0o600
Stamp = tuple[int, int, int]


class PrivateJsonFile(Generic[V]):
    """``<directory>/<name>``, read and written as a ``V``.

    ``decode(path, doc, data)`` turns the parsed document into a ``V`` (``data``, the raw
    bytes, is for error messages; ValueError naming ``path`` for a document it refuses);
    ``encode(value)`` gives the bytes to write; ``empty()`` is the value of a missing file.
    ``what`` names the store in messages ("credential", "ACL"), ``log`` is the store's
    logger. Thread- and process-safe."""

    def __init__(self, directory: str, name: str, *, decode: Callable[[str, Any, bytes], V],
                 encode: Callable[[V], bytes], empty: Callable[[], V], what: str, log: logging.Logger) -> None:
        self.directory = directory
        self.path = os.path.join(directory, name)
        self.lock_path = self.path + ".lock"
        self._decode = decode
        self._encode = encode
        self._empty = empty
        self._log = log
        self._mutex = threading.Lock()
        self._watchers = Watchers(what, log)
        self._poll_key: int | None = None  # this file's check in the process's poller
        self._last: Stamp = (0, 0, 0)

    # ------------------------------------------------------------------ reads
    def read(self) -> V:
        try:
            with open(self.path, "rb") as handle:
                data = handle.read()
        except FileNotFoundError:
            return self._empty()
        try:
            doc = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise ValueError(f"{self.path}: not JSON: {data[:200]!r}") from exc
        return self._decode(self.path, doc, data)

    # ------------------------------------------------------------------ writes
    def update(self, change: Callable[[V], R]) -> R:
        """Read, ``change`` the value in place, write it back when ``change`` returned
        something true; all under the lock. Returns what ``change`` returned."""
        os.makedirs(self.directory, exist_ok=True)
        with self._mutex:
            fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, FILE_MODE)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)  # released by the close below
                value = self.read()
                changed = change(value)
                if changed:
                    self._replace(self._encode(value))
                return changed
            finally:
                os.close(fd)

    def _replace(self, data: bytes) -> None:
        tmp = f"{self.path}.{os.getpid()}.{threading.get_ident()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, FILE_MODE)
        try:
            try:
                os.fchmod(fd, FILE_MODE)  # whatever the umask, and a stale tmp file's mode
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, self.path)
        except BaseException:
            try:
                os.unlink(tmp)
            except FileNotFoundError:
                pass
            raise
        files.fsync_dir(self.directory)

    # ------------------------------------------------------------------ watches
    def watch(self, fn: Watcher) -> None:
        """``fn()`` now, then within 250 ms of each change of the file (its inode, mtime or
        size), from the process's file-polling thread (coordination/file_poller.py)."""
        with self._mutex:
            self._watchers.add(fn)
            if self._poll_key is None:
                self._last = self._stamp()
                self._poll_key = POLLER.add(self._poll, self.path)
        self._watchers.notify(fn)

    @property
    def thread(self) -> threading.Thread | None:
        """The polling thread, once something watches (one per process, shared)."""
        return POLLER.thread if self._poll_key is not None else None

    def _stamp(self) -> Stamp:
        """(mtime_ns, size, inode) of the file; zeros while it does not exist."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return 0, 0, 0
        return st.st_mtime_ns, st.st_size, st.st_ino

    def _poll(self) -> None:
        try:
            now = self._stamp()
        except OSError as exc:
            self._log.warning("%s watch: %s: %s", self._watchers.what, self.path, exc)
            return
        if now == self._last:
            return
        self._last = now
        self._watchers.fire()

    def close(self) -> None:
        """Stop watching: no watcher runs once this returns (unless called from a watcher)."""
        with self._mutex:
            self._watchers.close()
            key, self._poll_key = self._poll_key, None
        if key is not None:
            POLLER.remove(key)
