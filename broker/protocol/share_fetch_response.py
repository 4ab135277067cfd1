"""ShareFetch responses (key 78, v1) built by hand around their records, which leave by sendfile.

kio encodes a response whose records are bytes; a share fetch's records are ranges of
segment files (as a Fetch's, broker/apis/fetch.py), so this writes the body in pieces and
leaves a gap for each partition's records: ``encode`` returns the pieces, the caller puts
partition i's records between piece i and piece i+1. Layout (flexible: compact arrays and
strings are uvarint N+1, every struct ends with an empty tagged-field section)::

    throttle_time_ms i32, error_code i16, error_message compact nullable string,
    acquisition_lock_timeout_ms i32 (v1+),
    responses [topic_id uuid, partitions [partition_index i32, error_code i16,
        error_message, acknowledge_error_code i16, acknowledge_error_message,
        current_leader {leader_id i32, leader_epoch i32}, records compact bytes (not null
        from v1), acquired_records [first_offset i64, last_offset i64, delivery_count i16]]],
    node_endpoints [node_id i32, host compact string, port i32, rack compact nullable string]
"""

from __future__ import annotations

import struct
import uuid
from typing import NamedTuple

from broker.protocol.fast import uvarint

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_HEAD = struct.Struct(">ih")  # throttle time, error code
_PARTITION = struct.Struct(">ih")  # partition index, error code
_LEADER = struct.Struct(">iib")  # leader id, leader epoch, no tags
_ACQUIRED = struct.Struct(">qqhb")  # first offset, last offset, delivery count, no tags
_ENDPOINT_HEAD = struct.Struct(">i")
NO_TAGS = b"\x00"


class SharePartitionOut(NamedTuple):
    partition: int
    error_code: int
    ack_error_code: int
    leader_id: int
    leader_epoch: int
    records_length: int  # the bytes the caller puts in this partition's gap
    acquired: tuple[tuple[int, int, int], ...]


def _nullable_string(text: str | None) -> bytes:
    if text is None:
        return b"\x00"
    data = text.encode()
    return uvarint(len(data) + 1) + data


def encode(error_code: int, lock_timeout_ms: int, topics: list[tuple[uuid.UUID, list[SharePartitionOut]]],
           endpoints: list[tuple[int, str, int]], error_message: str | None = None) -> list[bytes]:
    """The body's pieces: one more than there are partitions (records go between them)."""
    pieces: list[bytes] = []
    out = bytearray(_HEAD.pack(0, error_code))
    out += _nullable_string(error_message)
    out += _I32.pack(lock_timeout_ms)
    out += uvarint(len(topics) + 1)
    for topic_id, partitions in topics:
        out += topic_id.bytes
        out += uvarint(len(partitions) + 1)
        for index, p in enumerate(partitions):
            if index:
                out += NO_TAGS  # the previous partition's tags, after its acquired records
            out += _PARTITION.pack(p.partition, p.error_code)
            out += b"\x00"  # error_message: null
            out += _I16.pack(p.ack_error_code)
            out += b"\x00"  # acknowledge_error_message: null
            out += _LEADER.pack(p.leader_id, p.leader_epoch, 0)
            out += uvarint(p.records_length + 1)
            pieces.append(bytes(out))
            out = bytearray(uvarint(len(p.acquired) + 1))
            for first, last, count in p.acquired:
                out += _ACQUIRED.pack(first, last, count, 0)
        if partitions:
            out += NO_TAGS  # the last partition's
        out += NO_TAGS  # the topic's
    out += uvarint(len(endpoints) + 1)
    for node_id, host, port in endpoints:
        out += _ENDPOINT_HEAD.pack(node_id) + _nullable_string(host) + _I32.pack(port) + b"\x00" + NO_TAGS
    out += NO_TAGS
    pieces.append(bytes(out))
    return pieces
