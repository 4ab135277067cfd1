"""KIP-890 against a real broker (two workers), raw requests encoded by kio.

Part 1, verification (every client): a transactional batch that would open a transaction
on a partition is appended only once the transaction coordinator confirms the partition
is in the producer's transaction; a partition never added, or a zombie's batch after its
transaction ended, is refused and nothing is written. AddPartitionsToTxn v4+ is the
brokers' (CLUSTER_ACTION): verify-only batches answer per partition.

Part 2, transaction.version 2: ApiVersions advertises the feature; Produce v12 and
TxnOffsetCommit v5 add their partitions themselves; EndTxn v5 bumps the epoch at every end
and returns it; the markers carry the bumped epoch, so the old epoch is fenced; a retried
EndTxn v5 gets the same answer. A broker with ``transaction.version`` 1 finalizes level 1
and serves EndTxn v5 without a bump.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from storage.records import CONTROL_TYPE_COMMIT, Record, encode_batch, iter_batches, parse_control_record
from tests.integration.conftest import Broker, shared_broker
from tests.integration.coordination.test_group_protocol import request
from tests.integration.kio_client import KioClient, decode_response, read_frame
from tests.integration.protocol.test_leader_epochs import _prove_broker
from tests.integration.protocol.test_transactions_admin import describe_transactions
from tests.integration.protocol.test_transactions_wire import broker_secret, create_topic, fetch, latest

pytestmark = [pytest.mark.integration, pytest.mark.transactions, pytest.mark.timeout(180)]
TWO_PARTITIONS = pytest.mark.parametrize("broker", [{"num.partitions": 2}], indirect=True)
HELD_AT_V1 = pytest.mark.parametrize("broker", [{"num.partitions": 2, "transaction.version": 1}], indirect=True)


@pytest.fixture(scope="module")
def broker(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """One broker per setting: each test keeps to a topic and a transactional id of its own,
    and only the broker held at transaction version 1 has that level."""
    yield from shared_broker(request, tmp_path_factory)


PRODUCE, API_VERSIONS, INIT_PRODUCER_ID, ADD_PARTITIONS_TO_TXN, END_TXN, TXN_OFFSET_COMMIT = 0, 18, 22, 24, 26, 28
READ_UNCOMMITTED, READ_COMMITTED = 0, 1
NOT_ADDED_OLD, NOT_ADDED_NEW = ErrorCode.invalid_txn_state, ErrorCode.transaction_abortable


def init(client: KioClient, transactional_id: str, version: int = 4) -> tuple[int, int]:
    deadline = time.monotonic() + 30
    while True:
        answer = client.call(INIT_PRODUCER_ID, version, request(
            INIT_PRODUCER_ID, version, transactional_id=transactional_id, transaction_timeout=120_000,
            producer_id=-1, producer_epoch=-1))
        if answer.error_code == 0 or time.monotonic() > deadline:
            break
        time.sleep(0.1)  # the coordinator is loading
    assert answer.error_code == 0
    return int(answer.producer_id), int(answer.producer_epoch)


def add_partitions(client: KioClient, transactional_id: str, producer: tuple[int, int], topic: str,
                   partitions: list[int]) -> set[int]:
    answer = client.call(ADD_PARTITIONS_TO_TXN, 3, request(
        ADD_PARTITIONS_TO_TXN, 3, v3_and_below_transactional_id=transactional_id,
        v3_and_below_producer_id=producer[0], v3_and_below_producer_epoch=producer[1],
        v3_and_below_topics=[{"name": topic, "partitions": partitions}]))
    return {int(p.partition_error_code) for t in answer.results_by_topic_v3_and_below for p in t.results_by_partition}


def produce(client: KioClient, version: int, transactional_id: str, producer: tuple[int, int], topic: str,
            partition: int, sequence: int, values: list[bytes]) -> Any:
    records = [Record(i, 1_700_000_000_000 + i, None, value) for i, value in enumerate(values)]
    batch = encode_batch(records, producer_id=producer[0], producer_epoch=producer[1], base_sequence=sequence,
                         is_transactional=True)
    answer = client.call(PRODUCE, version, request(PRODUCE, version, transactional_id=transactional_id, acks=-1,
                                                   timeout=5000, topic_data=[{"name": topic, "partition_data": [
                                                       {"index": partition, "records": batch}]}]))
    return answer.responses[0].partition_responses[0]


def end_txn(client: KioClient, version: int, transactional_id: str, producer: tuple[int, int], commit: bool) -> Any:
    return client.call(END_TXN, version, request(END_TXN, version, transactional_id=transactional_id,
                                                 producer_id=producer[0], producer_epoch=producer[1], committed=commit))


def settle(client: KioClient, transactional_id: str, topic: str, partitions: list[int]) -> None:
    """Wait until the markers made every partition stable again and the coordinator has
    completed the transaction. Both are needed: the partitions turn stable when the markers
    are written, the coordinator completes only once every marker is acknowledged, and until
    then it answers a verification CONCURRENT_TRANSACTIONS (the broker turns that into a
    retriable NOT_ENOUGH_REPLICAS, as Kafka does; CI, 2026-11-29)."""
    deadline = time.monotonic() + 30
    while any(latest(client, topic, p, READ_COMMITTED) != latest(client, topic, p, READ_UNCOMMITTED)
              for p in partitions) or not str(
                  describe_transactions(client, transactional_id)[transactional_id].transaction_state
              ).startswith("Complete"):
        assert time.monotonic() < deadline, "the transaction's markers never came"
        time.sleep(0.05)


def control_batches(records: bytes | None) -> list[tuple[int, int]]:
    """(producer epoch, control type) of each marker a Fetch answered."""
    return [(header.producer_epoch, parse_control_record(rows[0]).type)
            for header, rows in iter_batches(records or b"") if header.is_control]


def verify_as_broker(client: KioClient, version: int, transactional_id: str, producer: tuple[int, int], topic: str,
                     partitions: list[int]) -> Any:
    return client.call(ADD_PARTITIONS_TO_TXN, version, request(ADD_PARTITIONS_TO_TXN, version, transactions=[{
        "transactional_id": transactional_id, "producer_id": producer[0], "producer_epoch": producer[1],
        "verify_only": True, "topics": [{"name": topic, "partitions": partitions}]}]))


# ---------------------------------------------------------------------- Part 1: verification
@TWO_PARTITIONS
def test_a_partition_not_added_is_refused_and_a_zombies_late_write_too(broker: Broker) -> None:
    topic, txn = "kip890-verify", "v1-producer"
    with KioClient(broker.bootstrap) as client:
        create_topic(client, topic)
        producer = init(client, txn)
        assert add_partitions(client, txn, producer, topic, [0]) == {0}
        # Partition 1 was never added: refused as Kafka refuses it per Produce version, nothing written.
        assert produce(client, 9, txn, producer, topic, 1, 0, [b"x"]).error_code == NOT_ADDED_OLD
        assert produce(client, 11, txn, producer, topic, 1, 0, [b"x"]).error_code == NOT_ADDED_NEW
        assert latest(client, topic, 1, READ_UNCOMMITTED) == 0
        # Partition 0 was: its first batch is verified, the next ones go straight in.
        assert (produce(client, 9, txn, producer, topic, 0, 0, [b"a"]).error_code, latest(client, topic, 0, 0)) == (0, 1)
        assert produce(client, 9, txn, producer, topic, 0, 1, [b"b"]).error_code == 0
        assert end_txn(client, 4, txn, producer, True).error_code == 0
        settle(client, txn, topic, [0])
        end = latest(client, topic, 0, READ_UNCOMMITTED)
        # The zombie: the same producer writes after its transaction ended (v1: same epoch).
        late = produce(client, 9, txn, producer, topic, 0, 2, [b"late"])
        assert late.error_code == NOT_ADDED_OLD
        assert latest(client, topic, 0, READ_UNCOMMITTED) == end, "nothing appended, no transaction left open"
        assert latest(client, topic, 0, READ_COMMITTED) == end


@TWO_PARTITIONS
def test_add_partitions_to_txn_v4_is_for_brokers_and_verifies_per_partition(broker: Broker) -> None:
    topic, txn = "kip890-broker-path", "v1-verified"
    with KioClient(broker.bootstrap) as client:
        create_topic(client, topic)
        producer = init(client, txn)
        assert add_partitions(client, txn, producer, topic, [0]) == {0}
        refused = verify_as_broker(client, 4, txn, producer, topic, [0, 1])
        assert refused.error_code == ErrorCode.cluster_authorization_failed
    with KioClient(broker.bootstrap) as peer:
        assert _prove_broker(peer, broker_secret(broker), 0) == 0
        for version, not_added in ((4, NOT_ADDED_OLD), (5, NOT_ADDED_NEW)):
            answer = verify_as_broker(peer, version, txn, producer, topic, [0, 1])
            assert answer.error_code == 0
            (result,) = answer.results_by_transaction
            codes = {int(p.partition_index): int(p.partition_error_code) for t in result.topic_results
                     for p in t.results_by_partition}
            assert (result.transactional_id, codes) == (txn, {0: 0, 1: not_added})
        fenced = verify_as_broker(peer, 5, txn, (producer[0], producer[1] + 1), topic, [0])
        assert {int(p.partition_error_code) for r in fenced.results_by_transaction for t in r.topic_results
                for p in t.results_by_partition} == {ErrorCode.producer_fenced}
        unknown = verify_as_broker(peer, 5, "nobody", producer, topic, [0])
        assert {int(p.partition_error_code) for r in unknown.results_by_transaction for t in r.topic_results
                for p in t.results_by_partition} == {ErrorCode.invalid_producer_id_mapping}


# ---------------------------------------------------------------------- Part 2: transaction.version 2
def features(client: KioClient) -> tuple[dict[str, tuple[int, int]], dict[str, tuple[int, int]], dict[int, int]]:
    answer = client.call(API_VERSIONS, 3, request(API_VERSIONS, 3, client_software_name="kio-tests",
                                                  client_software_version="1"))
    return ({f.name: (int(f.min_version), int(f.max_version)) for f in answer.supported_features},
            {f.name: (int(f.min_version_level), int(f.max_version_level)) for f in answer.finalized_features},
            {int(k.api_key): int(k.max_version) for k in answer.api_keys})


@TWO_PARTITIONS
def test_a_v2_transaction_adds_its_partitions_and_every_end_bumps_the_epoch(broker: Broker) -> None:
    topic, txn, group = "kip890-v2", "v2-producer", "v2-group"
    with KioClient(broker.bootstrap) as client:
        supported, finalized, versions = features(client)
        assert supported["transaction.version"] == (0, 2) and finalized["transaction.version"] == (2, 2)
        assert [versions[k] for k in (PRODUCE, INIT_PRODUCER_ID, ADD_PARTITIONS_TO_TXN, END_TXN, TXN_OFFSET_COMMIT)] \
            == [12, 5, 5, 5, 5]
        create_topic(client, topic)
        producer = init(client, txn, version=5)
        # No AddPartitionsToTxn: Produce v12 has the broker add each partition.
        for partition in (0, 1):
            assert produce(client, 12, txn, producer, topic, partition, 0, [b"one", b"two"]).error_code == 0
        committed = client.call(TXN_OFFSET_COMMIT, 5, request(
            TXN_OFFSET_COMMIT, 5, transactional_id=txn, group_id=group, producer_id=producer[0],
            producer_epoch=producer[1], generation_id=-1, member_id="", group_instance_id=None,
            topics=[{"name": topic, "partitions": [{"partition_index": 0, "committed_offset": 2,
                                                    "committed_leader_epoch": -1, "committed_metadata": ""}]}]))
        assert [int(p.error_code) for t in committed.topics for p in t.partitions] == [0]
        ended = end_txn(client, 5, txn, producer, True)
        bumped = (producer[0], producer[1] + 1)
        assert (ended.error_code, int(ended.producer_id), int(ended.producer_epoch)) == (0, *bumped)
        # A retry of that EndTxn (its answer lost) carries the epoch before: the same answer,
        # once the markers are written (CONCURRENT_TRANSACTIONS while they are, as Kafka answers).
        deadline = time.monotonic() + 30
        while (retried := end_txn(client, 5, txn, producer, True)).error_code == ErrorCode.concurrent_transactions:
            assert time.monotonic() < deadline, "the markers were never written"
            time.sleep(0.02)
        assert (retried.error_code, int(retried.producer_id), int(retried.producer_epoch)) == (0, *bumped)
        settle(client, txn, topic, [0, 1])
        for partition in (0, 1):
            read = fetch(client, topic, partition, 0, READ_COMMITTED)
            assert read.last_stable_offset == 3
            assert control_batches(read.records) == [(bumped[1], CONTROL_TYPE_COMMIT)], "the marker has the new epoch"
        # The old epoch is fenced by the markers; the new one starts its sequences afresh.
        stale = produce(client, 12, txn, producer, topic, 0, 2, [b"zombie"])
        assert stale.error_code == ErrorCode.invalid_producer_epoch
        assert produce(client, 12, txn, bumped, topic, 0, 0, [b"next"]).error_code == 0
        aborted = end_txn(client, 5, txn, bumped, False)
        assert (aborted.error_code, int(aborted.producer_epoch)) == (0, bumped[1] + 1)
        settle(client, txn, topic, [0])
        assert latest(client, topic, 1, READ_COMMITTED) == 3, "the aborted transaction never touched partition 1"


def a_transaction_at_version_1(client: KioClient, topic: str, txn: str) -> None:
    """One record committed on a new topic as transaction.version 1 has it: Produce v12
    without AddPartitionsToTxn is refused (only verified), added it is taken, and EndTxn
    keeps the producer's epoch (no bump)."""
    create_topic(client, topic)
    producer = init(client, txn, version=5)
    assert produce(client, 12, txn, producer, topic, 0, 0, [b"x"]).error_code == NOT_ADDED_NEW
    assert add_partitions(client, txn, producer, topic, [0]) == {0}
    assert produce(client, 12, txn, producer, topic, 0, 0, [b"x"]).error_code == 0
    ended = end_txn(client, 5, txn, producer, True)
    assert (ended.error_code, int(ended.producer_id), int(ended.producer_epoch)) == (0, *producer), "no bump"


@HELD_AT_V1
def test_an_operator_holds_the_cluster_at_transaction_version_1(broker: Broker) -> None:
    topic, txn = "kip890-held", "held-producer"
    with KioClient(broker.bootstrap) as client:
        supported, finalized, _versions = features(client)
        assert supported["transaction.version"] == (0, 2) and finalized["transaction.version"] == (1, 1)
        a_transaction_at_version_1(client, topic, txn)


@TWO_PARTITIONS
def test_a_v2_transaction_on_a_topic_created_after_its_producer_gets_its_markers(broker: Broker) -> None:
    """The producer is initialized first, then the topic is created and written at once. Its
    partitions reach the transaction coordinator from the leader (Produce v12), before the
    coordinator's periodic registry refresh has seen the topic; the markers must still be
    written, not skipped as if the topic were deleted (CI, 2026-11-29: LSO held at 0)."""
    topic, txn = "kip890-young-topic", "young-topic-producer"
    with KioClient(broker.bootstrap) as client:
        producer = init(client, txn, version=5)
        create_topic(client, topic)
        assert produce(client, 12, txn, producer, topic, 0, 0, [b"first"]).error_code == 0
        assert end_txn(client, 5, txn, producer, True).error_code == 0
        settle(client, txn, topic, [0])
        assert latest(client, topic, 0, READ_COMMITTED) == 2, "the record and its commit marker"


@TWO_PARTITIONS
def test_pipelined_requests_of_a_starting_transaction_append_in_the_order_they_came(broker: Broker) -> None:
    """A client pipelines its Produce requests. The first of a transaction verifies its
    partitions (one of them in the other worker) while the next ones arrive for the same
    partition: those must wait for it, else one is appended, or refused out of order,
    before it, and the client takes that refusal as fatal. Every request is answered
    NONE, at offsets in the order the requests were sent."""
    topic, txn = "kip890-pipelined", "pipelined-producer"
    with KioClient(broker.bootstrap) as client:
        create_topic(client, topic)
        producer = init(client, txn, version=5)
        for _round in range(8):
            def batch(sequence: int, count: int) -> bytes:
                return encode_batch([Record(i, 1_700_000_000_000, None, b"v") for i in range(count)],
                                    producer_id=producer[0], producer_epoch=producer[1], base_sequence=sequence,
                                    is_transactional=True)

            def body(parts: list[tuple[int, bytes]]) -> Any:
                return request(PRODUCE, 12, transactional_id=txn, acks=-1, timeout=5000, topic_data=[
                    {"name": topic, "partition_data": [{"index": p, "records": b} for p, b in parts]}])

            def pipelined() -> list[dict[int, tuple[int, int]]]:
                sent = [client.send(PRODUCE, 12, body([(0, batch(0, 3)), (1, batch(0, 2))])),
                        client.send(PRODUCE, 12, body([(0, batch(3, 1))])),
                        client.send(PRODUCE, 12, body([(0, batch(4, 2))]))]
                answers = []
                for correlation_id in sent:
                    got, answer = decode_response(PRODUCE, 12, read_frame(client.sock))
                    assert got == correlation_id
                    answers.append({int(p.index): (int(p.error_code), int(p.base_offset))
                                    for t in answer.responses for p in t.partition_responses})
                return answers

            answers = pipelined()
            for _attempt in range(50):
                # The last round's markers may still be in flight: the verification answers
                # NOT_ENOUGH_REPLICAS (retriable, Kafka's mapping of CONCURRENT_TRANSACTIONS), nothing
                # is appended and the later batches are out of order; a client sends them all again.
                if {code for code, _offset in answers[0].values()} != {ErrorCode.not_enough_replicas}:
                    break
                assert {code for a in answers[1:] for code, _o in a.values()} <= {
                    ErrorCode.not_enough_replicas, ErrorCode.out_of_order_sequence_number}, answers
                time.sleep(0.1)
                answers = pipelined()
            assert [code for a in answers for code, _offset in a.values()] == [0, 0, 0, 0], answers
            first, second, third = answers[0][0][1], answers[1][0][1], answers[2][0][1]
            assert (second, third) == (first + 3, first + 4), "partition 0's batches in the order sent"
            ended = end_txn(client, 5, txn, producer, True)
            assert ended.error_code == 0
            producer = (int(ended.producer_id), int(ended.producer_epoch))
