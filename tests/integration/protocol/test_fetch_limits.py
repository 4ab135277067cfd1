"""Fetch's byte limits against a real broker: max_bytes across the whole response (partitions
owned by different workers), partition_max_bytes per partition, the first batch of the first
partition with data whole however large (KIP-74), and whole batches only; then a librdkafka
consumer configured as a new user would (fetch.max.bytes 1 MB under a 20 MB
max.partition.fetch.bytes) reading a topic of large records to the end."""

from __future__ import annotations

import os
import random
import time
import uuid
from typing import Any

import pytest

from broker.protocol import codec
from broker.protocol.build import build
from storage.batch import parse_header
from storage.records import Record, encode_batch, iter_batches
from tests.integration.clients import Rec, assert_same, confluent_consume, confluent_produce
from tests.integration.conftest import partition_owned_by, shared_broker
from tests.integration.kio_client import KioClient

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

KB = 1024
MAX_BYTES = 1_000_000
BROKER = {"workers": 2, "num.partitions": 4, "message.max.bytes": 2 * 1024 * 1024}


@pytest.fixture(scope="module")
def broker(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """One broker for the module: each test keeps to a topic of its own."""
    yield from shared_broker(request, tmp_path_factory)


def _req(api_key: int, version: int, data: dict[str, Any]) -> Any:
    return build(codec.request_class(api_key, version), data)


def _create_topic(client: KioClient, name: str) -> uuid.UUID:
    answer = client.call(3, 12, _req(3, 12, {"topics": [{"name": name, "topic_id": uuid.UUID(int=0)}],
                                                "allow_auto_topic_creation": True,
                                                "include_topic_authorized_operations": False}))
    assert answer.topics[0].error_code == 0
    return answer.topics[0].topic_id


def _produce(client: KioClient, topic: str, partition: int, value_size: int) -> int:
    """One batch of one incompressible record; its size on the wire and on disk."""
    records = encode_batch([Record(0, int(time.time() * 1000), b"k", os.urandom(value_size), ())])
    answer = client.call(0, 9, _req(0, 9, {
        "transactional_id": None, "acks": 1, "timeout": 10_000,
        "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": records}]}]}))
    assert answer.responses[0].partition_responses[0].error_code == 0
    return len(records)


def _fetch(client: KioClient, topic: str, topic_id: uuid.UUID, partitions: list[int], max_bytes: int,
           partition_max: int, version: int = 12) -> dict[int, Any]:
    answer = client.call(1, version, _req(1, version, {
        "replica_id": -1, "max_wait": 0, "min_bytes": 1, "max_bytes": max_bytes, "isolation_level": 0,
        "session_id": 0, "session_epoch": -1, "forgotten_topics_data": (), "rack_id": "",
        "topics": [{"topic": topic, "topic_id": topic_id, "partitions": [
            {"partition": p, "current_leader_epoch": -1, "fetch_offset": 0, "last_fetched_epoch": -1,
             "log_start_offset": -1, "partition_max_bytes": partition_max} for p in partitions]}]}))
    assert answer.error_code == 0
    return {p.partition_index: p for p in answer.responses[0].partitions}


def _batch_sizes(records: bytes | None) -> list[int]:
    """Sizes of the whole batches in a partition's answer (asserting nothing partial)."""
    sizes, position, data = [], 0, records or b""
    while position < len(data):
        header = parse_header(data, position)
        assert position + header.size <= len(data), "a partial batch was sent"
        sizes.append(header.size)
        position += header.size
    list(iter_batches(data))  # and they decode (CRCs checked)
    return sizes


def _kafka(batches: list[list[int]], partition_max: int, max_bytes: int) -> list[list[int]]:
    """The batches Kafka's readFromLog sends of each partition, in request order."""
    left, first, out = max_bytes, True, []
    for sizes in batches:
        limit, taken = min(partition_max, left), []
        for size in sizes:
            if sum(taken) + size > limit and not (not taken and first):
                break
            taken.append(size)
        first = first and not taken
        left = max(0, left - sum(taken))
        out.append(taken)
    return out


@pytest.mark.parametrize("broker", [BROKER], indirect=True)
def test_max_bytes_holds_across_the_partitions_of_both_workers(broker: Any) -> None:
    topic = "fetch-limits"
    a, b = partition_owned_by(topic, 0, 2, 4), partition_owned_by(topic, 1, 2, 4)
    c, d = [p for p in range(4) if p not in (a, b)]
    value_sizes = {a: [300 * KB] * 2, b: [100 * KB] * 3, c: [20 * KB] * 5, d: [1200 * KB]}
    with KioClient(broker.bootstrap) as client:
        topic_id = _create_topic(client, topic)
        stored = {p: [_produce(client, topic, p, size) for size in sizes] for p, sizes in value_sizes.items()}
        cases = [
            ([a, b, c, d], 20_000_000, MAX_BYTES),  # a and b whole, c trimmed, d's big batch waits
            ([d, a, b, c], 20_000_000, MAX_BYTES),  # d first with data: its batch over max_bytes goes whole
            ([a, b, c, d], 250 * KB, MAX_BYTES),  # a's first batch over partition_max goes (first with data)
            ([b, a, c, d], 250 * KB, MAX_BYTES),  # ... but not when another partition sent data before it
            ([c, b, a, d], 20_000_000, 150 * KB),
        ]
        for order, partition_max, max_bytes in cases:
            answer = _fetch(client, topic, topic_id, order, max_bytes, partition_max)
            want = _kafka([stored[p] for p in order], partition_max, max_bytes)
            got = [_batch_sizes(answer[p].records) for p in order]
            assert got == want, (order, partition_max, max_bytes)
            assert all(answer[p].error_code == 0 and answer[p].high_watermark == len(stored[p]) for p in order)
            first_with_data = next(sizes for sizes in got if sizes)
            assert sum(map(sum, got)) <= max(max_bytes, first_with_data[0])
        # The cases cover each rule: a trim mid-partition, the first batch over max_bytes, a
        # partition left out for want of room.
        assert _batch_sizes(_fetch(client, topic, topic_id, [a, b, c, d], MAX_BYTES, 20_000_000)[c].records) == stored[c][:3]


# librdkafka as a new user configures it: a 1 MB response under a 20 MB partition limit.
NEW_USER = {"fetch.max.bytes": 1_000_000, "max.partition.fetch.bytes": 20_000_000, "receive.message.max.bytes": 1_000_512}


def _large_records(partitions: int, per_partition: int, seed: int) -> list[Rec]:
    rng = random.Random(seed)
    out = []
    for i in range(partitions * per_partition):
        size = rng.randrange(300 * KB, 900 * KB)
        out.append(Rec(i % partitions, f"k{i}".encode(), f"{i}/".encode() + rng.randbytes(size), (), 1_700_000_000_000 + i))
    return out


@pytest.mark.parametrize("broker", [BROKER], indirect=True)
def test_librdkafka_with_a_1mb_fetch_reads_every_large_record(broker: Any) -> None:
    topic = "large-records"
    records = _large_records(4, 4, seed=7)
    confluent_produce(broker.bootstrap, topic, records, **{"message.max.bytes": 2 * 1024 * 1024})
    got = confluent_consume(broker.bootstrap, topic, range(4), len(records), timeout=60, **NEW_USER)
    assert_same(records, got)


@pytest.mark.parametrize("broker", [BROKER], indirect=True)
def test_librdkafka_gets_a_record_over_fetch_max_bytes_as_a_first_batch(broker: Any) -> None:
    """A 1.2 MB record under fetch.max.bytes 1 MB comes whole, as the first batch of the first
    partition with data. Its response is over 1,000,512 bytes, as Kafka's would be, so the
    consumer needs a receive.message.max.bytes above the record (with NEW_USER's own,
    librdkafka drops that response: "Invalid response size")."""
    topic = "over-fetch-max"
    records = _large_records(4, 2, seed=3)
    records.insert(3, Rec(1, b"huge", os.urandom(1_200_000), (), 1_700_000_000_999))
    confluent_produce(broker.bootstrap, topic, records, **{"message.max.bytes": 2 * 1024 * 1024})
    consumer = dict(NEW_USER, **{"receive.message.max.bytes": 4 * 1024 * 1024})
    got = confluent_consume(broker.bootstrap, topic, range(4), len(records), timeout=60, **consumer)
    assert_same(records, got)
