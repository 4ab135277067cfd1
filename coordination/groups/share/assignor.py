"""The share group assignor: Kafka's ``simple`` assignor's semantics, our own algorithm.

Every assignable partition (subscribed and initialized) goes to at least one member; when
members outnumber partitions, a partition goes to several members, ceil(members /
partitions) each, so every member has work. Members get as even a share of the
(partition, member) slots as can be, and the assignment is sticky: a member keeps what it
had as long as that stays within its share and the partition's sharing.

When every member subscribes to the same topics (Kafka's homogeneous case) the partitions
of all the topics are shared out together; otherwise each topic's partitions are shared
out among the members that subscribe to it.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence

from coordination.groups.share.group import Assignment

NAME = "simple"
Partition = tuple[uuid.UUID, int]


def assign(subscriptions: Mapping[str, frozenset[uuid.UUID]], assignable: Mapping[uuid.UUID, frozenset[int]],
           current: Mapping[str, Assignment]) -> dict[str, dict[uuid.UUID, frozenset[int]]]:
    """Each member's target assignment. ``subscriptions``: member -> subscribed topic ids;
    ``assignable``: topic id -> the partitions that may be assigned; ``current``: the last
    target assignment, which this one sticks to."""
    members = sorted(subscriptions)
    held: dict[str, set[Partition]] = {m: set() for m in members}
    if not members:
        return {}
    if len({subscriptions[m] for m in members}) == 1:
        topics = subscriptions[members[0]]
        _share_out(members, _partitions(topics, assignable), current, held)
    else:
        for topic in sorted({t for m in members for t in subscriptions[m]}, key=str):
            subscribers = [m for m in members if topic in subscriptions[m]]
            _share_out(subscribers, _partitions({topic}, assignable), current, held)
    out: dict[str, dict[uuid.UUID, frozenset[int]]] = {}
    for member, partitions in held.items():
        by_topic: dict[uuid.UUID, set[int]] = {}
        for topic, partition in partitions:
            by_topic.setdefault(topic, set()).add(partition)
        out[member] = {topic: frozenset(parts) for topic, parts in by_topic.items()}
    return out


def _partitions(topics: frozenset[uuid.UUID] | set[uuid.UUID], assignable: Mapping[uuid.UUID, frozenset[int]]
                ) -> list[Partition]:
    return [(topic, p) for topic in sorted(topics, key=str) for p in sorted(assignable.get(topic, ()))]


def _share_out(members: Sequence[str], partitions: Sequence[Partition], current: Mapping[str, Assignment],
               held: dict[str, set[Partition]]) -> None:
    """Give ``partitions`` to ``members`` (adding to ``held``)."""
    if not partitions or not members:
        return
    sharing = -(-len(members) // len(partitions))
    slots = sharing * len(partitions)
    low, extra = divmod(slots, len(members))
    wanted = set(partitions)
    # What each member had and may keep, the members with most first: they take the larger quotas.
    kept = {m: sorted(p for p in _pairs(current.get(m, {})) if p in wanted) for m in members}
    quota: dict[str, int] = {}
    for index, member in enumerate(sorted(members, key=lambda m: (-len(kept[m]), m))):
        quota[member] = low + (1 if index < extra else 0)
    holders: dict[Partition, list[str]] = {p: [] for p in partitions}
    count = dict.fromkeys(members, 0)
    for member in members:
        for partition in kept[member]:
            if count[member] < quota[member] and len(holders[partition]) < sharing:
                holders[partition].append(member)
                count[member] += 1
    for partition in partitions:
        while len(holders[partition]) < sharing:
            candidates = [m for m in members if count[m] < quota[m] and m not in holders[partition]]
            if not candidates:
                break  # every member with room has it already: a slight imbalance, as Kafka accepts
            chosen = min(candidates, key=lambda m: (count[m], members.index(m)))
            holders[partition].append(chosen)
            count[chosen] += 1
    for partition, owners in holders.items():
        for member in owners:
            held[member].add(partition)


def _pairs(assignment: Assignment) -> list[Partition]:
    return [(topic, p) for topic, parts in assignment.items() for p in parts]
