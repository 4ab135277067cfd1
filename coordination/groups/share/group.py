"""The state of one ``share`` group (KIP-932) and how its records change it.

As for consumer groups (groups/consumer/group.py), a share group is what its records in
__consumer_offsets say: heartbeat.py decides the records of a request, they are appended,
and only then ``ShareGroup.apply`` folds them in, the same function a coordinator that
loads the partition replays them with. The record types are Kafka's (share/records.py).

A share group has no revocation phase: a partition may be shared by several members, so a
member is given its target assignment at once and its state is always STABLE. Besides the
members and the target assignment, the group keeps which of its topic partitions have
share-partition state in the share coordinator (ShareGroupStatePartitionMetadata):
partitions being initialized, initialized ones (only those are assigned), and topics whose
state is being deleted.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from coordination.share import records as rec

LEAVE_GROUP_MEMBER_EPOCH = -1
MEMBER_STATE_STABLE = 0  # Kafka's MemberState.STABLE, the only state of a share group member
PROTOCOL_TYPE = "share"
STATE_EMPTY, STATE_STABLE, STATE_DEAD = "Empty", "Stable", "Dead"

Assignment = Mapping[uuid.UUID, frozenset[int]]  # topic id -> partitions
Record = tuple[rec.ShareGroupKey, rec.ShareGroupValue | None]
SHARE_GROUP_KEYS = (rec.ShareGroupMemberMetadataKey, rec.ShareGroupMetadataKey, rec.ShareGroupTargetAssignmentMetadataKey,
                    rec.ShareGroupTargetAssignmentMemberKey, rec.ShareGroupCurrentMemberAssignmentKey,
                    rec.ShareGroupStatePartitionMetadataKey)


@dataclass(frozen=True)
class ShareMember:
    """One member: its ShareGroupMemberMetadata and ShareGroupCurrentMemberAssignment records."""

    member_id: str
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    member_epoch: int = 0
    previous_member_epoch: int = 0
    assigned: Assignment = field(default_factory=dict)

    def metadata_value(self) -> rec.ShareGroupMemberMetadataValue:
        return rec.ShareGroupMemberMetadataValue(self.rack_id, self.client_id, self.client_host,
                                                 self.subscribed_topic_names)

    def same_metadata(self, other: ShareMember) -> bool:
        return self.metadata_value() == other.metadata_value()


@dataclass(frozen=True)
class InitTopic:
    """A topic's partitions in the state partition metadata, and when they were put there
    (replay time, as Kafka keeps it: it decides when an initialization is retried)."""

    name: str
    partitions: frozenset[int]
    timestamp_ms: int = -1


@dataclass
class ShareGroup:
    group_id: str
    group_epoch: int = 0
    metadata_hash: int = 0
    assignment_epoch: int = 0
    members: dict[str, ShareMember] = field(default_factory=dict)
    target: dict[str, Assignment] = field(default_factory=dict)
    # ShareGroupStatePartitionMetadata: topic id -> its partitions being initialized / initialized,
    # and the topics whose share state is being deleted (topic id -> name).
    initializing: dict[uuid.UUID, InitTopic] = field(default_factory=dict)
    initialized: dict[uuid.UUID, InitTopic] = field(default_factory=dict)
    deleting: dict[uuid.UUID, str] = field(default_factory=dict)
    has_state_metadata: bool = False
    # Not persisted: each member's session deadline (monotonic seconds).
    session_deadlines: dict[str, float] = field(default_factory=dict)
    deleted: bool = False  # its group epoch record was tombstoned

    @property
    def state(self) -> str:
        if self.deleted:
            return STATE_DEAD
        return STATE_STABLE if self.members else STATE_EMPTY

    def target_of(self, member_id: str) -> Assignment:
        return self.target.get(member_id, {})

    def subscribed_topic_names(self) -> set[str]:
        names: set[str] = set()
        for member in self.members.values():
            names.update(member.subscribed_topic_names)
        return names

    def apply(self, key: rec.ShareGroupKey, value: rec.ShareGroupValue | None, now_ms: int = -1) -> None:
        """Fold one record in (a tombstone when ``value`` is None), in log order."""
        if isinstance(key, rec.ShareGroupMetadataKey):
            if value is None:
                self.deleted = True
            else:
                assert isinstance(value, rec.ShareGroupMetadataValue)
                self.group_epoch, self.metadata_hash, self.deleted = value.epoch, value.metadata_hash, False
        elif isinstance(key, rec.ShareGroupTargetAssignmentMetadataKey):
            if value is not None:
                assert isinstance(value, rec.ShareGroupTargetAssignmentMetadataValue)
                self.assignment_epoch = value.assignment_epoch
        elif isinstance(key, rec.ShareGroupMemberMetadataKey):
            if value is None:
                self.members.pop(key.member_id, None)
                self.session_deadlines.pop(key.member_id, None)
            else:
                assert isinstance(value, rec.ShareGroupMemberMetadataValue)
                current = self.members.get(key.member_id) or ShareMember(key.member_id)
                self.members[key.member_id] = replace(
                    current, rack_id=value.rack_id, client_id=value.client_id, client_host=value.client_host,
                    subscribed_topic_names=tuple(value.subscribed_topic_names))
        elif isinstance(key, rec.ShareGroupTargetAssignmentMemberKey):
            if value is None:
                self.target.pop(key.member_id, None)
            else:
                assert isinstance(value, rec.ShareGroupTargetAssignmentMemberValue)
                self.target[key.member_id] = _assignment(value.topic_partitions)
        elif isinstance(key, rec.ShareGroupCurrentMemberAssignmentKey):
            if value is None:
                if key.member_id in self.members:
                    self.members[key.member_id] = replace(self.members[key.member_id], member_epoch=0,
                                                          previous_member_epoch=0, assigned={})
            else:
                assert isinstance(value, rec.ShareGroupCurrentMemberAssignmentValue)
                member = self.members.get(key.member_id) or ShareMember(key.member_id)
                self.members[key.member_id] = replace(member, member_epoch=value.member_epoch,
                                                      previous_member_epoch=value.previous_member_epoch,
                                                      assigned=_assignment(value.assigned_partitions))
        elif isinstance(key, rec.ShareGroupStatePartitionMetadataKey):
            if value is None:
                self.initializing, self.initialized, self.deleting = {}, {}, {}
                self.has_state_metadata = False
            else:
                assert isinstance(value, rec.ShareGroupStatePartitionMetadataValue)
                self.initializing = {t.topic_id: InitTopic(t.topic_name, frozenset(t.partitions), now_ms)
                                     for t in value.initializing_topics}
                self.initialized = {t.topic_id: InitTopic(t.topic_name, frozenset(t.partitions), now_ms)
                                    for t in value.initialized_topics}
                self.deleting = {t.topic_id: t.topic_name for t in value.deleting_topics}
                self.has_state_metadata = True


def _assignment(topics: Iterable[rec.TopicPartitions]) -> dict[uuid.UUID, frozenset[int]]:
    return {t.topic_id: frozenset(t.partitions) for t in topics if t.partitions}


def _topic_partitions(assignment: Assignment) -> tuple[rec.TopicPartitions, ...]:
    return tuple(rec.TopicPartitions(topic, tuple(sorted(parts)))
                 for topic, parts in sorted(assignment.items(), key=lambda item: str(item[0])) if parts)


# --- the records a change writes ------------------------------------------------------------


def epoch_record(group_id: str, epoch: int, metadata_hash: int) -> Record:
    return rec.ShareGroupMetadataKey(group_id), rec.ShareGroupMetadataValue(epoch, metadata_hash)


def member_record(group_id: str, member: ShareMember) -> Record:
    return rec.ShareGroupMemberMetadataKey(group_id, member.member_id), member.metadata_value()


def target_member_record(group_id: str, member_id: str, target: Assignment) -> Record:
    return (rec.ShareGroupTargetAssignmentMemberKey(group_id, member_id),
            rec.ShareGroupTargetAssignmentMemberValue(_topic_partitions(target)))


def target_epoch_record(group_id: str, epoch: int, timestamp_ms: int) -> Record:
    return (rec.ShareGroupTargetAssignmentMetadataKey(group_id),
            rec.ShareGroupTargetAssignmentMetadataValue(epoch, timestamp_ms))


def current_assignment_record(group_id: str, member: ShareMember) -> Record:
    return (rec.ShareGroupCurrentMemberAssignmentKey(group_id, member.member_id),
            rec.ShareGroupCurrentMemberAssignmentValue(member.member_epoch, member.previous_member_epoch,
                                                       MEMBER_STATE_STABLE, _topic_partitions(member.assigned)))


def state_metadata_record(group_id: str, initializing: Mapping[uuid.UUID, InitTopic],
                          initialized: Mapping[uuid.UUID, InitTopic], deleting: Mapping[uuid.UUID, str]) -> Record:
    def infos(topics: Mapping[uuid.UUID, InitTopic]) -> tuple[rec.TopicPartitionsInfo, ...]:
        return tuple(rec.TopicPartitionsInfo(topic_id, t.name, tuple(sorted(t.partitions)))
                     for topic_id, t in sorted(topics.items(), key=lambda item: str(item[0])))

    return (rec.ShareGroupStatePartitionMetadataKey(group_id), rec.ShareGroupStatePartitionMetadataValue(
        infos(initializing), infos(initialized),
        tuple(rec.TopicInfo(topic_id, name) for topic_id, name in sorted(deleting.items(), key=lambda i: str(i[0])))))


def removal_records(group_id: str, member_id: str) -> list[Record]:
    """A member leaves or is fenced: Kafka's order, current assignment, target, metadata."""
    return [(rec.ShareGroupCurrentMemberAssignmentKey(group_id, member_id), None),
            (rec.ShareGroupTargetAssignmentMemberKey(group_id, member_id), None),
            (rec.ShareGroupMemberMetadataKey(group_id, member_id), None)]


def deletion_records(group: ShareGroup) -> list[Record]:
    """The whole group goes (DeleteGroups of an empty group), in Kafka's order."""
    gid = group.group_id
    out: list[Record] = [(rec.ShareGroupCurrentMemberAssignmentKey(gid, m), None) for m in group.members]
    out += [(rec.ShareGroupTargetAssignmentMemberKey(gid, m), None) for m in group.members]
    out.append((rec.ShareGroupTargetAssignmentMetadataKey(gid), None))
    out += [(rec.ShareGroupMemberMetadataKey(gid, m), None) for m in group.members]
    out.append((rec.ShareGroupStatePartitionMetadataKey(gid), None))
    out.append((rec.ShareGroupMetadataKey(gid), None))
    return out


def encode(records: Iterable[Record]) -> list[tuple[bytes, bytes | None]]:
    return [(rec.encode_key(key), None if value is None else rec.encode_value(value)) for key, value in records]
