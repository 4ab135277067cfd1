"""OffsetCommit v0-v1 and OffsetFetch v0 (Kafka 3.9 served them, 4.0 and kio do not), read
by hand into the kio request of the oldest version kio has, whose response is byte for
byte theirs (OffsetCommitResponse v0-v2 and OffsetFetchResponse v0-v1 share one layout).
From Kafka 3.9's OffsetCommitRequest.json and OffsetFetchRequest.json::

    OffsetCommit v0-v1                     OffsetFetch v0 (= v1)
    group_id            string             group_id          string
    generation_id       int32    v1        topics            array
    member_id           string   v1          name            string
    topics              array                partition_indexes array of int32
      name              string
      partitions        array
        partition_index     int32
        committed_offset    int64
        commit_timestamp    int64  v1 (ignored: expiry follows offsets.retention.minutes)
        committed_metadata  nullable string

Kafka kept v0 offsets in ZooKeeper and v1+ in ``__consumer_offsets``; Castle keeps all of
them in ``__consumer_offsets`` (a v0 commit is a commit with no generation, as a v2 one
with generation -1 and no member id).
"""

from __future__ import annotations

import struct
from typing import Any

from broker.protocol import codec
from broker.protocol.body_reader import BodyReader, decode_guarded
from broker.protocol.build import build

OFFSET_COMMIT, OFFSET_FETCH = 8, 9
# Legacy version -> the kio version read in its place.
COMMIT_AS = {0: 2, 1: 2}
FETCH_AS = {0: 1}

_I32 = struct.Struct(">i")
_OFFSET = struct.Struct(">iq")  # partition_index, committed_offset
_OFFSET_V1 = struct.Struct(">iqq")  # + commit_timestamp


def decode_offset_commit(version: int, data: bytes | bytearray | memoryview, position: int) -> Any:
    return decode_guarded("offset_commit", range(0, 2), _offset_commit, version, data, position)


def _offset_commit(version: int, data: bytes | bytearray | memoryview, position: int) -> Any:
    reader = BodyReader(data, position, False, "offset_commit")
    group_id = reader.string()
    generation, member_id = -1, ""
    if version >= 1:
        (generation,) = reader.unpack(_I32)
        member_id = reader.string()
    topics = []
    for _ in range(reader.count()):
        name = reader.string()
        partitions = []
        for _ in range(reader.count()):
            if version >= 1:
                index, offset, _commit_timestamp = reader.unpack(_OFFSET_V1)
            else:
                index, offset = reader.unpack(_OFFSET)
            partitions.append({"partition_index": index, "committed_offset": offset,
                               "committed_metadata": reader.nullable_string()})
        topics.append({"name": name, "partitions": partitions})
    as_class = codec.request_class(OFFSET_COMMIT, COMMIT_AS[version])
    assert as_class is not None  # kio's oldest OffsetCommit
    return build(as_class, {
        "group_id": group_id, "generation_id_or_member_epoch": generation, "member_id": member_id,
        "retention_time": -1, "topics": topics})


def decode_offset_fetch(version: int, data: bytes | bytearray | memoryview, position: int) -> Any:
    """v0's body is v1's."""
    return codec.decode_request(OFFSET_FETCH, FETCH_AS[version], bytes(data), position)
