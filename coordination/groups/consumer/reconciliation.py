"""How a member of a ``consumer`` group (KIP-848) moves from what it holds to its target
assignment: Kafka's CurrentAssignmentBuilder and member states, as pure functions.

The coordinator computes a target assignment per group epoch; each member then converges to
its share one heartbeat at a time, and ``reconcile`` is that step. Its rules, in order:

* revoke first: partitions the member holds that are no longer in its target stay with it,
  as partitions pending revocation, and the member waits in UNREVOKED_PARTITIONS at its
  current epoch until a heartbeat's owned partitions no longer list any of them (a heartbeat
  that does not send them counts as still owning them);
* then the member moves to the target epoch and gets the partitions of its target that no
  other member still holds (assigned or pending revocation); while some are held elsewhere
  it waits in UNRELEASED_PARTITIONS, and is STABLE once it has all of them;
* a STABLE member at the target epoch is left as it is.

So a partition is never held by two members at once, and, because an epoch only ever moves
to the target epoch (never past it, never one step on its own), never by two members at one
epoch either. Each held partition carries the epoch it was assigned at (the record's
``assignmentEpochs``, which offset commits are checked against): kept partitions keep theirs,
newly assigned ones take the target epoch.

Around that step: ``validate_member_epoch`` (which heartbeat epochs a member may send),
``PartitionOwners`` (the group's index of who holds which partition, which answers the
"held elsewhere" question), ``group_state`` and the record conversions.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from coordination.groups.consumer.assignment_spec import TopicKey, topic_order
from coordination.groups.consumer.records import ConsumerGroupCurrentMemberAssignmentValue, CurrentTopicPartitions

# topic -> partition -> the epoch the partition was assigned to the member at
PartitionEpochs = Mapping[TopicKey, Mapping[int, int]]
# what a heartbeat reports (its TopicPartitions) or what a target assignment gives a member
TopicPartitions = Mapping[TopicKey, Collection[int]]
# True while any member of the group holds the partition, assigned or pending revocation
IsHeld = Callable[[TopicKey, int], bool]

NO_EPOCH = -1  # Kafka's "no epoch": a free partition, or a member's previous epoch before its first


class MemberState(enum.IntEnum):
    """Kafka's MemberState; the values are the ``state`` byte of the current assignment record."""

    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2
    # A state written by a newer coordinator: the member is fenced and reconciled from scratch.
    UNKNOWN = 127

    @classmethod
    def from_value(cls, value: int) -> MemberState:
        try:
            return cls(value)
        except ValueError:
            return cls.UNKNOWN


class ConsumerGroupState(enum.Enum):
    """Kafka's ConsumerGroup.ConsumerGroupState, named as DescribeGroups and ListGroups report it."""

    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


class FencedMemberEpoch(Exception):
    """The member must give up all its partitions and rejoin with epoch 0 (FENCED_MEMBER_EPOCH)."""

    code = ErrorCode.fenced_member_epoch


class PartitionOwnershipConflict(RuntimeError):
    """A bug in the caller: a partition given to a second member, or released by one that did
    not hold it. Kafka fails the same way (IllegalStateException) rather than carry on."""


@dataclass(frozen=True)
class CurrentAssignment:
    """What Kafka's ConsumerGroupMember holds for reconciliation (the current member assignment
    record): never mutated, every step returns a new one. A new member is the default: epoch 0,
    no previous epoch, STABLE, nothing held."""

    member_epoch: int = 0
    previous_member_epoch: int = NO_EPOCH
    state: MemberState = MemberState.STABLE
    assigned: PartitionEpochs = field(default_factory=dict)
    pending_revocation: PartitionEpochs = field(default_factory=dict)

    def is_reconciled_to(self, target_epoch: int) -> bool:
        return self.state is MemberState.STABLE and self.member_epoch == target_epoch

    def assigned_partitions(self) -> dict[TopicKey, frozenset[int]]:
        return {topic: frozenset(parts) for topic, parts in self.assigned.items()}

    def held(self) -> Iterator[tuple[TopicKey, int]]:
        """Every partition the member holds: assigned, then pending revocation."""
        for holding in (self.assigned, self.pending_revocation):
            for topic, parts in holding.items():
                for partition in parts:
                    yield topic, partition


def reconcile(member: CurrentAssignment, target_epoch: int, target: TopicPartitions,
              owned: TopicPartitions | None, is_held: IsHeld, *,
              subscribed_topics: Collection[TopicKey] | None = None,
              enforce_subscription_consistency: bool = False) -> CurrentAssignment:
    """The member's next state towards ``target`` (its share of the target assignment of
    ``target_epoch``), given ``owned``, the partitions its heartbeat reports (None: the
    heartbeat did not send them). Returns ``member`` itself when nothing changes.

    ``subscribed_topics``: the topics the member subscribes to, resolved (names and regular
    expression); the target of any other topic counts as empty. None: no such filter.
    ``enforce_subscription_consistency``: also drop unsubscribed topics from a member that is
    not otherwise moving (Kafka sets it when the member's subscription changed).

    Raises FencedMemberEpoch for a member in an UNKNOWN state that still reports partitions.
    """
    step = _Step(member, target_epoch, target, owned, is_held, subscribed_topics)
    if member.state is MemberState.STABLE:
        if member.member_epoch != target_epoch:
            return step.next_assignment(member.member_epoch)
        if enforce_subscription_consistency:
            return step.drop_unsubscribed()
        return member
    if member.state is MemberState.UNREVOKED_PARTITIONS:
        if step.owns_any(member.pending_revocation):
            return step.drop_unsubscribed() if enforce_subscription_consistency else member
        # Released: the epoch stays where it is unless the member now reaches the target.
        return step.next_assignment(member.member_epoch)
    if member.state is MemberState.UNRELEASED_PARTITIONS:
        return step.next_assignment(member.member_epoch)
    # UNKNOWN: only a member that reports owning nothing can start again from scratch.
    if owned is None or len(owned) > 0:
        raise FencedMemberEpoch("The consumer group member is in an unknown state. "
                                "The member must abandon all its partitions and rejoin.")
    return step.next_assignment(target_epoch)


class _Step:
    def __init__(self, member: CurrentAssignment, target_epoch: int, target: TopicPartitions,
                 owned: TopicPartitions | None, is_held: IsHeld, subscribed: Collection[TopicKey] | None) -> None:
        self.member = member
        self.target_epoch = target_epoch
        self.target = target
        self.owned = owned
        self.is_held = is_held
        self.subscribed = subscribed

    def _subscribes(self, topic: TopicKey) -> bool:
        return self.subscribed is None or topic in self.subscribed

    def owns_any(self, partitions: PartitionEpochs) -> bool:
        """Whether the heartbeat still lists any of ``partitions``; not knowing counts as yes."""
        if self.owned is None:
            return True
        return any(partition in partitions.get(topic, {}) for topic, parts in self.owned.items() for partition in parts)

    def _moved(self, state: MemberState, epoch: int, assigned: PartitionEpochs,
               pending: PartitionEpochs) -> CurrentAssignment:
        # Kafka's updateMemberEpoch: the previous epoch is the one the member had, even when
        # the epoch does not change.
        return CurrentAssignment(epoch, self.member.member_epoch, state, assigned, pending)

    def next_assignment(self, member_epoch: int) -> CurrentAssignment:
        member = self.member
        assigned: dict[TopicKey, dict[int, int]] = {}
        revoking: dict[TopicKey, dict[int, int]] = {}
        to_assign: dict[TopicKey, list[int]] = {}
        unreleased = False
        for topic in sorted(set(self.target) | set(member.assigned), key=topic_order):
            target = frozenset(self.target.get(topic, ())) if self._subscribes(topic) else frozenset()
            current = member.assigned.get(topic, {})
            kept = {p: epoch for p, epoch in current.items() if p in target}
            gone = {p: epoch for p, epoch in current.items() if p not in target}
            # A partition this member is itself revoking is not held "elsewhere": only one member
            # holds a partition at a time, so it can come straight back.
            own_pending = member.pending_revocation.get(topic, {})
            wanted = sorted(target - kept.keys())
            free = [p for p in wanted if p in own_pending or not self.is_held(topic, p)]
            unreleased = unreleased or len(free) < len(wanted)
            if kept:
                assigned[topic] = kept
            if gone:
                revoking[topic] = gone
            if free:
                to_assign[topic] = free

        if revoking and self.owns_any(revoking):
            return self._moved(MemberState.UNREVOKED_PARTITIONS, member_epoch, assigned, revoking)
        for topic, partitions in to_assign.items():
            assigned.setdefault(topic, {}).update((p, self.target_epoch) for p in partitions)
        state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
        return self._moved(state, self.target_epoch, assigned, {})

    def drop_unsubscribed(self) -> CurrentAssignment:
        """Kafka's updateCurrentAssignment: move the partitions of unsubscribed topics to
        pending revocation without looking at the target (it may not be computed yet)."""
        member = self.member
        if self.subscribed is not None and not self.subscribed and not member.pending_revocation:
            # Kafka counts this as a change even when the member held nothing.
            assigned: PartitionEpochs = {}
            pending: PartitionEpochs = member.assigned
        else:
            dropped = [topic for topic in member.assigned if not self._subscribes(topic)]
            if not dropped:
                return member
            assigned = {topic: parts for topic, parts in member.assigned.items() if topic not in dropped}
            merged = {topic: dict(parts) for topic, parts in member.pending_revocation.items()}
            for topic in dropped:
                merged.setdefault(topic, {}).update(member.assigned[topic])
            pending = merged
        if pending and self.owns_any(pending):
            return self._moved(MemberState.UNREVOKED_PARTITIONS, member.member_epoch, assigned, pending)
        # Already released by the client: the member only shrinks, in the state it was in.
        return CurrentAssignment(member.member_epoch, member.member_epoch, member.state, assigned,
                                 member.pending_revocation)


def validate_member_epoch(member: CurrentAssignment, received_epoch: int, owned: TopicPartitions | None) -> None:
    """Kafka's check of a heartbeat's member epoch: an epoch ahead of the coordinator's is
    fenced; one behind is accepted only when it is the previous epoch and the member owns no
    more than it is assigned (the response that moved it on was lost). Raises FencedMemberEpoch."""
    if received_epoch > member.member_epoch:
        raise FencedMemberEpoch(f"The consumer group member has a greater member epoch ({received_epoch}) than "
                                f"the one known by the group coordinator ({member.member_epoch}). "
                                "The member must abandon all its partitions and rejoin.")
    if received_epoch < member.member_epoch and (received_epoch != member.previous_member_epoch
                                                 or not _is_subset(owned, member.assigned)):
        raise FencedMemberEpoch(f"The consumer group member has a smaller member epoch ({received_epoch}) than "
                                f"the one known by the group coordinator ({member.member_epoch}). "
                                "The member must abandon all its partitions and rejoin.")


def _is_subset(owned: TopicPartitions | None, assigned: PartitionEpochs) -> bool:
    # As Kafka: not reporting counts as no, and so does a topic not assigned at all, even
    # listed with no partitions.
    if owned is None:
        return False
    for topic, parts in owned.items():
        held = assigned.get(topic)
        if held is None or any(partition not in held for partition in parts):
            return False
    return True


def assigned_partitions_changed(before: CurrentAssignment, after: CurrentAssignment) -> bool:
    """Whether a heartbeat response must carry the assignment (besides full requests)."""
    return before.assigned_partitions() != after.assigned_partitions()


def group_state(members: Iterable[CurrentAssignment], group_epoch: int, target_assignment_epoch: int) -> ConsumerGroupState:
    """Kafka's state of a live group: ASSIGNING while the target assignment lags the group
    epoch, RECONCILING while some member has not reached it, else STABLE."""
    members = list(members)
    if not members:
        return ConsumerGroupState.EMPTY
    if group_epoch > target_assignment_epoch:
        return ConsumerGroupState.ASSIGNING
    if all(member.is_reconciled_to(target_assignment_epoch) for member in members):
        return ConsumerGroupState.STABLE
    return ConsumerGroupState.RECONCILING


class PartitionOwners:
    """Which member holds each partition of a group, at which member epoch: Kafka's
    ConsumerGroup.currentPartitionEpoch, fed with every member update and removal.

    ``update`` checks before it changes anything: the old state's partitions must be held by
    that member at its epoch, and the new state's must then be free. A failed check raises
    PartitionOwnershipConflict and leaves the index as it was.
    """

    def __init__(self) -> None:
        self._holders: dict[tuple[TopicKey, int], tuple[str, int]] = {}

    def epoch(self, topic: TopicKey, partition: int) -> int:
        """The holder's member epoch, NO_EPOCH when the partition is free."""
        holder = self._holders.get((topic, partition))
        return NO_EPOCH if holder is None else holder[1]

    def holder(self, topic: TopicKey, partition: int) -> str | None:
        holder = self._holders.get((topic, partition))
        return None if holder is None else holder[0]

    def is_held(self, topic: TopicKey, partition: int) -> bool:
        return (topic, partition) in self._holders

    def holdings(self) -> dict[tuple[TopicKey, int], tuple[str, int]]:
        """A copy of the whole index: (topic, partition) -> (member id, member epoch)."""
        return dict(self._holders)

    def update(self, member_id: str, old: CurrentAssignment | None, new: CurrentAssignment | None) -> None:
        """Replace ``old`` (None: the member is new) by ``new`` (None: the member left)."""
        released = list(old.held()) if old is not None else []
        old_epoch = old.member_epoch if old is not None else NO_EPOCH
        for key in released:
            if self._holders.get(key) != (member_id, old_epoch):
                raise PartitionOwnershipConflict(f"member {member_id} at epoch {old_epoch} does not hold "
                                                 f"{key[0]}-{key[1]} (held: {self._holders.get(key)})")
        released_set = set(released)
        taken = list(new.held()) if new is not None else []
        for key in taken:
            if key in self._holders and key not in released_set:
                raise PartitionOwnershipConflict(
                    f"cannot give {key[0]}-{key[1]} to member {member_id}: held by {self._holders[key]}")
        if len(set(taken)) != len(taken):
            raise PartitionOwnershipConflict(f"member {member_id} holds a partition both assigned and pending revocation")
        for key in released:
            del self._holders[key]
        if new is not None:
            for key in taken:
                self._holders[key] = (member_id, new.member_epoch)


# --- the ConsumerGroupCurrentMemberAssignment record ------------------------------------------


def from_record(value: ConsumerGroupCurrentMemberAssignmentValue) -> CurrentAssignment:
    """The member's state as a record holds it. A record without assignment epochs (written by
    a Kafka that did not have them) gives every partition the member epoch, as Kafka reads it."""
    return CurrentAssignment(value.member_epoch, value.previous_member_epoch, MemberState.from_value(value.state),
                             _epochs_from_record(value.assigned_partitions, value.member_epoch),
                             _epochs_from_record(value.partitions_pending_revocation, value.member_epoch))


def _epochs_from_record(topics: tuple[CurrentTopicPartitions, ...], default_epoch: int) -> dict[TopicKey, dict[int, int]]:
    result: dict[TopicKey, dict[int, int]] = {}
    for topic in topics:
        epochs = topic.assignment_epochs
        if not epochs:
            epochs = (default_epoch,) * len(topic.partitions)
        elif len(epochs) != len(topic.partitions):
            raise ValueError(f"topic {topic.topic_id} has {len(topic.partitions)} partitions "
                             f"but {len(epochs)} assignment epochs")
        result.setdefault(topic.topic_id, {}).update(zip(topic.partitions, epochs))
    return result


def to_record(member: CurrentAssignment) -> ConsumerGroupCurrentMemberAssignmentValue:
    """The record Kafka writes for the member (topics keyed by topic id), with the assignment
    epochs of every topic; topics and partitions in ascending order."""
    return ConsumerGroupCurrentMemberAssignmentValue(
        member.member_epoch, member.previous_member_epoch, int(member.state),
        _epochs_to_record(member.assigned), _epochs_to_record(member.pending_revocation))


def _epochs_to_record(holding: PartitionEpochs) -> tuple[CurrentTopicPartitions, ...]:
    topics = []
    for topic in sorted(holding, key=topic_order):
        if not isinstance(topic, uuid.UUID):
            raise TypeError(f"the record keys topics by id, not {topic!r}")
        partitions = tuple(sorted(holding[topic]))
        topics.append(CurrentTopicPartitions(topic, partitions, tuple(holding[topic][p] for p in partitions)))
    return tuple(topics)
