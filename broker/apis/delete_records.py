"""DeleteRecords (key 21), versions 0-2.

Behaviour: each partition is answered by the worker that owns it (owner op
``delete_records``, through broker.links.forwarding.on_owners), which moves the log start
offset up to the requested offset (-1: the high watermark) and answers the new low
watermark (the log start offset). An offset above the high watermark, or negative other
than -1, is OFFSET_OUT_OF_RANGE. An unknown topic or partition is
UNKNOWN_TOPIC_OR_PARTITION. As in Kafka, a topic whose cleanup.policy lacks "delete"
(compact only) refuses with POLICY_VIOLATION. The request timeout is not used: the
answer comes when the owners have moved their log start offsets (there are no replicas
to wait for).

Version notes: v1 is v0; v2 is flexible.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from broker.authorization import topic_allowed
from broker.context import RequestContext, Response
from broker.dispatch import api
from broker.links.forwarding import on_owners
from broker.partitions.partition_ops import DeleteItem, OffsetResult
from broker.protocol import codec
from broker.protocol.build import build
from broker.protocol.errors import ErrorCode
from coordination.acls.model import Operation
from storage.types import TopicPartition

if TYPE_CHECKING:  # ~200 kio classes, for mypy only: none is imported at run time (requests.py)
    from broker.protocol.requests import DeleteRecordsRequest

KEY = 21


def _partition(index: int, code: int, low_watermark: int = -1) -> dict[str, Any]:
    return {"partition_index": index, "low_watermark": low_watermark, "error_code": code}


def _error(request: Any, version: int, code: int) -> Any:
    return build(codec.response_class(KEY, version), {"throttle_time": 0, "topics": [
        {"name": t.name, "partitions": [_partition(p.partition_index, code) for p in t.partitions]} for t in request.topics]})


@api(KEY, "DeleteRecords", 0, 2, error_response=_error)
async def handle_delete_records(ctx: RequestContext, request: DeleteRecordsRequest) -> Response:
    node = ctx.node
    topics = []
    items: list[DeleteItem] = []
    pending: list[dict[str, Any]] = []
    for topic in request.topics:
        info = node.topic(topic.name)
        deletable = info is not None and node.logs.default_log_config.with_overrides(info.configs).delete
        partitions = []
        permitted = topic_allowed(ctx, Operation.DELETE, topic.name)
        for p in topic.partitions:
            if not permitted:
                entry = _partition(p.partition_index, ErrorCode.topic_authorization_failed)
            elif info is None or not info.has_partition(p.partition_index):
                entry = _partition(p.partition_index, ErrorCode.unknown_topic_or_partition)
            elif not deletable:
                entry = _partition(p.partition_index, ErrorCode.policy_violation)
            else:
                entry = _partition(p.partition_index, ErrorCode.none)
                items.append(DeleteItem(TopicPartition(topic.name, p.partition_index), p.offset))
                pending.append(entry)
            partitions.append(entry)
        topics.append({"name": topic.name, "partitions": partitions})
    if items:
        results = await on_owners(node, items, lambda ops, part: ops.delete_records(part), OffsetResult)
        for entry, result in zip(pending, results):
            entry.update(error_code=result.error_code, low_watermark=result.offset)
    return build(codec.response_class(KEY, ctx.api_version), {"throttle_time": 0, "topics": topics})
