"""Exactly-once with confluent-kafka (librdkafka) against one broker, judged by reading
everything back: rounds of committed and aborted transactions over three partitions, and a
consume-transform-produce loop whose aborted round is redone, each input's output once.
(tests/integration/broker/test_transactions.py covers fencing, restarts, timeouts and the
other clients.)

What a read_committed consumer must see: every record of every committed transaction, in
order, and nothing of an aborted or still open one; a read_uncommitted consumer sees all the
data records (control batches, the markers, take offsets but are never handed to the app).
"""

from __future__ import annotations

import time
import uuid
from typing import Any, Iterable

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.integration.conftest import shared_broker

pytestmark = [pytest.mark.integration, pytest.mark.transactions]


@pytest.fixture(scope="module")
def broker(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """One broker for the module: each test keeps to topics, transactional ids and groups of its own."""
    yield from shared_broker(request, tmp_path_factory)


TIMEOUT = 30.0


def _create_topics(broker: Any, partitions: int, *names: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    futures = admin.create_topics([NewTopic(name, partitions, 1) for name in names], operation_timeout=10)
    for future in futures.values():
        future.result(timeout=TIMEOUT)


def _producer(broker: Any, transactional_id: str, **extra: Any) -> Producer:
    return Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": transactional_id,
                     "transaction.timeout.ms": 20_000, "linger.ms": 5, **extra})


def _read_all(broker: Any, topic: str, partitions: int, isolation: str, expect: int,
              settle: float = 1.0) -> list[tuple[int, int, bytes]]:
    """(partition, offset, value) of every record an assigned consumer reads from the start:
    until ``expect`` records came, then ``settle`` seconds more to show nothing else does."""
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"reader-{uuid.uuid4()}",
                         "isolation.level": isolation, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        got: list[tuple[int, int, bytes]] = []
        deadline = time.monotonic() + TIMEOUT
        settle_until: float | None = None
        while time.monotonic() < deadline:
            if len(got) >= expect:
                settle_until = settle_until or time.monotonic() + settle
                if time.monotonic() >= settle_until:
                    break
            message = consumer.poll(0.2)
            if message is None:
                continue
            assert message.error() is None, message.error()
            got.append((message.partition(), message.offset(), message.value()))
        return got
    finally:
        consumer.close()


def _values(records: Iterable[tuple[int, int, bytes]]) -> list[bytes]:
    return sorted(value for _p, _o, value in records)


def test_confluent_commit_and_abort_seen_by_read_committed_and_uncommitted(broker: Any) -> None:
    _create_topics(broker, 3, "tx-basic")
    producer = _producer(broker, "tx-basic-producer")
    producer.init_transactions(TIMEOUT)
    committed, aborted = [], []
    for round_, commit in enumerate((True, False, True, False, True)):
        producer.begin_transaction()
        for i in range(30):
            value = f"r{round_}-{i}".encode()
            producer.produce("tx-basic", value, partition=i % 3)
            (committed if commit else aborted).append(value)
        if commit:
            producer.commit_transaction(TIMEOUT)
        else:
            producer.flush(TIMEOUT)  # the aborted records are in the log, then aborted
            producer.abort_transaction(TIMEOUT)
    read_committed = _read_all(broker, "tx-basic", 3, "read_committed", len(committed))
    assert _values(read_committed) == sorted(committed)
    # Per partition the committed records come in the order produced.
    for partition in range(3):
        mine = [v for p, _o, v in sorted(read_committed, key=lambda r: (r[0], r[1])) if p == partition]
        assert mine == [v for i, v in enumerate(committed) if int(v.split(b"-")[1]) % 3 == partition]
    read_uncommitted = _read_all(broker, "tx-basic", 3, "read_uncommitted", len(committed) + len(aborted))
    assert _values(read_uncommitted) == sorted(committed + aborted)
    # Each transaction's end wrote one marker per partition, at an offset no record has.
    offsets = {(p, o) for p, o, _v in read_uncommitted}
    for partition in range(3):
        mine = sorted(o for p, o in offsets if p == partition)
        assert mine[-1] - mine[0] + 1 > len(mine), "markers take offsets between the transactions"


def test_consume_transform_produce_redone_after_an_abort_writes_each_output_once(broker: Any) -> None:
    _create_topics(broker, 2, "ctp-in", "ctp-out")
    source = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(40):
        source.produce("ctp-in", f"{i}".encode(), partition=i % 2)
    source.flush(TIMEOUT)
    group = "ctp-group"

    def consumer() -> Consumer:
        made = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
        made.assign([TopicPartition("ctp-in", p) for p in range(2)])
        return made

    def transform(count: int, commit: bool) -> int:
        """Read ``count`` records, write their doubles, commit or abort with the offsets."""
        reader, writer = consumer(), _producer(broker, "ctp-transformer")
        try:
            writer.init_transactions(TIMEOUT)
            writer.begin_transaction()
            done, deadline = 0, time.monotonic() + TIMEOUT
            while done < count and time.monotonic() < deadline:
                message = reader.poll(0.2)
                if message is None or message.error():
                    continue
                writer.produce("ctp-out", str(int(message.value()) * 2).encode(), partition=message.partition())
                done += 1
            writer.send_offsets_to_transaction(reader.position(reader.assignment()), reader.consumer_group_metadata(),
                                               TIMEOUT)
            writer.commit_transaction(TIMEOUT) if commit else writer.abort_transaction(TIMEOUT)
            return done
        finally:
            reader.close()

    assert transform(10, commit=True) == 10
    assert transform(10, commit=False) == 10  # aborted: outputs dropped, offsets not moved
    assert transform(30, commit=True) == 30
    outputs = _values(_read_all(broker, "ctp-out", 2, "read_committed", 40))
    assert outputs == sorted(str(i * 2).encode() for i in range(40))  # each input once, none twice
    checker = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    try:
        committed = checker.committed([TopicPartition("ctp-in", p) for p in range(2)], TIMEOUT)
    finally:
        checker.close()
    assert sorted(tp.offset for tp in committed) == [20, 20]
