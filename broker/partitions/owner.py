"""What a worker does for the partitions it owns (it is their only writer, P6).

Owner implements PartitionOps (broker/partitions/partition_ops.py) and answers at once: the worker's
own connections call it directly, and the other processes of the broker through the rings
(broker/links/remote_ops.py). It is built from narrow collaborators (the log manager, a view of
the topic registry, and callbacks) and knows nothing of the worker around it. Expected
failures are error codes in the results, never exceptions (P3).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
from typing import TYPE_CHECKING, Any, Callable, Iterable, Protocol

from broker.partitions.partition_ops import (
    LATEST_STABLE,
    LOG_END,
    NO_FENCE,
    VERIFICATION_NEEDED,
    AppendItem,
    AppendResult,
    CommitItem,
    DeleteItem,
    EpochEndResult,
    EpochItem,
    LogDirReplica,
    LogDirsReport,
    MarkerItem,
    MoveItem,
    OffsetItem,
    OffsetResult,
    PartitionState,
    ProducerInfo,
    ProducersResult,
    ReadItem,
    ReadResult,
    ShareAckItem,
    ShareFetchItem,
    ShareFetchResult,
)
from broker.partitions.replication import Replication, epoch_fence
from broker.partitions.replication_throttle import ReplicaThrottle
from broker.protocol.errors import ErrorCode, KafkaError, code_for_exception
from coordination.topics import TopicInfo
from storage.batch import (
    ATTRIBUTES_POS,
    CONTROL_MASK,
    HEADER_SIZE,
    LOG_OVERHEAD,
    LOG_OVERHEAD_STRUCT,
    BatchHeader,
    check_producer_batch,
    parse_header,
    producer_id_at,
)
from storage.checkpoint import read_partition_metadata
from storage.errors import LogDirOfflineError, StorageError
from storage.log import LATEST_TIMESTAMP, AppendInfo, PartitionLog
from storage.manager import LogManager
from storage.producer_state import ProducerStateManager
from storage.types import FileRange, TopicPartition

if TYPE_CHECKING:
    from broker.partitions.share_partitions import SharePartitions

log = logging.getLogger(__name__)

ZSTD = 4
READ_COMMITTED = 1  # a Fetch's isolation_level
# A read's answer with every field given, by one C call: the NamedTuple's own constructor is
# a Python function, a measurable share of a wide Fetch's caught-up partitions.
_read_result = functools.partial(tuple.__new__, ReadResult)
ATTRIBUTES_LOW_BYTE = ATTRIBUTES_POS + 1  # a batch's control and transactional bits (big-endian int16)


class TopicView(Protocol):
    """The part of the topic registry the owner reads."""

    def refresh(self) -> bool: ...

    def get(self, name: str) -> TopicInfo | None: ...

    def all(self) -> list[TopicInfo]: ...


class Owner:
    """The owning side of partition operations, on the worker's loop thread.

    ``owns(tp)``: this worker writes ``tp``. ``appended(tp, info)``: after each append
    (metrics, long-poll wakeups). ``fence_epoch()``: the current coordinator epoch."""

    def __init__(self, index: int, logs: LogManager, topics: TopicView, owns: Callable[[TopicPartition], bool],
                 appended: Callable[[TopicPartition, AppendInfo], None], fence_epoch: Callable[[], int],
                 replication: Callable[["Owner"], Replication], roles: Callable[[], Iterable[tuple[TopicPartition, Any]]],
                 assigned_elsewhere: Callable[[TopicPartition], bool] = lambda _tp: False,
                 verifies: Callable[[int], bool] = lambda _version: True) -> None:
        self.index = index
        self.logs = logs
        self.topics = topics
        self.owns = owns
        self._appended = appended
        self._fence_epoch = fence_epoch
        # Whether a transactional batch from a Produce of this version must be verified with
        # the transaction coordinator before it opens a transaction here.
        self._verifies = verifies
        # Leader or follower of each owned partition, from ``roles()`` (tp, PartitionView).
        self.replication = replication(self)
        self._roles = roles
        self._assigned_elsewhere = assigned_elsewhere
        self._topic_ids: dict[TopicPartition, tuple[PartitionLog, Any]] = {}
        # tp -> indexes of workers with a long-polling fetch waiting for it.
        self.remote_watchers: dict[TopicPartition, set[int]] = {}
        # The share partitions this worker leads (KIP-932); set by the worker once its
        # share persister exists.
        self.shares: SharePartitions | None = None
        # Told the path of a log dir this worker found failed (the worker tells the others).
        self.dir_failed: Callable[[str], None] = lambda _path: None
        # The broker's leader replication throttle; None while leader.replication.throttled.rate is unbounded.
        self.leader_throttle: ReplicaThrottle | None = None
        # Called before moves between log dirs start: the worker re-reads its dynamic configs, so a
        # throttle set just before (kafka-reassign-partitions sets it first) holds the copy from its start.
        self.before_moves: Callable[[], None] = lambda: None

    def topic(self, name: str) -> TopicInfo | None:
        info = self.topics.get(name)
        if info is None and self.topics.refresh():
            info = self.topics.get(name)
        return info

    # ------------------------------------------------------------------ logs
    def log_for(self, tp: TopicPartition) -> PartitionLog | None:
        """The log of an owned partition, created on first use if the registry has it."""
        logs = self.logs
        found = logs.get_log(tp)
        if found is not None:
            return found
        info = self.topic(tp.topic)
        if info is None or not info.has_partition(tp.partition) or not self.owns(tp):
            return None
        return logs.create_log(tp, overrides=info.configs, topic_id=info.topic_id)

    def _topic_id_on_disk(self, tp: TopicPartition, partition_log: PartitionLog) -> Any:
        """partition.metadata's topic id, read once per log: syncs run on every registry
        change (each ISR change, under replication), and read it for every partition."""
        known = self._topic_ids.get(tp)
        if known is None or known[0] is not partition_log:
            known = self._topic_ids[tp] = (partition_log, read_partition_metadata(partition_log.directory))
        return known[1]

    def sync_registry(self) -> None:
        """Create the owned partitions the registry has, delete the ones it dropped, and
        apply topic configs. Idempotent: run on every registry change and at start."""
        registry = self.topics
        registry.refresh()
        dropped = []
        for tp, partition_log in list(self.logs.logs.items()):
            info = registry.get(tp.topic)
            on_disk_id = self._topic_id_on_disk(tp, partition_log)
            if info is None or tp.partition >= info.partitions or (on_disk_id is not None and on_disk_id != info.topic_id):
                dropped.append(tp)
            elif not self.owns(tp) and self._assigned_elsewhere(tp):
                dropped.append(tp)  # its replica moved to other brokers (a reassignment)
        if dropped:
            log.info("deleting %d partitions no longer in the topic registry or moved to other brokers: %s", len(dropped),
                     ", ".join(map(str, dropped[:10])) + (" ..." if len(dropped) > 10 else ""))
            self.logs.delete_logs(dropped)
        for info in registry.all():
            if self.logs.topic_overrides(info.name) != dict(info.configs):
                self.logs.set_topic_config(info.name, info.configs)
            for partition in range(info.partitions):
                tp = TopicPartition(info.name, partition)
                if self.owns(tp) and self.logs.get_log(tp) is None:
                    self.logs.create_log(tp, overrides=info.configs, topic_id=info.topic_id)
        self.replication.apply(self._roles())

    # ------------------------------------------------------------------ produce
    def append(self, items: list[AppendItem], fence_epoch: int = NO_FENCE) -> list[AppendResult]:
        if fence_epoch != NO_FENCE:
            # The coordinator's appends to __consumer_offsets: an epoch older than the
            # current coordinator epoch comes from a deposed coordinator (NOT_COORDINATOR).
            current = self._fence_epoch()
            if fence_epoch < current:
                return [AppendResult(ErrorCode.not_coordinator,
                                     error_message=f"coordinator epoch {fence_epoch} is fenced by {current}")
                        for _ in items]
        # The coordinator's own writes (its offsets, transactional or not) are checked for
        # their producer's epoch only, not sequences: Kafka's AppendOrigin.COORDINATOR.
        from_coordinator = fence_epoch != NO_FENCE
        return [self._append_one(tp, records, version, from_coordinator) for tp, records, version in items]

    def append_verified(self, items: list[AppendItem], guards: list[int]) -> list[AppendResult]:
        return [self._append_one(tp, records, version, guard=guard) for (tp, records, version), guard in zip(items, guards)]

    def _append_one(self, tp: TopicPartition, records: bytes | bytearray | memoryview, version: int,
                    from_coordinator: bool = False, guard: int = 0) -> AppendResult:
        partition_log = self.log_for(tp)
        if partition_log is None:
            return AppendResult(ErrorCode.unknown_topic_or_partition)
        leader_epoch = self.replication.leader_epoch(tp)
        if leader_epoch < 0:
            return AppendResult(ErrorCode.not_leader_or_follower, error_message=f"this broker does not lead {tp}")
        try:
            view = memoryview(records)
            size = len(view)
            if size < HEADER_SIZE:
                return AppendResult(ErrorCode.corrupt_message, error_message="record set shorter than a batch header")
            if _has_control_batch(view):
                # Markers come from the transaction coordinator (write_markers), never a Produce.
                return AppendResult(ErrorCode.invalid_record, error_message="clients may not write control batches")
            if version < 7 or producer_id_at(view, 0) >= 0:
                # Validate (CRC included) before trusting the header for the zstd rule or the
                # producer state; otherwise PartitionLog.append validates, once.
                first = check_producer_batch(view, 0, size)
                if version < 7 and _has_zstd(view):
                    return AppendResult(ErrorCode.unsupported_compression_type,
                                        error_message="zstd needs Produce v7 or newer")
                if first.producer_id >= 0:
                    state = partition_log.producer_state
                    duplicate = None if from_coordinator else state.find_duplicate(first)
                    if duplicate is not None:
                        # A retry of a batch already appended: answer with its original offsets.
                        return AppendResult(ErrorCode.none, duplicate.first_offset, -1, partition_log.log_start_offset)
                    if (first.is_transactional and not from_coordinator and self._verifies(version)
                            and not state.in_transaction(first.producer_id, first.producer_epoch)):
                        # This batch would open the producer's transaction here: only once the
                        # transaction coordinator confirms the partition is in it (KIP-890).
                        if not guard:
                            return AppendResult(VERIFICATION_NEEDED,
                                                state.start_verification(first.producer_id, first.producer_epoch,
                                                                         first.base_sequence))
                        if not state.verified(first.producer_id, first.producer_epoch, guard):
                            return AppendResult(ErrorCode.invalid_txn_state, error_message=(
                                f"producer {first.producer_id}'s transaction ended before its batch came"))
                    code = _stale_epoch(state, first) if from_coordinator else state.check_sequence(first)
                    if code:
                        return AppendResult(code, error_message=f"producer {first.producer_id} epoch "
                                                                f"{first.producer_epoch} sequence {first.base_sequence} refused")
            # The log copies ``records`` into the segment: from the request's buffer, or
            # straight from the ring for a forwarded append (a view it must not keep).
            info = partition_log.append(records, leader_epoch=leader_epoch)
        except LogDirOfflineError as exc:
            self.fail_dir_of(tp, str(exc))
            return AppendResult(exc.kafka_error_code, error_message=str(exc))
        except StorageError as exc:
            return AppendResult(exc.kafka_error_code, error_message=str(exc))
        except Exception as exc:
            return AppendResult(code_for_exception(exc), error_message=str(exc))
        self._appended(tp, info)
        self.replication.appended(tp, partition_log)
        return AppendResult(ErrorCode.none, info.first_offset, info.log_append_time, info.log_start_offset,
                            None, info.record_count, partition_log.high_watermark)

    # ------------------------------------------------------------------ fetch
    def leader_epoch(self, tp: TopicPartition) -> int:
        """The partition's leader epoch if this broker leads it, else -1."""
        return int(self.replication.leader_epoch(tp))

    def share_fetch(self, items: list[ShareFetchItem]) -> "asyncio.Future[list[ShareFetchResult]]":
        if self.shares is None:
            raise KafkaError(ErrorCode.coordinator_not_available, "share groups are not running in this worker")
        for item in items:
            if item.watcher >= 0:
                self._watch(item.tp, item.watcher)
        return asyncio.ensure_future(self.shares.fetch(items))

    def share_acknowledge(self, items: list[ShareAckItem]) -> "asyncio.Future[list[int]]":
        if self.shares is None:
            raise KafkaError(ErrorCode.coordinator_not_available, "share groups are not running in this worker")
        return asyncio.ensure_future(self.shares.acknowledge(items))

    def read(self, items: list[ReadItem], watcher: int | None) -> list[ReadResult]:
        """``watcher``: the worker to note on the next append to any of these partitions
        (long-poll), or None."""
        results = []
        for item in items:
            tp = item[0]
            results.append(self._read_one(item))
            if watcher is not None:
                self._watch(tp, watcher)
        return results

    def _watch(self, tp: TopicPartition, watcher: int) -> None:
        """Note worker ``watcher`` on the next append to ``tp`` (this worker's own parked
        fetches are woken without a note)."""
        if watcher != self.index:
            found = self.remote_watchers.get(tp)
            if found is None:
                self.remote_watchers[tp] = {watcher}
            else:
                found.add(watcher)

    def _read_one(self, item: ReadItem) -> ReadResult:
        tp, offset, max_bytes, refuse_zstd, replica, client_epoch, _last_fetched, isolation = item
        partition_log = self.log_for(tp)
        if partition_log is None:
            return ReadResult(ErrorCode.unknown_topic_or_partition)
        if partition_log.offline:
            return ReadResult(ErrorCode.kafka_storage_error)
        leader_epoch = self.replication.leader_epoch(tp)
        if leader_epoch < 0:
            return ReadResult(ErrorCode.not_leader_or_follower)
        fenced = epoch_fence(client_epoch, leader_epoch)
        if fenced:
            return ReadResult(fenced, leader_epoch=leader_epoch)
        if replica >= 0:
            refused = self._follower_fetched(item, partition_log, leader_epoch)
            if refused is not None:
                return refused
            throttle = self.leader_throttle
            if throttle is not None and self._leader_throttles(throttle, tp, replica):
                return _read_result((0, partition_log.high_watermark, partition_log.log_start_offset,
                                     partition_log.log_end_offset, "", 0, 0, 0, -1, -1, -1,
                                     partition_log.last_stable_offset, ()))
        if isolation == READ_COMMITTED and replica < 0:
            return self._read_committed(item, partition_log)
        # Consumers read below the high watermark; followers to the log end.
        committed = replica < 0
        end = partition_log.high_watermark if committed else partition_log.log_end_offset
        # Every answer carries the last stable offset, as Kafka's do, whatever the isolation.
        if offset == end:
            # Caught up: most partitions of a wide Fetch are, and have nothing to read.
            return _read_result((0, partition_log.high_watermark, partition_log.log_start_offset,
                                 partition_log.log_end_offset, "", 0, 0, 0, -1, -1, -1, partition_log.last_stable_offset,
                                 ()))
        try:
            info = partition_log.read(offset, max_bytes, min_one_batch=True, committed=committed)
        except StorageError as exc:
            return ReadResult(exc.kafka_error_code, partition_log.high_watermark, partition_log.log_start_offset,
                              partition_log.log_end_offset)
        file_range = info.file_range
        if file_range is None:
            return ReadResult(ErrorCode.none, info.high_watermark, info.log_start_offset, info.log_end_offset,
                              "", 0, 0, 0, -1, -1, -1, info.last_stable_offset)
        if refuse_zstd and any(h.compression == ZSTD for h in _headers_in(file_range)):
            return ReadResult(ErrorCode.unsupported_compression_type, info.high_watermark, info.log_start_offset,
                              info.log_end_offset)
        inode = file_range.inode or os.fstat(file_range.fd).st_ino  # known to the segment: no syscall per fetch
        return _read_result((0, info.high_watermark, info.log_start_offset, info.log_end_offset, file_range.path,
                             inode, file_range.position, file_range.length, -1, -1, -1, info.last_stable_offset, ()))

    def _leader_throttles(self, throttle: ReplicaThrottle, tp: TopicPartition, replica: int) -> bool:
        """Kafka's shouldLeaderThrottle: the follower gets no bytes of ``tp`` now (the partition
        is listed, the broker's leader rate is over, and the follower is not in the ISR)."""
        led = self.replication.led.get(tp)
        return (led is not None and replica not in led.isr and throttle.throttled(tp)
                and throttle.exceeded())

    def _read_committed(self, item: ReadItem, partition_log: PartitionLog) -> ReadResult:
        """A read_committed consumer's read: the bytes below the last stable offset (still
        sent by sendfile; the consumer drops the aborted transactions' batches), and the
        aborted transactions that may start in them, which it needs to know which to drop."""
        offset, max_bytes, refuse_zstd = item[1], item[2], item[3]
        stable = partition_log.last_stable_offset
        if offset == stable:
            return ReadResult(ErrorCode.none, partition_log.high_watermark, partition_log.log_start_offset,
                              partition_log.log_end_offset, "", 0, 0, 0, -1, -1, -1, stable)
        try:
            info = partition_log.read(offset, max_bytes, min_one_batch=True, read_committed=True)
        except StorageError as exc:
            return ReadResult(exc.kafka_error_code, partition_log.high_watermark, partition_log.log_start_offset,
                              partition_log.log_end_offset)
        stable = info.last_stable_offset
        file_range = info.file_range
        if file_range is None:
            return ReadResult(ErrorCode.none, info.high_watermark, info.log_start_offset, info.log_end_offset,
                              "", 0, 0, 0, -1, -1, -1, stable)
        if refuse_zstd and any(h.compression == ZSTD for h in _headers_in(file_range)):
            return ReadResult(ErrorCode.unsupported_compression_type, info.high_watermark, info.log_start_offset,
                              info.log_end_offset)
        aborted = tuple(partition_log.aborted_transactions(offset, _upper_bound(partition_log, offset, file_range,
                                                                                stable)))
        inode = file_range.inode or os.fstat(file_range.fd).st_ino
        return ReadResult(ErrorCode.none, info.high_watermark, info.log_start_offset, info.log_end_offset,
                          file_range.path, inode, file_range.position, file_range.length, -1, -1, -1, stable, aborted)

    def _follower_fetched(self, item: ReadItem, partition_log: PartitionLog, leader_epoch: int) -> ReadResult | None:
        """A follower's fetch, before its read: the answer when it may not read (not a
        replica, an offset out of range, a log that diverged from ours: KIP-595's
        LastFetchedEpoch), else None after its fetch offset moved the high watermark."""
        tp, offset, _max_bytes, _refuse, replica, _epoch, last_fetched_epoch, _isolation = item
        led = self.replication.led.get(tp)
        if led is None or replica not in led.replicas:
            return ReadResult(ErrorCode.not_leader_or_follower, leader_epoch=leader_epoch)
        marks = partition_log.high_watermark, partition_log.log_start_offset, partition_log.log_end_offset
        if last_fetched_epoch >= 0:
            epoch, end_offset = partition_log.epochs.end_offset_for(last_fetched_epoch, partition_log.log_end_offset)
            if epoch >= 0 and (epoch < last_fetched_epoch or end_offset < offset):
                # Its last batches were written in an epoch that ended earlier here: it
                # truncates to (epoch, end_offset) and fetches again.
                return ReadResult(ErrorCode.none, *marks, leader_epoch=leader_epoch, diverging_epoch=epoch,
                                  diverging_end_offset=end_offset)
        if offset > partition_log.log_end_offset or offset < partition_log.log_start_offset:
            return ReadResult(ErrorCode.offset_out_of_range, *marks, leader_epoch=leader_epoch)
        self.replication.follower_fetched(tp, replica, offset, partition_log)
        return None

    # ------------------------------------------------------------------ acks=all
    def wait_committed(self, items: list[CommitItem], timeout_ms: int) -> "list[int] | asyncio.Future[list[int]]":
        answers = [self.replication.wait_committed(tp, offset, timeout_ms) for tp, offset in items]
        if all(isinstance(a, int) for a in answers):
            return [int(a) for a in answers]  # type: ignore[arg-type]
        return asyncio.ensure_future(_all_codes(answers))

    # ------------------------------------------------------------------ transactions
    def write_markers(self, items: list[MarkerItem], timeout_ms: int) -> "list[int] | asyncio.Future[list[int]]":
        """Append each transaction marker, then (acks=all, as Kafka writes markers) wait for
        the high watermark to pass it."""
        answers = [self._write_marker(item, timeout_ms) for item in items]
        if all(isinstance(a, int) for a in answers):
            return [int(a) for a in answers]  # type: ignore[arg-type]
        return asyncio.ensure_future(_all_codes(answers))

    def _write_marker(self, item: MarkerItem, timeout_ms: int) -> "int | asyncio.Future[int]":
        tp = item.tp
        partition_log = self.log_for(tp)
        if partition_log is None:
            return ErrorCode.unknown_topic_or_partition
        leader_epoch = self.replication.leader_epoch(tp)
        if leader_epoch < 0:
            return ErrorCode.not_leader_or_follower
        if partition_log.replicated and self.replication.isr_size(tp) < partition_log.config.min_insync_replicas:
            # Kafka refuses an acks=all append when the ISR is already too small; the
            # transaction coordinator retries.
            return ErrorCode.not_enough_replicas
        try:
            info = partition_log.append_marker(item.producer_id, item.producer_epoch, item.commit, item.coordinator_epoch,
                                               leader_epoch=leader_epoch, transaction_version=item.transaction_version)
        except StorageError as exc:
            return exc.kafka_error_code
        except Exception as exc:
            return code_for_exception(exc)
        self._appended(tp, info)
        self.replication.appended(tp, partition_log)
        return self.replication.wait_committed(tp, info.last_offset + 1, timeout_ms)

    # ------------------------------------------------------------------ offsets
    def list_offsets(self, items: list[OffsetItem]) -> list[OffsetResult]:
        results = []
        for tp, timestamp in items:
            partition_log = self.log_for(tp)
            if partition_log is None:
                results.append(OffsetResult(ErrorCode.unknown_topic_or_partition))
                continue
            if self.replication.leader_epoch(tp) < 0:
                results.append(OffsetResult(ErrorCode.not_leader_or_follower))
                continue
            if timestamp == LOG_END:
                results.append(OffsetResult(ErrorCode.none, partition_log.log_end_offset, -1,
                                            partition_log.epochs.latest_epoch))
                continue
            if timestamp == LATEST_STABLE:
                results.append(OffsetResult(ErrorCode.none, partition_log.last_stable_offset, -1,
                                            partition_log.epochs.latest_epoch))
                continue
            found = partition_log.offset_for_timestamp(timestamp)
            if found is None:
                results.append(OffsetResult(ErrorCode.none, -1, -1, -1))
            else:
                # The epoch of the record there (the latest epoch for the log's end), so
                # a client can later check it with OffsetForLeaderEpoch (KIP-320).
                epochs = partition_log.epochs
                epoch = epochs.latest_epoch if timestamp == LATEST_TIMESTAMP else epochs.epoch_at(found[0])
                results.append(OffsetResult(ErrorCode.none, found[0], found[1], epoch))
        return results

    def epoch_end_offsets(self, items: list[EpochItem]) -> list[EpochEndResult]:
        results = []
        for tp, current, epoch in items:
            partition_log = self.log_for(tp)
            if partition_log is None:
                results.append(EpochEndResult(ErrorCode.unknown_topic_or_partition))
                continue
            leader_epoch = self.replication.leader_epoch(tp)
            if leader_epoch < 0:
                results.append(EpochEndResult(ErrorCode.not_leader_or_follower))
            elif fenced := epoch_fence(current, leader_epoch):
                results.append(EpochEndResult(fenced))
            else:
                found, end = partition_log.epochs.end_offset_for(epoch, partition_log.log_end_offset)
                results.append(EpochEndResult(ErrorCode.none, found, end))
        return results

    def delete_records(self, items: list[DeleteItem]) -> list[OffsetResult]:
        """Result offset: the new log start."""
        results = []
        for tp, offset in items:
            partition_log = self.log_for(tp)
            if partition_log is None:
                results.append(OffsetResult(ErrorCode.unknown_topic_or_partition))
                continue
            if self.replication.leader_epoch(tp) < 0:
                # The leader moves the log start; its followers learn it from their fetches.
                results.append(OffsetResult(ErrorCode.not_leader_or_follower))
                continue
            target = partition_log.high_watermark if offset == -1 else offset
            try:
                partition_log.delete_records_before(target)
            except StorageError as exc:
                results.append(OffsetResult(exc.kafka_error_code))
                continue
            results.append(OffsetResult(ErrorCode.none, partition_log.log_start_offset))
        return results

    def partition_state(self, tps: list[TopicPartition]) -> list[PartitionState]:
        out = []
        for tp in tps:
            partition_log = self.log_for(tp)
            if partition_log is None:
                out.append(PartitionState(-1, -1, -1))
            else:
                out.append(PartitionState(partition_log.log_start_offset, partition_log.high_watermark,
                                          partition_log.log_end_offset))
        return out

    # ------------------------------------------------------------------ producers
    def describe_producers(self, tps: list[TopicPartition]) -> list[ProducersResult]:
        """Every producer the log keeps state for, leader or follower alike (Kafka's
        activeProducers), ordered by producer id."""
        out = []
        for tp in tps:
            partition_log = self.log_for(tp)
            if partition_log is None:
                out.append(ProducersResult(ErrorCode.unknown_topic_or_partition))
                continue
            entries = partition_log.producer_state.entries
            out.append(ProducersResult(ErrorCode.none, tuple(
                ProducerInfo(e.producer_id, e.producer_epoch, e.last_sequence, e.last_timestamp, e.coordinator_epoch,
                             e.current_txn_first_offset) for _pid, e in sorted(entries.items()))))
        return out


    # ------------------------------------------------------------------ log dirs
    def fail_dir_of(self, tp: TopicPartition, why: str) -> None:
        """An I/O error on ``tp``'s log: its whole log dir goes offline, here and (told
        through ``dir_failed``) in the broker's other workers."""
        path = self.logs.log_dir_of(tp)
        if path is not None and self.logs.fail_dir(path, why):
            self.dir_failed(path)

    def describe_log_dirs(self) -> LogDirsReport:
        """Every log this worker keeps (Kafka's ReplicaManager.describeLogDirs): its dir,
        size, and lag; a current log's lag is how far its end is below the high watermark
        (zero on a leader, whose high watermark never passes its log end)."""
        out = []
        for tp, partition_log in list(self.logs.logs.items()):
            log_dir = self.logs.log_dir_of(tp)
            if log_dir is None or partition_log.offline:
                continue
            lag = max(partition_log.high_watermark - partition_log.log_end_offset, 0)
            out.append(LogDirReplica(log_dir, tp, partition_log.size_in_bytes, lag, False))
            future = self.logs.futures.get(tp)
            if future is not None:
                out.append(LogDirReplica(future.dest, tp, future.log.size_in_bytes, future.lag(partition_log), True))
        return LogDirsReport(tuple(out), tuple(sorted(self.logs.offline_dirs)))

    def alter_log_dirs(self, items: list[MoveItem]) -> list[int]:
        """Start moving each partition's log to the dir named (Kafka's
        ReplicaManager.alterReplicaLogDirs): KAFKA_STORAGE_ERROR if that dir or the log's
        own is offline, REPLICA_NOT_AVAILABLE if this worker has no log of it."""
        self.before_moves()
        codes = []
        for tp, path in items:
            partition_log = self.logs.get_log(tp)
            if path in self.logs.offline_dirs or (partition_log is not None and partition_log.offline):
                codes.append(int(ErrorCode.kafka_storage_error))
            elif partition_log is None:
                codes.append(int(ErrorCode.replica_not_available))
            else:
                try:
                    self.logs.start_move(tp, path)
                except (StorageError, OSError) as exc:
                    log.warning("%s: cannot start its move to %s: %s", tp, path, exc)
                    codes.append(int(ErrorCode.kafka_storage_error))
                    continue
                codes.append(0)
        return codes


async def _all_codes(answers: list["int | asyncio.Future[int]"]) -> list[int]:
    return [a if isinstance(a, int) else await a for a in answers]


def _upper_bound(partition_log: PartitionLog, offset: int, file_range: FileRange, stable: int) -> int:
    """An offset past every batch of a read_committed read, for its aborted transactions (as
    Kafka bounds them by the end of the fetched range, so a consumer far behind does not
    get, nor the owner scan, every aborted transaction up to the log end): the range lies in
    one segment, whose successor's base offset bounds it; and it lies below the LSO."""
    segments = partition_log.segments
    for index in range(max(0, segments.floor(offset)), len(segments) - 1):
        # Usually the first: the segment holding ``offset``, unless nothing at or after it was left there.
        if segments[index].path == file_range.path:
            return min(stable, segments[index + 1].base_offset)
    return stable


def _stale_epoch(state: ProducerStateManager, header: BatchHeader) -> int:
    """The check of a coordinator's batch (Kafka's AppendOrigin.COORDINATOR): an epoch older
    than the producer's here is a zombie's; sequences are not checked."""
    entry = state.entries.get(header.producer_id)
    if entry is not None and header.producer_epoch < entry.producer_epoch:
        return ErrorCode.invalid_producer_epoch
    return 0


def _has_control_batch(view: memoryview) -> bool:
    """Whether any batch of a record set is a control batch: its attributes' low byte, and
    its length to the next (a malformed set stops the walk: the append's validation answers it)."""
    position = 0
    end = len(view) - HEADER_SIZE
    while position <= end:
        if view[position + ATTRIBUTES_LOW_BYTE] & CONTROL_MASK:
            return True
        length = LOG_OVERHEAD_STRUCT.unpack_from(view, position)[1]
        if length <= 0:
            return False
        position += LOG_OVERHEAD + length
    return False


def _has_zstd(view: memoryview) -> bool:
    position = 0
    while position + HEADER_SIZE <= len(view):
        header = parse_header(view, position)
        if header.size <= HEADER_SIZE:
            return False  # malformed: the append's own validation answers it
        if header.compression == ZSTD:
            return True
        position += header.size
    return False


def _headers_in(file_range: FileRange) -> list[BatchHeader]:
    """Batch headers of a file range (61 bytes each, by pread): only for Fetch < v10."""
    fd, length = file_range.fd, file_range.length
    position: int = file_range.position
    headers = []
    end = position + length
    while position + HEADER_SIZE <= end:
        header = parse_header(os.pread(fd, HEADER_SIZE, position))
        headers.append(header)
        position += header.size
    return headers

