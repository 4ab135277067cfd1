"""PartitionLog: the append-only log of one partition, made of segments.

Single writer: one owner (a worker's event loop thread) appends, rolls, truncates and
swaps segments; readers on any thread take one snapshot of the copy-on-write segment
list (segments.py) and never block. ``flush`` may run on another thread (the flusher):
it only fsyncs fds and moves the recovery point forward.

Append path, per produce request (DESIGN.md non-negotiable 4)::

    1. walk the record set: parse each 61-byte header, check size, magic, CRC-32C,
       record count, max.message.bytes (and keys, on compacted topics) -- a rejected
       set writes nothing
    2. roll if the set does not fit the active segment (size, index, u32 offsets, time)
    3. copy the bytes as the client sent them into the active segment's map
    4. rewrite baseOffset and partitionLeaderEpoch in place (outside the CRC); for
       LogAppendTime topics rewrite maxTimestamp + the type bit and redo the CRC
    5. update indexes, producer state, log end offset; flush when flush.messages is hit

Durability (non-negotiable 5): the map's pages are in the page cache as soon as step 3
returns, so a killed process loses nothing; an OS crash loses what came after the
recovery point, which flush.messages / flush.ms bound.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
import time
from typing import Callable, Iterator, NamedTuple

from storage import files
from storage.batch import (
    CONTROL_MASK,
    HEADER_SIZE,
    LOG_OVERHEAD,
    LOG_OVERHEAD_STRUCT,
    BatchHeader,
    check_batch_frame,
    check_producer_batch,
)
from storage.config import LogConfig
from storage.errors import (
    CorruptRecordError,
    InvalidProducerEpochError,
    InvalidRecordError,
    InvalidTimestampError,
    LogDirOfflineError,
    OffsetOutOfRangeError,
    RecordBatchTooLargeError,
    RecordTooLargeError,
    TransactionCoordinatorFencedError,
)
from storage.leader_epochs import LeaderEpochCache
from storage.producer_state import INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED, ProducerStateManager
from storage.recompress import needs_recompression, recompress
from storage.records import (
    CONTROL_TYPE_ABORT,
    CONTROL_TYPE_COMMIT,
    ControlRecord,
    decode_batch,
    encode_control_batch,
    read_control_record,
)
from storage.releaser import RELEASER
from storage.segment import LogSegment
from storage.segments import SegmentList
from storage.txn_index import AbortedTxn
from storage.types import FileRange, TopicPartition

log = logging.getLogger(__name__)

# ListOffsets special timestamps (Kafka's ListOffsetsRequest).
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
# Not a Kafka timestamp (a client never sends it): a READ_COMMITTED ListOffsets for -1,
# which Kafka answers with the last stable offset.
LATEST_STABLE = -101


def now_ms() -> int:
    return int(time.time() * 1000)



class FlushTimes:
    """Seconds of each log flush in this process, for the broker's metrics to drain.

    Appended by whichever thread flushes (the flusher thread, mostly); list append and
    slice deletion are atomic under the GIL, so no lock is needed."""

    pending: list[float] = []

    @classmethod
    def add(cls, seconds: float) -> None:
        if len(cls.pending) < 100_000:  # nobody drains when metrics are off
            cls.pending.append(seconds)

    @classmethod
    def drain(cls) -> list[float]:
        count = len(cls.pending)
        taken = cls.pending[:count]
        del cls.pending[:count]
        return taken

class AppendInfo(NamedTuple):
    """What an append did (a NamedTuple: built once per produce, cheaper than a dataclass)."""

    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time: int  # -1 unless the topic uses LogAppendTime
    log_start_offset: int
    record_count: int
    batch_count: int
    size: int


class ReadInfo(NamedTuple):
    """A fetch answer: the bytes' location (None when there is nothing to send) and marks.
    A NamedTuple: one is built per partition of every Fetch (0.16 µs, against 0.34 µs
    for the frozen dataclass it was; docs/ARCHITECTURE.md, "Hot-path value types")."""

    file_range: FileRange | None
    high_watermark: int
    log_start_offset: int
    log_end_offset: int
    last_stable_offset: int = -1


class PartitionLog:
    """The log of ``tp`` in ``directory`` (``<log.dir>/<topic>-<partition>``)."""

    def __init__(self, directory: str, tp: TopicPartition, config: LogConfig, *, recovery_point: int = 0,
                 log_start_offset: int = 0, clean_shutdown: bool = True, high_watermark: int | None = None) -> None:
        self.directory = directory
        self.tp = tp
        self.config = config
        # Its log dir failed (an I/O error anywhere in it): no more reads or writes, as
        # Kafka takes every log of a failed dir offline until the broker restarts.
        self.offline = False
        self._flush_lock = threading.Lock()
        self._pending_deletes: list[tuple[int, LogSegment, bool]] = []  # (due, segment, unlink files?)
        self._dir_dirty = False
        os.makedirs(directory, exist_ok=True)
        _finish_interrupted_operations(directory)
        # The first segment whose .txnindex recovery emptied: the producer-state replay
        # must start at or before it, to write its entries again.
        self._replay_from: int | None = None
        self._segments = self._load_segments(recovery_point, clean_shutdown)
        self._log_end_offset = self._segments.active.next_offset
        if log_start_offset > self._log_end_offset:
            # The checkpoint says records up to log_start_offset were deleted, but the log
            # ends before it (an OS crash lost the tail): start afresh there, as Kafka's
            # LogLoader does, so no offset below the advertised start is handed out again.
            self._restart_at(log_start_offset)
        self.log_start_offset = max(log_start_offset, self._segments[0].base_offset)
        # Everything on disk was either validated just now or written before a clean close.
        self.recovery_point = self._log_end_offset
        self._appended_messages = 0
        self._flushed_messages = 0
        self._last_flush_ms = now_ms()
        self.producer_state = ProducerStateManager(directory)
        self._rebuild_producer_state()
        for segment in self._segments:
            # Entries the replay wrote again into recovered segments' indexes: durable
            # before the recovery point (now the log end) vouches for them.
            segment.txn_index.flush()
        # Committed = below the high watermark: every in-sync replica has it. A partition
        # with no other replica (``replicated`` False, the default) commits at append; a
        # replicated one keeps the checkpointed mark, so a restart never shows more.
        self.replicated = False
        self._high_watermark = self._log_end_offset if high_watermark is None else min(high_watermark, self._log_end_offset)
        # (hw, the segment list it was found in, segment base, position), for capped reads;
        # a roll, truncation or cleaning replaces the list, and with it the cache.
        self._hw_position: tuple[int, SegmentList, int, int] | None = None
        self._lso_position: tuple[int, SegmentList, int, int] | None = None  # the same, for the LSO
        self.producer_state.on_high_watermark(self._high_watermark)
        self.epochs = LeaderEpochCache(directory)
        self.epochs.truncate_from_end(self._log_end_offset)
        self.epochs.truncate_from_start(self.log_start_offset)
        if not self.epochs.file_existed and self._log_end_offset > self.log_start_offset:
            self.epochs.rebuild([(h.partition_leader_epoch, h.base_offset) for h in self.iter_batch_headers(self.log_start_offset)])

    # ----------------------------------------------------------------- loading
    def _load_segments(self, recovery_point: int, clean_shutdown: bool) -> SegmentList:
        bases = sorted(files.offset_from_filename(n) for n in os.listdir(self.directory) if files.is_segment_log(n))
        if not bases:
            return SegmentList([LogSegment(self.directory, 0, self.config, active=True)])
        segments: list[LogSegment] = []
        for i, base in enumerate(bases):
            last = i == len(bases) - 1
            next_base = bases[i + 1] if not last else None
            recover = not clean_shutdown and (last or next_base is None or next_base > recovery_point)
            segment = LogSegment(self.directory, base, self.config, active=last, recover=recover)
            if not recover and not last and segment.has_unaccounted_tail():
                log.warning("%s has bytes after its last batch (a crash during a roll?): recovering it", segment.path)
                self._close_to_reopen(segment)
                segment = LogSegment(self.directory, base, self.config, active=False, recover=True)
            segments.append(segment)
            if segment.recovery is not None and self._replay_from is None:
                self._replay_from = base
            if segment.recovery is not None and segment.recovery.cut_bytes and not last \
                    and not _only_an_untrimmed_tail(segment, next_base):
                # Everything after the first invalid batch is gone, later segments too.
                for later in bases[i + 1 :]:
                    _delete_segment_files(self.directory, later)
                    log.warning("recovery deleted segment %s after the corruption in %s", later, segment.path)
                self._close_to_reopen(segment)
                segments[-1] = LogSegment(self.directory, base, self.config, active=True)
                break
        return SegmentList(segments)

    def _close_to_reopen(self, segment: LogSegment) -> None:
        """Close ``segment`` before its files are opened again: its close queues the cuts of
        its files to their lengths (storage/releaser.py), and a cut that ran after the new
        object mapped them would take pages from under the new map (SIGBUS: a test's
        worker died of it during recovery, 2026-11-29)."""
        segment.close()
        self._finish_queued_file_work()

    def _finish_queued_file_work(self) -> None:
        """Wait for the block releaser's queued cuts, snapshots and unlinks; a queue that does
        not drain means the disk does not answer: the log's dir is taken as failed."""
        if not RELEASER.drain():
            raise LogDirOfflineError(f"{self.tp}: queued file work did not finish")

    def _restart_at(self, offset: int) -> None:
        log.warning("%s: log start offset %d is past the log end %d; deleting every segment", self.tp, offset,
                    self._log_end_offset)
        for segment in self._segments:
            segment.delete_files()
        self._segments = SegmentList([LogSegment(self.directory, offset, self.config, active=True)])
        self._log_end_offset = offset
        files.fsync_dir(self.directory)

    def _rebuild_producer_state(self) -> None:
        """Load the newest snapshot (at or before the first recovered segment, whose
        .txnindex the replay rebuilds), then replay batch headers after it; only
        transaction markers are decoded (their record holds the type and epoch)."""
        # Snapshots past the end describe batches that recovery or truncation removed.
        self.producer_state.delete_snapshots_after(self._log_end_offset)
        replay_from = self._log_end_offset if self._replay_from is None else min(self._replay_from, self._log_end_offset)
        self._replay_from = None
        start = self.producer_state.load_latest_snapshot(replay_from)
        start = max(start, self.log_start_offset)
        for segment in self._segments.from_offset(start):
            found = segment.translate_offset(start)
            if found is None:
                continue
            for position, header in segment.batches_from(found[0]):
                if header.producer_id >= 0:
                    if header.attributes & CONTROL_MASK:
                        self._apply_control_batch(segment, position, header)
                    else:
                        self.producer_state.update(header)
        self.producer_state.update_map_end_offset(self._log_end_offset)

    def _apply_control_batch(self, segment: LogSegment, position: int, header: BatchHeader) -> None:
        """Producer state for a control batch ``segment`` holds at ``position``: the one
        place for the leader's append, a follower's and the replay at load, so all
        three end with the same state."""
        marker: ControlRecord | None = None
        try:
            if header.record_count > 0:  # a cleaner empties a marker it keeps for its epoch alone
                marker = read_control_record(segment.read_batch(position, header.size))
        except CorruptRecordError as exc:
            # Checked on the leader's append; a Kafka log may hold anything: the batch
            # then ends no transaction, as a control record of an unknown type.
            log.warning("%s: unreadable control batch at offset %d: %s", self.tp, header.base_offset, exc)
            marker = None
        completed = self.producer_state.update(header, marker)
        if completed is not None and completed.is_aborted:
            # Skipped when the index already has it: a replay over a segment that kept its index.
            segment.txn_index.append(AbortedTxn(completed.producer_id, completed.first_offset,
                                                completed.last_offset, completed.last_stable_offset))

    def aborted_transactions(self, start_offset: int, upper_bound_offset: int) -> list[tuple[int, int]]:
        """(producer id, first offset) of every aborted transaction that overlaps
        [start_offset, upper_bound_offset): what a read_committed consumer must drop from
        a fetch starting at ``start_offset`` (Kafka's collectAbortedTransactions, reading
        the .txnindex of the segments from the one holding ``start_offset``)."""
        out: list[tuple[int, int]] = []
        for segment in self._segments.from_offset(start_offset):
            if segment.txn_index.collect(start_offset, upper_bound_offset, out):
                break
        return out

    def remove_expired_producers(self, now: int, expiration_ms: int) -> list[int]:
        """producer.id.expiration.ms (owner thread): see ProducerStateManager's."""
        return self.producer_state.remove_expired_producers(now, expiration_ms)

    def update_config(self, config: LogConfig) -> None:
        """Apply new topic settings; the active segment keeps its map size until it rolls."""
        self.config = config
        for segment in self._segments:
            segment.config = dataclasses.replace(config, segment_bytes=segment.config.segment_bytes) if segment.is_active else config

    # ----------------------------------------------------------------- marks
    @property
    def log_end_offset(self) -> int:
        return self._log_end_offset

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    def set_replicated(self, replicated: bool) -> None:
        """Whether other replicas must have a record before it is committed; without them
        the high watermark is the log end."""
        self.replicated = replicated
        if not replicated:
            self._high_watermark = self._log_end_offset
            self.producer_state.on_high_watermark(self._high_watermark)

    def advance_high_watermark(self, offset: int) -> bool:
        """Move the high watermark forward to ``offset`` (never past the log end, never
        back); True when it moved."""
        offset = min(offset, self._log_end_offset)
        if offset <= self._high_watermark:
            return False
        self._high_watermark = offset
        self.producer_state.on_high_watermark(offset)
        return True

    @property
    def last_stable_offset(self) -> int:
        """The LSO: below it every transaction is decided and replicated (the first
        unstable offset, capped at the high watermark, never below the log start, as
        Kafka's: DeleteRecords may pass the start of an open transaction)."""
        first_unstable = self.producer_state.first_unstable
        hw = self._high_watermark
        return max(first_unstable, self.log_start_offset) if 0 <= first_unstable < hw else hw

    @property
    def segments(self) -> SegmentList:
        return self._segments

    @property
    def size_in_bytes(self) -> int:
        return self._segments.size_in_bytes()

    @property
    def unflushed_messages(self) -> int:
        return self._appended_messages - self._flushed_messages

    # ----------------------------------------------------------------- append
    def append(self, records: bytes | bytearray | memoryview, *, leader_epoch: int = 0,
               now: int | None = None) -> AppendInfo:
        """Validate, then append a producer's record set (one or more batches)."""
        self.check_online()
        now = now_ms() if now is None else now
        with memoryview(records) as view:
            headers = self._validate(view, now)
            codec = self.config.target_codec
            if codec is not None and needs_recompression(headers, codec):
                # Appended as if the producer had sent it so (and validated again: the
                # rebuilt batch must fit max.message.bytes too).
                rebuilt = recompress(view, headers, codec, self.config.target_level)
                return self.append(rebuilt, leader_epoch=leader_epoch, now=now)
            record_count = sum(h.last_offset_delta + 1 for _, h in headers)
            first_offset = self._log_end_offset
            last_offset = first_offset + record_count - 1
            segment = self._maybe_roll(len(view), last_offset, now)
            start = segment.size  # where the set lands in the segment
            if leader_epoch != self.epochs.latest_epoch:
                self.epochs.assign(leader_epoch, first_offset)
            append_time = now if self.config.log_append_time else None
            self._log_end_offset = segment.append_batches(view, headers, first_offset, leader_epoch, append_time)
            size = len(view)
        max_timestamp, offset_of_max = -1, first_offset
        offset = first_offset
        for position, header in headers:
            last = offset + header.last_offset_delta
            timestamp = now if append_time is not None else header.max_timestamp
            if timestamp > max_timestamp:
                max_timestamp, offset_of_max = timestamp, last
            if header.producer_id >= 0:
                stamped = header._replace(base_offset=offset, partition_leader_epoch=leader_epoch)
                if header.attributes & CONTROL_MASK:
                    self._apply_control_batch(segment, start + position, stamped)
                else:
                    self.producer_state.update(stamped)
            offset = last + 1
        self.producer_state.update_map_end_offset(self._log_end_offset)
        self._after_append(record_count)
        return AppendInfo(first_offset, last_offset, max_timestamp, offset_of_max,
                          now if append_time is not None else -1, self.log_start_offset,
                          record_count, len(headers), size)

    def append_marker(self, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int, *,
                      leader_epoch: int, now: int | None = None, transaction_version: int = 0) -> AppendInfo:
        """Append a COMMIT or ABORT marker (one control batch) for ``producer_id``'s
        transaction, as the transaction coordinator asks through WriteTxnMarkers.
        LogDirOfflineError once its log dir failed.

        Refused (nothing written) with InvalidProducerEpochError when the producer has
        written with a newer epoch, TransactionCoordinatorFencedError when a newer
        coordinator already wrote a marker for it. A producer with no open transaction
        here still gets its marker (Kafka's rule: harmless, and a retried marker must
        not fail). ``transaction_version``: the transaction's, for the verifications the
        marker voids (ProducerStateManager.marker_written)."""
        self.check_online()
        code = self.producer_state.check_marker(producer_id, producer_epoch, coordinator_epoch)
        if code == INVALID_PRODUCER_EPOCH:
            raise InvalidProducerEpochError(f"{self.tp}: marker of producer {producer_id} with epoch {producer_epoch}, "
                                            f"older than {self.producer_state.entries[producer_id].producer_epoch}")
        if code == TRANSACTION_COORDINATOR_FENCED:
            raise TransactionCoordinatorFencedError(
                f"{self.tp}: marker of producer {producer_id} from coordinator epoch {coordinator_epoch}, older than "
                f"{self.producer_state.entries[producer_id].coordinator_epoch}")
        now = now_ms() if now is None else now
        batch = encode_control_batch(CONTROL_TYPE_COMMIT if commit else CONTROL_TYPE_ABORT, coordinator_epoch,
                                     producer_id=producer_id, producer_epoch=producer_epoch, timestamp=now)
        info = self.append(batch, leader_epoch=leader_epoch, now=now)
        self.producer_state.marker_written(producer_id, producer_epoch, transaction_version)
        return info

    def _after_append(self, record_count: int) -> None:
        if not self.replicated:
            self._high_watermark = self._log_end_offset
            if self.producer_state.unreplicated:
                self.producer_state.on_high_watermark(self._high_watermark)
        self._appended_messages += record_count
        if self.unflushed_messages >= self.config.flush_messages:
            self.flush()

    def append_as_follower(self, records: bytes | bytearray | memoryview) -> AppendInfo | None:
        """Append batches fetched from the leader as they are: offsets, leader epochs and
        timestamps kept, nothing re-encoded. Each batch is checked (CRC included) and must
        start at or after the log end, in order. None for an empty record set."""
        self.check_online()
        with memoryview(records) as view:
            end = len(view)
            headers: list[tuple[int, BatchHeader]] = []
            position, expected = 0, self._log_end_offset
            while position + HEADER_SIZE <= end:
                if position + LOG_OVERHEAD + LOG_OVERHEAD_STRUCT.unpack_from(view, position)[1] > end:
                    break  # a partial batch: the fetch stopped inside it
                header = check_batch_frame(view, position, end)
                if header.base_offset < expected:
                    raise CorruptRecordError(f"{self.tp}: replicated batch at offset {header.base_offset} is below "
                                             f"the next expected offset {expected}")
                headers.append((position, header))
                expected = header.base_offset + header.last_offset_delta + 1
                position += header.size
            if not headers:
                return None  # a partial batch at the end of a fetch is normal: the next fetch brings it whole
            size = position
            first_offset, last_offset = headers[0][1].base_offset, expected - 1
            segment = self._maybe_roll(size, last_offset, now_ms())
            start = segment.size
            for _position, header in headers:
                if header.partition_leader_epoch != self.epochs.latest_epoch:
                    self.epochs.assign(header.partition_leader_epoch, header.base_offset)
            self._log_end_offset = segment.append_batches_as_they_are(view[:size], headers)
        max_timestamp, offset_of_max = -1, first_offset
        record_count = 0
        for position, header in headers:
            if header.max_timestamp > max_timestamp:
                max_timestamp, offset_of_max = header.max_timestamp, header.base_offset + header.last_offset_delta
            if header.producer_id >= 0:
                if header.attributes & CONTROL_MASK:
                    self._apply_control_batch(segment, start + position, header)
                else:
                    self.producer_state.update(header)
            record_count += header.record_count
        self.producer_state.update_map_end_offset(self._log_end_offset)
        self._after_append(record_count)
        return AppendInfo(first_offset, last_offset, max_timestamp, offset_of_max, -1, self.log_start_offset,
                          record_count, len(headers), size)

    def _validate(self, view: memoryview, now: int) -> list[tuple[int, BatchHeader]]:
        end = len(view)
        config = self.config
        # CreateTime bounds, once per append: the newest timestamp the header may carry, and
        # (only when message.timestamp.before.max.ms is set low enough to matter) the oldest.
        check_times = not config.log_append_time
        latest_allowed = now + config.message_timestamp_after_max_ms
        earliest_allowed = now - config.message_timestamp_before_max_ms if config.message_timestamp_before_max_ms < now else -1
        if end == 0:
            raise CorruptRecordError("empty record set")
        if end > config.segment_bytes:
            raise RecordBatchTooLargeError(f"{end} bytes exceed segment.bytes {config.segment_bytes}")
        headers: list[tuple[int, BatchHeader]] = []
        position = 0
        compact = config.compact
        while position < end:
            header = check_producer_batch(view, position, end)
            size = header.size
            if size > config.max_message_bytes:
                raise RecordTooLargeError(f"batch of {size} bytes exceeds max.message.bytes {config.max_message_bytes}")
            if header.attributes & CONTROL_MASK:
                read_control_record(view, position)  # a marker that later replays the same way
            elif compact:
                _require_keys(view, position, header)
            if check_times:
                if header.max_timestamp > latest_allowed:
                    raise InvalidTimestampError(
                        f"timestamp {header.max_timestamp} is more than message.timestamp.after.max.ms "
                        f"({config.message_timestamp_after_max_ms}) after the broker's time {now}")
                if earliest_allowed >= 0:
                    _check_earliest(view, position, earliest_allowed, now, config)
            headers.append((position, header))
            position += size
        return headers

    def _maybe_roll(self, size: int, last_offset: int, now: int) -> LogSegment:
        active = self._segments.active
        if not active.can_hold(size, last_offset) or active.should_roll_for_time(now):
            return self.roll()
        return active

    def roll(self) -> LogSegment:
        """Seal the active segment and start a new one at the log end offset."""
        active = self._segments.active
        if active.size == 0:
            return active
        with self._flush_lock:  # seal closes the map and index maps a flusher may be syncing
            active.seal()
        segment = LogSegment(self.directory, self._log_end_offset, self.config, active=True)
        self.producer_state.take_snapshot(self._log_end_offset, in_background=True)
        self._segments = self._segments.with_appended(segment)
        self._dir_dirty = True
        return segment

    # ----------------------------------------------------------------- read
    def read(self, offset: int, max_bytes: int, *, min_one_batch: bool = True, committed: bool = False,
             read_committed: bool = False) -> ReadInfo:
        """Where the whole batches from ``offset`` lie (one segment's worth at most);
        ``committed``: only below the high watermark (consumers; followers read to the end);
        ``read_committed``: only below the last stable offset (isolation.level
        read_committed consumers)."""
        self.check_online()
        segments = self._segments
        end = self._log_end_offset
        if offset < self.log_start_offset or offset > end:
            raise OffsetOutOfRangeError(f"{self.tp}: offset {offset} outside [{self.log_start_offset}, {end}]")
        file_range = None
        hw = self._high_watermark
        first_unstable = self.producer_state.first_unstable
        lso = max(first_unstable, self.log_start_offset) if 0 <= first_unstable < hw else hw
        limit_offset = lso if read_committed else hw if committed else end
        if offset < limit_offset:
            limit = self._position_limit(limit_offset, read_committed and lso < hw) if limit_offset < end else None
            for segment in segments.from_offset(offset):
                max_position = limit[1] if limit is not None and segment.base_offset == limit[0] else None
                if limit is not None and segment.base_offset > limit[0]:
                    break
                file_range = segment.read(offset, max_bytes, max_position=max_position, min_one_batch=min_one_batch)
                # Stop at the segment holding the offset even when its batch did not fit
                # (min_one_batch=False): moving on would skip that batch.
                if file_range is not None or segment.next_offset > offset:
                    break
        return ReadInfo(file_range, hw, self.log_start_offset, end, lso)

    def _position_limit(self, offset: int, is_lso: bool) -> tuple[int, int]:
        """(base offset of the segment holding ``offset``, its position there), for the
        high watermark or the LSO, each cached: both are batch boundaries (replicas
        append whole batches; a transaction starts at its first batch)."""
        segments = self._segments
        cached = self._lso_position if is_lso else self._hw_position
        if cached is not None and cached[0] == offset and cached[1] is segments:
            return cached[2], cached[3]
        segment = segments[max(0, segments.floor(offset))]
        found = segment.translate_offset(offset)
        position = found[0] if found is not None else segment.size
        entry = (offset, segments, segment.base_offset, position)
        if is_lso:
            self._lso_position = entry
        else:
            self._hw_position = entry
        return segment.base_offset, position

    def read_bytes(self, offset: int, max_bytes: int) -> bytes:
        """``read`` copied into memory: for tests, tools and the cleaner, not for fetch."""
        info = self.read(offset, max_bytes)
        if info.file_range is None:
            return b""
        return os.pread(info.file_range.fd, info.file_range.length, info.file_range.position)

    def iter_batch_headers(self, start_offset: int = 0) -> Iterator[BatchHeader]:
        """Every batch header whose last offset >= start_offset, in order."""
        for segment in self._segments.from_offset(start_offset):
            found = segment.translate_offset(start_offset)
            if found is None:
                continue
            for _position, header in segment.batches_from(found[0]):
                yield header

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """ListOffsets: (offset, timestamp) of the first record at or after ``timestamp``."""
        if timestamp == EARLIEST_TIMESTAMP:
            return self.log_start_offset, -1
        if timestamp == LATEST_TIMESTAMP:
            return self._high_watermark, -1
        if timestamp == LATEST_STABLE:
            return self.last_stable_offset, -1
        segments = self._segments
        if timestamp == MAX_TIMESTAMP:
            best = max(segments, key=lambda s: s.max_timestamp)
            if best.max_timestamp < 0:
                return None
            # KIP-734: the offset of the record carrying the max, not its batch's last.
            return _search_segment_for_timestamp(best, best.max_timestamp, self.log_start_offset)
        for segment in segments:
            if segment.max_timestamp < timestamp or segment.next_offset <= self.log_start_offset:
                continue
            found = _search_segment_for_timestamp(segment, timestamp, self.log_start_offset)
            if found is not None:
                return found
        return None

    # ----------------------------------------------------------------- flush
    def flush(self) -> None:
        """fsync every segment holding unflushed data; advance the recovery point."""
        self.check_online()
        with self._flush_lock:
            target = self._log_end_offset
            appended = self._appended_messages
            if target <= self.recovery_point and not self._dir_dirty:
                return
            began = time.perf_counter()
            for segment in self._segments:
                if segment.next_offset > self.recovery_point or segment.is_active:
                    segment.flush()
            if self._dir_dirty:
                self._dir_dirty = False
                files.fsync_dir(self.directory)
            self.recovery_point = max(self.recovery_point, target)
            self._flushed_messages = appended
            self._last_flush_ms = now_ms()
            FlushTimes.add(time.perf_counter() - began)

    def flush_if_due(self, now: int | None = None) -> bool:
        """Time-based policy (flush.ms): flush when unflushed data is older than that."""
        now = now_ms() if now is None else now
        if self.offline:
            return False
        if self._log_end_offset > self.recovery_point and now - self._last_flush_ms >= self.config.flush_ms:
            self.flush()
            return True
        return False

    # ----------------------------------------------------------------- truncation & retention
    def truncate_to(self, offset: int) -> None:
        """Remove every batch from the one starting at ``offset`` on (a batch boundary)."""
        if offset >= self._log_end_offset:
            return
        if offset < self.log_start_offset:
            raise OffsetOutOfRangeError(f"cannot truncate {self.tp} below its log start {self.log_start_offset}")
        # The files must be what the log says before they are cut and reread: earlier
        # rolls' cuts and producer snapshots may still be queued (storage/releaser.py).
        self._finish_queued_file_work()
        segments = self._segments
        keep_index = max(0, segments.floor(offset))
        keep = segments[keep_index]
        dropped = list(segments)[keep_index + 1 :]
        with self._flush_lock:
            if not keep.is_active:
                # The sealed object stays open for readers of older snapshots; its fds are
                # closed after file.delete.delay.ms like a deleted segment's.
                self._schedule_close(keep)
                keep = LogSegment(self.directory, keep.base_offset, self.config, active=True)
            keep.truncate_to(offset)
        self._segments = SegmentList([*list(segments)[:keep_index], keep])
        for segment in dropped:
            segment.rename_with_suffix(files.DELETED_SUFFIX)
            self._schedule_delete(segment)
        self._log_end_offset = keep.next_offset
        self.recovery_point = min(self.recovery_point, self._log_end_offset)
        self._high_watermark = min(self._high_watermark, self._log_end_offset)
        self._hw_position = self._lso_position = None
        self.epochs.truncate_from_end(self._log_end_offset)
        self._rebuild_producer_state()
        self.producer_state.on_high_watermark(self._high_watermark)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """A follower whose whole log lies before its leader's log start: drop it all and
        continue at ``offset``."""
        self._finish_queued_file_work()
        with self._flush_lock:
            self._restart_at(offset)
        self.log_start_offset = offset
        self.recovery_point = offset
        self._high_watermark = offset
        self._hw_position = self._lso_position = None
        self.epochs.clear()
        self.producer_state.truncate_and_reload(offset, offset)
        self._rebuild_producer_state()
        self.producer_state.on_high_watermark(self._high_watermark)

    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: move the log start offset to ``offset``; return the new start."""
        if offset > self.high_watermark or offset < 0:
            raise OffsetOutOfRangeError(f"{self.tp}: cannot delete records before {offset} (high watermark {self.high_watermark})")
        if offset > self.log_start_offset:
            self.log_start_offset = offset
            self.epochs.truncate_from_start(offset)
            self._delete_segments_below_start()
        return self.log_start_offset

    def delete_old_segments(self, now: int | None = None) -> int:
        """Retention (cleanup.policy includes delete): by time, then by size."""
        now = now_ms() if now is None else now
        deleted = self._delete_segments_below_start()
        if not self.config.delete:
            return deleted
        if self.config.retention_ms >= 0:
            deleted += self._delete_prefix(lambda s, _excess: s.retention_timestamp < now - self.config.retention_ms)
        if self.config.retention_bytes >= 0:
            excess = [self.size_in_bytes - self.config.retention_bytes]

            def too_big(segment: LogSegment, _unused: None) -> bool:
                if excess[0] - segment.size >= 0:
                    excess[0] -= segment.size
                    return True
                return False

            deleted += self._delete_prefix(too_big)
        return deleted

    def _delete_segments_below_start(self) -> int:
        segments = self._segments
        dead = [s for i, s in enumerate(segments) if i + 1 < len(segments) and segments[i + 1].base_offset <= self.log_start_offset]
        if dead:
            self._drop_segments(dead)
        return len(dead)

    def _delete_prefix(self, should_delete: Callable[[LogSegment, None], bool]) -> int:
        segments = list(self._segments)
        dead: list[LogSegment] = []
        for segment in segments:
            # Never past the high watermark: followers may still need those records.
            if segment.size == 0 or segment.next_offset > self._high_watermark or not should_delete(segment, None):
                break
            dead.append(segment)
        if not dead:
            return 0
        if len(dead) == len(segments):
            # Everything expired: roll so the active segment can go too (Kafka does this).
            self.roll()
        self._drop_segments(dead)
        self.log_start_offset = max(self.log_start_offset, self._segments[0].base_offset)
        self.epochs.truncate_from_start(self.log_start_offset)
        return len(dead)

    def _drop_segments(self, dead: list[LogSegment]) -> None:
        self._segments = self._segments.without(dead)
        for segment in dead:
            segment.rename_with_suffix(files.DELETED_SUFFIX)
            self._schedule_delete(segment)
        self._dir_dirty = True
        self.producer_state.delete_snapshots_before(self._segments[0].base_offset)

    def replace_segments(self, old: list[LogSegment], new: list[LogSegment]) -> None:
        """Swap cleaner output in for its sources (owner thread only).

        The caller has already renamed each source to ``.deleted``: the cleaned copy takes
        the source's file name, so the cleaner must free it before the swap.
        """
        for segment in old:
            assert segment.path.endswith(files.DELETED_SUFFIX), f"{segment.path} still holds its live name"
        self._segments = self._segments.replaced(old, new)
        for segment in old:
            self._schedule_delete(segment)
        self._dir_dirty = True

    def _schedule_delete(self, segment: LogSegment) -> None:
        if self.config.file_delete_delay_ms <= 0:
            with self._flush_lock:
                segment.delete_files()
        else:
            self._pending_deletes.append((now_ms() + self.config.file_delete_delay_ms, segment, True))

    def _schedule_close(self, segment: LogSegment) -> None:
        """Close (not delete) a replaced segment object once readers had time to finish.
        Caller holds the flush lock."""
        if self.config.file_delete_delay_ms <= 0:
            segment.close()
        else:
            self._pending_deletes.append((now_ms() + self.config.file_delete_delay_ms, segment, False))

    def delete_pending_files(self, now: int | None = None, force: bool = False) -> int:
        """Unlink segments whose file.delete.delay.ms grace period has passed."""
        now = now_ms() if now is None else now
        due = [entry for entry in self._pending_deletes if force or entry[0] <= now]
        if not due:
            return 0
        with self._flush_lock:
            for _t, segment, unlink in due:
                if unlink:
                    segment.delete_files()
                else:
                    segment.close()
        self._pending_deletes = [entry for entry in self._pending_deletes if not (force or entry[0] <= now)]
        return len(due)

    # ----------------------------------------------------------------- close
    def check_online(self) -> None:
        """Raise LogDirOfflineError if this log's dir failed."""
        if self.offline:
            raise LogDirOfflineError(f"{self.tp}: its log dir {os.path.dirname(self.directory)} is offline")

    def close(self) -> None:
        """Clean close: flush, snapshot producer state, trim every file to its length.
        A log of a failed dir is only let go (its files may not take a write)."""
        if self.offline:
            self.close_for_deletion()
            return
        self.flush()
        RELEASER.drain()  # a roll's snapshot of this same offset may still be queued
        self.producer_state.take_snapshot(self._log_end_offset)
        for segment in self._segments:
            segment.close()
        self.delete_pending_files(force=True)
        RELEASER.drain()  # the cuts of earlier rolls: a closed log is byte for byte Kafka's

    def close_for_deletion(self) -> None:
        """Let go of every file without flushing, snapshotting or trimming: the log is
        about to be removed (a deleted topic; the caller renames its directory and
        removes it). Maps and fds go to the block releaser (storage/releaser.py); a clean
        close cost a deleted topic's worker an fsync per segment and the trims of its
        active files."""
        with self._flush_lock:
            for segment in [*self._segments, *(entry[1] for entry in self._pending_deletes)]:
                segment.release_files(unlink=False)  # the caller removes the directory
            self._pending_deletes = []

    def delete(self) -> None:
        """Close and remove every file of this log (the directory too)."""
        for segment in self._segments:
            segment.delete_files()
        self.delete_pending_files(force=True)
        RELEASER.drain()  # the segments' unlinks
        for name in os.listdir(self.directory):
            os.unlink(os.path.join(self.directory, name))
        os.rmdir(self.directory)


def _require_keys(view: memoryview, position: int, header: BatchHeader) -> None:
    """Compacted topics need a key on every record (Kafka: INVALID_RECORD otherwise)."""
    from storage.records import decode_batch

    _header, records = decode_batch(view[position : position + header.size])
    for record in records:
        if record.key is None:
            raise InvalidRecordError("compacted topic: a record has no key")


def _check_earliest(view: memoryview, position: int, earliest_allowed: int, now: int, config: LogConfig) -> None:
    """message.timestamp.before.max.ms needs each record's timestamp (the header gives only
    the first and the largest), so the batch is decoded: only when the setting is below its
    default. Kafka checks every record; -1, no timestamp, always passes."""
    _header, records = decode_batch(view, position)
    for record in records:
        if 0 <= record.timestamp < earliest_allowed:
            raise InvalidTimestampError(f"timestamp {record.timestamp} is more than message.timestamp.before.max.ms "
                                        f"({config.message_timestamp_before_max_ms}) before the broker's time {now}")


def _search_segment_for_timestamp(segment: LogSegment, timestamp: int, log_start: int) -> tuple[int, int] | None:
    from storage.records import decode_batch

    _ts, indexed_offset = segment.time_index.lookup(timestamp)
    _o, position = segment.offset_index.lookup(max(indexed_offset, log_start))
    for pos, header in segment.batches_from(position):
        if header.max_timestamp < timestamp or header.last_offset < log_start:
            continue
        raw = os.pread(segment.fd, header.size, pos)
        _h, records = decode_batch(raw)
        for record in records:
            if record.timestamp >= timestamp and record.offset >= log_start:
                return record.offset, record.timestamp
    return None


def _only_an_untrimmed_tail(segment: LogSegment, next_base: int | None) -> bool:
    """A crash during a roll leaves zeros after the data of a segment that is no longer
    the last; the next segment then starts exactly where this one's data ends."""
    assert segment.recovery is not None
    return segment.recovery.quarantine_path is None and next_base == segment.next_offset


def _delete_segment_files(directory: str, base_offset: int) -> None:
    for path in (files.log_path(directory, base_offset), files.index_path(directory, base_offset),
                 files.time_index_path(directory, base_offset), files.txn_index_path(directory, base_offset)):
        files.unlink_if_exists(path)


def _finish_interrupted_operations(directory: str) -> None:
    """Kafka's rules for files left in transit by a crash.

    1. ``.deleted``, ``.cleaned`` and ``.tmp`` files are garbage: remove them.
    2. A ``.log.swap`` file is a complete cleaner output: it replaces the segment of the
       same base offset (whose files are removed), then loses its suffix; so does the
       ``.txnindex.swap`` beside it. Any other ``.swap`` file is garbage.
    """
    names = os.listdir(directory)
    for name in names:
        if name.endswith((files.DELETED_SUFFIX, files.CLEANED_SUFFIX, ".tmp")):
            os.unlink(os.path.join(directory, name))
    log_swap = files.LOG_SUFFIX + files.SWAP_SUFFIX
    swapped = {files.offset_from_filename(name) for name in names if name.endswith(log_swap)}
    for base in swapped:
        for path in (files.index_path(directory, base), files.time_index_path(directory, base),
                     files.txn_index_path(directory, base)):
            if os.path.exists(path):
                os.unlink(path)  # the segment rebuilds missing indexes from the log
    for name in names:
        if not name.endswith(files.SWAP_SUFFIX):
            continue
        promoted = name.endswith(log_swap) or (
            name.endswith(files.TXN_INDEX_SUFFIX + files.SWAP_SUFFIX) and files.offset_from_filename(name) in swapped)
        if promoted:
            os.replace(os.path.join(directory, name), os.path.join(directory, name[: -len(files.SWAP_SUFFIX)]))
        else:
            os.unlink(os.path.join(directory, name))
