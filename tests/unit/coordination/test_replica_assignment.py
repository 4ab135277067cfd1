"""Kafka's rack-unaware replica assignment (coordination/replica_assignment.py), pure.

The expected placement is the worked example of Kafka's AdminUtils documentation: five brokers,
ten partitions, three replicas, starting at broker 0; the second round of partitions shifts
its followers by one so that they do not sit on the same brokers as the first round's.
"""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from coordination.replica_assignment import assign_replicas
from coordination.topics import TopicRegistryError

KAFKA_EXAMPLE = {
    0: [0, 1, 2], 1: [1, 2, 3], 2: [2, 3, 4], 3: [3, 4, 0], 4: [4, 0, 1],
    5: [0, 2, 3], 6: [1, 3, 4], 7: [2, 4, 0], 8: [3, 0, 1], 9: [4, 1, 2],
}


def test_the_placement_of_kafkas_documented_example() -> None:
    assert assign_replicas([0, 1, 2, 3, 4], 0, 10, 3, start_index=0, shift=0) == KAFKA_EXAMPLE


def test_added_partitions_continue_the_rotation() -> None:
    # Growing 5 partitions to 10 from where they started places the new ones as creating 10 would.
    added = assign_replicas([0, 1, 2, 3, 4], 5, 5, 3, start_index=0, shift=0)
    assert added == {p: r for p, r in KAFKA_EXAMPLE.items() if p >= 5}


def test_broker_ids_are_placed_not_indexes() -> None:
    assert assign_replicas([10, 20, 30], 0, 3, 2, start_index=1, shift=0) == {0: [20, 30], 1: [30, 10], 2: [10, 20]}


def test_more_replicas_than_brokers_is_kafkas_invalid_replication_factor() -> None:
    with pytest.raises(TopicRegistryError) as refused:
        assign_replicas([1, 2], 0, 1, 3, start_index=0, shift=0)
    assert refused.value.code == ErrorCode.invalid_replication_factor
    assert str(refused.value) == "Replication factor: 3 larger than available brokers: 2."
