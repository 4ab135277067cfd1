"""The server-side assignors of the `consumer` group protocol and how a group picks one.

The broker setting ``group.consumer.assignors`` lists the assignors it offers, by name
(``uniform``, ``range``) or by Kafka's class names; the first is the default. A member may ask
for one in its heartbeat (``ServerAssignor``); as in Kafka, the group uses the assignor most of
its members ask for, else the default. Each assignor is a pure function of the group spec and
the topic metadata: no I/O, no clock, no randomness, so the coordinator can replay it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from coordination.groups.consumer import range_assignor, uniform_assignor
from coordination.groups.consumer.assignment_spec import (
    GroupAssignment,
    GroupSpec,
    MemberSubscription,
    SubscriptionType,
    TopicKey,
    TopicMetadata,
)

__all__ = [
    "ASSIGNORS", "Assignor", "DEFAULT_ASSIGNORS", "GroupAssignment", "GroupSpec", "MemberSubscription",
    "SubscriptionType", "TopicKey", "TopicMetadata", "UnsupportedAssignor", "parse_assignors", "preferred_assignor",
]

ASSIGNORS_SETTING = "group.consumer.assignors"


@dataclass(frozen=True)
class Assignor:
    name: str
    kafka_class: str
    assign: Callable[[GroupSpec, Mapping[TopicKey, TopicMetadata]], GroupAssignment]


ASSIGNORS: Mapping[str, Assignor] = {
    uniform_assignor.NAME: Assignor(uniform_assignor.NAME, "org.apache.kafka.coordinator.group.assignor.UniformAssignor",
                                    uniform_assignor.assign),
    range_assignor.NAME: Assignor(range_assignor.NAME, "org.apache.kafka.coordinator.group.assignor.RangeAssignor",
                                  range_assignor.assign),
}
DEFAULT_ASSIGNORS = "uniform,range"

_BY_CLASS = {assignor.kafka_class: assignor.name for assignor in ASSIGNORS.values()}


class UnsupportedAssignor(ValueError):
    """A name this broker does not offer (Kafka answers UNSUPPORTED_ASSIGNOR)."""


def parse_assignors(value: str) -> tuple[str, ...]:
    """``group.consumer.assignors`` as assignor names, in order, the default first."""
    names: list[str] = []
    for item in value.split(","):
        item = item.strip()
        if not item:
            continue
        name = _BY_CLASS.get(item, item)
        if name not in ASSIGNORS:
            raise UnsupportedAssignor(f"{ASSIGNORS_SETTING}: unknown assignor {item!r} (known: {', '.join(ASSIGNORS)})")
        if name not in names:
            names.append(name)
    if not names:
        raise UnsupportedAssignor(f"{ASSIGNORS_SETTING} must name at least one assignor")
    return tuple(names)


def preferred_assignor(requested: Iterable[str | None], offered: Sequence[str]) -> Assignor:
    """The assignor for a group whose members asked for ``requested`` (None: no preference).

    The most requested offered assignor wins, ties going to the one listed first in
    ``offered``; with no request, the first offered. Kafka breaks ties by hash order; a fixed
    order keeps the choice identical on every coordinator that replays the group.
    """
    counts = Counter(name for name in requested if name is not None and name in offered)
    if not counts:
        return ASSIGNORS[offered[0]]
    best = max(counts.values())
    return ASSIGNORS[next(name for name in offered if counts[name] == best)]
