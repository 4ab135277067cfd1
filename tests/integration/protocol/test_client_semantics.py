"""Client-visible semantics beyond the round trip: offset reset after OUT_OF_RANGE,
LogAppendTime topics, null header values and null values, acks=0."""

from __future__ import annotations

import os
import time

import pytest

from tests.integration.clients import CONSUMERS, PRODUCERS, Rec, assert_same, confluent_create_topic, make_records
from tests.integration.conftest import shared_broker

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


@pytest.fixture(scope="module")
def broker(request, tmp_path_factory):
    """One broker per distinct setting of the module's tests: each keeps to topics of its own."""
    yield from shared_broker(request, tmp_path_factory)


def _confluent_consumer(broker, **config):
    from confluent_kafka import Consumer

    settings = {"bootstrap.servers": broker.bootstrap, "group.id": "castle-tests-unused", "enable.auto.commit": False}
    settings.update(config)
    return Consumer(settings)


def _poll(consumer, count, timeout=15.0):
    got = []
    deadline = time.monotonic() + timeout
    while len(got) < count:
        assert time.monotonic() < deadline, f"got {len(got)} of {count} messages"
        msg = consumer.poll(0.2)
        if msg is not None:
            assert msg.error() is None, msg.error()
            got.append(msg)
    return got


@pytest.mark.parametrize("broker", [{"num.partitions": 1}], indirect=True)
def test_offset_out_of_range_resets_to_earliest_and_latest(broker):
    from confluent_kafka import Producer, TopicPartition

    records = make_records(20, 1, tag="oor")
    PRODUCERS["confluent"](broker.bootstrap, "oor", records)
    earliest = _confluent_consumer(broker, **{"auto.offset.reset": "earliest"})
    earliest.assign([TopicPartition("oor", 0, 1000)])
    assert [m.offset() for m in _poll(earliest, 20)] == list(range(20))
    earliest.close()

    latest = _confluent_consumer(broker, **{"auto.offset.reset": "latest"})
    latest.assign([TopicPartition("oor", 0, 1000)])
    # Reset to the end (20): only records produced afterwards arrive, never 0..19.
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    deadline = time.monotonic() + 15
    msg = None
    sent = 0
    while msg is None:
        assert time.monotonic() < deadline, "nothing arrived after the reset to the end"
        producer.produce("oor", value=b"after-%d" % sent, partition=0)
        producer.flush(5)
        sent += 1
        msg = latest.poll(0.3)
    assert msg.error() is None, msg.error()
    assert msg.offset() >= 20 and msg.value().startswith(b"after-"), (msg.offset(), msg.value())
    latest.close()


@pytest.mark.parametrize("client", list(PRODUCERS))
def test_log_append_time_topic(broker, client):
    """message.timestamp.type=LogAppendTime: the broker's clock replaces the producer's
    timestamp, reported in the produce answer and in what consumers read."""
    topic = f"lat-{client}"
    confluent_create_topic(broker.bootstrap, topic, 1, {"message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    records = [Rec(0, b"k%d" % i, b"v%d" % i, (), 1000 + i) for i in range(50)]
    PRODUCERS[client](broker.bootstrap, topic, records)
    after = int(time.time() * 1000)
    got = CONSUMERS[client](broker.bootstrap, topic, [0], len(records))
    assert [g.value for g in sorted(got, key=lambda g: g.offset)] == [r.value for r in records]
    for g in got:
        assert before - 1000 <= g.timestamp <= after + 1000, f"timestamp {g.timestamp} is not the append time"


def test_null_values_and_null_header_values(broker):
    """A null header value and an empty value survive as such."""
    from confluent_kafka import Producer, TopicPartition

    confluent_create_topic(broker.bootstrap, "nulls", 1)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    producer.produce("nulls", value=None, key=b"tombstone", partition=0, headers=[("nothing", None), ("empty", b"")])
    producer.produce("nulls", value=b"", key=None, partition=0)
    assert producer.flush(10) == 0
    consumer = _confluent_consumer(broker)
    consumer.assign([TopicPartition("nulls", 0, 0)])
    first, second = _poll(consumer, 2)
    consumer.close()
    assert (first.key(), first.value(), first.headers()) == (b"tombstone", None, [("nothing", None), ("empty", b"")])
    assert (second.key(), second.value(), second.headers()) == (None, b"", None)
    got = CONSUMERS["kafka-python"](broker.bootstrap, "nulls", [0], 2)
    assert sorted(got)[0].headers == (("nothing", None), ("empty", b""))


@pytest.mark.parametrize("broker", [{"num.partitions": 2}], indirect=True)
def test_acks_zero(broker):
    """acks=0: no answers, yet every record is appended (same connection, in order)."""
    records = make_records(3000, 2, tag="acks0")
    PRODUCERS["confluent"](broker.bootstrap, "acks0", records, acks=0, **{"enable.idempotence": False})
    got = CONSUMERS["aiokafka"](broker.bootstrap, "acks0", range(2), len(records))
    assert_same(records, got)


@pytest.mark.parametrize("broker", [{"num.partitions": 3, "log.segment.bytes": 64 * 1024}], indirect=True)
def test_tailing_consumer_across_segment_rolls(broker):
    """Small segments roll every few hundred records while a consumer tails the topic
    concurrently (reads from the active segment of another worker's partition, by path
    and inode, as it rolls); everything arrives once, in order."""
    import threading

    records = make_records(30_000, 3, tag="tail", seed=4)
    got: list = []
    errors: list[str] = []

    def consume() -> None:
        try:
            got.extend(CONSUMERS["confluent"](broker.bootstrap, "tail", range(3), len(records), start=0, timeout=90))
        except BaseException as exc:  # reported below
            errors.append(repr(exc))

    confluent_create_topic(broker.bootstrap, "tail", 3)
    thread = threading.Thread(target=consume)
    thread.start()
    try:
        PRODUCERS["confluent"](broker.bootstrap, "tail", records, codec="none", **{"linger.ms": 1, "batch.num.messages": 50})
    finally:
        thread.join(100)
    assert not errors, errors
    assert_same(records, got)
    segments = [name for name in os.listdir(os.path.join(broker.log_dir, "tail-0")) if name.endswith(".log")]
    assert len(segments) > 5, segments
