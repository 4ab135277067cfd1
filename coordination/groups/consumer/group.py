"""The state of one ``consumer`` group (KIP-848) and how its records change it.

A consumer group is what its records in __consumer_offsets say, and nothing else: the
heartbeat logic (heartbeat.py) decides which records a request produces, they are
appended, and only then ``apply`` folds them in here, the same function that replays them
when a coordinator loads the partition. So a coordinator elected later rebuilds each
group exactly, with its epochs, target assignment and every member's place in its
reconciliation, and members carry on without a rebalance.

What is not persisted is recomputed: the partition owners (from the members' current
assignments), the static members (from the members' instance ids), and the deadlines (a
loaded member gets a fresh session, as in Kafka).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Protocol

from coordination.groups.consumer import records as rec
from coordination.groups.consumer.assignment_spec import TopicKey
from coordination.groups.consumer.reconciliation import (
    ConsumerGroupState,
    CurrentAssignment,
    PartitionOwners,
    from_record,
    group_state,
    to_record,
)

# The member epoch a static member sends when it leaves for a while (it keeps its place
# for a session) and the one any member sends to leave for good.
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2
LEAVE_GROUP_MEMBER_EPOCH = -1

Target = Mapping[TopicKey, frozenset[int]]  # one member's target assignment: topic id -> partitions


class TopicCatalog(Protocol):
    """The topics as the coordinator process knows them (its topic registry)."""

    def version(self) -> int:
        """Changes whenever a topic is created, deleted or grows."""
        ...

    def by_name(self, name: str) -> tuple[uuid.UUID, int] | None:
        """(topic id, partition count), None when there is no such topic."""
        ...

    def name_of(self, topic_id: uuid.UUID) -> str | None: ...

    def names(self) -> Iterable[str]: ...


@dataclass(frozen=True)
class ConsumerMember:
    """One member: what its ConsumerGroupMemberMetadata record and its current assignment
    record hold."""

    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    assignment: CurrentAssignment = field(default_factory=CurrentAssignment)
    # A member that speaks the classic protocol (JoinGroup, SyncGroup) in a consumer group: its
    # session timeout and the protocols it offered, as its JoinGroup sent them.
    classic: rec.ClassicMemberMetadata | None = None

    @property
    def member_epoch(self) -> int:
        return self.assignment.member_epoch

    @property
    def uses_classic_protocol(self) -> bool:
        return self.classic is not None

    def metadata_value(self) -> rec.ConsumerGroupMemberMetadataValue:
        return rec.ConsumerGroupMemberMetadataValue(
            self.instance_id, self.rack_id, self.client_id, self.client_host, self.subscribed_topic_names,
            self.subscribed_topic_regex, self.rebalance_timeout_ms, self.server_assignor, self.classic)

    def with_metadata(self, value: rec.ConsumerGroupMemberMetadataValue) -> ConsumerMember:
        return replace(self, instance_id=value.instance_id, rack_id=value.rack_id, client_id=value.client_id,
                       client_host=value.client_host, subscribed_topic_names=tuple(value.subscribed_topic_names),
                       subscribed_topic_regex=value.subscribed_topic_regex,
                       rebalance_timeout_ms=value.rebalance_timeout_ms, server_assignor=value.server_assignor,
                       classic=value.classic_member_metadata)


@dataclass
class ConsumerGroup:
    """The consumer-protocol side of a group (coordination/groups/group.py holds its offsets)."""

    group_id: str
    group_epoch: int = 0
    metadata_hash: int = 0  # of the subscribed topics when the epoch was last bumped (heartbeat.py)
    assignment_epoch: int = 0  # the epoch of the target assignment
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    target: dict[str, Target] = field(default_factory=dict)
    # regular expression -> the topic names it resolved to (ConsumerGroupRegularExpression records)
    resolved: dict[str, frozenset[str]] = field(default_factory=dict)
    owners: PartitionOwners = field(default_factory=PartitionOwners)
    # Not persisted: the catalog version the subscribed topics were last resolved at, and
    # the deadlines (monotonic seconds) of the members' sessions and revocations.
    catalog_version: int = -1
    session_deadlines: dict[str, float] = field(default_factory=dict)
    revocation_deadlines: dict[str, tuple[int, float]] = field(default_factory=dict)  # member -> (epoch, deadline)
    deleted: bool = False  # its group record was tombstoned

    # ------------------------------------------------------------------ views
    @property
    def state(self) -> ConsumerGroupState:
        if self.deleted:
            return ConsumerGroupState.DEAD
        return group_state((m.assignment for m in self.members.values()), self.group_epoch, self.assignment_epoch)

    def static_member(self, instance_id: str) -> ConsumerMember | None:
        for member in self.members.values():
            if member.instance_id == instance_id:
                return member
        return None

    def target_of(self, member_id: str) -> Target:
        return self.target.get(member_id, {})

    def subscribed_topic_names(self) -> set[str]:
        """Every topic name any member subscribes to, by name or through a regular expression."""
        names: set[str] = set()
        for member in self.members.values():
            names |= topics_of(member, self.resolved)
        return names

    def assignor_votes(self) -> list[str | None]:
        return [m.server_assignor for m in self.members.values()]

    # ------------------------------------------------------------------ records
    def apply(self, key: rec.ConsumerGroupKey, value: rec.ConsumerGroupValue | None) -> None:
        """Fold one record in (a tombstone when ``value`` is None), in log order."""
        if isinstance(key, rec.ConsumerGroupMetadataKey):
            if value is None:
                self.deleted = True
            else:
                assert isinstance(value, rec.ConsumerGroupMetadataValue)
                self.group_epoch = value.epoch
                self.metadata_hash = value.metadata_hash
                self.deleted = False
        elif isinstance(key, rec.ConsumerGroupTargetAssignmentMetadataKey):
            if value is not None:
                assert isinstance(value, rec.ConsumerGroupTargetAssignmentMetadataValue)
                self.assignment_epoch = value.assignment_epoch
        elif isinstance(key, rec.ConsumerGroupMemberMetadataKey):
            if value is None:
                member = self.members.pop(key.member_id, None)
                if member is not None:
                    self.owners.update(key.member_id, member.assignment, None)
                self.session_deadlines.pop(key.member_id, None)
                self.revocation_deadlines.pop(key.member_id, None)
            else:
                assert isinstance(value, rec.ConsumerGroupMemberMetadataValue)
                current = self.members.get(key.member_id) or ConsumerMember(key.member_id)
                self.members[key.member_id] = current.with_metadata(value)
        elif isinstance(key, rec.ConsumerGroupTargetAssignmentMemberKey):
            if value is None:
                self.target.pop(key.member_id, None)
            else:
                assert isinstance(value, rec.ConsumerGroupTargetAssignmentMemberValue)
                self.target[key.member_id] = {t.topic_id: frozenset(t.partitions) for t in value.topic_partitions
                                              if t.partitions}
        elif isinstance(key, rec.ConsumerGroupCurrentMemberAssignmentKey):
            member = self.members.get(key.member_id) or ConsumerMember(key.member_id)
            new = CurrentAssignment() if value is None else from_record(value)  # type: ignore[arg-type]
            self.owners.update(key.member_id, member.assignment if key.member_id in self.members else None, new)
            self.members[key.member_id] = replace(member, assignment=new)
        elif isinstance(key, rec.ConsumerGroupRegularExpressionKey):
            if value is None:
                self.resolved.pop(key.regular_expression, None)
            else:
                assert isinstance(value, rec.ConsumerGroupRegularExpressionValue)
                self.resolved[key.regular_expression] = frozenset(value.topics)
        # ConsumerGroupPartitionMetadata (type 4) is recomputed from the topics: nothing to keep.


def topics_of(member: ConsumerMember, resolved: Mapping[str, frozenset[str]]) -> set[str]:
    """The topic names a member subscribes to: its names, and what its regular expression resolved to."""
    names = set(member.subscribed_topic_names)
    if member.subscribed_topic_regex is not None:
        names.update(resolved.get(member.subscribed_topic_regex, ()))
    return names


# --- the records a change writes ------------------------------------------------------------

Record = tuple[rec.ConsumerGroupKey, rec.ConsumerGroupValue | None]


def epoch_record(group_id: str, epoch: int, metadata_hash: int) -> Record:
    return rec.ConsumerGroupMetadataKey(group_id), rec.ConsumerGroupMetadataValue(epoch, metadata_hash)


def member_record(group_id: str, member: ConsumerMember) -> Record:
    return rec.ConsumerGroupMemberMetadataKey(group_id, member.member_id), member.metadata_value()


def current_assignment_record(group_id: str, member_id: str, assignment: CurrentAssignment) -> Record:
    return rec.ConsumerGroupCurrentMemberAssignmentKey(group_id, member_id), to_record(assignment)


def target_member_record(group_id: str, member_id: str, target: Target) -> Record:
    topics = tuple(rec.TargetTopicPartitions(_topic_id(topic), tuple(sorted(parts)))
                   for topic, parts in sorted(target.items(), key=lambda item: str(item[0])) if parts)
    return rec.ConsumerGroupTargetAssignmentMemberKey(group_id, member_id), rec.ConsumerGroupTargetAssignmentMemberValue(topics)


def _topic_id(topic: TopicKey) -> uuid.UUID:
    if not isinstance(topic, uuid.UUID):
        raise TypeError(f"the records key topics by id, not {topic!r}")
    return topic


def target_epoch_record(group_id: str, epoch: int, timestamp_ms: int) -> Record:
    return (rec.ConsumerGroupTargetAssignmentMetadataKey(group_id),
            rec.ConsumerGroupTargetAssignmentMetadataValue(epoch, timestamp_ms))


def regex_record(group_id: str, regex: str, topics: Iterable[str], version: int, timestamp_ms: int) -> Record:
    return (rec.ConsumerGroupRegularExpressionKey(group_id, regex),
            rec.ConsumerGroupRegularExpressionValue(tuple(sorted(topics)), version, timestamp_ms))


def regex_tombstone(group_id: str, regex: str) -> Record:
    return rec.ConsumerGroupRegularExpressionKey(group_id, regex), None


def removal_records(group_id: str, member_id: str) -> list[Record]:
    """A member leaves: Kafka's removeMember, current assignment first, then target, then metadata."""
    return [(rec.ConsumerGroupCurrentMemberAssignmentKey(group_id, member_id), None),
            (rec.ConsumerGroupTargetAssignmentMemberKey(group_id, member_id), None),
            (rec.ConsumerGroupMemberMetadataKey(group_id, member_id), None)]


def deletion_records(group: ConsumerGroup) -> list[Record]:
    """The whole group goes (DeleteGroups of an empty group, or a classic group taking its place)."""
    out: list[Record] = []
    for member_id in group.members:
        out.extend(removal_records(group.group_id, member_id))
    out.extend(regex_tombstone(group.group_id, regex) for regex in group.resolved)
    out.append((rec.ConsumerGroupTargetAssignmentMetadataKey(group.group_id), None))
    out.append((rec.ConsumerGroupPartitionMetadataKey(group.group_id), None))
    out.append((rec.ConsumerGroupMetadataKey(group.group_id), None))
    return out


def encode(records: Iterable[Record]) -> list[tuple[bytes, bytes | None]]:
    return [(rec.encode_key(key), None if value is None else rec.encode_value(value)) for key, value in records]
