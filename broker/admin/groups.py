"""``castle groups list|describe|delete`` (like kafka-consumer-groups.sh).

``describe`` joins three answers: the group's state and members (DescribeGroups, from
its coordinator), its committed offsets (OffsetFetch) and each partition's log end
offset (ListOffsets latest, from the partition's leader); lag is log end minus committed.
A partition appears when the group has an offset for it or a member is assigned it, so a
new member's partitions show up (with no offset and no lag) before its first commit.

A group that the coordinator reports as Dead and that has no committed offsets does not
exist: ``describe`` says so and exits 1, as kafka-consumer-groups.sh does.
"""

from __future__ import annotations

from typing import Any, Sequence

from confluent_kafka import ConsumerGroupState, KafkaException
from confluent_kafka.admin import ConsumerGroupDescription, OffsetSpec

from broker.admin.offsets import Partition, committed, log_offsets
from broker.admin.output import Report, table
from broker.admin.session import AdminError, Session, Unreachable

# Kafka's own names for the states (what kafka-consumer-groups.sh prints).
STATE_NAMES = {
    ConsumerGroupState.STABLE: "Stable",
    ConsumerGroupState.EMPTY: "Empty",
    ConsumerGroupState.DEAD: "Dead",
    ConsumerGroupState.PREPARING_REBALANCING: "PreparingRebalance",
    ConsumerGroupState.COMPLETING_REBALANCING: "CompletingRebalance",
    ConsumerGroupState.UNKNOWN: "Unknown",
}
# States in which no member holds partitions: the only ones in which offsets may be reset.
INACTIVE = (ConsumerGroupState.EMPTY, ConsumerGroupState.DEAD)


def group_subject(group: str) -> str:
    return f"group '{group}'"


def state_name(state: Any) -> str:
    return STATE_NAMES.get(state, str(getattr(state, "name", state)))


def _type_name(value: Any) -> str | None:
    name = getattr(value, "name", None)
    return None if name is None else str(name).lower()


def describe_one(session: Session, group: str) -> ConsumerGroupDescription:
    """DescribeGroups for one group (reset-offsets checks the state with it)."""
    futures = session.admin.describe_consumer_groups([group], **session.request_options())
    description: ConsumerGroupDescription = session.wait(futures[group], group_subject(group))
    return description


def list_groups(session: Session) -> Report:
    result = session.wait(session.admin.list_consumer_groups(**session.request_options()), "listing groups")
    listings = sorted(result.valid or [], key=lambda g: g.group_id)
    failures = []
    for raw in result.errors or []:
        error = raw.args[0] if isinstance(raw, KafkaException) and raw.args else raw
        try:
            session.check(error, "listing groups")
        except Unreachable:
            if not listings:
                raise
            failures.append(str(session.unreachable(error.str())))
        except AdminError as exc:
            failures.append(str(exc))
    groups = [{"group": g.group_id, "state": state_name(getattr(g, "state", None)),
               "type": _type_name(getattr(g, "type", None)), "simple": g.is_simple_consumer_group} for g in listings]
    rows = [(g["group"], g["state"], g["type"]) for g in groups]
    return Report({"groups": groups}, table(("GROUP", "STATE", "TYPE"), rows) if rows else "", failures)


def _members(description: ConsumerGroupDescription) -> list[dict[str, Any]]:
    return [{"member_id": m.member_id, "client_id": m.client_id, "host": m.host,
             "group_instance_id": m.group_instance_id,
             "assignment": [{"topic": tp.topic, "partition": tp.partition}
                            for tp in sorted(m.assignment.topic_partitions, key=lambda tp: (tp.topic, tp.partition))]}
            for m in sorted(description.members, key=lambda m: m.member_id)]


def _text(group: dict[str, Any]) -> str:
    header = (f"Group: {group['group']}  State: {group['state']}  Type: {group['type'] or '-'}  "
              f"Assignor: {group['assignor'] or '-'}  Coordinator: {group['coordinator']}  "
              f"Members: {len(group['members'])}")
    parts = [header]
    if group["members"]:
        members = [(m["member_id"], m["client_id"], m["host"],
                    [f"{a['topic']}-{a['partition']}" for a in m["assignment"]]) for m in group["members"]]
        parts.append(table(("MEMBER-ID", "CLIENT-ID", "HOST", "ASSIGNMENT"), members))
    else:
        parts.append(f"Group '{group['group']}' has no active members.")
    if group["partitions"]:
        rows = [(p["topic"], p["partition"], p["committed"], p["log_end"], p["lag"], p["member_id"])
                for p in group["partitions"]]
        parts.append(table(("TOPIC", "PARTITION", "COMMITTED", "LOG-END", "LAG", "MEMBER-ID"), rows))
    else:
        parts.append(f"Group '{group['group']}' has no committed offsets and no assigned partitions.")
    return "\n\n".join(parts)


def describe(session: Session, groups: Sequence[str]) -> Report:
    futures = session.admin.describe_consumer_groups(list(groups), **session.request_options())
    descriptions, errors = session.wait_each(futures, group_subject)
    failures = [str(errors[g]) for g in groups if g in errors]
    offsets: dict[str, dict[Partition, int | None]] = {}
    for group in groups:
        if group in descriptions:
            try:
                offsets[group] = committed(session, group)
            except Unreachable:
                raise
            except AdminError as exc:
                failures.append(str(exc))
    owners: dict[str, dict[Partition, str]] = {}
    for group, description in descriptions.items():
        owners[group] = {(tp.topic, tp.partition): m.member_id
                         for m in description.members for tp in m.assignment.topic_partitions}
    wanted = {p for g in offsets for p in list(offsets[g]) + list(owners[g])}
    existing = session.topic_partitions({topic for topic, _ in wanted})
    log_end, end_errors = log_offsets(session, [p for p in wanted if p[1] < existing.get(p[0], 0)], OffsetSpec.latest())
    notes = [f"log end offset unknown: {exc}" for exc in end_errors.values()]
    out = []
    for group in groups:
        if group not in offsets:
            continue
        description = descriptions[group]
        if description.state == ConsumerGroupState.DEAD and not offsets[group]:
            failures.append(f"{group_subject(group)} does not exist")
            continue
        partitions: list[dict[str, Any]] = []
        for partition in sorted(set(offsets[group]) | set(owners[group])):
            position = offsets[group].get(partition)
            end = log_end.get(partition)
            lag = end - position if end is not None and position is not None else None
            partitions.append({"topic": partition[0], "partition": partition[1], "committed": position,
                               "log_end": end, "lag": lag, "member_id": owners[group].get(partition)})
        coordinator = description.coordinator
        out.append({"group": group, "state": state_name(description.state),
                    "type": _type_name(getattr(description, "type", None)), "assignor": description.partition_assignor or None,
                    "coordinator": None if coordinator is None else coordinator.id,
                    "members": _members(description), "partitions": partitions,
                    "total_lag": sum(p["lag"] for p in partitions if p["lag"] is not None)})
    return Report({"groups": out}, "\n\n".join(_text(g) for g in out), failures, notes)


def delete(session: Session, groups: Sequence[str]) -> Report:
    futures = session.admin.delete_consumer_groups(list(groups), **session.request_options())
    deleted, errors = session.wait_each(futures, group_subject)
    done = [g for g in groups if g in deleted]
    return Report({"deleted": done}, "\n".join(f"Deleted group '{g}'." for g in done),
                  [str(errors[g]) for g in groups if g in errors])

