"""The operator's views of transactions against a real broker (two workers), raw requests
encoded by kio: DescribeTransactions and ListTransactions answered by the coordinator
process, DescribeProducers by the partitions' owning workers (one over the rings), each
with Kafka's answers and errors. A transaction is driven by raw requests too
(InitProducerId with a transactional id, AddPartitionsToTxn, Produce, EndTxn), so every
state the views report is one the test made."""

from __future__ import annotations

import time
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from broker.protocol import codec
from broker.protocol.describe_transactions_v0 import DescribeTransactionsResponse
from tests.integration.conftest import Broker, shared_broker, wait_until
from tests.integration.coordination.test_group_protocol import request
from tests.integration.kio_client import KioClient, read_frame
from tests.integration.protocol.test_transactions_wire import create_topic, produce_transactional

pytestmark = [pytest.mark.integration, pytest.mark.transactions, pytest.mark.timeout(120)]
SETTINGS = {"num.partitions": 2, "transaction.state.log.num.partitions": 4, "offsets.topic.num.partitions": 4}


@pytest.fixture(scope="module")
def broker(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """One broker for the module: the first test only reads ApiVersions, the second keeps to
    transactional ids of its own."""
    yield from shared_broker(request, tmp_path_factory)

API_VERSIONS, INIT_PRODUCER_ID, ADD_PARTITIONS_TO_TXN, END_TXN = 18, 22, 24, 26
DESCRIBE_PRODUCERS, DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS = 61, 65, 66


# ---------------------------------------------------------------------- requests
def init_producer(client: KioClient, transactional_id: str, timeout_ms: int = 60_000) -> tuple[int, int]:
    def attempt() -> Any:
        answer = client.call(INIT_PRODUCER_ID, 4, request(INIT_PRODUCER_ID, 4, transactional_id=transactional_id,
                                                          transaction_timeout=timeout_ms, producer_id=-1,
                                                          producer_epoch=-1))
        # The coordinator may still be loading right after the start: retried as clients do.
        return answer if answer.error_code not in (ErrorCode.coordinator_load_in_progress,
                                                   ErrorCode.concurrent_transactions,
                                                   ErrorCode.coordinator_not_available) else None

    answer = wait_until(attempt, 30, f"InitProducerId for {transactional_id}")
    assert answer.error_code == 0, answer
    return int(answer.producer_id), int(answer.producer_epoch)


def add_partitions(client: KioClient, transactional_id: str, producer: tuple[int, int], topic: str,
                   partitions: list[int]) -> list[int]:
    answer = client.call(ADD_PARTITIONS_TO_TXN, 3, request(
        ADD_PARTITIONS_TO_TXN, 3, v3_and_below_transactional_id=transactional_id,
        v3_and_below_producer_id=producer[0], v3_and_below_producer_epoch=producer[1],
        v3_and_below_topics=[{"name": topic, "partitions": partitions}], transactions=()))
    return [int(p.partition_error_code) for t in answer.results_by_topic_v3_and_below for p in t.results_by_partition]


def end_txn(client: KioClient, transactional_id: str, producer: tuple[int, int], commit: bool) -> int:
    answer = client.call(END_TXN, 3, request(END_TXN, 3, transactional_id=transactional_id, producer_id=producer[0],
                                             producer_epoch=producer[1], committed=commit))
    return int(answer.error_code)


def describe_transactions(client: KioClient, *transactional_ids: str) -> dict[str, Any]:
    """DescribeTransactions v0, read with the entity that takes a start time of -1."""
    body = request(DESCRIBE_TRANSACTIONS, 0, transactional_ids=list(transactional_ids))
    correlation_id = client.send(DESCRIBE_TRANSACTIONS, 0, body)
    frame = read_frame(client.sock)
    assert int.from_bytes(frame[:4], "big") == correlation_id
    answer, _size = codec.reader_for(DescribeTransactionsResponse)(frame, 5)  # header v1: id, tagged fields
    return {s.transactional_id: s for s in answer.transaction_states}


def topics_of(state: Any) -> dict[str, list[int]]:
    return {t.topic: sorted(t.partitions) for t in state.topics}


def list_transactions(client: KioClient, version: int = 2, **filters: Any) -> Any:
    fields = {"state_filters": [], "producer_id_filters": [], "duration_filter": -1, "transactional_id_pattern": None}
    fields.update(filters)
    return client.call(LIST_TRANSACTIONS, version, request(LIST_TRANSACTIONS, version, **fields))


def listed(answer: Any) -> dict[str, tuple[int, str]]:
    assert answer.error_code == 0, answer
    return {t.transactional_id: (int(t.producer_id), t.transaction_state) for t in answer.transaction_states}


def describe_producers(client: KioClient, topics: dict[str, list[int]]) -> dict[tuple[str, int], Any]:
    answer = client.call(DESCRIBE_PRODUCERS, 0, request(DESCRIBE_PRODUCERS, 0, topics=[
        {"name": name, "partition_indexes": partitions} for name, partitions in topics.items()]))
    return {(t.name, int(p.partition_index)): p for t in answer.topics for p in t.partitions}


def producers(partition: Any) -> list[tuple[int, int, int, int, int]]:
    """(producer id, epoch, last sequence, coordinator epoch, current txn start offset) of each."""
    assert partition.error_code == 0, partition
    return [(int(p.producer_id), int(p.producer_epoch), int(p.last_sequence), int(p.coordinator_epoch),
             int(p.current_txn_start_offset)) for p in partition.active_producers]


# ---------------------------------------------------------------------- tests
@pytest.mark.parametrize("broker", [SETTINGS], indirect=True)
def test_the_three_apis_are_advertised(broker: Broker) -> None:
    with KioClient(broker.bootstrap) as client:
        answer = client.call(API_VERSIONS, 3, request(API_VERSIONS, 3, client_software_name="t",
                                                      client_software_version="1"))
    ranges = {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in answer.api_keys}
    assert (ranges[DESCRIBE_PRODUCERS], ranges[DESCRIBE_TRANSACTIONS], ranges[LIST_TRANSACTIONS]) == ((0, 0), (0, 0), (0, 2))


@pytest.mark.parametrize("broker", [SETTINGS], indirect=True)
def test_a_transaction_seen_by_describe_list_and_describe_producers(broker: Broker) -> None:
    topic = "txn-admin"
    with KioClient(broker.bootstrap) as client:
        create_topic(client, topic)
        producer = init_producer(client, "admin-tx-1", timeout_ms=45_000)
        idle = init_producer(client, "admin-idle")

        # An id with no transaction yet: Empty, no start time (-1).
        states = describe_transactions(client, "admin-tx-1", "admin-nobody", "")
        empty = states["admin-tx-1"]
        assert (empty.error_code, empty.transaction_state, empty.producer_id, empty.producer_epoch,
                empty.transaction_start_time, topics_of(empty)) == (0, "Empty", producer[0], producer[1], -1, {})
        assert empty.transaction_timeout.total_seconds() == 45
        assert states["admin-nobody"].error_code == ErrorCode.transactional_id_not_found
        assert states[""].error_code == ErrorCode.invalid_request

        # Open a transaction on both partitions; its records land in partition 0 only.
        before = int(time.time() * 1000)
        assert add_partitions(client, "admin-tx-1", producer, topic, [0, 1]) == [0, 0]
        written = produce_transactional(client, topic, 0, producer, 0, [b"a", b"b", b"c"], "admin-tx-1")
        assert (written.error_code, written.base_offset) == (0, 0)
        ongoing = describe_transactions(client, "admin-tx-1")["admin-tx-1"]
        assert (ongoing.error_code, ongoing.transaction_state, topics_of(ongoing)) == (0, "Ongoing", {topic: [0, 1]})
        assert before <= ongoing.transaction_start_time <= int(time.time() * 1000)

        # ListTransactions, each version and filter.
        assert listed(list_transactions(client, 0)) == {"admin-tx-1": (producer[0], "Ongoing"),
                                                        "admin-idle": (idle[0], "Empty")}
        by_state = list_transactions(client, 0, state_filters=["Ongoing", "NoSuchState"])
        assert listed(by_state) == {"admin-tx-1": (producer[0], "Ongoing")}
        assert list(by_state.unknown_state_filters) == ["NoSuchState"]
        assert listed(list_transactions(client, 0, producer_id_filters=[idle[0]])) == {"admin-idle": (idle[0], "Empty")}
        assert listed(list_transactions(client, 1, duration_filter=3_600_000)) == {
            "admin-idle": (idle[0], "Empty")}, "no start time passes any duration filter, as in Kafka"
        time.sleep(0.05)
        assert "admin-tx-1" in listed(list_transactions(client, 1, duration_filter=10))
        assert listed(list_transactions(client, 2, transactional_id_pattern="admin-tx-.*")) == {
            "admin-tx-1": (producer[0], "Ongoing")}
        assert listed(list_transactions(client, 2, transactional_id_pattern="admin")) == {}, "a whole-id match"
        assert list_transactions(client, 2, transactional_id_pattern="admin-(").error_code \
            == ErrorCode.invalid_regular_expression

        # DescribeProducers: partition 0 on one worker, partition 1 on the other.
        answers = describe_producers(client, {topic: [0, 1, 9], "no-such-topic": [0], "bad/name": [0]})
        (only,) = producers(answers[(topic, 0)])
        assert only == (producer[0], producer[1], 2, -1, 0), "sequence 0-2, no marker yet, open at offset 0"
        assert answers[(topic, 0)].active_producers[0].last_timestamp == 1_700_000_000_002  # the batch's max timestamp
        assert producers(answers[(topic, 1)]) == []
        assert answers[(topic, 9)].error_code == ErrorCode.unknown_topic_or_partition
        assert answers[("no-such-topic", 0)].error_code == ErrorCode.unknown_topic_or_partition
        assert answers[("bad/name", 0)].error_code == ErrorCode.invalid_topic_exception
        assert answers[("bad/name", 0)].error_message

        # Commit: the markers land, the coordinator completes.
        assert end_txn(client, "admin-tx-1", producer, True) == 0

        def completed() -> Any:
            state = describe_transactions(client, "admin-tx-1")["admin-tx-1"]
            return state if state.transaction_state == "CompleteCommit" else None

        done = wait_until(completed, 20, "CompleteCommit")
        assert topics_of(done) == {} and done.transaction_start_time == ongoing.transaction_start_time
        assert listed(list_transactions(client, 0, state_filters=["CompleteCommit"])) == {
            "admin-tx-1": (producer[0], "CompleteCommit")}
        answers = describe_producers(client, {topic: [0, 1]})
        (after,) = producers(answers[(topic, 0)])
        assert after[:3] == (producer[0], producer[1], 2) and after[4] == -1, "no open transaction"
        assert after[3] >= 0, "the coordinator epoch of the COMMIT marker"
        # Partition 1 got only the marker: the producer is known there, with nothing open.
        assert producers(answers[(topic, 1)]) == [(producer[0], producer[1], -1, after[3], -1)]
