"""The topic registry of the ZooKeeper backend: LocalTopicRegistry's interface over znodes.

    /brokers/topics/<topic>                        topic id and partition -> replicas (who hosts what)
    /brokers/topics/<topic>/partitions/<p>/state   leader, leader_epoch, isr, controller_epoch
    /config/topics/<topic>                         the topic's config overrides
    /latest_producer_id_block                      the last block of producer ids handed out

(JSON in coordination/znodes.py.) A topic exists when its /brokers/topics node exists;
the config node is written in the same multi-op transaction when the topic is created and
deleted in the one that deletes it, so the two never disagree for a reader.

Reading is from an in-memory snapshot that ``refresh()`` brings up to date, as with the
local registry. Brokers call ``refresh()`` often (every metadata request), so it must be
cheap when nothing changed: each znode read leaves a ZooKeeper watch, the watch only marks
the topic (or the topic list) dirty, and ``refresh()`` re-reads just the dirty ones; with
nothing dirty it does no I/O at all. kazoo drops every watch when the connection drops
(and fires them with a NONE event), so that event marks everything dirty.

Changes are optimistic: read with the znode version, write with a version check, start
over on BadVersion; multi-znode changes are one ZooKeeper transaction. Errors are
``TopicRegistryError(code, message)`` with Kafka's codes, like the local registry's;
ZooKeeper being unreachable past the retry deadline is ``CoordinationUnavailable``.

Placement: coordination/replica_assignment.py (Kafka's rack-unaware assignment), from a
random first broker; adding partitions continues the rotation where partition 0 started it.
Every request goes through coordination/zk_calls.py (retries, transactions).
"""

from __future__ import annotations

import dataclasses
import logging
import random
import threading
import uuid
from dataclasses import dataclass, field
from typing import Callable, Mapping, ParamSpec, TypeVar

from kazoo.client import KazooClient, TransactionRequest
from kazoo.exceptions import (
    BadVersionError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
)
from kazoo.protocol.states import EventType, WatchedEvent
from kazoo.retry import KazooRetry
from kio.schema.errors import ErrorCode

from coordination.errors import CoordinationUnavailable
from coordination.replica_assignment import assign_replicas
from coordination.topics import TopicInfo, TopicRegistryError, validate_topic_name
from coordination.zk_calls import default_retry, failure, retrying, transact
from coordination.znodes import (
    BrokerIdsZNode,
    CoordinatorEpochZNode,
    PartitionState,
    ProducerIdBlock,
    ProducerIdBlockZNode,
    TopicAssignment,
    TopicConfigZNode,
    TopicPartitionStateZNode,
    TopicsZNode,
    TopicZNode,
)

log = logging.getLogger(__name__)
T = TypeVar("T")
P = ParamSpec("P")

# Optimistic changes give up after this many lost races in a row (a livelock, not load).
MAX_RACES = 20


@dataclass(frozen=True, slots=True)
class _Topic:
    info: TopicInfo
    replicas: dict[int, list[int]]
    states: dict[int, PartitionState]  # leader, epoch and ISR of each partition that has a state znode
    # partition -> (replicas being added, replicas being removed) while a reassignment runs
    reassigning: dict[int, tuple[list[int], list[int]]] = field(default_factory=dict)


# ----------------------------------------------------------------------------- the registry
class ZooKeeperTopicRegistry:
    """Thread-safe: reads see an immutable snapshot, changes go straight to ZooKeeper."""

    def __init__(self, client: KazooClient, broker_id: int = -1, retry: KazooRetry | None = None,
                 rng: random.Random | None = None) -> None:
        self.client = client
        self.broker_id = broker_id  # recorded in /latest_producer_id_block, as Kafka does
        self._retry = retry or default_retry()
        self._rng = rng or random.Random()
        self._topics: dict[str, _Topic] = {}
        self._by_id: dict[uuid.UUID, TopicInfo] = {}
        # Bumped whenever the snapshot is replaced, by whichever refresh() replaced it (a
        # change made through this object refreshes too): views built on the snapshot
        # compare it rather than rely on a refresh() they did not make returning True.
        self.snapshot_generation = 0
        self._refresh_lock = threading.Lock()
        self._flags_lock = threading.Lock()
        self._all_dirty = True       # nothing read yet, or the watches were dropped
        self._list_dirty = False
        self._dirty: set[str] = set()
        self._dirty_states: set[tuple[str, int]] = set()
        # Called (on kazoo's thread, or the caller's) whenever something is marked dirty,
        # so that a reader thread can refresh; it must not block.
        self.on_dirty: Callable[[], None] | None = None

    def _call(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        return retrying(self._retry, fn, *args, **kwargs)

    # ------------------------------------------------------------------ watches (kazoo's thread)
    def _on_list(self, event: WatchedEvent) -> None:
        with self._flags_lock:
            if event.type == EventType.NONE:
                self._all_dirty = True
            else:
                self._list_dirty = True
        self._tell_dirty()

    def _on_topic(self, event: WatchedEvent) -> None:
        with self._flags_lock:
            if event.type == EventType.NONE or not event.path:
                self._all_dirty = True
            else:
                self._dirty.add(event.path.rsplit("/", 1)[1])
        self._tell_dirty()

    def _on_state(self, event: WatchedEvent) -> None:
        with self._flags_lock:
            parts = (event.path or "").split("/")  # /brokers/topics/<t>/partitions/<p>/state
            if event.type == EventType.NONE or len(parts) != 7 or not parts[5].isdigit():
                self._all_dirty = True
            else:
                self._dirty_states.add((parts[3], int(parts[5])))
        self._tell_dirty()

    def _tell_dirty(self) -> None:
        if self.on_dirty is not None:
            self.on_dirty()

    def invalidate(self, name: str | None = None) -> None:
        """Make the next refresh() re-read ``name`` (all when None); a change made through
        this object does it itself, so that it is read back at once, not when the watch
        notification arrives."""
        with self._flags_lock:
            if name is None:
                self._all_dirty = True
            else:
                self._list_dirty = True
                self._dirty.add(name)
        self._tell_dirty()

    # ------------------------------------------------------------------ reading
    def refresh(self) -> bool:
        """Re-read what changed since the last refresh; True when the snapshot changed.

        While ZooKeeper is unreachable this returns False at once and readers keep the
        last snapshot (as Kafka brokers serve metadata from their cache): a metadata
        request must not wait out a retry deadline. The reload happens on reconnection.
        """
        if not self.client.connected:
            return False
        with self._refresh_lock:
            with self._flags_lock:
                full, listed, dirty, states = self._all_dirty, self._list_dirty, self._dirty, self._dirty_states
                self._all_dirty, self._list_dirty, self._dirty, self._dirty_states = False, False, set(), set()
            if not (full or listed or dirty or states):
                return False
            try:
                topics = self._reload(full, listed, dirty)
                if states and not full:
                    self._reload_states(topics, {(t, p) for t, p in states if t in topics and t not in dirty})
            except BaseException:
                with self._flags_lock:  # try again next time
                    self._all_dirty |= full
                    self._list_dirty |= listed
                    self._dirty |= dirty
                    self._dirty_states |= states
                raise
            changed = topics != self._topics
            if changed:
                self._topics = topics
                self._by_id = {t.info.topic_id: t.info for t in topics.values()}
                self.snapshot_generation += 1
            return changed

    def _reload(self, full: bool, listed: bool, dirty: set[str]) -> dict[str, _Topic]:
        topics = {} if full else dict(self._topics)
        load = set(dirty)
        if full or listed:
            names = set(self._call(self.client.get_children, TopicsZNode.PATH, watch=self._on_list))
            for gone in set(topics) - names:
                del topics[gone]
            load |= names - set(topics)
            load &= names
        for name, entry in self._call(self._load_many, sorted(load)).items():
            if entry is None:
                topics.pop(name, None)
            else:
                topics[name] = entry
        return topics

    def _reload_states(self, topics: dict[str, _Topic], wanted: set[tuple[str, int]]) -> None:
        """Re-read changed state znodes only (an ISR change re-reads one znode, not its topic)."""
        pending = [(t, p, self.client.get_async(TopicPartitionStateZNode.path(t, p), watch=self._on_state))
                   for t, p in sorted(wanted)]
        for topic, partition, result in pending:
            entry = topics[topic]
            states = dict(entry.states)
            try:
                data, stat = result.get()
                states[partition] = TopicPartitionStateZNode.decode(topic, partition, data, stat.version)
            except NoNodeError:
                states.pop(partition, None)
                self.client.exists(TopicPartitionStateZNode.path(topic, partition), watch=self._on_state)
            except ValueError as exc:
                log.warning("ignoring a state znode: %s", exc)
                continue
            topics[topic] = _Topic(entry.info, entry.replicas, states, entry.reassigning)

    def _load_many(self, names: list[str]) -> dict[str, _Topic | None]:
        """Read topics and their configs with all requests in flight at once (one round
        trip, not two per topic), each read leaving a watch behind."""
        pending = [(name,
                    self.client.get_async(TopicZNode.path(name), watch=self._on_topic),
                    self.client.get_async(TopicConfigZNode.path(name), watch=self._on_topic))
                   for name in names]
        loaded: dict[str, _Topic | None] = {}
        for name, topic_result, config_result in pending:
            try:
                topic_data, _ = topic_result.get()
            except NoNodeError:
                loaded[name] = None
                continue
            try:
                config_data, _ = config_result.get()
            except NoNodeError:
                config_data = None
                self.client.exists(TopicConfigZNode.path(name), watch=self._on_topic)  # see it appear
            loaded[name] = _decode_topic(name, topic_data, config_data)
        # Then every partition's state znode, again all in flight at once.
        state_reads = [(name, p, self.client.get_async(TopicPartitionStateZNode.path(name, p), watch=self._on_state))
                       for name, entry in loaded.items() if entry is not None for p in entry.replicas]
        states: dict[str, dict[int, PartitionState]] = {}
        for name, partition, result in state_reads:
            try:
                data, stat = result.get()
                states.setdefault(name, {})[partition] = TopicPartitionStateZNode.decode(name, partition, data, stat.version)
            except NoNodeError:
                self.client.exists(TopicPartitionStateZNode.path(name, partition), watch=self._on_state)
            except ValueError as exc:
                log.warning("ignoring a state znode: %s", exc)
        for name, entry in loaded.items():
            if entry is not None:
                loaded[name] = _Topic(entry.info, entry.replicas, states.get(name, {}), entry.reassigning)
        return loaded

    def get(self, name: str) -> TopicInfo | None:
        entry = self._topics.get(name)
        return None if entry is None else entry.info

    def by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        return self._by_id.get(topic_id)

    def all(self) -> list[TopicInfo]:
        return sorted((t.info for t in self._topics.values()), key=lambda t: t.name)

    def replicas(self, name: str) -> dict[int, list[int]]:
        """partition -> replica broker ids (the first is the preferred leader)."""
        entry = self._topics.get(name)
        if entry is None:
            raise TopicRegistryError(ErrorCode.unknown_topic_or_partition, f"topic '{name}' does not exist")
        return {p: list(r) for p, r in entry.replicas.items()}

    def partition_states(self, name: str) -> dict[int, PartitionState]:
        """partition -> its leader, leader epoch and ISR, as last read (partitions whose
        state znode is not written yet are missing)."""
        entry = self._topics.get(name)
        return {} if entry is None else dict(entry.states)

    def live_broker_ids(self) -> list[int]:
        children = self._call(self.client.get_children, BrokerIdsZNode.PATH)
        return sorted(int(c) for c in children if c.isdigit())

    # ------------------------------------------------------------------ changing
    def _changed(self, name: str) -> None:
        self.invalidate(name)
        self.refresh()

    def create(self, name: str, partitions: int, configs: Mapping[str, str], topic_id: uuid.UUID | None = None,
               validate_only: bool = False, assignment: Mapping[int, list[int]] | None = None,
               brokers: list[int] | None = None, replication_factor: int = 1) -> TopicInfo:
        """Create a topic. ``assignment`` (partition -> replicas) places it explicitly;
        otherwise ``partitions`` are spread over ``brokers`` (default: the live ones),
        ``replication_factor`` replicas each. Each partition's state znode is created with
        it: the first live replica leads, the live ones are the ISR (epoch 0)."""
        why = validate_topic_name(name)
        if why:
            raise TopicRegistryError(ErrorCode.invalid_topic_exception, why)
        if assignment is not None:
            replicas = self._check_assignment(assignment, partitions, brokers)
        else:
            if partitions <= 0:
                raise TopicRegistryError(ErrorCode.invalid_partitions,
                                         f"number of partitions must be positive, not {partitions}")
            ids = sorted(set(brokers)) if brokers is not None else self.live_broker_ids()
            if replication_factor < 1:
                raise TopicRegistryError(ErrorCode.invalid_replication_factor,
                                         f"Replication factor must be larger than 0, not {replication_factor}.")
            if not ids or replication_factor > len(ids):
                raise TopicRegistryError(ErrorCode.invalid_replication_factor,
                                         f"Replication factor: {replication_factor} larger than available brokers: {len(ids)}.")
            start = self._rng.randrange(len(ids))
            replicas = assign_replicas(ids, 0, partitions, replication_factor, start, self._rng.randrange(len(ids)))
        info = TopicInfo(name, topic_id or uuid.uuid4(), len(replicas), dict(configs))
        topic_path, config_path = TopicZNode.path(name), TopicConfigZNode.path(name)
        if self._call(self.client.exists, topic_path) is not None:
            raise TopicRegistryError(ErrorCode.topic_already_exists, f"topic '{name}' already exists")
        if validate_only:
            return info
        topic_data = TopicZNode.encode(info.topic_id, replicas)
        config_data = TopicConfigZNode.encode(info.configs)
        states = self._initial_states(replicas, brokers)
        for _ in range(MAX_RACES):
            # A config node left behind by a deletion that did not finish is overwritten.
            stale = self._call(self.client.exists, config_path)

            def build(tx: TransactionRequest) -> None:
                if stale is None:
                    tx.create(config_path, config_data)
                else:
                    tx.set_data(config_path, config_data, version=stale.version)
                tx.create(topic_path, topic_data)
                self._create_states(tx, name, states)

            failed = failure(transact(self.client, self._retry, build))
            if failed is None:
                self._changed(name)
                return info
            index, error = failed
            if index == 1 and isinstance(error, NodeExistsError):
                if self._topic_id_of(name) == info.topic_id:
                    self._changed(name)  # our own commit, retried after a lost answer
                    return info
                raise TopicRegistryError(ErrorCode.topic_already_exists, f"topic '{name}' already exists")
            if not isinstance(error, (NodeExistsError, BadVersionError, NoNodeError)):
                raise error
        raise TopicRegistryError(ErrorCode.unknown_server_error, f"topic '{name}': too many concurrent changes")

    def _initial_states(self, replicas: Mapping[int, list[int]], brokers: list[int] | None) -> dict[int, bytes]:
        live = set(brokers) if brokers is not None else set(self.live_broker_ids())
        try:
            controller_epoch = CoordinatorEpochZNode.decode(self._call(self.client.get, CoordinatorEpochZNode.PATH)[0])
        except NoNodeError:
            controller_epoch = 0
        out = {}
        for partition, assigned in replicas.items():
            isr = [b for b in assigned if b in live]
            out[partition] = TopicPartitionStateZNode.encode(
                PartitionState(isr[0] if isr else -1, 0, isr, controller_epoch))
        return out

    @staticmethod
    def _create_states(tx: TransactionRequest, name: str, states: Mapping[int, bytes], parent: bool = True) -> None:
        if parent:
            tx.create(TopicPartitionStateZNode.partitions_path(name))
        for partition, data in sorted(states.items()):
            tx.create(TopicPartitionStateZNode.partition_path(name, partition))
            tx.create(TopicPartitionStateZNode.path(name, partition), data)

    def _topic_id_of(self, name: str) -> uuid.UUID | None:
        try:
            data, _ = self._call(self.client.get, TopicZNode.path(name))
        except NoNodeError:
            return None
        return TopicZNode.decode(name, data).topic_id

    def _check_assignment(self, assignment: Mapping[int, list[int]], partitions: int,
                          brokers: list[int] | None) -> dict[int, list[int]]:
        def refuse(why: str) -> TopicRegistryError:
            return TopicRegistryError(ErrorCode.invalid_replica_assignment, why)

        if not assignment:
            raise refuse("the replica assignment is empty")
        if partitions > 0 and partitions != len(assignment):
            raise refuse(f"{partitions} partitions asked for but the assignment has {len(assignment)}")
        if sorted(assignment) != list(range(len(assignment))):
            raise refuse(f"partitions should be a consecutive 0-based integer sequence, got {sorted(assignment)}")
        width = len(assignment[0])
        for partition, replicas in assignment.items():
            if not replicas:
                raise refuse(f"partition {partition} has no replicas")
            if len(set(replicas)) != len(replicas):
                raise refuse(f"duplicate brokers in the replicas of partition {partition}: {replicas}")
            if len(replicas) != width:
                raise refuse(f"partition {partition} has {len(replicas)} replicas, partition 0 has {width}")
        known = set(brokers) if brokers is not None else set(self.live_broker_ids())
        unknown = sorted({b for r in assignment.values() for b in r} - known)
        if unknown:
            raise refuse(f"Unknown broker(s) in replica assignment: {', '.join(map(str, unknown))}.")
        return {p: list(r) for p, r in assignment.items()}

    def delete(self, name: str) -> TopicInfo:
        topic_path, config_path = TopicZNode.path(name), TopicConfigZNode.path(name)
        partitions_path = TopicPartitionStateZNode.partitions_path(name)
        for _ in range(MAX_RACES):
            try:
                data, stat = self._call(self.client.get, topic_path)
            except NoNodeError:
                raise TopicRegistryError(ErrorCode.unknown_topic_or_partition, f"topic '{name}' does not exist") from None
            try:
                config_data: bytes | None = self._call(self.client.get, config_path)[0]
            except NoNodeError:
                config_data = None
            info = _decode_info(name, data, config_data)
            # The partition states first, in chunks (a big topic exceeds one request);
            # then topic, partitions and config nodes in one transaction, version-checked,
            # so a concurrent delete or change makes us start over instead of half-deleting.
            self._delete_partition_states(name)
            has_partitions = self._call(self.client.exists, partitions_path) is not None
            has_config = config_data is not None or self._call(self.client.exists, config_path) is not None

            def build(tx: TransactionRequest) -> None:
                if has_partitions:
                    tx.delete(partitions_path)
                tx.delete(topic_path, version=stat.version)
                if has_config:
                    tx.delete(config_path)

            failed = failure(transact(self.client, self._retry, build))
            if failed is None or (isinstance(failed[1], NoNodeError) and
                                  self._call(self.client.exists, topic_path) is None):
                self._changed(name)
                if info is None:
                    raise TopicRegistryError(ErrorCode.unknown_topic_or_partition, f"topic '{name}' is unreadable")
                return info
            if not isinstance(failed[1], (NotEmptyError, BadVersionError, NoNodeError)):
                raise failed[1]
        raise TopicRegistryError(ErrorCode.unknown_server_error, f"topic '{name}': too many concurrent changes")

    def _delete_partition_states(self, name: str) -> None:
        """Delete every partitions/<p>/state and partitions/<p>, pipelined: ZooKeeper runs
        one session's requests in order, so each state goes before its parent."""
        partitions_path = TopicPartitionStateZNode.partitions_path(name)

        def once() -> None:
            try:
                children = self.client.get_children(partitions_path)
            except NoNodeError:
                return
            pending = []
            for child in children:
                pending.append(self.client.delete_async(f"{partitions_path}/{child}/state"))
                pending.append(self.client.delete_async(f"{partitions_path}/{child}"))
            for result in pending:
                try:
                    result.get()
                except NoNodeError:
                    pass  # already gone (a concurrent delete, or a retry of ours)

        self._call(once)

    def set_partitions(self, name: str, count: int, validate_only: bool = False,
                       assignment: Mapping[int, list[int]] | None = None) -> TopicInfo:
        """Grow a topic to ``count`` partitions; ``assignment`` places the new ones (else
        round robin over the live brokers, as many replicas as partition 0 has)."""
        topic_path = TopicZNode.path(name)
        for _ in range(MAX_RACES):
            try:
                data, stat = self._call(self.client.get, topic_path)
            except NoNodeError:
                raise TopicRegistryError(ErrorCode.unknown_topic_or_partition, f"topic '{name}' does not exist") from None
            current = TopicZNode.decode(name, data)
            if current.topic_id is None:
                raise TopicRegistryError(ErrorCode.unknown_server_error, f"topic '{name}' has no topic id in {topic_path}")
            have = len(current.replicas)
            if count <= have:
                raise TopicRegistryError(ErrorCode.invalid_partitions,
                                         f"topic '{name}' has {have} partitions; the new count {count} must be larger")
            ids = self.live_broker_ids()
            if not ids:
                raise TopicRegistryError(ErrorCode.invalid_replication_factor,
                                         "Replication factor: 1 larger than available brokers: 0.")
            # Continue the rotation: the first broker at or after partition 0's leader.
            leader0 = current.replicas[0][0] if current.replicas.get(0) else ids[0]
            start = next((i for i, b in enumerate(ids) if b >= leader0), 0)
            width = len(current.replicas[0]) if current.replicas.get(0) else 1
            replicas = dict(current.replicas)
            if assignment is not None:
                if any(len(r) != width for r in assignment.values()):
                    raise TopicRegistryError(ErrorCode.invalid_replica_assignment,
                                             f"every new partition of '{name}' needs {width} replicas")
                replicas.update({p: list(r) for p, r in assignment.items()})
            else:
                replicas.update(assign_replicas(ids, have, count - have, width, start, start))
            configs = self._read_configs(name)
            info = TopicInfo(name, current.topic_id, count, configs)
            if validate_only:
                return info
            added = {p: r for p, r in replicas.items() if p >= have}
            states = self._initial_states(added, ids)
            has_parent = self._call(self.client.exists, TopicPartitionStateZNode.partitions_path(name)) is not None
            topic_data = TopicZNode.encode(current.topic_id, replicas, current.adding, current.removing)

            def build(tx: TransactionRequest) -> None:
                tx.set_data(topic_path, topic_data, version=stat.version)
                self._create_states(tx, name, states, parent=not has_parent)

            failed = failure(transact(self.client, self._retry, build))
            if failed is not None:
                if isinstance(failed[1], (BadVersionError, NodeExistsError)):
                    continue
                if isinstance(failed[1], NoNodeError):
                    raise TopicRegistryError(ErrorCode.unknown_topic_or_partition, f"topic '{name}' does not exist")
                raise failed[1]
            self._changed(name)
            return info
        raise TopicRegistryError(ErrorCode.unknown_server_error, f"topic '{name}': too many concurrent changes")

    def _rewrite_assignment(self, name: str, change: Callable[[TopicAssignment], TopicAssignment | None]) -> bool:
        """Read the topic znode, ``change`` it (None: nothing to write), write it back
        conditionally. False when the topic changed meanwhile or is gone (decide again)."""
        topic_path = TopicZNode.path(name)
        try:
            data, stat = self._call(self.client.get, topic_path)
        except NoNodeError:
            return False
        current = TopicZNode.decode(name, data)
        if current.topic_id is None:
            return False
        changed = change(current)
        if changed is None:
            return True
        try:
            self._call(self.client.set, topic_path,
                       TopicZNode.encode(current.topic_id, changed.replicas, changed.adding, changed.removing),
                       version=stat.version)
        except (BadVersionError, NoNodeError):
            return False
        self._changed(name)
        return True

    def add_replicas(self, name: str, wanted: Mapping[int, list[int]]) -> bool:
        """Append brokers to partitions' replica lists (a replica is only ever added here:
        a new one catches up as a follower and joins the ISR; none leaves)."""
        def add(current: TopicAssignment) -> TopicAssignment | None:
            replicas = {p: list(r) for p, r in current.replicas.items()}
            for partition, added in wanted.items():
                if partition in replicas:
                    replicas[partition] += [b for b in added if b not in replicas[partition]]
            return None if replicas == current.replicas else dataclasses.replace(current, replicas=replicas)

        return self._rewrite_assignment(name, add)

    # ------------------------------------------------------------------ reassignments (KIP-455)
    def reassignments(self, name: str) -> dict[int, tuple[list[int], list[int]]]:
        """partition -> (adding, removing) of the reassignments in progress, as last read."""
        entry = self._topics.get(name)
        return {} if entry is None else {p: (list(a), list(r)) for p, (a, r) in entry.reassigning.items()}

    def reassign(self, name: str, targets: Mapping[int, list[int] | None],
                 live: set[int]) -> dict[int, tuple[int, str | None]]:
        """Start (a target replica list) or cancel (None) reassignments: the replica list
        becomes the target followed by the replicas leaving, which the controller drops once
        the new ones are in the ISR. partition -> (error code, message)."""
        topic_path = TopicZNode.path(name)
        for _ in range(MAX_RACES):
            try:
                data, stat = self._call(self.client.get, topic_path)
            except NoNodeError:
                return {p: (ErrorCode.unknown_topic_or_partition, f"topic '{name}' does not exist") for p in targets}
            current = TopicZNode.decode(name, data)
            if current.topic_id is None:
                return {p: (ErrorCode.unknown_server_error, f"topic '{name}' has no topic id") for p in targets}
            replicas = {p: list(r) for p, r in current.replicas.items()}
            adding = {p: list(b) for p, b in current.adding.items()}
            removing = {p: list(b) for p, b in current.removing.items()}
            results: dict[int, tuple[int, str | None]] = {}
            for partition, target in targets.items():
                if partition not in replicas:
                    results[partition] = (ErrorCode.unknown_topic_or_partition, f"{name}-{partition} does not exist")
                    continue
                original = [b for b in replicas[partition] if b not in adding.get(partition, [])]
                if target is None:
                    if partition not in adding and partition not in removing:
                        results[partition] = (ErrorCode.no_reassignment_in_progress, None)
                        continue
                    replicas[partition] = original
                    adding.pop(partition, None)
                    removing.pop(partition, None)
                    results[partition] = (ErrorCode.none, None)
                    continue
                if not target or len(set(target)) != len(target) or not set(target) <= live:
                    results[partition] = (ErrorCode.invalid_replica_assignment,
                                          f"replicas {list(target)} must be distinct live brokers (live: {sorted(live)})")
                    continue
                replicas[partition] = list(target) + [b for b in original if b not in target]
                adding[partition] = [b for b in target if b not in original]
                removing[partition] = [b for b in original if b not in target]
                if not adding[partition] and not removing[partition]:
                    replicas[partition] = list(target)  # a new order only: the preferred leader changes
                    adding.pop(partition)
                    removing.pop(partition)
                results[partition] = (ErrorCode.none, None)
            try:
                self._call(self.client.set, topic_path, TopicZNode.encode(current.topic_id, replicas, adding, removing),
                           version=stat.version)
            except BadVersionError:
                continue
            except NoNodeError:
                return {p: (ErrorCode.unknown_topic_or_partition, f"topic '{name}' does not exist") for p in targets}
            self._changed(name)
            return results
        return {p: (ErrorCode.unknown_server_error, f"topic '{name}': too many concurrent changes") for p in targets}

    def complete_reassignment(self, name: str, partition: int, target: list[int]) -> bool:
        """The controller's last step: the replica list becomes ``target``, nothing is in
        flight any more."""
        def complete(current: TopicAssignment) -> TopicAssignment | None:
            if partition not in current.replicas:
                return None
            return TopicAssignment(current.topic_id, {**current.replicas, partition: list(target)},
                                   {p: b for p, b in current.adding.items() if p != partition},
                                   {p: b for p, b in current.removing.items() if p != partition})

        return self._rewrite_assignment(name, complete)

    def _read_configs(self, name: str) -> dict[str, str]:
        try:
            data, _ = self._call(self.client.get, TopicConfigZNode.path(name))
        except NoNodeError:
            return {}
        return TopicConfigZNode.decode(name, data)

    def set_configs(self, name: str, update: Callable[[dict[str, str]], dict[str, str]]) -> TopicInfo:
        """Replace a topic's overrides with ``update(current)`` (which validates)."""
        topic_path, config_path = TopicZNode.path(name), TopicConfigZNode.path(name)
        for _ in range(MAX_RACES):
            try:
                topic_data, _ = self._call(self.client.get, topic_path)
            except NoNodeError:
                raise TopicRegistryError(ErrorCode.unknown_topic_or_partition, f"topic '{name}' does not exist") from None
            try:
                data, stat = self._call(self.client.get, config_path)
                version: int | None = stat.version
            except NoNodeError:
                data, version = None, None
            configs = dict(update(TopicConfigZNode.decode(name, data)))
            encoded = TopicConfigZNode.encode(configs)

            def build(tx: TransactionRequest) -> None:
                tx.check(topic_path, -1)  # the topic still exists: no stray config for a deleted topic
                if version is None:
                    tx.create(config_path, encoded)
                else:
                    tx.set_data(config_path, encoded, version=version)

            failed = failure(transact(self.client, self._retry, build))
            if failed is None:
                self._changed(name)
                assignment = TopicZNode.decode(name, topic_data)
                return TopicInfo(name, assignment.topic_id or uuid.UUID(int=0), len(assignment.replicas), configs)
            if failed[0] == 0:
                raise TopicRegistryError(ErrorCode.unknown_topic_or_partition, f"topic '{name}' does not exist")
            if not isinstance(failed[1], (NodeExistsError, BadVersionError, NoNodeError)):
                raise failed[1]
        raise TopicRegistryError(ErrorCode.unknown_server_error, f"topic '{name}': too many concurrent changes")

    def allocate_producer_ids(self, count: int) -> int:
        """Reserve ``count`` producer ids cluster-wide; returns the first. Ids are never
        reused (a block whose answer was lost is skipped, not handed out twice)."""
        if count <= 0:
            raise ValueError(f"count must be positive, not {count}")
        path = ProducerIdBlockZNode.PATH
        for _ in range(MAX_RACES):
            try:
                data, stat = self._call(self.client.get, path)
            except NoNodeError:
                try:
                    self._call(self.client.create, path, ProducerIdBlockZNode.encode(ProducerIdBlock(self.broker_id, 0, count - 1)))
                except NodeExistsError:
                    continue
                return 0
            first = ProducerIdBlockZNode.decode(data).block_end + 1
            block = ProducerIdBlock(self.broker_id, first, first + count - 1)
            try:
                self._call(self.client.set, path, ProducerIdBlockZNode.encode(block), version=stat.version)
            except BadVersionError:
                continue
            return first
        raise CoordinationUnavailable("producer id block: too many concurrent allocations")

    # ------------------------------------------------------------------ partition state
    def set_partition_state(self, topic: str, partition: int, leader: int, leader_epoch: int, isr: list[int],
                            controller_epoch: int | None = None) -> PartitionState:
        """Write /brokers/topics/<topic>/partitions/<p>/state; ``controller_epoch``
        defaults to the current coordinator epoch."""
        if controller_epoch is None:
            try:
                controller_epoch = CoordinatorEpochZNode.decode(self._call(self.client.get, CoordinatorEpochZNode.PATH)[0])
            except NoNodeError:
                controller_epoch = 0
        state = PartitionState(leader, leader_epoch, list(isr), controller_epoch)
        data = TopicPartitionStateZNode.encode(state)
        path = TopicPartitionStateZNode.path(topic, partition)
        try:
            stat = self._call(self.client.set, path, data)
            return PartitionState(leader, leader_epoch, list(isr), controller_epoch, stat.version)
        except NoNodeError:
            pass
        unknown = TopicRegistryError(ErrorCode.unknown_topic_or_partition, f"partition {topic}-{partition} does not exist")
        try:
            assignment = TopicZNode.decode(topic, self._call(self.client.get, TopicZNode.path(topic))[0])
        except NoNodeError:
            raise unknown from None
        if partition not in assignment.replicas:
            raise unknown
        # Parents one by one and never with makepath: if the topic is deleted meanwhile
        # the create fails (NoNode) instead of bringing back an empty topic node.
        for parent in (TopicPartitionStateZNode.partitions_path(topic), TopicPartitionStateZNode.partition_path(topic, partition)):
            try:
                self._call(self.client.create, parent)
            except NodeExistsError:
                pass
            except NoNodeError:
                raise unknown from None
        try:
            self._call(self.client.create, path, data)
            return PartitionState(leader, leader_epoch, list(isr), controller_epoch, 0)
        except NodeExistsError:
            stat = self._call(self.client.set, path, data)
            return PartitionState(leader, leader_epoch, list(isr), controller_epoch, stat.version)
        except NoNodeError:
            raise unknown from None

    def partition_state(self, topic: str, partition: int) -> PartitionState | None:
        """Read now from ZooKeeper (not the snapshot), with the znode's version."""
        try:
            data, stat = self._call(self.client.get, TopicPartitionStateZNode.path(topic, partition))
        except NoNodeError:
            return None
        return TopicPartitionStateZNode.decode(topic, partition, data, stat.version)

    def update_partition_state(self, topic: str, partition: int, state: PartitionState) -> PartitionState | None:
        """Write ``state`` if its znode is still at ``state.zk_version``: the written state
        with its new version, or None when another writer (the controller, or the leader
        changing its ISR) got there first: re-read and decide again."""
        try:
            stat = self._call(self.client.set, TopicPartitionStateZNode.path(topic, partition),
                              TopicPartitionStateZNode.encode(state), version=state.zk_version)
        except BadVersionError:
            return None
        except NoNodeError:
            raise TopicRegistryError(ErrorCode.unknown_topic_or_partition,
                                     f"partition {topic}-{partition} has no state") from None
        with self._flags_lock:
            self._dirty_states.add((topic, partition))
        return PartitionState(state.leader, state.leader_epoch, list(state.isr), state.controller_epoch, stat.version)


def _decode_info(name: str, topic_data: bytes, config_data: bytes | None) -> TopicInfo | None:
    entry = _decode_topic(name, topic_data, config_data)
    return None if entry is None else entry.info


def _decode_topic(name: str, topic_data: bytes, config_data: bytes | None) -> _Topic | None:
    """None (with a warning) for a znode we cannot use; the watch stays, so a fix is seen."""
    try:
        assignment = TopicZNode.decode(name, topic_data)
        configs = TopicConfigZNode.decode(name, config_data)
    except ValueError as exc:
        log.warning("ignoring topic %r: %s", name, exc)
        return None
    if assignment.topic_id is None:
        log.warning("ignoring topic %r: %s has no topic_id (written by Kafka < 2.8?)", name, TopicZNode.path(name))
        return None
    reassigning = {p: (assignment.adding.get(p, []), assignment.removing.get(p, []))
                   for p in set(assignment.adding) | set(assignment.removing)}
    return _Topic(TopicInfo(name, assignment.topic_id, len(assignment.replicas), configs), assignment.replicas, {},
                  reassigning)
