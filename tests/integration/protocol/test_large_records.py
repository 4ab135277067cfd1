"""A 5 MiB record through each client with raised limits, and the broker's refusal of a
record over message.max.bytes."""

from __future__ import annotations

import os

import pytest

from tests.integration.clients import CONSUMERS, PRODUCERS, Rec, assert_same
from tests.integration.conftest import shared_broker

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


@pytest.fixture(scope="module")
def broker(request, tmp_path_factory):
    """One broker per distinct setting: each client's test keeps to a topic of its own."""
    yield from shared_broker(request, tmp_path_factory)

BIG = 5 * 1024 * 1024
LIMIT = 8 * 1024 * 1024
RAISED = [{"message.max.bytes": LIMIT + 1024, "num.partitions": 2}]

PRODUCER_LIMITS = {
    "confluent": {"message.max.bytes": LIMIT + 4096, "batch.size": LIMIT},
    "kafka-python": {"max_request_size": LIMIT + 4096, "batch_size": 1024 * 1024},
    "aiokafka": {"max_request_size": LIMIT + 4096, "max_batch_size": 1024 * 1024},
}
CONSUMER_LIMITS = {
    "confluent": {"fetch.max.bytes": LIMIT * 2, "max.partition.fetch.bytes": LIMIT, "receive.message.max.bytes": LIMIT * 4},
    "kafka-python": {"fetch_max_bytes": LIMIT * 2, "max_partition_fetch_bytes": LIMIT},
    "aiokafka": {"fetch_max_bytes": LIMIT * 2, "max_partition_fetch_bytes": LIMIT},
}


@pytest.mark.parametrize("broker", RAISED, indirect=True)
@pytest.mark.parametrize("client", list(PRODUCERS))
def test_five_mib_record(broker, client):
    topic = f"big-{client}"
    big = os.urandom(BIG)  # incompressible: the batch really is 5 MiB on the wire and on disk
    records = [
        Rec(0, b"before", b"small-1", (("h", b"1"),), 1_700_000_000_000),
        Rec(0, b"big", big, (("size", str(BIG).encode()),), 1_700_000_000_001),
        Rec(0, b"after", b"small-2", (), 1_700_000_000_002),
        Rec(1, b"other", big[:1000], (), 1_700_000_000_003),
    ]
    # One at a time, so that the big record is alone in its batch.
    for r in records:
        PRODUCERS[client](broker.bootstrap, topic, [r], codec="lz4" if r.key == b"big" else "none",
                          **PRODUCER_LIMITS[client])
    got = CONSUMERS[client](broker.bootstrap, topic, range(2), len(records), **CONSUMER_LIMITS[client])
    assert_same(records, got)


@pytest.mark.parametrize("broker", [{"num.partitions": 1}], indirect=True)
def test_record_over_message_max_bytes_is_refused(broker):
    """Default message.max.bytes (1 MiB + 12): a 2 MiB batch gets MESSAGE_TOO_LARGE, and
    the partition stays usable."""
    from confluent_kafka import KafkaError, Producer

    producer = Producer({"bootstrap.servers": broker.bootstrap, "message.max.bytes": LIMIT, "batch.size": LIMIT,
                         "compression.type": "none", "retries": 0})
    errors = []
    producer.produce("refused", value=os.urandom(2 * 1024 * 1024), partition=0,
                     on_delivery=lambda err, msg: errors.append(err))
    assert producer.flush(20) == 0
    assert len(errors) == 1 and errors[0] is not None
    assert errors[0].code() == KafkaError.MSG_SIZE_TOO_LARGE, errors[0]
    delivered = PRODUCERS["confluent"](broker.bootstrap, "refused", [Rec(0, b"k", b"fits", (), 1_700_000_000_000)])
    assert delivered == [(0, 0)]
