"""The data plane of transactions against a real broker (two workers), raw requests encoded
by kio: a producer's transactional batches, WriteTxnMarkers from a proven broker ending the
transaction on each partition (COMMIT on one, ABORT on the other), Fetch read_committed
answering the last stable offset and the aborted transactions, ListOffsets read_committed
the last stable offset; and WriteTxnMarkers refused to a connection that proved nothing,
whether it comes raw or from the coordinator's client (broker/partitions/remote_partition.py)."""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from broker.partitions.remote_partition import RemotePartitionClient, coordinator_client_id
from broker.security.inter_broker import ClientSecurity
from coordination.znodes import BrokerSecretZNode
from storage.records import CONTROL_TYPE_ABORT, CONTROL_TYPE_COMMIT, Record, encode_batch, iter_batches, parse_control_record
from storage.types import TopicPartition
from tests.integration.conftest import Broker
from tests.integration.coordination.test_group_protocol import request
from tests.integration.kio_client import KioClient, decode_response, read_frame
from tests.integration.protocol.test_leader_epochs import _prove_broker

pytestmark = [pytest.mark.integration, pytest.mark.transactions, pytest.mark.timeout(120)]
# Two partitions on two workers: the markers of one request reach both owners, one over the rings.
TWO_PARTITIONS = pytest.mark.parametrize("broker", [{"num.partitions": 2}], indirect=True)

PRODUCE, FETCH, LIST_OFFSETS, METADATA, INIT_PRODUCER_ID, ADD_PARTITIONS_TO_TXN, WRITE_TXN_MARKERS = 0, 1, 2, 3, 22, 24, 27
READ_UNCOMMITTED, READ_COMMITTED = 0, 1


def create_topic(client: KioClient, name: str) -> uuid.UUID:
    answer = client.call(METADATA, 12, request(METADATA, 12, topics=[{"name": name, "topic_id": uuid.UUID(int=0)}],
                                               allow_auto_topic_creation=True, include_topic_authorized_operations=False))
    assert answer.topics[0].error_code == 0 and len(answer.topics[0].partitions) == 2
    return answer.topics[0].topic_id


def txn_id(topic: str) -> str:
    return f"tx-{topic}"


def transactional_producer(client: KioClient, topic: str, partitions: tuple[int, ...] = (0, 1)) -> tuple[int, int]:
    """A producer id and epoch from the transaction coordinator, the topic's partitions
    added to its transaction (the brokers verify that before a transactional batch opens a
    transaction on a partition: KIP-890)."""
    deadline = time.monotonic() + 30
    while True:
        answer = client.call(INIT_PRODUCER_ID, 4, request(INIT_PRODUCER_ID, 4, transactional_id=txn_id(topic),
                                                          transaction_timeout=60_000, producer_id=-1, producer_epoch=-1))
        if answer.error_code == 0 or time.monotonic() > deadline:
            break
        time.sleep(0.1)  # the coordinator is loading
    assert answer.error_code == 0
    producer = int(answer.producer_id), int(answer.producer_epoch)
    added = client.call(ADD_PARTITIONS_TO_TXN, 3, request(
        ADD_PARTITIONS_TO_TXN, 3, v3_and_below_transactional_id=txn_id(topic), v3_and_below_producer_id=producer[0],
        v3_and_below_producer_epoch=producer[1], v3_and_below_topics=[{"name": topic, "partitions": list(partitions)}]))
    assert {int(p.partition_error_code) for t in added.results_by_topic_v3_and_below
            for p in t.results_by_partition} == {0}
    return producer


SAME = "same"  # produce_transactional's transactional id: the topic's producer's


def produce_transactional(client: KioClient, topic: str, partition: int, producer: tuple[int, int], sequence: int,
                          values: list[bytes], transactional_id: str | None = SAME) -> Any:
    records = [Record(i, 1_700_000_000_000 + i, None, value) for i, value in enumerate(values)]
    batch = encode_batch(records, producer_id=producer[0], producer_epoch=producer[1], base_sequence=sequence,
                         is_transactional=True)
    if transactional_id == SAME:
        transactional_id = txn_id(topic)
    answer = client.call(PRODUCE, 9, request(PRODUCE, 9, transactional_id=transactional_id, acks=-1, timeout=5000,
                                             topic_data=[{"name": topic, "partition_data": [
                                                 {"index": partition, "records": batch}]}]))
    return answer.responses[0].partition_responses[0]


def fetch(client: KioClient, topic: str, partition: int, offset: int, isolation: int, version: int = 12,
          topic_id: uuid.UUID | None = None) -> Any:
    """One partition's answer; v13+ names the topic by ``topic_id``."""
    answer = client.call(FETCH, version, request(
        FETCH, version, replica_id=-1, max_wait=0, min_bytes=0, max_bytes=1 << 20, isolation_level=isolation,
        session_id=0, session_epoch=-1, forgotten_topics_data=[], rack_id="",
        topics=[{"topic": topic, "topic_id": topic_id, "partitions": [{"partition": partition, "current_leader_epoch": -1,
                                                 "fetch_offset": offset, "last_fetched_epoch": -1,
                                                 "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}]))
    return answer.responses[0].partitions[0]


def latest(client: KioClient, topic: str, partition: int, isolation: int) -> int:
    answer = client.call(LIST_OFFSETS, 7, request(LIST_OFFSETS, 7, replica_id=-1, isolation_level=isolation, topics=[
        {"name": topic, "partitions": [{"partition_index": partition, "current_leader_epoch": -1, "timestamp": -1}]}]))
    found = answer.topics[0].partitions[0]
    assert found.error_code == 0
    return int(found.offset)


def write_markers(client: KioClient, markers: list[dict[str, Any]], version: int = 1) -> dict[tuple[int, str, int], int]:
    """WriteTxnMarkers; (producer id, topic, partition) -> error code."""
    answer = client.call(WRITE_TXN_MARKERS, version, request(WRITE_TXN_MARKERS, version, markers=markers))
    return {(int(m.producer_id), t.name, int(p.partition_index)): int(p.error_code)
            for m in answer.markers for t in m.topics for p in t.partitions}


def marker(producer: tuple[int, int], commit: bool, topic: str, partitions: list[int], coordinator_epoch: int = 0
           ) -> dict[str, Any]:
    return {"producer_id": producer[0], "producer_epoch": producer[1], "transaction_result": commit,
            "coordinator_epoch": coordinator_epoch, "transaction_version": 1,
            "topics": [{"name": topic, "partition_indexes": partitions}]}


def batches(records: bytes | None) -> list[tuple[int, int, bool, int | None]]:
    """(base offset, last offset, is control, control type) of each batch a Fetch answered."""
    out = []
    for header, rows in iter_batches(records or b""):
        kind = parse_control_record(rows[0]).type if header.is_control else None
        out.append((header.base_offset, header.base_offset + header.last_offset_delta, header.is_control, kind))
    return out


def broker_secret(broker: Broker) -> bytes:
    with open(os.path.join(broker.log_dir, "broker-secret.json"), "rb") as handle:
        return BrokerSecretZNode.decode(handle.read())


@TWO_PARTITIONS
def test_markers_from_a_broker_end_transactions_that_read_committed_fetches_then_see(broker: Broker) -> None:
    topic = "txn-wire"
    with KioClient(broker.bootstrap) as client:
        topic_id = create_topic(client, topic)
        producer = transactional_producer(client, topic)
        for partition in (0, 1):
            written = produce_transactional(client, topic, partition, producer, 0, [b"a", b"b"])
            assert (written.error_code, written.base_offset) == (0, 0)
        # A transactional batch needs the request's transactional id.
        refused = produce_transactional(client, topic, 0, producer, 2, [b"c"], transactional_id=None)
        assert refused.error_code == ErrorCode.transactional_id_authorization_failed

        for partition in (0, 1):
            # Open transactions: read_committed reads nothing yet, and is told why (LSO 0).
            open_txn = fetch(client, topic, partition, 0, READ_COMMITTED)
            assert (open_txn.error_code, open_txn.high_watermark, open_txn.last_stable_offset) == (0, 2, 0)
            assert not open_txn.records and list(open_txn.aborted_transactions) == []
            uncommitted = fetch(client, topic, partition, 0, READ_UNCOMMITTED)
            assert uncommitted.last_stable_offset == 0 and uncommitted.aborted_transactions is None
            assert batches(uncommitted.records) == [(0, 1, False, None)]
            assert (latest(client, topic, partition, READ_COMMITTED), latest(client, topic, partition, READ_UNCOMMITTED)) \
                == (0, 2)

    with KioClient(broker.bootstrap, client_id=coordinator_client_id(1)) as impostor:
        # A coordinator's client id proves nothing: refused, and nothing is written.
        codes = write_markers(impostor, [marker(producer, True, topic, [0, 1])])
        assert set(codes.values()) == {ErrorCode.cluster_authorization_failed} and len(codes) == 2
        assert latest(impostor, topic, 0, READ_UNCOMMITTED) == 2

    with KioClient(broker.bootstrap, client_id=coordinator_client_id(1)) as coordinator:
        assert _prove_broker(coordinator, broker_secret(broker), 0) == 0
        codes = write_markers(coordinator, [marker(producer, True, topic, [0, 7]), marker(producer, False, topic, [1])])
        assert codes == {(producer[0], topic, 0): 0, (producer[0], topic, 7): ErrorCode.unknown_topic_or_partition,
                         (producer[0], topic, 1): 0}

    with KioClient(broker.bootstrap) as client:
        committed = fetch(client, topic, 0, 0, READ_COMMITTED)
        assert (committed.high_watermark, committed.last_stable_offset) == (3, 3)
        assert list(committed.aborted_transactions) == []
        assert batches(committed.records) == [(0, 1, False, None), (2, 2, True, CONTROL_TYPE_COMMIT)]
        for version in (4, 12, 16):  # the classic encoding, the flexible one, and the newest
            aborted = fetch(client, topic, 1, 0, READ_COMMITTED, version, topic_id)
            assert aborted.last_stable_offset == 3
            assert [(a.producer_id, a.first_offset) for a in aborted.aborted_transactions] == [(producer[0], 0)]
            assert batches(aborted.records) == [(0, 1, False, None), (2, 2, True, CONTROL_TYPE_ABORT)]
        # Past the aborted transaction, it is no longer named.
        assert list(fetch(client, topic, 1, 3, READ_COMMITTED).aborted_transactions) == []
        assert [latest(client, topic, p, READ_COMMITTED) for p in (0, 1)] == [3, 3]


@TWO_PARTITIONS
def test_the_coordinators_client_writes_markers_only_with_the_broker_proof(broker: Broker) -> None:
    topic = "txn-client"
    with KioClient(broker.bootstrap) as client:
        create_topic(client, topic)
        producer = transactional_producer(client, topic)
        for partition in (0, 1):
            assert produce_transactional(client, topic, partition, producer, 0, [b"x"]).error_code == 0
    tps = [TopicPartition(topic, 0), TopicPartition(topic, 1)]

    async def scenario() -> tuple[dict[TopicPartition, int], dict[TopicPartition, int]]:
        plain = RemotePartitionClient(broker.host, broker.port, coordinator_client_id(2), timeout=10)
        proven = RemotePartitionClient(broker.host, broker.port, coordinator_client_id(2), timeout=10,
                                       security=ClientSecurity(None, None, proof=(broker_secret(broker), 0)))
        try:
            return (await plain.write_txn_markers(producer[0], producer[1], False, 2, tps),
                    await proven.write_txn_markers(producer[0], producer[1], False, 2, tps))
        finally:
            await plain.close()
            await proven.close()

    refused, written = asyncio.run(asyncio.wait_for(scenario(), 60))
    assert refused == {tp: ErrorCode.cluster_authorization_failed for tp in tps}
    assert written == {tp: 0 for tp in tps}
    with KioClient(broker.bootstrap) as client:
        for partition in (0, 1):
            aborted = fetch(client, topic, partition, 0, READ_COMMITTED)
            assert aborted.last_stable_offset == 2
            assert [(a.producer_id, a.first_offset) for a in aborted.aborted_transactions] == [(producer[0], 0)]


def consume_all(broker: Broker, topic: str, isolation: str, expected: int) -> list[bytes]:
    """The values a confluent-kafka (librdkafka) consumer with ``isolation.level`` reads from
    the start of both partitions, once it has ``expected`` of them (or after 20 s)."""
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as KafkaPartition

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"{topic}-{isolation}",
                         "enable.auto.commit": False, "isolation.level": isolation})
    values: list[bytes] = []
    try:
        consumer.assign([KafkaPartition(topic, p, 0) for p in (0, 1)])
        deadline = time.monotonic() + 20
        while len(values) < expected and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                values.append(message.value())
        time.sleep(0.5)  # and nothing more arrives
        while (message := consumer.poll(0.1)) is not None:
            if message.error() is None:
                values.append(message.value())
    finally:
        consumer.close()
    return values


def consume_all_kafka_python(broker: Broker, topic: str, expected: int) -> list[bytes]:
    """The same with kafka-python's read_committed consumer."""
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KafkaPartition

    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False,
                             isolation_level="read_committed", auto_offset_reset="earliest")
    values: list[bytes] = []
    try:
        consumer.assign([KafkaPartition(topic, p) for p in (0, 1)])
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and len(values) < expected:
            for records in consumer.poll(timeout_ms=200).values():
                values.extend(record.value for record in records)
        for records in consumer.poll(timeout_ms=500).values():
            values.extend(record.value for record in records)
    finally:
        consumer.close()
    return values


@TWO_PARTITIONS
def test_a_read_committed_consumer_skips_aborted_transactions_and_stops_at_an_open_one(broker: Broker) -> None:
    """librdkafka's and kafka-python's read_committed consumers drop the batches of the
    aborted transactions Fetch names, read the committed ones, and nothing of a transaction
    still open (nor what follows it); a read_uncommitted consumer reads every data record."""
    topic = "txn-consumed"
    with KioClient(broker.bootstrap) as client:
        create_topic(client, topic)
        producer = transactional_producer(client, topic)
        assert produce_transactional(client, topic, 0, producer, 0, [b"committed-1", b"committed-2"]).error_code == 0
        assert produce_transactional(client, topic, 1, producer, 0, [b"aborted-1"]).error_code == 0
    with KioClient(broker.bootstrap, client_id=coordinator_client_id(1)) as coordinator:
        assert _prove_broker(coordinator, broker_secret(broker), 0) == 0
        assert set(write_markers(coordinator, [marker(producer, True, topic, [0]), marker(producer, False, topic, [1])],
                                 version=2).values()) == {0}  # v2 (KIP-890's transaction_version) writes the same
    with KioClient(broker.bootstrap) as client:
        for partition, value in ((0, b"plain-0"), (1, b"plain-1")):
            answer = client.call(PRODUCE, 9, request(PRODUCE, 9, transactional_id=None, acks=-1, timeout=5000, topic_data=[
                {"name": topic, "partition_data": [{"index": partition, "records": encode_batch(
                    [Record(0, 1_700_000_000_000, None, value)])}]}]))
            assert answer.responses[0].partition_responses[0].error_code == 0
        # The next transaction, left open: partition 1 holds it, then a plain record after it.
        assert produce_transactional(client, topic, 1, producer, 1, [b"open-1"]).error_code == 0
        answer = client.call(PRODUCE, 9, request(PRODUCE, 9, transactional_id=None, acks=-1, timeout=5000, topic_data=[
            {"name": topic, "partition_data": [{"index": 1, "records": encode_batch(
                [Record(0, 1_700_000_000_000, None, b"behind-open")])}]}]))
        assert answer.responses[0].partition_responses[0].error_code == 0

    visible = sorted([b"committed-1", b"committed-2", b"plain-0", b"plain-1"])
    assert sorted(consume_all(broker, topic, "read_committed", 4)) == visible
    assert sorted(consume_all_kafka_python(broker, topic, 4)) == visible
    everything = consume_all(broker, topic, "read_uncommitted", 7)
    assert sorted(everything) == sorted([b"committed-1", b"committed-2", b"plain-0", b"aborted-1", b"plain-1",
                                         b"open-1", b"behind-open"])


@TWO_PARTITIONS
def test_a_read_committed_long_poll_wakes_when_the_marker_commits(broker: Broker) -> None:
    """A read_committed Fetch parked at the last stable offset (min_bytes 1, max_wait 10 s)
    is answered as soon as the COMMIT marker makes the transaction's records stable, on
    whichever worker the fetch and the partition are."""
    topic = "txn-long-poll"
    with KioClient(broker.bootstrap) as client:
        create_topic(client, topic)
        producer = transactional_producer(client, topic)
        for partition in (0, 1):
            assert produce_transactional(client, topic, partition, producer, 0, [b"p", b"q"]).error_code == 0
    secret = broker_secret(broker)
    for partition in (0, 1):
        with KioClient(broker.bootstrap, timeout=15) as consumer, \
                KioClient(broker.bootstrap, client_id=coordinator_client_id(1)) as coordinator:
            assert _prove_broker(coordinator, secret, 0) == 0
            started = time.monotonic()
            correlation = consumer.send(FETCH, 12, request(
                FETCH, 12, replica_id=-1, max_wait=10_000, min_bytes=1, max_bytes=1 << 20,
                isolation_level=READ_COMMITTED, session_id=0, session_epoch=-1, forgotten_topics_data=[], rack_id="",
                topics=[{"topic": topic, "partitions": [{"partition": partition, "current_leader_epoch": -1,
                                                         "fetch_offset": 0, "last_fetched_epoch": -1,
                                                         "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}]))
            time.sleep(0.5)  # parked by now
            assert write_markers(coordinator, [marker(producer, True, topic, [partition])]) == {
                (producer[0], topic, partition): 0}
            got, answer = decode_response(FETCH, 12, read_frame(consumer.sock))
            waited = time.monotonic() - started
            assert got == correlation
            answered = answer.responses[0].partitions[0]
            assert answered.last_stable_offset == 3 and list(answered.aborted_transactions) == []
            assert batches(answered.records) == [(0, 1, False, None), (2, 2, True, CONTROL_TYPE_COMMIT)]
            assert waited < 5, f"answered after {waited:.1f} s: the marker did not wake the parked fetch"
