"""``castle groups reset-offsets``: move a group's committed offsets (like kafka-consumer-groups.sh).

Kafka's rules, so an operator's habits carry over:

* A dry run is the default: the plan is printed and nothing changes until ``--execute``.
* Only an inactive group (Empty, or Dead: no such group yet) may be reset, in a dry run
  too. A live member would overwrite the new offsets with its next commit, and the
  coordinator refuses a commit from outside the generation anyway (UNKNOWN_MEMBER_ID).
  A consumer that joins between the check and the commit makes the commit fail, and the
  command reports it.
* New offsets are kept inside the log: ``--to-offset`` and ``--shift-by`` are clamped
  to [earliest, latest]; ``--to-datetime`` takes the first offset whose timestamp is at
  or after the instant, or the log end when there is none. ``--shift-by`` needs a
  committed offset to shift from.

The new offsets are committed with alter_consumer_group_offsets (OffsetCommit with no
member id and generation -1, as Kafka's admin client does).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaError, TopicPartition
from confluent_kafka.admin import OffsetSpec

from broker.admin.groups import INACTIVE, describe_one, group_subject, state_name
from broker.admin.offsets import Partition, committed, label, log_offsets
from broker.admin.output import Report, table
from broker.admin.session import AdminError, Session

# What the coordinator answers a commit from outside the generation of a live group.
_JOINED = {KafkaError.UNKNOWN_MEMBER_ID, KafkaError.ILLEGAL_GENERATION, KafkaError.REBALANCE_IN_PROGRESS}


@dataclass(frozen=True)
class Target:
    """Where to move: ``kind`` is earliest, latest, offset, datetime (``value`` in ms) or shift."""

    kind: str
    value: int = 0


@dataclass(frozen=True)
class TopicSpec:
    """``--topic NAME`` (every partition) or ``--topic NAME:0,2`` (those partitions)."""

    topic: str
    partitions: tuple[int, ...] | None = None


def _select(session: Session, group: str, specs: Sequence[TopicSpec] | None,
            current: dict[Partition, int | None]) -> list[Partition]:
    """The partitions to reset: those named, checked against Metadata, or (no specs) those with offsets."""
    if specs is None:
        chosen = sorted(p for p, offset in current.items() if offset is not None)
        if not chosen:
            raise AdminError(f"{group_subject(group)} has no committed offsets: name the partitions with --topic")
        return chosen
    counts = session.topic_partitions({spec.topic for spec in specs})
    chosen_set: set[Partition] = set()
    for spec in specs:
        if spec.topic not in counts:
            raise AdminError(f"topic '{spec.topic}' does not exist")
        count = counts[spec.topic]
        for partition in spec.partitions if spec.partitions is not None else range(count):
            if partition >= count:
                raise AdminError(f"topic '{spec.topic}' has no partition {partition} (it has {count})")
            chosen_set.add((spec.topic, partition))
    return sorted(chosen_set)


def _bounds(session: Session, partitions: list[Partition], spec: Any, what: str) -> dict[Partition, int]:
    offsets, errors = log_offsets(session, partitions, spec)
    if errors:
        first = next(iter(errors.values()))
        raise AdminError(f"cannot read the {what} offsets: {first}", first.kafka_code)
    return offsets


def plan(session: Session, partitions: list[Partition], current: dict[Partition, int | None],
         target: Target) -> dict[Partition, int]:
    """The new offset of each partition (ListOffsets only; nothing is changed)."""
    earliest = _bounds(session, partitions, OffsetSpec.earliest(), "earliest")
    latest = _bounds(session, partitions, OffsetSpec.latest(), "latest")

    def clamp(partition: Partition, offset: int) -> int:
        return min(max(offset, earliest[partition]), latest[partition])

    if target.kind == "earliest":
        return dict(earliest)
    if target.kind == "latest":
        return dict(latest)
    if target.kind == "offset":
        return {p: clamp(p, target.value) for p in partitions}
    if target.kind == "shift":
        missing = [label(p) for p in partitions if current.get(p) is None]
        if missing:
            raise AdminError(f"no committed offset to shift from for {', '.join(missing)}: "
                             "use --to-earliest, --to-latest or --to-offset for those partitions")
        return {p: clamp(p, (current[p] or 0) + target.value) for p in partitions}
    if target.kind == "datetime":
        found = _bounds(session, partitions, OffsetSpec.for_timestamp(target.value), "timestamp")
        return {p: clamp(p, found[p]) if found[p] >= 0 else latest[p] for p in partitions}
    raise AdminError(f"unknown reset target {target.kind}")


def _commit(session: Session, group: str, new: dict[Partition, int]) -> list[str]:
    request = ConsumerGroupTopicPartitions(group, [TopicPartition(t, p, offset) for (t, p), offset in sorted(new.items())])
    futures = session.admin.alter_consumer_group_offsets([request], **session.request_options())
    answer = session.wait(futures[group], group_subject(group))
    failures = []
    for tp in answer.topic_partitions or []:
        where = f"{group_subject(group)} partition {tp.topic}-{tp.partition}"
        if tp.error is not None and tp.error.code() in _JOINED:
            failures.append(f"{where}: not reset, a consumer joined the group meanwhile ({tp.error.name()})")
            continue
        try:
            session.check(tp.error, where)
        except AdminError as exc:
            failures.append(str(exc))
    return failures


def reset(session: Session, group: str, specs: Sequence[TopicSpec] | None, target: Target, execute: bool) -> Report:
    description = describe_one(session, group)
    if description.state not in INACTIVE:
        members = len(description.members)
        raise AdminError(f"{group_subject(group)} is {state_name(description.state)} with {members} active member(s): "
                         "offsets can only be reset while the group is inactive; stop its consumers first")
    current = committed(session, group)
    partitions = _select(session, group, specs, current)
    new = plan(session, partitions, current, target)
    failures = _commit(session, group, new) if execute else []
    rows = [{"topic": t, "partition": p, "current": current.get((t, p)), "new": new[(t, p)]} for t, p in partitions]
    data = {"group": group, "executed": execute and not failures, "partitions": rows}
    text = table(("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET"),
                 [(group, r["topic"], r["partition"], r["current"], r["new"]) for r in rows])
    if not execute:
        notes = ["Dry run: nothing was changed. Add --execute to reset these offsets."]
    elif failures:
        notes = []
    else:
        notes = [f"Reset the offsets of {group_subject(group)} on {len(rows)} partition(s)."]
    return Report(data, text, failures, notes)
