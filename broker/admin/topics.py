"""``castle topics list|describe|create|delete|alter-configs|add-partitions`` (like kafka-topics.sh).

Leaders, replicas and ISRs are shown as the broker reports them: one node per broker,
whatever its worker count.

``describe`` shows the configs that are not at their default (what an operator set,
on the topic or through a broker setting), as kafka-topics.sh does; ``castle configs
describe --topic`` shows them all.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from confluent_kafka import KafkaError, TopicCollection
from confluent_kafka.admin import NewPartitions, NewTopic, TopicDescription

from broker.admin import configs
from broker.admin.output import Report, table
from broker.admin.session import AdminError, Session

# Kafka's own internal topics (org.apache.kafka.common.internals.Topic): Metadata's
# is_internal is only in DescribeTopics answers, and `list` needs no more than names.
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


def _topic(name: str) -> str:
    return f"topic '{name}'"


def list_topics(session: Session, exclude_internal: bool) -> Report:
    counts = session.topic_partitions()
    names = sorted(name for name in counts if not (exclude_internal and name in INTERNAL_TOPICS))
    data = {"topics": [{"name": name, "partitions": counts[name], "internal": name in INTERNAL_TOPICS}
                       for name in names]}
    return Report(data, "\n".join(names))


def _node_id(node: Any) -> int | None:
    return None if node is None or node.id < 0 else int(node.id)


def _partition_data(description: TopicDescription) -> list[dict[str, Any]]:
    return [{"partition": p.id, "leader": _node_id(p.leader), "replicas": [n.id for n in p.replicas],
             "isr": [n.id for n in p.isr]} for p in sorted(description.partitions, key=lambda p: p.id)]


def describe(session: Session, names: Sequence[str], exclude_internal: bool) -> Report:
    if not names:
        names = sorted(session.topic_partitions())
        if not names:
            return Report({"topics": []}, "")
    futures = session.admin.describe_topics(TopicCollection(list(names)), **session.request_options())
    found, errors = session.wait_each(futures, _topic)
    failures = [str(e) for e in errors.values()]
    descriptions: list[TopicDescription] = [found[name] for name in names if name in found]
    if exclude_internal:
        descriptions = [d for d in descriptions if not d.is_internal]
    entries, config_failures = configs.fetch(session, "topic", [d.name for d in descriptions])
    failures += [str(e) for e in config_failures.values()]
    topics = []
    blocks = []
    for description in descriptions:
        if description.name not in entries:
            continue
        overrides = {key: e.value for key, e in sorted(entries[description.name].items()) if not e.is_default}
        partitions = _partition_data(description)
        factor = len(partitions[0]["replicas"]) if partitions else 0
        topics.append({"name": description.name, "topic_id": str(description.topic_id), "internal": description.is_internal,
                       "partition_count": len(partitions), "replication_factor": factor,
                       "configs": overrides, "partitions": partitions})
        settings = ", ".join(f"{key}={value}" for key, value in overrides.items()) or "-"
        header = (f"Topic: {description.name}  TopicId: {description.topic_id}  PartitionCount: {len(partitions)}  "
                  f"ReplicationFactor: {factor}  Configs: {settings}")
        rows = [(p["partition"], p["leader"], p["replicas"], p["isr"]) for p in partitions]
        blocks.append(header + "\n" + table(("PARTITION", "LEADER", "REPLICAS", "ISR"), rows))
    return Report({"topics": topics}, "\n\n".join(blocks), failures)


def create(session: Session, name: str, partitions: int | None, replication_factor: int | None,
           settings: Mapping[str, str], if_not_exists: bool, validate_only: bool) -> Report:
    new = NewTopic(name, num_partitions=-1 if partitions is None else partitions,
                   replication_factor=-1 if replication_factor is None else replication_factor, config=dict(settings))
    futures = session.admin.create_topics([new], validate_only=validate_only, **session.operation_options())
    data = {"topic": name, "partitions": partitions, "replication_factor": replication_factor,
            "configs": dict(settings), "created": not validate_only}
    try:
        session.wait(futures[name], _topic(name))
    except AdminError as exc:
        if if_not_exists and exc.kafka_code == KafkaError.TOPIC_ALREADY_EXISTS:
            data["created"] = False
            return Report(data, f"Topic '{name}' already exists.")
        raise
    verb = "Validated (not created)" if validate_only else "Created"
    count = "the default number of" if partitions is None else str(partitions)
    return Report(data, f"{verb} topic '{name}' with {count} partitions.")


def delete(session: Session, names: Sequence[str], if_exists: bool) -> Report:
    futures = session.admin.delete_topics(list(names), **session.operation_options())
    deleted, errors = session.wait_each(futures, _topic)
    if if_exists:
        errors = {name: e for name, e in errors.items() if e.kafka_code != KafkaError.UNKNOWN_TOPIC_OR_PART}
    done = [name for name in names if name in deleted]
    return Report({"deleted": done}, "\n".join(f"Deleted topic '{name}'." for name in done),
                  [str(e) for e in errors.values()])


def add_partitions(session: Session, name: str, total: int, validate_only: bool) -> Report:
    futures = session.admin.create_partitions([NewPartitions(name, total)], validate_only=validate_only,
                                              **session.operation_options())
    session.wait(futures[name], _topic(name))
    text = (f"Validated (nothing changed): topic '{name}' can have {total} partitions." if validate_only
            else f"Topic '{name}' now has {total} partitions.")
    return Report({"topic": name, "partitions": total, "applied": not validate_only}, text)
