"""Kafka's server-side `range` assignor: contiguous partition ranges, per topic, in member order.

Each topic's partitions are cut into as many ranges as it has subscribers, the first
``partitions % subscribers`` ranges one partition longer, handed out in member order. Members
with the same subscriptions therefore get the same partition numbers of every topic of equal
size (co-partitioning, what joins need).

Like Kafka's, the result ignores the current assignment: it depends only on the order of the
members. Static members (with a ``group.instance.id``) come first, by instance id, so a static
member that rejoins under a new member id keeps its ranges; dynamic members follow by member id.
"""

from __future__ import annotations

from collections.abc import Mapping

from coordination.groups.consumer.assignment_spec import (
    GroupAssignment,
    GroupSpec,
    TopicKey,
    TopicMetadata,
    normalize,
    topic_order,
)

NAME = "range"


def assign(group: GroupSpec, topics: Mapping[TopicKey, TopicMetadata]) -> GroupAssignment:
    spec = normalize(group, topics)
    def rank(index: int) -> tuple[int, str]:
        instance_id = spec.instance_ids[index]
        return (0, instance_id) if instance_id is not None else (1, spec.member_ids[index])

    order = sorted(range(len(spec.member_ids)), key=rank)

    subscribers: dict[TopicKey, list[int]] = {}
    for index in order:
        for topic in spec.subscriptions[index]:
            subscribers.setdefault(topic, []).append(index)

    result: list[dict[TopicKey, frozenset[int]]] = [{} for _ in spec.member_ids]
    for topic in sorted(subscribers, key=topic_order):
        members = subscribers[topic]
        quota, extra = divmod(spec.partition_counts[topic], len(members))
        start = 0
        for position, index in enumerate(members):
            end = start + quota + (1 if position < extra else 0)
            if end > start:
                result[index][topic] = frozenset(range(start, end))
            start = end
    return dict(zip(spec.member_ids, result, strict=True))
