"""Kafka's Java producer (kafka-clients 4.x, tests/java_clients.py) and transaction.version.

A 4.x producer uses transactions v2 (KIP-890) when the broker finalizes ``transaction.version``
2 in its ApiVersions answer (Castle's default): it adds no partitions itself (Produce v12),
and every commit or abort bumps its epoch (EndTxn v5), so each transaction's markers carry a
new epoch. With the broker setting ``transaction.version`` 1 the same producer speaks v1:
AddPartitionsToTxn, and every marker has the epoch InitProducerId gave. The markers' epochs,
read from the log, tell which protocol the producer spoke; the records read_committed are
the same either way.
"""

from __future__ import annotations

import pytest

from storage.records import CONTROL_TYPE_ABORT, CONTROL_TYPE_COMMIT, iter_batches, parse_control_record
from tests.integration.conftest import Broker
from tests.integration.kio_client import KioClient
from tests.integration.protocol.test_java_transactions import java_consume, java_create_topics, java_present, java_produce
from tests.integration.protocol.test_transactions_wire import READ_UNCOMMITTED, fetch
from tests.java_clients import lines_with

pytestmark = [pytest.mark.integration, pytest.mark.transactions, pytest.mark.java_clients, pytest.mark.timeout(300)]
__all__ = ["java_present"]  # the autouse fixture: Java must be on PATH

PATTERN, PER_TXN = "CAC", 6
TYPES = {"C": CONTROL_TYPE_COMMIT, "A": CONTROL_TYPE_ABORT}


def markers(broker: Broker, topic: str) -> list[tuple[int, int, int]]:
    """(producer id, producer epoch, control type) of every marker of partition 0."""
    with KioClient(broker.bootstrap) as client:
        read = fetch(client, topic, 0, 0, READ_UNCOMMITTED)
    return [(header.producer_id, header.producer_epoch, parse_control_record(rows[0]).type)
            for header, rows in iter_batches(read.records or b"") if header.is_control]


def produce_and_read(broker: Broker, topic: str) -> list[tuple[int, int, int]]:
    java_create_topics(broker, 2, topic)
    out = java_produce(broker, topic, f"{topic}-producer", PATTERN, PER_TXN)
    assert [w[0] for w in lines_with(out, "COMMITTED")] == ["0", "2"] and lines_with(out, "ABORTED") == [["1"]]
    committed = [f"t{t}-{i}" for t, c in enumerate(PATTERN) if c == "C" for i in range(PER_TXN)]
    read = java_consume(broker, topic, len(committed))
    assert sorted(r[3] for r in lines_with(read, "RECORD")) == sorted(committed)
    found = markers(broker, topic)
    assert [kind for _pid, _epoch, kind in found] == [TYPES[c] for c in PATTERN]
    assert len({pid for pid, _epoch, _kind in found}) == 1
    return found


def test_a_java_producer_speaks_transactions_v2_when_it_is_finalized(broker: Broker) -> None:
    epochs = [epoch for _pid, epoch, _kind in produce_and_read(broker, "java-tv2")]
    # EndTxn v5 bumped the epoch at each end, and each marker carries the bumped one.
    assert epochs == [epochs[0], epochs[0] + 1, epochs[0] + 2] and epochs[0] >= 1, epochs


@pytest.mark.parametrize("broker", [{"transaction.version": 1}], indirect=True)
def test_a_java_producer_speaks_transactions_v1_when_the_cluster_is_held_at_1(broker: Broker) -> None:
    epochs = [epoch for _pid, epoch, _kind in produce_and_read(broker, "java-tv1")]
    assert epochs == [0, 0, 0], "v1: the epoch InitProducerId gave, for every transaction"
