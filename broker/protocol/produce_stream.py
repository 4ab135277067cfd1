"""A Produce request frame read as a stream: the parser says what it needs next, and
the receiver (broker/produce_receiver.py) decides where those bytes go.

Why a stream: a large Produce frame is mostly record bytes, and the receiver wants to
put each partition's records straight into that partition's log (storage/landing.py)
instead of into a buffer first. For that it must know, before it reads them, which
partition the next bytes belong to and how many there are. So the frame is parsed as it
arrives, by a generator that yields:

* ``Need(n)``: exactly the next n bytes of the frame, sent back as bytes;
* ``Records(topic, partition, size)``: the next ``size`` bytes are that partition's records;
  the receiver puts them where it likes and sends back None;
* ``Skip(n)``: n bytes after the body, which are ignored (as produce_request.decode
  ignores them);

and returns a ``StreamedProduce``, the request without its records, which the receiver
pairs with the buffers it filled, in order. Fields are those of produce_request.py
(Kafka's ProduceRequest.json, v3-v10; header v1, or v2 from v9). Anything that does not
parse, or runs past the frame, raises ProtocolViolation and the connection closes.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Generator, NamedTuple

from broker.protocol.body_reader import MAX_COUNT
from broker.protocol.errors import ProtocolViolation
from broker.protocol.framing import RequestHeader
from broker.protocol.produce_request import VERSIONS

_HEADER = struct.Struct(">hhih")  # api key, api version, correlation id, client id length
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_ACKS_TIMEOUT = struct.Struct(">hi")
PRODUCE_KEY = 0


class Need(NamedTuple):
    size: int


class Skip(NamedTuple):
    size: int


class Records(NamedTuple):
    topic: str
    partition: int
    size: int


class StreamedProduce(NamedTuple):
    header: RequestHeader
    transactional_id: str | None
    acks: int
    timeout_ms: int
    # Per topic, its partitions' indexes and whether records followed (False: null
    # records); a Records event was yielded for every True, in this order.
    layout: list[tuple[str, list[tuple[int, bool]]]]


Event = Need | Skip | Records
Stream = Generator[Event, "bytes | None", StreamedProduce]


def is_streamable(api_key: int, api_version: int) -> bool:
    return api_key == PRODUCE_KEY and api_version in VERSIONS


@dataclass(slots=True)
class _Frame:
    left: int  # bytes of the frame not yet asked for


def read_frame(size: int) -> Stream:
    """The parser of one Produce frame of ``size`` bytes (the size prefix excluded)."""
    frame = _Frame(size)
    api_key, api_version, correlation_id, client_id_length = _HEADER.unpack((yield from _take(frame, _HEADER.size)))
    if not is_streamable(api_key, api_version):
        raise ProtocolViolation(f"api {api_key} v{api_version} is not a streamed Produce")
    client_id = None
    if client_id_length >= 0:
        client_id = _text((yield from _take(frame, client_id_length)), "client id")
    elif client_id_length != -1:
        raise ProtocolViolation(f"client id length {client_id_length}")
    flexible = api_version >= 9
    if flexible:
        yield from _skip_tags(frame)
    header = RequestHeader(api_key, api_version, correlation_id, client_id, size - frame.left)

    transactional_id = yield from _string(frame, flexible, nullable=True)
    acks, timeout_ms = _ACKS_TIMEOUT.unpack((yield from _take(frame, _ACKS_TIMEOUT.size)))
    layout: list[tuple[str, list[tuple[int, bool]]]] = []
    for _ in range((yield from _count(frame, flexible))):
        name = yield from _string(frame, flexible, nullable=False)
        assert name is not None
        partitions: list[tuple[int, bool]] = []
        for _ in range((yield from _count(frame, flexible))):
            (index,) = _I32.unpack((yield from _take(frame, 4)))
            if flexible:
                length = (yield from _uvarint(frame)) - 1
            else:
                (length,) = _I32.unpack((yield from _take(frame, 4)))
                if length < -1:
                    raise ProtocolViolation(f"produce: bad records length {length}")
            if length >= 0:
                if length > frame.left:
                    raise ProtocolViolation("produce: records run past the frame")
                frame.left -= length
                yield Records(name, index, length)
            partitions.append((index, length >= 0))
            if flexible:
                yield from _skip_tags(frame)
        if flexible:
            yield from _skip_tags(frame)
        layout.append((name, partitions))
    if flexible:
        yield from _skip_tags(frame)
    if frame.left:
        left, frame.left = frame.left, 0
        yield Skip(left)
    return StreamedProduce(header, transactional_id, acks, timeout_ms, layout)


def _take(frame: _Frame, size: int) -> Generator[Event, "bytes | None", bytes]:
    if size > frame.left:
        raise ProtocolViolation("produce: a field runs past the frame")
    frame.left -= size
    if size == 0:
        return b""
    data = yield Need(size)
    assert data is not None and len(data) == size
    return data


def _uvarint(frame: _Frame) -> Generator[Event, "bytes | None", int]:
    value = 0
    for shift in range(0, 35, 7):
        byte = (yield from _take(frame, 1))[0]
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value
    raise ProtocolViolation("produce: varint longer than 5 bytes")


def _count(frame: _Frame, flexible: bool) -> Generator[Event, "bytes | None", int]:
    if flexible:
        count = (yield from _uvarint(frame)) - 1
    else:
        (count,) = _I32.unpack((yield from _take(frame, 4)))
    if count < 0 or count > MAX_COUNT:
        raise ProtocolViolation(f"produce: bad array length {count}")
    return count


def _string(frame: _Frame, flexible: bool, nullable: bool) -> Generator[Event, "bytes | None", str | None]:
    if flexible:
        length = (yield from _uvarint(frame)) - 1
    else:
        (length,) = _I16.unpack((yield from _take(frame, 2)))
    if length < 0:
        if length == -1 and nullable:
            return None
        raise ProtocolViolation(f"produce: bad string length {length}")
    return _text((yield from _take(frame, length)), "string")


def _skip_tags(frame: _Frame) -> Generator[Event, "bytes | None", None]:
    for _ in range((yield from _uvarint(frame))):
        yield from _uvarint(frame)  # the tag
        size = yield from _uvarint(frame)
        if size > frame.left:
            raise ProtocolViolation("produce: tagged field runs past the frame")
        if size:
            frame.left -= size
            yield Skip(size)


def _text(data: bytes, what: str) -> str:
    try:
        return data.decode()
    except UnicodeDecodeError:
        raise ProtocolViolation(f"produce: {what} is not UTF-8") from None
