"""ListOffsets v0 (Kafka 3.9 served it, 4.0 and kio do not), by hand. From Kafka 3.9's
ListOffsetsRequest.json and ListOffsetsResponse.json::

    request                              response
    replica_id       int32               topics              array
    topics           array                 name              string
      name           string                partitions        array
      partitions     array                   partition_index int32
        partition_index  int32               error_code      int16
        timestamp        int64               old_style_offsets array of int64
        max_num_offsets  int32

v0 answers a list of offsets ("offsets before a time") where v1+ answer one; clients send
max_num_offsets 1 with -1 (latest) or -2 (earliest), which is all this serves well.
"""

from __future__ import annotations

import struct
from typing import NamedTuple, Sequence

from broker.protocol.body_reader import BodyReader, decode_guarded

_PARTITION = struct.Struct(">iqi")  # partition_index, timestamp, max_num_offsets
_ANSWER = struct.Struct(">ih")  # partition_index, error_code
_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")


class ListOffsetsV0Topic(NamedTuple):
    name: str
    partitions: list[tuple[int, int, int]]  # (partition_index, timestamp, max_num_offsets)


class ListOffsetsV0Request(NamedTuple):
    replica_id: int
    topics: list[ListOffsetsV0Topic]


def decode(data: bytes | bytearray | memoryview, position: int) -> ListOffsetsV0Request:
    return decode_guarded("list_offsets", range(0, 1), _decode, 0, data, position)


def _decode(_version: int, data: bytes | bytearray | memoryview, position: int) -> ListOffsetsV0Request:
    reader = BodyReader(data, position, False, "list_offsets")
    (replica_id,) = reader.unpack(_I32)
    topics = []
    for _ in range(reader.count()):
        name = reader.string()
        partitions = []
        for _ in range(reader.count()):
            index, timestamp, max_num_offsets = reader.unpack(_PARTITION)
            partitions.append((index, timestamp, max_num_offsets))
        topics.append(ListOffsetsV0Topic(name, partitions))
    return ListOffsetsV0Request(replica_id, topics)


def encode_response(topics: Sequence[tuple[str, Sequence[tuple[int, int, Sequence[int]]]]]) -> bytes:
    """``topics``: (name, [(partition_index, error_code, offsets)])."""
    out = bytearray(_I32.pack(len(topics)))
    for name, partitions in topics:
        encoded = name.encode("utf-8")
        out += _I16.pack(len(encoded)) + encoded
        out += _I32.pack(len(partitions))
        for index, error_code, offsets in partitions:
            out += _ANSWER.pack(index, error_code)
            out += _I32.pack(len(offsets))
            out += struct.pack(f">{len(offsets)}q", *offsets)
    return bytes(out)
