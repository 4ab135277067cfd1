"""The share partitions a worker leads (KIP-932): the share-partition leader's side of share groups.

A share group's consumers read a partition together; the partition's owner (the one writer of
its log, broker/partitions/placement.py) keeps, per group, which records are in flight and who
holds them (coordination/share/partition_state.py decides; this module runs it). Any worker
takes a ShareFetch or ShareAcknowledge (broker/apis/share_fetch.py) and sends each partition's
part here over the rings, as a Fetch's reads go to owners.

Life of a share partition here:
    1. first touched by a fetch: its state is read from the share coordinator (the
       SharePersister, broker/process/share_persister.py); a start offset of -1 (initialized
       by the group coordinator without one) is resolved by the group's
       ``share.auto.offset.reset`` (latest: the high watermark; earliest: the log start) and
       written back at once, so a restart does not resolve it again later;
    2. fetches acquire records below the high watermark for their member (records released
       before come first), under a lock of ``share.record.lock.duration.ms``;
    3. acknowledgements (ACCEPT / RELEASE / REJECT / GAP) change the state, and the change is
       written to the share coordinator before they are answered: an acknowledged record is
       never delivered again, whatever dies after the answer;
    4. a failed write (fenced by a newer state or leader epoch, or its outcome unknown)
       drops the partition here; the next fetch reads its state again, so an acknowledgement
       answered with an error is undone as Kafka's rollback undoes it.

Writes are coalesced per partition: one WriteShareGroupState in flight, and the changes made
meanwhile ride in the next one (every write carries the whole window, whose persisted form is
a handful of state batches). Acquisitions are not written, as in Kafka: after a restart the
records that were held are available again, with the delivery count last written.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Protocol

from broker.partitions.partition_ops import ShareAckItem, ShareFetchItem, ShareFetchResult
from broker.protocol.errors import ErrorCode, KafkaError
from coordination.group_config_keys import reset_duration_ms
from coordination.share.partition_state import SharePartitionState
from coordination.share.records import StateBatch
from storage.batch import HEADER_SIZE, parse_header
from storage.errors import StorageError
from storage.types import TopicPartition

if TYPE_CHECKING:
    from coordination.share.persisted import PersistedState
    from storage.log import PartitionLog

log = logging.getLogger(__name__)

E = ErrorCode
# A read of a share partition the share coordinator does not know (our leader epoch is never
# negative, so INVALID_REQUEST can only mean that): one the group coordinator has not
# initialized, fetched by a consumer that is not its assignee; it starts here.
NOT_INITIALIZED = frozenset({int(E.invalid_request)})
UNINITIALIZED_START_OFFSET = -1


class StatePersister(Protocol):
    """The share coordinator, as a share-partition leader reaches it (SharePersister)."""

    async def initialize(self, group_id: str, topic_id: uuid.UUID, partition: int, state_epoch: int,
                         start_offset: int) -> int: ...

    async def read(self, group_id: str, topic_id: uuid.UUID, partition: int, leader_epoch: int) -> PersistedState: ...

    async def write(self, group_id: str, topic_id: uuid.UUID, partition: int, state_epoch: int, leader_epoch: int,
                    start_offset: int, delivery_complete_count: int, batches: tuple[StateBatch, ...]) -> int: ...


class LogHolder(Protocol):
    """What of the partition's owner this needs (broker/partitions/owner.py's Owner)."""

    def log_for(self, tp: TopicPartition) -> PartitionLog | None: ...

    def leader_epoch(self, tp: TopicPartition) -> int: ...


@dataclass(frozen=True, slots=True)
class ShareSettings:
    """A group's share partition settings (its group configs, else the broker's defaults)."""

    auto_offset_reset: str = "latest"
    record_lock_duration_ms: int = 30_000
    delivery_count_limit: int = 5
    max_record_locks: int = 2_000


SettingsOf = Callable[[str], ShareSettings]  # group id -> its settings


@dataclass(slots=True)
class SharePartition:
    """One share partition of one group, as its leader runs it."""

    key: tuple[str, TopicPartition]
    topic_id: uuid.UUID
    state: SharePartitionState
    state_epoch: int
    changes: int = 0  # bumped by every change to the persisted view
    persisted: int = 0  # the changes the share coordinator has
    writing: asyncio.Future[int] | None = field(default=None)


class SharePartitions:
    """Every share partition this worker leads, by (group id, topic partition)."""

    def __init__(self, owner: LogHolder, persister: StatePersister, settings_of: SettingsOf,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.owner = owner
        self.persister = persister
        self.settings_of = settings_of
        self.clock = clock
        self.partitions: dict[tuple[str, TopicPartition], SharePartition] = {}
        self._loading: dict[tuple[str, TopicPartition], asyncio.Future[SharePartition]] = {}

    def now_ms(self) -> int:
        return int(self.clock() * 1000)

    # -- the ops -----------------------------------------------------------------------

    async def fetch(self, items: list[ShareFetchItem]) -> list[ShareFetchResult]:
        return list(await asyncio.gather(*(self._fetch_one(item) for item in items)))

    async def acknowledge(self, items: list[ShareAckItem]) -> list[int]:
        return list(await asyncio.gather(*(self._acknowledge_one(item) for item in items)))

    async def _fetch_one(self, item: ShareFetchItem) -> ShareFetchResult:
        try:
            if item.fresh:
                await self._check_current(item.group_id, item.tp)
            part = await self._partition(item.group_id, item.tp, item.topic_id)
        except KafkaError as exc:
            return ShareFetchResult(int(exc.code), int(exc.code))
        ack_code = 0
        if item.acks:
            ack_code = part.state.acknowledge(item.member_id, item.acks, self.now_ms())
            if not ack_code:
                ack_code = await self._persist(part)
        if not item.fetch:
            return ShareFetchResult(0, ack_code)
        return self._acquire(part, item, ack_code)

    async def _acknowledge_one(self, item: ShareAckItem) -> int:
        key = (item.group_id, item.tp)
        if item.release:
            part = self.partitions.get(key)
            if part is None:
                return 0
            self._configure(part)
            if not part.state.release_member(item.member_id):
                return 0
            return await self._persist(part)
        try:
            part = await self._partition(item.group_id, item.tp, item.topic_id)
        except KafkaError as exc:
            return int(exc.code)
        code = part.state.acknowledge(item.member_id, item.acks, self.now_ms())
        return code or await self._persist(part)

    # -- acquiring -----------------------------------------------------------------------

    def _acquire(self, part: SharePartition, item: ShareFetchItem, ack_code: int) -> ShareFetchResult:
        tp = item.tp
        partition_log = self.owner.log_for(tp)
        leader_epoch = self.owner.leader_epoch(tp)
        if partition_log is None or leader_epoch < 0:
            return ShareFetchResult(int(E.not_leader_or_follower), ack_code)
        state = part.state
        now = self.now_ms()
        state.expire_locks(now)
        if not state.can_acquire() or item.max_records <= 0:
            return ShareFetchResult(0, ack_code, leader_epoch)
        offset = max(state.next_fetch_offset(), partition_log.log_start_offset)
        if offset >= partition_log.high_watermark:
            return ShareFetchResult(0, ack_code, leader_epoch)
        try:
            info = partition_log.read(offset, max(item.max_bytes, HEADER_SIZE), min_one_batch=True, committed=True)
        except StorageError as exc:
            return ShareFetchResult(exc.kafka_error_code, ack_code, leader_epoch)
        file_range = info.file_range
        if file_range is None:
            return ShareFetchResult(0, ack_code, leader_epoch)
        spans = _batch_spans(file_range.fd, int(file_range.position), file_range.length)
        if not spans:
            return ShareFetchResult(0, ack_code, leader_epoch)
        acquired = state.acquire(item.member_id, [(first, last) for first, last, _p, _s in spans], item.max_records, now)
        if not acquired:
            return ShareFetchResult(0, ack_code, leader_epoch)
        low, high = acquired[0].first_offset, acquired[-1].last_offset
        sent = [span for span in spans if span[1] >= low and span[0] <= high]
        position = sent[0][2]
        length = sent[-1][2] + sent[-1][3] - position
        inode = file_range.inode or os.fstat(file_range.fd).st_ino
        return ShareFetchResult(0, ack_code, leader_epoch, file_range.path, inode, position, length,
                                tuple((a.first_offset, a.last_offset, a.delivery_count) for a in acquired))

    # -- loading -------------------------------------------------------------------------

    async def _check_current(self, group_id: str, tp: TopicPartition) -> None:
        """A share session starts fetching here: make sure the state held is still the share
        coordinator's. An admin may have reset the group's offsets or deleted its state while
        the group was empty (a new state epoch, or none), which no write of ours learns until
        an acknowledgement; the session's first fetch reads the state once and drops a stale
        copy, so the next load starts from what the admin left."""
        part = self.partitions.get((group_id, tp))
        if part is None:
            return
        persisted = await self.persister.read(group_id, part.topic_id, tp.partition, self.owner.leader_epoch(tp))
        deleted = persisted.error_code in NOT_INITIALIZED
        moved = not persisted.error_code and persisted.state_epoch != part.state_epoch
        if self.partitions.get((group_id, tp)) is part and (deleted or moved):
            log.info("share partition %s %s: state epoch %d is not the share coordinator's (%s): reloading",
                     group_id, tp, part.state_epoch, persisted.error_code or persisted.state_epoch)
            del self.partitions[(group_id, tp)]

    async def _partition(self, group_id: str, tp: TopicPartition, topic_id_text: str) -> SharePartition:
        """The share partition, loaded if need be, with the group's settings as they are now.

        Settings are applied on every use, not fixed at the load: the worker that serves an
        IncrementalAlterConfigs of the group sees the change at once, the others at their next
        reload of the group configs. A partition loaded on such a worker in between kept the
        broker's default delivery count limit for good, and records went out a 4th and 5th time
        past the group's limit of 3 (test_share_group_faults, suite70, 2026-11-29)."""
        key = (group_id, tp)
        part = self.partitions.get(key)
        if part is None:
            loading = self._loading.get(key)
            if loading is None:
                loading = self._loading[key] = asyncio.ensure_future(self._load(group_id, tp, uuid.UUID(topic_id_text)))
                loading.add_done_callback(lambda _f: self._loading.pop(key, None))
            part = await asyncio.shield(loading)
        self._configure(part)
        return part

    def _configure(self, part: SharePartition) -> None:
        settings = self.settings_of(part.key[0])
        part.state.configure(settings.delivery_count_limit, settings.max_record_locks, settings.record_lock_duration_ms)

    async def _load(self, group_id: str, tp: TopicPartition, topic_id: uuid.UUID) -> SharePartition:
        leader_epoch = self.owner.leader_epoch(tp)
        partition_log = self.owner.log_for(tp)
        if partition_log is None or leader_epoch < 0:
            raise KafkaError(E.not_leader_or_follower, f"{tp} is not led here")
        persisted = await self.persister.read(group_id, topic_id, tp.partition, leader_epoch)
        state_epoch, start, batches = persisted.state_epoch, persisted.start_offset, persisted.batches
        if persisted.error_code in NOT_INITIALIZED:
            state_epoch, start, batches = 0, UNINITIALIZED_START_OFFSET, ()
            code = await self.persister.initialize(group_id, topic_id, tp.partition, state_epoch, start)
            if code:
                raise KafkaError(ErrorCode(code), f"initializing the share state of {group_id} {tp}")
        elif persisted.error_code:
            raise KafkaError(ErrorCode(persisted.error_code), f"reading the share state of {group_id} {tp}")
        settings = self.settings_of(group_id)
        resolved = start < 0
        if resolved:
            start = _reset_offset(partition_log, settings.auto_offset_reset)
        state = SharePartitionState.from_state(max(start, 0), batches, settings.delivery_count_limit,
                                               settings.max_record_locks, settings.record_lock_duration_ms)
        part = SharePartition((group_id, tp), topic_id, state, max(state_epoch, 0))
        existing = self.partitions.setdefault((group_id, tp), part)
        if resolved and existing is part:
            code = await self._persist(part)
            if code:
                self.partitions.pop((group_id, tp), None)
                raise KafkaError(ErrorCode(code), f"writing the start offset of {group_id} {tp}")
        return existing

    # -- persisting ----------------------------------------------------------------------

    async def _persist(self, part: SharePartition) -> int:
        """Have the share coordinator hold the state as it is now: 0 once a write begun after
        this call succeeded, else its error code."""
        part.changes += 1
        wanted = part.changes
        while part.persisted < wanted:
            if part.writing is None:
                part.writing = asyncio.ensure_future(self._write(part))
            code = await asyncio.shield(part.writing)
            if code:
                return code
        return 0

    async def _write(self, part: SharePartition) -> int:
        changes = part.changes
        state = part.state
        group_id, tp = part.key
        try:
            code = await self.persister.write(group_id, part.topic_id, tp.partition, part.state_epoch,
                                              self.owner.leader_epoch(tp), state.start_offset,
                                              state.delivery_complete_count(), state.state_batches())
        except KafkaError as exc:
            code = int(exc.code)
        except Exception:
            log.exception("share state write for %s %s failed", group_id, tp)
            code = int(E.unknown_server_error)
        finally:
            part.writing = None
        if code == 0:
            part.persisted = max(part.persisted, changes)
        elif self.partitions.get(part.key) is part:
            # Fenced, or the write's outcome unknown: what is held here may differ from what
            # the share coordinator has, so the next fetch reads its state again. Answered
            # acknowledgements were all written; the ones answered with this error come back
            # as they were written (Kafka rolls back its in-memory state the same way).
            log.info("share partition %s %s dropped after a failed state write (error %d)", group_id, tp, code)
            del self.partitions[part.key]
        return code

    def drop_topic(self, topic: str) -> None:
        """A deleted topic's share partitions go with it."""
        for key in [k for k in self.partitions if k[1].topic == topic]:
            del self.partitions[key]


def _reset_offset(partition_log: PartitionLog, reset: str) -> int:
    """Where a share partition without a start offset starts (share.auto.offset.reset):
    earliest the log start, latest the high watermark, by_duration the first record written
    that long ago or later (the high watermark if none is)."""
    if reset == "earliest":
        return partition_log.log_start_offset
    duration = reset_duration_ms(reset)
    if duration is not None:
        found = partition_log.offset_for_timestamp(int(time.time() * 1000) - duration)
        if found is not None:
            return min(found[0], partition_log.high_watermark)
    return partition_log.high_watermark


def _batch_spans(fd: int, position: int, length: int) -> list[tuple[int, int, int, int]]:
    """(first offset, last offset, file position, size) of each whole batch in the range,
    from their headers (one pread each: a read of a share fetch is usually a few batches)."""
    spans = []
    end = position + length
    while position + HEADER_SIZE <= end:
        header = parse_header(os.pread(fd, HEADER_SIZE, position))
        if header.size <= HEADER_SIZE or position + header.size > end:
            break
        spans.append((header.base_offset, header.base_offset + header.last_offset_delta, position, header.size))
        position += header.size
    return spans
