"""Log compaction (storage/cleaner.py) on real segment files in tmp_path."""

from __future__ import annotations

import os
import tempfile

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storage import cleaner, files
from storage.batch import (
    COMPRESSION_GZIP,
    COMPRESSION_LZ4,
    COMPRESSION_NONE,
    COMPRESSION_SNAPPY,
    COMPRESSION_ZSTD,
    BatchHeader,
    check_batch_frame,
)
from storage.cleaner import (
    SegmentCleaner,
    build_offset_map,
    clean_log,
    cleanable_segments,
    dirty_ratio,
    needs_cleaning,
    promote_to_swap,
    write_cleaned_segment,
)
from storage.config import LogConfig
from storage.errors import InvalidRecordError
from storage.log import PartitionLog
from storage.records import (
    CONTROL_TYPE_ABORT,
    CONTROL_TYPE_COMMIT,
    Record,
    encode_batch,
    encode_control_batch,
    iter_batches,
)
from storage.releaser import RELEASER
from storage.types import TopicPartition

TP = TopicPartition("compacted", 0)
T0 = 1_700_000_000_000
HOUR = 3_600_000


# ----------------------------------------------------------------- helpers


def make_config(**overrides: object) -> LogConfig:
    settings_ = dict(segment_bytes=4096, segment_index_bytes=4096, index_interval_bytes=256,
                     cleanup_policy="compact", delete_retention_ms=HOUR)
    settings_.update(overrides)
    return LogConfig(**settings_)  # type: ignore[arg-type]


def open_log(directory: object, config: LogConfig | None = None, *, clean_shutdown: bool = True) -> PartitionLog:
    return PartitionLog(os.path.join(str(directory), TP.dir_name), TP, config or make_config(),
                        clean_shutdown=clean_shutdown)


def batch(pairs: list[tuple[bytes | None, bytes | None]], *, ts: int = T0, compression: int = COMPRESSION_NONE,
          **kwargs: object) -> bytes:
    """A producer batch: (key, value) pairs at offsets 0.., all at timestamp ``ts``."""
    records = [Record(i, ts + i, key, value) for i, (key, value) in enumerate(pairs)]
    return encode_batch(records, compression=compression, **kwargs)  # type: ignore[arg-type]


def read_batches(log: PartitionLog) -> list[tuple[BatchHeader, list[Record]]]:
    """Every batch from the log start to the end, through the public read path."""
    out: list[tuple[BatchHeader, list[Record]]] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        raw = log.read_bytes(offset, 1 << 20)
        assert raw, f"nothing at {offset}"
        for header, records in iter_batches(raw):
            out.append((header, records))
            offset = header.next_offset
    return out


def records_of(batches: list[tuple[BatchHeader, list[Record]]]) -> list[Record]:
    return [r for _h, records in batches for r in records]


def bounds(batches: list[tuple[BatchHeader, list[Record]]]) -> list[tuple[int, int]]:
    return [(h.base_offset, h.last_offset) for h, _records in batches]


def latest_by_key(records: list[Record]) -> dict[bytes | None, bytes | None]:
    out: dict[bytes | None, bytes | None] = {}
    for record in records:
        out[record.key] = record.value
    return out


def raw_batches_by_base(log: PartitionLog) -> dict[int, bytes]:
    """Batch bytes keyed by base offset, straight from the segment files."""
    out: dict[int, bytes] = {}
    for segment in log.segments:
        data = os.pread(segment.fd, segment.size, 0)
        position = 0
        with memoryview(data) as view:
            while position < len(data):
                header = check_batch_frame(view, position, len(data))  # CRC-32C included
                out[header.base_offset] = data[position : position + header.size]
                position += header.size
    return out


def expected_after_clean(before: list[Record], active_base: int, *, now_ms: int | None = None,
                         delete_retention_ms: int = HOUR) -> list[Record]:
    """The model: in sealed segments keep each key's latest record there, minus expired tombstones."""
    latest: dict[bytes | None, int] = {}
    for record in before:
        if record.offset < active_base:
            latest[record.key] = record.offset
    kept = []
    for record in before:
        if record.offset >= active_base:
            kept.append(record)
        elif latest[record.key] == record.offset:
            expired = now_ms is not None and record.timestamp < now_ms - delete_retention_ms
            if not (record.value is None and expired):
                kept.append(record)
    return kept


def fill(log: PartitionLog, batches: int, *, keys: int = 7, per_batch: int = 3, compression: int = COMPRESSION_NONE) -> None:
    """Append ``batches`` batches whose keys cycle through ``keys`` distinct keys."""
    n = 0
    for i in range(batches):
        pairs: list[tuple[bytes | None, bytes | None]] = []
        for _ in range(per_batch):
            pairs.append((b"k%d" % (n % keys), b"v%d-" % n + b"x" * 20))
            n += 1
        log.append(batch(pairs, ts=T0 + i, compression=compression))


# ----------------------------------------------------------------- basic compaction


def test_latest_value_per_key_survives_with_offsets_and_batch_bounds_preserved(tmp_path) -> None:
    log = open_log(tmp_path)
    fill(log, 120)
    assert len(log.segments) >= 3
    before = read_batches(log)
    active = log.segments.active
    active_bytes = os.pread(active.fd, active.size, 0)
    end, start = log.log_end_offset, log.log_start_offset

    result = clean_log(log, now_ms=T0 + 1000)

    after = read_batches(log)
    assert (log.log_end_offset, log.log_start_offset) == (end, start)
    assert bounds(after) == bounds(before)
    assert records_of(after) == expected_after_clean(records_of(before), active.base_offset)
    assert latest_by_key(records_of(after)) == latest_by_key(records_of(before))
    assert result.first_dirty_offset == active.base_offset
    assert set(result.sources) == {s.base_offset for s in log.segments if not s.is_active}
    assert result.bytes_after < result.bytes_before
    assert result.records_removed == len(records_of(before)) - len(records_of(after))
    # The active segment is the same object with the same bytes.
    assert log.segments.active is active
    assert os.pread(active.fd, active.size, 0) == active_bytes
    # Sealed segments hold each key once.
    sealed_keys = [r.key for r in records_of(after) if r.offset < active.base_offset]
    assert len(sealed_keys) == len(set(sealed_keys))


@pytest.mark.parametrize("chunk", [150, 1000])
def test_segment_reads_across_chunk_boundaries(tmp_path, monkeypatch, chunk: int) -> None:
    # Small chunks: batches straddle chunk ends, and at 150 bytes some are bigger than a chunk.
    monkeypatch.setattr(cleaner, "READ_CHUNK_BYTES", chunk)
    log = open_log(tmp_path)
    fill(log, 60, per_batch=5)
    log.roll()
    before = read_batches(log)
    segment = log.segments[0]
    assert [h for h, _raw in cleaner.iter_segment_batches(segment)] == [
        h for h, _r in before if h.base_offset < log.segments[1].base_offset]
    clean_log(log, now_ms=T0 + 1000)
    assert records_of(read_batches(log)) == expected_after_clean(records_of(before), log.segments.active.base_offset)


def test_fully_superseded_batches_remain_as_empty_batches(tmp_path) -> None:
    log = open_log(tmp_path)
    fill(log, 120)
    before = {h.base_offset: h for h, _r in read_batches(log)}
    clean_log(log, now_ms=T0 + 1000)

    empties = [h for h, records in read_batches(log) if h.record_count == 0]
    assert empties, "expected batches whose records were all superseded"
    for header in empties:
        original = before[header.base_offset]
        assert header.last_offset_delta == original.last_offset_delta
        assert (header.producer_id, header.producer_epoch, header.base_sequence) == (
            original.producer_id, original.producer_epoch, original.base_sequence)
        assert header.base_timestamp == original.base_timestamp
        assert header.max_timestamp == original.max_timestamp
    raw_batches_by_base(log)  # every batch, empty or not, has a valid frame and CRC


def test_cleaned_log_survives_a_full_recovery(tmp_path) -> None:
    log = open_log(tmp_path)
    fill(log, 120)
    clean_log(log, now_ms=T0 + 1000)
    expected = read_batches(log)
    log.close()

    reopened = open_log(tmp_path, clean_shutdown=False)  # validates every batch
    assert all(s.recovery is None or s.recovery.cut_bytes == 0 for s in reopened.segments)
    assert read_batches(reopened) == expected
    reopened.close()


@pytest.mark.parametrize("codec", [COMPRESSION_GZIP, COMPRESSION_SNAPPY, COMPRESSION_LZ4, COMPRESSION_ZSTD])
def test_compressed_batches_keep_their_codec(tmp_path, codec: int) -> None:
    log = open_log(tmp_path)
    fill(log, 80, keys=11, per_batch=4, compression=codec)
    log.roll()
    raw_before = raw_batches_by_base(log)
    before = read_batches(log)

    clean_log(log, now_ms=T0 + 1000)

    after = read_batches(log)
    assert bounds(after) == bounds(before)
    assert records_of(after) == expected_after_clean(records_of(before), log.segments.active.base_offset)
    raw_after = raw_batches_by_base(log)
    kinds = set()
    for (header, records), (old_header, old_records) in zip(after, before):
        if not records:
            kinds.add("empty")
            assert header.compression == COMPRESSION_NONE  # as Kafka writes empty batches
        elif len(records) == len(old_records):
            kinds.add("untouched")
            assert raw_after[header.base_offset] == raw_before[header.base_offset]
        else:
            kinds.add("partial")
            assert header.compression == codec
            assert header.record_count == len(records)
            assert header.last_offset_delta == old_header.last_offset_delta
    assert kinds == {"empty", "untouched", "partial"}


def test_batch_header_fields_are_preserved_on_reencode(tmp_path) -> None:
    log = open_log(tmp_path)
    log.append(batch([(b"a", b"1"), (b"b", b"1"), (b"c", b"1")], producer_id=42, producer_epoch=3, base_sequence=0),
               leader_epoch=5)
    log.append(batch([(b"a", b"2")], producer_id=42, producer_epoch=3, base_sequence=3), leader_epoch=5)
    log.roll()
    (old, _), _ = read_batches(log)

    clean_log(log, now_ms=T0 + 1000)

    (header, records), _ = read_batches(log)
    assert [r.key for r in records] == [b"b", b"c"]
    for field in ("base_offset", "last_offset_delta", "partition_leader_epoch", "attributes", "base_timestamp",
                  "max_timestamp", "producer_id", "producer_epoch", "base_sequence"):
        assert getattr(header, field) == getattr(old, field), field
    assert log.producer_state.entries[42].last_sequence == 3


def test_log_append_time_batches(tmp_path) -> None:
    log = open_log(tmp_path, make_config(message_timestamp_type="LogAppendTime"))
    log.append(batch([(b"a", b"1"), (b"b", b"1")]), now=T0 + 500)
    log.append(batch([(b"a", b"2")]), now=T0 + 600)
    log.roll()
    clean_log(log, now_ms=T0 + 1000)
    (header, records), _ = read_batches(log)
    assert header.timestamp_type == 1 and header.max_timestamp == T0 + 500
    assert [(r.key, r.timestamp) for r in records] == [(b"b", T0 + 500)]


# ----------------------------------------------------------------- tombstones


def test_tombstones_kept_while_young_then_removed(tmp_path) -> None:
    log = open_log(tmp_path, make_config(delete_retention_ms=1000))
    log.append(batch([(b"a", b"1"), (b"b", b"1")], ts=T0))
    log.append(batch([(b"a", None)], ts=T0 + 10))
    log.roll()
    log.append(batch([(b"c", b"1")], ts=T0 + 20))
    shape = bounds(read_batches(log))

    young = clean_log(log, now_ms=T0 + 10 + 1000)  # age == delete.retention.ms: kept
    assert young.tombstones_removed == 0
    assert [(r.key, r.value) for r in records_of(read_batches(log))] == [(b"b", b"1"), (b"a", None), (b"c", b"1")]

    old = clean_log(log, now_ms=T0 + 10 + 1001)
    assert old.tombstones_removed == 1 and old.records_removed == 1
    after = read_batches(log)
    assert [(r.key, r.value) for r in records_of(after)] == [(b"b", b"1"), (b"c", b"1")]
    assert bounds(after) == shape
    assert after[1][0].record_count == 0  # the tombstone's batch stays, empty


def test_tombstone_in_active_segment_is_untouched(tmp_path) -> None:
    log = open_log(tmp_path, make_config(delete_retention_ms=0))
    log.append(batch([(b"a", b"1")]))
    log.roll()
    log.append(batch([(b"a", None)]))
    clean_log(log, now_ms=T0 + 10 * HOUR)
    # The active segment feeds no offset map: the sealed value stays until it rolls.
    assert [(r.key, r.value) for r in records_of(read_batches(log))] == [(b"a", b"1"), (b"a", None)]


# ----------------------------------------------------------------- ranges


def test_active_segment_alone_is_never_cleaned(tmp_path) -> None:
    log = open_log(tmp_path)
    for i in range(5):
        log.append(batch([(b"a", b"%d" % i)]))
    before = read_batches(log)
    result = clean_log(log, now_ms=T0 + HOUR)
    assert result.sources == () and result.segments_examined == 0
    assert read_batches(log) == before


def test_min_compaction_lag_stops_the_cleanable_range(tmp_path) -> None:
    log = open_log(tmp_path, make_config(min_compaction_lag_ms=5000))
    log.append(batch([(b"a", b"old"), (b"b", b"old")], ts=T0))
    log.append(batch([(b"a", b"mid")], ts=T0 + 1))
    log.roll()
    second = log.segments.active.base_offset
    log.append(batch([(b"a", b"young"), (b"b", b"young")], ts=T0 + 10_000))
    log.roll()
    log.append(batch([(b"c", b"active")], ts=T0 + 10_000))

    first = clean_log(log, now_ms=T0 + 12_000)  # the second segment is 2 s old: too young
    assert first.sources == (0,) and first.first_dirty_offset == second
    values = [r.value for r in records_of(read_batches(log))]
    assert values == [b"old", b"mid", b"young", b"young", b"active"]  # b's old is its latest in range

    later = clean_log(log, now_ms=T0 + 20_000, first_dirty_offset=first.first_dirty_offset)
    assert later.first_dirty_offset == log.segments.active.base_offset
    assert [r.value for r in records_of(read_batches(log))] == [b"young", b"young", b"active"]


def test_dirty_ratio_and_needs_cleaning(tmp_path) -> None:
    log = open_log(tmp_path, make_config(min_cleanable_dirty_ratio=0.3))
    assert dirty_ratio(log) == 0.0 and not needs_cleaning(log, now_ms=T0)
    fill(log, 60)
    assert dirty_ratio(log) == 1.0 and needs_cleaning(log, now_ms=T0)
    checkpoint = clean_log(log, now_ms=T0).first_dirty_offset
    assert dirty_ratio(log, checkpoint) == 0.0 and not needs_cleaning(log, checkpoint, now_ms=T0)
    fill(log, 60)
    ratio = dirty_ratio(log, checkpoint)
    assert 0.3 < ratio < 1.0 and needs_cleaning(log, checkpoint, now_ms=T0)
    assert not needs_cleaning(open_log(tmp_path / "plain", make_config(cleanup_policy="delete")), now_ms=T0)


def test_checkpoint_limits_the_offset_map_to_the_dirty_range(tmp_path) -> None:
    log = open_log(tmp_path)
    fill(log, 120)
    segments = cleanable_segments(log, T0)
    start = segments[-1].base_offset
    offset_map = build_offset_map(segments, start)
    assert offset_map and min(offset_map.values()) >= start
    assert build_offset_map(segments, 0).keys() >= offset_map.keys()


def test_clean_log_refuses_a_delete_only_log(tmp_path) -> None:
    log = open_log(tmp_path, make_config(cleanup_policy="delete"))
    with pytest.raises(ValueError):
        clean_log(log, now_ms=T0)


# ----------------------------------------------------------------- keys and transactions


def test_records_without_keys_are_refused_and_nothing_is_written(tmp_path) -> None:
    log = open_log(tmp_path)
    log.append(batch([(b"a", b"1")]))
    size, end = log.size_in_bytes, log.log_end_offset
    with pytest.raises(InvalidRecordError):
        log.append(batch([(None, b"no key")]))
    with pytest.raises(InvalidRecordError):  # a good batch ahead of a bad one: all refused
        log.append(batch([(b"b", b"1")]) + batch([(b"c", b"1"), (None, b"x")]))
    assert (log.size_in_bytes, log.log_end_offset) == (size, end)


def _txn(log: PartitionLog, pid: int, pairs: list[tuple[bytes, bytes]], control_type: int) -> None:
    log.append(batch(pairs, producer_id=pid, producer_epoch=0, base_sequence=0, is_transactional=True))
    log.append(encode_control_batch(control_type, 0, producer_id=pid, producer_epoch=0, timestamp=T0))


def test_aborted_transaction_never_shadows_a_committed_value(tmp_path) -> None:
    log = open_log(tmp_path)
    log.append(batch([(b"k", b"committed")]))
    _txn(log, 7, [(b"k", b"aborted")], CONTROL_TYPE_ABORT)
    log.append(batch([(b"j", b"1")]))
    _txn(log, 8, [(b"j", b"2")], CONTROL_TYPE_COMMIT)
    # A plain write between a transaction's data and its COMMIT is the later one.
    log.append(batch([(b"m", b"txn")], producer_id=9, producer_epoch=0, base_sequence=0, is_transactional=True))
    log.append(batch([(b"m", b"plain")]))
    log.append(encode_control_batch(CONTROL_TYPE_COMMIT, 0, producer_id=9, producer_epoch=0, timestamp=T0))
    log.roll()
    clean_log(log, now_ms=T0 + 1000)
    values = [(r.key, r.value) for h, records in read_batches(log) if not h.is_control for r in records]
    assert (b"k", b"committed") in values
    assert (b"j", b"1") not in values and (b"j", b"2") in values
    assert (b"m", b"txn") not in values and (b"m", b"plain") in values
    assert sum(h.is_control for h, _r in read_batches(log)) == 3  # markers stay


# ----------------------------------------------------------------- crash safety & readers


def _segment_zero_cleaned_by_hand(log: PartitionLog) -> tuple[str, bytes]:
    """Steps a and b for the first segment; returns (swap path, its bytes)."""
    segments = cleanable_segments(log, T0 + 1000)
    cleaned = write_cleaned_segment(segments[0], SegmentCleaner(build_offset_map(segments, 0), T0 + 1000, HOUR))
    assert cleaned.changed
    swap = promote_to_swap(cleaned)
    with open(swap, "rb") as f:
        return swap, f.read()


def test_crash_after_swap_rename_serves_the_cleaned_segment(tmp_path) -> None:
    log = open_log(tmp_path)
    fill(log, 120)
    before = records_of(read_batches(log))
    end = log.log_end_offset
    swap, cleaned_bytes = _segment_zero_cleaned_by_hand(log)
    log.flush()  # then "crash": the log is abandoned, not closed
    assert RELEASER.drain(timeout_s=30)  # earlier rolls' queued work must not land on the reopened files

    reopened = open_log(tmp_path, clean_shutdown=False)
    names = os.listdir(reopened.directory)
    assert not [n for n in names if n.endswith((files.SWAP_SUFFIX, files.CLEANED_SUFFIX, files.DELETED_SUFFIX))]
    first = reopened.segments[0]
    assert os.pread(first.fd, first.size + 1, 0) == cleaned_bytes
    assert reopened.log_end_offset == end
    after = records_of(read_batches(reopened))
    assert set((r.offset, r.key, r.value) for r in after) < set((r.offset, r.key, r.value) for r in before)
    assert latest_by_key(after) == latest_by_key(before)
    assert [r for r in after if r.offset >= reopened.segments[1].base_offset] == [
        r for r in before if r.offset >= reopened.segments[1].base_offset]
    reopened.close()


def test_crash_between_source_rename_and_swap_rename(tmp_path) -> None:
    log = open_log(tmp_path)
    fill(log, 120)
    _swap, cleaned_bytes = _segment_zero_cleaned_by_hand(log)
    log.segments[0].rename_with_suffix(files.DELETED_SUFFIX)  # step c1 done, c2 not
    log.flush()

    reopened = open_log(tmp_path, clean_shutdown=False)
    first = reopened.segments[0]
    assert first.base_offset == 0 and os.pread(first.fd, first.size + 1, 0) == cleaned_bytes
    reopened.close()


def test_leftover_cleaned_file_is_discarded_on_reopen(tmp_path) -> None:
    log = open_log(tmp_path)
    fill(log, 120)
    before = read_batches(log)
    segments = cleanable_segments(log, T0)
    cleaned = write_cleaned_segment(segments[0], SegmentCleaner(build_offset_map(segments, 0), T0, HOUR))
    assert os.path.exists(cleaned.path)
    log.flush()

    reopened = open_log(tmp_path, clean_shutdown=False)
    assert not os.path.exists(cleaned.path)
    assert read_batches(reopened) == before
    reopened.close()


def test_reader_holding_an_old_file_range_still_reads_after_the_swap(tmp_path) -> None:
    log = open_log(tmp_path)
    fill(log, 120)
    old_snapshot = log.segments
    file_range = log.read(0, 1 << 20).file_range
    assert file_range is not None
    expected = os.pread(file_range.fd, file_range.length, file_range.position)

    clean_log(log, now_ms=T0 + 1000)

    assert log.segments[0] is not old_snapshot[0]
    assert old_snapshot[0].path.endswith(files.DELETED_SUFFIX)
    assert os.pread(file_range.fd, file_range.length, file_range.position) == expected
    assert os.path.exists(old_snapshot[0].path)  # waiting for file.delete.delay.ms
    log.delete_pending_files(force=True)
    assert RELEASER.drain(timeout_s=10)  # the unlinks run on the releaser thread
    assert not os.path.exists(old_snapshot[0].path)
    assert not [n for n in os.listdir(log.directory) if n.endswith(files.DELETED_SUFFIX)]
    log.close()


def test_cleaning_is_idempotent(tmp_path) -> None:
    log = open_log(tmp_path, make_config(delete_retention_ms=0))
    fill(log, 100)
    log.append(batch([(b"k1", None)], ts=T0))
    log.roll()
    first = clean_log(log, now_ms=T0 + HOUR)
    assert first.sources and first.tombstones_removed == 1
    files_after_first = {s.base_offset: os.pread(s.fd, s.size, 0) for s in log.segments}
    segments_after_first = list(log.segments)

    second = clean_log(log, now_ms=T0 + HOUR)

    assert second.sources == () and second.records_removed == 0
    assert second.bytes_before == second.bytes_after == first.bytes_after
    assert list(log.segments) == segments_after_first
    assert {s.base_offset: os.pread(s.fd, s.size, 0) for s in log.segments} == files_after_first
    assert not [n for n in os.listdir(log.directory) if n.endswith((files.CLEANED_SUFFIX, files.SWAP_SUFFIX))]


# ----------------------------------------------------------------- compact,delete


def test_compact_delete_policy_still_applies_retention(tmp_path) -> None:
    log = open_log(tmp_path, make_config(cleanup_policy="compact,delete", retention_ms=10_000))
    fill(log, 60)  # timestamps around T0
    log.roll()
    old_segments = len(log.segments) - 1
    log.append(batch([(b"k1", b"new")], ts=T0 + 100_000))
    log.roll()
    log.append(batch([(b"k2", b"newer")], ts=T0 + 100_001))

    clean_log(log, now_ms=T0 + 50_000)
    assert log.delete_old_segments(now=T0 + 50_000) == old_segments  # cleaning kept their age
    assert [(r.key, r.value) for r in records_of(read_batches(log))] == [(b"k1", b"new"), (b"k2", b"newer")]


def test_compact_only_policy_never_deletes_by_time(tmp_path) -> None:
    log = open_log(tmp_path, make_config(retention_ms=10_000))
    fill(log, 60)
    log.roll()
    assert log.delete_old_segments(now=T0 + 10 * HOUR) == 0


# ----------------------------------------------------------------- property


OPS = st.lists(
    st.tuples(
        st.lists(st.tuples(st.sampled_from([b"a", b"b", b"c", b"d"]), st.one_of(st.none(), st.binary(max_size=40))),
                 min_size=1, max_size=6),
        st.booleans(),  # roll after this batch
    ),
    min_size=1,
    max_size=30,
)


@settings(max_examples=40, deadline=None)
@given(ops=OPS, final_roll=st.booleans(), expire=st.booleans(), codec=st.sampled_from([COMPRESSION_NONE, COMPRESSION_LZ4]))
def test_compaction_matches_a_dict_model(ops, final_roll: bool, expire: bool, codec: int) -> None:
    retention = 0 if expire else 10 * HOUR
    with tempfile.TemporaryDirectory() as directory:
        log = open_log(directory, make_config(segment_bytes=1024, delete_retention_ms=retention))
        model: dict[bytes, tuple[int, bytes | None]] = {}
        for i, (pairs, roll) in enumerate(ops):
            info = log.append(batch(pairs, ts=T0 + i, compression=codec))
            for j, (key, value) in enumerate(pairs):
                model[key] = (info.first_offset + j, value)
            if roll:
                log.roll()
        if final_roll:
            log.roll()
        before = read_batches(log)
        active_base = log.segments.active.base_offset
        end = log.log_end_offset

        clean_log(log, now_ms=T0 + HOUR)

        after = read_batches(log)
        assert log.log_end_offset == end
        assert bounds(after) == bounds(before)
        original = {(r.offset, r.key, r.value) for r in records_of(before)}
        assert {(r.offset, r.key, r.value) for r in records_of(after)} <= original
        expected = {k: v for k, (offset, v) in model.items() if not (expire and v is None and offset < active_base)}
        assert latest_by_key(records_of(after)) == expected
        sealed = [r.key for r in records_of(after) if r.offset < active_base]
        assert len(sealed) == len(set(sealed))
        log.close()
