"""The coordinator epoch as a partition owner sees it, to fence deposed coordinators.

Every write of the coordinator to __consumer_offsets carries the epoch it was elected
with; the worker that owns the partition compares it with the current epoch and refuses
an older one (NOT_COORDINATOR). Where the current epoch comes from:

- local backend (this module): ``<log.dirs[0]>/coordinator_epoch`` (decimal text,
  replaced atomically by the elected coordinator), read on every check: a tiny file in
  the page cache, and a check never sees a stale value.
- ZooKeeper: ``/consumers/coordinator_epoch``, kept in memory by a data watch on the
  worker's own ZooKeeper session (coordination/cluster.py, ZooKeeperCluster), so a check
  never blocks the worker's loop. A new coordinator's epoch reaches the watch within a
  ZooKeeper round trip of its election, as Kafka's controller epoch reaches brokers.
"""

from __future__ import annotations

import os

EPOCH_FILE = "coordinator_epoch"


class FileEpochFence:
    def __init__(self, data_dir: str) -> None:
        self.path = os.path.join(data_dir, EPOCH_FILE)

    def current_epoch(self) -> int:
        try:
            with open(self.path, "rb") as handle:
                return int(handle.read().strip() or b"0")
        except FileNotFoundError:
            return 0
