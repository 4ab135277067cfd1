"""What a server-side assignor reads and writes: Kafka's GroupSpec, MemberSubscription,
SubscribedTopicDescriber and GroupAssignment, as plain data.

Assignors never see a topic a member could not resolve: ``normalize`` drops subscribed topics
that are missing from the metadata (a deleted topic simply stops being assigned) and cleans the
current target assignment (unsubscribed topics, partitions past the partition count, a
partition claimed by two members) before either assignor runs, so both start from one
consistent picture.

Racks (a member's ``rack_id``, a partition's replica racks) are carried because they are part of
Kafka's assignor interface, but neither built-in assignor reads them, as in Kafka.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

# Kafka keys assignments by topic id; callers that resolve by name may key by name instead.
# Both sort by their text, which is all the assignors need for a deterministic order.
TopicKey = uuid.UUID | str

# member id -> topic -> partitions
GroupAssignment = dict[str, dict[TopicKey, frozenset[int]]]


def topic_order(topic: TopicKey) -> str:
    return str(topic)


class SubscriptionType(enum.Enum):
    HOMOGENEOUS = "Homogeneous"
    HETEROGENEOUS = "Heterogeneous"


@dataclass(frozen=True)
class TopicMetadata:
    """One topic as the assignor sees it. ``partition_racks[p]`` holds the racks of partition p's
    replicas (Kafka's racksForPartition); it may be empty when racks are unknown."""
    partitions: int
    partition_racks: tuple[frozenset[str], ...] = ()

    def racks_for_partition(self, partition: int) -> frozenset[str]:
        if 0 <= partition < len(self.partition_racks):
            return self.partition_racks[partition]
        return frozenset()


@dataclass(frozen=True)
class MemberSubscription:
    """One member: what it subscribes to and what it holds now (its current target assignment)."""
    subscribed_topics: frozenset[TopicKey]
    assignment: Mapping[TopicKey, frozenset[int]] = field(default_factory=dict)
    rack_id: str | None = None
    instance_id: str | None = None

    @staticmethod
    def of(topics: Iterable[TopicKey], assignment: Mapping[TopicKey, Iterable[int]] | None = None,
           rack_id: str | None = None, instance_id: str | None = None) -> MemberSubscription:
        owned = {topic: frozenset(parts) for topic, parts in (assignment or {}).items()}
        return MemberSubscription(frozenset(topics), owned, rack_id, instance_id)


@dataclass(frozen=True)
class GroupSpec:
    members: Mapping[str, MemberSubscription]


@dataclass(frozen=True)
class NormalizedGroup:
    """The group after ``normalize``: members in member-id order, subscriptions restricted to
    existing topics, and a current assignment in which every partition has at most one owner."""
    member_ids: tuple[str, ...]
    subscriptions: tuple[tuple[TopicKey, ...], ...]  # per member, topics in topic order
    owned: tuple[tuple[tuple[TopicKey, int], ...], ...]  # per member, (topic, partition) in that order
    partition_counts: Mapping[TopicKey, int]
    instance_ids: tuple[str | None, ...]

    @property
    def subscription_type(self) -> SubscriptionType:
        first = self.subscriptions[0] if self.subscriptions else ()
        if all(topics == first for topics in self.subscriptions):
            return SubscriptionType.HOMOGENEOUS
        return SubscriptionType.HETEROGENEOUS


def normalize(group: GroupSpec, topics: Mapping[TopicKey, TopicMetadata]) -> NormalizedGroup:
    member_ids = tuple(sorted(group.members))
    subscriptions: list[tuple[TopicKey, ...]] = []
    owned: list[tuple[tuple[TopicKey, int], ...]] = []
    claimed: set[tuple[TopicKey, int]] = set()
    for member_id in member_ids:
        member = group.members[member_id]
        subscribed = tuple(sorted((t for t in member.subscribed_topics if t in topics), key=topic_order))
        subscriptions.append(subscribed)
        held: list[tuple[TopicKey, int]] = []
        for topic in subscribed:
            count = topics[topic].partitions
            for partition in sorted(member.assignment.get(topic, ())):
                if 0 <= partition < count and (topic, partition) not in claimed:
                    claimed.add((topic, partition))
                    held.append((topic, partition))
        owned.append(tuple(held))
    counts = {topic: meta.partitions for topic, meta in topics.items()}
    instance_ids = tuple(group.members[member_id].instance_id for member_id in member_ids)
    return NormalizedGroup(member_ids, tuple(subscriptions), tuple(owned), counts, instance_ids)


def to_group_assignment(member_ids: Iterable[str],
                        partitions: Iterable[Iterable[tuple[TopicKey, int]]]) -> GroupAssignment:
    result: GroupAssignment = {}
    for member_id, held in zip(member_ids, partitions, strict=True):
        by_topic: dict[TopicKey, set[int]] = {}
        for topic, partition in held:
            by_topic.setdefault(topic, set()).add(partition)
        result[member_id] = {topic: frozenset(parts) for topic, parts in by_topic.items()}
    return result
