"""Clients that speak the versions Kafka 4.0 dropped: kafka-python pinned to an old broker
version writes message sets of magic 0 or 1 (Produce v1-2) and reads them back (Fetch
v1-3), and a modern client reads what they wrote (and the reverse), over a real broker."""

from __future__ import annotations

import socket
import struct
import warnings
from typing import Any, Iterator

import pytest

from tests.integration.conftest import Broker, shared_broker, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


@pytest.fixture(scope="module")
def broker(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    """One broker for the module: each test keeps to topics and groups of its own."""
    yield from shared_broker(request, tmp_path_factory)

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition


def _old_round_trip(broker: Any, topic: str, api_version: tuple[int, ...], compression: str | None) -> list[Any]:
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, api_version=api_version,
                             compression_type=compression, linger_ms=5)
    try:
        for i in range(50):
            producer.send(topic, key=f"k{i}".encode(), value=f"{topic} {i}".encode(), partition=0,
                          timestamp_ms=1_700_000_000_000 + i if api_version >= (0, 10) else None)
        producer.flush(30)
    finally:
        producer.close(10)
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, api_version=api_version, enable_auto_commit=False)
    try:
        consumer.assign([TopicPartition(topic, 0)])
        consumer.seek(TopicPartition(topic, 0), 0)
        got: list[Any] = []

        def drained() -> bool:
            for batch in consumer.poll(timeout_ms=500).values():
                got.extend(batch)
            return len(got) >= 50
        wait_until(drained, 60, f"50 records of {topic} through api_version {api_version}")
        return got
    finally:
        consumer.close()


OLD_CLIENTS = [((0, 10, 1), None), ((0, 10, 1), "gzip"), ((0, 10, 0), "lz4"), ((0, 9), None), ((0, 9), "snappy"), ((0, 8, 2), "gzip"),
               ((0, 9), "lz4")]


def test_kafka_python_pinned_to_an_old_broker_writes_and_reads_old_formats(broker: Any) -> None:
    """One broker for every (api_version, codec): each its own topic."""
    for api_version, compression in OLD_CLIENTS:
        _check_old_round_trip(broker, api_version, compression)


def _check_old_round_trip(broker: Any, api_version: tuple[int, ...], compression: str | None) -> None:
    topic = f"old-{'-'.join(map(str, api_version))}-{compression}"
    got = _old_round_trip(broker, topic, api_version, compression)
    assert [r.offset for r in got] == list(range(50))
    assert [r.value for r in got] == [f"{topic} {i}".encode() for i in range(50)]
    assert [r.key for r in got] == [f"k{i}".encode() for i in range(50)]
    if api_version >= (0, 10):
        assert [r.timestamp for r in got] == [1_700_000_000_000 + i for i in range(50)]
    # A modern client reads the same records from the v2 batches they were stored as.
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as ConfluentPartition

    modern = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": topic})
    modern.assign([ConfluentPartition(topic, 0, 0)])
    values: list[bytes] = []

    def read() -> bool:
        values.extend(m.value() for m in modern.consume(100, 0.5) if m.error() is None)
        return len(values) >= 50
    try:
        wait_until(read, 30, "the modern reader")
    finally:
        modern.close()
    assert values == [f"{topic} {i}".encode() for i in range(50)]


def test_an_old_reader_gets_what_a_modern_producer_wrote_without_headers(broker: Any) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": broker.bootstrap, "compression.type": "lz4", "linger.ms": 5})
    for i in range(20):
        producer.produce("modern-to-old", key=b"k", value=f"v{i}".encode(), partition=0, headers={"h": b"dropped"})
    assert producer.flush(30) == 0
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, api_version=(0, 10, 1), enable_auto_commit=False)
    try:
        consumer.assign([TopicPartition("modern-to-old", 0)])
        consumer.seek(TopicPartition("modern-to-old", 0), 0)
        got: list[Any] = []

        def drained() -> bool:
            for batch in consumer.poll(timeout_ms=500).values():
                got.extend(batch)
            return len(got) >= 20
        wait_until(drained, 60, "20 records down-converted")
    finally:
        consumer.close()
    assert [r.value for r in got] == [f"v{i}".encode() for i in range(20)]
    assert all(not r.headers for r in got)


def test_a_corrupt_message_set_in_produce_v2_gets_corrupt_message(broker: Any) -> None:
    """A raw Produce v2 whose magic 1 message fails its CRC32: CORRUPT_MESSAGE (2) on that
    partition, nothing written, the connection still answers."""
    message = struct.pack(">bbq", 1, 0, 1_700_000_000_000) + struct.pack(">i", -1) + struct.pack(">i", 3) + b"bad"
    entry = struct.pack(">I", 0xDEADBEEF) + message  # wrong CRC
    message_set = struct.pack(">qi", 0, len(entry)) + entry
    topic = b"corrupt-old"
    body = (struct.pack(">hi", 1, 5000) + struct.pack(">i", 1) + struct.pack(">h", len(topic)) + topic
            + struct.pack(">i", 1) + struct.pack(">ii", 0, len(message_set)) + message_set)
    from tests.integration.kio_client import KioClient
    from tests.integration.protocol.test_protocol_raw import _create_topic

    with KioClient(broker.bootstrap) as client:
        _create_topic(client, "corrupt-old")
    header = struct.pack(">hhih", 0, 2, 7, 4) + b"test"
    frame = header + body
    with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as sock:
        sock.sendall(struct.pack(">i", len(frame)) + frame)
        size = struct.unpack(">i", _read(sock, 4))[0]
        answer = _read(sock, size)
    correlation, = struct.unpack_from(">i", answer, 0)
    # responses[1]{name, partition_responses[1]{index, error_code, base_offset, log_append_time}}, throttle
    name_length, = struct.unpack_from(">h", answer, 8)
    index, error_code = struct.unpack_from(">ih", answer, 10 + name_length + 4)
    assert (correlation, index, error_code) == (7, 0, 2)


def _read(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        assert chunk, "connection closed"
        data += chunk
    return data


def test_an_0_9_consumer_finds_the_earliest_and_latest_offsets_with_list_offsets_v0(broker: Any) -> None:
    topic = "old-list-offsets"
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, api_version=(0, 9))
    try:
        for i in range(10):
            producer.send(topic, value=f"v{i}".encode(), partition=0)
        producer.flush(30)
    finally:
        producer.close(10)
    for reset, expected in (("earliest", 0), ("latest", 10)):
        consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, api_version=(0, 9), enable_auto_commit=False,
                                 auto_offset_reset=reset)
        try:
            partition = TopicPartition(topic, 0)
            consumer.assign([partition])
            assert consumer.position(partition, timeout_ms=30_000) == expected
        finally:
            consumer.close()


@pytest.mark.parametrize("api_version", [(0, 8, 2), (0, 8, 1)])
def test_kafka_python_of_kafka_0_8_commits_and_fetches_offsets(broker: Any, api_version: tuple[int, ...]) -> None:
    """(0, 8, 2) commits with OffsetCommit v1 and reads with OffsetFetch v1; (0, 8, 1) uses
    v0 of both (Kafka kept those in ZooKeeper; Castle keeps them in __consumer_offsets)."""
    from kafka.structs import OffsetAndMetadata

    topic = f"old-offsets-{api_version[2]}"
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, api_version=(0, 9))
    try:
        for i in range(5):
            producer.send(topic, value=b"x", partition=0)
        producer.flush(30)
    finally:
        producer.close(10)
    group = f"old-group-{api_version[2]}"
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, api_version=api_version, group_id=group,
                             enable_auto_commit=False)
    partition = TopicPartition(topic, 0)
    try:
        consumer.assign([partition])
        consumer.commit({partition: OffsetAndMetadata(3, "meta", -1)})
        assert consumer.committed(partition) == 3
    finally:
        consumer.close()
    # A modern client (OffsetFetch v5+) sees the same committed offset and metadata.
    modern = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=group, enable_auto_commit=False)
    try:
        committed = modern.committed(partition, metadata=True)
        assert (committed.offset, committed.metadata) == (3, "meta")
    finally:
        modern.close()


def test_zstd_data_answers_fetch_v3_with_unsupported_compression_type(broker: Any) -> None:
    """zstd has no magic 0/1 form: an old fetcher of a zstd batch gets
    UNSUPPORTED_COMPRESSION_TYPE (76) on that partition, and the connection still answers."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": broker.bootstrap, "compression.type": "zstd"})
    producer.produce("zstd-old", value=b"z" * 200, partition=0)
    assert producer.flush(30) == 0
    topic = b"zstd-old"
    body = (struct.pack(">iiii", -1, 0, 1, 1 << 20) + struct.pack(">i", 1) + struct.pack(">h", len(topic)) + topic
            + struct.pack(">i", 1) + struct.pack(">iqi", 0, 0, 1 << 20))
    frame = struct.pack(">hhih", 1, 3, 9, 4) + b"test" + body
    with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as sock:
        for _ in range(2):  # answered, then answered again on the same connection
            sock.sendall(struct.pack(">i", len(frame)) + frame)
            answer = _read(sock, struct.unpack(">i", _read(sock, 4))[0])
            # correlation, throttle, [topic: name, [partition: index, error_code, hw, records]]
            (correlation,) = struct.unpack_from(">i", answer, 0)
            (name_length,) = struct.unpack_from(">h", answer, 12)
            index, error_code, high_watermark, records_length = struct.unpack_from(">ihqi", answer, 14 + name_length + 4)
            assert (correlation, index, error_code, high_watermark, records_length) == (9, 0, 76, 1, 0)
