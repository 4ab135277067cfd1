"""The controller's decisions, as pure functions of a partition's replicas, state and the
live brokers (Kafka's ZooKeeper-mode rules)."""

from __future__ import annotations

from coordination.controller import (
    ELECTION_NOT_NEEDED,
    ELIGIBLE_LEADERS_NOT_AVAILABLE,
    PREFERRED,
    PREFERRED_LEADER_NOT_AVAILABLE,
    UNCLEAN,
    elect,
    elect_on_request,
    widened,
)
from coordination.znodes import PartitionState


def state(leader: int, epoch: int, isr: list[int]) -> PartitionState:
    return PartitionState(leader, epoch, isr, 1, zk_version=7)


def test_a_live_leader_keeps_leading_and_its_isr_loses_the_dead() -> None:
    assert elect([1, 2, 3], state(1, 4, [1, 2, 3]), {1, 2, 3}, False, 2) is None
    shrunk = elect([1, 2, 3], state(1, 4, [1, 2, 3]), {1, 3}, False, 2)
    assert shrunk == PartitionState(1, 4, [1, 3], 2, 7)  # same epoch: the leader stays


def test_a_dead_leader_is_replaced_by_the_first_live_in_sync_replica_in_assignment_order() -> None:
    new = elect([3, 1, 2], state(3, 4, [2, 1, 3]), {1, 2}, False, 2)
    assert new == PartitionState(1, 5, [1, 2], 2, 7)


def test_no_live_in_sync_replica_leaves_the_partition_offline_unless_unclean() -> None:
    offline = elect([1, 2, 3], state(1, 4, [1]), {2, 3}, False, 2)
    assert offline == PartitionState(-1, 5, [1], 2, 7)  # the last in-sync replica stays in the ISR
    assert elect([1, 2, 3], offline, {2, 3}, False, 2) is None  # nothing more to do
    unclean = elect([1, 2, 3], offline, {2, 3}, True, 2)
    assert unclean == PartitionState(2, 6, [2], 2, 7)
    back = elect([1, 2, 3], offline, {1, 3}, False, 2)  # the in-sync replica returns
    assert back == PartitionState(1, 6, [1], 2, 7)


def test_preferred_and_unclean_elections_on_request() -> None:
    assert elect_on_request([1, 2], state(1, 3, [1, 2]), {1, 2}, PREFERRED, 2) == ELECTION_NOT_NEEDED
    assert elect_on_request([1, 2], state(2, 3, [2]), {1, 2}, PREFERRED, 2) == PREFERRED_LEADER_NOT_AVAILABLE
    assert elect_on_request([1, 2], state(2, 3, [2, 1]), {2}, PREFERRED, 2) == PREFERRED_LEADER_NOT_AVAILABLE
    assert elect_on_request([1, 2], state(2, 3, [2, 1]), {1, 2}, PREFERRED, 2) == PartitionState(1, 4, [2, 1], 2, 7)
    assert elect_on_request([1, 2], state(2, 3, [2]), {1, 2}, UNCLEAN, 2) == ELECTION_NOT_NEEDED
    assert elect_on_request([1, 2], state(-1, 3, [2]), {1}, UNCLEAN, 2) == PartitionState(1, 4, [1], 2, 7)
    assert elect_on_request([1, 2], state(-1, 3, [2]), {3}, UNCLEAN, 2) == ELIGIBLE_LEADERS_NOT_AVAILABLE


def test_widening_adds_live_brokers_spread_over_partitions() -> None:
    grown = widened({0: [1], 1: [1], 2: [1, 2, 3]}, [1, 2, 3], 3)
    assert grown == {0: [2, 3], 1: [3, 2]}
    assert widened({0: [1]}, [1], 3) == {}


def test_a_reassignment_waits_for_its_new_replicas_then_moves_the_leader_then_completes() -> None:
    from coordination.controller import reassignment_step

    replicas, adding, removing = [3, 2, 1], [3], [1]  # target [3, 2]; 1 leaves
    assert reassignment_step(replicas, adding, removing, state(1, 4, [1, 2]), {1, 2, 3}, 2) is None  # 3 not in sync
    moved = reassignment_step(replicas, adding, removing, state(1, 4, [1, 2, 3]), {1, 2, 3}, 2)
    assert moved == PartitionState(3, 5, [2, 3], 2, 7)  # the leader leaves: a target replica in the ISR leads
    assert reassignment_step(replicas, adding, removing, state(3, 5, [2, 3]), {1, 2, 3}, 2) == [3, 2]

