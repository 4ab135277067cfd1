"""Member reconciliation of the `consumer` group protocol (KIP-848): the situations of Kafka's
CurrentAssignmentBuilderTest with Kafka's expected results, the heartbeat epoch check, the
partition index, the records; and, over generated groups, members heartbeating in random order
towards new target assignments of the uniform assignor, against the promises of KIP-848."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coordination.groups.consumer.assignment_spec import GroupAssignment, GroupSpec, MemberSubscription, TopicKey, TopicMetadata
from coordination.groups.consumer.reconciliation import (
    NO_EPOCH,
    ConsumerGroupState,
    CurrentAssignment,
    FencedMemberEpoch,
    MemberState,
    PartitionOwners,
    PartitionOwnershipConflict,
    TopicPartitions,
    assigned_partitions_changed,
    from_record,
    group_state,
    reconcile,
    to_record,
    validate_member_epoch,
)
from coordination.groups.consumer.records import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    CurrentTopicPartitions,
    decode_value,
    encode_value,
)
from coordination.groups.consumer.uniform_assignor import assign as uniform

STABLE = MemberState.STABLE
UNREVOKED = MemberState.UNREVOKED_PARTITIONS
UNRELEASED = MemberState.UNRELEASED_PARTITIONS


def at(epoch: int, **topics: Iterable[int]) -> dict[TopicKey, dict[int, int]]:
    """Partitions per topic, each assigned at ``epoch``."""
    return {topic: {p: epoch for p in parts} for topic, parts in topics.items()}


def parts(**topics: Iterable[int]) -> dict[TopicKey, frozenset[int]]:
    return {topic: frozenset(ps) for topic, ps in topics.items()}


def merge(*holdings: Mapping[TopicKey, Mapping[int, int]]) -> dict[TopicKey, dict[int, int]]:
    result: dict[TopicKey, dict[int, int]] = {}
    for holding in holdings:
        for topic, epochs in holding.items():
            result.setdefault(topic, {}).update(epochs)
    return result


def free(topic: TopicKey, partition: int) -> bool:
    return False


def taken(topic: TopicKey, partition: int) -> bool:
    return True


# -- Kafka's situations ------------------------------------------------------------------------

def test_stable_member_moves_to_the_new_epoch_keeping_its_partitions() -> None:
    member = CurrentAssignment(10, 10, STABLE, at(10, t1=[1, 2, 3], t2=[4, 5, 6]))
    after = reconcile(member, 11, parts(t1=[1, 2, 3], t2=[4, 5, 6]), None, taken)
    # Its own partitions are held (by itself) but they are kept, never asked about.
    assert after == CurrentAssignment(11, 10, STABLE, at(10, t1=[1, 2, 3], t2=[4, 5, 6]))


def test_stable_member_gets_new_free_partitions_at_the_target_epoch() -> None:
    member = CurrentAssignment(10, 10, STABLE, at(10, t1=[1, 2, 3], t2=[4, 5, 6]))
    after = reconcile(member, 11, parts(t1=[1, 2, 3, 4], t2=[4, 5, 6, 7]), None, free)
    assert after == CurrentAssignment(11, 10, STABLE, merge(at(10, t1=[1, 2, 3], t2=[4, 5, 6]), at(11, t1=[4], t2=[7])))


def test_stable_member_revokes_first_and_keeps_its_epoch() -> None:
    member = CurrentAssignment(10, 10, STABLE, at(10, t1=[1, 2, 3], t2=[4, 5, 6]))
    after = reconcile(member, 11, parts(t1=[2, 3, 4], t2=[5, 6, 7]), None, free)
    # Partitions 4 and 7 are free, but nothing new is given before the revocation is done.
    assert after == CurrentAssignment(10, 10, UNREVOKED, at(10, t1=[2, 3], t2=[5, 6]), at(10, t1=[1], t2=[4]))


def test_stable_member_waits_for_partitions_held_elsewhere() -> None:
    member = CurrentAssignment(10, 10, STABLE, at(10, t1=[1, 2, 3], t2=[4, 5, 6]))
    after = reconcile(member, 11, parts(t1=[1, 2, 3, 4], t2=[4, 5, 6, 7]), None, taken)
    assert after == CurrentAssignment(11, 10, UNRELEASED, at(10, t1=[1, 2, 3], t2=[4, 5, 6]))


def test_partitions_the_client_already_dropped_are_not_revoked() -> None:
    member = CurrentAssignment(10, 10, STABLE, at(10, t1=[1, 2, 3], t2=[4, 5, 6]))
    after = reconcile(member, 11, parts(t1=[1, 2, 3], t2=[4, 5, 7]), {}, lambda topic, p: topic == "t2")
    # t2-6 leaves the target and the heartbeat shows it is not owned: dropped at once; t2-7 is
    # held elsewhere.
    assert after == CurrentAssignment(11, 10, UNRELEASED, at(10, t1=[1, 2, 3], t2=[4, 5]))


def test_unrevoked_member_that_released_reaches_the_target() -> None:
    member = CurrentAssignment(10, 10, UNREVOKED, at(10, t1=[2, 3], t2=[5, 6]), at(10, t1=[1], t2=[4]))
    after = reconcile(member, 11, parts(t1=[2, 3], t2=[5, 6]), parts(t1=[2, 3], t2=[5, 6]), free)
    assert after == CurrentAssignment(11, 10, STABLE, at(10, t1=[2, 3], t2=[5, 6]))


@pytest.mark.parametrize("owned", [None, parts(t1=[1, 2, 3], t2=[5, 6]), parts(t1=[2, 3], t2=[4, 5, 6])],
                         ids=["not-sent", "still-owns-t1-1", "still-owns-t2-4"])
def test_unrevoked_member_waits_while_it_may_still_own_a_revoked_partition(owned: TopicPartitions | None) -> None:
    member = CurrentAssignment(10, 10, UNREVOKED, at(10, t1=[2, 3], t2=[5, 6]), at(10, t1=[1], t2=[4]))
    assert reconcile(member, 12, parts(t1=[3], t2=[6]), owned, free) is member


@pytest.mark.parametrize("target_epoch", [12, 10])
def test_unrevoked_member_revoking_again_does_not_move_its_epoch(target_epoch: int) -> None:
    member = CurrentAssignment(10, 10, UNREVOKED, at(10, t1=[2, 3], t2=[5, 6]), at(10, t1=[1], t2=[4]))
    after = reconcile(member, target_epoch, parts(t1=[3], t2=[6]), parts(t1=[2, 3], t2=[5, 6]), free)
    # Kafka once moved such a member one epoch on; that let two members hold one partition
    # at the same epoch, so now only reaching the target moves the epoch.
    assert after == CurrentAssignment(10, 10, UNREVOKED, at(10, t1=[3], t2=[6]), at(10, t1=[2], t2=[5]))


def test_unrevoked_member_that_released_waits_for_partitions_held_elsewhere() -> None:
    member = CurrentAssignment(11, 10, UNREVOKED, at(11, t1=[2, 3], t2=[5, 6]))
    after = reconcile(member, 11, parts(t1=[2, 3, 4], t2=[5, 6, 7]), parts(t1=[2, 3], t2=[5, 6]), taken)
    assert after == CurrentAssignment(11, 11, UNRELEASED, at(11, t1=[2, 3], t2=[5, 6]))


def test_a_partition_back_in_the_target_while_pending_revocation_is_not_held_elsewhere() -> None:
    member = CurrentAssignment(10, 10, UNREVOKED, at(10, t1=[2, 3], t2=[5, 6]), at(10, t1=[4]))
    held_by_member = {("t1", 2), ("t1", 3), ("t1", 4), ("t2", 5), ("t2", 6)}
    after = reconcile(member, 12, parts(t1=[2, 3, 4], t2=[5, 6, 7]), parts(t1=[2, 3], t2=[5, 6]),
                      lambda topic, p: (topic, p) in held_by_member)
    assert after == CurrentAssignment(12, 10, STABLE, merge(at(10, t1=[2, 3], t2=[5, 6]), at(12, t1=[4], t2=[7])))


def test_unreleased_member_moves_to_a_newer_target_it_already_holds() -> None:
    member = CurrentAssignment(11, 11, UNRELEASED, at(11, t1=[2, 3], t2=[5, 6]))
    after = reconcile(member, 12, parts(t1=[2, 3], t2=[5, 6]), None, taken)
    assert after == CurrentAssignment(12, 11, STABLE, at(11, t1=[2, 3], t2=[5, 6]))


def test_unreleased_member_gets_the_partitions_once_released() -> None:
    member = CurrentAssignment(11, 11, UNRELEASED, at(11, t1=[2, 3], t2=[5, 6]))
    after = reconcile(member, 11, parts(t1=[2, 3, 4], t2=[5, 6, 7]), None, free)
    assert after == CurrentAssignment(11, 11, STABLE, merge(at(11, t1=[2, 3], t2=[5, 6]), at(11, t1=[4], t2=[7])))


def test_unreleased_member_keeps_waiting() -> None:
    member = CurrentAssignment(11, 11, UNRELEASED, at(11, t1=[2, 3], t2=[5, 6]))
    assert reconcile(member, 11, parts(t1=[2, 3, 4], t2=[5, 6, 7]), None, taken) == member


def test_unreleased_member_revokes_for_a_newer_target() -> None:
    member = CurrentAssignment(11, 11, UNRELEASED, at(11, t1=[2, 3], t2=[5, 6]))
    after = reconcile(member, 12, parts(t1=[3], t2=[6]), None, taken)
    assert after == CurrentAssignment(11, 11, UNREVOKED, at(11, t1=[3], t2=[6]), at(11, t1=[2], t2=[5]))


def test_unknown_state_is_fenced_until_the_member_owns_nothing() -> None:
    member = CurrentAssignment(11, 11, MemberState.UNKNOWN, at(11, t1=[3], t2=[6]), at(11, t1=[2], t2=[5]))
    for owned in (None, parts(t1=[3]), parts(t1=[])):
        with pytest.raises(FencedMemberEpoch) as fenced:
            reconcile(member, 12, parts(t1=[3], t2=[6]), owned, taken)
        assert fenced.value.code == 110
    after = reconcile(member, 12, parts(t1=[3], t2=[6]), {}, taken)
    assert after == CurrentAssignment(12, 11, STABLE, at(11, t1=[3], t2=[6]))


def test_a_new_member_starts_at_epoch_zero_and_joins_the_target() -> None:
    joined = CurrentAssignment()
    assert (joined.member_epoch, joined.previous_member_epoch, joined.state) == (0, NO_EPOCH, STABLE)
    after = reconcile(joined, 5, parts(t1=[0, 1]), {}, lambda topic, p: p == 1)
    assert after == CurrentAssignment(5, 0, UNRELEASED, at(5, t1=[0]))


def test_stable_member_at_the_target_is_left_alone() -> None:
    member = CurrentAssignment(11, 10, STABLE, at(10, t1=[1]))
    assert reconcile(member, 11, parts(t1=[1, 2]), None, free) is member
    assert member.is_reconciled_to(11) and not member.is_reconciled_to(12)


# -- subscriptions -----------------------------------------------------------------------------

@pytest.mark.parametrize(("member_epoch", "target_epoch", "enforce"), [(10, 11, False), (10, 11, True), (10, 10, True)])
def test_unsubscribed_topics_released_by_the_client_are_dropped(member_epoch: int, target_epoch: int,
                                                                enforce: bool) -> None:
    member = CurrentAssignment(member_epoch, member_epoch, STABLE, at(member_epoch, t1=[1, 2, 3], t2=[4, 5, 6]))
    after = reconcile(member, target_epoch, parts(t1=[1, 2, 3], t2=[4, 5, 6]), parts(t2=[4, 5, 6]), free,
                      subscribed_topics={"t2"}, enforce_subscription_consistency=enforce)
    assert after == CurrentAssignment(target_epoch, member_epoch, STABLE, at(member_epoch, t2=[4, 5, 6]))


@pytest.mark.parametrize(("member_epoch", "target_epoch", "enforce"), [(10, 11, False), (10, 11, True), (10, 10, True)])
def test_unsubscribed_topics_still_owned_are_revoked(member_epoch: int, target_epoch: int, enforce: bool) -> None:
    member = CurrentAssignment(member_epoch, member_epoch, STABLE, at(member_epoch, t1=[1, 2, 3], t2=[4, 5, 6]))
    after = reconcile(member, target_epoch, parts(t1=[1, 2, 3], t2=[4, 5, 6]), parts(t1=[1, 2, 3], t2=[4, 5, 6]),
                      free, subscribed_topics={"t2"}, enforce_subscription_consistency=enforce)
    assert after == CurrentAssignment(member_epoch, member_epoch, UNREVOKED, at(member_epoch, t2=[4, 5, 6]),
                                      at(member_epoch, t1=[1, 2, 3]))


def test_unrevoked_member_also_revokes_topics_it_unsubscribed_from() -> None:
    member = CurrentAssignment(10, 10, UNREVOKED, at(10, t1=[2, 3], t2=[5, 6]), at(10, t1=[1], t2=[4]))
    after = reconcile(member, 12, parts(t1=[1, 3, 4], t2=[6, 7]), parts(t1=[1, 2, 3], t2=[4, 5, 6]), free,
                      subscribed_topics={"t2"}, enforce_subscription_consistency=True)
    assert after == CurrentAssignment(10, 10, UNREVOKED, at(10, t2=[5, 6]), at(10, t1=[1, 2, 3], t2=[4]))


def test_a_member_subscribed_to_nothing_revokes_everything() -> None:
    # A regular expression not resolved yet subscribes to no topic.
    member = CurrentAssignment(10, 10, STABLE, at(10, t1=[1, 2, 3], t2=[4, 5, 6]))
    after = reconcile(member, 10, parts(t1=[1, 2, 3], t2=[4, 5, 6]), parts(t1=[1, 2, 3], t2=[4, 5, 6]), free,
                      subscribed_topics=set(), enforce_subscription_consistency=True)
    assert after == CurrentAssignment(10, 10, UNREVOKED, {}, at(10, t1=[1, 2, 3], t2=[4, 5, 6]))


def test_subscription_kept_leaves_the_member_as_it_is() -> None:
    member = CurrentAssignment(10, 10, STABLE, at(10, t2=[4]))
    assert reconcile(member, 10, parts(t2=[4]), None, free, subscribed_topics={"t2"},
                     enforce_subscription_consistency=True) is member


# -- heartbeat epochs, responses, group state ---------------------------------------------------

def test_member_epoch_validation() -> None:
    member = CurrentAssignment(100, 99, STABLE, at(100, t1=[1, 2, 3]))
    validate_member_epoch(member, 100, None)
    validate_member_epoch(member, 99, parts(t1=[1, 2]))  # the response that moved it on was lost
    validate_member_epoch(member, 99, {})
    for epoch, owned in [(101, parts(t1=[1])),  # ahead of the coordinator
                         (99, None),  # previous epoch, but owned partitions not sent
                         (99, parts(t1=[1, 4])),  # owns more than it is assigned
                         (99, parts(t2=[])),  # a topic it is not assigned at all
                         (98, parts(t1=[1]))]:  # older than the previous epoch
        with pytest.raises(FencedMemberEpoch):
            validate_member_epoch(member, epoch, owned)


def test_assignment_changed_ignores_epochs_and_revocations() -> None:
    before = CurrentAssignment(10, 10, STABLE, at(10, t1=[1, 2]))
    assert not assigned_partitions_changed(before, CurrentAssignment(11, 10, STABLE, at(11, t1=[1, 2])))
    assert not assigned_partitions_changed(before, CurrentAssignment(10, 10, UNREVOKED, at(10, t1=[1, 2]), at(10, t2=[3])))
    assert assigned_partitions_changed(before, CurrentAssignment(10, 10, UNREVOKED, at(10, t1=[1]), at(10, t1=[2])))


def test_group_state() -> None:
    stable = CurrentAssignment(5, 4, STABLE)
    assert group_state([], 5, 5) is ConsumerGroupState.EMPTY
    assert group_state([stable], 6, 5) is ConsumerGroupState.ASSIGNING
    assert group_state([stable, CurrentAssignment(5, 4, UNRELEASED)], 5, 5) is ConsumerGroupState.RECONCILING
    assert group_state([stable, CurrentAssignment(4, 4, STABLE)], 5, 5) is ConsumerGroupState.RECONCILING
    assert group_state([stable, stable], 5, 5) is ConsumerGroupState.STABLE


def test_member_state_values_are_the_record_bytes() -> None:
    assert [(s.name, int(s)) for s in MemberState] == [
        ("STABLE", 0), ("UNREVOKED_PARTITIONS", 1), ("UNRELEASED_PARTITIONS", 2), ("UNKNOWN", 127)]
    assert MemberState.from_value(2) is UNRELEASED
    assert MemberState.from_value(3) is MemberState.UNKNOWN  # written by a newer coordinator


# -- the partition index -----------------------------------------------------------------------

def test_partition_owners_follow_member_updates() -> None:
    owners = PartitionOwners()
    a1 = CurrentAssignment(3, 2, UNREVOKED, at(2, t=[0]), at(2, t=[1]))
    owners.update("a", None, a1)
    assert (owners.holder("t", 1), owners.epoch("t", 1), owners.epoch("t", 2)) == ("a", 3, NO_EPOCH)
    assert owners.is_held("t", 0) and not owners.is_held("t", 2)

    b1 = CurrentAssignment(3, 0, UNRELEASED, at(3, t=[2]))
    owners.update("b", None, b1)
    with pytest.raises(PartitionOwnershipConflict) as conflict:
        owners.update("b", b1, CurrentAssignment(3, 3, STABLE, at(3, t=[1, 2])))
    assert "held by ('a', 3)" in str(conflict.value)
    assert owners.holdings() == {("t", 0): ("a", 3), ("t", 1): ("a", 3), ("t", 2): ("b", 3)}  # unchanged

    a2 = CurrentAssignment(3, 3, STABLE, at(2, t=[0]))
    owners.update("a", a1, a2)
    b2 = CurrentAssignment(3, 3, STABLE, merge(at(3, t=[2]), at(3, t=[1])))
    owners.update("b", b1, b2)
    assert owners.holdings() == {("t", 0): ("a", 3), ("t", 1): ("b", 3), ("t", 2): ("b", 3)}
    with pytest.raises(PartitionOwnershipConflict):
        owners.update("a", a1, None)  # a1 is not what the index holds for "a"
    owners.update("a", a2, None)
    assert owners.holdings() == {("t", 1): ("b", 3), ("t", 2): ("b", 3)}


# -- the current member assignment record ------------------------------------------------------

def test_record_round_trip_keeps_the_assignment_epochs() -> None:
    t1, t2 = uuid.UUID(int=1), uuid.UUID(int=2)
    member = CurrentAssignment(12, 10, UNREVOKED, {t2: {7: 12, 5: 10}, t1: {3: 9}}, {t1: {1: 10}})
    record = to_record(member)
    assert record == ConsumerGroupCurrentMemberAssignmentValue(
        12, 10, 1, (CurrentTopicPartitions(t1, (3,), (9,)), CurrentTopicPartitions(t2, (5, 7), (10, 12))),
        (CurrentTopicPartitions(t1, (1,), (10,)),))
    decoded = decode_value(ConsumerGroupCurrentMemberAssignmentKey, encode_value(record))
    assert isinstance(decoded, ConsumerGroupCurrentMemberAssignmentValue)
    assert from_record(decoded) == member


def test_record_without_assignment_epochs_gives_the_member_epoch() -> None:
    t1 = uuid.UUID(int=1)
    legacy = ConsumerGroupCurrentMemberAssignmentValue(
        7, 6, 0, (CurrentTopicPartitions(t1, (0, 1), ()),), (CurrentTopicPartitions(t1, (2,), None),))
    assert from_record(legacy) == CurrentAssignment(7, 6, STABLE, {t1: {0: 7, 1: 7}}, {t1: {2: 7}})
    with pytest.raises(ValueError):
        from_record(ConsumerGroupCurrentMemberAssignmentValue(7, 6, 0, (CurrentTopicPartitions(t1, (0, 1), (3,)),), ()))
    with pytest.raises(TypeError):
        to_record(CurrentAssignment(1, 0, STABLE, at(1, t=[0])))


# -- a group converging, generated -------------------------------------------------------------

@dataclass
class Client:
    """What the consumer itself does: it consumes ``owned`` and adopts the latest assignment the
    coordinator sent (``received``) whenever it gets round to it."""
    subscription: frozenset[str]
    epoch: int = 0
    owned: dict[TopicKey, frozenset[int]] = field(default_factory=dict)
    received: dict[TopicKey, frozenset[int]] = field(default_factory=dict)


class SimulatedGroup:
    def __init__(self, topics: Mapping[str, int]) -> None:
        self.topics = {topic: TopicMetadata(count) for topic, count in topics.items()}
        self.members: dict[str, CurrentAssignment] = {}
        self.clients: dict[str, Client] = {}
        self.owners = PartitionOwners()
        self.group_epoch = 0
        self.target_epoch = 0
        self.target: GroupAssignment = {}
        self.holder_at_epoch: dict[tuple[TopicKey, int, int], str] = {}
        self.next_id = 0

    def _group_changed(self) -> None:
        self.group_epoch += 1

    def _assign(self) -> None:
        # As Kafka: a heartbeat computes the target of the new group epoch, starting from the
        # current target.
        if self.group_epoch == self.target_epoch:
            return
        spec = GroupSpec({member_id: MemberSubscription(client.subscription, self.target.get(member_id, {}))
                          for member_id, client in self.clients.items()})
        self.target = uniform(spec, self.topics)
        self.target_epoch = self.group_epoch

    def join(self, subscription: frozenset[str]) -> None:
        member_id = f"m{self.next_id:02d}"
        self.next_id += 1
        self.members[member_id] = CurrentAssignment()
        self.owners.update(member_id, None, self.members[member_id])
        self.clients[member_id] = Client(subscription)
        self._group_changed()

    def leave(self, member_id: str) -> None:
        # The consumer gives up its partitions, then leaves: they are free at once.
        self.owners.update(member_id, self.members.pop(member_id), None)
        del self.clients[member_id]
        self._group_changed()

    def resubscribe(self, member_id: str, subscription: frozenset[str]) -> None:
        self.clients[member_id].subscription = subscription
        self._group_changed()

    def adopt(self, member_id: str) -> None:
        client = self.clients[member_id]
        client.owned = dict(client.received)

    def heartbeat(self, member_id: str, send_owned: bool = True, assign: bool = True) -> None:
        """``assign=False``: the coordinator puts off computing a new target assignment."""
        if assign:
            self._assign()
        client, member = self.clients[member_id], self.members[member_id]
        owned: dict[TopicKey, frozenset[int]] | None = dict(client.owned) if send_owned else None
        validate_member_epoch(member, client.epoch, owned)  # a consumer that follows the protocol is never fenced
        # As Kafka: topics the member no longer subscribes to go at once, target or not.
        inconsistent = any(topic not in client.subscription for topic in member.assigned)
        after = reconcile(member, self.target_epoch, self.target.get(member_id, {}), owned, self.owners.is_held,
                          subscribed_topics=client.subscription, enforce_subscription_consistency=inconsistent)
        assert after.member_epoch >= member.member_epoch, "a member epoch went backwards"
        assert after.member_epoch <= self.target_epoch, "a member epoch went past the target"
        self.owners.update(member_id, member, after)  # raises if a partition would have two holders
        self.members[member_id] = after
        for topic, partition in after.held():
            first = self.holder_at_epoch.setdefault((topic, partition, after.member_epoch), member_id)
            assert first == member_id, f"{topic}-{partition} held by {first} and {member_id} at one epoch"
        client.epoch = after.member_epoch
        client.received = {topic: ps for topic, ps in after.assigned_partitions().items() if ps}

    def check(self) -> None:
        consumed: dict[tuple[TopicKey, int], str] = {}
        held: dict[tuple[TopicKey, int], str] = {}
        for member_id, member in self.members.items():
            mine = set(member.held())
            for key in mine:
                assert held.setdefault(key, member_id) == member_id, f"{key} held by two members"
            for topic, ps in self.clients[member_id].owned.items():
                for partition in ps:
                    assert consumed.setdefault((topic, partition), member_id) == member_id, \
                        f"{topic}-{partition} consumed by two consumers"
                    assert (topic, partition) in mine, f"{member_id} consumes {topic}-{partition} it does not hold"
        assert {key: holder for key, (holder, _) in self.owners.holdings().items()} == held

    def fair_round(self) -> None:
        for member_id in sorted(self.members):
            self.adopt(member_id)
            self.heartbeat(member_id)
            self.check()

    def assert_converged(self) -> None:
        for member_id in self.members:  # the consumers take in the last assignment they were sent
            self.adopt(member_id)
        self.check()
        assert group_state(self.members.values(), self.group_epoch, self.target_epoch) is ConsumerGroupState.STABLE
        for member_id, member in self.members.items():
            assert member.is_reconciled_to(self.target_epoch)
            assert not member.pending_revocation
            target = {topic: ps for topic, ps in self.target.get(member_id, {}).items() if ps}
            assert member.assigned_partitions() == target
            assert self.clients[member_id].owned == target
        every = {(topic, p) for topic, meta in self.topics.items() for p in range(meta.partitions)
                 if any(topic in client.subscription for client in self.clients.values())}
        assert set(self.owners.holdings()) == every


TOPICS = ("a", "b", "c")
# Rounds in which every member adopts what it was sent, then heartbeats: one to learn what
# to revoke, one to show it revoked, one to take what the others released.
ROUNDS_TO_CONVERGE = 3

subscriptions = st.sets(st.sampled_from(TOPICS), min_size=1).map(frozenset)
events = st.lists(st.tuples(st.sampled_from(["heartbeat", "heartbeat-without-owned",
                                             "heartbeat-assignment-put-off", "adopt", "join", "leave", "resubscribe"]),
                            st.integers(0, 7), subscriptions), max_size=60)


@settings(max_examples=150, deadline=None)
@given(partition_counts=st.tuples(*[st.integers(1, 6)] * len(TOPICS)),
       initial=st.lists(subscriptions, min_size=1, max_size=4),
       change=st.tuples(st.lists(subscriptions, max_size=2), st.integers(0, 3)),
       chaos=events)
def test_members_heartbeating_in_any_order_converge_without_sharing_a_partition(
        partition_counts: tuple[int, ...], initial: list[frozenset[str]],
        change: tuple[list[frozenset[str]], int], chaos: list[tuple[str, int, frozenset[str]]]) -> None:
    group = SimulatedGroup(dict(zip(TOPICS, partition_counts)))
    for subscription in initial:
        group.join(subscription)
    for _ in range(ROUNDS_TO_CONVERGE):
        group.fair_round()
    group.assert_converged()

    # A new target assignment: members join, one leaves.
    joiners, leaver = change
    for subscription in joiners:
        group.join(subscription)
    if len(group.members) > 1 and leaver < len(group.members):
        group.leave(sorted(group.members)[leaver])
    group.check()

    # Heartbeats and adoptions in any order, some heartbeats without owned partitions, and more
    # members joining, leaving and changing their subscriptions before the group has settled.
    for kind, pick, subscription in chaos:
        member_ids = sorted(group.members)
        member_id = member_ids[pick % len(member_ids)]
        if kind == "heartbeat":
            group.heartbeat(member_id)
        elif kind == "heartbeat-without-owned":
            group.heartbeat(member_id, send_owned=False)
        elif kind == "heartbeat-assignment-put-off":
            group.heartbeat(member_id, assign=False)
        elif kind == "adopt":
            group.adopt(member_id)
        elif kind == "join" and len(member_ids) < 6:
            group.join(subscription)
        elif kind == "leave" and len(member_ids) > 1:
            group.leave(member_id)
        elif kind == "resubscribe":
            group.resubscribe(member_id, subscription)
        group.check()

    for _ in range(ROUNDS_TO_CONVERGE):
        group.fair_round()
    group.assert_converged()
