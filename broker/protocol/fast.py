"""Hand-written encoders for hot paths, each proven byte-for-byte equal to kio's output
(tests/unit/protocol/test_fast_parity.py).

Fetch response: written by hand because its record bytes never enter Python: we write
everything around them and leave a gap of the promised length for os.sendfile. Layout
(v4-v11 classic encoding; v12+ flexible: compact arrays/strings/bytes as uvarint N+1,
and an empty tagged-field section, one 0 byte, closing each struct)::

    throttle_time_ms       int32
    error_code             int16            v7+
    session_id             int32            v7+
    responses              array
      topic                string           v4-v12  (topic_id uuid, 16 bytes, v13+)
      partitions           array
        partition_index    int32
        error_code         int16
        high_watermark     int64
        last_stable_offset int64
        log_start_offset   int64            v5+
        aborted_txns       nullable array   v4+ (null: -1, or 0 when flexible; read_committed
          producer_id      int64                 answers a list, maybe empty)
          first_offset     int64
          [tagged fields]                   v12+
        preferred_replica  int32            v11+  (-1)
        records            nullable bytes   int32 length (flexible: uvarint length+1)
        [tagged fields]                     v12+
      [tagged fields]                       v12+
    [tagged fields]                         v12+

Versions Kafka 4.0 dropped (Fetch v0-3: no lso and no aborted list, and v0 no throttle;
Produce v0-2: v0-1 no log_append_time, v0 no throttle) are written here too, proven
against kafka-python's classes (tests/unit/protocol/test_legacy_versions.py).

Produce response: written by hand because a producer at linger.ms=0 gets one per record
or two, and kio's build-then-serialize cost ~10% of a worker's time in the fixed-rate
benchmark. Layout (v3-v10; v9+ flexible)::

    responses              array
      name                 string
      partition_responses  array
        index              int32
        error_code         int16
        base_offset        int64
        log_append_time_ms int64            (-1: CreateTime)
        log_start_offset   int64            v5+
        record_errors      array            v8+  (we send none)
        error_message      nullable string  v8+
        [tagged fields]                     v9+  (v10's current_leader: only with
      [tagged fields]                     v9+   NOT_LEADER errors, which we never give)
    throttle_time_ms       int32
    [tagged fields]                         v9+  (v10's node_endpoints: likewise)
"""

from __future__ import annotations

import struct
import uuid
from typing import Mapping, NamedTuple, Protocol, Sequence

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_HEAD_V7 = struct.Struct(">ihi")  # throttle, error_code, session_id
_PART_V0 = struct.Struct(">ihq")  # index, error, hw
_PART_V4 = struct.Struct(">ihqq")  # + lso
_PART_V5 = struct.Struct(">ihqqq")  # + log_start_offset
_PRODUCED_V0 = struct.Struct(">ihq")  # index, error, base_offset
_PRODUCED_V2 = struct.Struct(">ihqq")  # + log_append_time
_PRODUCED_V5 = struct.Struct(">ihqqq")  # + log_start_offset
assert _HEAD_V7.size == 10 and _PART_V4.size == 22 and _PART_V5.size == 30 and _PART_V0.size == 14


class FetchPartitionOut(NamedTuple):
    partition_index: int
    error_code: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    records_length: int  # bytes that follow via sendfile (0: empty records)
    diverging_epoch: int = -1  # v12+ tag 0 when >= 0: a follower's log diverged at (epoch, end offset)
    diverging_end_offset: int = -1
    current_leader_id: int = -1  # v12+ tag 1 when >= 0: who leads now (KIP-951)
    current_leader_epoch: int = -1
    aborted: tuple[tuple[int, int], ...] | None = None  # (producer id, first offset); None: null (read_uncommitted)


class FetchTopicOut(NamedTuple):
    name: str
    topic_id: uuid.UUID
    partitions: list[FetchPartitionOut]


_ONE_BYTE = [bytes((value,)) for value in range(0x80)]


def _uvarint(value: int) -> bytes:
    if 0 <= value < 0x80:  # every count and name length of a usual answer
        return _ONE_BYTE[value]
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


uvarint = _uvarint  # for the other hand-built flexible answers (share_fetch_response.py)


def _count(length: int, flexible: bool) -> bytes:
    """An array's length prefix: uvarint length+1 when flexible, else int32."""
    return _uvarint(length + 1) if flexible else _I32.pack(length)


def _string(text: str, flexible: bool) -> bytes:
    data = text.encode()
    return (_uvarint(len(data) + 1) if flexible else _I16.pack(len(data))) + data


def encode_fetch_response(version: int, error_code: int, session_id: int,
                          topics: list[FetchTopicOut], endpoints: Sequence[tuple[int, str, int]] = (),
                          throttle_ms: int = 0) -> list[bytes]:
    """The response body as pieces: pieces[0], then the records of the first partition
    that has any, then pieces[1], and so on. ``len(pieces) == 1 + partitions with records``."""
    flexible = version >= 12
    pieces: list[bytes] = []
    out = bytearray()
    if version >= 7:
        out += _HEAD_V7.pack(throttle_ms, error_code, session_id)
    elif version >= 1:
        out += _I32.pack(throttle_ms)  # throttle_time_ms (v0 has none)
    out += _count(len(topics), flexible)
    for topic in topics:
        if version >= 13:
            out += topic.topic_id.bytes
        else:
            out += _string(topic.name, flexible)
        out += _count(len(topic.partitions), flexible)
        for p in topic.partitions:
            if version >= 5:
                out += _PART_V5.pack(p.partition_index, p.error_code, p.high_watermark, p.last_stable_offset,
                                     p.log_start_offset)
            elif version >= 4:
                out += _PART_V4.pack(p.partition_index, p.error_code, p.high_watermark, p.last_stable_offset)
            else:
                out += _PART_V0.pack(p.partition_index, p.error_code, p.high_watermark)
            if version >= 4:
                aborted = p.aborted
                if aborted is None:
                    out += b"\x00" if flexible else b"\xff\xff\xff\xff"
                else:
                    out += _aborted_transactions(aborted, flexible)
            if version >= 11:
                out += b"\xff\xff\xff\xff"  # preferred_read_replica -1
            if flexible:
                out += _uvarint(p.records_length + 1)
            else:
                out += _I32.pack(p.records_length)
            if p.records_length:
                pieces.append(bytes(out))
                out = bytearray()
            if flexible:
                out += _partition_tags(p)
        if flexible:
            out += b"\x00"
    if flexible:
        out += _node_endpoints(endpoints) if endpoints and version >= 16 else b"\x00"
    pieces.append(bytes(out))
    return pieces


_ABORTED = struct.Struct(">qq")  # producer_id, first_offset


def _aborted_transactions(aborted: tuple[tuple[int, int], ...], flexible: bool) -> bytes:
    out = bytearray(_count(len(aborted), flexible))
    for producer_id, first_offset in aborted:
        out += _ABORTED.pack(producer_id, first_offset)
        if flexible:
            out += b"\x00"
    return bytes(out)


_DIVERGING = struct.Struct(">iqb")  # epoch, end_offset, no tags
_LEADER = struct.Struct(">iib")  # leader_id, leader_epoch, no tags


def _partition_tags(p: FetchPartitionOut) -> bytes:
    """A Fetch partition's tagged fields: DivergingEpoch (0), CurrentLeader (1), in order."""
    if p.diverging_epoch < 0 and p.current_leader_id < 0:
        return b"\x00"
    tags = []
    if p.diverging_epoch >= 0:
        tags.append(b"\x00" + _uvarint(_DIVERGING.size) + _DIVERGING.pack(p.diverging_epoch, p.diverging_end_offset, 0))
    if p.current_leader_id >= 0:
        tags.append(b"\x01" + _uvarint(_LEADER.size) + _LEADER.pack(p.current_leader_id, p.current_leader_epoch, 0))
    return _uvarint(len(tags)) + b"".join(tags)


class Appended(Protocol):
    """What a Produce answer says of one partition (broker.partitions.partition_ops.AppendResult has it)."""

    @property
    def error_code(self) -> int: ...
    @property
    def base_offset(self) -> int: ...
    @property
    def log_append_time(self) -> int: ...
    @property
    def log_start_offset(self) -> int: ...
    @property
    def error_message(self) -> str | None: ...


def encode_produce_response(version: int, topics: Sequence[tuple[str, Sequence[tuple[int, Appended]]]],
                            leaders: Mapping[tuple[str, int], tuple[int, int]] | None = None,
                            endpoints: Sequence[tuple[int, str, int]] = (), throttle_ms: int = 0) -> bytes:
    """The whole response body: ``topics`` are (name, [(partition index, result)]). v10+
    (KIP-951): ``leaders`` (topic, partition) -> (leader id, epoch) for partitions answered
    NOT_LEADER_OR_FOLLOWER (tag 0 of the partition), and those leaders' ``endpoints``
    (node id, host, port; tag 0 of the body), so a client can go there without Metadata."""
    flexible = version >= 9
    partition = _PRODUCED_V5 if version >= 5 else _PRODUCED_V2 if version >= 2 else _PRODUCED_V0
    with_start = version >= 5
    with_append_time = version >= 2
    with_errors = version >= 8
    out = bytearray(_count(len(topics), flexible))
    for name, partitions in topics:
        out += _string(name, flexible)
        out += _count(len(partitions), flexible)
        for index, result in partitions:
            if with_start:
                out += partition.pack(index, result.error_code, result.base_offset, result.log_append_time,
                                      result.log_start_offset)
            elif with_append_time:
                out += partition.pack(index, result.error_code, result.base_offset, result.log_append_time)
            else:
                out += partition.pack(index, result.error_code, result.base_offset)
            if with_errors:
                message = result.error_message
                if flexible:
                    out += b"\x01"  # record_errors: empty
                    out += b"\x00" if message is None else _string(message, True)
                    hint = leaders.get((name, index)) if leaders and version >= 10 else None
                    if hint is None:
                        out += b"\x00"  # tagged fields
                    else:
                        out += b"\x01\x00" + _uvarint(_LEADER.size) + _LEADER.pack(hint[0], hint[1], 0)
                else:
                    out += b"\x00\x00\x00\x00"
                    out += b"\xff\xff" if message is None else _string(message, False)
        if flexible:
            out += b"\x00"
    if version >= 1:
        out += _I32.pack(throttle_ms)  # throttle_time_ms (v0 has none)
    if flexible:
        out += _node_endpoints(endpoints) if endpoints and version >= 10 else b"\x00"
    return bytes(out)


def _node_endpoints(endpoints: Sequence[tuple[int, str, int]]) -> bytes:
    """A body's tagged fields holding NodeEndpoints (tag 0): node id, host, port, rack (null)."""
    field = bytearray(_uvarint(len(endpoints) + 1))
    for node_id, host, port in endpoints:
        field += _I32.pack(node_id) + _string(host, True) + _I32.pack(port) + b"\x00" + b"\x00"
    return b"\x01\x00" + _uvarint(len(field)) + bytes(field)
