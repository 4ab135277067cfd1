"""Produce and consume with each real client, in one shape the tests can compare.

A record is ``Rec(partition, key, value, headers, timestamp)`` with bytes keys and
values and headers as a tuple of ``(str, bytes)``; consumed records carry their offset
too. No consumer groups (not implemented yet): consumers assign every partition
themselves and never commit.
"""

from __future__ import annotations

import asyncio
import random
import time
from typing import Any, Callable, Iterable, NamedTuple, Sequence

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
BASE_TIMESTAMP = 1_700_000_000_000


class Rec(NamedTuple):
    partition: int
    key: bytes | None
    value: bytes
    headers: tuple[tuple[str, bytes], ...]
    timestamp: int


class Got(NamedTuple):
    partition: int
    offset: int
    key: bytes | None
    value: bytes
    headers: tuple[tuple[str, bytes], ...]
    timestamp: int

    def rec(self) -> Rec:
        return Rec(self.partition, self.key, self.value, self.headers, self.timestamp)


def make_records(count: int, partitions: int, tag: str, seed: int = 1) -> list[Rec]:
    """Keyed records with headers and explicit, distinct timestamps; values of mixed size
    and compressibility; every value unique (it starts with tag and index)."""
    rng = random.Random(seed)
    out = []
    for i in range(count):
        size = rng.choice((0, 3, 40, 200, 1000))
        filler = rng.randbytes(size) if i % 3 == 0 else (b"abc" * size)[:size]
        value = f"{tag}/{i}/".encode() + filler
        key = f"key-{i % 977}".encode() if i % 50 else None
        headers: tuple[tuple[str, bytes], ...]
        if i % 7 == 0:
            headers = ()
        else:
            headers = (("idx", str(i).encode()), ("tag", tag.encode()), ("bin", bytes([i % 256, 0, 255])))
        out.append(Rec(i % partitions, key, value, headers, BASE_TIMESTAMP + i * 3))
    return out


def by_partition(records: Iterable[Rec]) -> dict[int, list[Rec]]:
    out: dict[int, list[Rec]] = {}
    for r in records:
        out.setdefault(r.partition, []).append(r)
    return out


def assert_same(expected: Sequence[Rec], got: Sequence[Got]) -> None:
    """Per partition: the same records in produce order, offsets 0..n-1 without gaps."""
    want = by_partition(expected)
    have: dict[int, list[Got]] = {}
    for g in got:
        have.setdefault(g.partition, []).append(g)
    assert sorted(have) == sorted(want), f"partitions differ: got {sorted(have)}, want {sorted(want)}"
    for partition, records in want.items():
        got_here = sorted(have[partition], key=lambda g: g.offset)
        offsets = [g.offset for g in got_here]
        assert offsets == list(range(len(records))), f"partition {partition}: offsets not 0..{len(records) - 1}"
        assert len(got_here) == len(records), f"partition {partition}: {len(got_here)} records, want {len(records)}"
        for index, (g, r) in enumerate(zip(got_here, records)):
            assert g.rec() == r, f"partition {partition} offset {index}: got {g.rec()!r}, want {r!r}"


def _headers(raw: Any) -> tuple[tuple[str, Any], ...]:
    """(name, value) pairs; a null header value stays None."""
    if not raw:
        return ()
    return tuple((str(k), bytes(v) if v is not None else None) for k, v in raw)


# ---------------------------------------------------------------------- confluent-kafka
def confluent_produce(bootstrap: str, topic: str, records: Sequence[Rec], codec: str = "none",
                      timeout: float = 60.0, **config: Any) -> list[tuple[int, int]]:
    """Produce all records; returns (partition, offset) of each, in input order."""
    from confluent_kafka import Producer

    settings = {"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 5,
                "acks": "all", "enable.idempotence": True}
    settings.update(config)
    producer = Producer(settings)
    results: list[Any] = [None] * len(records)
    errors: list[str] = []

    def report(index: int) -> Callable[[Any, Any], None]:
        def done(err: Any, msg: Any) -> None:
            if err is not None:
                errors.append(f"record {index}: {err}")
            else:
                results[index] = (msg.partition(), msg.offset())
        return done

    deadline = time.monotonic() + timeout
    for index, r in enumerate(records):
        while True:
            try:
                producer.produce(topic, value=r.value, key=r.key, partition=r.partition, timestamp=r.timestamp,
                                 headers=list(r.headers) or None, on_delivery=report(index))
                break
            except BufferError:
                producer.poll(0.05)
                assert time.monotonic() < deadline, "producer queue stayed full"
        if index % 1000 == 0:
            producer.poll(0)
    remaining = producer.flush(max(1.0, deadline - time.monotonic()))
    assert remaining == 0, f"{remaining} records not delivered in time"
    assert not errors, errors[:5]
    return results


def confluent_consume(bootstrap: str, topic: str, partitions: Iterable[int], count: int, timeout: float = 60.0,
                      start: int | None = None, **config: Any) -> list[Got]:
    """Assign the partitions from ``start`` (None: the beginning, via ListOffsets) and read
    ``count`` records."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    settings = {"bootstrap.servers": bootstrap, "group.id": "castle-tests-unused", "enable.auto.commit": False,
                "enable.auto.offset.store": False, "enable.partition.eof": False}
    settings.update(config)
    consumer = Consumer(settings)
    got: list[Got] = []
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING if start is None else start) for p in partitions])
        deadline = time.monotonic() + timeout
        while len(got) < count:
            assert time.monotonic() < deadline, f"consumed {len(got)} of {count} records before the deadline"
            for msg in consumer.consume(num_messages=10000, timeout=0.5):
                assert msg.error() is None, msg.error()
                _type, timestamp = msg.timestamp()
                got.append(Got(msg.partition(), msg.offset(), msg.key(), msg.value() or b"", _headers(msg.headers()),
                               timestamp))
    finally:
        consumer.close()
    return got


# ---------------------------------------------------------------------- kafka-python
def kafka_python_produce(bootstrap: str, topic: str, records: Sequence[Rec], codec: str = "none",
                         timeout: float = 60.0, **config: Any) -> list[tuple[int, int]]:
    from kafka import KafkaProducer

    settings: dict[str, Any] = {"bootstrap_servers": bootstrap, "compression_type": None if codec == "none" else codec,
                                "linger_ms": 5, "acks": "all"}
    settings.update(config)
    producer = KafkaProducer(**settings)
    try:
        futures = [producer.send(topic, value=r.value, key=r.key, partition=r.partition, timestamp_ms=r.timestamp,
                                 headers=list(r.headers)) for r in records]
        producer.flush(timeout)
        out = []
        for future in futures:
            meta = future.get(timeout=1)
            out.append((meta.partition, meta.offset))
        return out
    finally:
        producer.close(5)


def kafka_python_consume(bootstrap: str, topic: str, partitions: Iterable[int], count: int, timeout: float = 60.0,
                         start: int | None = None, **config: Any) -> list[Got]:
    from kafka import KafkaConsumer, TopicPartition

    settings: dict[str, Any] = {"bootstrap_servers": bootstrap, "group_id": None, "enable_auto_commit": False}
    settings.update(config)
    consumer = KafkaConsumer(**settings)
    got: list[Got] = []
    try:
        tps = [TopicPartition(topic, p) for p in partitions]
        consumer.assign(tps)
        if start is None:
            consumer.seek_to_beginning(*tps)
        else:
            for tp in tps:
                consumer.seek(tp, start)
        deadline = time.monotonic() + timeout
        while len(got) < count:
            assert time.monotonic() < deadline, f"consumed {len(got)} of {count} records before the deadline"
            for _tp, messages in consumer.poll(timeout_ms=500, max_records=10000).items():
                for m in messages:
                    got.append(Got(m.partition, m.offset, m.key, m.value or b"", _headers(m.headers), m.timestamp))
    finally:
        consumer.close()
    return got


# ---------------------------------------------------------------------- aiokafka
def aiokafka_produce(bootstrap: str, topic: str, records: Sequence[Rec], codec: str = "none",
                     timeout: float = 60.0, **config: Any) -> list[tuple[int, int]]:
    async def run() -> list[tuple[int, int]]:
        from aiokafka import AIOKafkaProducer

        settings: dict[str, Any] = {"bootstrap_servers": bootstrap,
                                    "compression_type": None if codec == "none" else codec,
                                    "linger_ms": 5, "acks": "all", "enable_idempotence": True}
        settings.update(config)
        producer = AIOKafkaProducer(**settings)
        await producer.start()
        try:
            futures = []
            for r in records:
                futures.append(await producer.send(topic, value=r.value, key=r.key, partition=r.partition,
                                                   timestamp_ms=r.timestamp, headers=list(r.headers)))
            metas = await asyncio.wait_for(asyncio.gather(*futures), timeout)
            return [(m.partition, m.offset) for m in metas]
        finally:
            await producer.stop()

    return asyncio.run(run())


def aiokafka_consume(bootstrap: str, topic: str, partitions: Iterable[int], count: int, timeout: float = 60.0,
                     start: int | None = None, **config: Any) -> list[Got]:
    async def run() -> list[Got]:
        from aiokafka import AIOKafkaConsumer, TopicPartition

        settings: dict[str, Any] = {"bootstrap_servers": bootstrap, "group_id": None, "enable_auto_commit": False}
        settings.update(config)
        consumer = AIOKafkaConsumer(**settings)
        await consumer.start()
        got: list[Got] = []
        try:
            tps = [TopicPartition(topic, p) for p in partitions]
            consumer.assign(tps)
            if start is None:
                await consumer.seek_to_beginning(*tps)
            else:
                for tp in tps:
                    consumer.seek(tp, start)
            deadline = time.monotonic() + timeout
            while len(got) < count:
                assert time.monotonic() < deadline, f"consumed {len(got)} of {count} records before the deadline"
                batches = await consumer.getmany(timeout_ms=500, max_records=10000)
                for _tp, messages in batches.items():
                    for m in messages:
                        got.append(Got(m.partition, m.offset, m.key, m.value or b"", _headers(m.headers), m.timestamp))
        finally:
            await consumer.stop()
        return got

    return asyncio.run(run())


PRODUCERS: dict[str, Callable[..., list[tuple[int, int]]]] = {
    "confluent": confluent_produce, "kafka-python": kafka_python_produce, "aiokafka": aiokafka_produce,
}
CONSUMERS: dict[str, Callable[..., list[Got]]] = {
    "confluent": confluent_consume, "kafka-python": kafka_python_consume, "aiokafka": aiokafka_consume,
}


# ---------------------------------------------------------------------- topics, by each client's admin API
def confluent_create_topic(bootstrap: str, topic: str, partitions: int, configs: dict[str, str] | None = None) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1, config=configs or {})],
                                  operation_timeout=10, request_timeout=15)
    futures[topic].result(timeout=20)


def kafka_python_create_topic(bootstrap: str, topic: str, partitions: int, configs: dict[str, str] | None = None) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(topic, partitions, 1, topic_configs=configs or {})], timeout_ms=15000)
    finally:
        admin.close()


def aiokafka_create_topic(bootstrap: str, topic: str, partitions: int, configs: dict[str, str] | None = None) -> None:
    async def run() -> None:
        from aiokafka.admin import AIOKafkaAdminClient, NewTopic

        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        await admin.start()
        try:
            response = await admin.create_topics([NewTopic(topic, partitions, 1, topic_configs=configs or {})])
            for entry in response.topic_errors:
                assert entry[1] == 0, f"create_topics: {entry}"
        finally:
            await admin.close()

    asyncio.run(run())


CREATE_TOPIC: dict[str, Callable[..., None]] = {
    "confluent": confluent_create_topic, "kafka-python": kafka_python_create_topic, "aiokafka": aiokafka_create_topic,
}
