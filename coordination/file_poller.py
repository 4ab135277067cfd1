"""One thread per process that polls every watched file.

Why a module: the single-machine stores (credentials, ACLs, quotas, group and broker configs,
features, logger levels: coordination/private_file.py) and the local backend's coordinator
and topics files (coordination/local.py) each noticed changes with a daemon thread of their
own, waking every 250 ms. An idle broker's worker ran seven of them, and each wake-up costs
CPU (a futex wait, the GIL, a stat). Here every watch is a check that the one polling
thread runs each ``INTERVAL``: the files are seen as soon as before, for one wake-up instead
of one per file.

Rules, as the per-file threads had them:

* ``add(check)`` starts the thread if none runs; ``check()`` then runs about every
  ``INTERVAL``. A check that raises is logged and runs again next time.
* ``remove(key)`` returns once the check can no longer run: it waits for a round in
  progress (the per-file threads were joined the same way), unless it is called from a
  check, on the polling thread itself. The thread ends when no check is left.
* A forked child (the supervisor forks its workers) inherits none of its parent's checks:
  the parent's thread does not exist there, as the per-file threads did not.
"""

from __future__ import annotations

import itertools
import logging
import os
import threading
import time
from typing import Callable

log = logging.getLogger(__name__)

INTERVAL = 0.25

Check = Callable[[], None]


class FilePoller:
    def __init__(self) -> None:
        self._lock = threading.Lock()  # guards _checks and _thread
        self._round = threading.Lock()  # held while a round runs checks
        self._checks: dict[int, tuple[str, Check]] = {}
        self._keys = itertools.count(1)
        self._thread: threading.Thread | None = None

    @property
    def thread(self) -> threading.Thread | None:
        """The polling thread, while a check is registered."""
        return self._thread

    def add(self, check: Check, what: str) -> int:
        """Run ``check`` from the polling thread every INTERVAL; ``what`` names it in messages."""
        with self._lock:
            key = next(self._keys)
            self._checks[key] = (what, check)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="castle-file-watch", daemon=True)
                self._thread.start()
        return key

    def remove(self, key: int) -> None:
        """Forget a check; it does not run again once this returns."""
        if threading.current_thread() is self._thread:
            with self._lock:
                self._checks.pop(key, None)
            return
        with self._round, self._lock:
            self._checks.pop(key, None)

    def _run(self) -> None:
        while True:
            time.sleep(INTERVAL)
            with self._round:
                with self._lock:
                    if not self._checks:
                        self._thread = None
                        return
                    keys = list(self._checks)
                for key in keys:
                    with self._lock:
                        entry = self._checks.get(key)  # removed by an earlier check of this round
                    if entry is None:
                        continue
                    what, check = entry
                    try:
                        check()
                    except Exception:
                        log.exception("watch of %s failed", what)

    def _forget_after_fork(self) -> None:
        self._lock = threading.Lock()
        self._round = threading.Lock()
        self._checks = {}
        self._thread = None


POLLER = FilePoller()
os.register_at_fork(after_in_child=POLLER._forget_after_fork)
