"""The group state table and the pure decisions of the group model (no I/O)."""

from __future__ import annotations

import struct

import pytest

from coordination.groups.group import Group, Member, parse_subscription_topics
from coordination.groups.state import VALID_PREVIOUS, GroupState, IllegalTransition, check_transition

S = GroupState


def member(member_id: str, *protocols: str, instance: str | None = None) -> Member:
    return Member(member_id, instance, "client", "/127.0.0.1", 10_000, 10_000, "consumer",
                  [(name, name.encode()) for name in protocols])


ALLOWED = {
    (S.PREPARING_REBALANCE, S.EMPTY), (S.EMPTY, S.PREPARING_REBALANCE), (S.STABLE, S.PREPARING_REBALANCE),
    (S.COMPLETING_REBALANCE, S.PREPARING_REBALANCE), (S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE),
    (S.COMPLETING_REBALANCE, S.STABLE),
} | {(state, S.DEAD) for state in S}


@pytest.mark.parametrize("current", list(S))
@pytest.mark.parametrize("target", list(S))
def test_state_table_is_kafkas(current: GroupState, target: GroupState) -> None:
    if (current, target) in ALLOWED:
        check_transition(current, target)
    else:
        with pytest.raises(IllegalTransition):
            check_transition(current, target)
    assert ((current, target) in ALLOWED) == (current in VALID_PREVIOUS[target])


def test_wire_names_match_kafka_and_filters_ignore_case() -> None:
    assert [s.wire_name for s in S] == ["Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead"]
    assert GroupState.from_wire("stable") is S.STABLE
    assert GroupState.from_wire("PREPARINGREBALANCE") is S.PREPARING_REBALANCE
    assert GroupState.from_wire("Rebalancing") is None


def test_protocol_selection_takes_the_most_votes_among_common_protocols() -> None:
    group = Group("g")
    group.add(member("a", "sticky", "range"))
    group.add(member("b", "range", "sticky"))
    group.add(member("c", "range", "roundrobin", "sticky"))
    assert group.candidate_protocols() == {"sticky", "range"}
    assert group.select_protocol() == "range"  # b and c prefer range


def test_protocol_selection_tie_goes_to_the_leaders_preference() -> None:
    group = Group("g")
    group.add(member("leader", "sticky", "range"))
    group.add(member("other", "range", "sticky"))
    assert group.leader_id == "leader"
    assert group.select_protocol() == "sticky"


def test_a_new_member_must_share_a_protocol_and_the_type() -> None:
    group = Group("g")
    assert group.supports("consumer", [("range", b"")])  # empty group: anything goes
    group.add(member("a", "range"))
    assert group.supports("consumer", [("roundrobin", b""), ("range", b"")])
    assert not group.supports("consumer", [("roundrobin", b"")])
    assert not group.supports("connect", [("range", b"")])
    assert not group.supports("consumer", [])


def test_static_member_replacement_keeps_its_place_and_leadership() -> None:
    group = Group("g")
    group.add(member("old", "range", instance="i-1"))
    group.add(member("b", "range"))
    replaced = group.replace_static("old", "new")
    assert replaced.member_id == "new" and group.leader_id == "new"
    assert group.static_members == {"i-1": "new"} and set(group.members) == {"new", "b"}
    group.remove("new")
    assert group.static_members == {} and group.leader_id == "b"


def test_subscription_topics_of_the_consumer_protocol() -> None:
    metadata = struct.pack(">hi", 1, 2) + struct.pack(">h", 3) + b"abc" + struct.pack(">h", 1) + b"z" + struct.pack(">i", -1)
    assert parse_subscription_topics(metadata) == {"abc", "z"}
    for bad in (b"", b"\x00\x01", struct.pack(">hi", 0, 5) + b"\x00\x09ab", struct.pack(">hi", 0, -1)):
        with pytest.raises(ValueError):
            parse_subscription_topics(bad)


def test_all_joined_waits_for_pending_members() -> None:
    group = Group("g")
    a = member("a", "range")
    group.add(a)
    assert not group.has_all_members_joined()
    a.join_waiter = object()  # type: ignore[assignment]  # any parked join counts
    assert group.has_all_members_joined()
    group.pending_members["p"] = 0.0
    assert not group.has_all_members_joined()
