"""Hearing of changes in ZooKeeper: children watches on a few znodes, and a lost session's return.

Why a module: the ZooKeeper credential store (coordination/credentials.py) and ACL store
(coordination/acls/store.py) learn of changes the same way, only over different znodes (Kafka's
change roots, where every write leaves a sequential notification, and for credentials also
/config/users). The semantics, kept here once:

* ``watch(fn)`` calls ``fn()`` once at registration, then whenever the children of one of the
  watched znodes change (a notification appears, or Kafka purges old ones), and when a session
  that was lost is back: watches could have missed changes meanwhile.
* The watches are set up by the first ``watch`` (after ``prepare``, which makes the znodes);
  a second ``watch`` waits until they are armed. kazoo's ChildrenWatch calls back at once
  when set; those first calls are swallowed, and ``watch``'s own call of ``fn`` stands for
  them: whatever changed once the watches were set is seen by what that call makes the
  caller read.
* Callbacks run on kazoo's threads, so ``fn`` must not block; a failing one is logged
  (coordination/watchers.py). ``close`` stops calling them and unregisters the watches as
  they next fire; the client is not ours and stays as it is.
"""

from __future__ import annotations

import logging
import threading
from typing import Callable, Iterable

from kazoo.client import KazooClient, KazooState
from kazoo.recipe.watchers import ChildrenWatch

from coordination.watchers import Watcher, Watchers


class ZkChangeWatch:
    """Watchers of the children of ``paths`` on a started KazooClient (not owned).

    ``prepare`` runs before the watches are set (the stores make their znodes there);
    ``what`` names the store in messages ("credential", "ACL"), ``log`` is its logger."""

    def __init__(self, client: KazooClient, paths: Iterable[str], prepare: Callable[[], None], what: str,
                 log: logging.Logger) -> None:
        self._client = client
        self._paths = tuple(paths)
        self._prepare = prepare
        self._watchers = Watchers(what, log)
        self._mutex = threading.Lock()
        self._watch_lock = threading.Lock()
        self._watching = False
        self._session_lost = False

    def watch(self, fn: Watcher) -> None:
        with self._watch_lock:  # a second watch() waits until the watches are armed
            with self._mutex:
                self._watchers.add(fn)
                start = not self._watching
            if start:
                self._start_watching()
        self._watchers.notify(fn)

    def _start_watching(self) -> None:
        self._prepare()
        armed = threading.Event()

        def on_children(_children: list[str]) -> bool | None:
            if self._watchers.closed:
                return False  # unregisters the watch
            if armed.is_set():
                self._watchers.fire()
            return None

        for path in self._paths:
            ChildrenWatch(self._client, path, func=on_children)
        self._client.add_listener(self._on_state)
        with self._mutex:
            self._watching = True
        armed.set()

    def _on_state(self, state: str) -> None:
        # kazoo's connection thread: bookkeeping and news only.
        if state == KazooState.LOST:
            self._session_lost = True
        elif state == KazooState.CONNECTED and self._session_lost:
            self._session_lost = False
            self._watchers.fire()

    def close(self) -> None:
        """Stop calling watchers (the client stays as it is: it is not ours)."""
        with self._mutex:
            self._watchers.close()
            watching = self._watching
        if watching:
            self._client.remove_listener(self._on_state)
