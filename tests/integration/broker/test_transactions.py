"""Kafka transactions against a real broker with confluent-kafka's transactional producer
(librdkafka): a commit over two partitions, an abort, a read_committed consumer that sees
only committed records, a zombie producer fenced by a new one with the same id, and the
state the coordinator keeps in __transaction_state surviving a restart; offsets sent to a
transaction; kafka-python and aiokafka transactional producers."""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.integration.conftest import Broker, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.transactions, pytest.mark.timeout(240)]

TOPIC = "txn-data"
SETTINGS = {"workers": 2, "transaction.state.log.num.partitions": 4, "offsets.topic.num.partitions": 4}


def _create_topic(bootstrap: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, num_partitions=2, replication_factor=1)])[TOPIC].result(timeout=30)


def _producer(bootstrap: str, transactional_id: str) -> Any:
    from confluent_kafka import Producer

    return Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id,
                     "transaction.timeout.ms": 60_000, "message.timeout.ms": 30_000})


def _read(bootstrap: str, isolation: str, expected: int, timeout: float = 30.0) -> list[tuple[int, bytes]]:
    """(partition, value) of the records of both partitions a consumer with ``isolation``
    gets, once it has ``expected`` of them and nothing more comes for a second."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{isolation}-{time.monotonic_ns()}",
                         "isolation.level": isolation, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    try:
        consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(2)])
        got: list[tuple[int, bytes]] = []
        deadline = time.monotonic() + timeout
        quiet_since = time.monotonic()
        while time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is None:
                if len(got) >= expected and time.monotonic() - quiet_since > 1.0:
                    break
                continue
            if message.error():
                continue  # partition EOF and the like
            got.append((message.partition(), message.value()))
            quiet_since = time.monotonic()
        return sorted(got)
    finally:
        consumer.close()


@pytest.mark.parametrize("broker", [SETTINGS], indirect=True)
def test_commit_abort_and_read_committed(broker: Broker) -> None:
    from confluent_kafka import KafkaException

    _create_topic(broker.bootstrap)
    producer = _producer(broker.bootstrap, "castle-tx-1")
    producer.init_transactions(30)

    producer.begin_transaction()
    producer.produce(TOPIC, value=b"committed-0", partition=0)
    producer.produce(TOPIC, value=b"committed-1", partition=1)
    producer.commit_transaction(30)

    producer.begin_transaction()
    producer.produce(TOPIC, value=b"aborted-0", partition=0)
    producer.produce(TOPIC, value=b"aborted-1", partition=1)
    producer.flush(30)  # the records are in the log before the abort
    producer.abort_transaction(30)

    producer.begin_transaction()
    producer.produce(TOPIC, value=b"committed-2", partition=1)
    producer.commit_transaction(30)

    committed = [(0, b"committed-0"), (1, b"committed-1"), (1, b"committed-2")]
    assert _read(broker.bootstrap, "read_committed", 3) == committed
    # A read_uncommitted consumer gets the aborted records too (never the markers).
    assert _read(broker.bootstrap, "read_uncommitted", 5) == sorted(committed + [(0, b"aborted-0"),
                                                                                 (1, b"aborted-1")])

    # A new producer with the same transactional id fences the old one.
    successor = _producer(broker.bootstrap, "castle-tx-1")
    successor.init_transactions(30)
    producer.begin_transaction()
    producer.produce(TOPIC, value=b"zombie", partition=0)
    with pytest.raises(KafkaException) as fenced:
        producer.commit_transaction(30)
    assert fenced.value.args[0].fatal(), fenced.value.args[0]

    successor.begin_transaction()
    successor.produce(TOPIC, value=b"successor", partition=0)
    successor.commit_transaction(30)
    assert (0, b"successor") in _read(broker.bootstrap, "read_committed", 4)
    assert (0, b"zombie") not in _read(broker.bootstrap, "read_committed", 4)


@pytest.mark.parametrize("broker", [SETTINGS], indirect=True)
def test_an_open_transaction_is_aborted_when_its_producer_comes_back(broker: Broker) -> None:
    """The coordinator keeps the transaction in __transaction_state: after a restart of the
    broker, the producer's successor gets its id once the old transaction is aborted (until
    then a read_committed consumer sees nothing past the open transaction's first record)."""
    _create_topic(broker.bootstrap)
    producer = _producer(broker.bootstrap, "castle-tx-restart")
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(TOPIC, value=b"left-open", partition=0)
    assert producer.flush(30) == 0  # the producer never ends it: it is left open

    broker.restart()
    successor = _producer(broker.bootstrap, "castle-tx-restart")
    successor.init_transactions(60)  # retried while the open transaction is aborted
    successor.begin_transaction()
    successor.produce(TOPIC, value=b"after-restart", partition=0)
    successor.commit_transaction(30)

    def committed() -> list[tuple[int, bytes]] | None:
        got = _read(broker.bootstrap, "read_committed", 1, timeout=10)
        return got if got else None

    assert wait_until(committed, 60, "the committed record") == [(0, b"after-restart")]


@pytest.mark.parametrize("broker", [SETTINGS], indirect=True)
def test_offsets_sent_to_a_transaction_commit_or_abort_with_it(broker: Broker) -> None:
    """Consume, produce and commit the consumer's offsets in one transaction
    (send_offsets_to_transaction: AddOffsetsToTxn, then TxnOffsetCommit): the offsets are
    the group's once the transaction commits, and not when it aborts."""
    from confluent_kafka import Consumer, TopicPartition

    _create_topic(broker.bootstrap)
    seed = _producer(broker.bootstrap, "castle-tx-seed")
    seed.init_transactions(30)
    seed.begin_transaction()
    for index in range(4):
        seed.produce(TOPIC, value=b"in-%d" % index, partition=0)
    seed.commit_transaction(30)

    group = "castle-txn-group"
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "enable.auto.commit": False,
                         "isolation.level": "read_committed", "auto.offset.reset": "earliest"})
    producer = _producer(broker.bootstrap, "castle-tx-offsets")
    producer.init_transactions(30)
    try:
        consumer.assign([TopicPartition(TOPIC, 0, 0)])
        got = []
        deadline = time.monotonic() + 30
        while len(got) < 2 and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and not message.error():
                got.append(message.value())
        assert got == [b"in-0", b"in-1"]

        producer.begin_transaction()
        producer.produce(TOPIC, value=b"out", partition=1)
        producer.send_offsets_to_transaction([TopicPartition(TOPIC, 0, 2)], consumer.consumer_group_metadata(), 30)
        producer.commit_transaction(30)

        def committed() -> int | None:
            (tp,) = consumer.committed([TopicPartition(TOPIC, 0)], timeout=10)
            return tp.offset if tp.offset >= 0 else None

        assert wait_until(committed, 30, "the transaction's offset") == 2

        producer.begin_transaction()
        producer.produce(TOPIC, value=b"out-aborted", partition=1)
        producer.send_offsets_to_transaction([TopicPartition(TOPIC, 0, 4)], consumer.consumer_group_metadata(), 30)
        producer.abort_transaction(30)
        (tp,) = consumer.committed([TopicPartition(TOPIC, 0)], timeout=10)
        assert tp.offset == 2, "an aborted transaction's offsets are dropped"
    finally:
        consumer.close()
    assert (1, b"out") in _read(broker.bootstrap, "read_committed", 5)
    assert (1, b"out-aborted") not in _read(broker.bootstrap, "read_committed", 5)


@pytest.mark.parametrize("broker", [SETTINGS], indirect=True)
def test_kafka_python_and_aiokafka_transactional_producers(broker: Broker) -> None:
    import asyncio

    from aiokafka import AIOKafkaProducer
    from kafka import KafkaProducer

    _create_topic(broker.bootstrap)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id="castle-tx-kafka-python")
    try:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(TOPIC, value=b"kafka-python-aborted", partition=0)
        producer.abort_transaction()
        producer.begin_transaction()
        producer.send(TOPIC, value=b"kafka-python", partition=0)
        producer.commit_transaction()
    finally:
        producer.close(timeout=10)

    async def aiokafka_transactions() -> None:
        aio = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id="castle-tx-aiokafka")
        await aio.start()
        try:
            async with aio.transaction():
                await aio.send_and_wait(TOPIC, b"aiokafka", partition=1)
            await aio.begin_transaction()
            await aio.send_and_wait(TOPIC, b"aiokafka-aborted", partition=1)
            await aio.abort_transaction()
        finally:
            await aio.stop()

    asyncio.run(asyncio.wait_for(aiokafka_transactions(), 60))
    assert _read(broker.bootstrap, "read_committed", 2) == [(0, b"kafka-python"), (1, b"aiokafka")]


@pytest.mark.parametrize("broker", [{**SETTINGS, "transaction.abort.timed.out.transaction.cleanup.interval.ms": 200}],
                         indirect=True)
def test_a_transaction_past_its_timeout_is_aborted_by_the_coordinator(broker: Broker) -> None:
    """Until the coordinator aborts it, an open transaction holds every read_committed
    consumer of its partition at its first record; the abort lets them past it."""
    from confluent_kafka import KafkaException, Producer

    _create_topic(broker.bootstrap)
    slow = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "castle-tx-slow",
                     "transaction.timeout.ms": 2_000})
    slow.init_transactions(30)
    slow.begin_transaction()
    slow.produce(TOPIC, value=b"never-committed", partition=0)
    assert slow.flush(30) == 0
    other = _producer(broker.bootstrap, "castle-tx-other")
    other.init_transactions(30)
    other.begin_transaction()
    other.produce(TOPIC, value=b"committed-later", partition=0)
    other.commit_transaction(30)

    def visible() -> list[tuple[int, bytes]] | None:
        return _read(broker.bootstrap, "read_committed", 1, timeout=3) or None

    assert wait_until(visible, 30, "the timed-out transaction to be aborted") == [(0, b"committed-later")]
    # Its producer was fenced by the abort's epoch bump: it cannot commit.
    with pytest.raises(KafkaException):
        slow.commit_transaction(10)
