"""The callbacks a store tells that something may have changed, and telling them safely.

Why a module: both stores (coordination/credentials.py, coordination/acls/store.py) have two
ways of noticing changes, a ZooKeeper watch (coordination/zk_watch.py) and a polling thread
over a local file (coordination/private_file.py), and all four kept the same list of
callbacks with the same rules. Those rules live here, once:

* ``add`` after ``close`` is refused: RuntimeError "the <what> store is closed".
* ``fire`` calls every watcher registered when it starts (a snapshot, so a watcher may add
  one or close the store), and nothing once the store is closed.
* A watcher that raises is logged ("<what> watcher failed") and the others still run: a
  broken callback must not kill the watch, nor the kazoo or polling thread running it.

Messages go to the logger the store passes in, so they keep the store's logger name.
"""

from __future__ import annotations

import logging
import threading
from typing import Callable

Watcher = Callable[[], None]


class Watchers:
    """Thread-safe registry of a store's watchers. ``what`` names the store in messages
    ("credential", "ACL")."""

    def __init__(self, what: str, log: logging.Logger) -> None:
        self.what = what
        self._log = log
        self._lock = threading.Lock()
        self._fns: list[Watcher] = []
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    def add(self, fn: Watcher) -> None:
        """Register ``fn`` (it is not called here); RuntimeError once closed."""
        with self._lock:
            if self._closed:
                raise RuntimeError(f"the {self.what} store is closed")
            self._fns.append(fn)

    def notify(self, fn: Watcher) -> None:
        """Call one watcher; its failure is logged, not raised."""
        try:
            fn()
        except Exception:
            self._log.exception("%s watcher failed", self.what)

    def fire(self) -> None:
        """Call every registered watcher (none once closed)."""
        with self._lock:
            fns = [] if self._closed else list(self._fns)
        for fn in fns:
            self.notify(fn)

    def close(self) -> None:
        """Forget every watcher and refuse new ones."""
        with self._lock:
            self._closed = True
            self._fns.clear()
