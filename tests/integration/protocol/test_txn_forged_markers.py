"""A Produce carrying a control batch (a forged COMMIT or ABORT marker), raw over the wire
against a real broker: INVALID_RECORD, as Kafka's LogValidator refuses control records
from clients, alone or behind an ordinary batch. Without a transactional id a record set
opening with a marker fails before (a marker batch is transactional, and KafkaApis looks
at each partition's first batch: TRANSACTIONAL_ID_AUTHORIZATION_FAILED). The producer's
partitions are in its coordinator's transaction, so Kafka's KIP-890 verification, which
ReplicaManager runs before the validator, confirms them and the answer stays INVALID_RECORD.
The committed transaction and the open one stay exactly as they were."""

from __future__ import annotations

from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from broker.partitions.remote_partition import coordinator_client_id
from storage.records import CONTROL_TYPE_ABORT, CONTROL_TYPE_COMMIT, Record, encode_batch, encode_control_batch
from tests.integration.conftest import Broker
from tests.integration.coordination.test_group_protocol import request
from tests.integration.kio_client import KioClient
from tests.integration.protocol.test_leader_epochs import _prove_broker
from tests.integration.protocol.test_transactions_wire import (
    PRODUCE,
    READ_COMMITTED,
    READ_UNCOMMITTED,
    TWO_PARTITIONS,
    batches,
    broker_secret,
    create_topic,
    fetch,
    marker,
    produce_transactional,
    transactional_producer,
    txn_id,
    write_markers,
)

pytestmark = [pytest.mark.integration, pytest.mark.transactions, pytest.mark.timeout(120)]


def produce_raw(client: KioClient, topic: str, partition: int, records: bytes, transactional_id: str | None) -> int:
    answer = client.call(PRODUCE, 9, request(PRODUCE, 9, transactional_id=transactional_id, acks=-1, timeout=5000,
                                             topic_data=[{"name": topic, "partition_data": [
                                                 {"index": partition, "records": records}]}]))
    return int(answer.responses[0].partition_responses[0].error_code)


def view(client: KioClient, topic: str, partition: int) -> tuple[Any, ...]:
    """What a refused request must leave: both isolation levels' reads and marks."""
    committed = fetch(client, topic, partition, 0, READ_COMMITTED)
    uncommitted = fetch(client, topic, partition, 0, READ_UNCOMMITTED)
    return (committed.high_watermark, committed.last_stable_offset, batches(committed.records),
            list(committed.aborted_transactions), batches(uncommitted.records))


@TWO_PARTITIONS
def test_a_produced_control_batch_is_refused_and_changes_nothing(broker: Broker) -> None:
    topic = "txn-forged"
    with KioClient(broker.bootstrap) as client:
        create_topic(client, topic)
        producer = transactional_producer(client, topic)
        for partition in (0, 1):
            assert produce_transactional(client, topic, partition, producer, 0, [b"a", b"b"]).error_code == 0
    with KioClient(broker.bootstrap, client_id=coordinator_client_id(1)) as coordinator:
        assert _prove_broker(coordinator, broker_secret(broker), 0) == 0
        assert write_markers(coordinator, [marker(producer, True, topic, [0])]) == {(producer[0], topic, 0): 0}
    # Partition 0: a committed transaction; partition 1: an open one.
    with KioClient(broker.bootstrap) as client:
        before = {partition: view(client, topic, partition) for partition in (0, 1)}
        assert before[0][:2] == (3, 3) and before[1][:2] == (2, 0)
        ordinary = encode_batch([Record(0, 1_700_000_000_000, b"k", b"plain")])
        for control_type in (CONTROL_TYPE_ABORT, CONTROL_TYPE_COMMIT):
            forged = encode_control_batch(control_type, 0, producer_id=producer[0], producer_epoch=producer[1],
                                          timestamp=1_700_000_000_000)
            for partition in (0, 1):
                for records in (forged, ordinary + forged):
                    first_is_marker = records is forged
                    for transactional_id, expected in (
                            (txn_id(topic), ErrorCode.invalid_record),
                            (None, ErrorCode.transactional_id_authorization_failed if first_is_marker
                             else ErrorCode.invalid_record)):
                        code = produce_raw(client, topic, partition, records, transactional_id)
                        assert code == expected, (control_type, partition, transactional_id, code)
        assert {partition: view(client, topic, partition) for partition in (0, 1)} == before
