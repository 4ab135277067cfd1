"""Each real client produces keyed records with headers and explicit timestamps, with each
compression codec, to a 6-partition topic, and reads them back byte for byte."""

from __future__ import annotations

from typing import Iterator

import pytest

from tests.integration.clients import CODECS, CONSUMERS, CREATE_TOPIC, PRODUCERS, assert_same, make_records
from tests.integration.conftest import Broker, shared_broker

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

PARTITIONS = 6
SIX_PARTITIONS = [{"num.partitions": PARTITIONS}]
# 100k records through confluent-kafka over the five codecs, ~10k through each pure-Python client.
COUNTS = {"confluent": 20_000, "kafka-python": 2_000, "aiokafka": 2_000}


@pytest.fixture(scope="module")
def broker(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    """One broker for the module (one per parameter): each test writes and reads a topic of its own."""
    yield from shared_broker(request, tmp_path_factory)


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("client", list(PRODUCERS))
def test_round_trip(broker, client, codec):
    """The topic is created with the client's own admin API; consumers start from the
    beginning (ListOffsets)."""
    topic = f"rt-{client}-{codec}"
    CREATE_TOPIC[client](broker.bootstrap, topic, PARTITIONS)
    records = make_records(COUNTS[client], PARTITIONS, tag=f"{client}-{codec}")
    delivered = PRODUCERS[client](broker.bootstrap, topic, records, codec=codec)
    # Each record was acknowledged in its own partition, at offsets 0..n-1 per partition.
    per_partition: dict[int, list[int]] = {}
    for r, (partition, offset) in zip(records, delivered):
        assert partition == r.partition
        per_partition.setdefault(partition, []).append(offset)
    for partition, offsets in per_partition.items():
        assert offsets == list(range(len(offsets))), f"partition {partition}: acked offsets not 0..n-1"
    got = CONSUMERS[client](broker.bootstrap, topic, range(PARTITIONS), len(records))
    assert len(got) == len(records)
    assert_same(records, got)


@pytest.mark.parametrize("broker", SIX_PARTITIONS, indirect=True)
@pytest.mark.parametrize("consumer", list(CONSUMERS))
@pytest.mark.parametrize("producer", list(PRODUCERS))
def test_cross_client(broker, producer, consumer):
    """Every (producer, consumer) pair: what one client writes, another reads unchanged.
    The topic is auto-created (num.partitions=6) by the producer's Metadata request."""
    topic = f"x-{producer}-{consumer}"
    codec = {"confluent": "lz4", "kafka-python": "gzip", "aiokafka": "zstd"}[producer]
    records = make_records(600, PARTITIONS, tag=topic, seed=7)
    PRODUCERS[producer](broker.bootstrap, topic, records, codec=codec)
    got = CONSUMERS[consumer](broker.bootstrap, topic, range(PARTITIONS), len(records))
    assert_same(records, got)
