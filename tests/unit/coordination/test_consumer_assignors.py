"""The server-side assignors of the `consumer` group protocol: Kafka's documented results and,
over generated groups, the invariants every target assignment must keep."""

from __future__ import annotations

import math
import random
import uuid
from collections.abc import Callable, Mapping

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coordination.groups.consumer import range_assignor, uniform_assignor
from coordination.groups.consumer.assignment_spec import normalize
from coordination.groups.consumer.assignors import (
    ASSIGNORS,
    GroupAssignment,
    GroupSpec,
    MemberSubscription,
    SubscriptionType,
    TopicKey,
    TopicMetadata,
    UnsupportedAssignor,
    parse_assignors,
    preferred_assignor,
)

Assign = Callable[[GroupSpec, Mapping[TopicKey, TopicMetadata]], GroupAssignment]
Case = tuple[GroupSpec, dict[TopicKey, TopicMetadata]]

M = MemberSubscription.of
uniform: Assign = ASSIGNORS["uniform"].assign
range_: Assign = ASSIGNORS["range"].assign


def meta(**counts: int) -> dict[TopicKey, TopicMetadata]:
    return {topic: TopicMetadata(count) for topic, count in counts.items()}


def sizes(result: GroupAssignment) -> dict[str, int]:
    return {member: sum(len(parts) for parts in by_topic.values()) for member, by_topic in result.items()}


def flat(by_topic: dict[TopicKey, frozenset[int]]) -> set[tuple[TopicKey, int]]:
    return {(topic, p) for topic, parts in by_topic.items() for p in parts}


def with_current(group: GroupSpec, result: GroupAssignment) -> GroupSpec:
    """The same members, each now holding what ``result`` gave it (the next heartbeat's input)."""
    return GroupSpec({member_id: MemberSubscription(sub.subscribed_topics, result[member_id], sub.rack_id, sub.instance_id)
                      for member_id, sub in group.members.items()})


# -- Kafka's examples: range ------------------------------------------------------------------

def test_range_javadoc_two_members_two_topics_are_co_partitioned() -> None:
    group = GroupSpec({"M0": M(["T1", "T2"]), "M1": M(["T1", "T2"])})
    assert range_(group, meta(T1=3, T2=3)) == {
        "M0": {"T1": {0, 1}, "T2": {0, 1}},
        "M1": {"T1": {2}, "T2": {2}},
    }


def test_range_three_members_three_topics_different_subscriptions() -> None:
    group = GroupSpec({"A": M(["t1", "t2"]), "B": M(["t3"]), "C": M(["t2", "t3"])})
    assert range_(group, meta(t1=3, t2=3, t3=2)) == {
        "A": {"t1": {0, 1, 2}, "t2": {0, 1}},
        "B": {"t3": {0}},
        "C": {"t2": {2}, "t3": {1}},
    }


def test_range_more_members_than_partitions() -> None:
    group = GroupSpec({m: M(["t1", "t3"]) for m in "ABC"})
    assert range_(group, meta(t1=3, t3=2)) == {
        "A": {"t1": {0}, "t3": {0}},
        "B": {"t1": {1}, "t3": {1}},
        "C": {"t1": {2}},
    }


def test_range_static_members_first_and_keep_their_range_under_a_new_member_id() -> None:
    members = {"memberA": M(["t1"], instance_id="instanceA"), "memberC": M(["t1"], instance_id="instanceC"),
               "memberB": M(["t1"])}
    first = range_(GroupSpec(members), meta(t1=5))
    # Static members by instance id, then the dynamic one: A, C, B.
    assert first == {"memberA": {"t1": {0, 1}}, "memberC": {"t1": {2, 3}}, "memberB": {"t1": {4}}}
    del members["memberA"]
    members["memberA1"] = M(["t1"], instance_id="instanceA")
    again = range_(GroupSpec(members), meta(t1=5))
    assert again["memberA1"] == first["memberA"]
    assert again["memberB"] == first["memberB"] and again["memberC"] == first["memberC"]


def test_range_ignores_the_current_assignment_like_kafka() -> None:
    group = GroupSpec({"A": M(["t1"], {"t1": [2]}), "B": M(["t1"], {"t1": [0, 1]})})
    assert range_(group, meta(t1=3)) == {"A": {"t1": {0, 1}}, "B": {"t1": {2}}}


# -- Kafka's examples: uniform ----------------------------------------------------------------

def test_uniform_first_assignment_fills_members_in_order_with_the_extra_partition_first() -> None:
    group = GroupSpec({"A": M(["t1", "t3"]), "B": M(["t1", "t3"])})
    # Kafka walks topics in hash order; ours walk them by id, so A takes t1 and B t3.
    assert uniform(group, meta(t1=3, t3=2)) == {"A": {"t1": {0, 1, 2}}, "B": {"t3": {0, 1}}}


def test_uniform_one_member_added_to_two_members_two_topics() -> None:
    group = GroupSpec({
        "A": M(["t1", "t2"], {"t1": [0, 2], "t2": [0]}),
        "B": M(["t1", "t2"], {"t1": [1], "t2": [1, 2]}),
        "C": M(["t1", "t2"]),
    })
    assert uniform(group, meta(t1=3, t2=3)) == {
        "A": {"t1": {0, 2}},
        "B": {"t1": {1}, "t2": {1}},
        "C": {"t2": {0, 2}},
    }


def test_uniform_member_removed_the_others_keep_theirs_and_share_its_partitions() -> None:
    group = GroupSpec({"A": M(["t1", "t2"], {"t1": [0], "t2": [0]}), "B": M(["t1", "t2"], {"t1": [1], "t2": [1]})})
    result = uniform(group, meta(t1=3, t2=3))
    assert sizes(result) == {"A": 3, "B": 3}
    assert {("t1", 0), ("t2", 0)} <= flat(result["A"]) and {("t1", 1), ("t2", 1)} <= flat(result["B"])


def test_uniform_extra_slot_goes_to_the_member_that_already_holds_it() -> None:
    # 5 partitions, 2 members: B already holds 3, so B keeps all three rather than A
    # getting the extra slot in member order and B giving one up.
    group = GroupSpec({"A": M(["t"], {"t": [0, 1]}), "B": M(["t"], {"t": [2, 3, 4]})})
    assert uniform(group, meta(t=5)) == {"A": {"t": {0, 1}}, "B": {"t": {2, 3, 4}}}


def test_uniform_heterogeneous_rebalances_an_unbalanced_previous_assignment_as_kafka() -> None:
    group = GroupSpec({
        "A": M(["t1"], {"t1": [0, 1, 2]}),
        "B": M(["t1", "t2"], {"t1": [3], "t2": [0]}),
        "C": M(["t1", "t2", "t3"], {"t1": [4, 5], "t2": [1, 2, 3], "t3": [0, 1, 2, 3]}),
    })
    assert uniform(group, meta(t1=6, t2=4, t3=4)) == {
        "A": {"t1": {0, 1, 2, 5}},
        "B": {"t1": {3}, "t2": {0, 1, 2, 3}},
        "C": {"t1": {4}, "t3": {0, 1, 2, 3}},
    }


def test_uniform_heterogeneous_member_removed_its_partitions_go_to_their_only_subscribers() -> None:
    group = GroupSpec({
        "A": M(["t1", "t3"], {"t1": [0, 1, 2], "t3": [0, 1]}),
        "B": M(["t2"], {"t2": [3, 4, 5, 6]}),
    })
    assert uniform(group, meta(t1=3, t2=8, t3=3)) == {
        "A": {"t1": {0, 1, 2}, "t3": {0, 1, 2}},
        "B": {"t2": set(range(8))},
    }


@pytest.mark.parametrize("assign", [uniform, range_], ids=["uniform", "range"])
def test_edge_groups(assign: Assign) -> None:
    run = assign
    assert run(GroupSpec({}), meta(t=3)) == {}
    assert run(GroupSpec({"a": M([]), "b": M([])}), meta(t=3)) == {"a": {}, "b": {}}
    assert run(GroupSpec({"a": M(["t"])}), {}) == {"a": {}}
    # A vanished topic is dropped from the subscription and from what the member held.
    vanished = GroupSpec({"a": M(["gone", "t"], {"gone": [0], "t": [0]}), "b": M(["t"])})
    result = run(vanished, meta(t=2))
    assert all("gone" not in by_topic for by_topic in result.values())
    assert sorted(p for by_topic in result.values() for p in by_topic.get("t", ())) == [0, 1]
    # More members than partitions: each partition once, the rest get nothing.
    crowd = run(GroupSpec({f"m{i}": M(["t"]) for i in range(5)}), meta(t=2))
    assert sorted(sizes(crowd).values()) == [0, 0, 0, 1, 1]


def test_topic_ids_work_as_keys() -> None:
    t1, t2 = uuid.UUID(int=1), uuid.UUID(int=2)
    group = GroupSpec({"a": M([t1, t2]), "b": M([t1])})
    for assign in (uniform, range_):
        result = assign(group, {t1: TopicMetadata(2), t2: TopicMetadata(1)})
        assert flat(result["a"]) | flat(result["b"]) == {(t1, 0), (t1, 1), (t2, 0)}
        assert t2 not in result["b"]


# -- the setting and the group's choice -------------------------------------------------------

def test_assignors_setting_names_and_kafka_class_names() -> None:
    assert parse_assignors("uniform,range") == ("uniform", "range")
    assert parse_assignors(" range , org.apache.kafka.coordinator.group.assignor.UniformAssignor,range") == (
        "range", "uniform")
    with pytest.raises(UnsupportedAssignor):
        parse_assignors("uniform,sticky")
    with pytest.raises(UnsupportedAssignor):
        parse_assignors(" , ")


def test_group_uses_the_assignor_most_members_ask_for_else_the_first_offered() -> None:
    offered = ("uniform", "range")
    assert preferred_assignor([None, None], offered).name == "uniform"
    assert preferred_assignor(["range", None, "uniform", "range"], offered).name == "range"
    assert preferred_assignor(["range", "uniform"], offered).name == "uniform"  # a tie: the first offered
    assert preferred_assignor(["range"], ("uniform",)).name == "uniform"  # not offered: ignored


# -- invariants over generated groups ---------------------------------------------------------

TOPICS: list[TopicKey] = ["t0", "t1", "t2", "t3"]


@st.composite
def groups(draw: st.DrawFn, homogeneous: bool | None = None) -> Case:
    """Up to 8 members over up to 4 topics (one of them possibly vanished), with current
    assignments that may overlap, point past a topic's end or name unsubscribed topics."""
    topics: dict[TopicKey, TopicMetadata] = {t: TopicMetadata(draw(st.integers(0, 9))) for t in TOPICS if draw(st.booleans())}
    member_ids = draw(st.lists(st.text("abcdefgh", min_size=1, max_size=3), max_size=8, unique=True))
    if homogeneous is None:
        homogeneous = draw(st.booleans())
    shared = draw(st.frozensets(st.sampled_from(TOPICS)))
    members = {}
    for member_id in member_ids:
        subscribed = shared if homogeneous else draw(st.frozensets(st.sampled_from(TOPICS)))
        current: dict[TopicKey, frozenset[int]] = draw(st.dictionaries(st.sampled_from(TOPICS), st.frozensets(st.integers(0, 10), max_size=4), max_size=3))
        instance_id = draw(st.one_of(st.none(), st.sampled_from(["i1", "i2", "i3"])))
        members[member_id] = MemberSubscription(subscribed, current, instance_id=instance_id)
    # Instance ids are unique within a group.
    seen: set[str] = set()
    for member_id, sub in list(members.items()):
        if sub.instance_id in seen:
            members[member_id] = MemberSubscription(sub.subscribed_topics, sub.assignment)
        elif sub.instance_id is not None:
            seen.add(sub.instance_id)
    return GroupSpec(members), topics


def check_valid(group: GroupSpec, topics: dict[TopicKey, TopicMetadata], result: GroupAssignment) -> None:
    assert set(result) == set(group.members)
    owners: dict[tuple[TopicKey, int], str] = {}
    for member_id, by_topic in result.items():
        for topic, parts in by_topic.items():
            assert parts, "no empty topic entries"
            assert topic in group.members[member_id].subscribed_topics and topic in topics
            for p in parts:
                assert 0 <= p < topics[topic].partitions
                assert (topic, p) not in owners, f"{(topic, p)} assigned twice"
                owners[(topic, p)] = member_id
    # Every partition of a topic somebody subscribes to is assigned.
    wanted = {(t, p) for sub in group.members.values() for t in sub.subscribed_topics if t in topics
              for p in range(topics[t].partitions)}
    assert set(owners) == wanted


ASSIGNORS_UNDER_TEST = st.sampled_from([uniform, range_])


@settings(max_examples=100, deadline=None)
@given(groups(), ASSIGNORS_UNDER_TEST)
def test_each_partition_once_only_to_subscribers_and_all_assigned(case: Case, assign: Assign) -> None:
    group, topics = case
    check_valid(group, topics, assign(group, topics))


@settings(max_examples=100, deadline=None)
@given(groups(), ASSIGNORS_UNDER_TEST, st.randoms(use_true_random=False))
def test_deterministic_whatever_the_order_of_the_input(case: Case, assign: Assign, rnd: random.Random) -> None:
    group, topics = case
    first = assign(group, topics)
    items = list(group.members.items())
    rnd.shuffle(items)
    topic_items = list(topics.items())
    rnd.shuffle(topic_items)
    assert assign(GroupSpec(dict(items)), dict(topic_items)) == first
    assert assign(group, topics) == first


@settings(max_examples=100, deadline=None)
@given(groups(), ASSIGNORS_UNDER_TEST)
def test_rerunning_on_its_own_output_changes_nothing(case: Case, assign: Assign) -> None:
    group, topics = case
    result = assign(group, topics)
    assert assign(with_current(group, result), topics) == result


@settings(max_examples=100, deadline=None)
@given(groups(homogeneous=True))
def test_uniform_homogeneous_is_balanced_within_one(case: Case) -> None:
    group, topics = case
    counts = sizes(uniform(group, topics)).values()
    if counts:
        assert max(counts) - min(counts) <= 1


@settings(max_examples=100, deadline=None)
@given(groups(homogeneous=True))
def test_uniform_homogeneous_keeps_as_much_as_balance_allows(case: Case) -> None:
    group, topics = case
    spec = normalize(group, topics)
    result = uniform(group, topics)
    total = sum(sizes(result).values())
    if not group.members:
        return
    floor, extra = divmod(total, len(group.members))
    kept = 0
    for member_id, held in zip(spec.member_ids, spec.owned, strict=True):
        kept_here = len(set(held) & flat(result[member_id]))
        assert kept_here >= min(len(held), floor)
        kept += kept_here
    # The most any balanced assignment can keep: everyone up to the floor, plus one more for
    # as many members above the floor as there are extra slots.
    above_floor = sum(1 for held in spec.owned if len(held) > floor)
    assert kept == sum(min(len(held), floor) for held in spec.owned) + min(extra, above_floor)


@settings(max_examples=100, deadline=None)
@given(groups(homogeneous=True), st.text("xyz", min_size=4, max_size=4))
def test_uniform_homogeneous_one_member_joins_each_old_member_gives_up_little(
        case: Case, newcomer: str) -> None:
    group, topics = case
    settled = with_current(group, uniform(group, topics))
    before = uniform(settled, topics)
    subscribed = next(iter(group.members.values())).subscribed_topics if group.members else frozenset(TOPICS)
    grown = GroupSpec({**settled.members, newcomer: MemberSubscription(subscribed)})
    after = uniform(grown, topics)
    total = sum(sizes(before).values())
    members = len(group.members)
    for member_id, held in before.items():
        lost = flat(held) - flat(after[member_id])
        assert len(lost) <= max(0, len(flat(held)) - total // (members + 1))
        assert len(lost) <= math.ceil(total / max(members, 1)) - total // (members + 1)


@settings(max_examples=100, deadline=None)
@given(groups(homogeneous=False))
def test_uniform_heterogeneous_no_move_would_improve_a_topics_balance(case: Case) -> None:
    group, topics = case
    result = uniform(group, topics)
    load = sizes(result)
    for topic in topics:
        subscribers = [m for m, sub in group.members.items() if topic in sub.subscribed_topics]
        holders = [m for m in subscribers if result[m].get(topic)]
        if subscribers and holders:
            assert max(load[m] for m in holders) - min(load[m] for m in subscribers) <= 1


@settings(max_examples=100, deadline=None)
@given(groups(homogeneous=False), st.frozensets(st.sampled_from(TOPICS)))
def test_uniform_heterogeneous_a_join_only_moves_partitions_among_members_it_shares_topics_with(
        case: Case, subscribed: frozenset[TopicKey]) -> None:
    """Partitions only move between subscribers of one topic, so members not linked to the
    newcomer through a chain of shared topics keep exactly what they had."""
    group, topics = case
    settled = with_current(group, uniform(group, topics))
    before = uniform(settled, topics)
    newcomer = "zz-new"
    grown = GroupSpec({**settled.members, newcomer: MemberSubscription(subscribed)})
    after = uniform(grown, topics)
    check_valid(grown, topics, after)

    def linked(member_id: str) -> set[TopicKey]:
        return {t for t in grown.members[member_id].subscribed_topics if t in topics}

    reached, reached_topics, frontier = {newcomer}, set(linked(newcomer)), [newcomer]
    while frontier:
        frontier = [m for m in grown.members if m not in reached and linked(m) & reached_topics]
        for m in frontier:
            reached.add(m)
            reached_topics |= linked(m)
    for member_id in group.members:
        if member_id not in reached:
            assert after[member_id] == before[member_id]


@settings(max_examples=100, deadline=None)
@given(groups())
def test_range_co_partitions_topics_with_the_same_subscribers_and_size(case: Case) -> None:
    group, topics = case
    result = range_(group, topics)
    subscribers = {t: frozenset(m for m, sub in group.members.items() if t in sub.subscribed_topics) for t in topics}
    for a in topics:
        for b in topics:
            if subscribers[a] and subscribers[a] == subscribers[b] and topics[a].partitions == topics[b].partitions:
                for member_id in subscribers[a]:
                    assert result[member_id].get(a, frozenset()) == result[member_id].get(b, frozenset())


@settings(max_examples=100, deadline=None)
@given(groups())
def test_range_ranges_are_contiguous_and_differ_by_at_most_one(case: Case) -> None:
    group, topics = case
    result = range_(group, topics)
    for topic in topics:
        got = [sorted(result[m].get(topic, ())) for m, sub in group.members.items() if topic in sub.subscribed_topics]
        for parts in got:
            assert parts == list(range(parts[0], parts[0] + len(parts))) if parts else True
        if got:
            assert max(map(len, got)) - min(map(len, got)) <= 1


def test_subscription_type_is_computed_on_existing_topics() -> None:
    group = GroupSpec({"a": M(["t", "gone"]), "b": M(["t"])})
    assert normalize(group, meta(t=1)).subscription_type is SubscriptionType.HOMOGENEOUS
    assert normalize(group, meta(t=1, gone=1)).subscription_type is SubscriptionType.HETEROGENEOUS


def test_module_names_match_the_registry() -> None:
    assert ASSIGNORS[uniform_assignor.NAME].assign is uniform_assignor.assign
    assert ASSIGNORS[range_assignor.NAME].assign is range_assignor.assign
