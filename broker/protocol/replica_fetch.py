"""A follower's Fetch v15, both ways by hand: the request encoded, the answer decoded with
its record bytes left where they arrived.

Why: the follower sends one Fetch per round and kio built an entity per partition to encode
it; and kio's decode of a catch-up answer (1 MiB of records per partition) copied every
partition's records into a new bytes object. Here the request is packed with one struct
call per partition, and the answer's records are memoryview slices of the received frame,
which PartitionLog.append_as_follower copies once, into the log's map. Written from
Kafka's FetchRequest.json and FetchResponse.json, v15 (flexible):

    request   max_wait_ms int32, min_bytes int32, max_bytes int32, isolation_level int8,
              session_id int32, session_epoch int32
              topics compact array of (topic_id uuid, partitions compact array of
                  (partition int32, current_leader_epoch int32, fetch_offset int64,
                   last_fetched_epoch int32, log_start_offset int64, partition_max_bytes
                   int32, tagged fields), tagged fields)
              forgotten_topics_data compact array (empty), rack_id compact string ("")
              tagged fields: replica_state (1): replica_id int32, replica_epoch int64
    answer    throttle_time_ms int32, error_code int16, session_id int32
              responses compact array of (topic_id uuid, partitions compact array of
                  (partition_index int32, error_code int16, high_watermark int64,
                   last_stable_offset int64, log_start_offset int64,
                   aborted_transactions compact nullable array (skipped),
                   preferred_read_replica int32, records compact nullable bytes,
                   tagged fields: diverging_epoch (0) epoch int32 end_offset int64;
                   current_leader (1) and snapshot_id (2) skipped), tagged fields)
              tagged fields (node_endpoints is v16's)

An answer that does not parse raises ProtocolViolation, which closes the connection, as a
kio decode failure did.
"""

from __future__ import annotations

import struct
import uuid
from typing import NamedTuple

from broker.protocol.body_reader import BodyReader, decode_guarded
from broker.protocol.fast import uvarint

VERSION = 15
VERSIONS = range(VERSION, VERSION + 1)
_REQUEST_TOP = struct.Struct(">iiibii")  # max_wait_ms, min_bytes, max_bytes, isolation_level, session_id, session_epoch
_REQUEST_PARTITION = struct.Struct(">iiqiqiB")  # ... partition_max_bytes, and its empty tagged fields
_REPLICA_STATE = struct.Struct(">BBBiqB")  # 1 tagged field: tag 1, size 13, replica_id, replica_epoch, no tags
_TOP = struct.Struct(">ihi")  # throttle_time_ms, error_code, session_id
_PARTITION = struct.Struct(">ihqqq")  # partition_index, error_code, high_watermark, last_stable, log_start
_ABORTED = 16  # producer_id, first_offset
_EPOCH_END = struct.Struct(">iq")
DIVERGING_EPOCH_TAG = 0


class FetchPosition(NamedTuple):
    """One partition of a follower's Fetch."""

    partition: int
    current_leader_epoch: int
    fetch_offset: int
    last_fetched_epoch: int
    log_start_offset: int
    partition_max_bytes: int


def encode_request(replica_id: int, max_wait_ms: int, min_bytes: int, max_bytes: int,
                   topics: dict[uuid.UUID, list[FetchPosition]]) -> bytes:
    """The body of a follower's Fetch v15 (read_uncommitted, no session)."""
    pieces = [_REQUEST_TOP.pack(max_wait_ms, min_bytes, max_bytes, 0, 0, -1), uvarint(len(topics) + 1)]
    pack = _REQUEST_PARTITION.pack
    for topic_id, partitions in topics.items():
        pieces.append(topic_id.bytes)
        pieces.append(uvarint(len(partitions) + 1))
        pieces.extend(pack(*p, 0) for p in partitions)
        pieces.append(b"\x00")  # the topic's tagged fields
    pieces.append(b"\x01\x01")  # forgotten_topics_data [], rack_id ""
    pieces.append(_REPLICA_STATE.pack(1, 1, 13, replica_id, -1, 0))
    return b"".join(pieces)


class DivergingEpoch(NamedTuple):
    epoch: int
    end_offset: int


class PartitionData(NamedTuple):
    partition_index: int
    error_code: int
    high_watermark: int
    log_start_offset: int
    diverging_epoch: DivergingEpoch | None
    records: memoryview | None


class TopicData(NamedTuple):
    topic_id: uuid.UUID
    partitions: list[PartitionData]


class ReplicaFetchResponse(NamedTuple):
    error_code: int
    responses: list[TopicData]


def decode(frame: bytes | bytearray | memoryview, position: int, version: int = VERSION) -> ReplicaFetchResponse:
    """The answer whose body starts at ``position`` of ``frame`` (after the response
    header); its records are views of ``frame``."""
    return decode_guarded("FetchResponse", VERSIONS, _read, version, memoryview(frame), position)


def _read(_version: int, data: bytes | bytearray | memoryview, position: int) -> ReplicaFetchResponse:
    body = BodyReader(data, position, True, "FetchResponse")
    _throttle, error_code, _session = body.unpack(_TOP)
    topics = []
    for _ in range(body.count()):
        topic_id = body.uuid()
        partitions = []
        for _ in range(body.count()):
            index, code, high_watermark, _stable, log_start = body.unpack(_PARTITION)
            for _ in range(max(0, body.nullable_count())):  # aborted transactions: none for a follower
                body.skip(_ABORTED)
                body.skip_tags()
            body.skip(4)  # preferred_read_replica
            records = body.nullable_bytes_view()
            diverging = _partition_tags(body)
            partitions.append(PartitionData(index, code, high_watermark, log_start, diverging, records))
        topics.append(TopicData(topic_id, partitions))
        body.skip_tags()
    body.skip_tags()
    return ReplicaFetchResponse(error_code, topics)


def _partition_tags(body: BodyReader) -> DivergingEpoch | None:
    """A partition's tagged fields: DivergingEpoch if present, the others skipped."""
    position = body.tagged_field(DIVERGING_EPOCH_TAG, _EPOCH_END.size)
    return None if position is None else DivergingEpoch(*_EPOCH_END.unpack_from(body.data, position))
