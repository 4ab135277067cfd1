"""Transactional offsets on a ZooKeeper cluster of two brokers, for a group whose
__consumer_offsets partition another broker leads than the one whose coordinator process
serves the cluster: the TxnOffsetCommit batch goes there over the Kafka protocol (Produce,
fenced by the coordinator epoch), the transaction's marker with WriteTxnMarkers, and the
group's committed offsets move on the commit only."""

from __future__ import annotations

import time
import uuid
from typing import Callable

import pytest

from coordination.groups.offsets_schema import partition_for
from tests.integration.conftest import Broker, start_cluster_broker, wait_until
from tests.integration.coordination.test_group_protocol import request
from tests.integration.kio_client import KioClient

pytestmark = [pytest.mark.integration, pytest.mark.zookeeper, pytest.mark.timeout(240)]

OFFSETS_PARTITIONS = 2
SOURCE = "txo-cluster-in"


def _start(broker_factory: Callable[..., Broker], zk_connect: str, node_id: int) -> Broker:
    return start_cluster_broker(broker_factory, zk_connect, node_id, settings={
        "offsets.topic.num.partitions": OFFSETS_PARTITIONS, "transaction.state.log.num.partitions": 2})


def _coordinator_node(bootstrap: str, group: str) -> int:
    with KioClient(bootstrap) as client:
        answer = client.call(10, 3, request(10, 3, key=group, key_type=0))
        assert answer.error_code == 0
        return int(answer.node_id)


def _offsets_leader(bootstrap: str, partition: int) -> int:
    with KioClient(bootstrap) as client:
        answer = client.call(3, 12, request(3, 12, topics=[{"name": "__consumer_offsets", "topic_id": uuid.UUID(int=0)}],
                                            allow_auto_topic_creation=False, include_topic_authorized_operations=False))
    (topic,) = answer.topics
    return next(int(p.leader_id) for p in topic.partitions if p.partition_index == partition)


def _move_offsets_partition(bootstrap: str, partition: int, node: int) -> None:
    with KioClient(bootstrap) as client:
        answer = client.call(45, 0, request(45, 0, timeout=30_000, topics=[
            {"name": "__consumer_offsets", "partitions": [{"partition_index": partition, "replicas": [node]}]}]))
    assert answer.error_code == 0, answer
    assert all(p.error_code == 0 for t in answer.responses for p in t.partitions), answer
    wait_until(lambda: _offsets_leader(bootstrap, partition) == node, 60, f"__consumer_offsets-{partition} led by {node}")


def _committed(bootstrap: str, group: str) -> int:
    from confluent_kafka import Consumer, TopicPartition

    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "isolation.level": "read_committed"})
    try:
        (tp,) = reader.committed([TopicPartition(SOURCE, 0)], timeout=30)
        return int(tp.offset)
    finally:
        reader.close()


def test_offsets_of_a_group_whose_partition_another_broker_leads(broker_factory: Callable[..., Broker],
                                                                 zk_connect: str) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    one = _start(broker_factory, zk_connect, 1)
    two = _start(broker_factory, zk_connect, 2)
    bootstrap = f"{one.bootstrap},{two.bootstrap}"
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept: its futures fail once it is collected
    admin.create_topics([NewTopic(SOURCE, num_partitions=1, replication_factor=1)])[SOURCE].result(timeout=30)
    group = "txo-remote"
    coordinator = wait_until(lambda: _coordinator_node(one.bootstrap, group), 30, "the coordinator")
    elsewhere = 2 if coordinator == 1 else 1
    _move_offsets_partition(one.bootstrap, partition_for(group, OFFSETS_PARTITIONS), elsewhere)

    member = Consumer({"bootstrap.servers": bootstrap, "group.id": group})  # its group metadata names the group
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "txo-cluster-tx"})
    try:
        producer.init_transactions(60)
        producer.begin_transaction()
        producer.send_offsets_to_transaction([TopicPartition(SOURCE, 0, 5)], member.consumer_group_metadata(), 60)
        producer.commit_transaction(60)
        assert _committed(bootstrap, group) == 5
        producer.begin_transaction()
        producer.send_offsets_to_transaction([TopicPartition(SOURCE, 0, 8)], member.consumer_group_metadata(), 60)
        started = time.monotonic()
        producer.abort_transaction(60)
        assert time.monotonic() - started < 30
        assert _committed(bootstrap, group) == 5
    finally:
        member.close()
