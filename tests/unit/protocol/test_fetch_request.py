"""broker/protocol/fetch_request.py against kio, an implementation of the same schemas
that is not ours: every Fetch version we serve, encoded by kio with every field set,
decodes to the values kio decodes. Bad bodies raise ProtocolViolation, never anything else."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from broker.protocol import codec, fetch_request
from broker.protocol.build import build
from broker.protocol.errors import ProtocolViolation
from tests.unit.protocol.corruption import decode_corrupted

VERSIONS = range(4, 17)
TOPIC_IDS = [uuid.UUID(int=0x1234), uuid.UUID(int=0xABCDEF)]


def kio_request(version: int, topics: list[tuple[str, int, list[tuple[int, int, int]]]], forgotten: int = 1,
                replica: int = -1) -> Any:
    """A kio FetchRequest with every field set (build() keeps those the version has):
    topics are (name, id index, [(partition, offset, max bytes)])."""
    return build(codec.request_class(1, version), {
        "cluster_id": "cluster-x", "replica_id": replica, "replica_state": {"replica_id": replica, "replica_epoch": 41},
        "max_wait": 500, "min_bytes": 1024, "max_bytes": 52428800, "isolation_level": 1, "session_id": 0,
        "session_epoch": -1, "rack_id": "rack-1",
        "topics": [{"topic": name, "topic_id": TOPIC_IDS[id_index], "partitions": [
            {"partition": p, "current_leader_epoch": 7, "fetch_offset": offset, "last_fetched_epoch": 6,
             "log_start_offset": 3, "partition_max_bytes": max_bytes} for p, offset, max_bytes in partitions]}
            for name, id_index, partitions in topics],
        "forgotten_topics_data": [{"topic": f"gone-{i}", "topic_id": TOPIC_IDS[i % 2], "partitions": tuple(range(i + 2))}
                                  for i in range(forgotten)],
    })


SHAPES = [
    [],
    [("orders", 0, [(0, 0, 1048576)])],
    [("orders", 0, [(p, 1000 + p, 65536) for p in range(50)]), ("audit-log.v2", 1, [(3, 2**40, 0), (9, 5, -1)])],
    [("ü-topic", 1, [])],
]


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("shape", range(len(SHAPES)))
def test_decodes_what_kio_encodes_to_what_kio_decodes(version: int, shape: int) -> None:
    body = codec.encode_body(kio_request(version, SHAPES[shape], forgotten=shape))
    ours = fetch_request.decode(version, body, 0)
    theirs = codec.decode_request(1, version, body, 0)
    assert ours.max_wait_ms == int(theirs.max_wait.total_seconds() * 1000) == 500
    assert (ours.min_bytes, ours.max_bytes, ours.isolation_level) == (1024, 52428800, 1)
    if version >= 7:
        assert (ours.session_id, ours.session_epoch) == (theirs.session_id, theirs.session_epoch)
    assert len(ours.topics) == len(theirs.topics)
    for mine, kio_topic in zip(ours.topics, theirs.topics):
        if version >= 13:
            assert (mine.topic, mine.topic_id) == ("", kio_topic.topic_id)
        else:
            assert (mine.topic, mine.topic_id) == (kio_topic.topic, None)
        epochs = (7 if version >= 9 else -1, 6 if version >= 12 else -1)
        assert mine.partitions == [(p.partition, p.fetch_offset, p.partition_max_bytes, *epochs)
                                   for p in kio_topic.partitions]


@pytest.mark.parametrize("version", VERSIONS)
def test_a_follower_names_itself_in_replica_id_or_in_replica_state(version: int) -> None:
    body = codec.encode_body(kio_request(version, SHAPES[2], replica=3))
    ours = fetch_request.decode(version, body, 0)
    assert ours.replica_id == 3
    assert ours.replica_epoch == (41 if version >= 15 else -1)
    consumer = fetch_request.decode(version, codec.encode_body(kio_request(version, SHAPES[2])), 0)
    assert (consumer.replica_id, consumer.replica_epoch) == (-1, -1 if version < 15 else 41)


def test_a_body_inside_a_frame_is_read_from_its_offset_and_trailing_bytes_are_ignored() -> None:
    body = codec.encode_body(kio_request(12, SHAPES[2]))
    decoded = fetch_request.decode(12, b"\x00" * 17 + body + b"\xff\xff", 17)
    assert [t.topic for t in decoded.topics] == ["orders", "audit-log.v2"]


@pytest.mark.parametrize("version", [4, 7, 11, 12, 13, 15])
def test_every_truncation_is_a_protocol_violation(version: int) -> None:
    body = codec.encode_body(kio_request(version, SHAPES[2], forgotten=2))
    for end in range(len(body)):  # every field is required, the last tagged-field count too
        with pytest.raises(ProtocolViolation):
            fetch_request.decode(version, body[:end], 0)


@pytest.mark.parametrize("version", [4, 12, 13])
def test_random_bytes_never_raise_anything_but_a_protocol_violation(version: int) -> None:
    decode_corrupted(fetch_request.decode, version, codec.encode_body(kio_request(version, SHAPES[2])))


@pytest.mark.parametrize("count", [b"\xff\xff\xff\xff", b"\x7f\xff\xff\xff"])
def test_negative_or_absurd_array_lengths_are_refused_before_any_allocation(count: bytes) -> None:
    header = b"\xff\xff\xff\xff" + b"\x00\x00\x01\xf4" + b"\x00\x00\x00\x01" + b"\x00\x00\x10\x00" + b"\x00"
    with pytest.raises(ProtocolViolation, match="array length"):
        fetch_request.decode(4, header + count, 0)


def test_versions_we_do_not_serve_are_refused() -> None:
    with pytest.raises(ProtocolViolation):
        fetch_request.decode(3, b"", 0)
    with pytest.raises(ProtocolViolation):
        fetch_request.decode(17, b"", 0)
