"""The share group assignor (Kafka's ``simple`` semantics): every assignable partition goes
out, members share a partition only when they outnumber the partitions, shares are even, and
members keep what they had."""

from __future__ import annotations

import uuid

from coordination.groups.share.assignor import assign

T1, T2 = uuid.UUID(int=1), uuid.UUID(int=2)


def counts(result: dict[str, dict[uuid.UUID, frozenset[int]]]) -> dict[str, int]:
    return {m: sum(len(p) for p in a.values()) for m, a in result.items()}


def holders(result: dict[str, dict[uuid.UUID, frozenset[int]]], topic: uuid.UUID, partition: int) -> set[str]:
    return {m for m, a in result.items() if partition in a.get(topic, frozenset())}


def test_fewer_members_than_partitions_split_them_evenly_without_sharing() -> None:
    result = assign({"a": frozenset({T1}), "b": frozenset({T1})}, {T1: frozenset(range(5))}, {})
    assert sorted(counts(result).values()) == [2, 3]
    assert all(len(holders(result, T1, p)) == 1 for p in range(5))


def test_more_members_than_partitions_share_each_partition() -> None:
    members = {m: frozenset({T1}) for m in "abcde"}
    result = assign(members, {T1: frozenset({0, 1})}, {})
    # ceil(5 / 2) = 3 members a partition: 6 shares for 5 members, so one member has both.
    assert [len(holders(result, T1, p)) for p in (0, 1)] == [3, 3]
    assert sorted(counts(result).values()) == [1, 1, 1, 1, 2]


def test_one_partition_goes_to_every_member() -> None:
    result = assign({m: frozenset({T1}) for m in "abc"}, {T1: frozenset({0})}, {})
    assert holders(result, T1, 0) == {"a", "b", "c"}


def test_a_new_member_takes_only_its_share_and_the_others_keep_theirs() -> None:
    first = assign({"a": frozenset({T1})}, {T1: frozenset(range(4))}, {})
    assert first["a"][T1] == frozenset(range(4))
    second = assign({"a": frozenset({T1}), "b": frozenset({T1})}, {T1: frozenset(range(4))}, first)
    assert len(second["a"][T1]) == len(second["b"][T1]) == 2
    assert second["a"][T1] < first["a"][T1] and not second["a"][T1] & second["b"][T1]
    third = assign({"a": frozenset({T1}), "b": frozenset({T1})}, {T1: frozenset(range(4))}, second)
    assert third == second


def test_only_assignable_partitions_of_subscribed_topics_are_given() -> None:
    result = assign({"a": frozenset({T1})}, {T1: frozenset({1, 3}), T2: frozenset({0})}, {})
    assert result == {"a": {T1: frozenset({1, 3})}}
    assert assign({"a": frozenset({T1})}, {}, {}) == {"a": {}}


def test_different_subscriptions_share_each_topic_among_its_subscribers() -> None:
    result = assign({"a": frozenset({T1}), "b": frozenset({T1, T2})}, {T1: frozenset({0, 1}), T2: frozenset({0})}, {})
    assert result["b"][T2] == frozenset({0}) and T2 not in result["a"]
    assert result["a"][T1] | result["b"][T1] == {0, 1} and not result["a"][T1] & result["b"][T1]


def test_a_departed_topic_is_dropped_from_the_kept_assignment() -> None:
    before = {"a": {T1: frozenset({0}), T2: frozenset({0})}}
    result = assign({"a": frozenset({T1})}, {T1: frozenset({0}), T2: frozenset({0})}, before)
    assert result == {"a": {T1: frozenset({0})}}
