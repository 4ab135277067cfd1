"""A daemon thread that reads a store again whenever its watch fires: how every per-process
copy of cluster state (group configs, dynamic broker configs, client-metrics subscriptions,
finalized features) stays fresh without a request ever waiting on ZooKeeper or a file.

``reload()`` reads the store and installs the result; one that raises (ZooKeeper away, a file
being replaced) is logged and tried again RETRY_AFTER later. A watch callback only sets an
event (a blocking read in kazoo's callback thread would deadlock it)."""

from __future__ import annotations

import logging
import threading
from typing import Callable

log = logging.getLogger(__name__)

RETRY_AFTER = 0.5  # a failed reload is tried again this soon


class StoreFollower:
    def __init__(self, reload: Callable[[], None], name: str, what: str) -> None:
        self._reload = reload
        self._name = name  # the thread's
        self._what = what  # for the log: what could not be read
        self._wake = threading.Event()
        self._closed = False
        self._thread: threading.Thread | None = None

    def start(self, watch: Callable[[Callable[[], None]], object]) -> None:
        """Follow from now on: ``watch(callback)`` is the store's change registration."""
        self._thread = threading.Thread(target=self._follow, name=self._name, daemon=True)
        self._thread.start()
        watch(self.wake)

    def wake(self) -> None:
        """Read the store again soon."""
        self._wake.set()

    def _follow(self) -> None:
        while not self._closed:
            self._wake.wait()
            self._wake.clear()
            if self._closed:
                return
            try:
                self._reload()
            except Exception as exc:
                log.warning("cannot read the %s: %s", self._what, exc)
                self._wake.set()
                threading.Event().wait(RETRY_AFTER)

    def close(self) -> None:
        self._closed = True
        self._wake.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5.0)
