"""num.replica.fetchers: which of a follower's fetch loops takes a partition
(broker/partitions/replica_fetcher.py fetcher_id), bit for bit Kafka's
AbstractFetcherManager.getFetcherId, ``Utils.abs(31 * topic.hashCode() + partition) % n``."""

from __future__ import annotations

import pytest

from broker.partitions.replica_fetcher import fetcher_id
from storage.types import TopicPartition

# (topic, partition, fetchers, Kafka's fetcher id), computed by Java 17 running Kafka's
# expression with its Utils.abs. "polygenelubricants" hashes to Integer.MIN_VALUE, so
# 31 * hash wraps to MIN_VALUE again and Utils.abs maps it to 0; "my-group" hashes negative;
# the emoji is two UTF-16 units.
KAFKA = [
    ("foo", 0, 3, 0), ("foo", 1, 7, 6), ("foo", 1000, 7, 4),
    ("my-group", 1, 7, 5), ("my-group", 1000, 7, 3),
    ("polygenelubricants", 0, 7, 0), ("polygenelubricants", 1, 7, 1), ("polygenelubricants", 1000, 7, 3),
    ("orders", 1, 7, 5), ("orders", 1000, 7, 0),
    ("\U0001f600", 1, 7, 0), ("\U0001f600", 1000, 7, 5),
]


@pytest.mark.parametrize(("topic", "partition", "fetchers", "expected"), KAFKA)
def test_a_partition_goes_to_the_fetcher_kafka_gives_it(topic: str, partition: int, fetchers: int, expected: int) -> None:
    assert fetcher_id(TopicPartition(topic, partition), fetchers) == expected


def test_one_fetcher_takes_everything_and_more_split_the_partitions() -> None:
    tps = [TopicPartition(topic, p) for topic in ("a", "orders", "__consumer_offsets") for p in range(50)]
    assert {fetcher_id(tp, 1) for tp in tps} == {0}
    split = [fetcher_id(tp, 4) for tp in tps]
    assert set(split) == {0, 1, 2, 3}
    # "a" hashes positive: its consecutive partitions go round the loops in turn.
    assert all(split[i + 1] == (split[i] + 1) % 4 for i in range(49))
