"""Where the cluster's finalized feature levels are kept, with the epoch clients see them at.

ZooKeeper, as Kafka's ZooKeeper mode kept them (kafka.zk.ZkData FeatureZNode, version 2),
relative to the chroot::

    /feature    {"version":2,"status":1,"features":{"transaction.version":{"max_version_level":2}}}

plus an "epoch" key (Kafka's reader ignores keys it does not know): the epoch clients see the
levels at. It is the wall clock in milliseconds at the change, or one more than the last
epoch if that is later, so it grows with every change and stays above the process start times
that brokers report while nothing is stored (coordination/finalized_features.py). A level of 0
is kept out of the features (Kafka deletes a feature finalized at 0). A change is a conditional
set on the znode version read.

The single-machine backend keeps one file (coordination/private_file.py: flocked
read-modify-write, atomic replace, polled for changes every 250 ms), with its own epoch::

    <data_dir>/features.json    {"version":2,"status":1,"epoch":1764358020000,"features":{...}}

No znode (or file) means nothing was finalized by UpdateFeatures: each feature is at the
broker's default (coordination/finalized_features.py). Epoch -1 then.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable, Protocol

import orjson
from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from coordination.private_file import PrivateJsonFile
from coordination.watchers import Watcher, Watchers
from coordination.zk_update import CallWrapper, direct

log = logging.getLogger(__name__)

FEATURE_PATH = "/feature"
ZNODE_VERSION = 2
ENABLED = 1
FILE_NAME = "features.json"
NO_EPOCH = -1
RETRIES = 20

Levels = dict[str, int]
Finalized = tuple[Levels, int]  # (feature -> finalized level, the epoch)


class FeatureStore(Protocol):
    def read(self) -> Finalized:
        ...

    def update(self, change: Callable[[Levels | None], Levels]) -> Finalized:
        """Replace the levels with ``change(current)`` (``change`` may run more than once;
        None: nothing stored yet); the new levels and epoch."""
        ...

    def watch(self, fn: Watcher) -> None:
        """``fn()`` now and whenever the levels may have changed; must not block."""
        ...

    def close(self) -> None:
        ...


def next_epoch(previous: int) -> int:
    return max(previous + 1, int(time.time() * 1000))


def encode(levels: Levels, epoch: int) -> bytes:
    return orjson.dumps({"version": ZNODE_VERSION, "status": ENABLED, "epoch": epoch,
                         "features": {name: {"max_version_level": level}
                                      for name, level in sorted(levels.items()) if level > 0}},
                        option=orjson.OPT_SORT_KEYS)


def epoch_of(doc: Any, fallback: int) -> int:
    """The stored epoch; a znode Kafka wrote has none: its data version then."""
    epoch = doc.get("epoch") if isinstance(doc, dict) else None
    return epoch if isinstance(epoch, int) and not isinstance(epoch, bool) else fallback


def decode(path: str, doc: Any) -> Levels:
    """A FeatureZNode of version 1 (min and max levels: the max is the level) or 2."""
    if not isinstance(doc, dict) or doc.get("version") not in (1, 2) or not isinstance(doc.get("features"), dict):
        raise ValueError(f"{path}: not a FeatureZNode: {doc!r:.200}")
    levels: Levels = {}
    for name, info in doc["features"].items():
        level = info.get("max_version_level") if isinstance(info, dict) else None
        if not isinstance(level, int) or isinstance(level, bool):
            raise ValueError(f"{path}: feature {name!r}: no max_version_level in {info!r:.100}")
        if level > 0:
            levels[name] = level
    return levels


# ----------------------------------------------------------------------------- ZooKeeper
class ZooKeeperFeatures:
    """FeatureStore over a started KazooClient (not owned); ``call`` runs every request."""

    def __init__(self, client: KazooClient, call: CallWrapper | None = None) -> None:
        self._client = client
        self._call: CallWrapper = call if call is not None else direct
        self._watchers = Watchers("feature", log)
        self._watching = False
        self._mutex = threading.Lock()

    def read(self) -> Finalized:
        try:
            data, stat = self._call(self._client.get, FEATURE_PATH)
        except NoNodeError:
            return {}, NO_EPOCH
        doc = orjson.loads(data)
        return decode(FEATURE_PATH, doc), epoch_of(doc, stat.version)

    def update(self, change: Callable[[Levels | None], Levels]) -> Finalized:
        for _ in range(RETRIES):
            try:
                data, stat = self._call(self._client.get, FEATURE_PATH)
            except NoNodeError:
                new, epoch = change(None), next_epoch(NO_EPOCH)
                try:
                    self._call(self._client.create, FEATURE_PATH, encode(new, epoch), makepath=True)
                except NodeExistsError:
                    continue
                return {k: v for k, v in new.items() if v > 0}, epoch
            doc = orjson.loads(data)
            new, epoch = change(decode(FEATURE_PATH, doc)), next_epoch(epoch_of(doc, stat.version))
            try:
                self._call(self._client.set, FEATURE_PATH, encode(new, epoch), version=stat.version)
            except (BadVersionError, NoNodeError):
                continue
            return {k: v for k, v in new.items() if v > 0}, epoch
        raise RuntimeError(f"{FEATURE_PATH}: other writers kept changing it")

    def watch(self, fn: Watcher) -> None:
        """``fn()`` now, then whenever /feature is created, changed or deleted (kazoo's threads)."""
        with self._mutex:
            self._watchers.add(fn)
            start = not self._watching
            self._watching = True
        if start:
            self._client.DataWatch(FEATURE_PATH, lambda _data, _stat, *_: self._watchers.fire())
        self._watchers.notify(fn)

    def close(self) -> None:
        self._watchers.close()


# ----------------------------------------------------------------------------- local file
def _decode_file(path: str, doc: Any, data: bytes) -> Finalized:
    return decode(path, doc), epoch_of(doc, NO_EPOCH)


class LocalFeatures:
    """FeatureStore in ``<data_dir>/features.json``. Thread- and process-safe."""

    def __init__(self, data_dir: str) -> None:
        self._file: PrivateJsonFile[list[Any]] = PrivateJsonFile(
            data_dir, FILE_NAME, decode=lambda p, d, b: list(_decode_file(p, d, b)),
            encode=lambda value: encode(value[0], value[1]), empty=lambda: [{}, NO_EPOCH],
            what="feature", log=log)
        self.path = self._file.path

    def read(self) -> Finalized:
        levels, epoch = self._file.read()
        return dict(levels), int(epoch)

    def update(self, change: Callable[[Levels | None], Levels]) -> Finalized:
        def apply(value: list[Any]) -> bool:
            value[0] = {k: v for k, v in change(None if value[1] == NO_EPOCH else dict(value[0])).items() if v > 0}
            value[1] = next_epoch(int(value[1]))
            result[:] = value
            return True

        result: list[Any] = []
        self._file.update(apply)
        return dict(result[0]), int(result[1])

    def watch(self, fn: Watcher) -> None:
        self._file.watch(fn)

    def close(self) -> None:
        self._file.close()
