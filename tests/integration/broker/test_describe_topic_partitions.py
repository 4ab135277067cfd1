"""DescribeTopicPartitions (KIP-966) against a real broker, with kio-encoded requests: each
partition's facts, the pages a partition limit cuts (NextCursor), and Kafka's answers to bad
input (unknown and invalid names, a cursor outside the topics asked for, a negative cursor
partition, a limit of 0 or below)."""

from __future__ import annotations

import uuid
from typing import Any, Iterator

import pytest

from broker.protocol import codec
from broker.protocol.build import build
from tests.integration.conftest import Broker, shared_broker
from tests.integration.kio_client import KioClient

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

KEY = 75
UNKNOWN_TOPIC_OR_PARTITION = 3
INVALID_TOPIC_EXCEPTION = 17
INVALID_REQUEST = 42
ZERO_UUID = uuid.UUID(int=0)
NO_ID = None  # kio's reading of the zero UUID
# Without an authorizer every TOPIC operation is allowed: READ, WRITE, CREATE, DELETE, ALTER,
# DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS (Kafka's AclOperation codes 3-8, 10, 11).
ALL_TOPIC_OPERATIONS = sum(1 << code for code in (3, 4, 5, 6, 7, 8, 10, 11))


@pytest.fixture(scope="module")
def broker(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    yield from shared_broker(request, tmp_path_factory)


def ask(client: KioClient, api_key: int, version: int, data: dict[str, Any]) -> Any:
    entity = codec.request_class(api_key, version)
    assert entity is not None
    return client.call(api_key, version, build(entity, data))


def describe(client: KioClient, topics: list[str], limit: int = 2000, cursor: tuple[str, int] | None = None) -> Any:
    return ask(client, KEY, 0, {"topics": [{"name": t} for t in topics], "response_partition_limit": limit,
                                "cursor": None if cursor is None else {"topic_name": cursor[0], "partition_index": cursor[1]}})


def create(client: KioClient, counts: dict[str, int]) -> None:
    answer = ask(client, 19, 7, {"topics": [{"name": name, "num_partitions": n, "replication_factor": 1, "assignments": (),
                                             "configs": ()} for name, n in counts.items()],
                                 "timeout": 15_000, "validate_only": False})
    assert [int(t.error_code) for t in answer.topics] == [0] * len(counts), answer


def pages(answer: Any) -> list[tuple[str, list[int]]]:
    return [(t.name, [p.partition_index for p in t.partitions]) for t in answer.topics]


def cursor_of(answer: Any) -> tuple[str, int] | None:
    cursor = answer.next_cursor
    return None if cursor is None else (cursor.topic_name, cursor.partition_index)


@pytest.fixture
def topics(broker: Broker) -> dict[str, int]:
    """Three new topics of 3, 1 and 2 partitions, named so that they sort in that order."""
    prefix = f"dtp-{uuid.uuid4().hex[:8]}-"
    counts = {prefix + "a": 3, prefix + "b": 1, prefix + "c": 2}
    with KioClient(broker.bootstrap) as client:
        create(client, counts)
    return counts


def test_each_partition_is_described_as_metadata_describes_it(broker: Broker, topics: dict[str, int]) -> None:
    a, b, c = topics
    with KioClient(broker.bootstrap) as client:
        metadata = ask(client, 3, 12, {"topics": [{"name": name, "topic_id": ZERO_UUID} for name in topics],
                                       "allow_auto_topic_creation": False, "include_topic_authorized_operations": False})
        answer = describe(client, [c, a, b, a])  # out of order and named twice: each once, in name order
    assert answer.next_cursor is None
    assert pages(answer) == [(a, [0, 1, 2]), (b, [0]), (c, [0, 1])]
    by_name = {t.name: t for t in metadata.topics}
    for topic in answer.topics:
        assert topic.error_code == 0 and topic.is_internal is False
        assert topic.topic_id == by_name[topic.name].topic_id not in (None, ZERO_UUID)
        assert topic.topic_authorized_operations == ALL_TOPIC_OPERATIONS
        for partition, expected in zip(topic.partitions, by_name[topic.name].partitions):
            assert partition.error_code == 0
            assert (partition.leader_id, partition.leader_epoch, partition.replica_nodes, partition.isr_nodes) == (
                expected.leader_id, expected.leader_epoch, expected.replica_nodes, expected.isr_nodes)
            assert partition.leader_id >= 0 and partition.leader_epoch >= 0
            assert partition.replica_nodes == partition.isr_nodes == (partition.leader_id,)
            # No eligible leader replicas in Castle: empty lists, as Kafka answers without an ELR.
            assert partition.eligible_leader_replicas == () and partition.last_known_elr == ()
            assert partition.offline_replicas == ()


def test_unknown_invalid_and_internal_topics(broker: Broker, topics: dict[str, int]) -> None:
    a = next(iter(topics))
    missing = f"dtp-missing-{uuid.uuid4().hex[:8]}"
    with KioClient(broker.bootstrap) as client:
        answer = describe(client, [missing, a, "bad name!", "__consumer_offsets"])
        # Nothing was auto-created.
        again = describe(client, [missing])
    by_name = {t.name: t for t in answer.topics}
    assert [t.name for t in answer.topics] == sorted(by_name)
    assert (by_name[missing].error_code, by_name[missing].topic_id, by_name[missing].partitions) == (
        UNKNOWN_TOPIC_OR_PARTITION, NO_ID, ())
    assert by_name["bad name!"].error_code == INVALID_TOPIC_EXCEPTION
    assert by_name[a].error_code == 0 and len(by_name[a].partitions) == topics[a]
    offsets = by_name["__consumer_offsets"]  # whether or not a group made it yet, it is internal
    assert offsets.is_internal is True and offsets.error_code in (0, UNKNOWN_TOPIC_OR_PARTITION)
    assert again.topics[0].error_code == UNKNOWN_TOPIC_OR_PARTITION


def test_a_partition_limit_pages_through_topics_with_next_cursor(broker: Broker, topics: dict[str, int]) -> None:
    a, b, c = topics
    names = list(topics)
    seen: list[tuple[str, list[int]]] = []
    cursors: list[tuple[str, int] | None] = []
    with KioClient(broker.bootstrap) as client:
        cursor = None
        for _ in range(10):
            answer = describe(client, names, limit=2, cursor=cursor)
            seen.append(tuple(pages(answer)))  # type: ignore[arg-type]
            cursor = cursor_of(answer)
            cursors.append(cursor)
            if cursor is None:
                break
    assert seen == [((a, [0, 1]),), ((a, [2]), (b, [0])), ((c, [0, 1]),)]  # type: ignore[comparison-overlap]
    # After b the limit is spent on a topic's end: the cursor points at the next topic's start;
    # the last page reaches the end: no cursor.
    assert cursors == [(a, 2), (c, 0), None]


@pytest.mark.parametrize("limit", [0, -1, -2147483648])
def test_a_limit_of_zero_or_below_answers_one_partition(broker: Broker, topics: dict[str, int], limit: int) -> None:
    a = next(iter(topics))
    with KioClient(broker.bootstrap) as client:
        answer = describe(client, list(topics), limit=limit)
    assert pages(answer) == [(a, [0])]
    assert cursor_of(answer) == (a, 1)


def test_bad_cursors(broker: Broker, topics: dict[str, int]) -> None:
    a, b, c = topics
    elsewhere = f"dtp-elsewhere-{uuid.uuid4().hex[:8]}"
    with KioClient(broker.bootstrap) as client:
        # A cursor at a topic that is not among those named (and does not exist): the request is
        # invalid, and every topic named says so.
        outside = describe(client, [a, b], cursor=(elsewhere, 0))
        negative = describe(client, [a, b], cursor=(a, -1))
        # Asking for every topic, a cursor may name a topic that does not exist: the walk
        # starts at the first name after it.
        every = describe(client, [], cursor=(a + "0", 0))
        # A cursor past a topic's last partition: that topic with no partitions, then the next.
        past = describe(client, [a, b], cursor=(a, 7))
        # The cursor's partition within the topic: from there.
        inside = describe(client, [a, c], cursor=(a, 1))
    for answer in (outside, negative):
        assert [(t.name, t.error_code, t.partitions, t.topic_id, t.is_internal) for t in answer.topics] == [
            (a, INVALID_REQUEST, (), NO_ID, False), (b, INVALID_REQUEST, (), NO_ID, False)]
        assert answer.next_cursor is None
    listed = [name for name, _ in pages(every)]
    assert a not in listed and b in listed and c in listed and listed == sorted(listed)
    assert pages(past) == [(a, []), (b, [0])]
    assert pages(inside) == [(a, [1, 2]), (c, [0, 1])]
