"""ListOffsets (key 2), versions 0-8.

Behaviour: each partition is answered by the worker that owns it (owner op
``list_offsets``, through broker.links.forwarding.on_owners), all owners at once. Timestamp -1
is the latest offset (the high watermark), -2 the earliest (the log start offset), -3
the offset of the record with the largest timestamp, -4 (earliest local) the same as -2
since every segment is local; any other value is the first offset whose timestamp is at
or after it. An unknown topic or partition is UNKNOWN_TOPIC_OR_PARTITION on that
partition; a partition asked for twice in one request is INVALID_REQUEST on each
occurrence, as Kafka does. With isolation_level 1 (read_committed, v2+) timestamp -1 is
the last stable offset instead (below it every transaction is decided). The leader
epoch answered is that of the record found (the latest epoch for -1; -1 with offset -1 and timestamp -1 when none is
found); a replica id other than -1 (a follower, or Kafka's debugging id -2) gets the log end
for -1, as Kafka answers. current_leader_epoch (v4+) is checked against the partition's recorded epoch:
older is FENCED_LEADER_EPOCH, newer UNKNOWN_LEADER_EPOCH (KIP-320). replica_id is ignored.

Version notes: v0 (several offsets per partition; Kafka 4.0 dropped it, kio lacks it) is
decoded and answered by hand (broker/protocol/list_offsets_v0.py): the one offset v1 would
give, as a list, or none when it finds none or max_num_offsets is 0 (Kafka 3.x also
listed segment base offsets before a time; clients ask for -1 or -2 with 1). v1 answers
one offset and its timestamp; v2 adds isolation_level and throttle_time; v3 is v2; v4
adds current_leader_epoch and leader_epoch; v5 is v4; v6 is flexible; v7 allows -3 (max
timestamp, KIP-734); v8 allows -4 (earliest local, KIP-405).
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

from broker.authorization import topic_allowed
from broker.context import RequestContext, Response
from broker.dispatch import api
from broker.links.forwarding import on_owners
from broker.partitions.partition_ops import LATEST_STABLE, OffsetItem, OffsetResult
from broker.partitions.partition_ops import LOG_END as OWNER_LOG_END
from broker.partitions.replication import epoch_fence
from broker.protocol import codec, list_offsets_v0
from broker.protocol.build import build
from broker.protocol.errors import ErrorCode
from broker.protocol.list_offsets_v0 import ListOffsetsV0Request
from coordination.acls.model import Operation
from storage.types import TopicPartition

if TYPE_CHECKING:  # ~200 kio classes, for mypy only: none is imported at run time (requests.py)
    from broker.protocol.requests import ListOffsetsRequest

KEY = 2

EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
EARLIEST_LOCAL_TIMESTAMP = -4
CONSUMER = -1
READ_COMMITTED = 1
LOG_END = OWNER_LOG_END


def _owner_timestamp(timestamp: int) -> int:
    # With no tiered storage, the earliest local offset is the earliest offset.
    if timestamp == EARLIEST_LOCAL_TIMESTAMP:
        return EARLIEST_TIMESTAMP
    return max(timestamp, 0) if timestamp < EARLIEST_LOCAL_TIMESTAMP else timestamp  # no other special value


def _partition(index: int, code: int) -> dict[str, Any]:
    return {"partition_index": index, "error_code": code, "timestamp": -1, "offset": -1, "leader_epoch": -1}


def _error(request: Any, version: int, code: int) -> Any:
    if isinstance(request, ListOffsetsV0Request):
        return list_offsets_v0.encode_response([(t.name, [(p[0], code, []) for p in t.partitions])
                                                for t in request.topics])
    return build(codec.response_class(KEY, version), {"throttle_time": 0, "topics": [
        {"name": t.name, "partitions": [_partition(p.partition_index, code) for p in t.partitions]} for t in request.topics]})


def _decode(version: int, frame: bytes | bytearray, offset: int) -> ListOffsetsRequest | ListOffsetsV0Request:
    if version == 0:
        return list_offsets_v0.decode(frame, offset)
    # kio's entities keep bytes fields as slices of what they are given: give it bytes.
    request: ListOffsetsRequest = codec.decode_request(KEY, version, bytes(frame), offset)
    return request


@api(KEY, "ListOffsets", 0, 8, error_response=_error, decode=_decode)
async def handle_list_offsets(ctx: RequestContext, request: ListOffsetsRequest | ListOffsetsV0Request) -> Response:
    if isinstance(request, ListOffsetsV0Request):
        return await _handle_v0(ctx, request)
    node = ctx.node
    asked = Counter((t.name, p.partition_index) for t in request.topics for p in t.partitions)
    replica_id = int(getattr(request, "replica_id", CONSUMER))
    read_committed = int(getattr(request, "isolation_level", 0)) == READ_COMMITTED  # v2+
    topics = []
    items: list[OffsetItem] = []
    pending: list[dict[str, Any]] = []
    for topic in request.topics:
        info = node.topic(topic.name)
        partitions = []
        described = topic_allowed(ctx, Operation.DESCRIBE, topic.name)
        for p in topic.partitions:
            if not described:
                entry = _partition(p.partition_index, ErrorCode.topic_authorization_failed)
            elif asked[(topic.name, p.partition_index)] > 1:
                entry = _partition(p.partition_index, ErrorCode.invalid_request)
            elif info is None or not info.has_partition(p.partition_index):
                entry = _partition(p.partition_index, ErrorCode.unknown_topic_or_partition)
            elif (fenced := _epoch_check(node, topic.name, p.partition_index,
                                         getattr(p, "current_leader_epoch", -1))):
                entry = _partition(p.partition_index, fenced)
            else:
                entry = _partition(p.partition_index, ErrorCode.none)
                timestamp = _owner_timestamp(p.timestamp)
                if timestamp == LATEST_TIMESTAMP and replica_id != CONSUMER:
                    timestamp = LOG_END  # a replica (or Kafka's debugging id) asks for the log end
                elif timestamp == LATEST_TIMESTAMP and read_committed:
                    timestamp = LATEST_STABLE
                items.append(OffsetItem(TopicPartition(topic.name, p.partition_index), timestamp))
                pending.append(entry)
            partitions.append(entry)
        topics.append({"name": topic.name, "partitions": partitions})
    if items:
        results = await on_owners(node, items, lambda ops, part: ops.list_offsets(part), OffsetResult)
        for entry, result in zip(pending, results):
            entry.update(error_code=result.error_code, offset=result.offset, timestamp=result.timestamp,
                         leader_epoch=result.leader_epoch)
    return build(codec.response_class(KEY, ctx.api_version), {"throttle_time": 0, "topics": topics})


def _epoch_check(node: Any, topic: str, partition: int, current: int) -> int:
    if current < 0:
        return 0
    view = node.cluster.partition(topic, partition)
    return 0 if view is None else epoch_fence(current, view.leader_epoch)


async def _handle_v0(ctx: RequestContext, request: ListOffsetsV0Request) -> bytes:
    node = ctx.node
    answers: list[tuple[str, list[list[Any]]]] = []
    items: list[OffsetItem] = []
    pending: list[tuple[list[Any], int]] = []
    for topic in request.topics:
        info = node.topic(topic.name)
        partitions: list[list[Any]] = []
        described = topic_allowed(ctx, Operation.DESCRIBE, topic.name)
        for index, timestamp, max_num_offsets in topic.partitions:
            if not described:
                partitions.append([index, int(ErrorCode.topic_authorization_failed), []])
                continue
            if info is None or not info.has_partition(index):
                partitions.append([index, int(ErrorCode.unknown_topic_or_partition), []])
                continue
            entry: list[Any] = [index, 0, []]
            partitions.append(entry)
            items.append(OffsetItem(TopicPartition(topic.name, index), _owner_timestamp(timestamp)))
            pending.append((entry, max_num_offsets))
        answers.append((topic.name, partitions))
    if items:
        results = await on_owners(node, items, lambda ops, part: ops.list_offsets(part), OffsetResult)
        for (entry, max_num_offsets), result in zip(pending, results):
            entry[1] = result.error_code
            entry[2] = [result.offset] if result.error_code == 0 and result.offset >= 0 and max_num_offsets > 0 else []
    return list_offsets_v0.encode_response([(name, [tuple(p) for p in partitions]) for name, partitions in answers])
