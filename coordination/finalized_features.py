"""``FinalizedFeatures``: the cluster's finalized feature levels as one process sees them, and
the levels Castle supports (what it can honour, at run time).

Every process of a broker keeps one: the workers read ``level("transaction.version")`` per
transactional Produce and answer ApiVersions from ``snapshot()``; the coordinator process
follows the level to serve EndTxn and write its state log as that version. Reading is a dict
lookup on a table swapped whole by a daemon thread that reloads the store
(coordination/feature_store.py) when its watch fires, as GroupConfigs does for groups'
configs: no lock, no I/O on an event loop.

Until UpdateFeatures first stores levels, each feature is at its default: transaction.version
at the broker's ``transaction.version`` setting, group.version and share.version at 1; the
epoch is then the process's start time in milliseconds (a restart with another setting is
taken by reconnecting clients). Once stored, the store's levels and epoch are the cluster's.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Callable

from coordination.feature_store import NO_EPOCH, FeatureStore, Levels
from coordination.store_follower import StoreFollower

log = logging.getLogger(__name__)

TRANSACTION_VERSION = "transaction.version"
GROUP_VERSION = "group.version"
SHARE_VERSION = "share.version"
START_EPOCH = int(time.time() * 1000)


@dataclass(frozen=True)
class Supported:
    """A feature's supported levels (Kafka's ranges), and whether Castle can lower its level:
    it serves the consumer and share group protocols always and cannot turn them off, so
    group.version and share.version are refused a downgrade, as Kafka refuses one of
    kraft.version."""

    name: str
    min_level: int
    max_level: int
    downgradable: bool = True


SUPPORTED = {f.name: f for f in (Supported(TRANSACTION_VERSION, 0, 2), Supported(GROUP_VERSION, 0, 1, False),
                                 Supported(SHARE_VERSION, 0, 1, False))}


def default_levels(transaction_version: int) -> Levels:
    return {TRANSACTION_VERSION: transaction_version, GROUP_VERSION: 1, SHARE_VERSION: 1}


class FinalizedFeatures:
    """``start()`` loads the levels and follows the store; ``close()`` stops following."""

    def __init__(self, store: FeatureStore, defaults: Levels) -> None:
        self.store = store
        self.defaults = dict(defaults)
        self._table: tuple[Levels, int] = (dict(defaults), START_EPOCH)
        self._listeners: list[Callable[[Levels, int], object]] = []
        self._follower = StoreFollower(self._reload, "castle-features", "finalized features")

    # ------------------------------------------------------------------ reading (any thread, no I/O)
    def level(self, name: str) -> int:
        return self._table[0].get(name, 0)

    def snapshot(self) -> tuple[Levels, int]:
        """(feature -> finalized level, the epoch), levels of 0 included."""
        return self._table

    def effective(self, stored: Levels | None) -> Levels:
        """The levels a store's content means: the defaults while nothing is stored."""
        return dict(self.defaults) if stored is None else {name: stored.get(name, 0) for name in
                                                              set(self.defaults) | set(stored)}

    # ------------------------------------------------------------------ following the store
    def start(self) -> None:
        try:
            self._reload()
        except Exception as exc:  # ZooKeeper away, a file written by hand: the defaults until it reads
            log.warning("finalized features: cannot read them: %s", exc)
        self._follower.start(self.store.watch)

    def on_change(self, fn: Callable[[Levels, int], object]) -> None:
        """``fn(levels, epoch)`` after each reload that changed them (on the follower thread)."""
        self._listeners.append(fn)

    def update(self, change: Callable[[Levels], Levels]) -> tuple[Levels, int]:
        """Store ``change(current levels)`` (blocking: run it off the event loop); taken here at once."""
        levels, epoch = self.store.update(lambda stored: change(self.effective(stored)))
        self._set(self.effective(levels), epoch)
        return self._table

    def _reload(self) -> None:
        stored, epoch = self.store.read()  # a failure keeps what we have (StoreFollower retries)
        if epoch == NO_EPOCH:
            self._set(dict(self.defaults), START_EPOCH)
        else:
            self._set(self.effective(stored), epoch)

    def _set(self, levels: Levels, epoch: int) -> None:
        if (levels, epoch) == self._table or epoch < self._table[1] and self._table[1] != START_EPOCH:
            return
        self._table = (levels, epoch)
        for fn in self._listeners:
            try:
                fn(levels, epoch)
            except Exception:
                log.exception("finalized features: a listener failed")

    def close(self) -> None:
        self._follower.close()
