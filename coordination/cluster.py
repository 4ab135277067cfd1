"""What a worker process knows of the cluster: topics, who holds each partition, which
brokers are alive, and the coordinator epoch (for fencing).

Two implementations with one shape, chosen by ``zookeeper.connect``:

- ``LocalCluster``: one broker. Topics in ``<log.dirs[0]>/cluster-metadata.json``; this
  broker holds every partition; the epoch is ``<log.dirs[0]>/coordinator_epoch``.
- ``ZooKeeperCluster``: one KazooClient per worker process. Its event loop never waits
  on ZooKeeper: it reads in-memory snapshots (topics and their holders, live brokers,
  the coordinator epoch). Watches only mark what changed (a blocking read inside a kazoo
  watch callback deadlocks kazoo); reader threads re-read it and replace whole values
  (an attribute assignment is atomic under the GIL), and tell the worker (``on_change``,
  which posts to its loop). A partition the snapshot does not know yet has no holder
  (-1): callers answer a retriable error while the reader loads it. Admin writes run off
  the loop and then load their own change (``refresh_now``) before they answer.

A partition's leader is the first broker of its replica list (no replication yet: the
only replica); Metadata reports no leader (-1) while that broker is not alive.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from typing import TYPE_CHECKING, Any, Callable, Mapping, Protocol

from coordination.backend import TopicRegistry
from coordination.fence import FileEpochFence
from coordination.local import LocalTopics
from coordination.local_topics import TopicInfo

if TYPE_CHECKING:  # kazoo is only loaded in ZooKeeper mode
    from kazoo.protocol.states import ZnodeStat

    from coordination.zookeeper_topics import ZooKeeperTopicRegistry

log = logging.getLogger(__name__)

# Watches mark topics dirty and wake the reader; it also looks once in a while, in case a
# notification was lost (a refresh with nothing dirty does no I/O).
TOPICS_BACKSTOP_SECONDS = 1.0


class BrokerSettings(Protocol):
    """What open_cluster reads of a broker config (broker.config.BrokerConfig)."""

    def __getitem__(self, name: str) -> Any: ...  # a setting's typed value, which depends on the setting

    @property
    def node_id(self) -> int: ...

    @property
    def log_dirs(self) -> list[str]: ...

    @property
    def advertised(self) -> tuple[str, int]: ...


class ClusterView(Protocol):
    node_id: int
    # Called on a reader thread when the topic snapshot changed (a worker posts it to its loop).
    on_change: Callable[[], None] | None

    @property
    def registry(self) -> TopicRegistry:
        """LocalTopics, or ZooKeeper's behind a refresh proxy."""
        ...

    def refresh(self) -> bool:
        """True when the topic snapshot changed since the last call. Never waits on
        ZooKeeper: in a worker's event loop it only reads what a reader thread loaded."""
        ...

    def refresh_now(self) -> bool:
        """Load what changed now, waiting for ZooKeeper if need be: only off the event loop
        (after an admin write, on the thread that wrote)."""
        ...

    def replicas(self, topic: str) -> Mapping[int, list[int]]: ...

    def holder_of(self, topic: str, partition: int) -> int:
        """The broker that holds the partition (whether alive or not), -1 if unknown."""
        ...

    def live_brokers(self) -> Mapping[int, tuple[str, int]]: ...

    def current_epoch(self) -> int: ...

    def close(self) -> None: ...


class LocalCluster:
    def __init__(self, log_dir: str, node_id: int, advertised: tuple[str, int]) -> None:
        self.node_id = node_id
        self.registry = LocalTopics(log_dir, node_id)
        self._fence = FileEpochFence(log_dir)
        self._brokers = {node_id: advertised}
        self.on_change: Callable[[], None] | None = None  # never called: refresh() is a stat

    def refresh(self) -> bool:
        return self.registry.refresh()  # a stat of one local file

    def refresh_now(self) -> bool:
        return self.registry.refresh()

    def replicas(self, topic: str) -> Mapping[int, list[int]]:
        info = self.registry.get(topic)
        return {p: [self.node_id] for p in range(info.partitions)} if info is not None else {}

    def holder_of(self, topic: str, partition: int) -> int:
        return self.node_id

    def live_brokers(self) -> Mapping[int, tuple[str, int]]:
        return self._brokers

    def current_epoch(self) -> int:
        return self._fence.current_epoch()

    def close(self) -> None:
        pass


class ZooKeeperCluster:
    def __init__(self, zookeeper_connect: str, node_id: int, session_timeout: float, start_timeout: float) -> None:
        from kazoo.recipe.watchers import ChildrenWatch, DataWatch

        from coordination.znodes import BrokerIdsZNode, CoordinatorEpochZNode
        from coordination.zookeeper import ZooKeeperBackend

        self.node_id = node_id
        self.backend = ZooKeeperBackend(zookeeper_connect, node_id, session_timeout=session_timeout)
        self.backend.start(start_timeout)
        self._topics = self.backend.topics()
        self.registry = _RefreshingRegistry(self._topics, self)
        self._holders: dict[str, dict[int, int]] = {}
        self._brokers: dict[int, tuple[str, int]] = {}
        self._epoch = 0
        self._lock = threading.Lock()
        self._topics.refresh()
        self._holders_built_from = -1
        self._rebuild_holders()
        # A watch callback runs on kazoo's one callback thread, where a blocking ZooKeeper
        # call can deadlock: it only wakes these reader threads.
        self._brokers_dirty = threading.Event()
        self._topics_dirty = threading.Event()
        self._refresh_lock = threading.Lock()
        self._version = 0  # bumped by whoever loaded a changed snapshot
        self._seen = 0  # the version refresh() last reported
        # Called on a reader thread after the snapshot changed (a worker posts it to its loop).
        self.on_change: Callable[[], None] | None = None
        self._topics.on_dirty = self._topics_dirty.set
        self._closed = False
        threading.Thread(target=self._read_brokers, name="live-brokers", daemon=True).start()
        threading.Thread(target=self._read_topics, name="topic-snapshot", daemon=True).start()
        ChildrenWatch(self.backend.client, BrokerIdsZNode.PATH, func=self._brokers_changed)
        DataWatch(self.backend.client, CoordinatorEpochZNode.PATH, func=self._epoch_changed)

    # ------------------------------------------------------------------ watches (kazoo's thread)
    def _brokers_changed(self, _children: list[str]) -> None:
        self._brokers_dirty.set()

    def _read_brokers(self) -> None:
        while not self._closed:
            self._brokers_dirty.wait()
            self._brokers_dirty.clear()
            if self._closed:
                return
            try:
                registrations = self.backend.live_registrations()
                self._brokers = {node_id: (r.host, r.port) for node_id, r in registrations.items()}
            except Exception:
                log.exception("cannot read the live brokers")
                self._brokers_dirty.set()
                time.sleep(0.5)

    def _read_topics(self) -> None:
        while not self._closed:
            self._topics_dirty.wait(TOPICS_BACKSTOP_SECONDS)
            self._topics_dirty.clear()
            if self._closed:
                return
            try:
                self.refresh_now()
            except Exception:
                log.exception("cannot read the topics")
                self._topics_dirty.set()
                time.sleep(0.5)

    def _epoch_changed(self, data: bytes | None, _stat: ZnodeStat | None) -> None:
        if data:
            try:
                epoch = int(data.strip() or b"0")
            except ValueError:
                log.warning("unreadable coordinator epoch %r", data)
                return
            with self._lock:
                self._epoch = max(self._epoch, epoch)

    # ------------------------------------------------------------------ reads
    def refresh(self) -> bool:
        version = self._version
        if version == self._seen:
            return False
        self._seen = version
        return True

    def refresh_now(self) -> bool:
        with self._refresh_lock:
            self._topics.refresh()
            # Compared, not taken from refresh(): an admin write refreshes the registry itself.
            changed = self._topics.snapshot_generation != self._holders_built_from
            if changed:
                self._rebuild_holders()
                self._version += 1
        if changed and self.on_change is not None:
            self.on_change()
        return changed

    def _rebuild_holders(self) -> None:
        self._holders_built_from = self._topics.snapshot_generation
        holders = {}
        for info in self._topics.all():
            try:
                replicas = self._topics.replicas(info.name)
            except Exception:
                continue
            holders[info.name] = {p: (r[0] if r else -1) for p, r in replicas.items()}
        self._holders = holders

    def replicas(self, topic: str) -> Mapping[int, list[int]]:
        try:
            return self._topics.replicas(topic)
        except Exception:
            return {}

    def holder_of(self, topic: str, partition: int) -> int:
        holders = self._holders.get(topic)
        if holders is None or partition not in holders:
            # New to us (or grown): the reader thread loads it; meanwhile the partition
            # has no known holder, which callers answer with a retriable error.
            self._topics_dirty.set()
            return -1
        return holders.get(partition, -1)

    def live_brokers(self) -> Mapping[int, tuple[str, int]]:
        return self._brokers

    def current_epoch(self) -> int:
        with self._lock:
            return self._epoch

    def close(self) -> None:
        self._closed = True
        self._brokers_dirty.set()
        self._topics_dirty.set()
        self.backend.close()


class _RefreshingRegistry:
    """The ZooKeeper topic registry, whose refresh() also updates the partition holders
    (callers anywhere in the broker refresh the registry directly)."""

    def __init__(self, registry: ZooKeeperTopicRegistry, cluster: ZooKeeperCluster) -> None:
        self._registry = registry
        self._cluster = cluster

    def refresh(self) -> bool:
        return self._cluster.refresh()

    # The rest of TopicRegistry, as the ZooKeeper registry answers it.
    def get(self, name: str) -> TopicInfo | None:
        return self._registry.get(name)

    def by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        return self._registry.by_id(topic_id)

    def all(self) -> list[TopicInfo]:
        return self._registry.all()

    def create(self, name: str, partitions: int, configs: Mapping[str, str], topic_id: uuid.UUID | None = None,
               validate_only: bool = False, assignment: Mapping[int, list[int]] | None = None,
               brokers: list[int] | None = None) -> TopicInfo:
        return self._registry.create(name, partitions, configs, topic_id=topic_id, validate_only=validate_only,
                                     assignment=assignment, brokers=brokers)

    def delete(self, name: str) -> TopicInfo:
        return self._registry.delete(name)

    def set_partitions(self, name: str, count: int, validate_only: bool = False) -> TopicInfo:
        return self._registry.set_partitions(name, count, validate_only=validate_only)

    def set_configs(self, name: str, update: Callable[[dict[str, str]], dict[str, str]]) -> TopicInfo:
        return self._registry.set_configs(name, update)

    def allocate_producer_ids(self, count: int) -> int:
        return self._registry.allocate_producer_ids(count)

    def replicas(self, name: str) -> dict[int, list[int]]:
        return self._registry.replicas(name)


def open_cluster(config: BrokerSettings) -> ClusterView:
    """The view for a broker config (broker.config.BrokerConfig)."""
    connect = str(config["zookeeper.connect"])
    if connect:
        return ZooKeeperCluster(connect, config.node_id, int(config["zookeeper.session.timeout.ms"]) / 1000,
                                int(config["zookeeper.connection.timeout.ms"]) / 1000)
    return LocalCluster(config.log_dirs[0], config.node_id, config.advertised)


__all__ = ["ClusterView", "LocalCluster", "ZooKeeperCluster", "open_cluster"]
