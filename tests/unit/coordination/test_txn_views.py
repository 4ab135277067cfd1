"""What DescribeTransactions and ListTransactions see of a TransactionCoordinator over real
partition logs (the harness of test_txn_coordinator): each state with Kafka's name, the
partitions of an open transaction, and ListTransactions' filters combined as Kafka does."""

from __future__ import annotations

from typing import Any

import pytest

from coordination.transactions.views import InvalidPattern, ListFilters
from tests.unit.coordination.test_txn_coordinator import T0, T1, Harness, run

NOT_FOUND, NOT_COORDINATOR, LOADING, INVALID_REQUEST = 105, 16, 14, 42


class Clock:
    def __init__(self, now: int) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def test_describe_reports_the_state_the_producer_and_the_open_partitions(tmp_path: Any) -> None:
    clock = Clock(1_000_000)

    async def body(h: Harness) -> None:
        coord = h.coordinator(clock=clock)
        assert coord.describe("nobody").error_code == NOT_FOUND
        assert coord.describe("").error_code == INVALID_REQUEST
        pid = (await coord.init_producer_id("tx", 45_000)).producer_id
        empty = coord.describe("tx")
        assert (empty.error_code, empty.state, empty.producer_id, empty.producer_epoch, empty.timeout_ms,
                empty.start_ms, empty.partitions) == (0, "Empty", pid, 0, 45_000, -1, ())
        clock.now = 1_000_500
        assert await coord.add_partitions("tx", pid, 0, {T1, T0}) == 0
        ongoing = coord.describe("tx")
        assert (ongoing.state, ongoing.start_ms, ongoing.partitions) == ("Ongoing", 1_000_500, (T0, T1))
        assert await coord.end_txn("tx", pid, 0, True) == 0
        await coord.settled()
        done = coord.describe("tx")
        # Complete: no partitions left, the start time of the last transaction kept (Kafka's).
        assert (done.state, done.start_ms, done.partitions) == ("CompleteCommit", 1_000_500, ())

        coord.deactivate()
        assert coord.describe("tx").error_code == NOT_COORDINATOR
        coord.loading = True
        assert coord.describe("tx").error_code == LOADING
        assert coord.list_transactions(ListFilters()) == (LOADING, [])
        coord.loading = False
        assert coord.list_transactions(ListFilters()) == (0, []), "a standby coordinates nothing"

    run(tmp_path, body)


def test_list_filters_combine_as_kafkas(tmp_path: Any) -> None:
    clock = Clock(2_000_000)

    async def body(h: Harness) -> None:
        coord = h.coordinator(clock=clock)
        pids = {}
        for tid in ("app-1", "app-2", "other"):
            pids[tid] = (await coord.init_producer_id(tid, 60_000)).producer_id
        clock.now = 2_000_100
        assert await coord.add_partitions("app-1", pids["app-1"], 0, {T0}) == 0
        clock.now = 2_010_000
        assert await coord.add_partitions("other", pids["other"], 0, {T1}) == 0

        def listed(**filters: Any) -> list[tuple[str, int, str]]:
            code, listings = coord.list_transactions(ListFilters(**filters))
            assert code == 0
            return [(t.transactional_id, t.producer_id, t.state) for t in listings]

        everything = [("app-1", pids["app-1"], "Ongoing"), ("app-2", pids["app-2"], "Empty"),
                      ("other", pids["other"], "Ongoing")]
        assert listed() == everything
        assert listed(states=frozenset({"Ongoing"})) == [everything[0], everything[2]]
        assert listed(producer_ids=frozenset({pids["app-2"], 99})) == [everything[1]]
        assert listed(states=frozenset({"Ongoing"}), producer_ids=frozenset({pids["app-2"]})) == []
        # Only an unknown state asked: nothing matches, and the name is reported back.
        assert listed(states=frozenset({"Bogus"})) == []
        assert ListFilters(states=frozenset({"Bogus", "Empty"})).unknown_states() == ["Bogus"]
        # Running longer than 5 s: app-1 (started 9.9 s ago), not other (0 s); app-2 has no
        # start time (-1), which Kafka's comparison always lets through.
        assert listed(duration_ms=5_000) == [everything[0], everything[1]]
        assert listed(duration_ms=-1) == everything
        # The pattern matches whole ids.
        assert listed(pattern="app-.") == everything[:2]
        assert listed(pattern="app") == []
        assert listed(pattern="") == everything
        assert listed(pattern="app-[2-9]|oth.*", states=frozenset({"Ongoing"})) == [everything[2]]
        with pytest.raises(InvalidPattern, match="is not a valid regular expression"):
            ListFilters(pattern="app-(")

    run(tmp_path, body)
