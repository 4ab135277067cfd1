"""What a worker does for the partitions it owns (it is their only writer, P6).

Every op takes a list of per-partition items and returns one picklable result per item,
so the same code answers the worker's own connections (called directly) and the other
workers (called over IPC by broker/forwarding.py). Expected failures are error codes in
the results, never exceptions (P3).
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING, NamedTuple

from broker.protocol.errors import ErrorCode, code_for_exception
from storage.batch import HEADER_SIZE, BatchHeader, check_producer_batch, parse_header, producer_id_at
from storage.checkpoint import read_partition_metadata
from storage.errors import StorageError
from storage.log import PartitionLog
from storage.types import FileRange, TopicPartition

if TYPE_CHECKING:
    from broker.node import WorkerNode

log = logging.getLogger(__name__)

ZSTD = 4


class AppendResult(NamedTuple):
    error_code: int
    base_offset: int = -1
    log_append_time: int = -1
    log_start_offset: int = -1
    error_message: str | None = None
    record_count: int = 0


class ReadResult(NamedTuple):
    """Where a fetch's bytes lie. ``path``/``inode`` let any worker open the same file
    (the inode proves it is the same file the owner read, not a replacement)."""

    error_code: int
    high_watermark: int = -1
    log_start_offset: int = -1
    log_end_offset: int = -1
    path: str = ""
    inode: int = 0
    position: int = 0
    length: int = 0


class OffsetResult(NamedTuple):
    error_code: int
    offset: int = -1
    timestamp: int = -1
    leader_epoch: int = -1


class Owner:
    """The owning side of partition operations, on the worker's loop thread."""

    def __init__(self, node: "WorkerNode") -> None:
        self.node = node
        # tp -> indexes of workers with a long-polling fetch waiting for it.
        self.remote_watchers: dict[TopicPartition, set[int]] = {}

    # ------------------------------------------------------------------ logs
    def log_for(self, tp: TopicPartition) -> PartitionLog | None:
        """The log of an owned partition, created on first use if the registry has it."""
        logs = self.node.logs
        found = logs.get_log(tp)
        if found is not None:
            return found
        info = self.node.topic(tp.topic)
        if info is None or not info.has_partition(tp.partition) or not self.node.owns(tp):
            return None
        return logs.create_log(tp, overrides=info.configs, topic_id=info.topic_id)

    def sync_with_registry(self) -> None:
        """Create the owned partitions the registry has, delete the ones it dropped, and
        apply topic configs. Idempotent: run on every registry change and at start."""
        registry = self.node.registry
        registry.refresh()
        dropped = []
        for tp, partition_log in list(self.node.logs.logs.items()):
            info = registry.get(tp.topic)
            on_disk_id = read_partition_metadata(partition_log.directory)
            if info is None or tp.partition >= info.partitions or (on_disk_id is not None and on_disk_id != info.topic_id):
                dropped.append(tp)
        if dropped:
            log.info("deleting %d partitions no longer in the topic registry: %s", len(dropped),
                     ", ".join(map(str, dropped[:10])) + (" ..." if len(dropped) > 10 else ""))
            self.node.logs.delete_logs(dropped)
        for info in registry.all():
            if self.node.logs.topic_overrides(info.name) != dict(info.configs):
                self.node.logs.set_topic_config(info.name, info.configs)
            for partition in range(info.partitions):
                tp = TopicPartition(info.name, partition)
                if self.node.owns(tp) and self.node.logs.get_log(tp) is None:
                    self.node.logs.create_log(tp, overrides=info.configs, topic_id=info.topic_id)

    # ------------------------------------------------------------------ produce
    def append(self, items: list[tuple[TopicPartition, bytes | memoryview, int]]) -> list[AppendResult]:
        """items: (tp, records, produce request version)."""
        return [self._append_one(tp, records, version) for tp, records, version in items]

    def _append_one(self, tp: TopicPartition, records: bytes | memoryview, version: int) -> AppendResult:
        partition_log = self.log_for(tp)
        if partition_log is None:
            return AppendResult(ErrorCode.unknown_topic_or_partition)
        try:
            view = memoryview(records)
            size = len(view)
            if size < HEADER_SIZE:
                return AppendResult(ErrorCode.corrupt_message, error_message="record set shorter than a batch header")
            if version < 7 or producer_id_at(view, 0) >= 0:
                # Validate (CRC included) before trusting the header for the zstd rule or the
                # producer state; otherwise PartitionLog.append validates, once.
                first = check_producer_batch(view, 0, size)
                if version < 7 and _has_zstd(view):
                    return AppendResult(ErrorCode.unsupported_compression_type,
                                        error_message="zstd needs Produce v7 or newer")
                if first.producer_id >= 0:
                    state = partition_log.producer_state
                    duplicate = state.find_duplicate(first)
                    if duplicate is not None:
                        # A retry of a batch already appended: answer with its original offsets.
                        return AppendResult(ErrorCode.none, duplicate.first_offset, -1, partition_log.log_start_offset)
                    code = state.check_sequence(first)
                    if code:
                        return AppendResult(code, error_message=f"producer {first.producer_id} epoch "
                                                                f"{first.producer_epoch} sequence {first.base_sequence} refused")
            # ``records`` itself: it may be the view of the log's open landing, which the
            # log recognises by identity and commits in place (storage/landing.py).
            info = partition_log.append(records)
        except StorageError as exc:
            return AppendResult(exc.kafka_error_code, error_message=str(exc))
        except Exception as exc:
            return AppendResult(code_for_exception(exc), error_message=str(exc))
        self.node.stats["records_appended"] += info.record_count
        self.node.metrics.appended(tp.topic, info.size, info.record_count)
        self.node.appended(tp)
        return AppendResult(ErrorCode.none, info.first_offset, info.log_append_time, info.log_start_offset,
                            None, info.record_count)

    def append_offsets(self, items: list[tuple[TopicPartition, bytes]], epoch: int) -> list[AppendResult]:
        """The coordinator's appends to __consumer_offsets, fenced: an epoch older than the
        current coordinator epoch comes from a deposed coordinator (NOT_COORDINATOR)."""
        current = self.node.fence_epoch()
        if epoch < current:
            return [AppendResult(ErrorCode.not_coordinator, error_message=f"coordinator epoch {epoch} is fenced by {current}")
                    for _ in items]
        return self.append([(tp, batch, 9) for tp, batch in items])

    # ------------------------------------------------------------------ fetch
    def read(self, items: list[tuple[TopicPartition, int, int, bool]], watcher: int | None) -> list[ReadResult]:
        """items: (tp, fetch offset, max bytes, refuse zstd). ``watcher``: the worker to
        note on the next append to any of these partitions (long-poll), or None."""
        results = []
        for tp, offset, max_bytes, refuse_zstd in items:
            results.append(self._read_one(tp, offset, max_bytes, refuse_zstd))
            if watcher is not None and watcher != self.node.index:
                found = self.remote_watchers.get(tp)
                if found is None:
                    self.remote_watchers[tp] = {watcher}
                else:
                    found.add(watcher)
        return results

    def _read_one(self, tp: TopicPartition, offset: int, max_bytes: int, refuse_zstd: bool) -> ReadResult:
        partition_log = self.log_for(tp)
        if partition_log is None:
            return ReadResult(ErrorCode.unknown_topic_or_partition)
        end = partition_log.log_end_offset
        if offset == end:
            # Caught up: most partitions of a wide Fetch are, and have nothing to read.
            return ReadResult(ErrorCode.none, partition_log.high_watermark, partition_log.log_start_offset, end)
        try:
            info = partition_log.read(offset, max_bytes, min_one_batch=True)
        except StorageError as exc:
            return ReadResult(exc.kafka_error_code, partition_log.high_watermark, partition_log.log_start_offset,
                              partition_log.log_end_offset)
        file_range = info.file_range
        if file_range is None:
            return ReadResult(ErrorCode.none, info.high_watermark, info.log_start_offset, info.log_end_offset)
        if refuse_zstd and any(h.compression == ZSTD for h in _headers_in(file_range)):
            return ReadResult(ErrorCode.unsupported_compression_type, info.high_watermark, info.log_start_offset,
                              info.log_end_offset)
        inode = file_range.inode or os.fstat(file_range.fd).st_ino  # known to the segment: no syscall per fetch
        return ReadResult(ErrorCode.none, info.high_watermark, info.log_start_offset, info.log_end_offset,
                          file_range.path, inode, file_range.position, file_range.length)

    # ------------------------------------------------------------------ offsets
    def list_offsets(self, items: list[tuple[TopicPartition, int]]) -> list[OffsetResult]:
        """items: (tp, timestamp or -1 latest / -2 earliest / -3 max timestamp)."""
        results = []
        for tp, timestamp in items:
            partition_log = self.log_for(tp)
            if partition_log is None:
                results.append(OffsetResult(ErrorCode.unknown_topic_or_partition))
                continue
            found = partition_log.offset_for_timestamp(timestamp)
            if found is None:
                results.append(OffsetResult(ErrorCode.none, -1, -1, -1))
            else:
                results.append(OffsetResult(ErrorCode.none, found[0], found[1], 0))
        return results

    def delete_records(self, items: list[tuple[TopicPartition, int]]) -> list[OffsetResult]:
        """items: (tp, offset; -1 = the high watermark). Result offset: the new log start."""
        results = []
        for tp, offset in items:
            partition_log = self.log_for(tp)
            if partition_log is None:
                results.append(OffsetResult(ErrorCode.unknown_topic_or_partition))
                continue
            target = partition_log.high_watermark if offset == -1 else offset
            try:
                partition_log.delete_records_before(target)
            except StorageError as exc:
                results.append(OffsetResult(exc.kafka_error_code))
                continue
            results.append(OffsetResult(ErrorCode.none, partition_log.log_start_offset))
        return results

    def partition_state(self, items: list[TopicPartition]) -> list[tuple[int, int, int]]:
        """(log start, high watermark, log end) of each owned partition, -1s if absent."""
        out = []
        for tp in items:
            partition_log = self.log_for(tp)
            if partition_log is None:
                out.append((-1, -1, -1))
            else:
                out.append((partition_log.log_start_offset, partition_log.high_watermark, partition_log.log_end_offset))
        return out


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

