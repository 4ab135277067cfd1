"""``castle topics list|describe|create|delete|alter-configs|add-partitions`` (like kafka-topics.sh).

Leaders, replicas and ISRs are shown as the broker reports them: one node per broker,
whatever its worker count. A replica is offline when its broker is not in Metadata's
broker list. The leader epoch is not shown: confluent-kafka exposes it neither in
``TopicPartitionInfo`` (describe_topics) nor in ``PartitionMetadata`` (list_topics).

``describe`` shows the configs that are not at their default (what an operator set,
on the topic or through a broker setting), as kafka-topics.sh does; ``castle configs
describe --topic`` shows them all.
"""

from __future__ import annotations

from typing import Any, Collection, Iterable, Mapping, Sequence

from confluent_kafka import KafkaError, TopicCollection, TopicPartitionInfo
from confluent_kafka.admin import NewPartitions, NewTopic, TopicDescription

from broker.admin import configs
from broker.admin.output import Report, table
from broker.admin.session import AdminError, Session

# Kafka's own internal topics (org.apache.kafka.common.internals.Topic): Metadata's
# is_internal is only in DescribeTopics answers, and `list` needs no more than names.
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})


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


def partition_data(partitions: Iterable[TopicPartitionInfo], live: Collection[int]) -> list[dict[str, Any]]:
    """Each partition's JSON, by id; ``live`` are the broker ids Metadata lists."""
    return [{"partition": p.id, "leader": _node_id(p.leader), "replicas": [n.id for n in p.replicas],
             "isr": [n.id for n in p.isr], "offline_replicas": [n.id for n in p.replicas if n.id not in live]}
            for p in sorted(partitions, key=lambda p: p.id)]


def is_under_replicated(partition: Mapping[str, Any]) -> bool:
    return len(partition["isr"]) < len(partition["replicas"])


def is_unavailable(partition: Mapping[str, Any]) -> bool:
    """No leader, or a leader whose broker is offline (kafka-topics.sh's definition)."""
    return partition["leader"] is None or partition["leader"] in partition["offline_replicas"]


def select(partitions: Sequence[dict[str, Any]], under_replicated: bool, unavailable: bool) -> list[dict[str, Any]]:
    """The partitions either filter wants (kafka-topics.sh ORs them); all of them without a filter."""
    if not (under_replicated or unavailable):
        return list(partitions)
    return [p for p in partitions
            if (under_replicated and is_under_replicated(p)) or (unavailable and is_unavailable(p))]


def render(topic: Mapping[str, Any]) -> str:
    """A topic's line (as kafka-topics.sh --describe), then a table of its partitions."""
    settings = ", ".join(f"{key}={value}" for key, value in topic["configs"].items()) or "-"
    header = (f"Topic: {topic['name']}  TopicId: {topic['topic_id']}  PartitionCount: {topic['partition_count']}  "
              f"ReplicationFactor: {topic['replication_factor']}  Configs: {settings}")
    rows = [(topic["name"], p["partition"], p["leader"], p["replicas"], p["isr"], p["offline_replicas"])
            for p in topic["partitions"]]
    return header + "\n" + table(("TOPIC", "PARTITION", "LEADER", "REPLICAS", "ISR", "OFFLINE"), rows)


def describe(session: Session, names: Sequence[str], exclude_internal: bool, under_replicated: bool = False,
             unavailable: bool = False) -> Report:
    """Topics with their partitions; with a filter, only the partitions (and topics) it keeps."""
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
    live = set(session.broker_ids()) if descriptions else set()
    entries, config_failures = configs.fetch(session, "topic", [d.name for d in descriptions])
    failures += [str(e) for e in config_failures.values()]
    topics = []
    for description in descriptions:
        if description.name not in entries:
            continue
        overrides = {key: e.value for key, e in sorted(entries[description.name].items()) if not e.is_default}
        partitions = partition_data(description.partitions, live)
        shown = select(partitions, under_replicated, unavailable)
        if (under_replicated or unavailable) and not shown:
            continue  # the filter kept none of its partitions
        factor = len(partitions[0]["replicas"]) if partitions else 0
        topics.append({"name": description.name, "topic_id": str(description.topic_id), "internal": description.is_internal,
                       "partition_count": len(partitions), "replication_factor": factor,
                       "configs": overrides, "partitions": shown})
    return Report({"topics": topics}, "\n\n".join(render(t) for t in topics), failures)


def create(session: Session, name: str, partitions: int | None, replication_factor: int | None,
           settings: Mapping[str, str], if_not_exists: bool, validate_only: bool,
           assignment: Sequence[Sequence[int]] | None = None) -> Report:
    """-1 (unset) partitions or replication factor: the broker's default. ``assignment``
    (each partition's brokers) excludes both; confluent-kafka wants its length as the
    partition count, and librdkafka sends -1 for both, as Kafka requires."""
    if assignment:
        partitions, replication_factor = len(assignment), len(assignment[0])
        new = NewTopic(name, num_partitions=partitions, replica_assignment=[list(a) for a in assignment],
                       config=dict(settings))
    else:
        new = NewTopic(name, num_partitions=-1 if partitions is None else partitions,
                       replication_factor=-1 if replication_factor is None else replication_factor, config=dict(settings))
    futures = session.admin.create_topics([new], validate_only=validate_only, **session.operation_options())
    data = {"topic": name, "partitions": partitions, "replication_factor": replication_factor,
            "replica_assignment": [list(a) for a in assignment] if assignment else None,
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
    factor = "the default replication factor" if replication_factor is None else f"replication factor {replication_factor}"
    return Report(data, f"{verb} topic '{name}' with {count} partitions and {factor}.")


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
