"""The share coordinator (KIP-932) against a real broker (two workers): the five share-state
APIs sent raw by a connection that proved the broker secret, and refused to one that did
not; FindCoordinator's SHARE key type; a SharePersister (the workers' client) driven from
this process over the Kafka protocol; and kill -9 of the coordinator process, after which
the state reads back exactly as written from __share_group_state."""

from __future__ import annotations

import asyncio
import os
import signal
import time
import uuid
from typing import Any, Iterator, cast

import pytest
from kio.schema.errors import ErrorCode

from broker.links.mesh import Mesh
from broker.partitions.remote_partition import RemotePartitionClient
from broker.process.share_persister import SharePersister
from broker.security.inter_broker import ClientSecurity
from coordination.share.persisted import PersistedState
from coordination.share.records import ShareSnapshotValue, ShareUpdateValue, StateBatch
from coordination.share.state_coordinator import coordinator_key, entries_of, partition_for
from tests.integration.conftest import Broker, shared_broker, wait_until
from tests.integration.coordination.test_group_protocol import request
from tests.integration.kio_client import KioClient
from tests.integration.protocol.test_leader_epochs import _prove_broker
from tests.integration.protocol.test_transactions_wire import broker_secret, create_topic, fetch

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

FIND_COORDINATOR, INITIALIZE, READ, WRITE, DELETE, SUMMARY = 10, 83, 84, 85, 86, 87
SHARE_KEY_TYPE = 2
MOVING = {ErrorCode.not_coordinator, ErrorCode.coordinator_not_available, ErrorCode.coordinator_load_in_progress}


@pytest.fixture(scope="module",
                params=[{"num.partitions": 2, "share.coordinator.state.topic.num.partitions": 3,
                         "share.coordinator.snapshot.update.records.per.snapshot": 2}])
def broker(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    yield from shared_broker(request, tmp_path_factory)


def proven(broker: Broker) -> KioClient:
    client = KioClient(broker.bootstrap, client_id="castle-share-test")
    assert _prove_broker(client, broker_secret(broker), 0) == 0
    return client


def one(answer: Any) -> Any:
    """The answer's only partition result."""
    assert len(answer.results) == 1 and len(answer.results[0].partitions) == 1
    return answer.results[0].partitions[0]


def ask(client: KioClient, api_key: int, version: int, group: str, topic_id: uuid.UUID | None,
        partition: dict[str, Any]) -> Any:
    fields = {"group_id": group, "topics": [{"topic_id": topic_id, "partitions": [partition]}]}
    return client.call(api_key, version, request(api_key, version, **fields))


def initialize(client: KioClient, group: str, topic_id: uuid.UUID, partition: int, state_epoch: int,
               start_offset: int) -> int:
    return int(one(ask(client, INITIALIZE, 0, group, topic_id, {
        "partition": partition, "state_epoch": state_epoch, "start_offset": start_offset})).error_code)


def write(client: KioClient, group: str, topic_id: uuid.UUID, partition: int, state_epoch: int, leader_epoch: int,
          start_offset: int, batches: list[tuple[int, int, int, int]], delivery_complete_count: int = -1) -> int:
    return int(one(ask(client, WRITE, 1, group, topic_id, {
        "partition": partition, "state_epoch": state_epoch, "leader_epoch": leader_epoch, "start_offset": start_offset,
        "delivery_complete_count": delivery_complete_count,
        "state_batches": [{"first_offset": f, "last_offset": last, "delivery_state": s, "delivery_count": c}
                          for f, last, s, c in batches]})).error_code)


def read(client: KioClient, group: str, topic_id: uuid.UUID, partition: int, leader_epoch: int) -> tuple[Any, ...]:
    """(error, state epoch, start offset, batches)."""
    result = one(ask(client, READ, 0, group, topic_id, {"partition": partition, "leader_epoch": leader_epoch}))
    return (int(result.error_code), int(result.state_epoch), int(result.start_offset),
            [(int(b.first_offset), int(b.last_offset), int(b.delivery_state), int(b.delivery_count))
             for b in result.state_batches])


def summary(client: KioClient, group: str, topic_id: uuid.UUID, partition: int) -> tuple[int, ...]:
    """(error, state epoch, leader epoch, start offset, delivery complete count)."""
    result = one(ask(client, SUMMARY, 1, group, topic_id, {"partition": partition, "leader_epoch": -1}))
    return (int(result.error_code), int(result.state_epoch), int(result.leader_epoch), int(result.start_offset),
            int(result.delivery_complete_count))


def delete(client: KioClient, group: str, topic_id: uuid.UUID, partition: int) -> int:
    return int(one(ask(client, DELETE, 0, group, topic_id, {"partition": partition})).error_code)


def test_the_five_apis_from_a_broker(broker: Broker) -> None:
    with KioClient(broker.bootstrap) as client:
        topic_id = create_topic(client, "share-apis")
    with proven(broker) as client:
        assert initialize(client, "g1", topic_id, 0, 1, 5) == 0
        assert summary(client, "g1", topic_id, 0) == (0, 1, -1, 5, 0)
        assert read(client, "g1", topic_id, 0, 3) == (0, 1, 5, [])
        assert write(client, "g1", topic_id, 0, 1, 3, 5, [(5, 9, 0, 1), (7, 8, 2, 1)], 2) == 0
        assert write(client, "g1", topic_id, 0, 1, 3, 6, [(10, 12, 4, 2)], 3) == 0
        assert read(client, "g1", topic_id, 0, 3) == (0, 1, 6, [(6, 6, 0, 1), (7, 8, 2, 1), (9, 9, 0, 1),
                                                                 (10, 12, 4, 2)])
        assert summary(client, "g1", topic_id, 0) == (0, 1, 3, 6, 3)
        # Fenced: an older leader epoch, an older state epoch.
        assert read(client, "g1", topic_id, 0, 2)[0] == ErrorCode.fenced_leader_epoch
        assert write(client, "g1", topic_id, 0, 1, 2, 6, []) == ErrorCode.fenced_leader_epoch
        assert write(client, "g1", topic_id, 0, 0, 3, 6, []) == ErrorCode.fenced_state_epoch
        assert initialize(client, "g1", topic_id, 0, 0, 0) == ErrorCode.fenced_state_epoch
        # Write v0 (no delivery complete count) still merges.
        answer = ask(client, WRITE, 0, "g1", topic_id, {"partition": 0, "state_epoch": 1, "leader_epoch": 3,
                                                        "start_offset": 6, "state_batches": [
                                                            {"first_offset": 13, "last_offset": 13,
                                                             "delivery_state": 2, "delivery_count": 1}]})
        assert int(one(answer).error_code) == 0
        assert read(client, "g1", topic_id, 0, 3)[3][-1] == (13, 13, 2, 1)
        assert delete(client, "g1", topic_id, 0) == 0
        assert read(client, "g1", topic_id, 0, 3)[0] == ErrorCode.invalid_request
        assert summary(client, "g1", topic_id, 0) == (0, 0, -1, -1, -1)
        assert delete(client, "g1", topic_id, 0) == 0  # nothing to delete: no error


def test_bad_input_gets_kafkas_errors_and_changes_nothing(broker: Broker) -> None:
    with KioClient(broker.bootstrap) as client:
        topic_id = create_topic(client, "share-bad")
    with proven(broker) as client:
        assert initialize(client, "g2", topic_id, 1, 4, 0) == 0
        assert write(client, "g2", topic_id, 1, 4, 0, 0, [(0, 3, 0, 1)]) == 0
        before = (read(client, "g2", topic_id, 1, 0), summary(client, "g2", topic_id, 1))
        invalid, unknown = int(ErrorCode.invalid_request), int(ErrorCode.unknown_topic_or_partition)
        assert read(client, "never-initialized", topic_id, 1, 0)[0] == invalid
        assert write(client, "never-initialized", topic_id, 1, 0, 0, 0, []) == invalid
        assert initialize(client, "g2", topic_id, -1, 4, 0) == invalid
        assert read(client, "g2", topic_id, -1, 0)[0] == invalid
        assert write(client, "g2", topic_id, 1, 4, -5, 0, []) == ErrorCode.fenced_leader_epoch
        for garbage in ((9, 2, 0, 1), (-4, 2, 0, 1), (0, 2, 1, 1), (0, 2, 9, 1), (0, 2, 0, -1)):
            assert write(client, "g2", topic_id, 1, 4, 0, 0, [(20, 21, 0, 1), garbage]) == invalid
        assert initialize(client, "g2", uuid.uuid4(), 0, 1, 0) == unknown
        null_topic = one(ask(client, READ, 0, "g2", None, {"partition": 1, "leader_epoch": 0}))
        assert (null_topic.error_code, null_topic.start_offset) == (invalid, -1)
        assert initialize(client, "g2", topic_id, 7, 1, 0) == unknown
        assert read(client, "g2", topic_id, 1, 0) == before[0]
        assert summary(client, "g2", topic_id, 1) == before[1]
        # Overlapping batches in one write are merged, as Kafka's combiner merges them.
        assert write(client, "g2", topic_id, 1, 4, 0, 0, [(2, 6, 0, 2), (5, 8, 2, 2)]) == 0
        assert read(client, "g2", topic_id, 1, 0)[3] == [(0, 1, 0, 1), (2, 4, 0, 2), (5, 8, 2, 2)]
        # An empty group id or no partitions: an answer without results (Kafka's service).
        empty = client.call(READ, 0, request(READ, 0, group_id="", topics=[
            {"topic_id": topic_id, "partitions": [{"partition": 1, "leader_epoch": 0}]}]))
        assert list(empty.results) == []


def test_a_client_that_is_no_broker_is_refused(broker: Broker) -> None:
    with KioClient(broker.bootstrap) as client:
        topic_id = create_topic(client, "share-refused")
        refused = int(ErrorCode.cluster_authorization_failed)
        assert initialize(client, "g3", topic_id, 0, 1, 0) == refused
        assert write(client, "g3", topic_id, 0, 1, 0, 0, [(0, 1, 0, 1)]) == refused
        assert read(client, "g3", topic_id, 0, 0)[0] == refused
        assert summary(client, "g3", topic_id, 0)[0] == refused
        assert delete(client, "g3", topic_id, 0) == refused
        key = coordinator_key("g3", topic_id, 0)
        found = client.call(FIND_COORDINATOR, 6, request(FIND_COORDINATOR, 6, key_type=SHARE_KEY_TYPE,
                                                         coordinator_keys=[key]))
        assert found.coordinators[0].error_code == refused
    with proven(broker) as client:
        # Nothing was initialized by the refused requests.
        assert read(client, "g3", topic_id, 0, 0)[0] == ErrorCode.invalid_request
        found = client.call(FIND_COORDINATOR, 6, request(FIND_COORDINATOR, 6, key_type=SHARE_KEY_TYPE,
                                                         coordinator_keys=[key, "no-share-key"]))
        by_key = {c.key: c for c in found.coordinators}
        assert (by_key[key].error_code, by_key[key].node_id, by_key[key].port) == (0, 0, int(broker.bootstrap.split(":")[1]))
        assert by_key["no-share-key"].error_code == ErrorCode.invalid_request


async def _persist_remotely(broker: Broker, topic_id: uuid.UUID) -> tuple[PersistedState, int, PersistedState]:
    """A SharePersister as a worker of another broker has it: the coordinator is broker 0,
    reached over the Kafka protocol with the broker proof."""
    host, port = broker.bootstrap.split(":")
    security = ClientSecurity(None, None, proof=(broker_secret(broker), 0))
    finder = RemotePartitionClient(host, int(port), "castle-share-test", security=security)

    async def find() -> tuple[int, int, str, int]:
        answer = await finder.call(FIND_COORDINATOR, 6, {"key_type": SHARE_KEY_TYPE,
                                                         "coordinator_keys": [coordinator_key("g4", topic_id, 1)]})
        found = answer.coordinators[0]
        return int(found.error_code), int(found.node_id), found.host, int(found.port)

    # Node 99: never this broker, so never the rings (there are none in this process).
    persister = SharePersister(99, cast(Mesh, None), 0, find, security)
    try:
        assert await persister.initialize("g4", topic_id, 1, 2, -1) == 0
        first = await persister.read("g4", topic_id, 1, 7)
        code = await persister.write("g4", topic_id, 1, 2, 7, 40, 1, (StateBatch(40, 44, 2, 1), StateBatch(45, 49, 0, 3)))
        return first, code, await persister.read("g4", topic_id, 1, 7)
    finally:
        persister.close()
        await finder.close()


def test_a_persister_over_the_kafka_protocol(broker: Broker) -> None:
    with KioClient(broker.bootstrap) as client:
        topic_id = create_topic(client, "share-persister")
    first, code, after = asyncio.run(_persist_remotely(broker, topic_id))
    assert first == PersistedState(0, 2, 7, -1, -1, ())  # initialized without a start offset
    assert code == 0
    assert after == PersistedState(0, 2, 7, 40, -1, (StateBatch(40, 44, 2, 1), StateBatch(45, 49, 0, 3)))
    with proven(broker) as client:
        assert summary(client, "g4", topic_id, 1) == (0, 2, 7, 40, 1)


def test_the_state_loads_back_after_kill_9_of_the_coordinator(broker: Broker) -> None:
    with KioClient(broker.bootstrap) as client:
        topic_id = create_topic(client, "share-kill")
    with proven(broker) as client:
        assert initialize(client, "g5", topic_id, 0, 3, 100) == 0
        assert read(client, "g5", topic_id, 0, 1)[0] == 0
        # More writes than updates per snapshot (2): the load folds snapshots and updates.
        for index in range(5):
            first = 100 + index * 10
            assert write(client, "g5", topic_id, 0, 3, 1, 100 + index, [(first, first + 9, index % 3 * 2, index)],
                         index) == 0
        assert initialize(client, "g5", topic_id, 1, 1, -1) == 0
        written = [read(client, "g5", topic_id, p, 1) for p in (0, 1)]
        summaries = [summary(client, "g5", topic_id, p) for p in (0, 1)]
    assert written[0][2] == 104 and len(written[0][3]) == 5
    pid = broker.coordinator_pid()
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    wait_until(lambda: broker.coordinator_pid() not in (None, pid), 30, "a new coordinator process")
    with proven(broker) as client:
        deadline = time.monotonic() + 30
        while True:
            answer = read(client, "g5", topic_id, 0, 1)
            if answer[0] not in MOVING or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert answer == written[0]
        assert read(client, "g5", topic_id, 1, 1) == written[1]
        assert [summary(client, "g5", topic_id, p) for p in (0, 1)] == summaries
        # Fencing survives the restart: the recorded leader epoch is 1.
        assert read(client, "g5", topic_id, 0, 0)[0] == ErrorCode.fenced_leader_epoch


def test_the_state_topic_is_created_as_kafka_creates_it(broker: Broker) -> None:
    """__share_group_state exists once a share-partition was initialized, with
    share.coordinator.state.topic.num.partitions partitions and Kafka's configs."""
    with KioClient(broker.bootstrap) as client:
        topic_id = create_topic(client, "share-topic-configs")
    with proven(broker) as client:
        assert initialize(client, "g6", topic_id, 0, 1, 0) == 0
    with KioClient(broker.bootstrap) as client:
        answer = client.call(3, 12, request(3, 12, topics=[{"name": "__share_group_state", "topic_id": uuid.UUID(int=0)}],
                                            allow_auto_topic_creation=False, include_topic_authorized_operations=False))
        assert answer.topics[0].error_code == 0 and len(answer.topics[0].partitions) == 3
        described = client.call(32, 4, request(32, 4, resources=[
            {"resource_type": 2, "resource_name": "__share_group_state", "configuration_keys": None}],
            include_synonyms=False, include_documentation=False))
        configs = {c.name: c.value for c in described.results[0].configs}
    assert configs["cleanup.policy"] == "delete"
    assert configs["retention.ms"] == "-1"
    assert configs["segment.bytes"] == str(100 * 1024 * 1024)
    assert configs["min.insync.replicas"] == "1"  # share.coordinator.state.topic.min.isr 2, capped by one replica


def state_records(client: KioClient, group: str, topic_id: uuid.UUID, partition: int) -> list[tuple[Any, Any]]:
    """The share-partition's records in __share_group_state (3 partitions here), decoded."""
    where = partition_for(group, topic_id, partition, 3)
    answer = fetch(client, "__share_group_state", where, 0, 0)
    assert answer.error_code == 0
    entries, _next = entries_of(bytes(answer.records or b""), 0)
    return [(key, value) for key, value in entries
            if (key.group_id, key.topic_id, key.partition) == (group, topic_id, partition)]


def test_the_records_in_the_topic_and_a_deleted_topics_state_tombstoned(broker: Broker) -> None:
    """What the topic holds is Kafka's records (a snapshot, then updates); deleting the topic
    makes the coordinator tombstone its share-partitions, as Kafka's does."""
    with KioClient(broker.bootstrap) as client:
        topic_id = create_topic(client, "share-deleted")
    with proven(broker) as client:
        assert initialize(client, "g7", topic_id, 1, 2, 0) == 0
        assert write(client, "g7", topic_id, 1, 2, -1, 3, [(3, 5, 2, 1)], 1) == 0
    with KioClient(broker.bootstrap) as client:
        records = state_records(client, "g7", topic_id, 1)
        assert [type(value) for _key, value in records] == [ShareSnapshotValue, ShareUpdateValue]
        assert records[1][1].state_batches == (StateBatch(3, 5, 2, 1),) and records[1][1].start_offset == 3
        deleted = client.call(20, 4, request(20, 4, topic_names=["share-deleted"], timeout=10_000))
        assert deleted.responses[0].error_code == 0
        wait_until(lambda: state_records(client, "g7", topic_id, 1)[-1][1] is None, 20, "the state's tombstone")
