"""Kafka 4.0's topic configs that change how a log stores and keeps records: compression.type
(recompression), message.timestamp.before/after.max.ms, preallocate, segment.jitter.ms,
max.compaction.lag.ms. Real logs in real files."""

from __future__ import annotations

import itertools
import os
import time

import pytest

from storage.cleaner import needs_cleaning
from storage.config import COMPRESSION_CODECS, LONG_MAX, TOPIC_KEYS, LogConfig
from storage.errors import InvalidTimestampError
from storage.records import Record, encode_batch, iter_batches
from tests.kafka_facts import KAFKA_4_0_TOPIC_CONFIGS
from tests.unit.storage.helpers import batch, open_log

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
TARGETS = ["producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"]
NOW = 1_700_000_000_000


def _stored(log) -> list[tuple[object, list[Record]]]:
    return list(iter_batches(log.read_bytes(0, 1 << 20)))


def _records(count: int, base_ts: int) -> list[Record]:
    return [Record(i, base_ts + i, f"k{i}".encode(), bytes([97 + i % 26]) * (50 + i), (("h", f"v{i}".encode()),))
            for i in range(count)]


@pytest.mark.parametrize("source,target", list(itertools.product(CODECS, TARGETS)))
def test_every_codec_pair_is_stored_in_the_topics_codec_with_the_same_records(tmp_path, source, target) -> None:
    log = open_log(tmp_path, LogConfig().with_overrides({"compression.type": target}))
    sent = _records(5, NOW - 1000)
    raw = encode_batch(sent, compression=CODECS[source], producer_id=7, producer_epoch=2, base_sequence=11)
    log.append(raw, now=NOW)
    log.append(encode_batch(_records(2, NOW), compression=CODECS[source]), now=NOW)
    (first, records), (second, more) = _stored(log)
    expected_codec = CODECS[source] if target == "producer" else COMPRESSION_CODECS[target]
    assert first.compression == expected_codec and second.compression == expected_codec
    # Offsets, timestamps, keys, values and headers: exactly the producer's.
    assert records == sent
    assert [r.offset for r in more] == [5, 6]
    # The idempotent producer's identity and sequence survive the rebuild.
    assert (first.producer_id, first.producer_epoch, first.base_sequence) == (7, 2, 11)
    assert (first.base_timestamp, first.max_timestamp, first.last_offset_delta) == (NOW - 1000, NOW - 996, 4)
    if source == "none" and target in ("producer", "uncompressed"):
        # Nothing to change: the stored batch is the producer's, byte for byte (but for the
        # base offset and partition leader epoch the log writes, which the CRC does not cover).
        stored = log.read_bytes(0, 1 << 20)[:len(raw)]
        assert stored[16:] == raw[16:] and stored[8:12] == raw[8:12]


def test_a_recompressed_batch_is_the_batch_a_producer_would_have_sent(tmp_path) -> None:
    """Byte-exact: lz4 in, gzip stored, equals the same records built as gzip (offset and
    leader epoch being the log's, as for any append)."""
    log = open_log(tmp_path, LogConfig().with_overrides({"compression.type": "gzip", "compression.gzip.level": "9"}))
    sent = _records(20, NOW)
    log.append(encode_batch(sent, compression=CODECS["lz4"], producer_id=3, producer_epoch=0, base_sequence=0), now=NOW)
    expected = encode_batch(sent, compression=CODECS["gzip"], compression_level=9, producer_id=3, producer_epoch=0,
                            base_sequence=0, partition_leader_epoch=0)
    assert log.read_bytes(0, 1 << 20) == expected


def test_idempotent_sequences_still_hold_after_recompression(tmp_path) -> None:
    log = open_log(tmp_path, LogConfig().with_overrides({"compression.type": "zstd"}))
    for sequence in (0, 3, 6):
        log.append(encode_batch(_records(3, NOW), compression=CODECS["gzip"], producer_id=9, producer_epoch=0,
                                base_sequence=sequence), now=NOW)
    headers = [h for h, _ in _stored(log)]
    assert [h.base_sequence for h in headers] == [0, 3, 6]
    assert [h.base_offset for h in headers] == [0, 3, 6]
    assert all(h.compression == CODECS["zstd"] for h in headers)
    assert log.producer_state.entries[9].last_sequence == 8
    # A retry of the last batch, as sent (gzip), is a duplicate of what was stored (zstd).
    retry = encode_batch(_records(3, NOW), compression=CODECS["gzip"], producer_id=9, producer_epoch=0, base_sequence=6)
    header = next(iter_batches(retry))[0]
    assert log.producer_state.check_sequence(header) == 46  # DUPLICATE_SEQUENCE_NUMBER
    assert log.producer_state.find_duplicate(header).first_offset == 6


def test_timestamps_too_far_ahead_are_refused_by_default(tmp_path) -> None:
    log = open_log(tmp_path)
    assert LogConfig().message_timestamp_after_max_ms == 3_600_000  # Kafka 4.0's default
    log.append(batch(timestamp=NOW + 3_000_000), now=NOW)
    with pytest.raises(InvalidTimestampError, match="after.max.ms"):
        log.append(batch(timestamp=NOW + 3_700_000), now=NOW)
    assert log.log_end_offset == 1  # nothing of the refused set was written


def test_timestamps_too_old_are_refused_only_when_before_max_is_set(tmp_path) -> None:
    log = open_log(tmp_path)
    log.append(batch(count=3, timestamp=1_000), now=NOW)  # ancient, but the default is Long.MAX
    strict = open_log(tmp_path / "strict", LogConfig().with_overrides({"message.timestamp.before.max.ms": "60000"}))
    strict.append(batch(count=2, timestamp=NOW - 59_000), now=NOW)
    # One old record in the middle of a compressed batch is found (the header cannot tell).
    records = [Record(0, NOW, b"a", b"1"), Record(1, NOW - 61_000, b"b", b"2"), Record(2, NOW, b"c", b"3")]
    with pytest.raises(InvalidTimestampError, match="before.max.ms"):
        strict.append(encode_batch(records, compression=CODECS["lz4"], base_timestamp=NOW), now=NOW)
    strict.append(encode_batch([Record(0, -1, b"a", b"no timestamp")]), now=NOW)  # -1 always passes
    assert strict.log_end_offset == 3


def test_log_append_time_topics_take_any_producer_timestamp(tmp_path) -> None:
    log = open_log(tmp_path, LogConfig().with_overrides({"message.timestamp.type": "LogAppendTime",
                                                         "message.timestamp.before.max.ms": "0"}))
    info = log.append(batch(timestamp=NOW + 10 * 3_600_000), now=NOW)
    assert info.log_append_time == NOW


def _allocated(path: str) -> int:
    return os.stat(path).st_blocks * 512


def test_preallocate_reserves_the_whole_segment_at_roll(tmp_path) -> None:
    segment_bytes = 64 << 20
    settings = {"segment.bytes": str(segment_bytes), "preallocate.window.bytes": str(1 << 20)}
    window = open_log(tmp_path / "window", LogConfig().with_overrides(settings))
    whole = open_log(tmp_path / "whole", LogConfig().with_overrides({**settings, "preallocate": "true"}))
    for log in (window, whole):
        log.append(batch(), now=NOW)
    deadline = time.monotonic() + 10
    while _allocated(whole.segments.active.path) < segment_bytes and time.monotonic() < deadline:
        time.sleep(0.02)  # the reservation runs on the reserver thread
    assert _allocated(whole.segments.active.path) >= segment_bytes
    assert _allocated(window.segments.active.path) < segment_bytes // 4


def test_segment_jitter_rolls_each_segment_up_to_that_much_early(tmp_path) -> None:
    config = LogConfig().with_overrides({"segment.ms": "100000", "segment.jitter.ms": "50000"})
    jitters = set()
    for i in range(20):
        log = open_log(tmp_path / str(i), config)
        jitters.add(log.segments.active.roll_jitter_ms)
        log.close()
    assert all(0 <= j < 50_000 for j in jitters) and len(jitters) > 1
    log = open_log(tmp_path / "roll", config)
    log.append(batch(timestamp=NOW), now=NOW)
    first = log.segments.active
    first.rolling_base_ms = NOW
    assert first.should_roll_for_time(NOW + 100_001 - first.roll_jitter_ms)
    assert not first.should_roll_for_time(NOW + 100_000 - first.roll_jitter_ms)


def test_max_compaction_lag_rolls_and_cleans_whatever_the_dirty_ratio(tmp_path) -> None:
    config = LogConfig().with_overrides({"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "1",
                                         "segment.ms": str(7 * 86_400_000), "max.compaction.lag.ms": "60000"})
    assert config.max_segment_ms == 60_000
    log = open_log(tmp_path, config)
    log.append(batch(count=3, timestamp=NOW), now=NOW)
    log.segments.active.rolling_base_ms = NOW
    assert log.segments.active.should_roll_for_time(NOW + 60_001)
    log.roll()
    log.append(batch(count=3, timestamp=NOW + 1), now=NOW + 1)
    log.roll()
    log.append(batch(count=1, timestamp=NOW + 2), now=NOW + 2)  # the active segment
    # Everything sealed is dirty but the ratio needed is 1.0 of... the first dirty batch decides:
    assert not needs_cleaning(log, 3, now_ms=NOW + 30_000)  # young, and the ratio is not reached
    assert needs_cleaning(log, 3, now_ms=NOW + 61_000)  # overdue: cleaned whatever the ratio
    plain = open_log(tmp_path / "plain", config.with_overrides({"max.compaction.lag.ms": str(LONG_MAX)}))
    plain.append(batch(count=3, timestamp=NOW), now=NOW)
    plain.roll()
    plain.append(batch(count=3, timestamp=NOW), now=NOW)
    plain.roll()
    assert not needs_cleaning(plain, 3, now_ms=NOW + 10 * 86_400_000)


@pytest.mark.parametrize("key,value", [
    ("compression.type", "brotli"), ("compression.gzip.level", "0"), ("compression.gzip.level", "10"),
    ("compression.lz4.level", "18"), ("compression.zstd.level", "23"), ("max.compaction.lag.ms", "0"),
    ("segment.jitter.ms", "-1"), ("message.timestamp.after.max.ms", "-1"), ("min.insync.replicas", "0"),
    ("preallocate", "yes"), ("remote.storage.enable", "true"), ("local.retention.ms", "-3"),
    ("leader.replication.throttled.replicas", "0-101"), ("unclean.leader.election.enable", "1"),
])
def test_bad_values_of_the_new_keys_are_refused(key: str, value: str) -> None:
    with pytest.raises(ValueError):
        LogConfig().with_overrides({key: value})


def test_min_compaction_lag_may_not_exceed_max() -> None:
    with pytest.raises(ValueError, match="min.compaction.lag.ms"):
        LogConfig().with_overrides({"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"})


def test_kafka_4_topic_config_names_are_all_known_and_removed_ones_are_not() -> None:
    kafka_4_0 = KAFKA_4_0_TOPIC_CONFIGS
    assert kafka_4_0 <= set(TOPIC_KEYS)
    assert set(TOPIC_KEYS) - kafka_4_0 == {"preallocate.window.bytes"}  # Castle's own
    for removed in ("message.format.version", "message.downconversion.enable", "message.timestamp.difference.max.ms"):
        with pytest.raises(ValueError, match="unknown topic config"):
            LogConfig().with_overrides({removed: "x"})
