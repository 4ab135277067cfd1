"""Idempotent producers against a real broker: InitProducerId, duplicates acknowledged
with their original offsets, gaps and stale epochs refused, state kept across a restart
(rebuilt from producer snapshots and the log), and librdkafka's idempotent producer."""

from __future__ import annotations

import time
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from storage.records import Record, encode_batch
from tests.integration.kio_client import KioClient
from tests.integration.protocol.test_protocol_raw import _create_topic, _produce, _req

pytestmark = pytest.mark.integration


def _idempotent_batch(producer_id: int, epoch: int, sequence: int, values: list[bytes]) -> bytes:
    now = int(time.time() * 1000)
    return encode_batch([Record(i, now, None, v, ()) for i, v in enumerate(values)],
                        producer_id=producer_id, producer_epoch=epoch, base_sequence=sequence)


def _answer(client: KioClient, batch: bytes) -> tuple[int, int]:
    part = _produce(client, 9, "idem", batch).responses[0].partition_responses[0]
    return part.error_code, part.base_offset


def test_sequences_duplicates_and_epochs_survive_a_restart(broker: Any) -> None:
    with KioClient(broker.bootstrap) as client:
        _create_topic(client, "idem")
        init = client.call(22, 4, _req(22, 4, {"transactional_id": None, "transaction_timeout": 60000,
                                               "producer_id": -1, "producer_epoch": -1}))
        assert init.error_code == 0 and init.producer_id >= 0
        pid = init.producer_id
        other = client.call(22, 4, _req(22, 4, {"transactional_id": None, "transaction_timeout": 60000,
                                                "producer_id": -1, "producer_epoch": -1}))
        assert other.producer_id != pid  # ids are never handed out twice
        first = _idempotent_batch(pid, 0, 0, [b"a", b"b"])
        assert _answer(client, first) == (0, 0)
        assert _answer(client, first) == (0, 0)  # a retry: acknowledged with its original offset
        assert _answer(client, _idempotent_batch(pid, 0, 5, [b"gap"]))[0] == 45  # OUT_OF_ORDER_SEQUENCE_NUMBER
        assert _answer(client, _idempotent_batch(pid, 0, 2, [b"c"])) == (0, 2)
        bumped = client.call(22, 4, _req(22, 4, {"transactional_id": None, "transaction_timeout": 60000,
                                                 "producer_id": pid, "producer_epoch": 0}))
        assert (bumped.producer_id, bumped.producer_epoch) == (pid, 1)
        assert _answer(client, _idempotent_batch(pid, 1, 0, [b"d"])) == (0, 3)
        assert _answer(client, _idempotent_batch(pid, 0, 3, [b"zombie"]))[0] == 47  # INVALID_PRODUCER_EPOCH
    broker.stop()
    broker.start()
    with KioClient(broker.bootstrap) as client:
        assert _answer(client, _idempotent_batch(pid, 1, 0, [b"d"])) == (0, 3)  # still known as a duplicate
        assert _answer(client, _idempotent_batch(pid, 1, 1, [b"e"])) == (0, 4)
        assert _answer(client, _idempotent_batch(pid, 1, 9, [b"gap"]))[0] == 45
        fresh = client.call(22, 4, _req(22, 4, {"transactional_id": None, "transaction_timeout": 60000,
                                                "producer_id": -1, "producer_epoch": -1}))
        assert fresh.producer_id not in (pid, other.producer_id)  # the id block was persisted


def test_librdkafka_idempotent_producer(broker: Any) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True, "linger.ms": 5})
    acked: list[int] = []

    def delivered(error: Any, message: Any) -> None:
        assert error is None, error
        acked.append(message.offset())

    for i in range(2000):
        producer.produce("idem-rdkafka", value=b"%d" % i, partition=0, on_delivery=delivered)
        producer.poll(0)
    assert producer.flush(30) == 0
    assert sorted(acked) == list(range(2000))
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused", "enable.auto.commit": False})
    consumer.assign([TopicPartition("idem-rdkafka", 0, 0)])
    values = []
    deadline = time.monotonic() + 30
    while len(values) < 2000 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            values.append(int(message.value()))
    consumer.close()
    assert values == list(range(2000))
