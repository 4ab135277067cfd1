"""Long-poll: a consumer parked in a Fetch with a long fetch.wait.max.ms gets a record
produced later promptly, whether the partition's owner is the worker holding the
consumer's connection or another one (woken by an IPC note)."""

from __future__ import annotations

import threading
import time

import pytest

from tests.integration.clients import Rec, confluent_create_topic, confluent_produce
from tests.integration.conftest import partition_owned_by, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

WAIT_MS = 10_000
PROMPT = 8.0  # a fetch that was not woken would answer only after ~WAIT_MS - 1 s


def _fetches(broker) -> int:
    return sum(s["fetch_requests"] for s in broker.stats())


def _run_consumer(consume_one, partitions, arrived: dict, ready: threading.Event, errors: list) -> threading.Thread:
    def run() -> None:
        try:
            consume_one(partitions, arrived, ready)
        except Exception as exc:  # reported by the test
            errors.append(repr(exc))
            ready.set()
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def _confluent_consumer(broker, topic):
    def consume(partitions, arrived, ready):
        from confluent_kafka import Consumer
        from confluent_kafka import TopicPartition as TP

        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "castle-tests-unused",
                             "enable.auto.commit": False, "fetch.wait.max.ms": WAIT_MS, "fetch.min.bytes": 1,
                             "socket.timeout.ms": WAIT_MS + 20_000})
        try:
            consumer.assign([TP(topic, p, 0) for p in partitions])
            ready.set()
            deadline = time.monotonic() + 60
            while len(arrived) < len(partitions) and time.monotonic() < deadline:
                msg = consumer.poll(0.1)
                if msg is not None and msg.error() is None:
                    arrived[msg.partition()] = time.monotonic()
        finally:
            consumer.close()
    return consume


def _kafka_python_consumer(broker, topic):
    def consume(partitions, arrived, ready):
        from kafka import KafkaConsumer
        from kafka import TopicPartition as TP

        consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None, enable_auto_commit=False,
                                 fetch_max_wait_ms=WAIT_MS, fetch_min_bytes=1, request_timeout_ms=WAIT_MS + 20_000)
        try:
            tps = [TP(topic, p) for p in partitions]
            consumer.assign(tps)
            for tp in tps:
                consumer.seek(tp, 0)
            ready.set()
            deadline = time.monotonic() + 60
            while len(arrived) < len(partitions) and time.monotonic() < deadline:
                for tp, messages in consumer.poll(timeout_ms=100).items():
                    if messages:
                        arrived[tp.partition] = time.monotonic()
        finally:
            consumer.close()
    return consume


@pytest.mark.parametrize("client", ["confluent", "kafka-python"])
@pytest.mark.parametrize("broker", [{"workers": 2, "num.partitions": 4}], indirect=True)
def test_parked_fetch_wakes_on_append(broker, client):
    topic = f"long-poll-{client}"
    confluent_create_topic(broker.bootstrap, topic, 4)
    # One partition owned by each worker: whichever worker holds the consumer's
    # connection, one wake-up is local and one comes over IPC from the owner.
    partitions = [partition_owned_by(topic, w, broker.workers, 4) for w in range(broker.workers)]

    consume = {"confluent": _confluent_consumer, "kafka-python": _kafka_python_consumer}[client](broker, topic)
    arrived: dict[int, float] = {}
    ready = threading.Event()
    errors: list[str] = []
    thread = _run_consumer(consume, partitions, arrived, ready, errors)
    assert ready.wait(20) and not errors, errors

    for partition in partitions:
        # Wait until the consumer's next fetch has reached the broker (it parks: nothing to read).
        seen = _fetches(broker)
        wait_until(lambda: _fetches(broker) > seen, 15, "the consumer to fetch")
        time.sleep(1.0)  # the scenario: the record comes a while after the fetch parked
        produced_at = time.monotonic()
        confluent_produce(broker.bootstrap, topic, [Rec(partition, b"k", f"late {partition}".encode(), (), 1)])
        wait_until(lambda: partition in arrived or errors, PROMPT + 2, f"the record of partition {partition}")
        assert not errors, errors
        latency = arrived[partition] - produced_at
        assert latency < PROMPT, f"partition {partition}: arrived {latency:.1f} s after produce (fetch not woken)"
    thread.join(20)
