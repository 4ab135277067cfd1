"""storage.types.partitions_of: the per-process TopicPartition list the Fetch path indexes."""

from __future__ import annotations

from storage.types import TopicPartition, partitions_of


def test_partitions_of_gives_each_partition_in_order_and_reuses_the_objects() -> None:
    first = partitions_of("types-a", 3)
    assert first == [TopicPartition("types-a", 0), TopicPartition("types-a", 1), TopicPartition("types-a", 2)]
    again = partitions_of("types-a", 3)
    assert all(x is y for x, y in zip(first, again)), "made once, then reused"


def test_partitions_of_grows_with_the_partition_count_and_keeps_topics_apart() -> None:
    assert len(partitions_of("types-b", 2)) >= 2
    grown = partitions_of("types-b", 5)
    assert grown[:5] == [TopicPartition("types-b", p) for p in range(5)]
    assert partitions_of("types-c", 1)[0] == TopicPartition("types-c", 0)
    assert partitions_of("types-b", 1)[4] == TopicPartition("types-b", 4)  # a smaller count never shrinks it
