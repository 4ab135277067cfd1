"""The share coordinator (KIP-932): the durable state of every share-partition of every share
group, kept in __share_group_state, as Kafka's ShareCoordinatorShard keeps it.

A share-partition (a group's view of one topic partition) is the key
"groupId:topicId:partition"; its records go to partition abs(hashCode(key)) % n of
__share_group_state, the key's topic id written as Kafka prints a Uuid (base64, URL-safe,
unpadded), hashed as Java hashes a String. Its state is a ShareSnapshot record followed by
ShareUpdate records, a new snapshot after ``updates_per_snapshot`` updates
(share.coordinator.snapshot.update.records.per.snapshot); a tombstone of the snapshot key
deletes it.

Every operation decides from the state in memory, appends its one record through the
injected log, and folds the record into the state only once the append succeeded, with the
same function that replays the topic at election (``load``): what is served is always
what the topic says. Operations on one share-partition run one at a time.

Kafka's checks and answers (ShareCoordinatorShard as of Kafka 4.3, in its order):
  * every operation: a null topic id or a negative partition is INVALID_REQUEST; a topic id
    or partition the cluster does not have is UNKNOWN_TOPIC_OR_PARTITION;
  * initialize: a state epoch (other than -1) older than the highest recorded is
    FENCED_STATE_EPOCH; else a new snapshot: next snapshot epoch, the request's state epoch
    and start offset, no leader epoch yet, no batches, delivery complete count 0 (-1 without
    a start offset: nothing to count from yet);
  * read and write of a share-partition never initialized: INVALID_REQUEST; a leader epoch
    (other than -1) older than the highest recorded: FENCED_LEADER_EPOCH; a write's state
    epoch (other than -1) older than the highest recorded: FENCED_STATE_EPOCH;
  * a read with a new leader epoch records it (a record with the stored state and that
    epoch) before it answers: from then on the earlier leader's writes are fenced. A write
    keeps the recorded leader epoch;
  * a write merges its batches into the state (coordination/share/state_batches.py) and
    sets the start offset (unless -1) and delivery complete count it carries;
  * summary: the state without batches, no leader epoch check; of a share-partition never
    initialized: no error, start offset -1;
  * delete of one never initialized: no error, nothing written; the share-partitions of a
    deleted topic are tombstoned by the coordinator itself (``forget_topics``).
Castle checks one thing more than Kafka, whose combiner takes batches as given: batches
no leader can mean (an empty or negative range, a delivery state that is not persisted, a
negative delivery count) are INVALID_REQUEST, and nothing is written.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import time
import uuid
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Protocol

from kio.schema.errors import ErrorCode

from coordination.groups.offsets_schema import OffsetsSchemaError
from coordination.java_hash import java_abs, java_string_hash
from coordination.share.persisted import DEFAULT_STATE_EPOCH, NO_LEADER_EPOCH, UNINITIALIZED_START_OFFSET, PersistedState
from coordination.share.records import (
    NO_DELIVERY_COMPLETE_COUNT,
    ShareSnapshotKey,
    ShareSnapshotValue,
    ShareStateKey,
    ShareStateValue,
    ShareUpdateKey,
    ShareUpdateValue,
    StateBatch,
    decode_state_record,
    encode_key,
    encode_value,
)
from coordination.share.state_batches import combine, valid_batch
from storage.records import Record, encode_batch, iter_batches

log = logging.getLogger(__name__)

E = ErrorCode
STATE_TOPIC = "__share_group_state"
UPDATES_PER_SNAPSHOT = 500  # share.coordinator.snapshot.update.records.per.snapshot's default

Key = tuple[str, uuid.UUID, int]  # (group id, topic id, partition)


class ShareStateLog(Protocol):
    """The __share_group_state partitions, as the coordinator writes them."""

    partitions: int

    async def append(self, partition: int, batch: bytes) -> int:
        """Append one record batch to ``partition`` (acks=all); the Kafka error code."""
        ...


def kafka_uuid_string(value: uuid.UUID) -> str:
    """A Uuid as Kafka's Uuid.toString prints it: URL-safe base64 of its 16 bytes, unpadded."""
    return base64.urlsafe_b64encode(value.bytes).decode("ascii").rstrip("=")


def coordinator_key(group_id: str, topic_id: uuid.UUID, partition: int) -> str:
    """SharePartitionKey.asCoordinatorKey: what FindCoordinator's SHARE keys are."""
    return f"{group_id}:{kafka_uuid_string(topic_id)}:{partition}"


def partition_for(group_id: str, topic_id: uuid.UUID, partition: int, partitions: int) -> int:
    """The __share_group_state partition of a share-partition: Utils.abs(key.hashCode()) % n
    (Utils.abs maps Integer.MIN_VALUE to 0)."""
    return java_abs(java_string_hash(coordinator_key(group_id, topic_id, partition))) % partitions


def entries_of(data: bytes, from_offset: int) -> tuple[list[tuple[Any, Any]], int]:
    """(key, value or None for a tombstone) of the __share_group_state records of the whole
    batches in ``data`` at or after ``from_offset``, in log order, and the offset after the
    last whole batch. Record types Kafka does not write there are skipped, as its loader
    skips them; an unreadable record is skipped with a warning."""
    entries: list[tuple[Any, Any]] = []
    next_offset = from_offset
    for header, records in iter_batches(data):
        next_offset = max(next_offset, header.next_offset)
        if header.is_control:
            continue
        for record in records:
            if record.offset < from_offset or record.key is None:
                continue
            try:
                decoded = decode_state_record(record.key, record.value)
            except OffsetsSchemaError as exc:
                log.warning("skipping an unreadable %s record at offset %d: %s", STATE_TOPIC, record.offset, exc)
                continue
            if decoded is not None:
                entries.append(decoded)
    return entries, next_offset


def _append_error(code: int) -> int:
    """A failed write of the state topic as the caller sees it (Kafka's coordinator runtime)."""
    if code in (E.unknown_topic_or_partition, E.not_enough_replicas, E.not_enough_replicas_after_append,
                E.request_timed_out):
        return int(E.coordinator_not_available)
    if code in (E.not_leader_or_follower, E.kafka_storage_error):
        return int(E.not_coordinator)
    if code in (E.message_too_large, E.record_list_too_large, E.invalid_fetch_size):
        return int(E.unknown_server_error)
    return code


@dataclass(slots=True)
class _State:
    """One share-partition's state, as its records fold: the last snapshot with the updates
    since, and the highest leader and state epochs any record carried (Kafka's fencing maps:
    a new snapshot's epochs may be lower, the fence never is)."""

    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    delivery_complete_count: int
    batches: tuple[StateBatch, ...]
    fence_leader_epoch: int
    fence_state_epoch: int
    updates: int = 0  # ShareUpdate records since the last snapshot that reset the count

    def persisted(self, batches: bool = True) -> PersistedState:
        return PersistedState(0, self.state_epoch, self.leader_epoch, self.start_offset, self.delivery_complete_count,
                              self.batches if batches else ())


def _wall_ms() -> int:
    return int(time.time() * 1000)


class ShareStateCoordinator:
    """Every share-partition's state (all __share_group_state partitions)."""

    def __init__(self, state_log: ShareStateLog, topic_known: Callable[[uuid.UUID, int], bool],
                 updates_per_snapshot: int = UPDATES_PER_SNAPSHOT, clock: Callable[[], int] = _wall_ms) -> None:
        self.log = state_log
        self.topic_known = topic_known  # does the cluster have this topic id and partition?
        self.updates_per_snapshot = updates_per_snapshot
        self.clock = clock
        self.states: dict[Key, _State] = {}
        self.active = False
        self.loading = False
        self._locks: dict[Key, asyncio.Lock] = {}
        self._generation = 0  # bumped at every resignation: a write in flight then is not folded

    # ------------------------------------------------------------------ life
    def partition_for(self, group_id: str, topic_id: uuid.UUID, partition: int) -> int:
        return partition_for(group_id, topic_id, partition, self.log.partitions)

    def load(self, entries: Iterable[tuple[ShareStateKey, ShareStateValue | None]]) -> None:
        """Replay the topic's records (every partition, each in log order): the state as it was."""
        self.states.clear()
        for key, value in entries:
            self.fold(key, value)

    def deactivate(self) -> None:
        """Resigned: the state goes (the next coordinator loads it from the topic)."""
        self._generation += 1
        self.active = False
        self.loading = False
        self.states.clear()
        self._locks.clear()

    def fold(self, key: ShareStateKey, value: ShareStateValue | None) -> None:
        """Apply one record to the state: the append path and the replay both come here."""
        state_key = (key.group_id, key.topic_id, key.partition)
        known = self.states.get(state_key)
        if value is None:
            self.states.pop(state_key, None)
        elif isinstance(value, ShareSnapshotValue):
            updates = 0 if known is None or known.updates >= self.updates_per_snapshot else known.updates
            self.states[state_key] = _State(
                value.snapshot_epoch, value.state_epoch, value.leader_epoch, value.start_offset,
                value.delivery_complete_count, value.state_batches,
                value.leader_epoch if known is None else max(known.fence_leader_epoch, value.leader_epoch),
                value.state_epoch if known is None else max(known.fence_state_epoch, value.state_epoch), updates)
        elif known is None:  # an update without its snapshot: the update is the state
            self.states[state_key] = _State(value.snapshot_epoch, DEFAULT_STATE_EPOCH, value.leader_epoch,
                                            value.start_offset, value.delivery_complete_count, value.state_batches,
                                            value.leader_epoch, DEFAULT_STATE_EPOCH, 1)
        else:
            if value.start_offset != UNINITIALIZED_START_OFFSET:
                known.start_offset = value.start_offset
            if value.leader_epoch != NO_LEADER_EPOCH:
                known.leader_epoch = value.leader_epoch
            known.fence_leader_epoch = max(known.fence_leader_epoch, value.leader_epoch)
            known.delivery_complete_count = value.delivery_complete_count
            known.batches = combine(known.batches, value.state_batches, known.start_offset)
            known.updates += 1

    # ------------------------------------------------------------------ the operations
    async def initialize(self, group_id: str, topic_id: uuid.UUID, partition: int, state_epoch: int,
                         start_offset: int) -> int:
        refused = self._serving() or _key_error(topic_id, partition)
        if refused:
            return refused
        key = (group_id, topic_id, partition)
        async with self._lock(key):
            known = self.states.get(key)
            if state_epoch != -1 and known is not None and known.fence_state_epoch > state_epoch:
                return int(E.fenced_state_epoch)
            if not self.topic_known(topic_id, partition):
                return int(E.unknown_topic_or_partition)
            now = self.clock()
            count = NO_DELIVERY_COMPLETE_COUNT if start_offset == UNINITIALIZED_START_OFFSET else 0
            snapshot = ShareSnapshotValue(0 if known is None else known.snapshot_epoch + 1, state_epoch,
                                          NO_LEADER_EPOCH, start_offset, now, now, (), count)
            return await self._append(ShareSnapshotKey(*key), snapshot)

    async def read(self, group_id: str, topic_id: uuid.UUID, partition: int, leader_epoch: int) -> PersistedState:
        refused = self._serving() or _key_error(topic_id, partition)
        if refused:
            return PersistedState(refused)
        key = (group_id, topic_id, partition)
        async with self._lock(key):
            known = self.states.get(key)
            if known is None:
                return PersistedState(int(E.invalid_request))
            if leader_epoch != NO_LEADER_EPOCH and known.fence_leader_epoch > leader_epoch:
                return PersistedState(int(E.fenced_leader_epoch))
            if not self.topic_known(topic_id, partition):
                return PersistedState(int(E.unknown_topic_or_partition))
            if leader_epoch == NO_LEADER_EPOCH or known.fence_leader_epoch == leader_epoch:
                return known.persisted()
            # A new share-partition leader: its epoch is recorded before it is told the
            # state, so the writes of the one before are fenced from now on.
            code = await self._append(*self._write_record(key, known, leader_epoch, known.start_offset,
                                                          known.delivery_complete_count, ()))
            if code:
                return PersistedState(code)
            return self.states[key].persisted()  # the fold may have replaced ``known`` (a snapshot)

    async def write(self, group_id: str, topic_id: uuid.UUID, partition: int, state_epoch: int, leader_epoch: int,
                    start_offset: int, delivery_complete_count: int, batches: tuple[StateBatch, ...]) -> int:
        refused = self._serving() or _key_error(topic_id, partition)
        if refused:
            return refused
        key = (group_id, topic_id, partition)
        async with self._lock(key):
            known = self.states.get(key)
            if known is None:
                return int(E.invalid_request)
            if leader_epoch != NO_LEADER_EPOCH and known.fence_leader_epoch > leader_epoch:
                return int(E.fenced_leader_epoch)
            if state_epoch != -1 and known.fence_state_epoch > state_epoch:
                return int(E.fenced_state_epoch)
            if not self.topic_known(topic_id, partition):
                return int(E.unknown_topic_or_partition)
            if not all(valid_batch(batch) for batch in batches):
                return int(E.invalid_request)
            return await self._append(*self._write_record(key, known, known.leader_epoch, start_offset,
                                                          delivery_complete_count, batches))

    async def delete(self, group_id: str, topic_id: uuid.UUID, partition: int) -> int:
        refused = self._serving() or _key_error(topic_id, partition)
        if refused:
            return refused
        if not self.topic_known(topic_id, partition):
            return int(E.unknown_topic_or_partition)
        key = (group_id, topic_id, partition)
        async with self._lock(key):
            if key not in self.states:
                return 0
            return await self._append(ShareSnapshotKey(*key), None)

    async def summary(self, group_id: str, topic_id: uuid.UUID, partition: int, leader_epoch: int) -> PersistedState:
        """``leader_epoch`` is not checked (Kafka's summary fences nothing)."""
        refused = self._serving() or _key_error(topic_id, partition)
        if refused:
            return PersistedState(refused)
        if not self.topic_known(topic_id, partition):
            return PersistedState(int(E.unknown_topic_or_partition))
        known = self.states.get((group_id, topic_id, partition))
        return PersistedState(0) if known is None else known.persisted(batches=False)

    def topic_ids(self) -> set[uuid.UUID]:
        """The topics some share-partition state is of."""
        return {topic_id for _group, topic_id, _partition in self.states}

    async def forget_topics(self, deleted: set[uuid.UUID]) -> int:
        """Tombstone every share-partition of the topics deleted (Kafka's coordinator does
        so when its metadata says a topic is gone: DeleteShareGroupState cannot, it refuses
        a topic the cluster does not have). The number of share-partitions forgotten."""
        if not self.active or self.loading:
            return 0
        forgotten = 0
        for key in [key for key in self.states if key[1] in deleted]:
            async with self._lock(key):
                if key in self.states and not await self._append(ShareSnapshotKey(*key), None):
                    forgotten += 1
        return forgotten

    # ------------------------------------------------------------------ inside
    def _serving(self) -> int:
        if self.loading:
            return int(E.coordinator_load_in_progress)
        return 0 if self.active else int(E.not_coordinator)

    def _lock(self, key: Key) -> asyncio.Lock:
        lock = self._locks.get(key)
        if lock is None:
            lock = self._locks[key] = asyncio.Lock()
        return lock

    def _write_record(self, key: Key, known: _State, leader_epoch: int, start_offset: int, delivery_complete_count: int,
                      batches: tuple[StateBatch, ...]) -> tuple[ShareStateKey, ShareStateValue]:
        """The record of a write (or of a read's new leader epoch): a ShareUpdate with the
        written batches, or once enough updates followed the snapshot, a new snapshot with
        everything merged."""
        if known.updates >= self.updates_per_snapshot:
            start = known.start_offset if start_offset == UNINITIALIZED_START_OFFSET else start_offset
            now = self.clock()
            return ShareSnapshotKey(*key), ShareSnapshotValue(
                known.snapshot_epoch + 1, known.state_epoch, leader_epoch, start, now, now,
                combine(known.batches, batches, start), delivery_complete_count)
        return ShareUpdateKey(*key), ShareUpdateValue(known.snapshot_epoch, leader_epoch, start_offset,
                                                      combine((), batches, start_offset), delivery_complete_count)

    async def _append(self, key: ShareStateKey, value: ShareStateValue | None) -> int:
        """Write one record to the key's partition; folded in once written."""
        generation = self._generation
        batch = encode_batch([Record(0, self.clock(), encode_key(key), None if value is None else encode_value(value))])
        try:
            code = await self.log.append(self.partition_for(key.group_id, key.topic_id, key.partition), batch)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.warning("share coordinator: writing %s failed: %s", key, exc)
            code = int(getattr(exc, "code", E.coordinator_not_available))
        if generation != self._generation:
            return int(E.not_coordinator)  # resigned meanwhile: the next coordinator reads the topic
        if code:
            return _append_error(int(code))
        self.fold(key, value)
        return 0


def _key_error(topic_id: uuid.UUID | None, partition: int) -> int:
    return int(E.invalid_request) if topic_id is None or partition < 0 else 0
