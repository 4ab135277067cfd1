"""A share group's offsets for admins (KIP-932): DescribeShareGroupOffsets (90) 0-1,
AlterShareGroupOffsets (91) 0, DeleteShareGroupOffsets (92) 0.

Behaviour: coordination/groups/share/offsets.py (the start offsets are share-partition state
in the share coordinator). This module makes Kafka's KafkaApis checks first: DESCRIBE on each
group described and on its topics; READ on the group altered and on its topics; DELETE on
the group whose offsets are deleted and READ on its topics. A topic refused answers
TOPIC_AUTHORIZATION_FAILED, the others are served.

Version notes: DescribeShareGroupOffsets v1 adds each partition's Lag: the partition's high
watermark less the start offset and the records after it already done (the share state's
delivery complete count), as Kafka computes it; -1 when either is not known.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from kio.static.protocol import Entity

from broker.context import CoordinatorContext
from broker.coordinator.api import coordinator_api
from broker.protocol import codec
from broker.protocol.build import build
from broker.protocol.errors import ErrorCode
from coordination.acls.model import Operation, ResourceType
from coordination.groups.share.offsets import PartitionOffset, TopicOffsets, TopicResult

if TYPE_CHECKING:  # ~200 kio classes, for mypy only: none is imported at run time (requests.py)
    from broker.protocol.requests import (
        AlterShareGroupOffsetsRequest,
        DeleteShareGroupOffsetsRequest,
        DescribeShareGroupOffsetsRequest,
    )

DESCRIBE_SHARE_GROUP_OFFSETS, ALTER_SHARE_GROUP_OFFSETS, DELETE_SHARE_GROUP_OFFSETS = 90, 91, 92
NO_LAG = -1
UNKNOWN_TOPIC_ID = None  # the zero uuid on the wire


def _partition(p: PartitionOffset, lag: int = NO_LAG) -> dict[str, Any]:
    return {"partition_index": p.partition, "start_offset": p.start_offset, "leader_epoch": p.leader_epoch,
            "lag": lag, "error_code": p.error_code, "error_message": p.error_message}


def _topic(t: TopicOffsets, lags: dict[tuple[str, int], int] | None = None) -> dict[str, Any]:
    return {"topic_name": t.name, "topic_id": t.topic_id,
            "partitions": [_partition(p, (lags or {}).get((t.name, p.partition), NO_LAG)) for p in t.partitions]}


async def _lags(ctx: CoordinatorContext, topics: list[TopicOffsets]) -> dict[tuple[str, int], int]:
    """(topic, partition) -> lag of the partitions whose start offset and done count are known."""
    known = [(t.name, p) for t in topics for p in t.partitions
             if not p.error_code and p.start_offset >= 0 and p.delivery_complete_count >= 0]
    marks = await asyncio.gather(*(ctx.high_watermark(name, p.partition) for name, p in known))
    return {(name, p.partition): max(0, mark - p.start_offset - p.delivery_complete_count)
            for (name, p), mark in zip(known, marks) if mark >= 0}


def _describe_group(group_id: str, code: int, topics: list[dict[str, Any]]) -> dict[str, Any]:
    return {"group_id": group_id, "topics": topics, "error_code": code, "error_message": None}


def _describe_error(request: DescribeShareGroupOffsetsRequest, version: int, code: int) -> Entity:
    return build(codec.response_class(DESCRIBE_SHARE_GROUP_OFFSETS, version), {
        "throttle_time": 0, "groups": [_describe_group(g.group_id, code, []) for g in request.groups]})


@coordinator_api(DESCRIBE_SHARE_GROUP_OFFSETS, "DescribeShareGroupOffsets", 0, 1, error_response=_describe_error)
async def serve_describe_share_group_offsets(ctx: CoordinatorContext, request: DescribeShareGroupOffsetsRequest
                                             ) -> Entity:
    groups = []
    for group in request.groups:
        if not ctx.allowed(Operation.DESCRIBE, ResourceType.GROUP, group.group_id):
            groups.append(_describe_group(group.group_id, int(ErrorCode.group_authorization_failed), []))
            continue
        if group.topics is None:
            code, found = await ctx.coordinator.share_offsets.describe(group.group_id, None)
            found = [t for t in found if ctx.allowed(Operation.DESCRIBE, ResourceType.TOPIC, t.name)]
            lags = await _lags(ctx, found) if ctx.api_version >= 1 else {}
            groups.append(_describe_group(group.group_id, code, [_topic(t, lags) for t in found]))
            continue
        wanted = [(t.topic_name, [int(p) for p in t.partitions]) for t in group.topics]
        allowed = [(name, parts) for name, parts in wanted if ctx.allowed(Operation.DESCRIBE, ResourceType.TOPIC, name)]
        code, found = await ctx.coordinator.share_offsets.describe(group.group_id, allowed)
        by_name = {t.name: t for t in found}
        lags = await _lags(ctx, found) if ctx.api_version >= 1 else {}
        topics = []
        for name, parts in wanted:
            described = by_name.get(name)
            if described is None:
                described = TopicOffsets(name, UNKNOWN_TOPIC_ID, tuple(
                    PartitionOffset(p, error_code=int(ErrorCode.topic_authorization_failed)) for p in parts))
            topics.append(_topic(described, lags))
        groups.append(_describe_group(group.group_id, code, [] if code else topics))
    return build(codec.response_class(DESCRIBE_SHARE_GROUP_OFFSETS, ctx.api_version),
                 {"throttle_time": 0, "groups": groups})


# ---------------------------------------------------------------------- AlterShareGroupOffsets


def _alter_answer(code: int, message: str | None, topics: list[TopicOffsets]) -> Entity:
    return build(codec.response_class(ALTER_SHARE_GROUP_OFFSETS, 0), {
        "throttle_time": 0, "error_code": code, "error_message": message, "responses": [
            {"topic_name": t.name, "topic_id": t.topic_id, "partitions": [
                {"partition_index": p.partition, "error_code": p.error_code, "error_message": p.error_message}
                for p in t.partitions]} for t in topics]})


def _alter_error(request: AlterShareGroupOffsetsRequest, version: int, code: int) -> Entity:
    return _alter_answer(code, None, [])


@coordinator_api(ALTER_SHARE_GROUP_OFFSETS, "AlterShareGroupOffsets", 0, 0, error_response=_alter_error)
async def serve_alter_share_group_offsets(ctx: CoordinatorContext, request: AlterShareGroupOffsetsRequest) -> Entity:
    if not ctx.allowed(Operation.READ, ResourceType.GROUP, request.group_id):
        return _alter_answer(int(ErrorCode.group_authorization_failed), None, [])
    refused = [TopicOffsets(t.topic_name, UNKNOWN_TOPIC_ID, tuple(
        PartitionOffset(int(p.partition_index), error_code=int(ErrorCode.topic_authorization_failed))
        for p in t.partitions)) for t in request.topics if not ctx.allowed(Operation.READ, ResourceType.TOPIC, t.topic_name)]
    allowed = [(t.topic_name, [(int(p.partition_index), int(p.start_offset)) for p in t.partitions])
               for t in request.topics if ctx.allowed(Operation.READ, ResourceType.TOPIC, t.topic_name)]
    code, message, altered = await ctx.coordinator.share_offsets.alter(request.group_id, allowed)
    if code:
        return _alter_answer(code, message, [])
    return _alter_answer(0, None, refused + altered)


# ---------------------------------------------------------------------- DeleteShareGroupOffsets


def _delete_answer(code: int, message: str | None, topics: list[TopicResult]) -> Entity:
    return build(codec.response_class(DELETE_SHARE_GROUP_OFFSETS, 0), {
        "throttle_time": 0, "error_code": code, "error_message": message, "responses": [
            {"topic_name": t.name, "topic_id": t.topic_id, "error_code": t.error_code,
             "error_message": t.error_message} for t in topics]})


def _delete_error(request: DeleteShareGroupOffsetsRequest, version: int, code: int) -> Entity:
    return _delete_answer(code, None, [])


@coordinator_api(DELETE_SHARE_GROUP_OFFSETS, "DeleteShareGroupOffsets", 0, 0, error_response=_delete_error)
async def serve_delete_share_group_offsets(ctx: CoordinatorContext, request: DeleteShareGroupOffsetsRequest) -> Entity:
    if not ctx.allowed(Operation.DELETE, ResourceType.GROUP, request.group_id):
        return _delete_answer(int(ErrorCode.group_authorization_failed), None, [])
    names = [t.topic_name for t in request.topics]
    refused = [TopicResult(n, UNKNOWN_TOPIC_ID, int(ErrorCode.topic_authorization_failed)) for n in names
               if not ctx.allowed(Operation.READ, ResourceType.TOPIC, n)]
    allowed = [n for n in names if ctx.allowed(Operation.READ, ResourceType.TOPIC, n)]
    code, message, results = await ctx.coordinator.share_offsets.delete(request.group_id, allowed)
    if code:
        return _delete_answer(code, message, [])
    return _delete_answer(0, None, refused + results)
