"""Kafka's server-side `uniform` assignor: balanced first, then sticky.

Two builders, picked by the group's subscription type, as Kafka does:

* homogeneous (every member subscribes to the same topics): all the partitions are one pool.
  Each member's quota is ``P // N`` and ``P % N`` members get one more, so sizes differ by at
  most one. The extra slots go first to members that already hold more than the floor (they
  keep one more of their partitions that way), then in member order. A member keeps its current
  partitions up to its quota; what is left over or unowned fills the members below quota.

* heterogeneous: a partition can only go to a subscriber of its topic, so there is no single
  quota. Members keep every current partition of a topic they still subscribe to; unowned
  partitions go one by one to the least loaded subscriber, topics with the most partitions per
  subscriber first (they are the hardest to spread); then, topic by topic, a partition moves
  from the most loaded subscriber holding one to the least loaded subscriber while their sizes
  differ by two or more, until a whole pass over the topics moves nothing. Sizes are whole
  member loads, not per topic, which is what makes overlapping subscriptions come out even.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping
from fractions import Fraction

from coordination.groups.consumer.assignment_spec import (
    GroupAssignment,
    GroupSpec,
    NormalizedGroup,
    SubscriptionType,
    TopicKey,
    TopicMetadata,
    normalize,
    to_group_assignment,
    topic_order,
)

NAME = "uniform"

# Kafka bounds the balancing passes the same way: overlapping subscriptions converge slowly,
# and an almost balanced assignment computed quickly beats a perfect one computed late.
MAX_BALANCE_PASSES = 16


def assign(group: GroupSpec, topics: Mapping[TopicKey, TopicMetadata]) -> GroupAssignment:
    spec = normalize(group, topics)
    if not spec.member_ids:
        return {}
    if spec.subscription_type is SubscriptionType.HOMOGENEOUS:
        return _assign_homogeneous(spec)
    return _HeterogeneousBuilder(spec).build()


def _assign_homogeneous(spec: NormalizedGroup) -> GroupAssignment:
    topics = spec.subscriptions[0]
    total = sum(spec.partition_counts[topic] for topic in topics)
    members = len(spec.member_ids)
    floor, extra = divmod(total, members)

    above_floor = [i for i in range(members) if len(spec.owned[i]) > floor]
    others = [i for i in range(members) if len(spec.owned[i]) <= floor]
    with_extra = set((above_floor + others)[:extra])
    quotas = [floor + (1 if i in with_extra else 0) for i in range(members)]

    target = [list(spec.owned[i][:quotas[i]]) for i in range(members)]
    kept = {partition for held in target for partition in held}
    unassigned = iter([(topic, p) for topic in topics for p in range(spec.partition_counts[topic])
                       if (topic, p) not in kept])
    for i in range(members):
        for _ in range(quotas[i] - len(target[i])):
            target[i].append(next(unassigned))
    return to_group_assignment(spec.member_ids, target)


class _HeterogeneousBuilder:
    def __init__(self, spec: NormalizedGroup) -> None:
        self.spec = spec
        self.subscribers: dict[TopicKey, list[int]] = {}
        for index, subscribed in enumerate(spec.subscriptions):
            for topic in subscribed:
                self.subscribers.setdefault(topic, []).append(index)
        self.owner: dict[TopicKey, list[int]] = {
            topic: [-1] * spec.partition_counts[topic] for topic in self.subscribers}
        self.sizes = [0] * len(spec.member_ids)
        for index, held in enumerate(spec.owned):
            for topic, partition in held:
                self.owner[topic][partition] = index
            self.sizes[index] = len(held)

    def build(self) -> GroupAssignment:
        self._assign_unowned()
        self._balance()
        target: list[list[tuple[TopicKey, int]]] = [[] for _ in self.spec.member_ids]
        for topic, owners in self.owner.items():
            for partition, index in enumerate(owners):
                target[index].append((topic, partition))
        return to_group_assignment(self.spec.member_ids, target)

    def _topic_rank(self, topic: TopicKey) -> tuple[Fraction, int, str]:
        count = len(self.subscribers[topic])
        return -Fraction(self.spec.partition_counts[topic], count), count, topic_order(topic)

    def _assign_unowned(self) -> None:
        for topic in sorted(self.subscribers, key=self._topic_rank):
            owners = self.owner[topic]
            unowned = [p for p, index in enumerate(owners) if index < 0]
            if not unowned:
                continue
            # Least loaded first; among equals, the order they had when the topic began, so
            # members at one level are topped up in turn before those that started a level higher.
            start = sorted(self.subscribers[topic], key=lambda i: (self.sizes[i], i))
            heap = [(self.sizes[index], rank, index) for rank, index in enumerate(start)]
            heapq.heapify(heap)
            for partition in unowned:
                size, rank, index = heapq.heappop(heap)
                owners[partition] = index
                self.sizes[index] = size + 1
                heapq.heappush(heap, (size + 1, rank, index))

    def _balance(self) -> None:
        movable = sorted((t for t, members in self.subscribers.items() if len(members) >= 2), key=self._topic_rank)
        for _ in range(MAX_BALANCE_PASSES):
            if not sum(self._balance_topic(topic) for topic in movable):
                return

    def _balance_topic(self, topic: TopicKey) -> int:
        """Moves partitions of ``topic`` from its most to its least loaded subscriber until no
        two of them differ by more than one (among those holding some of it, for the giver)."""
        owners = self.owner[topic]
        members = self.subscribers[topic]
        held: dict[int, list[int]] = {index: [] for index in members}
        for partition, index in enumerate(owners):
            held[index].append(partition)
        sizes = self.sizes
        moved = 0
        while True:
            least = min(members, key=lambda i: (sizes[i], i))
            givers = [i for i in members if held[i]]
            if not givers:
                return moved
            most = max(givers, key=lambda i: (sizes[i], i))
            if sizes[most] - sizes[least] <= 1:
                return moved
            partition = held[most].pop()
            held[least].append(partition)
            owners[partition] = least
            sizes[most] -= 1
            sizes[least] += 1
            moved += 1
