"""A worker's partition side without the worker: a real LogManager and a real topic registry
(the local backend's file) in temporary directories, an Owner over them, and the roles the
cluster would give it (PartitionViews the test sets). Shared by test_owner, test_replication
and test_forwarding.

The ISR writes a leader makes go to ``IsrStore``: the conditional write (on the state's
version) that ZooKeeper's state znode does, kept in a dict. The Replication takes that
write as a callable (its IsrWriter seam); the local backend has no ISR to write."""

from __future__ import annotations

import asyncio
import os

from broker.partitions.owner import Owner
from broker.partitions.replication import Replication
from coordination.local_topics import LocalTopicRegistry
from coordination.snapshot import PartitionView
from coordination.znodes import PartitionState
from storage.config import LogConfig
from storage.log import AppendInfo
from storage.manager import LogManager, ManagerConfig
from storage.records import Record, encode_batch, iter_batches
from storage.types import TopicPartition

NODE = 1


def batch(count: int = 1, value: bytes = b"v", timestamp: int = 1_000, producer_id: int = -1,
          base_sequence: int = -1, producer_epoch: int = 0, compression: int = 0) -> bytes:
    """A producer's batch of ``count`` records (values ``value`` + index), as clients send it."""
    records = [Record(i, timestamp + i, b"k", value + str(i).encode()) for i in range(count)]
    return encode_batch(records, compression=compression, producer_id=producer_id,
                        producer_epoch=producer_epoch if producer_id >= 0 else -1, base_sequence=base_sequence)


def values_at(path: str, position: int, length: int) -> list[tuple[int, bytes | None]]:
    """(offset, value) of the records in a file range, read from the file as a Fetch sends it."""
    with open(path, "rb") as handle:
        handle.seek(position)
        raw = handle.read(length)
    assert len(raw) == length, f"{path} holds {len(raw)} of the {length} bytes at {position}"
    return [(r.offset, r.value) for _header, records in iter_batches(raw) for r in records]


class IsrStore:
    """Partition states, written only if the caller read the current version (as the
    state znode is); each write bumps the version. ``refuse_next``: the controller got
    there first, once."""

    def __init__(self) -> None:
        self.states: dict[TopicPartition, PartitionState] = {}
        self.writes: list[tuple[TopicPartition, list[int]]] = []
        self.refuse_next = False
        self.hold = False  # leave writes pending until ``release``
        self._held: list[tuple[asyncio.Future[PartitionState | None], TopicPartition, PartitionState]] = []

    def write(self, tp: TopicPartition, state: PartitionState) -> "asyncio.Future[PartitionState | None]":
        future: asyncio.Future[PartitionState | None] = asyncio.get_running_loop().create_future()
        if self.hold:
            self._held.append((future, tp, state))
        else:
            future.set_result(self._apply(tp, state))
        return future

    def release(self) -> None:
        held, self._held = self._held, []
        for future, tp, state in held:
            future.set_result(self._apply(tp, state))

    def _apply(self, tp: TopicPartition, state: PartitionState) -> PartitionState | None:
        current = self.states.get(tp)
        if self.refuse_next or current is None or current.zk_version != state.zk_version:
            self.refuse_next = False
            return None
        written = PartitionState(state.leader, state.leader_epoch, list(state.isr), state.controller_epoch,
                                 current.zk_version + 1)
        self.states[tp] = written
        self.writes.append((tp, list(state.isr)))
        return written


class World:
    """One worker (index 0) of broker ``NODE`` over real logs; ``views`` are the roles."""

    def __init__(self, base: str, *, owned: set[TopicPartition] | None = None, fence_epoch: int = 0,
                 lag_time_ms: int = 30_000, log_config: LogConfig | None = None, index: int = 0) -> None:
        self.registry = LocalTopicRegistry(_dir(base, "registry"))
        self.logs = LogManager(ManagerConfig(log_dirs=(_dir(base, "logs"),), node_id=NODE),
                               log_config or LogConfig()).open()
        self.views: dict[TopicPartition, PartitionView] = {}
        self.owned = owned  # None: every partition
        self.fence = fence_epoch
        self.lag_time_ms = lag_time_ms
        self.isr = IsrStore()
        self.appends: list[tuple[TopicPartition, AppendInfo]] = []
        self.hw_moves: list[TopicPartition] = []
        self.owner = Owner(index, self.logs, self.registry, self.owns, self._appended, lambda: self.fence,
                           self._replication, lambda: list(self.views.items()))

    def owns(self, tp: TopicPartition) -> bool:
        return self.owned is None or tp in self.owned

    def _appended(self, tp: TopicPartition, info: AppendInfo) -> None:
        self.appends.append((tp, info))

    def _replication(self, owner: Owner) -> Replication:
        return Replication(NODE, owner.log_for, self.isr.write, self.hw_moves.append, lambda: self.lag_time_ms)

    @property
    def replication(self) -> Replication:
        return self.owner.replication

    def topic(self, name: str, partitions: int = 1, configs: dict[str, str] | None = None,
              replicas: list[int] | None = None, isr: list[int] | None = None, leader: int = NODE,
              epoch: int = 0) -> list[TopicPartition]:
        """Create a topic in the registry with these roles for each partition, and sync."""
        self.registry.create(name, partitions, configs or {})
        tps = [TopicPartition(name, p) for p in range(partitions)]
        for tp in tps:
            self.set_view(tp, replicas or [NODE], leader, epoch, isr)
        self.owner.sync_registry()
        return tps

    def set_view(self, tp: TopicPartition, replicas: list[int], leader: int, epoch: int,
                 isr: list[int] | None = None, version: int | None = None) -> None:
        """The cluster's record of ``tp`` (its state as the store holds it, unless given)."""
        isr = list(replicas) if isr is None else isr
        stored = self.isr.states.get(tp)
        if version is None:
            version = 0 if stored is None else stored.zk_version + 1
        self.isr.states[tp] = PartitionState(leader, epoch, list(isr), 0, version)
        self.views[tp] = PartitionView(list(replicas), leader, epoch, list(isr), version)

    def apply_written_state(self, tp: TopicPartition) -> None:
        """The watch fires with what the store now holds (our own ISR write read back)."""
        state = self.isr.states[tp]
        view = self.views[tp]
        self.views[tp] = PartitionView(view.replicas, state.leader, state.leader_epoch, list(state.isr),
                                       state.zk_version)
        self.replication.apply(self.views.items())

    def close(self) -> None:
        self.replication.close()
        self.logs.close()


def _dir(base: str, name: str) -> str:
    path = os.path.join(base, name)
    os.makedirs(path, exist_ok=True)
    return path
