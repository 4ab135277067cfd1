"""Offset look-ups shared by ``groups describe`` and ``groups reset-offsets``.

Two kinds of offsets, from two places: a group's committed offsets come from its
coordinator (OffsetFetch, through list_consumer_group_offsets), a partition's log
offsets (earliest, latest, by timestamp) from the partition's leader (ListOffsets,
through list_offsets). Partitions are named by plain ``(topic, partition)`` tuples here so
that callers can sort, group and compare them without librdkafka's objects.
"""

from __future__ import annotations

from typing import Iterable

from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import OffsetSpec

from broker.admin.session import AdminError, Session

Partition = tuple[str, int]


def label(partition: Partition) -> str:
    """``orders-3``, Kafka's usual way of naming a partition."""
    return f"{partition[0]}-{partition[1]}"


def committed(session: Session, group: str) -> dict[Partition, int | None]:
    """Every partition the group has an offset for; None where the broker answered "no offset"."""
    futures = session.admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)],
                                                        **session.request_options())
    answer = session.wait(futures[group], f"group '{group}'")
    out: dict[Partition, int | None] = {}
    for tp in answer.topic_partitions or []:
        session.check(tp.error, f"group '{group}' partition {tp.topic}-{tp.partition}")
        out[(tp.topic, tp.partition)] = tp.offset if tp.offset >= 0 else None
    return out


def log_offsets(session: Session, partitions: Iterable[Partition],
                spec: OffsetSpec) -> tuple[dict[Partition, int], dict[Partition, AdminError]]:
    """ListOffsets for each partition with one spec; offsets, and the error of each failed partition.

    A timestamp spec with no record at or after the timestamp answers -1, kept as is.
    """
    wanted = sorted(set(partitions))
    if not wanted:
        return {}, {}
    futures = session.admin.list_offsets({TopicPartition(topic, p): spec for topic, p in wanted},
                                         **session.request_options())
    keyed = {(tp.topic, tp.partition): future for tp, future in futures.items()}
    results, errors = session.wait_each(keyed, lambda partition: f"partition {label(partition)}")
    return {partition: int(info.offset) for partition, info in results.items()}, errors
