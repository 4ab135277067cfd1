"""Transactions in a partition log: markers, the last stable offset, read_committed reads,
marker fencing. Real logs on real files."""

from __future__ import annotations

import os
import tempfile

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storage import producer_state
from storage.batch import iter_headers
from storage.errors import InvalidProducerEpochError, StorageError, TransactionCoordinatorFencedError
from storage.log import LATEST_STABLE, PartitionLog
from storage.records import CONTROL_TYPE_ABORT, CONTROL_TYPE_COMMIT, Record, encode_batch, iter_batches, read_control_record
from tests.unit.storage.helpers import TP, batch, open_log

BIG = 1 << 20


def txn_batch(producer_id: int, sequence: int, count: int = 1, *, epoch: int = 0, value: bytes = b"v") -> bytes:
    """A transactional producer's batch (offsets 0.., as a client sends it)."""
    records = [Record(i, 1_000 + i, b"k", value) for i in range(count)]
    return encode_batch(records, producer_id=producer_id, producer_epoch=epoch, base_sequence=sequence,
                        is_transactional=True)


def committed_offsets(log: PartitionLog, start: int = 0) -> list[int]:
    """Offsets of the data records a read_committed read returns from ``start`` (one
    read per segment, to the cap)."""
    out: list[int] = []
    offset = start
    while True:
        info = log.read(offset, BIG, read_committed=True)
        if info.file_range is None:
            return out
        raw = os.pread(info.file_range.fd, info.file_range.length, info.file_range.position)
        for header, records in iter_batches(raw):
            if not header.is_control:
                out.extend(r.offset for r in records)
            offset = header.next_offset


# ----------------------------------------------------------------- markers


def test_append_marker_writes_one_control_batch_as_kafka_shapes_it(tmp_path):
    log = open_log(tmp_path)
    log.append(txn_batch(5, 0, 2, epoch=3), leader_epoch=7)
    info = log.append_marker(5, 3, True, 11, leader_epoch=7, now=42_000)
    assert (info.first_offset, info.last_offset, info.record_count) == (2, 2, 1)
    raw = log.read_bytes(2, BIG)
    (_position, header), = iter_headers(memoryview(raw))
    assert header.is_control and header.is_transactional
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (5, 3, -1)
    assert (header.partition_leader_epoch, header.max_timestamp) == (7, 42_000)
    marker = read_control_record(raw)
    assert (marker.type, marker.coordinator_epoch) == (CONTROL_TYPE_COMMIT, 11)
    log.append(txn_batch(5, 2, epoch=3), leader_epoch=7)
    log.append_marker(5, 3, False, 11, leader_epoch=7)
    assert read_control_record(log.read_bytes(4, BIG)).type == CONTROL_TYPE_ABORT
    entry = log.producer_state.entries[5]
    assert (entry.coordinator_epoch, entry.current_txn_first_offset) == (11, -1)


def test_a_marker_for_a_producer_without_an_open_transaction_is_still_written(tmp_path):
    log = open_log(tmp_path)
    log.append(batch(count=3), leader_epoch=0)
    info = log.append_marker(99, 0, False, 1, leader_epoch=0)
    assert info.first_offset == 3 and log.log_end_offset == 4
    assert log.last_stable_offset == 4
    assert log.producer_state.entries[99].coordinator_epoch == 1


def test_marker_with_an_old_producer_epoch_is_refused_with_invalid_producer_epoch(tmp_path):
    log = open_log(tmp_path)
    log.append(txn_batch(5, 0, epoch=4), leader_epoch=0)
    with pytest.raises(InvalidProducerEpochError) as refused:
        log.append_marker(5, 3, True, 0, leader_epoch=0)
    assert refused.value.kafka_error_code == 47
    assert isinstance(refused.value, StorageError)
    assert log.log_end_offset == 1  # nothing written
    assert log.last_stable_offset == 0  # the transaction is still open
    # A newer epoch is fine: the coordinator bumps it when it aborts a timed-out txn.
    log.append_marker(5, 5, False, 0, leader_epoch=0)
    assert log.last_stable_offset == 2
    assert log.producer_state.entries[5].producer_epoch == 5


def test_marker_from_an_older_coordinator_epoch_is_refused_with_coordinator_fenced(tmp_path):
    log = open_log(tmp_path)
    log.append(txn_batch(5, 0), leader_epoch=0)
    log.append_marker(5, 0, True, 6, leader_epoch=0)
    log.append(txn_batch(5, 1), leader_epoch=0)
    with pytest.raises(TransactionCoordinatorFencedError) as refused:
        log.append_marker(5, 0, True, 5, leader_epoch=0)
    assert refused.value.kafka_error_code == 52
    assert log.log_end_offset == 3 and log.last_stable_offset == 2
    log.append_marker(5, 0, True, 6, leader_epoch=0)  # the same coordinator epoch passes
    assert log.last_stable_offset == 4


def test_a_control_batch_with_an_unreadable_record_is_refused_before_it_is_written(tmp_path):
    log = open_log(tmp_path)
    bad = encode_batch([Record(0, 1, b"\x00", b"")], producer_id=5, producer_epoch=0, is_transactional=True,
                       is_control=True)
    with pytest.raises(StorageError):
        log.append(bad, leader_epoch=0)
    assert log.log_end_offset == 0


# ----------------------------------------------------------------- the last stable offset


def test_lso_stays_at_the_first_offset_of_an_open_transaction_and_moves_on_the_marker(tmp_path):
    log = open_log(tmp_path)
    log.append(batch(count=2), leader_epoch=0)  # offsets 0-1, not transactional
    assert log.last_stable_offset == 2
    log.append(txn_batch(5, 0, 3), leader_epoch=0)  # 2-4
    log.append(batch(count=1), leader_epoch=0)  # 5: a plain write inside the txn's span
    log.append(txn_batch(5, 3, 2), leader_epoch=0)  # 6-7
    assert log.high_watermark == 8
    assert log.last_stable_offset == 2
    assert log.producer_state.first_unstable_offset() == 2
    info = log.read(0, BIG, read_committed=True)
    assert info.last_stable_offset == 2
    assert committed_offsets(log) == [0, 1]
    # A read_committed read at the LSO has nothing to return yet.
    assert log.read(2, BIG, read_committed=True).file_range is None
    # Uncommitted and committed (high watermark) reads still see everything.
    assert log.read(2, BIG).file_range is not None
    log.append_marker(5, 0, True, 0, leader_epoch=0)  # 8
    assert log.last_stable_offset == 9 == log.log_end_offset
    assert log.producer_state.first_unstable_offset() is None
    assert committed_offsets(log) == [0, 1, 2, 3, 4, 5, 6, 7]
    assert log.offset_for_timestamp(LATEST_STABLE) == (9, -1)


def test_interleaved_producers_the_lso_follows_the_oldest_open_transaction(tmp_path):
    log = open_log(tmp_path)
    log.append(txn_batch(1, 0, 2), leader_epoch=0)  # 0-1 producer 1
    log.append(txn_batch(2, 0, 2), leader_epoch=0)  # 2-3 producer 2
    log.append(txn_batch(1, 2, 1), leader_epoch=0)  # 4 producer 1
    log.append(txn_batch(3, 0, 1), leader_epoch=0)  # 5 producer 3
    assert log.last_stable_offset == 0
    log.append_marker(2, 0, False, 0, leader_epoch=0)  # 6: producer 2 aborts, 1 still open
    assert log.last_stable_offset == 0
    log.append_marker(1, 0, True, 0, leader_epoch=0)  # 7: now producer 3's txn is the oldest
    assert log.last_stable_offset == 5
    assert committed_offsets(log) == [0, 1, 2, 3, 4]  # aborted data is filtered by the consumer
    log.append(txn_batch(2, 2, 1), leader_epoch=0)  # 8: producer 2's next transaction
    assert log.last_stable_offset == 5
    log.append_marker(3, 0, True, 0, leader_epoch=0)  # 9
    assert log.last_stable_offset == 8
    log.append_marker(2, 0, True, 0, leader_epoch=0)  # 10
    assert log.last_stable_offset == 11
    assert log.producer_state.ongoing == {}


def test_lso_never_passes_the_high_watermark_on_a_replicated_log(tmp_path):
    log = open_log(tmp_path)
    log.set_replicated(True)
    log.append(batch(count=2), leader_epoch=0)  # 0-1
    assert log.high_watermark == 0 and log.last_stable_offset == 0
    log.append(txn_batch(5, 0, 2), leader_epoch=0)  # 2-3
    log.advance_high_watermark(1)
    assert log.last_stable_offset == 1
    log.advance_high_watermark(4)
    assert log.last_stable_offset == 2  # the open transaction holds it
    log.append_marker(5, 0, True, 0, leader_epoch=0)  # 4
    # The marker is not replicated yet: a new leader may still see the txn open, so the
    # LSO must not move past its first offset (nor past the high watermark).
    assert log.last_stable_offset == 2
    assert log.read(2, BIG, read_committed=True).file_range is None
    log.advance_high_watermark(5)
    assert log.last_stable_offset == 5
    assert committed_offsets(log) == [0, 1, 2, 3]
    log.append(batch(count=1), leader_epoch=0)  # 5
    assert log.last_stable_offset == 5 == log.high_watermark


def test_read_committed_stops_at_the_lso_inside_a_segment_and_across_segments(tmp_path):
    from storage.config import LogConfig

    log = open_log(tmp_path, LogConfig(segment_bytes=600))
    for _ in range(6):
        log.append(batch(count=1, value_size=150), leader_epoch=0)  # several segments
    first_txn = log.log_end_offset
    log.append(txn_batch(5, 0, 1), leader_epoch=0)
    for _ in range(4):
        log.append(batch(count=1, value_size=150), leader_epoch=0)
    assert len(log.segments) > 2
    assert log.last_stable_offset == first_txn
    assert committed_offsets(log) == list(range(first_txn))
    # The high-watermark read goes on to the end; its cache is not disturbed by the LSO's.
    assert log.read(first_txn, BIG, committed=True).file_range is not None
    log.append_marker(5, 0, False, 0, leader_epoch=0)
    assert committed_offsets(log) == [o for o in range(log.log_end_offset - 1)]


# ----------------------------------------------------------------- replicas and restarts


def _txn_files(log: PartitionLog) -> dict[str, bytes]:
    out = {}
    for name in sorted(os.listdir(log.directory)):
        if name.endswith(".txnindex"):
            with open(os.path.join(log.directory, name), "rb") as handle:
                out[name] = handle.read()
    return out


def _leader_with_transactions(tmp_path, config) -> PartitionLog:
    leader = PartitionLog(str(tmp_path / "leader"), TP, config)
    leader.set_replicated(True)
    for round_ in range(5):
        leader.append(txn_batch(1, 2 * round_, 2, value=b"a" * 150), leader_epoch=1)
        leader.append(txn_batch(2, round_, 1, value=b"b" * 150), leader_epoch=1)
        leader.append(batch(count=1, value_size=150), leader_epoch=1)
        leader.append_marker(1, 0, round_ % 2 == 1, 3, leader_epoch=1)
        leader.append(txn_batch(3, round_, 1, value=b"c" * 150), leader_epoch=2)
        leader.append_marker(3, 0, False, 3, leader_epoch=2)
        if round_ < 4:  # producer 2's last transaction stays open
            leader.append_marker(2, 0, round_ % 2 == 0, 3, leader_epoch=2)
    leader.append(txn_batch(4, 0, 1), leader_epoch=2)  # and one more, opened last
    return leader


def _state(log: PartitionLog) -> tuple:
    return (log.producer_state.entries, log.producer_state.ongoing, list(log.producer_state.unreplicated),
            log.last_stable_offset)


@pytest.mark.parametrize("chunk_bytes", [1, 4096, BIG], ids=["batch-by-batch", "chunks", "one-read"])
def test_a_follower_fed_the_leaders_bytes_ends_with_the_same_txn_state(tmp_path, chunk_bytes):
    from storage.config import LogConfig

    config = LogConfig(segment_bytes=2048)
    leader = _leader_with_transactions(tmp_path, config)
    follower = PartitionLog(str(tmp_path / "follower"), TP, config)
    follower.set_replicated(True)
    offset = 0
    while offset < leader.log_end_offset:
        # A replica fetch: read_bytes gives whole batches (at least one), as the leader sends them.
        raw = leader.read_bytes(offset, chunk_bytes)
        info = follower.append_as_follower(raw)
        assert info is not None
        offset = info.last_offset + 1
    assert follower.log_end_offset == leader.log_end_offset
    for hw in (0, leader.log_end_offset // 2, leader.log_end_offset - 3, leader.log_end_offset):
        leader.advance_high_watermark(hw)
        follower.advance_high_watermark(hw)
        assert _state(follower) == _state(leader)
    assert leader.last_stable_offset == leader.producer_state.ongoing[2] < leader.high_watermark
    end = leader.log_end_offset
    assert follower.aborted_transactions(0, end) == leader.aborted_transactions(0, end) != []
    leader_files, follower_files = _txn_files(leader), _txn_files(follower)
    assert b"".join(follower_files.values()) == b"".join(leader_files.values())
    if chunk_bytes == 1:  # the same rolls: the same files, byte for byte
        assert follower_files == leader_files
    leader.close()
    follower.close()


def test_a_restart_keeps_open_transactions_the_lso_and_the_coordinator_epoch(tmp_path):
    log = open_log(tmp_path)
    log.append(batch(count=2), leader_epoch=0)  # 0-1
    log.append(txn_batch(1, 0, 2), leader_epoch=0)  # 2-3
    log.append_marker(1, 0, True, 8, leader_epoch=0)  # 4
    log.append(txn_batch(2, 0, 1), leader_epoch=0)  # 5
    log.append(txn_batch(1, 2, 1), leader_epoch=0)  # 6
    log.append(txn_batch(3, 0, 1), leader_epoch=0)  # 7
    log.append_marker(3, 0, False, 8, leader_epoch=0)  # 8
    state, lso = _state(log), log.last_stable_offset
    assert lso == 5
    log.close()
    snapshots = [n for n in os.listdir(log.directory) if n.endswith(".snapshot")]
    assert snapshots == ["00000000000000000009.snapshot"]  # nothing to replay: all from the snapshot
    reopened = open_log(tmp_path)
    assert _state(reopened) == state
    assert reopened.producer_state.ongoing == {2: 5, 1: 6}
    assert list(reopened.producer_state.ongoing) == [2, 1]  # first-offset order
    assert reopened.last_stable_offset == 5
    with pytest.raises(TransactionCoordinatorFencedError):
        reopened.append_marker(1, 0, True, 7, leader_epoch=0)
    reopened.append_marker(2, 0, True, 8, leader_epoch=0)
    assert reopened.last_stable_offset == 6
    reopened.append_marker(1, 0, False, 8, leader_epoch=0)
    assert reopened.last_stable_offset == reopened.log_end_offset
    assert reopened.aborted_transactions(0, reopened.log_end_offset) == [(3, 7), (1, 6)]
    reopened.close()


def test_a_restart_from_an_older_snapshot_replays_the_markers(tmp_path):
    """Rolls leave snapshots at segment bases; an unclean stop replays from there."""
    from storage.config import LogConfig
    from storage.releaser import RELEASER

    config = LogConfig(segment_bytes=1024)
    log = open_log(tmp_path, config)
    log.append(txn_batch(1, 0, 1, value=b"x" * 300), leader_epoch=0)
    for _ in range(4):
        log.append(batch(count=1, value_size=300), leader_epoch=0)
    log.append(txn_batch(2, 0, 1, value=b"x" * 300), leader_epoch=0)
    log.append_marker(1, 0, False, 1, leader_epoch=0)
    for _ in range(4):
        log.append(batch(count=1, value_size=300), leader_epoch=0)
    state = _state(log)
    assert log.last_stable_offset == 5
    RELEASER.drain()
    log.close_for_deletion()  # a kill: no snapshot at the end, no flush
    RELEASER.drain()
    reopened = open_log(tmp_path, config, clean_shutdown=False, recovery_point=log.log_end_offset)
    assert _state(reopened)[:2] == state[:2]
    assert reopened.last_stable_offset == 5
    reopened.close()


def test_the_lso_never_falls_below_the_log_start(tmp_path):
    log = open_log(tmp_path)
    log.append(txn_batch(5, 0, 2), leader_epoch=0)  # 0-1
    log.append(batch(count=3), leader_epoch=0)  # 2-4
    assert log.last_stable_offset == 0
    log.delete_records_before(3)  # DeleteRecords passes the open transaction's start
    assert log.last_stable_offset == 3
    info = log.read(3, BIG, read_committed=True)
    assert info.file_range is None and info.last_stable_offset == 3
    log.append_marker(5, 0, True, 0, leader_epoch=0)
    assert log.last_stable_offset == 6
    assert committed_offsets(log, 3) == [2, 3, 4]  # whole batches: the consumer skips below 3


# ----------------------------------------------------------------- against a model

_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("data"), st.integers(0, 3)),  # producer 0: plain writes
        st.tuples(st.just("commit"), st.integers(1, 3)),
        st.tuples(st.just("abort"), st.integers(1, 3)),
        st.tuples(st.just("hw"), st.integers(0, 3)),  # advance the high watermark by 0-3
    ),
    max_size=40,
)


@settings(max_examples=60, deadline=None)
@given(ops=_OPS)
def test_lso_and_aborted_transactions_match_a_model(ops):
    """Kafka's rules restated naively: the LSO is the smallest first offset of a
    transaction still open or closed by a marker at or above the high watermark, capped
    at the high watermark; the aborted list holds every aborted non-empty transaction."""
    from storage.config import LogConfig

    with tempfile.TemporaryDirectory() as directory:
        log = PartitionLog(os.path.join(directory, TP.dir_name), TP, LogConfig(segment_bytes=1024))
        log.set_replicated(True)
        sequences = {1: 0, 2: 0, 3: 0}
        open_txns: dict[int, int] = {}
        closed: list[tuple[int, int, int, bool]] = []  # producer, first, marker, aborted
        for op, arg in ops:
            if op == "data" and arg == 0:
                log.append(batch(count=2, value_size=200), leader_epoch=0)
            elif op == "data":
                first = log.log_end_offset
                log.append(txn_batch(arg, sequences[arg], 1, value=b"v" * 200), leader_epoch=0)
                sequences[arg] += 1
                open_txns.setdefault(arg, first)
            elif op in ("commit", "abort"):
                marker = log.log_end_offset
                log.append_marker(arg, 0, op == "commit", 0, leader_epoch=0)
                if arg in open_txns:
                    closed.append((arg, open_txns.pop(arg), marker, op == "abort"))
            else:
                log.advance_high_watermark(log.high_watermark + arg)
            hw = log.high_watermark
            unstable = list(open_txns.values()) + [first for _p, first, marker, _a in closed if marker >= hw]
            assert log.last_stable_offset == min([hw, *unstable])
        end = log.log_end_offset
        assert log.aborted_transactions(0, end) == [(p, first) for p, first, _m, aborted in closed if aborted]
        for start in range(0, end + 1, 3):
            for upper in range(start, end + 1, 4):
                # Kafka stops at an entry whose LSO reaches the bound: no later one overlaps.
                assert log.aborted_transactions(start, upper) == [
                    (p, first) for p, first, marker, aborted in closed if aborted and marker >= start and first < upper]
        expected_ongoing = dict(sorted(open_txns.items(), key=lambda item: item[1]))
        assert log.producer_state.ongoing == expected_ongoing
        log.close()
        reopened = PartitionLog(os.path.join(directory, TP.dir_name), TP, LogConfig(segment_bytes=1024))
        assert reopened.producer_state.ongoing == expected_ongoing
        assert reopened.aborted_transactions(0, end) == [(p, first) for p, first, _m, aborted in closed if aborted]
        reopened.close()


def test_verification_guards_are_per_epoch_and_bounded(tmp_path) -> None:
    manager = producer_state.ProducerStateManager(str(tmp_path))
    guard = manager.start_verification(5, 0, 0)
    assert manager.start_verification(5, 0, 3) == guard and manager.verified(5, 0, guard)
    assert not manager.verified(5, 1, guard), "another epoch's guard"
    assert manager.start_verification(5, 1, 0) != guard and not manager.verified(5, 0, guard)
    for producer_id in range(100, 100 + producer_state.MAX_VERIFYING):
        manager.start_verification(producer_id, 0, 0)
    assert len(manager.verifying) == producer_state.MAX_VERIFYING and 5 not in manager.verifying, "the oldest went"


def _header(raw: bytes):
    (_position, header), = iter_headers(memoryview(raw))
    return header


def test_while_a_lower_sequence_verifies_a_higher_one_is_refused_as_out_of_order(tmp_path) -> None:
    """Two pipelined batches of a transaction's start verify at once; if the second's answer
    comes first it must not be appended before the first (which would then be refused, a
    fatal error for the client): it is refused as out of order, which the client retries."""
    log = open_log(tmp_path)
    state = log.producer_state
    guard = state.start_verification(7, 0, 3)
    assert state.start_verification(7, 0, 0) == guard, "the lower sequence joins the same verification"
    later, first = txn_batch(7, 3, count=2), txn_batch(7, 0, count=3)
    assert state.check_sequence(_header(later)) == producer_state.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert state.check_sequence(_header(first)) == producer_state.NONE
    log.append(first)
    assert 7 not in state.verifying, "the transaction is open here: no verification left"
    assert state.check_sequence(_header(later)) == producer_state.NONE
    log.close()


@pytest.mark.parametrize("transaction_version, kept", [(1, False), (2, True)])
def test_a_marker_voids_the_ended_transactions_verification_not_the_next_ones(tmp_path, transaction_version, kept):
    """Under transaction.version 2 the marker carries the epoch EndTxn bumped to, which the
    next transaction uses: its verification, begun before the marker landed, must survive.
    Under 1 a verification at the marker's epoch belongs to the ended transaction."""
    log = open_log(tmp_path)
    state = log.producer_state
    log.append(txn_batch(9, 0, epoch=3))
    guard = state.start_verification(9, 4, 0)
    log.append_marker(9, 4, True, 0, leader_epoch=0, transaction_version=transaction_version)
    assert state.verified(9, 4, guard) is kept
    older = state.start_verification(9, 4, 0)
    log.append_marker(9, 5, False, 0, leader_epoch=0, transaction_version=2)
    assert not state.verified(9, 4, older), "an older epoch's verification is void under any version"
    log.close()
