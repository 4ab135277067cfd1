"""Transactions on a ZooKeeper cluster of two brokers: one coordinator process is elected
for the cluster, and the transaction's partitions are led by both brokers, so its markers
go to the other broker with WriteTxnMarkers (broker/process/marker_writer.py) as well as
through the coordinator's own workers; and each leader verifies a transaction's first batch
with the coordinator, on its own broker or the other (KIP-890)."""

from __future__ import annotations

import time
from typing import Callable

import pytest
from kio.schema.errors import ErrorCode

from tests.integration.conftest import Broker, start_cluster_broker, wait_until
from tests.integration.coordination.test_group_protocol import request
from tests.integration.kio_client import KioClient
from tests.integration.protocol.test_transactions_v2 import add_partitions, init, produce

pytestmark = [pytest.mark.integration, pytest.mark.transactions, pytest.mark.zookeeper, pytest.mark.timeout(240)]

TOPIC = "txn-cluster"


def _start(broker_factory: Callable[..., Broker], zk_connect: str, node_id: int) -> Broker:
    return start_cluster_broker(broker_factory, zk_connect, node_id, settings={
        "offsets.topic.num.partitions": 2, "transaction.state.log.num.partitions": 2})


def test_a_transaction_over_partitions_of_two_brokers(broker_factory: Callable[..., Broker], zk_connect: str) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    one = _start(broker_factory, zk_connect, 1)
    two = _start(broker_factory, zk_connect, 2)
    bootstrap = f"{one.bootstrap},{two.bootstrap}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    # One partition on each broker, so that whichever is the coordinator, one marker is remote.
    admin.create_topics([NewTopic(TOPIC, num_partitions=2, replica_assignment=[[1], [2]])])[TOPIC].result(timeout=30)

    def leaders() -> dict[int, int] | None:
        found = admin.list_topics(TOPIC, timeout=10).topics[TOPIC].partitions
        led = {p: meta.leader for p, meta in found.items()}
        return led if sorted(led.values()) == [1, 2] else None

    assert wait_until(leaders, 30, "a leader for each partition") == {0: 1, 1: 2}

    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "castle-cluster-tx"})
    producer.init_transactions(60)
    producer.begin_transaction()
    producer.produce(TOPIC, value=b"c-0", partition=0)
    producer.produce(TOPIC, value=b"c-1", partition=1)
    producer.commit_transaction(60)
    producer.begin_transaction()
    producer.produce(TOPIC, value=b"a-0", partition=0)
    producer.produce(TOPIC, value=b"a-1", partition=1)
    producer.flush(30)
    producer.abort_transaction(60)
    producer.begin_transaction()
    producer.produce(TOPIC, value=b"c-2", partition=1)
    producer.commit_transaction(60)

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "cluster-reader", "enable.auto.commit": False,
                         "isolation.level": "read_committed", "auto.offset.reset": "earliest"})
    try:
        consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(2)])
        got: list[tuple[int, bytes]] = []
        deadline = time.monotonic() + 30
        while len(got) < 3 and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and not message.error():
                got.append((message.partition(), message.value()))
        # Anything past the last commit would have come by now: the consumer reached the LSO.
        extra = consumer.poll(1.0)
        assert extra is None or extra.error() is not None, extra.value()
    finally:
        consumer.close()
    assert sorted(got) == [(0, b"c-0"), (1, b"c-1"), (1, b"c-2")]


    # KIP-890: each leader asks the coordinator before a transaction's first batch on its
    # partition; whichever broker runs the coordinator, one leader asks over its rings and
    # the other over the Kafka protocol (AddPartitionsToTxn v5, proven as a broker).
    by_node = {1: one.bootstrap, 2: two.bootstrap}
    with KioClient(one.bootstrap) as client:
        def coordinator_node() -> int | None:
            found = client.call(10, 4, request(10, 4, key_type=1, coordinator_keys=["castle-cluster-v"])).coordinators[0]
            return int(found.node_id) if found.error_code == 0 else None

        node = wait_until(coordinator_node, 30, "the transaction coordinator")
    with KioClient(by_node[node]) as client:
        producer = init(client, "castle-cluster-v")
        assert add_partitions(client, "castle-cluster-v", producer, TOPIC, [0]) == {0}
    for partition, expected in ((1, ErrorCode.invalid_txn_state), (0, 0)):
        with KioClient(by_node[partition + 1]) as leader:  # partition p is led by broker p + 1
            written = produce(leader, 9, "castle-cluster-v", producer, TOPIC, partition, 0, [b"v"])
            assert written.error_code == expected, (partition, written)
