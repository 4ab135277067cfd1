"""The coordinator epoch as a partition owner sees it, to fence deposed coordinators.

Every write of the coordinator to __consumer_offsets carries the epoch it was elected
with; the worker that owns the partition compares it with the current epoch and refuses
an older one (NOT_COORDINATOR). Where the current epoch comes from:

- local backend: ``<log.dirs[0]>/coordinator_epoch`` (decimal text, replaced atomically
  by the elected coordinator), read on every check: a tiny file in the page cache, and a
  check never sees a stale value.
- ZooKeeper: ``/consumers/coordinator_epoch``, kept in memory by a data watch, so a check
  never blocks the worker's loop. A new coordinator's epoch reaches the watch within a
  ZooKeeper round trip of its election, as Kafka's controller epoch reaches brokers.
"""

from __future__ import annotations

import os
import threading
from typing import Any, Protocol

EPOCH_FILE = "coordinator_epoch"
EPOCH_ZNODE = "/consumers/coordinator_epoch"


class EpochFence(Protocol):
    def current_epoch(self) -> int: ...

    def close(self) -> None: ...


class FileEpochFence:
    def __init__(self, data_dir: str) -> None:
        self.path = os.path.join(data_dir, EPOCH_FILE)

    def current_epoch(self) -> int:
        try:
            with open(self.path, "rb") as handle:
                return int(handle.read().strip() or b"0")
        except FileNotFoundError:
            return 0

    def close(self) -> None:
        pass


class ZooKeeperEpochFence:
    """Watches the epoch znode from kazoo's thread; ``current_epoch`` reads the cache."""

    def __init__(self, connect: str, timeout: float = 15.0) -> None:
        from kazoo.client import KazooClient

        self._epoch = 0
        self._lock = threading.Lock()
        self.client = KazooClient(hosts=connect)
        self.client.start(timeout=timeout)
        self.client.DataWatch(EPOCH_ZNODE, self._changed)

    def _changed(self, data: bytes | None, _stat: Any) -> None:
        if data:
            with self._lock:
                self._epoch = max(self._epoch, int(data.strip() or b"0"))

    def current_epoch(self) -> int:
        with self._lock:
            return self._epoch

    def close(self) -> None:
        self.client.stop()
        self.client.close()


def open_fence(zookeeper_connect: str, data_dir: str) -> EpochFence:
    if zookeeper_connect:
        return ZooKeeperEpochFence(zookeeper_connect)
    return FileEpochFence(data_dir)
