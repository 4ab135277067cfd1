"""PartitionLog as a replica: leader epochs in batches and in the cache, the high watermark
(committed reads, ListOffsets latest, retention, truncation, the replication-offset-checkpoint)
and the follower's append of the leader's bytes. Real files, no mocks."""

from __future__ import annotations

import os
import struct

import pytest

from storage import checkpoint
from storage.batch import PARTITION_LEADER_EPOCH_POS, iter_headers
from storage.cleaner import clean_log
from storage.config import LogConfig
from storage.errors import CorruptRecordError, OffsetOutOfRangeError
from storage.leader_epochs import FILE_NAME as EPOCH_FILE
from storage.log import LATEST_TIMESTAMP, PartitionLog
from storage.manager import LogManager, ManagerConfig
from storage.records import Record, encode_batch, iter_batches
from storage.types import TopicPartition
from tests.unit.storage.helpers import TP, batch, open_log, read_all

BIG = 1 << 20


def _open(path, config: LogConfig | None = None, **kwargs) -> PartitionLog:
    return PartitionLog(str(path), TP, config or LogConfig(), **kwargs)


def _headers(raw: bytes):
    return list(iter_headers(memoryview(raw)))


def _committed_bytes(log: PartitionLog, offset: int, max_bytes: int = BIG) -> bytes:
    info = log.read(offset, max_bytes, committed=True)
    assert info.high_watermark == log.high_watermark
    if info.file_range is None:
        return b""
    return os.pread(info.file_range.fd, info.file_range.length, info.file_range.position)


def _batch_sizes_below(log: PartitionLog, start: int, end: int) -> int:
    """Bytes of the whole batches in [start, end) (batch boundaries), read to the log end."""
    raw = log.read_bytes(start, BIG)
    return sum(h.size for _p, h in _headers(raw) if h.base_offset >= start and h.last_offset < end)


# ----------------------------------------------------------------- leader epochs on append


def test_append_stamps_the_leader_epoch_into_each_batch_and_the_cache(tmp_path):
    log = open_log(tmp_path)
    log.append(batch(count=2), leader_epoch=0)
    log.append(batch(count=3) + batch(count=1), leader_epoch=0)
    log.append(batch(count=2), leader_epoch=3)
    log.append(batch(count=1), leader_epoch=3)
    raw = log.read_bytes(0, BIG)
    headers = _headers(raw)
    assert [(h.base_offset, h.partition_leader_epoch) for _p, h in headers] == [(0, 0), (2, 0), (5, 0), (6, 3), (8, 3)]
    for position, header in headers:
        stamped = raw[position + PARTITION_LEADER_EPOCH_POS : position + PARTITION_LEADER_EPOCH_POS + 4]
        assert stamped == struct.pack(">i", header.partition_leader_epoch)
        assert raw[position + 12 : position + 16] == stamped
    assert log.epochs.entries == [(0, 0), (3, 6)]
    assert log.epochs.latest_epoch == 3
    assert log.epochs.end_offset_for(0, log.log_end_offset) == (0, 6)
    assert log.epochs.end_offset_for(3, log.log_end_offset) == (3, 9)
    with open(os.path.join(log.directory, EPOCH_FILE), encoding="utf-8") as f:
        assert f.read() == "0\n2\n0 0\n3 6\n"
    log.close()


def test_the_epochs_survive_a_reopen_and_are_rebuilt_when_their_file_is_gone(tmp_path):
    log = open_log(tmp_path)
    for epoch, count in ((1, 2), (1, 1), (4, 3), (6, 1)):
        log.append(batch(count=count), leader_epoch=epoch)
    expected = [(1, 0), (4, 3), (6, 6)]
    assert log.epochs.entries == expected
    directory = log.directory
    log.close()
    reopened = open_log(tmp_path)
    assert reopened.epochs.file_existed and reopened.epochs.entries == expected
    reopened.close()
    os.unlink(os.path.join(directory, EPOCH_FILE))
    rebuilt = open_log(tmp_path)
    assert not rebuilt.epochs.file_existed
    assert rebuilt.epochs.entries == expected
    assert os.path.exists(os.path.join(directory, EPOCH_FILE))
    rebuilt.close()


def test_reopening_drops_epochs_past_the_log_end(tmp_path):
    log = open_log(tmp_path)
    log.append(batch(count=3), leader_epoch=2)
    directory = log.directory
    log.close()
    checkpoint.write_leader_epoch_checkpoint(os.path.join(directory, EPOCH_FILE), [(2, 0), (5, 3), (7, 10)])
    reopened = open_log(tmp_path)
    assert reopened.epochs.entries == [(2, 0)]
    reopened.close()


# ----------------------------------------------------------------- high watermark


def _replicated_log(tmp_path, config: LogConfig | None = None) -> PartitionLog:
    log = open_log(tmp_path, config)
    log.set_replicated(True)
    return log


def test_an_unreplicated_log_commits_at_append(tmp_path):
    log = open_log(tmp_path)
    assert not log.replicated
    log.append(batch(count=3))
    assert log.high_watermark == log.log_end_offset == 3
    log.close()


def test_a_replicated_log_keeps_its_high_watermark_after_appends(tmp_path):
    log = _replicated_log(tmp_path)
    log.append(batch(count=2))
    log.append(batch(count=3))
    assert log.log_end_offset == 5
    assert log.high_watermark == 0
    assert log.advance_high_watermark(2)
    log.append(batch(count=1))
    assert log.high_watermark == 2 and log.log_end_offset == 6
    log.close()


def test_committed_reads_stop_at_the_high_watermark(tmp_path):
    log = _replicated_log(tmp_path)
    log.append(batch(count=2, value_size=50))
    log.append(batch(count=3, value_size=120))
    log.append(batch(count=1, value_size=300))
    log.append(batch(count=4, value_size=70))
    sizes = [h.size for _p, h in _headers(log.read_bytes(0, BIG))]
    total = sum(sizes)
    # Nothing committed yet.
    assert log.read(0, BIG, committed=True).file_range is None
    assert len(log.read_bytes(0, BIG)) == total
    log.advance_high_watermark(5)  # after the second batch
    info = log.read(0, BIG, committed=True)
    assert info.high_watermark == 5 and info.log_end_offset == 10
    assert info.file_range.length == sizes[0] + sizes[1]
    committed = _committed_bytes(log, 0)
    assert committed == log.read_bytes(0, BIG)[: sizes[0] + sizes[1]]
    assert [h.base_offset for _p, h in _headers(committed)] == [0, 2]
    assert len(_committed_bytes(log, 3)) == sizes[1]  # from the middle of a committed batch
    for offset in (5, 6, 9, 10):  # at or past the high watermark: nothing
        assert log.read(offset, BIG, committed=True).file_range is None
    # Without committed: up to the log end.
    assert log.read(0, BIG).file_range.length == total
    assert log.read(5, BIG).file_range.length == sizes[2] + sizes[3]
    # The limit follows the high watermark as it moves.
    log.advance_high_watermark(6)
    assert len(_committed_bytes(log, 0)) == sum(sizes[:3])
    log.advance_high_watermark(10)
    assert len(_committed_bytes(log, 0)) == total
    log.close()


def test_committed_reads_respect_max_bytes_below_the_high_watermark(tmp_path):
    log = _replicated_log(tmp_path)
    for _ in range(6):
        log.append(batch(count=1, value_size=200))
    size = _headers(log.read_bytes(0, BIG))[0][1].size
    log.advance_high_watermark(4)
    assert log.read(0, 2 * size + 10, committed=True).file_range.length == 2 * size
    assert log.read(0, 1, committed=True).file_range.length == size  # one whole batch at least
    assert log.read(0, 1, committed=True, min_one_batch=False).file_range is None
    log.close()


def test_committed_reads_across_segments(tmp_path):
    log = _replicated_log(tmp_path, LogConfig(segment_bytes=4096, index_interval_bytes=256))
    for _ in range(20):
        log.append(batch(count=1, value_size=900))
    segments = list(log.segments)
    assert len(segments) >= 4
    second = segments[1]
    hw = second.base_offset + 2  # two batches into the second segment
    log.advance_high_watermark(hw)
    # From the first segment: that segment's batches (a read stays in one segment).
    first_info = log.read(0, BIG, committed=True)
    assert first_info.file_range.length == segments[0].size
    # From the segment holding the high watermark: only the batches below it.
    assert len(_committed_bytes(log, second.base_offset)) == _batch_sizes_below(log, second.base_offset, hw)
    assert log.read(hw, BIG, committed=True).file_range is None
    assert log.read(segments[2].base_offset, BIG, committed=True).file_range is None
    # A high watermark at a segment boundary: the earlier segment is whole, then nothing.
    log.advance_high_watermark(segments[2].base_offset)
    assert log.read(second.base_offset, BIG, committed=True).file_range.length == second.size
    assert log.read(segments[2].base_offset, BIG, committed=True).file_range is None
    # Everything the committed reads return, in order, is exactly offsets [0, hw).
    offsets, offset = [], 0
    while True:
        raw = _committed_bytes(log, offset)
        if not raw:
            break
        headers = _headers(raw)
        offsets.extend(h.base_offset for _p, h in headers)
        offset = headers[-1][1].next_offset
    assert offsets == list(range(segments[2].base_offset))
    log.close()


def test_advance_high_watermark_never_moves_back_nor_past_the_log_end(tmp_path):
    log = _replicated_log(tmp_path)
    log.append(batch(count=4))
    assert log.advance_high_watermark(3) is True
    assert log.high_watermark == 3
    assert log.advance_high_watermark(1) is False
    assert log.advance_high_watermark(3) is False
    assert log.high_watermark == 3
    assert log.advance_high_watermark(100) is True
    assert log.high_watermark == log.log_end_offset == 4
    assert log.advance_high_watermark(100) is False
    assert log.high_watermark == 4
    log.close()


def test_set_replicated_false_jumps_the_high_watermark_to_the_log_end(tmp_path):
    log = _replicated_log(tmp_path)
    log.append(batch(count=4))
    log.advance_high_watermark(2)
    log.set_replicated(True)  # again: nothing moves
    assert log.high_watermark == 2
    log.set_replicated(False)
    assert not log.replicated
    assert log.high_watermark == log.log_end_offset == 4
    log.append(batch(count=1))
    assert log.high_watermark == 5
    log.close()


def test_list_offsets_latest_is_the_high_watermark(tmp_path):
    log = _replicated_log(tmp_path)
    for _ in range(3):
        log.append(batch(count=2))
    assert log.offset_for_timestamp(LATEST_TIMESTAMP) == (0, -1)
    log.advance_high_watermark(4)
    assert log.offset_for_timestamp(LATEST_TIMESTAMP) == (4, -1)
    assert log.offset_for_timestamp(LATEST_TIMESTAMP)[0] == log.high_watermark
    log.set_replicated(False)
    assert log.offset_for_timestamp(LATEST_TIMESTAMP) == (6, -1)
    log.close()


def test_delete_records_cannot_pass_the_high_watermark_and_moves_the_epochs_start(tmp_path):
    log = _replicated_log(tmp_path)
    log.append(batch(count=1), leader_epoch=1)
    log.append(batch(count=1), leader_epoch=1)
    log.append(batch(count=1), leader_epoch=1)
    log.append(batch(count=1), leader_epoch=2)
    log.append(batch(count=1), leader_epoch=2)
    log.advance_high_watermark(4)
    with pytest.raises(OffsetOutOfRangeError):
        log.delete_records_before(5)
    assert log.delete_records_before(2) == 2
    assert log.epochs.entries == [(1, 2), (2, 3)]
    assert log.delete_records_before(4) == 4
    assert log.epochs.entries == [(2, 4)]
    log.close()


# ----------------------------------------------------------------- follower append


def _leader(tmp_path) -> PartitionLog:
    leader = _open(tmp_path / "leader")
    leader.append(batch(count=2, value_size=40, timestamp=5_000), leader_epoch=1)
    leader.append(batch(count=3, value_size=60, timestamp=5_010, producer_id=7, base_sequence=0), leader_epoch=1)
    leader.append(batch(count=1, value_size=80, timestamp=5_020), leader_epoch=2)
    leader.append(batch(count=2, value_size=20, timestamp=5_030, producer_id=7, base_sequence=3), leader_epoch=2)
    return leader


def test_a_follower_copies_the_leaders_bytes_as_they_are(tmp_path):
    leader = _leader(tmp_path)
    raw = leader.read_bytes(0, BIG)
    follower = _open(tmp_path / "follower")
    follower.set_replicated(True)
    info = follower.append_as_follower(raw)
    assert (info.first_offset, info.last_offset) == (0, 7)
    assert (info.record_count, info.batch_count, info.size) == (8, 4, len(raw))
    assert (info.max_timestamp, info.offset_of_max_timestamp) == (5_031, 7)
    assert follower.read_bytes(0, BIG) == raw
    assert follower.log_end_offset == leader.log_end_offset == 8
    assert [(h.base_offset, h.last_offset, h.partition_leader_epoch) for h in follower.iter_batch_headers()] == \
        [(h.base_offset, h.last_offset, h.partition_leader_epoch) for h in leader.iter_batch_headers()]
    assert follower.epochs.entries == leader.epochs.entries == [(1, 0), (2, 5)]
    entry = follower.producer_state.entries[7]
    leader_entry = leader.producer_state.entries[7]
    assert entry.last_sequence == leader_entry.last_sequence == 4
    assert entry.last_offset == leader_entry.last_offset == 7
    assert entry.producer_epoch == 0
    # A replica commits only what the leader says is committed.
    assert follower.high_watermark == 0
    follower.advance_high_watermark(leader.high_watermark)
    assert follower.high_watermark == 8
    assert [r.value for r in read_all(follower)] == [r.value for r in read_all(leader)]
    directory = follower.directory
    follower.close()
    reopened = _open(directory)
    assert reopened.read_bytes(0, BIG) == raw
    assert reopened.epochs.entries == [(1, 0), (2, 5)]
    assert reopened.producer_state.entries[7].last_sequence == 4
    reopened.close()
    leader.close()


def test_a_follower_appends_batch_by_batch(tmp_path):
    leader = _leader(tmp_path)
    raw = leader.read_bytes(0, BIG)
    follower = _open(tmp_path / "follower")
    for position, header in _headers(raw):
        info = follower.append_as_follower(raw[position : position + header.size])
        assert (info.first_offset, info.last_offset) == (header.base_offset, header.last_offset)
        assert follower.log_end_offset == header.next_offset
    assert follower.read_bytes(0, BIG) == raw
    assert follower.epochs.entries == [(1, 0), (2, 5)]
    assert follower.producer_state.entries[7].last_sequence == 4
    follower.close()
    leader.close()


def test_a_follower_accepts_a_gap_after_its_log_end(tmp_path):
    leader = _leader(tmp_path)
    raw = leader.read_bytes(5, BIG)  # the epoch-2 batches, offsets 5..7
    follower = _open(tmp_path / "follower")
    info = follower.append_as_follower(raw)
    assert (info.first_offset, info.last_offset) == (5, 7)
    assert follower.log_end_offset == 8
    assert follower.epochs.entries == [(2, 5)]
    assert follower.read_bytes(5, BIG) == raw
    follower.close()
    leader.close()


def test_a_batch_below_the_followers_log_end_is_refused(tmp_path):
    leader = _leader(tmp_path)
    raw = leader.read_bytes(0, BIG)
    follower = _open(tmp_path / "follower")
    follower.append_as_follower(raw)
    size = follower.size_in_bytes
    with pytest.raises(CorruptRecordError):
        follower.append_as_follower(raw)
    last_position, last = _headers(raw)[-1]
    with pytest.raises(CorruptRecordError):
        follower.append_as_follower(raw[last_position:])
    assert follower.log_end_offset == 8 and follower.size_in_bytes == size
    assert follower.read_bytes(0, BIG) == raw
    follower.close()
    leader.close()


def test_out_of_order_batches_in_one_set_write_nothing(tmp_path):
    leader = _leader(tmp_path)
    raw = leader.read_bytes(0, BIG)
    (p0, h0), (p1, h1) = _headers(raw)[:2]
    first, second = raw[p0 : p0 + h0.size], raw[p1 : p1 + h1.size]
    follower = _open(tmp_path / "follower")
    with pytest.raises(CorruptRecordError):
        follower.append_as_follower(first + second + first)
    assert follower.log_end_offset == 0 and follower.size_in_bytes == 0
    assert follower.epochs.entries == []
    assert follower.producer_state.entries == {}
    follower.close()
    leader.close()


@pytest.mark.parametrize("where", ["records", "crc field"])
def test_a_corrupted_batch_is_refused(tmp_path, where):
    leader = _leader(tmp_path)
    raw = bytearray(leader.read_bytes(0, BIG))
    _p, last = _headers(bytes(raw))[-1]
    flip = len(raw) - 3 if where == "records" else _p + 17
    raw[flip] ^= 0xFF
    follower = _open(tmp_path / "follower")
    with pytest.raises(CorruptRecordError):
        follower.append_as_follower(bytes(raw))
    assert follower.log_end_offset == 0 and follower.size_in_bytes == 0
    assert follower.epochs.entries == []
    follower.close()
    leader.close()


def test_an_empty_record_set_appends_nothing(tmp_path):
    follower = _open(tmp_path / "follower")
    assert follower.append_as_follower(b"") is None
    assert follower.log_end_offset == 0
    follower.close()


@pytest.mark.parametrize("cut", [12, 60])
def test_a_short_trailing_partial_batch_is_ignored(tmp_path, cut):
    leader = _leader(tmp_path)
    raw = leader.read_bytes(0, BIG)
    last_position, last = _headers(raw)[-1]
    whole = raw[:last_position]
    follower = _open(tmp_path / "follower")
    info = follower.append_as_follower(whole + raw[last_position : last_position + cut])
    assert (info.first_offset, info.last_offset, info.batch_count, info.size) == (0, 5, 3, len(whole))
    assert follower.log_end_offset == 6
    assert follower.read_bytes(0, BIG) == whole
    assert follower.epochs.entries == [(1, 0), (2, 5)]
    follower.close()
    leader.close()


@pytest.mark.parametrize("cut", [5, 60])
def test_only_a_short_partial_batch_gives_none(tmp_path, cut):
    leader = _leader(tmp_path)
    raw = leader.read_bytes(0, BIG)
    follower = _open(tmp_path / "follower")
    assert follower.append_as_follower(raw[:cut]) is None
    assert follower.log_end_offset == 0 and follower.size_in_bytes == 0
    follower.close()
    leader.close()


def test_a_trailing_partial_batch_with_a_whole_header_is_ignored(tmp_path):
    leader = _leader(tmp_path)
    raw = leader.read_bytes(0, BIG)
    last_position, last = _headers(raw)[-1]
    assert last.size > 62
    whole = raw[:last_position]
    follower = _open(tmp_path / "follower")
    info = follower.append_as_follower(whole + raw[last_position : last_position + last.size - 1])
    assert (info.first_offset, info.last_offset, info.batch_count, info.size) == (0, 5, 3, len(whole))
    assert follower.read_bytes(0, BIG) == whole
    follower.close()
    leader.close()


def test_only_a_partial_batch_with_a_whole_header_gives_none(tmp_path):
    leader = _leader(tmp_path)
    raw = leader.read_bytes(0, BIG)
    first = _headers(raw)[0][1]
    follower = _open(tmp_path / "follower")
    assert follower.append_as_follower(raw[: first.size - 1]) is None
    assert follower.log_end_offset == 0
    follower.close()
    leader.close()


def test_a_follower_rolls_segments_like_its_leader_holds_them(tmp_path):
    config = LogConfig(segment_bytes=4096, index_interval_bytes=256)
    leader = _open(tmp_path / "leader", config)
    for i in range(20):
        leader.append(batch(count=2, value_size=400), leader_epoch=1 if i < 10 else 3)
    follower = _open(tmp_path / "follower", config)
    offset = 0
    while offset < leader.log_end_offset:
        chunk = leader.read_bytes(offset, 3000)
        info = follower.append_as_follower(chunk)
        offset = info.last_offset + 1
    assert len(list(follower.segments)) > 1
    assert follower.log_end_offset == 40
    assert [r.offset for r in read_all(follower)] == list(range(40))
    assert follower.epochs.entries == leader.epochs.entries == [(1, 0), (3, 20)]
    for o in (0, 13, 20, 39):
        assert follower.read_bytes(o, 500)[:16] == leader.read_bytes(o, 500)[:16]
    follower.close()
    leader.close()


# ----------------------------------------------------------------- truncation


def test_truncate_to_trims_the_epochs_and_the_high_watermark(tmp_path):
    log = _replicated_log(tmp_path)
    for offset in range(10):
        epoch = 1 if offset < 4 else 2 if offset < 7 else 3
        log.append(batch(count=1, value_size=50), leader_epoch=epoch)
    assert log.epochs.entries == [(1, 0), (2, 4), (3, 7)]
    log.advance_high_watermark(8)
    size_of_one = _headers(log.read_bytes(0, BIG))[0][1].size
    assert len(_committed_bytes(log, 0)) == 8 * size_of_one  # caches the high watermark's position
    log.truncate_to(9)  # above the high watermark: it stays
    assert log.high_watermark == 8 and log.log_end_offset == 9
    assert log.epochs.entries == [(1, 0), (2, 4), (3, 7)]
    log.truncate_to(6)
    assert log.log_end_offset == 6
    assert log.high_watermark == 6
    assert log.epochs.entries == [(1, 0), (2, 4)]
    assert log.epochs.end_offset_for(2, log.log_end_offset) == (2, 6)
    assert log.epochs.end_offset_for(3, log.log_end_offset) == (-1, -1)
    assert len(_committed_bytes(log, 0)) == 6 * size_of_one
    # New leader, new epoch, bigger batches: the committed limit is recomputed.
    for _ in range(3):
        log.append(batch(count=1, value_size=500), leader_epoch=4)
    assert log.epochs.entries == [(1, 0), (2, 4), (4, 6)]
    assert log.high_watermark == 6
    assert len(_committed_bytes(log, 0)) == 6 * size_of_one
    log.advance_high_watermark(9)
    assert len(_committed_bytes(log, 0)) == len(log.read_bytes(0, BIG))
    log.truncate_to(2)
    assert log.epochs.entries == [(1, 0)]
    assert (log.high_watermark, log.log_end_offset) == (2, 2)
    directory = log.directory
    log.close()
    with open(os.path.join(directory, EPOCH_FILE), encoding="utf-8") as f:
        assert f.read() == "0\n1\n1 0\n"


def test_truncate_to_across_segments(tmp_path):
    log = _replicated_log(tmp_path, LogConfig(segment_bytes=4096, index_interval_bytes=256, file_delete_delay_ms=0))
    for i in range(20):
        log.append(batch(count=1, value_size=900), leader_epoch=i // 5)
    assert log.epochs.entries == [(0, 0), (1, 5), (2, 10), (3, 15)]
    log.advance_high_watermark(18)
    log.truncate_to(7)
    assert (log.log_end_offset, log.high_watermark) == (7, 7)
    assert log.epochs.entries == [(0, 0), (1, 5)]
    assert [r.offset for r in read_all(log)] == list(range(7))
    assert log.read(7, BIG, committed=True).file_range is None
    log.close()


# ----------------------------------------------------------------- the high watermark checkpoint


def _manager(tmp_path) -> LogManager:
    return LogManager(ManagerConfig(log_dirs=(str(tmp_path / "d1"),), node_id=1),
                      LogConfig(segment_bytes=16 * 1024)).open()


def test_high_watermarks_are_checkpointed_and_reloaded(tmp_path):
    replicated, plain = TopicPartition("rep", 0), TopicPartition("plain", 3)
    manager = _manager(tmp_path)
    log = manager.create_log(replicated)
    log.set_replicated(True)
    for _ in range(4):
        log.append(batch(count=2), leader_epoch=5)
    assert log.advance_high_watermark(6)
    other = manager.create_log(plain)
    other.append(batch(count=3))
    manager.close()
    path = tmp_path / "d1" / checkpoint.REPLICATION_OFFSET_CHECKPOINT
    assert path.read_text(encoding="utf-8") == "0\n2\nplain 3 3\nrep 0 6\n"
    assert checkpoint.read_offset_checkpoint(path) == {replicated: 6, plain: 3}

    reopened = _manager(tmp_path)
    log = reopened.get_log(replicated)
    assert log.log_end_offset == 8
    assert log.high_watermark == 6
    assert log.epochs.entries == [(5, 0)]
    assert reopened.get_log(plain).high_watermark == 3
    log.set_replicated(True)
    assert log.high_watermark == 6
    log.append(batch(count=1), leader_epoch=5)
    assert log.high_watermark == 6
    assert [h.base_offset for _p, h in _headers(_committed_bytes(log, 0))] == [0, 2, 4]
    log.set_replicated(False)
    assert log.high_watermark == log.log_end_offset == 9
    reopened.close()
    assert checkpoint.read_offset_checkpoint(path) == {replicated: 9, plain: 3}


def test_checkpoint_high_watermarks_on_demand(tmp_path):
    tp = TopicPartition("rep", 1)
    manager = _manager(tmp_path)
    log = manager.create_log(tp)
    log.set_replicated(True)
    log.append(batch(count=4))
    manager.checkpoint_high_watermarks()
    path = tmp_path / "d1" / checkpoint.REPLICATION_OFFSET_CHECKPOINT
    assert path.read_text(encoding="utf-8") == "0\n1\nrep 1 0\n"
    log.advance_high_watermark(4)
    manager.checkpoint_high_watermarks()
    assert path.read_text(encoding="utf-8") == "0\n1\nrep 1 4\n"
    manager.close()


def test_a_checkpointed_high_watermark_past_the_log_end_is_capped(tmp_path):
    tp, missing = TopicPartition("rep", 0), TopicPartition("rep", 1)
    manager = _manager(tmp_path)
    manager.create_log(tp).append(batch(count=3))
    manager.create_log(missing).append(batch(count=2))
    manager.close()
    checkpoint.write_offset_checkpoint(tmp_path / "d1" / checkpoint.REPLICATION_OFFSET_CHECKPOINT, {tp: 1_000})
    reopened = _manager(tmp_path)
    assert reopened.get_log(tp).high_watermark == 3
    assert reopened.get_log(missing).high_watermark == 2  # no entry: the log end
    reopened.close()


def test_partition_log_takes_the_high_watermark_it_is_given(tmp_path):
    log = open_log(tmp_path)
    log.append(batch(count=5))
    log.close()
    reopened = open_log(tmp_path, high_watermark=2)
    assert reopened.high_watermark == 2
    assert reopened.offset_for_timestamp(LATEST_TIMESTAMP) == (2, -1)
    assert reopened.read(0, BIG, committed=True).file_range is None  # one 5-record batch, not committed
    reopened.close()


# ----------------------------------------------------------------- retention


def test_retention_never_deletes_past_the_high_watermark(tmp_path):
    config = LogConfig(segment_bytes=4096, index_interval_bytes=256, retention_ms=1_000, file_delete_delay_ms=0)
    log = _replicated_log(tmp_path, config)
    for i in range(24):
        log.append(batch(count=1, value_size=900, timestamp=1_000 + i), leader_epoch=1 if i < 12 else 2)
    segments = list(log.segments)
    assert len(segments) >= 5
    now = 10_000_000  # everything is long expired
    assert log.delete_old_segments(now=now) == 0
    assert len(list(log.segments)) == len(segments) and log.log_start_offset == 0

    # High watermark inside the second segment: only the first may go.
    log.advance_high_watermark(segments[1].base_offset + 1)
    assert log.delete_old_segments(now=now) == 1
    assert log.log_start_offset == segments[1].base_offset
    assert list(log.segments)[0].base_offset == segments[1].base_offset
    assert all(s.next_offset <= log.high_watermark for s in segments[:1])

    # High watermark exactly at a segment's end: that segment may go, not the next.
    log.advance_high_watermark(segments[3].base_offset)
    assert log.delete_old_segments(now=now) == 2
    assert log.log_start_offset == segments[3].base_offset
    assert log.epochs.entries[0][1] == log.log_start_offset
    assert [r.offset for r in read_all(log)] == list(range(log.log_start_offset, 24))

    # Fully committed: everything goes, the active segment too (after a roll).
    log.advance_high_watermark(log.log_end_offset)
    assert log.delete_old_segments(now=now) >= 1
    assert log.log_start_offset == log.log_end_offset == 24
    assert log.epochs.entries == [(2, 24)]
    log.close()


def test_size_retention_never_deletes_past_the_high_watermark(tmp_path):
    config = LogConfig(segment_bytes=4096, index_interval_bytes=256, retention_ms=-1, retention_bytes=0,
                       file_delete_delay_ms=0)
    log = _replicated_log(tmp_path, config)
    for _ in range(16):
        log.append(batch(count=1, value_size=900))
    segments = list(log.segments)
    assert log.delete_old_segments() == 0
    log.advance_high_watermark(segments[2].base_offset - 1)  # inside the second segment
    assert log.delete_old_segments() == 1
    assert list(log.segments)[0].next_offset > log.high_watermark
    assert log.log_start_offset == segments[1].base_offset
    log.close()


# ----------------------------------------------------------------- found while writing these tests


def test_committed_reads_stay_below_the_high_watermark_after_compaction(tmp_path):
    config = LogConfig(segment_bytes=4096, index_interval_bytes=256, cleanup_policy="compact",
                       file_delete_delay_ms=0)
    log = _replicated_log(tmp_path, config)
    for i in range(40):  # even offsets share one key (compacted away), odd ones are unique
        key = b"dup" if i % 2 == 0 else b"u%d" % i
        log.append(encode_batch([Record(0, 1_000 + i, key, b"v" * 300)]))
    second = list(log.segments)[1]
    hw = second.base_offset + 5
    log.advance_high_watermark(hw)

    def committed_offsets() -> list[int]:
        return [r.offset for _h, records in iter_batches(_committed_bytes(log, second.base_offset)) for r in records]

    assert committed_offsets() == list(range(second.base_offset, hw))  # this read caches the position
    clean_log(log, now_ms=10**12)
    offsets = committed_offsets()
    assert offsets and all(o < hw for o in offsets), f"committed read returned {offsets}, high watermark {hw}"
    log.close()


@pytest.mark.parametrize("log_start", [3, 100])
def test_reopening_moves_the_first_epoch_to_the_log_start(tmp_path, log_start):
    log = open_log(tmp_path)
    log.append(batch(count=5), leader_epoch=1)
    log.append(batch(count=5), leader_epoch=2)
    log.close()
    reopened = open_log(tmp_path, log_start_offset=log_start)
    assert reopened.log_start_offset == log_start
    expected = [(1, 3), (2, 5)] if log_start == 3 else [(2, 100)]
    assert reopened.epochs.entries == expected
    reopened.close()
