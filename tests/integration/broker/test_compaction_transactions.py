"""The worker's cleaner on a compacted topic holding transactions, against a real broker
(raw requests): the records of an aborted transaction disappear from the log (a
read_uncommitted fetch no longer returns them), while what a read_committed fetch
returns stays the same."""

from __future__ import annotations

import time

import pytest

from broker.partitions.remote_partition import coordinator_client_id
from storage.records import Record, encode_batch, iter_batches
from tests.integration.conftest import Broker
from tests.integration.coordination.test_group_protocol import request
from tests.integration.kio_client import KioClient
from tests.integration.protocol.test_leader_epochs import _prove_broker
from tests.integration.protocol.test_transactions_wire import (
    PRODUCE,
    READ_COMMITTED,
    READ_UNCOMMITTED,
    broker_secret,
    create_topic,
    fetch,
    marker,
    transactional_producer,
    txn_id,
    write_markers,
)

pytestmark = [pytest.mark.integration, pytest.mark.transactions, pytest.mark.timeout(120)]

COMPACTED = pytest.mark.parametrize("broker", [{
    "num.partitions": 2, "log.cleanup.policy": "compact", "log.segment.bytes": 4096,
    "log.cleaner.backoff.ms": 200, "log.cleaner.min.cleanable.ratio": 0.01}], indirect=True)


def produce(client: KioClient, topic: str, pairs: list[tuple[bytes, bytes]], *, producer: tuple[int, int] | None = None,
            sequence: int = -1) -> None:
    records = [Record(i, int(time.time() * 1000), key, value) for i, (key, value) in enumerate(pairs)]
    batch = encode_batch(records, producer_id=producer[0] if producer else -1,
                         producer_epoch=producer[1] if producer else -1, base_sequence=sequence,
                         is_transactional=producer is not None)
    answer = client.call(PRODUCE, 9, request(PRODUCE, 9, transactional_id=txn_id(topic) if producer else None,
                                             acks=-1, timeout=5000, topic_data=[{"name": topic, "partition_data": [
                                                 {"index": 0, "records": batch}]}]))
    assert answer.responses[0].partition_responses[0].error_code == 0


def values(client: KioClient, topic: str, isolation: int) -> list[tuple[bytes, bytes]]:
    """(key, value) of every data record from offset 0; read_committed drops the aborted
    transactions the answer names, as a consumer does."""
    out: list[tuple[bytes, bytes]] = []
    offset = 0
    while True:
        answer = fetch(client, topic, 0, offset, isolation)
        assert answer.error_code == 0
        aborted = {(int(a.producer_id), int(a.first_offset)) for a in answer.aborted_transactions or []}
        skipping: set[int] = set()
        last = offset
        for header, records in iter_batches(answer.records or b""):
            last = header.next_offset
            skipping |= {pid for pid, first in aborted if first <= header.last_offset}
            aborted = {(pid, first) for pid, first in aborted if first > header.last_offset}
            if header.is_control:
                skipping.discard(header.producer_id)
            elif not (header.is_transactional and header.producer_id in skipping):
                out.extend((r.key, r.value) for r in records)
        if last == offset:
            return out
        offset = last


@COMPACTED
def test_the_cleaner_removes_an_aborted_transaction_and_read_committed_sees_no_change(broker: Broker) -> None:
    topic = "txn-compacted"
    with KioClient(broker.bootstrap) as client:
        create_topic(client, topic)
        producer = transactional_producer(client, topic, (0,))
        produce(client, topic, [(b"k1", b"aborted-1"), (b"k2", b"aborted-2")], producer=producer, sequence=0)
    with KioClient(broker.bootstrap, client_id=coordinator_client_id(1)) as coordinator:
        assert _prove_broker(coordinator, broker_secret(broker), 0) == 0
        assert set(write_markers(coordinator, [marker(producer, False, topic, [0])]).values()) == {0}
    with KioClient(broker.bootstrap) as client:
        produce(client, topic, [(b"k3", b"committed-3")], producer=producer, sequence=2)
    with KioClient(broker.bootstrap, client_id=coordinator_client_id(1)) as coordinator:
        assert _prove_broker(coordinator, broker_secret(broker), 0) == 0
        assert set(write_markers(coordinator, [marker(producer, True, topic, [0])]).values()) == {0}
    with KioClient(broker.bootstrap) as client:
        # Still in the active segment: nothing is cleanable yet.
        committed = values(client, topic, READ_COMMITTED)
        assert committed == [(b"k3", b"committed-3")]
        assert (b"k1", b"aborted-1") in values(client, topic, READ_UNCOMMITTED)
        plain = [(b"p%d" % i, b"x" * 700) for i in range(12)]
        for pair in plain:  # rolls segments: the transactions' segment is sealed, the cleaner may take it
            produce(client, topic, [pair])
        deadline = time.monotonic() + 60
        while (b"k1", b"aborted-1") in values(client, topic, READ_UNCOMMITTED):
            assert time.monotonic() < deadline, "the cleaner never removed the aborted transaction"
            time.sleep(0.3)
        uncommitted = values(client, topic, READ_UNCOMMITTED)
        assert (b"k2", b"aborted-2") not in uncommitted and (b"k3", b"committed-3") in uncommitted
        assert values(client, topic, READ_COMMITTED) == committed + plain
