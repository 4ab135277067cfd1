"""Idempotent producer state: sequence checks, updates and Kafka-format snapshots."""

from __future__ import annotations

import os
from pathlib import Path

import crc32c
import pytest
from hypothesis import given
from hypothesis import strategies as st

from storage.batch import (
    CONTROL_MASK,
    MAGIC_V2,
    MIN_BATCH_LENGTH,
    TRANSACTIONAL_MASK,
    BatchHeader,
)
from storage.producer_state import (
    DUPLICATE_SEQUENCE_NUMBER,
    INVALID_PRODUCER_EPOCH,
    NONE,
    OUT_OF_ORDER_SEQUENCE_NUMBER,
    CorruptSnapshotError,
    ProducerEntry,
    ProducerStateManager,
    decode_snapshot,
    encode_snapshot,
    snapshot_file_name,
)
from storage.records import CONTROL_TYPE_ABORT, CONTROL_TYPE_COMMIT, ControlRecord

PID = 7
EPOCH = 3
INT32_MAX = (1 << 31) - 1


def batch(
    base_offset: int,
    base_sequence: int,
    count: int = 1,
    *,
    producer_id: int = PID,
    epoch: int = EPOCH,
    transactional: bool = False,
    control: bool = False,
    max_timestamp: int = 1_700_000_000_000,
) -> BatchHeader:
    """A header as the append path sees it after offsets are assigned."""
    attributes = (TRANSACTIONAL_MASK if transactional or control else 0) | (CONTROL_MASK if control else 0)
    return BatchHeader(
        base_offset=base_offset,
        batch_length=MIN_BATCH_LENGTH + 10 * count,
        partition_leader_epoch=0,
        magic=MAGIC_V2,
        crc=0,
        attributes=attributes,
        last_offset_delta=count - 1,
        base_timestamp=max_timestamp,
        max_timestamp=max_timestamp,
        producer_id=producer_id,
        producer_epoch=epoch,
        base_sequence=-1 if control else base_sequence,
        record_count=count,
    )


def marker(base_offset: int, *, epoch: int = EPOCH, producer_id: int = PID) -> BatchHeader:
    return batch(base_offset, -1, control=True, epoch=epoch, producer_id=producer_id)


@pytest.fixture
def manager(tmp_path: Path) -> ProducerStateManager:
    """Producer 7, epoch 3, has appended sequences 0-4 at offsets 100-104."""
    m = ProducerStateManager(tmp_path)
    m.update(batch(100, 0, 5))
    return m


# --------------------------------------------------------------------------- sequence checks


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        (batch(0, 5, 3), NONE),  # next in sequence
        (batch(0, 0, 5), DUPLICATE_SEQUENCE_NUMBER),  # the last batch again
        (batch(0, 6), OUT_OF_ORDER_SEQUENCE_NUMBER),  # gap
        (batch(0, 3), OUT_OF_ORDER_SEQUENCE_NUMBER),  # rewind, not a known batch
        (batch(0, 0, 4), OUT_OF_ORDER_SEQUENCE_NUMBER),  # same start, different end
        (batch(0, 5, epoch=EPOCH - 1), INVALID_PRODUCER_EPOCH),  # zombie
        (batch(0, 0, 5, epoch=EPOCH - 1), INVALID_PRODUCER_EPOCH),  # zombie retrying
        (batch(0, 0, epoch=EPOCH + 1), NONE),  # new epoch starts at 0
        (batch(0, 5, epoch=EPOCH + 1), OUT_OF_ORDER_SEQUENCE_NUMBER),  # new epoch must start at 0
        (batch(0, 42, producer_id=99), NONE),  # unknown producer: any sequence
        (batch(0, 42, producer_id=-1), NONE),  # not idempotent
        (batch(0, -1), OUT_OF_ORDER_SEQUENCE_NUMBER),  # idempotent batch without a sequence
        (marker(0), NONE),
        (marker(0, epoch=EPOCH + 1), NONE),
        (marker(0, epoch=EPOCH - 1), INVALID_PRODUCER_EPOCH),
    ],
    ids=[
        "in-sequence", "duplicate", "gap", "rewind", "partial-overlap", "fenced-epoch", "fenced-retry",
        "new-epoch-from-0", "new-epoch-not-0", "unknown-producer", "no-producer-id", "no-sequence",
        "marker", "marker-new-epoch", "marker-fenced",
    ],
)
def test_check_sequence(manager: ProducerStateManager, header: BatchHeader, expected: int) -> None:
    assert manager.check_sequence(header) == expected


def test_sequence_wraps_after_int32_max(tmp_path: Path) -> None:
    m = ProducerStateManager(tmp_path)
    m.update(batch(0, INT32_MAX - 1, 2))  # sequences 2^31-2 and 2^31-1
    assert m.entries[PID].last_sequence == INT32_MAX
    assert m.check_sequence(batch(2, 0)) == NONE
    assert m.check_sequence(batch(2, INT32_MAX)) == OUT_OF_ORDER_SEQUENCE_NUMBER


def test_batch_straddling_the_wrap(tmp_path: Path) -> None:
    m = ProducerStateManager(tmp_path)
    m.update(batch(0, INT32_MAX, 3))  # sequences 2^31-1, 0, 1
    assert m.entries[PID].last_sequence == 1
    assert m.check_sequence(batch(0, INT32_MAX, 3)) == DUPLICATE_SEQUENCE_NUMBER
    assert m.check_sequence(batch(3, 2)) == NONE


def test_duplicates_of_the_last_five_batches_are_recognised(tmp_path: Path) -> None:
    # Five requests in flight, the connection drops, the producer resends all five.
    m = ProducerStateManager(tmp_path)
    for i in range(6):
        m.update(batch(100 + 2 * i, 2 * i, 2))
    for i in range(1, 6):
        retry = batch(0, 2 * i, 2)
        assert m.check_sequence(retry) == DUPLICATE_SEQUENCE_NUMBER
        original = m.find_duplicate(retry)
        assert original is not None
        assert (original.first_offset, original.last_offset) == (100 + 2 * i, 101 + 2 * i)
    assert m.check_sequence(batch(0, 0, 2)) == OUT_OF_ORDER_SEQUENCE_NUMBER  # sixth-newest: forgotten
    assert m.find_duplicate(batch(0, 0, 2)) is None


def test_marker_with_bumped_epoch_restarts_sequences(manager: ProducerStateManager) -> None:
    # The coordinator aborts with a bumped epoch; the producer then starts again at 0.
    manager.update(marker(105, epoch=EPOCH + 1))
    assert manager.check_sequence(batch(0, 0, epoch=EPOCH + 1)) == NONE
    assert manager.check_sequence(batch(0, 5, epoch=EPOCH + 1)) == OUT_OF_ORDER_SEQUENCE_NUMBER
    assert manager.check_sequence(batch(0, 5)) == INVALID_PRODUCER_EPOCH


# --------------------------------------------------------------------------- updates


def test_update_records_the_last_batch(manager: ProducerStateManager) -> None:
    manager.update(batch(110, 5, 3, max_timestamp=42))
    assert manager.entries[PID] == ProducerEntry(
        producer_id=PID,
        producer_epoch=EPOCH,
        last_sequence=7,
        last_offset=112,
        offset_delta=2,
        last_timestamp=42,
        coordinator_epoch=-1,
        current_txn_first_offset=-1,
    )
    assert manager.map_end_offset == 113


def test_transaction_first_offset_set_by_first_batch_cleared_by_marker(tmp_path: Path) -> None:
    m = ProducerStateManager(tmp_path)
    m.update(batch(10, 0, 2, transactional=True))
    m.update(batch(12, 2, 2, transactional=True))
    assert m.entries[PID].current_txn_first_offset == 10
    m.update(marker(14, epoch=EPOCH), ControlRecord(0, CONTROL_TYPE_COMMIT, 9))
    entry = m.entries[PID]
    assert entry.current_txn_first_offset == -1
    assert entry.coordinator_epoch == 9
    assert (entry.last_sequence, entry.last_offset) == (3, 13)  # a marker is not a data batch
    m.update(batch(15, 4, transactional=True))
    assert m.entries[PID].current_txn_first_offset == 15
    assert m.map_end_offset == 16


def test_update_rejects_non_idempotent_batches(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        ProducerStateManager(tmp_path).update(batch(0, 0, producer_id=-1))


# --------------------------------------------------------------------------- snapshots


def test_snapshot_round_trip(tmp_path: Path) -> None:
    m = ProducerStateManager(tmp_path)
    m.update(batch(0, 0, 3, producer_id=1, max_timestamp=1000))
    m.update(batch(3, 10, 1, producer_id=2, epoch=0, transactional=True, max_timestamp=2000))
    m.update(batch(4, 0, 2, producer_id=3, epoch=5))
    path = m.take_snapshot(6)
    assert os.path.basename(path) == "00000000000000000006.snapshot"
    assert sorted(os.listdir(tmp_path)) == ["00000000000000000006.snapshot"]  # no .tmp left

    reloaded = ProducerStateManager(tmp_path)
    assert reloaded.load_latest_snapshot(max_offset=100) == 6
    assert reloaded.entries == m.entries
    assert reloaded.map_end_offset == 6
    # The reloaded state still recognises the last batch as a duplicate.
    assert reloaded.check_sequence(batch(0, 0, 2, producer_id=3, epoch=5)) == DUPLICATE_SEQUENCE_NUMBER
    assert reloaded.check_sequence(batch(0, 2, producer_id=3, epoch=5)) == NONE


def _entry_bytes(pid: int, epoch: int, last_seq: int, last_offset: int, delta: int, ts: int, coord: int, txn: int) -> bytes:
    """One snapshot entry, field by field, from the documented layout (no struct)."""
    return (
        pid.to_bytes(8, "big", signed=True)
        + epoch.to_bytes(2, "big", signed=True)
        + last_seq.to_bytes(4, "big", signed=True)
        + last_offset.to_bytes(8, "big", signed=True)
        + delta.to_bytes(4, "big", signed=True)
        + ts.to_bytes(8, "big", signed=True)
        + coord.to_bytes(4, "big", signed=True)
        + txn.to_bytes(8, "big", signed=True)
    )


def test_snapshot_golden_bytes(tmp_path: Path) -> None:
    m = ProducerStateManager(tmp_path)
    m.update(batch(20, 7, 3, producer_id=1000, epoch=2, transactional=True, max_timestamp=1_700_000_000_123))
    m.update(batch(10, 0, 1, producer_id=5, epoch=0, max_timestamp=-1))
    m.update(marker(23, epoch=2, producer_id=1000), ControlRecord(0, CONTROL_TYPE_ABORT, 4))  # closes producer 1000's transaction
    m.take_snapshot(24)

    body = (
        (2).to_bytes(4, "big")  # entry count
        # sorted by producer id: 5 first
        + _entry_bytes(5, 0, 0, 10, 0, -1, -1, -1)
        + _entry_bytes(1000, 2, 9, 22, 2, 1_700_000_000_000, 4, -1)
    )
    expected = (1).to_bytes(2, "big") + crc32c.crc32c(body).to_bytes(4, "big") + body
    assert len(expected) == 10 + 2 * 46
    assert (tmp_path / "00000000000000000024.snapshot").read_bytes() == expected
    assert decode_snapshot(expected) == sorted(m.entries.values(), key=lambda e: e.producer_id)


def test_empty_snapshot_bytes() -> None:
    body = (0).to_bytes(4, "big")
    assert encode_snapshot([]) == b"\x00\x01" + crc32c.crc32c(body).to_bytes(4, "big") + body


def test_corrupt_snapshot_falls_back_to_older_one_and_is_deleted(tmp_path: Path) -> None:
    m = ProducerStateManager(tmp_path)
    m.update(batch(0, 0, 5))
    m.take_snapshot(5)
    m.update(batch(5, 5, 5))
    newest = m.take_snapshot(10)

    data = bytearray(Path(newest).read_bytes())
    data[20] ^= 0x01  # inside the first entry: only the CRC notices
    Path(newest).write_bytes(bytes(data))

    reloaded = ProducerStateManager(tmp_path)
    assert reloaded.load_latest_snapshot(max_offset=100) == 5
    assert reloaded.entries[PID].last_sequence == 4
    assert reloaded.snapshot_offsets() == [5]


@pytest.mark.parametrize(
    "mangle",
    [
        lambda d: d[:-1],  # truncated entry
        lambda d: d + b"\x00",  # trailing garbage
        lambda d: b"\x00\x02" + d[2:],  # unknown version
        lambda d: d[:5],  # shorter than the header
        lambda d: b"",
    ],
    ids=["truncated", "trailing", "version", "short-header", "empty"],
)
def test_snapshot_layout_errors_are_corrupt(mangle: object) -> None:
    entry = ProducerEntry(1, 0, 0, 0, 0, 0, -1, -1)
    with pytest.raises(CorruptSnapshotError):
        decode_snapshot(mangle(encode_snapshot([entry])))  # type: ignore[operator]


def test_load_without_snapshots_is_empty(tmp_path: Path) -> None:
    m = ProducerStateManager(tmp_path)
    m.update(batch(0, 0))
    assert m.load_latest_snapshot(max_offset=100) == 0
    assert m.entries == {} and m.map_end_offset == 0


def test_load_respects_max_offset(tmp_path: Path) -> None:
    m = ProducerStateManager(tmp_path)
    for offset in (5, 10, 20):
        m.update(batch(offset - 1, offset - 1))
        m.take_snapshot(offset)
    assert m.load_latest_snapshot(max_offset=15) == 10
    assert m.entries[PID].last_offset == 9
    assert m.snapshot_offsets() == [5, 10, 20]  # newer snapshots are ignored, not deleted


def test_stray_tmp_file_is_removed_on_load(tmp_path: Path) -> None:
    (tmp_path / (snapshot_file_name(30) + ".tmp")).write_bytes(b"half written")
    m = ProducerStateManager(tmp_path)
    assert m.load_latest_snapshot(max_offset=100) == 0
    assert os.listdir(tmp_path) == []


def test_snapshot_below_map_end_offset_is_refused(manager: ProducerStateManager) -> None:
    with pytest.raises(ValueError):
        manager.take_snapshot(50)  # state already includes offsets up to 104


def test_snapshot_offsets_ignore_other_files(tmp_path: Path) -> None:
    for name in ["00000000000000000000.log", "00000000000000000007.snapshot", "0007.snapshot",
                 "00000000000000000003.snapshot.deleted", "00000000000000000002.snapshot"]:
        (tmp_path / name).write_bytes(b"")
    assert ProducerStateManager(tmp_path).snapshot_offsets() == [2, 7]


def _manager_with_snapshots(tmp_path: Path, offsets: list[int]) -> ProducerStateManager:
    m = ProducerStateManager(tmp_path)
    for offset in offsets:
        m.update(batch(offset - 1, offset - 1))
        m.take_snapshot(offset)
    return m


def test_delete_snapshots_before_and_after(tmp_path: Path) -> None:
    m = _manager_with_snapshots(tmp_path, [5, 10, 20, 30])
    m.delete_snapshots_before(10)
    assert m.snapshot_offsets() == [10, 20, 30]
    m.delete_snapshots_after(20)
    assert m.snapshot_offsets() == [10, 20]


def test_truncate_and_reload_after_log_truncation(tmp_path: Path) -> None:
    m = _manager_with_snapshots(tmp_path, [5, 10, 20])
    replay_from = m.truncate_and_reload(log_start=6, log_end=15)
    assert replay_from == 10
    assert m.snapshot_offsets() == [10]
    assert m.entries[PID].last_offset == 9  # state as of the snapshot, batch at 19 forgotten
    assert m.map_end_offset == 10


def test_truncate_and_reload_without_usable_snapshot_replays_from_log_start(tmp_path: Path) -> None:
    m = _manager_with_snapshots(tmp_path, [5, 20])
    assert m.truncate_and_reload(log_start=8, log_end=15) == 8
    assert m.entries == {} and m.snapshot_offsets() == []


def test_truncate_and_reload_keeps_consistent_state(tmp_path: Path) -> None:
    m = _manager_with_snapshots(tmp_path, [5, 10])
    m.update(batch(12, 10))  # map_end_offset 13, newer than any snapshot
    assert m.truncate_and_reload(log_start=5, log_end=13) == 13
    assert m.entries[PID].last_offset == 12  # nothing reloaded
    assert m.snapshot_offsets() == [5, 10]  # a snapshot exactly at log_start is kept


entries_strategy = st.lists(
    st.builds(
        ProducerEntry,
        producer_id=st.integers(0, (1 << 63) - 1),
        producer_epoch=st.integers(-(1 << 15), (1 << 15) - 1),
        last_sequence=st.integers(-1, INT32_MAX),
        last_offset=st.integers(-1, (1 << 63) - 1),
        offset_delta=st.integers(0, INT32_MAX),
        last_timestamp=st.integers(-(1 << 63), (1 << 63) - 1),
        coordinator_epoch=st.integers(-(1 << 31), INT32_MAX),
        current_txn_first_offset=st.integers(-1, (1 << 63) - 1),
    ),
    max_size=20,
    unique_by=lambda e: e.producer_id,
)


@given(entries_strategy)
def test_snapshot_codec_round_trip(entries: list[ProducerEntry]) -> None:
    data = encode_snapshot(entries)
    assert len(data) == 10 + 46 * len(entries)
    assert decode_snapshot(data) == sorted(entries, key=lambda e: e.producer_id)
