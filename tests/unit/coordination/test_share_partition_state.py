"""The delivery state of a share partition (coordination/share/partition_state.py): each of
Kafka's rules in a scenario, then a stateful model run by hypothesis against the invariants
(no record held by two members, none acknowledged twice, delivery counts within the limit,
SPSO never past an unfinished record, everything finishes if members keep acknowledging,
and the persisted state batches round-trip)."""

from __future__ import annotations

import time

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from coordination.share.partition_state import (
    INVALID_RECORD_STATE,
    INVALID_REQUEST,
    NONE,
    AcknowledgeType,
    AcquiredRecords,
    RecordState,
    SharePartitionState,
)
from coordination.share.records import StateBatch

ACCEPT, RELEASE, REJECT, GAP = AcknowledgeType.ACCEPT, AcknowledgeType.RELEASE, AcknowledgeType.REJECT, AcknowledgeType.GAP
LOCK = 30_000


def partition(start: int = 0, limit: int = 5, max_in_flight: int = 2000) -> SharePartitionState:
    return SharePartitionState(start, delivery_count_limit=limit, max_in_flight=max_in_flight, lock_duration_ms=LOCK)


def states(sp: SharePartitionState, first: int, last: int) -> list[tuple[RecordState, int, str | None]]:
    infos = [sp.state_of(o) for o in range(first, last + 1)]
    return [(i.state, i.delivery_count, i.member_id) for i in infos]


# -- acquiring ---------------------------------------------------------------------------


def test_new_records_are_acquired_with_delivery_count_one_and_move_the_end() -> None:
    sp = partition()
    assert sp.acquire("m1", range(0, 10), 500, now_ms=0) == [AcquiredRecords(0, 9, 1)]
    assert (sp.start_offset, sp.end_offset) == (0, 10)
    assert sp.state_of(4).state == RecordState.ACQUIRED and sp.state_of(4).member_id == "m1"
    assert sp.acquired_by("m1") == [(0, 9)]


def test_records_held_by_a_member_are_not_acquired_by_another() -> None:
    sp = partition()
    sp.acquire("m1", (0, 9), 500, now_ms=0)
    assert sp.acquire("m2", (0, 9), 500, now_ms=1) == []
    # The fetch reaches past what m1 holds: m2 gets only the new records.
    assert sp.acquire("m2", (5, 14), 500, now_ms=2) == [AcquiredRecords(10, 14, 1)]


def test_released_records_are_acquired_before_new_ones() -> None:
    sp = partition()
    sp.acquire("m1", (0, 9), 500, now_ms=0)
    assert sp.acknowledge("m1", [(3, 4, RELEASE)], now_ms=1) == NONE
    assert sp.next_fetch_offset() == 3
    # The broker fetches from next_fetch_offset(); the window's AVAILABLE records come first.
    got = sp.acquire("m2", (sp.next_fetch_offset(), 20), 4, now_ms=2)
    assert got == [AcquiredRecords(3, 4, 2), AcquiredRecords(10, 11, 1)]
    assert sp.next_fetch_offset() == 12


def test_max_records_rounds_up_to_the_end_of_a_fetched_batch() -> None:
    sp = partition()
    got = sp.acquire("m1", [(0, 4), (5, 9), (10, 14)], 7, now_ms=0)
    assert got == [AcquiredRecords(0, 9, 1)]
    # A plain range has no batches to round to.
    assert sp.acquire("m1", (10, 30), 3, now_ms=0) == [AcquiredRecords(10, 12, 1)]


def test_nothing_is_acquired_beyond_the_in_flight_limit() -> None:
    sp = partition(max_in_flight=10)
    assert sp.acquire("m1", [(0, 99_999)], 100_000, now_ms=0) == [AcquiredRecords(0, 9, 1)]
    assert sp.acquire("m2", (10, 50), 500, now_ms=0) == []
    assert not sp.can_acquire()
    # Released records inside the full window can still be acquired.
    sp.acknowledge("m1", [(5, 5, RELEASE)], now_ms=1)
    assert sp.can_acquire()
    assert sp.acquire("m2", (5, 50), 500, now_ms=2) == [AcquiredRecords(5, 5, 2)]
    # Finishing the start of the window makes room for new records again.
    sp.acknowledge("m1", [(0, 3, ACCEPT)], now_ms=3)
    assert sp.start_offset == 4
    assert sp.acquire("m2", (10, 50), 500, now_ms=4) == [AcquiredRecords(10, 13, 1)]
    assert sp.end_offset - sp.start_offset == 10


def test_a_fetch_below_the_start_offset_is_clipped() -> None:
    sp = partition(start=100)
    assert sp.acquire("m1", (90, 104), 500, now_ms=0) == [AcquiredRecords(100, 104, 1)]
    assert sp.acquire("m1", (0, 50), 500, now_ms=0) == []


def test_offsets_the_log_skipped_are_archived_and_do_not_hold_the_start_back() -> None:
    sp = partition()
    sp.acquire("m1", (0, 4), 500, now_ms=0)
    assert sp.acquire("m1", (8, 9), 500, now_ms=0) == [AcquiredRecords(8, 9, 1)]
    assert sp.state_of(6).state == RecordState.ARCHIVED
    sp.acknowledge("m1", [(0, 4, ACCEPT)], now_ms=1)
    assert sp.start_offset == 8
    # Nothing in flight: the window just moves to where the log resumes.
    sp.acknowledge("m1", [(8, 9, ACCEPT)], now_ms=1)
    assert sp.acquire("m1", (20, 21), 500, now_ms=2) == [AcquiredRecords(20, 21, 1)]
    assert sp.start_offset == 20


# -- acknowledging -----------------------------------------------------------------------


def test_accept_and_reject_finish_records_and_move_the_start_offset() -> None:
    sp = partition()
    sp.acquire("m1", (0, 9), 500, now_ms=0)
    assert sp.acknowledge("m1", [(2, 3, ACCEPT)], now_ms=1) == NONE
    assert sp.start_offset == 0  # 0 and 1 still in flight
    assert sp.acknowledge("m1", [(0, 1, REJECT)], now_ms=1) == NONE
    assert sp.start_offset == 4
    assert sp.state_of(1).state == RecordState.ACKNOWLEDGED  # below SPSO: done
    assert sp.acknowledge("m1", [(4, 9, GAP)], now_ms=1) == NONE
    assert (sp.start_offset, sp.end_offset) == (10, 10)


def test_per_offset_acknowledge_types_split_a_range() -> None:
    sp = partition()
    sp.acquire("m1", (0, 4), 500, now_ms=0)
    assert sp.acknowledge("m1", [(0, 4, [ACCEPT, RELEASE, RELEASE, REJECT, ACCEPT])], now_ms=1) == NONE
    assert [s for s, _, _ in states(sp, 1, 4)] == [
        RecordState.AVAILABLE,
        RecordState.AVAILABLE,
        RecordState.ARCHIVED,
        RecordState.ACKNOWLEDGED,
    ]
    assert sp.start_offset == 1


def test_acknowledging_records_not_acquired_by_the_member_is_invalid_record_state() -> None:
    sp = partition()
    sp.acquire("m1", (0, 9), 500, now_ms=0)
    assert sp.acknowledge("m2", [(0, 4, ACCEPT)], now_ms=1) == INVALID_RECORD_STATE
    sp.acknowledge("m1", [(5, 5, RELEASE)], now_ms=1)
    assert sp.acknowledge("m1", [(5, 5, ACCEPT)], now_ms=1) == INVALID_RECORD_STATE  # AVAILABLE
    assert sp.acknowledge("m1", [(6, 6, ACCEPT)], now_ms=1) == NONE
    assert sp.acknowledge("m1", [(6, 6, ACCEPT)], now_ms=1) == INVALID_RECORD_STATE  # twice


def test_acknowledgements_are_all_or_nothing() -> None:
    sp = partition()
    sp.acquire("m1", (0, 4), 500, now_ms=0)
    sp.acquire("m2", (5, 9), 500, now_ms=0)
    before = states(sp, 0, 9)
    assert sp.acknowledge("m1", [(0, 4, ACCEPT), (5, 6, ACCEPT)], now_ms=1) == INVALID_RECORD_STATE
    assert states(sp, 0, 9) == before and sp.start_offset == 0


def test_malformed_acknowledgements_are_invalid_request() -> None:
    sp = partition()
    sp.acquire("m1", (0, 9), 500, now_ms=0)
    assert sp.acknowledge("m1", [(4, 2, ACCEPT)], now_ms=1) == INVALID_REQUEST  # first > last
    assert sp.acknowledge("m1", [(4, 6, ACCEPT), (2, 3, ACCEPT)], now_ms=1) == INVALID_REQUEST  # unordered
    assert sp.acknowledge("m1", [(0, 2, [ACCEPT, ACCEPT])], now_ms=1) == INVALID_REQUEST  # types != records
    assert sp.acknowledge("m1", [(0, 2, [])], now_ms=1) == INVALID_REQUEST
    assert sp.acknowledge("m1", [(0, 2, 7)], now_ms=1) == INVALID_REQUEST  # unknown type
    assert sp.acknowledge("m1", [(5, 12, ACCEPT)], now_ms=1) == INVALID_REQUEST  # past the end
    assert sp.acknowledge("m1", [(10, 12, ACCEPT)], now_ms=1) == INVALID_REQUEST
    assert all(s == RecordState.ACQUIRED for s, _, _ in states(sp, 0, 9))
    # Kafka lets a batch start on the previous one's last offset; that offset is settled by then.
    assert sp.acknowledge("m1", [(0, 2, ACCEPT), (2, 3, ACCEPT)], now_ms=1) == INVALID_RECORD_STATE


def test_acknowledging_below_the_start_offset_is_skipped_and_nothing_in_flight_is_invalid_record_state() -> None:
    sp = partition()
    sp.acquire("m1", (0, 9), 500, now_ms=0)
    sp.acknowledge("m1", [(0, 4, ACCEPT)], now_ms=1)
    assert sp.acknowledge("m1", [(0, 3, ACCEPT)], now_ms=1) == NONE  # already done
    assert sp.acknowledge("m1", [(2, 7, ACCEPT)], now_ms=1) == NONE  # 5-7 settled, 2-4 skipped
    assert sp.start_offset == 8
    sp.acknowledge("m1", [(8, 9, ACCEPT)], now_ms=1)
    assert sp.acknowledge("m1", [(10, 10, ACCEPT)], now_ms=1) == INVALID_RECORD_STATE


# -- delivery count limit, locks, members ------------------------------------------------


def test_a_record_is_archived_when_released_at_the_delivery_count_limit() -> None:
    sp = partition(limit=3)
    sp.acquire("m2", (0, 0), 10, now_ms=0)  # holds the start back, so record 1 stays in view
    for attempt in (1, 2, 3):
        assert sp.acquire("m1", (1, 1), 10, now_ms=attempt) == [AcquiredRecords(1, 1, attempt)]
        sp.acknowledge("m1", [(1, 1, RELEASE)], now_ms=attempt)
    assert states(sp, 1, 1) == [(RecordState.ARCHIVED, 3, None)]
    assert sp.acquire("m1", (1, 1), 10, now_ms=9) == []
    sp.acknowledge("m2", [(0, 0, ACCEPT)], now_ms=9)
    assert sp.start_offset == 2  # archived is done


def test_an_expired_lock_releases_the_records() -> None:
    sp = partition()
    sp.acquire("m1", (0, 9), 500, now_ms=1000)
    assert sp.expire_locks(1000 + LOCK - 1) == 0
    assert sp.expire_locks(1000 + LOCK) == 10
    assert states(sp, 0, 0) == [(RecordState.AVAILABLE, 1, None)]
    # The holder's acknowledgement after expiry is refused; another member gets the records.
    assert sp.acknowledge("m1", [(0, 9, ACCEPT)], now_ms=1000 + LOCK) == INVALID_RECORD_STATE
    assert sp.acquire("m2", (0, 9), 500, now_ms=1000 + LOCK) == [AcquiredRecords(0, 9, 2)]


def test_acquire_and_acknowledge_expire_due_locks_first() -> None:
    sp = partition()
    sp.acquire("m1", (0, 4), 500, now_ms=0)
    assert sp.acknowledge("m1", [(0, 4, ACCEPT)], now_ms=LOCK) == INVALID_RECORD_STATE
    assert sp.acquire("m2", (0, 4), 500, now_ms=LOCK) == [AcquiredRecords(0, 4, 2)]


def test_expiry_at_the_limit_archives() -> None:
    sp = partition(limit=1)
    sp.acquire("m1", (0, 4), 500, now_ms=0)
    sp.expire_locks(LOCK)
    assert sp.start_offset == 5 and sp.state_of(2).state == RecordState.ACKNOWLEDGED


def test_a_departing_member_releases_only_its_own_records() -> None:
    sp = partition(limit=2)
    sp.acquire("m1", (0, 4), 500, now_ms=0)
    sp.acquire("m2", (5, 9), 500, now_ms=0)
    sp.acknowledge("m1", [(4, 4, RELEASE)], now_ms=0)
    sp.acquire("m1", (4, 4), 500, now_ms=0)  # record 4 on its second (last) delivery
    assert sp.release_member("m1") == 5
    assert states(sp, 3, 5) == [
        (RecordState.AVAILABLE, 1, None),
        (RecordState.ARCHIVED, 2, None),
        (RecordState.ACQUIRED, 1, "m2"),
    ]
    assert sp.acquired_by("m2") == [(5, 9)]
    assert sp.start_offset == 0 and sp.next_fetch_offset() == 0


def test_a_snapshot_record_already_at_the_limit_is_archived_not_delivered() -> None:
    sp = SharePartitionState.from_state(0, [StateBatch(0, 4, RecordState.AVAILABLE, 5)], delivery_count_limit=3)
    assert sp.acquire("m1", (0, 9), 500, now_ms=0) == [AcquiredRecords(5, 9, 1)]
    assert sp.start_offset == 5


# -- persistence -------------------------------------------------------------------------


def test_state_batches_are_what_kafka_persists() -> None:
    sp = partition(start=10)
    sp.acquire("m1", (10, 29), 500, now_ms=0)
    sp.acknowledge("m1", [(12, 13, ACCEPT), (14, 15, RELEASE), (16, 16, REJECT)], now_ms=1)
    sp.acquire("m2", (14, 14), 500, now_ms=2)  # 14 acquired again: persisted as before
    assert sp.start_offset == 10
    assert sp.state_batches() == (
        StateBatch(12, 13, RecordState.ACKNOWLEDGED, 1),
        StateBatch(14, 15, RecordState.AVAILABLE, 1),
        StateBatch(16, 16, RecordState.ARCHIVED, 1),
    )
    assert sp.delivery_complete_count() == 3


def test_from_state_rebuilds_with_locks_gone() -> None:
    batches = [
        StateBatch(12, 13, RecordState.ACKNOWLEDGED, 1),
        StateBatch(14, 15, RecordState.ACQUIRED, 2),
        StateBatch(20, 24, RecordState.ARCHIVED, 5),
    ]
    sp = SharePartitionState.from_state(10, batches)
    assert (sp.start_offset, sp.end_offset) == (10, 25)
    assert sp.state_of(14) == sp.state_of(15)
    assert states(sp, 14, 14) == [(RecordState.AVAILABLE, 2, None)]
    assert states(sp, 10, 10) == [(RecordState.AVAILABLE, 0, None)]  # never delivered
    assert sp.next_fetch_offset() == 10
    assert sp.acquire("m1", (10, 30), 500, now_ms=0) == [
        AcquiredRecords(10, 11, 1),
        AcquiredRecords(14, 15, 3),
        AcquiredRecords(16, 19, 1),
        AcquiredRecords(25, 30, 1),
    ]


def test_from_state_moves_the_start_past_finished_records_and_refuses_bad_batches() -> None:
    sp = SharePartitionState.from_state(0, [(0, 9, RecordState.ACKNOWLEDGED, 1), (10, 11, RecordState.AVAILABLE, 1)])
    assert (sp.start_offset, sp.end_offset) == (10, 12)
    for bad in ([(5, 9, 2, 1)], [(10, 12, 2, 1), (12, 14, 2, 1)], [(12, 10, 2, 1)]):
        try:
            SharePartitionState.from_state(10, bad)
        except ValueError:
            continue
        raise AssertionError(f"accepted {bad}")


def test_large_fetches_and_a_full_window_stay_cheap() -> None:
    sp = partition()
    began = time.perf_counter()
    assert sp.acquire("m1", [(0, 99_999)], 100_000, now_ms=0) == [AcquiredRecords(0, 1999, 1)]
    # Every other record released: the worst split of a full window.
    assert sp.acknowledge("m1", [(0, 1999, [RELEASE if o % 2 else ACCEPT for o in range(2000)])], now_ms=1) == NONE
    # Offset 0 is done, so the window has room for one new record after the 1000 released.
    got = sp.acquire("m2", (sp.next_fetch_offset(), 99_999), 100_000, now_ms=2)
    assert len(got) == 1001 and got[-1] == AcquiredRecords(2000, 2000, 1)
    assert sp.release_member("m2") == 1001
    assert sp.expire_locks(10 * LOCK) == 0
    assert len(sp.state_batches()) == 2000
    assert time.perf_counter() - began < 2.0


# -- the model ---------------------------------------------------------------------------

MEMBERS = ("a", "b", "c")
LIMIT: int = 2  # Kafka's lowest, so the model reaches the limit often


class SharePartitionModel(RuleBasedStateMachine):
    """Members fetch, acknowledge, leave and let locks expire in any order; a per-offset model
    of what each record has been through checks the partition after every step."""

    def __init__(self) -> None:
        super().__init__()
        self.sp = SharePartitionState(5, delivery_count_limit=LIMIT, max_in_flight=40, lock_duration_ms=100)
        self.now = 0
        self.log_end = 5  # records produced so far
        self.acknowledged: set[int] = set()

    @rule(produced=st.integers(1, 30))
    def produce(self, produced: int) -> None:
        self.log_end += produced

    @rule(member=st.sampled_from(MEMBERS), max_records=st.integers(1, 25), batch=st.integers(1, 6))
    def fetch(self, member: str, max_records: int, batch: int) -> None:
        first = self.sp.next_fetch_offset()
        if first >= self.log_end:
            return
        batches = [(o, min(o + batch - 1, self.log_end - 1)) for o in range(first, self.log_end, batch)]
        before = {o: self.sp.state_of(o) for o in range(first, self.log_end)}
        for got in self.sp.acquire(member, batches, max_records, self.now):
            for offset in range(got.first_offset, got.last_offset + 1):
                assert before[offset].state == RecordState.AVAILABLE, "acquired a record that was not available"
                assert got.delivery_count == before[offset].delivery_count + 1
                assert self.sp.state_of(offset).member_id == member

    @rule(member=st.sampled_from(MEMBERS), data=st.data())
    def acknowledge_own(self, member: str, data: st.DataObject) -> None:
        held = self.sp.acquired_by(member)
        if not held:
            return
        first, last = data.draw(st.sampled_from(held))
        a = data.draw(st.integers(first, last))
        b = data.draw(st.integers(a, last))
        ack = data.draw(st.sampled_from([ACCEPT, RELEASE, REJECT, GAP]))
        assert self.sp.acknowledge(member, [(a, b, ack)], self.now) == NONE
        if ack == ACCEPT:
            new = set(range(a, b + 1))
            assert not new & self.acknowledged, "acknowledged twice"
            self.acknowledged |= new

    @rule(member=st.sampled_from(MEMBERS), data=st.data())
    def acknowledge_anything(self, member: str, data: st.DataObject) -> None:
        a = data.draw(st.integers(self.sp.start_offset, self.sp.end_offset + 2))
        b = data.draw(st.integers(a, a + 5))
        ok = all(
            self.sp.state_of(o).state == RecordState.ACQUIRED and self.sp.state_of(o).member_id == member for o in range(a, b + 1)
        )
        error = self.sp.acknowledge(member, [(a, b, ACCEPT)], self.now)
        if ok:
            assert error == NONE
            self.acknowledged |= set(range(a, b + 1))
        else:
            assert error in (INVALID_RECORD_STATE, INVALID_REQUEST)

    @rule(member=st.sampled_from(MEMBERS))
    def leave(self, member: str) -> None:
        self.sp.release_member(member)
        assert self.sp.acquired_by(member) == []

    @rule(elapsed=st.integers(1, 150))
    def tick(self, elapsed: int) -> None:
        self.now += elapsed
        self.sp.expire_locks(self.now)

    @rule()
    def reload(self) -> None:
        """A new leader loads the snapshot: every lock is gone, everything else is the same."""
        batches = self.sp.state_batches()
        loaded = SharePartitionState.from_state(self.sp.start_offset, batches, LIMIT, 40, 100)
        assert loaded.state_batches() == batches
        for offset in range(self.sp.start_offset, self.sp.end_offset):
            old, new = self.sp.state_of(offset), loaded.state_of(offset)
            if old.state == RecordState.ACQUIRED:
                assert (new.state, new.delivery_count) == (RecordState.AVAILABLE, old.delivery_count - 1)
            elif offset < loaded.end_offset:
                assert (new.state, new.delivery_count) == (old.state, old.delivery_count)
        self.sp = loaded

    @precondition(lambda self: self.sp.end_offset > self.sp.start_offset)
    @rule()
    def everything_finishes_if_members_keep_acknowledging(self) -> None:
        """Run a copy to the end: fetch and accept until the log is consumed."""
        sp = SharePartitionState.from_state(self.sp.start_offset, self.sp.state_batches(), LIMIT, 40, 100)
        for _ in range(200):
            if sp.start_offset >= self.log_end:
                break
            for got in sp.acquire("z", (sp.next_fetch_offset(), self.log_end - 1), 40, 0):
                assert sp.acknowledge("z", [(got.first_offset, got.last_offset, ACCEPT)], 0) == NONE
        assert sp.start_offset == sp.end_offset == self.log_end

    @invariant()
    def records_are_consistent(self) -> None:
        sp = self.sp
        assert sp.start_offset <= sp.end_offset <= max(self.log_end, sp.start_offset)
        assert sp.end_offset - sp.start_offset <= 40, "beyond the in-flight limit"
        if sp.end_offset > sp.start_offset:
            head = sp.state_of(sp.start_offset).state
            assert head in (RecordState.AVAILABLE, RecordState.ACQUIRED), "SPSO past an unfinished record"
        holders: dict[int, str] = {}
        complete = 0
        for offset in range(sp.start_offset, sp.end_offset):
            info = sp.state_of(offset)
            complete += info.state in (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)
            assert 0 <= info.delivery_count <= LIMIT
            if info.state == RecordState.ACQUIRED:
                assert info.member_id in MEMBERS and info.delivery_count >= 1
                holders[offset] = info.member_id
            else:
                assert info.member_id is None
            if info.state == RecordState.AVAILABLE:
                assert info.delivery_count < LIMIT
        for member in MEMBERS:
            for first, last in sp.acquired_by(member):
                assert all(holders.pop(o) == member for o in range(first, last + 1)), "held by two members"
        assert not holders
        assert sp.delivery_complete_count() == complete
        batches = sp.state_batches()
        for a, b in zip(batches, batches[1:]):
            assert a.last_offset < b.first_offset
            assert not (
                a.last_offset + 1 == b.first_offset
                and (a.delivery_state, a.delivery_count) == (b.delivery_state, b.delivery_count)
            )
        assert all(b.delivery_state != RecordState.ACQUIRED for b in batches)


SharePartitionModel.TestCase.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)
TestSharePartitionModel = SharePartitionModel.TestCase


def test_configure_takes_new_settings_and_refuses_ones_out_of_range():
    state = SharePartitionState(0, delivery_count_limit=5, max_in_flight=10, lock_duration_ms=30_000)
    state.configure(3, 20, 1_000)
    assert (state.delivery_count_limit, state.max_in_flight, state.lock_duration_ms) == (3, 20, 1_000)
    for bad in ((0, 20, 1_000), (3, 0, 1_000), (3, 20, 0)):
        with pytest.raises(ValueError):
            state.configure(*bad)
    assert (state.delivery_count_limit, state.max_in_flight, state.lock_duration_ms) == (3, 20, 1_000)
