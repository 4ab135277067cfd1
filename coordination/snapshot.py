"""What a worker process knows of the cluster, in memory: topics, who holds each
partition, which brokers are alive, and the coordinator epoch (for fencing).

A ``ClusterSnapshot`` sits on the worker's own coordination backend (the same interface
the coordinator process uses, coordination/backend.py; local files or a ZooKeeper session
of its own) and reads it only off the event loop. The backend's watches (topics, brokers,
coordinator) only mark what changed, since a blocking read inside a kazoo watch callback
deadlocks kazoo; one reader thread re-reads it and replaces whole values (an attribute
assignment is atomic under the GIL), then tells the worker (``on_change``, which posts to
its loop). The loop's ``refresh()`` is a version compare. Admin writes run off the loop
and load their own change (``refresh_now``) before they answer.

A partition the snapshot does not know yet has no holder (-1): callers answer a retriable
error while the reader loads it (the miss wakes it). A partition's holder is its leader,
as its state (ZooKeeper's state znode; the local backend: this broker) says; a partition
whose state is not written yet is held by the first broker of its replica list.

This broker is always among the live brokers it reports: a broker that serves a request
is alive, whether or not its registration (written by its coordinator process a moment
after the workers serve, or lost with a ZooKeeper session) is visible yet.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from typing import Callable, Mapping, NamedTuple

from coordination.acls.store import AclStore
from coordination.backend import CoordinationBackend, TopicRegistry
from coordination.broker_config_store import BrokerConfigStore
from coordination.client_metrics_store import ClientMetricsStore
from coordination.client_quotas import QuotaStore
from coordination.credentials import CredentialStore
from coordination.delegation_tokens import TokenStore
from coordination.feature_store import FeatureStore
from coordination.group_config_store import GroupConfigStore
from coordination.topics import TopicInfo
from coordination.znodes import Endpoints, PartitionState

log = logging.getLogger(__name__)


class PartitionView(NamedTuple):
    """A partition as the cluster records it: its replicas (the first is the preferred
    leader) and its state, which the controller and the leader write."""

    replicas: list[int]
    leader: int
    leader_epoch: int
    isr: list[int]
    zk_version: int  # of the state znode; -1 when there is none yet
    controller_epoch: int = 0


def _view(replicas: list[int], state: PartitionState | None) -> PartitionView:
    if state is None:
        first = replicas[0] if replicas else -1
        return PartitionView(replicas, first, 0, [first] if replicas else [], -1)
    return PartitionView(replicas, state.leader, state.leader_epoch, state.isr, state.zk_version, state.controller_epoch)

# Watches wake the reader; it also looks once in a while, in case a notification was lost
# (a registry refresh with nothing changed does no network I/O).
INVALID_REPLICA_ASSIGNMENT = 39
BACKSTOP_SECONDS = 1.0
RETRY_SECONDS = 0.5

TOPICS, BROKERS, EPOCH = "topics", "brokers", "epoch"


class ClusterSnapshot:
    def __init__(self, backend: CoordinationBackend, advertised: Endpoints) -> None:
        self.node_id = backend.node_id
        self._backend = backend
        self._topics = backend.topics()
        self.registry: TopicRegistry = SnapshotRegistry(self._topics, self)
        self._self = {self.node_id: advertised}
        self._brokers: Mapping[int, Endpoints] = dict(self._self)
        self._epoch = 0
        self._epoch_lock = threading.Lock()
        self._partitions: dict[str, dict[int, PartitionView]] = {}
        self._holders_built_from = -1
        self._version = 0  # bumped by whoever loaded a changed snapshot
        self._seen = 0  # the version refresh() last reported
        self._refresh_lock = threading.Lock()
        # Called on a reader thread after the topics changed (a worker posts it to its loop).
        self.on_change: Callable[[], None] | None = None
        self._dirty: set[str] = {TOPICS, BROKERS, EPOCH}
        self._dirty_lock = threading.Lock()
        self._wake = threading.Event()
        self._closed = False
        self._load(self._take_dirty())  # a worker starts with what the backend holds now
        backend.watch_topics(lambda: self._mark(TOPICS))
        backend.watch_brokers(lambda: self._mark(BROKERS))
        backend.watch_coordinator(lambda: self._mark(EPOCH))
        self._reader = threading.Thread(target=self._read, name="cluster-snapshot", daemon=True)
        self._reader.start()

    # ------------------------------------------------------------------ the reader thread
    def _mark(self, what: str) -> None:
        """From a watch (the backend's thread): never block here."""
        with self._dirty_lock:
            self._dirty.add(what)
        self._wake.set()

    def _take_dirty(self) -> set[str]:
        with self._dirty_lock:
            dirty, self._dirty = self._dirty, set()
        return dirty

    def _read(self) -> None:
        while not self._closed:
            self._wake.wait(BACKSTOP_SECONDS)
            self._wake.clear()
            if self._closed:
                return
            dirty = self._take_dirty() | {TOPICS}
            try:
                self._load(dirty)
            except Exception:
                if self._closed:
                    return  # the backend closed under the read: the worker is stopping
                log.exception("cannot read the cluster state")
                with self._dirty_lock:
                    self._dirty |= dirty
                self._wake.set()
                time.sleep(RETRY_SECONDS)

    def _load(self, dirty: set[str]) -> None:
        if BROKERS in dirty:
            self._brokers = {**self._backend.live_brokers(), **self._self}
        if EPOCH in dirty:
            self.learn_epoch(self._backend.current_epoch())
        if TOPICS in dirty:
            self.refresh_now()

    # ------------------------------------------------------------------ reads (any thread)
    def refresh(self) -> bool:
        """True when the topic snapshot changed since the last call. Never waits on the
        backend: in a worker's event loop it only reads what the reader thread loaded."""
        version = self._version
        if version == self._seen:
            return False
        self._seen = version
        return True

    def refresh_now(self) -> bool:
        """Load what changed now, waiting for the backend if need be: only off the event
        loop (the reader thread, or an admin write on the thread that wrote)."""
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
        partitions = {}
        for info in self._topics.all():
            try:
                replicas = self._topics.replicas(info.name)
                states = self._topics.partition_states(info.name)
            except Exception:  # deleted since all() (ZooKeeper): it has no holder
                continue
            partitions[info.name] = {p: _view(r, states.get(p)) for p, r in replicas.items()}
        self._partitions = partitions

    def partition(self, topic: str, partition: int) -> PartitionView | None:
        """Replicas, leader, epoch and ISR; None if unknown (the reader then loads it)."""
        views = self._partitions.get(topic)
        if views is None or partition not in views:
            # New to us (or grown): the reader loads it; meanwhile the partition has no
            # known holder, which callers answer with a retriable error.
            self._mark(TOPICS)
            return None
        return views[partition]

    def partitions_of(self, topic: str) -> Mapping[int, PartitionView]:
        return self._partitions.get(topic, {})

    def holder_of(self, topic: str, partition: int) -> int:
        """The broker leading the partition (whether alive or not), -1 if unknown or none."""
        view = self.partition(topic, partition)
        return -1 if view is None else view.leader

    def broker_secret(self) -> bytes:
        """Blocking (it may create it): only while the worker starts."""
        return self._backend.broker_secret()

    def acls(self) -> "AclStore":
        return self._backend.acls()

    def credentials(self) -> "CredentialStore":
        return self._backend.credentials()

    def group_configs(self) -> "GroupConfigStore":
        return self._backend.group_configs()

    def client_metrics(self) -> "ClientMetricsStore":
        return self._backend.client_metrics()

    def features(self) -> "FeatureStore":
        return self._backend.features()

    def broker_configs(self) -> "BrokerConfigStore":
        return self._backend.broker_configs()

    def client_quotas(self) -> "QuotaStore":
        return self._backend.client_quotas()

    def delegation_tokens(self) -> TokenStore:
        return self._backend.delegation_tokens()

    def live_brokers(self) -> Mapping[int, Endpoints]:
        """node id -> listener name -> (host, port), this broker included."""
        return self._brokers

    def addresses(self, listener: str) -> dict[int, tuple[str, int]]:
        """node id -> (host, port) on ``listener`` of the live brokers that have it (Kafka
        leaves a broker without the request's listener out of Metadata)."""
        return {node: endpoints[listener] for node, endpoints in self._brokers.items() if listener in endpoints}

    def elect_leaders(self, wanted: list[tuple[str, int]] | None, election_type: int) -> dict[tuple[str, int], int]:
        """ElectLeaders, written as the controller would (conditionally on each state
        znode's version): (topic, partition) -> error code. Only off the event loop."""
        from coordination.controller import ELECTION_NOT_NEEDED, UNKNOWN_TOPIC_OR_PARTITION, run_elections

        if not hasattr(self._topics, "update_partition_state"):  # the local backend leads everything
            return {(t, p): ELECTION_NOT_NEEDED if (info := self._topics.get(t)) and info.has_partition(p)
                    else UNKNOWN_TOPIC_OR_PARTITION for t, p in wanted or []}
        results = run_elections(self._topics, set(self._backend.live_brokers()), wanted, election_type,  # type: ignore[arg-type]
                                self._backend.current_epoch())
        self.refresh_now()
        return results

    def fence_offline_replicas(self, node_id: int, partitions: set[tuple[str, int]],
                               unclean_allowed: Callable[[Mapping[str, str]], bool]) -> int:
        """This broker's replicas of ``partitions`` went offline with their log dir: out of
        each ISR, their leaderships to the other live in-sync replicas, as Kafka's
        controller does for an offline replica. Only off the event loop; nothing with the
        local backend (one broker: no other replica to lead)."""
        from coordination.controller import fence_replica

        if not hasattr(self._topics, "update_partition_state"):
            return 0
        written = fence_replica(self._topics, node_id, set(self._backend.live_brokers()) - {node_id},  # type: ignore[arg-type]
                                unclean_allowed, self._backend.current_epoch(), only=partitions)
        self.refresh_now()
        return written

    def reassign(self, topic: str, targets: Mapping[int, list[int] | None]) -> dict[int, tuple[int, str | None]]:
        """AlterPartitionReassignments for one topic (coordination/zookeeper_topics.py):
        partition -> (error code, message). Only off the event loop."""
        reassign = getattr(self._topics, "reassign", None)
        if reassign is None:  # the local backend: one broker, nowhere to move a replica
            current = self._topics.replicas(topic) if self._topics.get(topic) is not None else {}
            # A target that is where the replicas are is done at once, as Kafka's controller
            # does (kafka-reassign-partitions.sh sends one when only log dirs change).
            return {p: (0, None) if target is not None and list(target) == current.get(p)
                    else (INVALID_REPLICA_ASSIGNMENT, "one broker: replicas cannot move") for p, target in targets.items()}
        results: dict[int, tuple[int, str | None]] = reassign(topic, targets, set(self._backend.live_brokers()))
        self.refresh_now()
        return results

    def reassignments(self, topic: str) -> dict[int, tuple[list[int], list[int], list[int]]]:
        """partition -> (replicas, adding, removing) of the reassignments in progress."""
        ongoing = getattr(self._topics, "reassignments", None)
        if ongoing is None:
            return {}
        replicas = self._topics.replicas(topic) if self._topics.get(topic) is not None else {}
        return {p: (replicas.get(p, []), a, r) for p, (a, r) in ongoing(topic).items()}

    def update_partition_state(self, topic: str, partition: int, state: PartitionState) -> PartitionState | None:
        """A leader's ISR change, written if the state znode is still at
        ``state.zk_version`` (None otherwise), then loaded: only off the event loop."""
        update = getattr(self._topics, "update_partition_state", None)
        if update is None:
            return None  # the local backend: one broker, nothing to change
        written: PartitionState | None = update(topic, partition, state)
        self.refresh_now()
        return written

    def current_epoch(self) -> int:
        return self._epoch

    def learn_epoch(self, epoch: int) -> None:
        """An epoch granted by the election: from the watch, or told by this broker's own
        coordinator process over the rings before its first write with it (the watch may
        come later). Epochs only grow."""
        with self._epoch_lock:
            self._epoch = max(self._epoch, epoch)

    def close(self) -> None:
        self._closed = True
        self._wake.set()
        self._backend.close()


class SnapshotRegistry:
    """The backend's topic registry, whose refresh() is the snapshot's (callers anywhere
    in a worker refresh the registry directly, on the loop)."""

    def __init__(self, registry: TopicRegistry, snapshot: ClusterSnapshot) -> None:
        self._registry = registry
        self._snapshot = snapshot

    @property
    def snapshot_generation(self) -> int:
        return self._registry.snapshot_generation

    def refresh(self) -> bool:
        return self._snapshot.refresh()

    # The rest of TopicRegistry, as the backend's registry answers it.
    def get(self, name: str) -> TopicInfo | None:
        return self._registry.get(name)

    def by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        return self._registry.by_id(topic_id)

    def all(self) -> list[TopicInfo]:
        return self._registry.all()

    def create(self, name: str, partitions: int, configs: Mapping[str, str], topic_id: uuid.UUID | None = None,
               validate_only: bool = False, assignment: Mapping[int, list[int]] | None = None,
               brokers: list[int] | None = None, replication_factor: int = 1) -> TopicInfo:
        return self._registry.create(name, partitions, configs, topic_id=topic_id, validate_only=validate_only,
                                     assignment=assignment, brokers=brokers, replication_factor=replication_factor)

    def delete(self, name: str) -> TopicInfo:
        return self._registry.delete(name)

    def set_partitions(self, name: str, count: int, validate_only: bool = False,
                       assignment: Mapping[int, list[int]] | None = None) -> TopicInfo:
        return self._registry.set_partitions(name, count, validate_only=validate_only, assignment=assignment)

    def set_configs(self, name: str, update: Callable[[dict[str, str]], dict[str, str]]) -> TopicInfo:
        return self._registry.set_configs(name, update)

    def allocate_producer_ids(self, count: int) -> int:
        return self._registry.allocate_producer_ids(count)

    def replicas(self, name: str) -> dict[int, list[int]]:
        return self._registry.replicas(name)

    def partition_states(self, name: str) -> dict[int, PartitionState]:
        return self._registry.partition_states(name)


__all__ = ["ClusterSnapshot", "PartitionView", "SnapshotRegistry"]
