"""Leader epochs on the wire (KIP-320, KIP-595), raw requests encoded by kio against one broker.

A broker alone leads every partition in epoch 0: the epoch is stamped in every stored
batch, OffsetForLeaderEpoch v2-4 answers where an epoch ends, and an epoch the asker
believes in that is older or newer than the leader's is FENCED_LEADER_EPOCH or
UNKNOWN_LEADER_EPOCH in Fetch, ListOffsets and OffsetForLeaderEpoch alike. A replica id
that is no broker of the cluster cannot fetch as a follower.
"""

from __future__ import annotations

import os
import uuid
from typing import Any, Iterator

import pytest
from kio.schema.errors import ErrorCode

from broker.security.broker_proof import MECHANISM as BROKER_MECHANISM
from broker.security.broker_proof import BrokerProofClient
from coordination.znodes import BrokerSecretZNode
from tests.integration.conftest import Broker, shared_broker
from tests.integration.coordination.test_group_protocol import request
from tests.integration.kio_client import KioClient
from tests.integration.protocol.test_protocol_raw import _batch, _create_topic

pytestmark = pytest.mark.integration

OFFSET_FOR_LEADER_EPOCH, FETCH, LIST_OFFSETS, PRODUCE = 23, 1, 2, 0


@pytest.fixture(scope="module")
def broker(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    """One broker for the module: each test keeps to topics of its own, and none moves a leader."""
    yield from shared_broker(request, tmp_path_factory)


def produce(client: KioClient, topic: str, values: list[bytes]) -> int:
    answer = client.call(PRODUCE, 9, request(PRODUCE, 9, transactional_id=None, acks=-1, timeout=5000, topic_data=[
        {"name": topic, "partition_data": [{"index": 0, "records": _batch(values)}]}]))
    partition = answer.responses[0].partition_responses[0]
    assert partition.error_code == 0
    return int(partition.base_offset)


def epoch_end(client: KioClient, version: int, topic: str, epoch: int, current: int = -1) -> Any:
    answer = client.call(OFFSET_FOR_LEADER_EPOCH, version, request(
        OFFSET_FOR_LEADER_EPOCH, version, replica_id=-1,
        topics=[{"topic": topic, "partitions": [{"partition": 0, "current_leader_epoch": current, "leader_epoch": epoch}]}]))
    return answer.topics[0].partitions[0]


def fetch(client: KioClient, topic_id: uuid.UUID, offset: int, current: int = -1, replica: int = -1,
          last_fetched: int = -1, version: int = 15, topic: str = "") -> Any:
    answer = client.call(FETCH, version, request(
        FETCH, version, replica_id=replica, replica_state={"replica_id": replica, "replica_epoch": -1},
        max_wait=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0, session_id=0, session_epoch=-1,
        topics=[{"topic_id": topic_id, "topic": topic, "partitions": [{"partition": 0, "current_leader_epoch": current,
                                                      "fetch_offset": offset, "last_fetched_epoch": last_fetched,
                                                      "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}],
        forgotten_topics_data=[], rack_id=""))
    return answer.responses[0].partitions[0]


@pytest.mark.parametrize("version", [2, 3, 4])
def test_offset_for_leader_epoch_answers_where_each_epoch_ends(broker: Broker, version: int) -> None:
    with KioClient(broker.bootstrap) as client:
        topic = f"epochs-{version}"
        _create_topic(client, topic)
        produce(client, topic, [b"a", b"b", b"c"])
        produce(client, topic, [b"d"])
        found = epoch_end(client, version, topic, 0)
        assert (found.error_code, found.leader_epoch, found.end_offset) == (0, 0, 4)
        future = epoch_end(client, version, topic, 9)
        assert (future.error_code, future.leader_epoch, future.end_offset) == (0, -1, -1)
        assert epoch_end(client, version, topic, 0, current=3).error_code == ErrorCode.unknown_leader_epoch
        assert epoch_end(client, version, "no-such-topic", 0).error_code == ErrorCode.unknown_topic_or_partition


def test_fetch_and_list_offsets_check_the_current_leader_epoch(broker: Broker) -> None:
    with KioClient(broker.bootstrap) as client:
        topic_id = _create_topic(client, "fenced")
        produce(client, "fenced", [b"x", b"y"])
        ok = fetch(client, topic_id, 0, current=0)
        assert ok.error_code == 0 and ok.high_watermark == 2 and ok.records
        assert fetch(client, topic_id, 0, current=5).error_code == ErrorCode.unknown_leader_epoch
        answer = client.call(LIST_OFFSETS, 7, request(LIST_OFFSETS, 7, replica_id=-1, isolation_level=0, topics=[
            {"name": "fenced", "partitions": [{"partition_index": 0, "current_leader_epoch": 4, "timestamp": -1}]}]))
        assert answer.topics[0].partitions[0].error_code == ErrorCode.unknown_leader_epoch
        answer = client.call(LIST_OFFSETS, 7, request(LIST_OFFSETS, 7, replica_id=-1, isolation_level=0, topics=[
            {"name": "fenced", "partitions": [{"partition_index": 0, "current_leader_epoch": 0, "timestamp": -1}]}]))
        latest = answer.topics[0].partitions[0]
        assert (latest.error_code, latest.offset, latest.leader_epoch) == (0, 2, 0)


def test_only_a_broker_of_the_cluster_fetches_as_a_replica(broker: Broker) -> None:
    with KioClient(broker.bootstrap) as client:
        topic_id = _create_topic(client, "replicas-only")
        produce(client, "replicas-only", [b"x"])
        for version in (12, 15):
            refused = fetch(client, topic_id, 0, replica=77, version=version, topic="replicas-only")
            assert refused.error_code == ErrorCode.topic_authorization_failed and not refused.records
            # The broker's own id, live, but claimed by a client that proved nothing: refused too.
            claimed = fetch(client, topic_id, 0, replica=0, version=version, topic="replicas-only")
            assert claimed.error_code == ErrorCode.topic_authorization_failed and not claimed.records


def _prove_broker(client: KioClient, secret: bytes, node_id: int) -> int:
    """CASTLE-BROKER over SaslHandshake v1 / SaslAuthenticate v2; the last error code."""
    handshake = client.call(17, 1, request(17, 1, mechanism=BROKER_MECHANISM))
    if handshake.error_code:
        return int(handshake.error_code)
    prover = BrokerProofClient(secret, node_id)
    token: bytes | None = prover.first()
    while token is not None:
        answer = client.call(36, 2, request(36, 2, auth_bytes=token))
        if answer.error_code:
            return int(answer.error_code)
        token = prover.step(bytes(answer.auth_bytes))
    return 0


def test_a_connection_that_proved_the_broker_secret_fetches_as_a_replica_and_writes_offsets(broker: Broker) -> None:
    """What only brokers may do takes the cluster's secret (broker/security/broker_proof.py),
    never a client id: a wrong secret fails authentication; the right one lets a connection
    fetch as the (live) replica 0 and append to __consumer_offsets."""
    secret = BrokerSecretZNode.decode(open(os.path.join(broker.log_dir, "broker-secret.json"), "rb").read())
    with KioClient(broker.bootstrap) as client:
        topic_id = _create_topic(client, "proven")
        produce(client, "proven", [b"y"])
    with KioClient(broker.bootstrap) as impostor:
        assert _prove_broker(impostor, b"\0" * 32, 0) == ErrorCode.sasl_authentication_failed
    with KioClient(broker.bootstrap, client_id="castle-coordinator/999") as client:
        # A coordinator's client id, no proof: __consumer_offsets stays closed.
        answer = client.call(PRODUCE, 9, request(PRODUCE, 9, transactional_id=None, acks=-1, timeout=5000, topic_data=[
            {"name": "__consumer_offsets", "partition_data": [{"index": 0, "records": _batch([b"forged"])}]}]))
        assert answer.responses[0].partition_responses[0].error_code == ErrorCode.invalid_topic_exception
    with KioClient(broker.bootstrap, client_id="castle-coordinator/999") as client:
        assert _prove_broker(client, secret, 0) == 0
        fetched = fetch(client, topic_id, 0, replica=0, topic="proven")
        assert fetched.error_code == 0 and fetched.records
        # Epoch 999 is newer than any this broker knows: the owner takes it (fencing needs an older one).
        answer = client.call(PRODUCE, 9, request(PRODUCE, 9, transactional_id=None, acks=-1, timeout=5000, topic_data=[
            {"name": "__consumer_offsets", "partition_data": [{"index": 0, "records": _batch([b"proven"])}]}]))
        assert answer.responses[0].partition_responses[0].error_code != ErrorCode.invalid_topic_exception


@pytest.mark.parametrize("version", [0, 1, 2])
def test_elect_leaders_every_version_answers_per_partition(broker: Broker, version: int) -> None:
    """One broker leads everything (the local backend): ELECTION_NOT_NEEDED, or
    UNKNOWN_TOPIC_OR_PARTITION for a partition that does not exist."""
    with KioClient(broker.bootstrap) as client:
        _create_topic(client, f"elect-{version}")
        answer = client.call(43, version, request(43, version, election_type=0, timeout=5000, topic_partitions=[
            {"topic": f"elect-{version}", "partitions": [0, 7]}]))
        codes = {p.partition_id: p.error_code for r in answer.replica_election_results for p in r.partition_result}
        assert codes == {0: ErrorCode.election_not_needed, 7: ErrorCode.unknown_topic_or_partition}


@pytest.mark.parametrize("version", [0, 1])
def test_partition_reassignments_every_version_on_one_broker(broker: Broker, version: int) -> None:
    """Nowhere to move a replica with one broker: INVALID_REPLICA_ASSIGNMENT; v1 refuses a
    new replica count when allow_replication_factor_change is false; nothing is listed."""
    with KioClient(broker.bootstrap) as client:
        _create_topic(client, "moves")
        answer = client.call(45, version, request(45, version, timeout=5000, allow_replication_factor_change=False,
                                                   topics=[{"name": "moves", "partitions": [
                                                       {"partition_index": 0, "replicas": [0, 1]}]}]))
        (partition,) = answer.responses[0].partitions
        expected = ErrorCode.invalid_replication_factor if version >= 1 else ErrorCode.invalid_replica_assignment
        assert partition.error_code == expected
        listed = client.call(46, 0, request(46, 0, timeout=5000, topics=None))
        assert listed.error_code == 0 and list(listed.topics) == []
