"""Produce request bodies (v0-v10) decoded by hand into plain tuples, not kio entities.

Why: every Produce pays for its decode, and at linger.ms=0 a producer sends one request
per record or two. Through guard.check_request and kio the decode of a one-partition
Produce v9 cost 3.6-4.6 µs, and a 500-partition one built an entity per partition
(python -m loadtest.produce_cost measures both ways). Written from Kafka's
ProduceRequest.json:

    transactional_id   nullable string   v3+
    acks               int16
    timeout_ms         int32
    topic_data         array            (v9+ compact arrays, strings and bytes; tagged
        name           string            fields close every struct)
        partition_data array
            index      int32
            records    nullable bytes   (record batches, kept as the client sent them)

v10 adds nothing to the request (KIP-951 changed only the response). v0-v2 (Kafka 3.9's
oldest, dropped by Kafka 4.0 and kio) are v3 without transactional_id; their records are
message sets of magic 0 or 1, which the handler converts. Anything that does
not parse raises ProtocolViolation: the connection closes, as it does for bodies kio
cannot decode.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from broker.protocol.body_reader import I32, BodyReader, decode_guarded
from broker.protocol.errors import ProtocolViolation
from broker.protocol.framing import read_uvarint

_ACKS_TIMEOUT = struct.Struct(">hi")
_INDEX_LENGTH = struct.Struct(">ii")  # classic: partition index, records length
VERSIONS = range(0, 13)  # decoded here; the handler is registered for exactly these


class ProduceTopic(NamedTuple):
    name: str
    # (index, records): records is a view into the request frame, not a copy (a 1 MiB
    # batch copied twice more on its way to the log cost ~14% of a worker's CPU).
    partition_data: list[tuple[int, memoryview | None]]


class ProduceRequest(NamedTuple):
    transactional_id: str | None
    acks: int
    timeout_ms: int
    topic_data: list[ProduceTopic]


def decode(version: int, data: bytes | bytearray | memoryview, position: int) -> ProduceRequest:
    """The body of a Produce ``version`` request starting at ``position``."""
    return decode_guarded("produce", VERSIONS, _decode, version, data, position)


def _decode(version: int, data: bytes | bytearray | memoryview, position: int) -> ProduceRequest:
    flexible = version >= 9
    reader = BodyReader(data, position, flexible, "produce")
    transactional_id = reader.nullable_string() if version >= 3 else None
    acks, timeout_ms = reader.unpack(_ACKS_TIMEOUT)
    read_partitions = _flexible_partitions if flexible else _classic_partitions
    topics: list[ProduceTopic] = []
    for _ in range(reader.count()):
        name = reader.string()
        partitions = read_partitions(reader, reader.count())
        reader.skip_tags()
        topics.append(ProduceTopic(name, partitions))
    reader.skip_tags()
    # Bytes after the body are ignored, as kio's decode ignores them.
    return ProduceRequest(transactional_id, acks, timeout_ms, topics)


# The partition loops are unrolled by encoding: a producer of many partitions names
# hundreds in one request, and a reader method call per field doubled their cost.
def _classic_partitions(reader: BodyReader, count: int) -> list[tuple[int, memoryview | None]]:
    data, position, end = memoryview(reader.data), reader.position, len(reader.data)
    unpack_from = _INDEX_LENGTH.unpack_from
    partitions: list[tuple[int, memoryview | None]] = []
    for _ in range(count):
        index, length = unpack_from(data, position)
        position += 8
        if length < 0:
            if length != -1:
                raise ProtocolViolation(f"produce: bad records length {length}")
            partitions.append((index, None))
            continue
        if position + length > end:
            raise ProtocolViolation("produce: records run past the frame")
        partitions.append((index, data[position:position + length]))
        position += length
    reader.position = position
    return partitions


def _flexible_partitions(reader: BodyReader, count: int) -> list[tuple[int, memoryview | None]]:
    data, position, end = memoryview(reader.data), reader.position, len(reader.data)
    unpack_from = I32.unpack_from
    partitions: list[tuple[int, memoryview | None]] = []
    for _ in range(count):
        (index,) = unpack_from(data, position)
        position += 4
        low = data[position]
        if low < 0x80:  # the records' length+1 in one byte (or two, below): no call
            length = low
            position += 1
        elif data[position + 1] < 0x80:
            length = (low & 0x7F) | (data[position + 1] << 7)
            position += 2
        else:
            length, position = read_uvarint(data, position)
        if length == 0:
            records = None
        else:
            length -= 1
            if position + length > end:
                raise ProtocolViolation("produce: records run past the frame")
            records = data[position:position + length]
            position += length
        partitions.append((index, records))
        if data[position] == 0:  # no tagged fields, the usual case (IndexError: truncated)
            position += 1
        else:
            position = reader.skip_tags_from(position)
    reader.position = position
    return partitions
