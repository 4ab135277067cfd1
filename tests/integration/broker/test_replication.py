"""Replication across three real brokers sharing a real ZooKeeper, with unmodified clients.

Each partition has replicas on several brokers; the leader's high watermark is the
smallest log end in the ISR; acks=all answers once the ISR has the batch; the controller
(the elected coordinator process) elects a new leader from the ISR when a broker dies.
The faults are real: kill -9 of every process of a broker, SIGSTOP of a whole broker.
"""

from __future__ import annotations

import os
import time
import uuid
from typing import Any, Callable

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from storage.batch import HEADER_SIZE, parse_header
from storage.records import decode_batch
from tests.integration.conftest import Broker, wait_until
from tests.integration.coordination.test_cluster import cluster_settings, zk
from tests.integration.replication_history import History

pytestmark = [pytest.mark.integration, pytest.mark.zookeeper, pytest.mark.replication]

LAG_MS = 3000  # replica.lag.time.max.ms: a stopped follower leaves the ISR after this


@pytest.fixture
def three(broker_factory: Callable[..., Broker], zk_connect: str) -> list[Broker]:
    """Brokers 1, 2, 3 (2, 1 and 1 workers), each registered before the test goes on."""
    brokers = []
    for node_id, workers in ((1, 2), (2, 1), (3, 1)):
        broker = broker_factory(workers=workers, overrides={
            **cluster_settings(zk_connect, node_id), "replica.lag.time.max.ms": LAG_MS,
            "offsets.topic.replication.factor": 3})
        brokers.append(broker)
    client = zk(zk_connect)
    try:
        wait_until(lambda: len(client.get_children("/brokers/ids")) == 3, 30, "three brokers registered")
    finally:
        client.stop()
        client.close()
    return brokers


def bootstrap(brokers: list[Broker]) -> str:
    return ",".join(b.bootstrap for b in brokers if b.process is not None and b.process.poll() is None)


def create(brokers: list[Broker], topic: str, partitions: int, factor: int, configs: dict[str, str]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap(brokers)})
    futures = admin.create_topics([NewTopic(topic, partitions, factor, config=configs)], operation_timeout=30)
    futures[topic].result(30)


def describe(brokers: list[Broker], topic: str) -> dict[int, tuple[int, list[int], list[int]]]:
    """partition -> (leader, replicas, isr) as Metadata from the live brokers says."""
    admin = AdminClient({"bootstrap.servers": bootstrap(brokers)})
    meta = admin.list_topics(topic, timeout=10)
    return {p.id: (p.leader, list(p.replicas), list(p.isrs)) for p in meta.topics[topic].partitions.values()}


def broker_with_id(brokers: list[Broker], node_id: int) -> Broker:
    return brokers[node_id - 1]


def produce_acked(brokers: list[Broker], topic: str, values: list[str], history: History, acks: str = "all",
                  extra: dict[str, Any] | None = None) -> None:
    producer = Producer({"bootstrap.servers": bootstrap(brokers), "enable.idempotence": acks == "all", "acks": acks,
                         "linger.ms": 5, "message.timeout.ms": 60000, **(extra or {})})

    def report(err: Any, msg: Any) -> None:
        key = (msg.topic(), msg.partition())
        value = msg.value().decode()
        if err is None:
            history.ack(key, value, msg.offset())
        elif err.code() == KafkaError._MSG_TIMED_OUT:
            history.info(key, value)
        else:
            history.fail(key, value)

    for value in values:
        while True:
            try:
                producer.produce(topic, value=value.encode(), partition=hash(value) % 3, on_delivery=report)
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    assert producer.flush(90) == 0, "messages still in flight after 90 s"


def read_all(brokers: list[Broker], topic: str, partitions: int, history: History | None = None,
             timeout: float = 60) -> dict[int, list[tuple[int, str]]]:
    """Every record of every partition, from offset 0 to the high watermark."""
    consumer = Consumer({"bootstrap.servers": bootstrap(brokers), "group.id": f"check-{uuid.uuid4().hex}",
                         "enable.auto.commit": False, "enable.partition.eof": True})
    try:
        ends = {}
        for p in range(partitions):
            _low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            ends[p] = high
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        out: dict[int, list[tuple[int, str]]] = {p: [] for p in range(partitions)}
        deadline = time.monotonic() + timeout
        while any((out[p][-1][0] + 1 if out[p] else 0) < ends[p] for p in out):
            assert time.monotonic() < deadline, f"read {[len(v) for v in out.values()]} of {ends}"
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            out[msg.partition()].append((msg.offset(), msg.value().decode()))
        for p, records in out.items():
            if history is not None:
                history.final((topic, p), records)
        return out
    finally:
        consumer.close()


def test_replicated_topic_is_described_and_every_replica_holds_every_acked_record(three: list[Broker]) -> None:
    topic = "replicated"
    create(three, topic, 3, 3, {"min.insync.replicas": "2"})
    layout = wait_until(lambda: (d := describe(three, topic)) and all(len(isr) == 3 for _l, _r, isr in d.values()) and d,
                        30, "every partition with three in-sync replicas")
    assert {tuple(sorted(r)) for _l, r, _i in layout.values()} == {(1, 2, 3)}
    assert sorted(leader for leader, _r, _i in layout.values()) == [1, 2, 3]  # leaders spread
    history = History()
    produce_acked(three, topic, [f"v{i}" for i in range(600)], history)
    read_all(three, topic, 3, history)
    report = history.check()
    assert report.ok and report.acked == 600, report.summary()
    # Every replica's own files hold the same records at the same offsets (read from disk).
    expected = {p: [(o, v) for o, v in records] for p, records in read_all(three, topic, 3).items()}
    for broker in three:
        wait_until(lambda: log_records(broker, topic, 3) == expected, 30, f"broker {broker.bootstrap}'s copy")


def log_records(broker: Broker, topic: str, partitions: int) -> dict[int, list[tuple[int, str]]]:
    """(offset, value) of every record in a broker's own partition logs, read from its files
    batch by batch (a segment file is preallocated: its tail is zeros)."""
    out: dict[int, list[tuple[int, str]]] = {}
    for p in range(partitions):
        records: list[tuple[int, str]] = []
        directory = os.path.join(broker.log_dir, f"{topic}-{p}")
        for name in sorted(n for n in os.listdir(directory) if n.endswith(".log")):
            with open(os.path.join(directory, name), "rb") as handle:
                position = 0
                while True:
                    head = os.pread(handle.fileno(), HEADER_SIZE, position)
                    if len(head) < HEADER_SIZE or parse_header(head).batch_length == 0:
                        break
                    header = parse_header(head)
                    _h, decoded = decode_batch(os.pread(handle.fileno(), header.size, position))
                    records.extend((r.offset, (r.value or b"").decode()) for r in decoded)
                    position += header.size
        out[p] = records
    return out
