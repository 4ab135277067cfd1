"""Consume-transform-produce with real clients: a transactional producer sends a consumer
group's offsets with its records (send_offsets_to_transaction), and the group's committed
offsets move only when the transaction commits; an aborted transaction leaves them where
they were, and a coordinator that restarts reads the same from __consumer_offsets.
librdkafka (confluent-kafka) sends TxnOffsetCommit v3 with the member's generation and id
(it joined the group); kafka-python and aiokafka name the group only (no member)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.integration.conftest import Broker

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

SOURCE, SINK = "ctp-in", "ctp-out"
SETTINGS = {"workers": 2, "transaction.state.log.num.partitions": 4, "offsets.topic.num.partitions": 4,
            "group.initial.rebalance.delay.ms": 0}


def _topics(bootstrap: str) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(t, num_partitions=1, replication_factor=1) for t in (SOURCE, SINK)]).values():
        future.result(timeout=30)
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(10):
        producer.produce(SOURCE, value=b"in-%d" % i, partition=0)
    assert producer.flush(30) == 0


def _consumer(bootstrap: str, group: str) -> Any:
    from confluent_kafka import Consumer

    return Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                     "auto.offset.reset": "earliest", "isolation.level": "read_committed",
                     "session.timeout.ms": 10_000})


def _poll(consumer: Any, count: int, timeout: float = 30.0) -> list[Any]:
    got: list[Any] = []
    deadline = time.monotonic() + timeout
    while len(got) < count and time.monotonic() < deadline:
        message = consumer.poll(0.2)
        if message is not None and not message.error():
            got.append(message)
    assert len(got) == count, f"consumed {len(got)} of {count}"
    return got


def _committed(bootstrap: str, group: str) -> int:
    """The group's committed offset of the source partition, as a read_committed consumer
    asks for it (OffsetFetch with require_stable: it waits out a pending transaction)."""
    from confluent_kafka import TopicPartition

    reader = _consumer(bootstrap, group)
    try:
        (tp,) = reader.committed([TopicPartition(SOURCE, 0)], timeout=30)
        return int(tp.offset)
    finally:
        reader.close()


@pytest.mark.parametrize("broker", [SETTINGS], indirect=True)
def test_confluent_kafka_offsets_move_with_the_commit_only(broker: Broker) -> None:
    from confluent_kafka import Producer, TopicPartition

    _topics(broker.bootstrap)
    group = "ctp-confluent"
    consumer = _consumer(broker.bootstrap, group)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "ctp-tx",
                         "transaction.timeout.ms": 60_000})
    try:
        consumer.subscribe([SOURCE])
        producer.init_transactions(30)

        first = _poll(consumer, 4)
        producer.begin_transaction()
        for message in first:
            producer.produce(SINK, value=message.value().upper(), partition=0)
        producer.send_offsets_to_transaction([TopicPartition(SOURCE, 0, first[-1].offset() + 1)],
                                             consumer.consumer_group_metadata(), 30)
        producer.commit_transaction(30)
        assert _committed(broker.bootstrap, group) == 4

        second = _poll(consumer, 3)
        producer.begin_transaction()
        producer.produce(SINK, value=b"never", partition=0)
        producer.send_offsets_to_transaction([TopicPartition(SOURCE, 0, second[-1].offset() + 1)],
                                             consumer.consumer_group_metadata(), 30)
        producer.abort_transaction(30)
        assert _committed(broker.bootstrap, group) == 4, "an aborted transaction's offsets never count"
    finally:
        consumer.close()

    broker.restart()
    assert _committed(broker.bootstrap, group) == 4, "the load applies the COMMIT marker and drops the aborted offsets"


@pytest.mark.parametrize("broker", [SETTINGS], indirect=True)
def test_kafka_python_sends_a_groups_offsets_with_its_transaction(broker: Broker) -> None:
    from kafka import KafkaProducer
    from kafka.structs import OffsetAndMetadata
    from kafka.structs import TopicPartition as KafkaTopicPartition

    _topics(broker.bootstrap)
    group = "ctp-kafka-python"
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id="ctp-kp")
    try:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(SINK, b"out", partition=0)
        producer.send_offsets_to_transaction({KafkaTopicPartition(SOURCE, 0): OffsetAndMetadata(6, "", -1)}, group)
        producer.commit_transaction()
        producer.begin_transaction()
        producer.send_offsets_to_transaction({KafkaTopicPartition(SOURCE, 0): OffsetAndMetadata(9, "", -1)}, group)
        producer.abort_transaction()
    finally:
        producer.close(timeout=10)
    assert _committed(broker.bootstrap, group) == 6


@pytest.mark.parametrize("broker", [SETTINGS], indirect=True)
def test_aiokafka_sends_a_groups_offsets_with_its_transaction(broker: Broker) -> None:
    import asyncio

    from aiokafka import AIOKafkaProducer
    from aiokafka.structs import TopicPartition as AioTopicPartition

    _topics(broker.bootstrap)
    group = "ctp-aiokafka"

    async def transactions() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id="ctp-aio")
        await producer.start()
        try:
            async with producer.transaction():
                await producer.send_and_wait(SINK, b"out", partition=0)
                await producer.send_offsets_to_transaction({AioTopicPartition(SOURCE, 0): 3}, group)
            await producer.begin_transaction()
            await producer.send_offsets_to_transaction({AioTopicPartition(SOURCE, 0): 7}, group)
            await producer.abort_transaction()
        finally:
            await producer.stop()

    asyncio.run(asyncio.wait_for(transactions(), 60))
    assert _committed(broker.bootstrap, group) == 3
