"""Compaction of transactional data by Kafka's rules (storage/cleaner.py, cleaner_txn.py),
on real segment files: aborted records go, committed ones stay, a marker outlives its
transaction's data and then goes after delete.retention.ms, the cleaner never passes the
last stable offset, and what read_committed readers and a restarted producer state see
does not change."""

from __future__ import annotations

import os

import pytest

from storage.batch import BatchHeader
from storage.cleaner import clean_log
from storage.log import PartitionLog
from storage.producer_state import ProducerEntry
from storage.records import Record, encode_batch, iter_batches, parse_control_record
from storage.releaser import RELEASER
from tests.unit.storage.test_cleaner import HOUR, T0, make_config, open_log

pytestmark = pytest.mark.transactions

NOW = T0 + 1_000
LATER = NOW + HOUR + 1  # past the delete horizon a cleaning at NOW stamps


def data(pairs: list[tuple[bytes, bytes]], *, pid: int = -1, seq: int = -1, txn: bool = False,
         ts: int = T0) -> bytes:
    records = [Record(i, ts, key, value) for i, (key, value) in enumerate(pairs)]
    return encode_batch(records, producer_id=pid, producer_epoch=0 if pid >= 0 else -1, base_sequence=seq,
                        is_transactional=txn)


def marker(log: PartitionLog, pid: int, *, commit: bool) -> None:
    log.append_marker(pid, 0, commit, 0, leader_epoch=0, now=T0)


def read_committed(log: PartitionLog) -> list[tuple[int, bytes | None, bytes | None]]:
    """What a read_committed consumer gets from the log start, filtered as Kafka's
    consumer filters: the aborted list from the broker, then per batch the producer's
    transactional batches skipped between an aborted txn's first offset and its ABORT."""
    out: list[tuple[int, bytes | None, bytes | None]] = []
    offset = log.log_start_offset
    aborted = sorted(log.aborted_transactions(offset, log.last_stable_offset), key=lambda t: t[1])
    skipping: set[int] = set()
    while True:
        info = log.read(offset, 1 << 20, read_committed=True)
        if info.file_range is None:
            return out
        raw = os.pread(info.file_range.fd, info.file_range.length, info.file_range.position)
        for header, records in iter_batches(raw):
            offset = header.next_offset
            while aborted and aborted[0][1] <= header.last_offset:
                skipping.add(aborted.pop(0)[0])
            if header.is_control:
                if records and parse_control_record(records[0]).is_abort:
                    skipping.discard(header.producer_id)
                continue
            if header.is_transactional and header.producer_id in skipping:
                continue
            out.extend((r.offset, r.key, r.value) for r in records)


def batches(log: PartitionLog) -> list[tuple[BatchHeader, list[Record]]]:
    out = []
    for segment in log.segments:
        raw = os.pread(segment.fd, segment.size, 0)
        out.extend(iter_batches(raw))
    return out


def markers(log: PartitionLog) -> list[tuple[int, int, bool, bool]]:
    """(offset, producer id, is commit, has a delete horizon) of every marker holding its record."""
    out = []
    for header, records in batches(log):
        if header.is_control and records:
            out.append((header.base_offset, header.producer_id, parse_control_record(records[0]).is_commit,
                        header.has_delete_horizon))
    return out


def txn_entries(log: PartitionLog) -> list[tuple[int, int, int]]:
    return [(e.producer_id, e.first_offset, e.last_offset) for s in log.segments for e in s.txn_index.entries]


def producer_state(log: PartitionLog) -> dict[int, ProducerEntry]:
    return {pid: ProducerEntry(e.producer_id, e.producer_epoch, e.last_sequence, e.last_offset, e.offset_delta,
                               e.last_timestamp, e.coordinator_epoch, e.current_txn_first_offset)
            for pid, e in log.producer_state.entries.items()}


def reopen(tmp_path: object, log: PartitionLog, *, replay_everything: bool) -> PartitionLog:
    log.close()
    RELEASER.drain()
    if replay_everything:
        # No snapshot: producer state is rebuilt from the cleaned batches alone.
        for name in os.listdir(log.directory):
            if name.endswith(".snapshot"):
                os.unlink(os.path.join(log.directory, name))
    return open_log(tmp_path, make_config())


def build(log: PartitionLog) -> dict[str, int]:
    """Segment 0: producer 1's aborted txn, producer 2's committed one, a plain write,
    producer 1's committed txn, producer 4's aborted txn (its only batch); then an active
    segment. Returns the offsets that matter."""
    at: dict[str, int] = {}
    at["aborted"] = log.append(data([(b"k1", b"a1"), (b"k2", b"a2")], pid=1, seq=0, txn=True)).first_offset
    at["committed"] = log.append(data([(b"k1", b"b1"), (b"k3", b"b3")], pid=2, seq=0, txn=True)).first_offset
    marker(log, 2, commit=True)
    at["abort_marker"] = log.log_end_offset
    marker(log, 1, commit=False)
    log.append(data([(b"k4", b"p4")]))
    at["later"] = log.append(data([(b"k2", b"c2")], pid=1, seq=2, txn=True)).first_offset
    marker(log, 1, commit=True)
    at["last_of_4"] = log.append(data([(b"k9", b"d9")], pid=4, seq=0, txn=True)).first_offset
    marker(log, 4, commit=False)
    log.roll()
    log.append(data([(b"k5", b"p5")]))
    return at


def test_aborted_records_go_committed_stay_and_the_marker_goes_on_the_third_pass(tmp_path) -> None:
    log = open_log(tmp_path)
    at = build(log)
    seen = read_committed(log)
    state = producer_state(log)
    assert (at["aborted"], b"k1", b"a1") not in seen and (at["committed"], b"k1", b"b1") in seen

    first = clean_log(log, now_ms=NOW)
    assert first.aborted_removed == 3  # producer 1's two, producer 4's one
    kept = [(r.key, r.value) for h, records in batches(log) if not h.is_control for r in records]
    assert (b"k1", b"a1") not in kept and (b"k2", b"a2") not in kept and (b"k9", b"d9") not in kept
    assert {(b"k1", b"b1"), (b"k3", b"b3"), (b"k4", b"p4"), (b"k2", b"c2"), (b"k5", b"p5")} <= set(kept)
    assert not any(h.base_offset == at["aborted"] for h, _r in batches(log))  # the whole batch went
    # The ABORT marker stays (the cleaner saw its data this pass), with its index entry.
    assert (at["abort_marker"], 1, False, False) in markers(log)
    assert (1, at["aborted"], at["abort_marker"]) in txn_entries(log)
    assert read_committed(log) == seen

    clean_log(log, now_ms=NOW)  # no data left: the marker gets its horizon, the entry goes
    assert (at["abort_marker"], 1, False, True) in markers(log)
    assert [e for e in txn_entries(log) if e[0] == 1] == []
    assert read_committed(log) == seen

    third = clean_log(log, now_ms=LATER)
    assert third.markers_removed == 1
    assert [m for m in markers(log) if m[0] == at["abort_marker"]] == []
    # Committed transactions keep their markers while their data is there.
    assert [(pid, commit) for _o, pid, commit, _h in markers(log)] == [(2, True), (1, True), (4, False)]
    assert read_committed(log) == seen
    assert producer_state(log) == state
    assert log.last_stable_offset == log.log_end_offset


def test_a_producers_last_batch_stays_empty_and_keeps_its_marker(tmp_path) -> None:
    log = open_log(tmp_path)
    at = build(log)
    for now in (NOW, NOW, LATER, LATER):
        clean_log(log, now_ms=now)
    last = [(h, records) for h, records in batches(log) if h.base_offset == at["last_of_4"]]
    assert len(last) == 1
    header, records = last[0]
    assert records == [] and header.producer_id == 4 and header.is_transactional and header.base_sequence == 0
    # Its transaction's batch is still there (empty), so the ABORT marker and entry stay.
    assert any(m[1] == 4 and not m[2] for m in markers(log))
    assert [e for e in txn_entries(log) if e[0] == 4] != []


@pytest.mark.parametrize("replay_everything", [False, True])
def test_producer_state_after_a_restart_is_unchanged(tmp_path, replay_everything: bool) -> None:
    log = open_log(tmp_path)
    build(log)
    for now in (NOW, NOW, LATER):
        clean_log(log, now_ms=now)
    state, lso, end, seen = producer_state(log), log.last_stable_offset, log.log_end_offset, read_committed(log)
    reopened = reopen(tmp_path, log, replay_everything=replay_everything)
    assert producer_state(reopened) == state
    assert (reopened.last_stable_offset, reopened.log_end_offset) == (lso, end)
    assert reopened.producer_state.ongoing == {}
    assert read_committed(reopened) == seen
    reopened.close()


def test_an_open_transaction_stops_the_cleaner(tmp_path) -> None:
    log = open_log(tmp_path)
    aborted = log.append(data([(b"k1", b"a1")], pid=1, seq=0, txn=True)).first_offset
    marker(log, 1, commit=False)
    open_txn = log.append(data([(b"k7", b"open")], pid=3, seq=0, txn=True)).first_offset
    log.append(data([(b"k7", b"plain")]))  # would supersede the open txn's record
    log.roll()
    log.append(data([(b"k5", b"p5")]))
    assert log.last_stable_offset == open_txn
    before = batches(log)

    result = clean_log(log, now_ms=LATER)
    assert result.segments_examined == 0 and result.sources == ()
    assert batches(log) == before  # not even the aborted record before it

    marker(log, 3, commit=False)
    log.roll()
    log.append(data([(b"k6", b"p6")]))
    clean_log(log, now_ms=NOW)
    kept = {r.offset for h, records in batches(log) if not h.is_control for r in records}
    assert aborted not in kept and open_txn not in kept
    assert {(b"k7", b"plain")} <= {(r.key, r.value) for _h, records in batches(log) for r in records}


def test_a_committed_transactions_marker_goes_once_its_records_are_superseded(tmp_path) -> None:
    log = open_log(tmp_path)
    log.append(data([(b"k1", b"t1")], pid=2, seq=0, txn=True))
    commit_at = log.log_end_offset
    marker(log, 2, commit=True)
    log.append(data([(b"k1", b"t2")], pid=2, seq=1, txn=True))  # supersedes t1, stays producer 2's last
    marker(log, 2, commit=True)
    log.roll()
    log.append(data([(b"k5", b"p5")]))
    seen = read_committed(log)
    for now in (NOW, NOW, LATER):
        clean_log(log, now_ms=now)
    assert [m for m in markers(log) if m[0] == commit_at] == []  # its batch went with t1
    assert [(r.key, r.value) for h, rs in batches(log) if not h.is_control for r in rs] == [(b"k1", b"t2"),
                                                                                         (b"k5", b"p5")]
    assert read_committed(log) == [s for s in seen if s[2] != b"t1"]


def test_an_emptied_segment_keeps_its_end_offset(tmp_path) -> None:
    log = open_log(tmp_path)
    log.append(data([(b"k0", b"p0")]))
    log.roll()
    aborted = log.append(data([(b"k1", b"a1")], pid=1, seq=0, txn=True)).first_offset
    log.roll()  # this segment holds nothing but the aborted batch
    abort_at = log.log_end_offset
    marker(log, 1, commit=False)
    log.append(data([(b"k2", b"c2")], pid=1, seq=1, txn=True))
    marker(log, 1, commit=True)
    log.roll()
    log.append(data([(b"k6", b"p6")]))
    ends = [s.next_offset for s in log.segments]
    seen = read_committed(log)
    for now in (NOW, NOW, LATER):
        clean_log(log, now_ms=now)
    assert [s.next_offset for s in log.segments] == ends
    emptied = [h for h, _r in batches(log) if h.base_offset == aborted]
    assert len(emptied) == 1
    # An empty batch with no producer: it keeps the offsets, and opens no transaction on a replay.
    assert (emptied[0].record_count, emptied[0].producer_id, emptied[0].is_transactional) == (0, -1, False)
    assert [m for m in markers(log) if m[0] == abort_at] == []
    assert read_committed(log) == seen
    reopened = reopen(tmp_path, log, replay_everything=True)
    assert reopened.producer_state.ongoing == {} and reopened.last_stable_offset == reopened.log_end_offset
    reopened.close()


def test_a_follower_copying_the_cleaned_log_gets_the_same_producer_state(tmp_path) -> None:
    """A replica that joins after cleaning fetches the cleaned batches (gaps, emptied
    batches and markers, horizons): it ends with the leader's producer state, LSO and
    aborted transactions."""
    leader = open_log(tmp_path / "leader")
    build(leader)
    for now in (NOW, NOW, LATER):
        clean_log(leader, now_ms=now)
    follower = open_log(tmp_path / "follower")
    for segment in leader.segments:
        follower.append_as_follower(os.pread(segment.fd, segment.size, 0))
    follower.advance_high_watermark(follower.log_end_offset)
    assert follower.log_end_offset == leader.log_end_offset
    assert producer_state(follower) == producer_state(leader)
    assert follower.last_stable_offset == leader.last_stable_offset
    assert follower.aborted_transactions(0, follower.log_end_offset) == leader.aborted_transactions(
        0, leader.log_end_offset)
    assert read_committed(follower) == read_committed(leader)


def test_once_its_producer_expires_an_aborted_transactions_last_batch_and_marker_go(tmp_path) -> None:
    log = open_log(tmp_path)
    at = build(log)
    seen = read_committed(log)
    clean_log(log, now_ms=NOW)
    assert any(h.base_offset == at["last_of_4"] for h, _r in batches(log))  # kept, empty: producer 4's last
    assert log.remove_expired_producers(LATER, HOUR) == [1, 2, 4]  # all idle since T0, none in a transaction
    for now in (LATER, LATER, LATER + HOUR + 1):
        clean_log(log, now_ms=now)
    assert not any(h.base_offset == at["last_of_4"] and h.producer_id == 4 for h, _r in batches(log))
    assert [m for m in markers(log) if m[1] == 4] == []
    assert txn_entries(log) == []
    assert read_committed(log) == seen
