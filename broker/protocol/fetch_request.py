"""Fetch request bodies (v0-v16) decoded by hand into plain tuples, not kio entities.

Why: a consumer of 1,000 partitions sends a Fetch naming all of them ~130 times a
second, and kio's decode built an entity per partition. That took 0.43 µs a partition,
and guard.check_request walked the body once more before it (python -m
loadtest.fetch_cost). This module reads each partition with one struct call. It is
written from Kafka's FetchRequest.json:

    replica_id             int32    v4-v14 (v15+: the tagged ReplicaState instead)
    max_wait_ms            int32
    min_bytes              int32
    max_bytes              int32    v3+ (before: no limit but the partitions')
    isolation_level        int8     v4+ (before: read uncommitted)
    session_id             int32    v7+
    session_epoch          int32    v7+
    topics                 array    (v12+ compact arrays and strings, tagged fields per struct)
        topic              string   v4-v12      topic_id  uuid  v13+
        partitions         array
            partition              int32
            current_leader_epoch   int32   v9+
            fetch_offset           int64
            last_fetched_epoch     int32   v12+
            log_start_offset       int64   v5+
            partition_max_bytes    int32
    forgotten_topics_data  array    v7+ (topic or topic_id, then an int32 array): skipped,
                                    as we decline fetch sessions
    rack_id                string   v11+: skipped
    tagged fields (v12+): cluster_id (0): skipped; replica_state (1): replica_id int32,
                          replica_epoch int64 (v15+, a follower broker's fetch)

Only what the Fetch handler uses is kept. Anything that does not parse raises
ProtocolViolation: the connection closes, as it does for bodies kio cannot decode.
"""

from __future__ import annotations

import struct
import uuid
from typing import NamedTuple

from broker.protocol.body_reader import BodyReader, decode_guarded

# Per partition, by version: (partition, fetch_offset, partition_max_bytes) at these
# indexes of the unpacked tuple.
_PARTITION_V4 = struct.Struct(">iqi")  # partition, fetch_offset, max_bytes
_PARTITION_V5 = struct.Struct(">iqqi")  # + log_start_offset
_PARTITION_V9 = struct.Struct(">iiqqi")  # + current_leader_epoch
_PARTITION_V12 = struct.Struct(">iiqiqi")  # + last_fetched_epoch
_TOP_V0 = struct.Struct(">iii")  # replica_id, max_wait, min_bytes
_TOP_V3 = struct.Struct(">iiii")  # + max_bytes
_TOP_V4 = struct.Struct(">iiiib")  # + isolation
_TOP_V7 = struct.Struct(">iiiibii")  # + session_id, session_epoch
_TOP_V15 = struct.Struct(">iiibii")  # replica_id gone
VERSIONS = range(0, 17)  # decoded here; the handler is registered for exactly these
NO_LIMIT = (1 << 31) - 1  # max_bytes of v0-v2, which have none (Kafka's Int.MaxValue)


class FetchTopic(NamedTuple):
    topic: str  # "" from v13 on (the id names it)
    topic_id: uuid.UUID | None  # None before v13
    # (partition, fetch_offset, partition_max_bytes, current_leader_epoch, last_fetched_epoch),
    # the epochs -1 in versions without them
    partitions: list[tuple[int, int, int, int, int]]


class FetchRequest(NamedTuple):
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    isolation_level: int
    session_id: int
    session_epoch: int
    topics: list[FetchTopic]
    replica_id: int = -1  # >= 0: a follower broker (replica_id before v15, ReplicaState after)
    replica_epoch: int = -1


def _partition_layout(version: int) -> tuple[struct.Struct, int, int, int, int, int]:
    """(struct, index of partition, of fetch_offset, of partition_max_bytes, of
    current_leader_epoch, of last_fetched_epoch); -1: the version has no such field."""
    if version >= 12:
        return _PARTITION_V12, 0, 2, 5, 1, 3
    if version >= 9:
        return _PARTITION_V9, 0, 2, 4, 1, -1
    if version >= 5:
        return _PARTITION_V5, 0, 1, 3, -1, -1
    return _PARTITION_V4, 0, 1, 2, -1, -1


def decode(version: int, data: bytes | bytearray | memoryview, position: int) -> FetchRequest:
    """The body of a Fetch ``version`` request starting at ``position``."""
    return decode_guarded("fetch", VERSIONS, _decode, version, data, position)


def _decode(version: int, data: bytes | bytearray | memoryview, position: int) -> FetchRequest:
    reader = BodyReader(data, position, version >= 12, "fetch")
    session_id, session_epoch = 0, -1
    replica_id, replica_epoch = -1, -1
    if version >= 15:
        max_wait, min_bytes, max_bytes, isolation, session_id, session_epoch = reader.unpack(_TOP_V15)
    elif version >= 7:
        replica_id, max_wait, min_bytes, max_bytes, isolation, session_id, session_epoch = reader.unpack(_TOP_V7)
    elif version >= 4:
        replica_id, max_wait, min_bytes, max_bytes, isolation = reader.unpack(_TOP_V4)
    elif version == 3:
        replica_id, max_wait, min_bytes, max_bytes = reader.unpack(_TOP_V3)
        isolation = 0
    else:
        replica_id, max_wait, min_bytes = reader.unpack(_TOP_V0)
        max_bytes, isolation = NO_LIMIT, 0
    layout, at_partition, at_offset, at_max, at_epoch, at_last = _partition_layout(version)
    flexible = reader.flexible
    by_id = version >= 13
    topics: list[FetchTopic] = []
    for _ in range(reader.count()):
        if by_id:
            name, topic_id = "", reader.uuid()
        else:
            name, topic_id = reader.string(), None
        partitions: list[tuple[int, int, int, int, int]] = []
        add = partitions.append
        unpack_from = layout.unpack_from
        size = layout.size
        count = reader.count()
        position = reader.position
        for _ in range(count):
            values = unpack_from(data, position)
            add((values[at_partition], values[at_offset], values[at_max], values[at_epoch] if at_epoch >= 0 else -1,
                 values[at_last] if at_last >= 0 else -1))
            position += size
            if flexible:
                if data[position] == 0:  # no tagged fields, the usual case (IndexError: truncated)
                    position += 1
                else:
                    position = reader.skip_tags_from(position)
        reader.position = position
        reader.skip_tags()
        topics.append(FetchTopic(name, topic_id, partitions))
    if version >= 7:
        for _ in range(reader.count()):  # forgotten_topics_data
            if by_id:
                reader.skip(16)
            else:
                reader.skip_string(nullable=False)
            reader.skip(4 * reader.count())
            reader.skip_tags()
    if version >= 11:
        reader.skip_string(nullable=True)  # rack_id
    if version >= 15:
        replica_id, replica_epoch = _replica_state(reader)
    else:
        reader.skip_tags()
    # Bytes after the body are ignored, as kio's decode ignores them.
    return FetchRequest(max_wait, min_bytes, max_bytes, isolation, session_id, session_epoch, topics, replica_id,
                        replica_epoch)


_REPLICA_STATE = struct.Struct(">iq")


def _replica_state(reader: BodyReader) -> tuple[int, int]:
    """The top-level tagged fields of v15+, keeping ReplicaState (tag 1) if present."""
    position = reader.tagged_field(1, _REPLICA_STATE.size)
    return (-1, -1) if position is None else _REPLICA_STATE.unpack_from(reader.data, position)
