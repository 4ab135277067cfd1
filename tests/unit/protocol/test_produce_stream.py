"""broker/protocol/produce_stream.py, the Produce frame parsed as it arrives, against
the whole-frame decoder (produce_request.py, itself tested against kio) on frames kio
encodes: the same request, records included, for every version we serve; a frame that
ends too soon or holds garbage raises ProtocolViolation and nothing else."""

from __future__ import annotations

import random
from typing import Any

import pytest

from broker.protocol import codec, framing, produce_request, produce_stream
from broker.protocol.errors import ProtocolViolation
from tests.integration.kio_client import encode_request
from tests.unit.protocol.test_produce_request import SHAPES, VERSIONS, kio_request


def _frame(version: int, shape: int, transactional_id: str | None = None, client_id: str = "stream-tests") -> bytes:
    """A whole request frame without its 4-byte size, as kio encodes it."""
    return encode_request(0, version, 77, kio_request(version, SHAPES[shape], transactional_id), client_id)[4:]


def stream(frame: bytes, size: int | None = None) -> tuple[Any, list[tuple[str, list[tuple[int, bytes | None]]]], list[Any]]:
    """Drive the parser over ``frame`` declared as ``size`` bytes: (result, topics with
    their records, the events seen)."""
    parser = produce_stream.read_frame(len(frame) if size is None else size)
    position = 0
    records: list[bytes] = []
    events: list[Any] = []
    reply: bytes | None = None
    try:
        while True:
            event = parser.send(reply) if events else next(parser)
            events.append(event)
            if isinstance(event, produce_stream.Need):
                reply = frame[position:position + event.size]
                assert len(reply) == event.size, "the parser asked for bytes past the frame it was told of"
            else:
                reply = None
                if isinstance(event, produce_stream.Records):
                    records.append(frame[position:position + event.size])
            position += event.size
    except StopIteration as done:
        result = done.value
    assert position == (len(frame) if size is None else size)
    found = iter(records)
    topics = [(name, [(index, next(found) if present else None) for index, present in partitions])
              for name, partitions in result.layout]
    return result, topics, events


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("shape", range(len(SHAPES)))
@pytest.mark.parametrize("transactional_id", [None, "tx-1"])
def test_streams_to_what_the_whole_frame_decoder_reads(version: int, shape: int, transactional_id: str | None) -> None:
    frame = _frame(version, shape, transactional_id)
    result, topics, _events = stream(frame)
    flexible = codec.is_flexible(0, version)
    header = framing.parse_request_header(frame, flexible)
    whole = produce_request.decode(version, frame, header.body_offset)
    assert result.header == header
    assert (result.transactional_id, result.acks, result.timeout_ms) == (whole.transactional_id, whole.acks, whole.timeout_ms)
    assert topics == [(t.name, [(i, None if r is None else bytes(r)) for i, r in t.partition_data]) for t in whole.topic_data]
    assert topics == [(name, list(partitions)) for name, partitions in SHAPES[shape]]


def test_records_are_announced_with_their_partition_and_size() -> None:
    _result, _topics, events = stream(_frame(9, 2))
    announced = [e for e in events if isinstance(e, produce_stream.Records)]
    assert [(e.topic, e.partition, e.size) for e in announced][:3] == [("orders", 0, 0), ("orders", 1, 7), ("orders", 2, 14)]
    assert announced[-1] == produce_stream.Records("audit-log.v2", 9, 0)
    # Header fields are asked for in small exact pieces, never with record bytes in them.
    assert max(e.size for e in events if isinstance(e, produce_stream.Need)) <= 20


@pytest.mark.parametrize("version", [3, 9])
def test_bytes_after_the_body_are_skipped(version: int) -> None:
    frame = _frame(version, 1) + b"\xee" * 1000
    result, topics, events = stream(frame)
    assert events[-1] == produce_stream.Skip(1000)
    assert topics == [(name, list(partitions)) for name, partitions in SHAPES[1]]


@pytest.mark.parametrize("version", [3, 8, 9, 10])
def test_a_frame_that_ends_inside_the_request_is_a_protocol_violation(version: int) -> None:
    frame = _frame(version, 2, "tx")
    for size in range(len(frame)):
        with pytest.raises(ProtocolViolation):
            stream(frame[:size], size)


@pytest.mark.parametrize("version", [3, 9])
def test_random_corruption_raises_nothing_but_a_protocol_violation(version: int) -> None:
    frame = _frame(version, 2)
    rng = random.Random(version)
    parsed = 0
    for _ in range(3000):
        mutated = bytearray(frame)
        for _ in range(rng.randint(1, 4)):
            mutated[rng.randrange(8, len(mutated))] = rng.randrange(256)  # api key and version kept
        try:
            stream(bytes(mutated))
            parsed += 1
        except ProtocolViolation:
            pass
    assert parsed < 3000


def test_only_produce_versions_we_serve_are_streamed() -> None:
    assert produce_stream.is_streamable(0, 3) and produce_stream.is_streamable(0, 10)
    assert not produce_stream.is_streamable(0, 2) and not produce_stream.is_streamable(0, 11)
    assert not produce_stream.is_streamable(1, 9)
    fetch_frame = bytearray(_frame(9, 1))
    fetch_frame[0:2] = b"\x00\x01"
    with pytest.raises(ProtocolViolation):
        stream(bytes(fetch_frame))
