"""Kafka's rack-unaware replica assignment: which brokers host each partition of a new topic,
or each partition added to one (AdminUtils.assignReplicasToBrokersRackUnaware).

Partitions are spread over the brokers round robin from a random first broker, the second
and later replicas shifted; adding partitions continues the rotation where partition 0
started it, as Kafka does (the ZooKeeper topic registry picks the starting points). Pure: no
I/O, the caller passes the brokers and the starting points.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from coordination.topics import TopicRegistryError


def assign_replicas(brokers: list[int], first_partition: int, count: int, replication_factor: int,
                    start_index: int, shift: int) -> dict[int, list[int]]:
    """Kafka's rack-unaware assignment. Partition p's leader is broker
    ``(p + start_index) mod n``; follower j sits ``1 + (shift + j) mod (n - 1)`` places after
    it, ``shift`` growing by one each full round so followers do not pile up together."""
    n = len(brokers)
    if replication_factor > n:
        raise TopicRegistryError(ErrorCode.invalid_replication_factor,
                                 f"Replication factor: {replication_factor} larger than available brokers: {n}.")
    placed: dict[int, list[int]] = {}
    for partition in range(first_partition, first_partition + count):
        if partition > 0 and partition % n == 0:
            shift += 1
        first = (partition + start_index) % n
        replicas = [brokers[first]]
        for j in range(replication_factor - 1):
            replicas.append(brokers[(first + 1 + (shift + j) % (n - 1)) % n])
        placed[partition] = replicas
    return placed
