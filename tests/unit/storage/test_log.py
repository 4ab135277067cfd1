"""PartitionLog with real files: append, read, roll, indexes, flush, retention, close."""

from __future__ import annotations

import os
import struct

import pytest

from storage import files
from storage.batch import TIMESTAMP_TYPE_LOG_APPEND, parse_header
from storage.config import LogConfig
from storage.errors import (
    CorruptRecordError,
    InvalidRecordError,
    OffsetOutOfRangeError,
    RecordBatchTooLargeError,
    RecordTooLargeError,
)
from storage.log import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP
from storage.records import Record, encode_batch, iter_batches
from storage.releaser import RELEASER
from tests.unit.storage.helpers import batch, open_log, read_all

SMALL = LogConfig(segment_bytes=16 * 1024, index_interval_bytes=512)


def test_offsets_are_assigned_in_order_across_batches(tmp_path):
    log = open_log(tmp_path)
    first = log.append(batch(count=3))
    second = log.append(batch(count=2) + batch(count=1))  # two batches in one record set
    assert (first.first_offset, first.last_offset) == (0, 2)
    assert (second.first_offset, second.last_offset, second.batch_count) == (3, 5, 2)
    assert log.log_end_offset == log.high_watermark == 6
    assert [r.offset for r in read_all(log)] == list(range(6))
    log.close()


def test_appended_bytes_are_the_clients_bytes_except_offset_and_epoch(tmp_path):
    log = open_log(tmp_path)
    log.append(batch(count=1))
    raw = batch(count=2, value_size=300)
    log.append(raw, leader_epoch=5)
    stored = log.read_bytes(1, 1 << 20)
    assert stored[12:16] == struct.pack(">i", 5)
    assert stored[:8] == struct.pack(">q", 1)
    assert stored[16:] == raw[16:]  # magic, CRC, attributes ... records untouched
    log.close()


@pytest.mark.parametrize("bad", [b"", b"\x00" * 70, batch(count=1)[:-3]])
def test_a_rejected_record_set_writes_nothing(tmp_path, bad):
    log = open_log(tmp_path)
    log.append(batch())
    size = log.size_in_bytes
    with pytest.raises(CorruptRecordError):
        log.append(batch() + bad if bad else bad)
    assert log.log_end_offset == 1 and log.size_in_bytes == size
    log.close()


def test_batch_over_max_message_bytes_is_refused(tmp_path):
    log = open_log(tmp_path, LogConfig(max_message_bytes=1000))
    with pytest.raises(RecordTooLargeError):
        log.append(batch(count=1, value_size=2000))
    assert log.log_end_offset == 0
    log.close()


def test_record_set_larger_than_a_segment_is_refused(tmp_path):
    log = open_log(tmp_path, LogConfig(segment_bytes=4096))
    with pytest.raises(RecordBatchTooLargeError):
        log.append(batch(count=1, value_size=5000))
    log.close()


def test_compacted_topic_refuses_records_without_keys(tmp_path):
    log = open_log(tmp_path, LogConfig(cleanup_policy="compact"))
    with pytest.raises(InvalidRecordError):
        log.append(batch(count=2, key=None))
    log.append(batch(count=2, key=b"user-1"))
    assert log.log_end_offset == 2
    log.close()


def test_log_append_time_topic_stamps_the_batch(tmp_path):
    log = open_log(tmp_path, LogConfig(message_timestamp_type="LogAppendTime"))
    info = log.append(batch(count=2, timestamp=5), now=1_700_000_000_000)
    assert info.log_append_time == 1_700_000_000_000
    [(header, records)] = list(iter_batches(log.read_bytes(0, 1 << 20)))
    assert header.timestamp_type == TIMESTAMP_TYPE_LOG_APPEND
    assert header.max_timestamp == 1_700_000_000_000
    assert all(r.timestamp == 1_700_000_000_000 for r in records)
    log.close()


def test_segments_roll_on_size_and_reads_cross_them(tmp_path):
    log = open_log(tmp_path, SMALL)
    for _ in range(100):
        log.append(batch(count=2, value_size=200))
    assert len(log.segments) >= 3
    bases = [s.base_offset for s in log.segments]
    assert bases == sorted(bases) and bases[0] == 0
    for segment in list(log.segments)[:-1]:
        assert segment.size <= SMALL.segment_bytes
    assert [r.offset for r in read_all(log)] == list(range(200))
    for offset in (0, 1, 57, 58, 199):
        raw = log.read_bytes(offset, 1)
        header = parse_header(raw)
        assert header.base_offset <= offset <= header.last_offset
    log.close()


def test_roll_when_the_offset_index_is_full(tmp_path):
    config = LogConfig(segment_index_bytes=8 * 3, index_interval_bytes=1)
    log = open_log(tmp_path, config)
    for _ in range(10):
        log.append(batch(count=1))
    assert len(log.segments) >= 3
    assert all(s.offset_index.entries <= 3 for s in log.segments)
    assert [r.offset for r in read_all(log)] == list(range(10))
    log.close()


def test_roll_on_segment_ms(tmp_path):
    log = open_log(tmp_path, LogConfig(segment_ms=1000))
    log.append(batch(), now=10_000)
    segment = log.segments.active
    segment.rolling_base_ms = 10_000
    log.append(batch(), now=10_500)
    assert len(log.segments) == 1
    log.append(batch(), now=11_001)
    assert len(log.segments) == 2 and log.segments.active.base_offset == 2
    log.close()


def test_read_returns_whole_batches_and_the_first_even_if_too_big(tmp_path):
    log = open_log(tmp_path)
    sizes = []
    for count in (1, 2, 3, 4):
        sizes.append(len(batch(count=count, value_size=100)))
        log.append(batch(count=count, value_size=100))
    rng = log.read(0, sizes[0] + sizes[1] + 10).file_range
    assert rng.length == sizes[0] + sizes[1]
    rng = log.read(0, 5).file_range
    assert rng.length == sizes[0]
    assert log.read(0, 5, min_one_batch=False).file_range is None
    # An offset in the middle of a batch starts at that batch.
    rng = log.read(4, 1 << 20).file_range
    assert rng.position == sizes[0] + sizes[1] and rng.length == sizes[2] + sizes[3]
    log.close()


def test_read_gives_a_descriptor_range_for_sendfile(tmp_path):
    log = open_log(tmp_path, SMALL)
    for _ in range(50):
        log.append(batch(count=1, value_size=500))
    info = log.read(30, 4096)
    rng = info.file_range
    assert info.high_watermark == 50 and info.log_end_offset == 50
    raw = os.pread(rng.fd, rng.length, rng.position)
    assert parse_header(raw).base_offset == 30
    with open(rng.path, "rb") as handle:
        handle.seek(rng.position)
        assert handle.read(rng.length) == raw
    log.close()


def test_offsets_out_of_range(tmp_path):
    log = open_log(tmp_path)
    log.append(batch(count=3))
    assert log.read(3, 100).file_range is None  # at the end: nothing yet, no error
    with pytest.raises(OffsetOutOfRangeError):
        log.read(4, 100)
    log.delete_records_before(2)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(1, 100)
    assert log.read(2, 1 << 20).file_range is not None
    log.close()


def test_offset_for_timestamp(tmp_path):
    log = open_log(tmp_path, SMALL)
    for i in range(60):
        log.append(batch(count=2, value_size=300, timestamp=1_000 + 10 * i))
    # batch i holds timestamps 1000+10i and 1001+10i at offsets 2i and 2i+1
    assert log.offset_for_timestamp(1_000) == (0, 1_000)
    assert log.offset_for_timestamp(1_001) == (1, 1_001)
    assert log.offset_for_timestamp(1_002) == (2, 1_010)
    assert log.offset_for_timestamp(1_305) == (62, 1_310)
    assert log.offset_for_timestamp(10_000) is None
    assert log.offset_for_timestamp(EARLIEST_TIMESTAMP) == (0, -1)
    assert log.offset_for_timestamp(LATEST_TIMESTAMP) == (120, -1)
    assert log.offset_for_timestamp(MAX_TIMESTAMP) == (119, 1_591)
    log.close()


def test_clean_close_trims_files_to_kafkas_layout(tmp_path):
    log = open_log(tmp_path, SMALL)
    for _ in range(30):
        log.append(batch(count=1, value_size=1000))
    data_sizes = {s.base_offset: s.size for s in log.segments}
    directory = log.directory
    log.close()
    for base, size in data_sizes.items():
        assert os.path.getsize(files.log_path(directory, base)) == size
        assert os.path.getsize(files.index_path(directory, base)) % 8 == 0
        assert os.path.getsize(files.time_index_path(directory, base)) % 12 == 0
        with open(files.log_path(directory, base), "rb") as handle:
            raw = handle.read()
        headers = [h for h, _ in iter_batches(raw)]
        assert sum(h.size for h in headers) == len(raw)
    reopened = open_log(tmp_path, SMALL)
    assert reopened.log_end_offset == 30
    assert [r.offset for r in read_all(reopened)] == list(range(30))
    reopened.append(batch())
    assert reopened.log_end_offset == 31
    reopened.close()


def test_index_entries_point_at_batches(tmp_path):
    log = open_log(tmp_path, LogConfig(index_interval_bytes=1000))
    for _ in range(40):
        log.append(batch(count=1, value_size=300))
    segment = log.segments.active
    assert segment.offset_index.entries > 5
    for n in range(segment.offset_index.entries):
        offset, position = segment.offset_index.entry(n)
        header = segment.read_header(position)
        assert header.last_offset == offset
    log.close()


def test_flush_policy_by_message_count_moves_the_recovery_point(tmp_path):
    log = open_log(tmp_path, LogConfig(flush_messages=5))
    for _ in range(4):
        log.append(batch(count=1))
    assert log.recovery_point == 0 and log.unflushed_messages == 4
    log.append(batch(count=1))
    assert log.recovery_point == 5 and log.unflushed_messages == 0
    log.close()


def test_flush_policy_by_time(tmp_path):
    log = open_log(tmp_path, LogConfig(flush_ms=100))
    log.append(batch(count=3))
    log._last_flush_ms = 1_000
    assert not log.flush_if_due(now=1_050)
    assert log.recovery_point == 0
    assert log.flush_if_due(now=1_100)
    assert log.recovery_point == 3
    log.close()


def test_retention_by_time_deletes_whole_old_segments(tmp_path):
    config = LogConfig(segment_bytes=16 * 1024, retention_ms=1_000, file_delete_delay_ms=0)
    log = open_log(tmp_path, config)
    for i in range(80):
        log.append(batch(count=1, value_size=1000, timestamp=10_000 + i))
    segments = list(log.segments)
    old_reader = log.read(0, 1 << 20).file_range
    # Everything stamped before 10_040 is older than 1 s at now=11_040.
    deleted = log.delete_old_segments(now=11_040)
    assert deleted >= 1
    remaining = list(log.segments)
    assert remaining[0].base_offset == log.log_start_offset > 0
    assert all(s.max_timestamp >= 10_040 for s in remaining[:-1])
    assert not os.path.exists(files.log_path(log.directory, 0))
    assert len(remaining) < len(segments)
    assert [r.offset for r in read_all(log)] == list(range(log.log_start_offset, 80))
    assert old_reader.position == 0
    log.close()


def test_a_reader_of_an_old_snapshot_survives_retention(tmp_path):
    log = open_log(tmp_path, LogConfig(segment_bytes=8 * 1024, retention_bytes=0, file_delete_delay_ms=60_000))
    for _ in range(30):
        log.append(batch(count=1, value_size=1000))
    rng = log.read(0, 2048).file_range
    expected = os.pread(rng.fd, rng.length, rng.position)
    assert log.delete_old_segments() > 0
    assert not os.path.exists(files.log_path(log.directory, 0))
    assert os.path.exists(files.log_path(log.directory, 0) + files.DELETED_SUFFIX)
    assert os.pread(rng.fd, rng.length, rng.position) == expected  # fd still valid
    assert log.delete_pending_files(force=True) > 0
    assert RELEASER.drain(timeout_s=10)  # the unlinks run on the releaser thread
    assert not os.path.exists(files.log_path(log.directory, 0) + files.DELETED_SUFFIX)
    log.close()


def test_retention_by_size(tmp_path):
    log = open_log(tmp_path, LogConfig(segment_bytes=8 * 1024, retention_ms=-1, retention_bytes=20 * 1024, file_delete_delay_ms=0))
    for _ in range(100):
        log.append(batch(count=1, value_size=1000))
    log.delete_old_segments()
    assert log.size_in_bytes <= 20 * 1024 + 8 * 1024
    assert log.size_in_bytes > 20 * 1024 - 8 * 1024
    assert [r.offset for r in read_all(log)] == list(range(log.log_start_offset, 100))
    log.close()


def test_everything_expired_rolls_and_deletes_the_active_segment_too(tmp_path):
    log = open_log(tmp_path, LogConfig(retention_ms=10, file_delete_delay_ms=0))
    log.append(batch(count=5, timestamp=1_000))
    assert log.delete_old_segments(now=100_000) == 1
    assert log.log_start_offset == log.log_end_offset == 5
    assert log.read(5, 100).file_range is None
    log.append(batch(count=1))
    assert log.log_end_offset == 6
    log.close()


def test_delete_records_before_advances_log_start_and_drops_segments(tmp_path):
    log = open_log(tmp_path, LogConfig(segment_bytes=8 * 1024, file_delete_delay_ms=0))
    for _ in range(40):
        log.append(batch(count=1, value_size=1000))
    assert log.delete_records_before(25) == 25
    assert log.segments[0].base_offset <= 25 < log.segments[0].next_offset
    assert read_all(log)[0].offset == 25
    with pytest.raises(OffsetOutOfRangeError):
        log.delete_records_before(41)
    log.close()
    reopened = open_log(tmp_path, LogConfig(segment_bytes=8 * 1024), log_start_offset=25)
    assert reopened.log_start_offset == 25
    reopened.close()


def test_truncate_to_removes_the_tail(tmp_path):
    log = open_log(tmp_path, SMALL)
    for _ in range(60):
        log.append(batch(count=1, value_size=500))
    log.truncate_to(20)
    assert log.log_end_offset == 20
    assert [r.offset for r in read_all(log)] == list(range(20))
    info = log.append(batch(count=2))
    assert info.first_offset == 20
    log.close()
    reopened = open_log(tmp_path, SMALL, clean_shutdown=False)
    assert reopened.log_end_offset == 22
    reopened.close()


def test_producer_state_survives_a_restart_through_snapshots(tmp_path):
    log = open_log(tmp_path, SMALL)
    for seq in range(0, 40, 2):
        log.append(batch(count=2, value_size=500, producer_id=42, base_sequence=seq))
    assert log.producer_state.entries[42].last_sequence == 39
    log.close()
    snapshots = [n for n in os.listdir(log.directory) if n.endswith(files.SNAPSHOT_SUFFIX)]
    assert f"{40:020d}.snapshot" in snapshots
    reopened = open_log(tmp_path, SMALL, clean_shutdown=False)
    assert reopened.producer_state.entries[42].last_sequence == 39
    assert reopened.producer_state.entries[42].last_offset == 39
    reopened.close()


def test_producer_batches_with_control_records_keep_their_bytes(tmp_path):
    log = open_log(tmp_path)
    records = [Record(0, 5, b"k", b"v"), Record(1, 6, None, None)]
    raw = encode_batch(records, producer_id=3, producer_epoch=1, base_sequence=0, is_transactional=True)
    log.append(raw)
    [(header, decoded)] = list(iter_batches(log.read_bytes(0, 1 << 20)))
    assert header.is_transactional and decoded[1].value is None
    log.close()


def test_roll_before_relative_offsets_overflow_u32(tmp_path):
    log = open_log(tmp_path)
    log.append(batch(count=1))
    active = log.segments.active
    assert active.can_hold(100, active.base_offset + (1 << 32) - 1)
    assert not active.can_hold(100, active.base_offset + (1 << 32))
    log.close()
