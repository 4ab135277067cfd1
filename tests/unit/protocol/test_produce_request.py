"""broker/protocol/produce_request.py against kio, an implementation of the same schemas
that is not ours: every Produce version we serve, encoded by kio, decodes to the values
kio decodes. Bad bodies raise ProtocolViolation, never anything else."""

from __future__ import annotations

from typing import Any

import pytest

from broker.protocol import codec, produce_request
from broker.protocol.build import build
from broker.protocol.errors import ProtocolViolation
from tests.unit.protocol.corruption import decode_corrupted

VERSIONS = range(3, 11)


def kio_request(version: int, topics: list[tuple[str, list[tuple[int, bytes | None]]]],
                transactional_id: str | None = None) -> Any:
    return build(codec.request_class(0, version), {
        "transactional_id": transactional_id, "acks": -1, "timeout": 30000,
        "topic_data": [{"name": name, "partition_data": [{"index": i, "records": records} for i, records in partitions]}
                       for name, partitions in topics],
    })


SHAPES: list[list[tuple[str, list[tuple[int, bytes | None]]]]] = [
    [],
    [("orders", [(0, b"\x00" * 61 + b"one batch")])],
    [("orders", [(p, bytes([p]) * (p * 7)) for p in range(40)]), ("audit-log.v2", [(3, None), (9, b"")])],
    [("ü-topic", [])],
    [("big", [(1, b"x" * 20000)])],  # a length that needs a 3-byte varint when flexible
]


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("shape", range(len(SHAPES)))
@pytest.mark.parametrize("transactional_id", [None, "tx-1"])
def test_decodes_what_kio_encodes_to_what_kio_decodes(version: int, shape: int, transactional_id: str | None) -> None:
    body = codec.encode_body(kio_request(version, SHAPES[shape], transactional_id))
    ours = produce_request.decode(version, body, 0)
    theirs = codec.decode_request(0, version, body, 0)
    assert (ours.transactional_id, ours.acks) == (theirs.transactional_id, theirs.acks) == (transactional_id, -1)
    assert ours.timeout_ms == int(theirs.timeout.total_seconds() * 1000) == 30000
    assert [t.name for t in ours.topic_data] == [t.name for t in theirs.topic_data]
    for mine, kio_topic in zip(ours.topic_data, theirs.topic_data):
        assert mine.partition_data == [(p.index, None if p.records is None else bytes(p.records))
                                       for p in kio_topic.partition_data]
    assert ours.topic_data == [(name, list(partitions)) for name, partitions in SHAPES[shape]]


def test_a_body_inside_a_frame_is_read_from_its_offset_and_trailing_bytes_are_ignored() -> None:
    body = codec.encode_body(kio_request(9, SHAPES[2]))
    decoded = produce_request.decode(9, b"\x00" * 17 + body + b"\xff\xff", 17)
    assert [t.name for t in decoded.topic_data] == ["orders", "audit-log.v2"]


@pytest.mark.parametrize("version", [3, 8, 9, 10])
def test_every_truncation_is_a_protocol_violation(version: int) -> None:
    body = codec.encode_body(kio_request(version, SHAPES[2], "tx"))
    for end in range(len(body)):  # every field is required, the last tagged-field count too
        with pytest.raises(ProtocolViolation):
            produce_request.decode(version, body[:end], 0)


@pytest.mark.parametrize("version", [3, 9])
def test_random_bytes_never_raise_anything_but_a_protocol_violation(version: int) -> None:
    decoded = decode_corrupted(produce_request.decode, version, codec.encode_body(kio_request(version, SHAPES[2])))
    assert decoded < 3000  # some corruption must have been caught


@pytest.mark.parametrize("count", [b"\xff\xff\xff\xfe", b"\x7f\xff\xff\xff"])
def test_negative_or_absurd_array_lengths_are_refused_before_any_allocation(count: bytes) -> None:
    header = b"\xff\xff" + b"\x00\x01" + b"\x00\x00\x75\x30"  # null transactional id, acks 1, timeout
    with pytest.raises(ProtocolViolation, match="array length"):
        produce_request.decode(3, header + count, 0)


@pytest.mark.parametrize("length", [b"\x7f\xff\xff\xff", b"\xff\xff\xff\xfe"])
def test_records_longer_than_the_frame_or_negative_are_refused(length: bytes) -> None:
    body = b"\xff\xff" + b"\x00\x01" + b"\x00\x00\x75\x30" + b"\x00\x00\x00\x01" + b"\x00\x01t" \
        + b"\x00\x00\x00\x01" + b"\x00\x00\x00\x00" + length + b"abc"
    with pytest.raises(ProtocolViolation):
        produce_request.decode(3, body, 0)


def test_versions_we_do_not_serve_are_refused() -> None:
    with pytest.raises(ProtocolViolation):
        produce_request.decode(2, b"", 0)
    with pytest.raises(ProtocolViolation):
        produce_request.decode(11, b"", 0)


def test_a_flexible_name_that_is_not_utf8_is_a_protocol_violation() -> None:
    # v9: null transactional id, acks 1, timeout, one topic whose one-byte-length name is
    # not UTF-8 (the name's fast path must refuse it as the general one does).
    body = b"\x00" + b"\x00\x01" + b"\x00\x00\x75\x30" + b"\x02" + b"\x03\xff\xfe" + b"\x01\x00" + b"\x00"
    with pytest.raises(ProtocolViolation, match="not UTF-8"):
        produce_request.decode(9, body, 0)
