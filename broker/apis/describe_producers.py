"""DescribeProducers (key 61), version 0: the producers a partition's log keeps state for.

Behaviour: what kafka-transactions.sh describe-producers and find-hanging read. Each
partition is answered by the worker that owns it (owner op ``describe_producers``, through
broker.links.forwarding.on_owners), from its log's producer state, on the leader or a
follower alike (Kafka answers on any replica: the admin client asks the leader unless told
a broker id). Per producer: its id and epoch, the last sequence of its last data batch (-1:
none in this epoch), the timestamp of its last batch or marker, the coordinator epoch of its
last marker here (-1: none yet), and the first offset of its open transaction (-1: none),
which is how an operator finds a hanging transaction and its start offset to abort.

Kafka's checks, in its order, per topic: an invalid name is INVALID_TOPIC_EXCEPTION (with
the reason), READ on the topic else TOPIC_AUTHORIZATION_FAILED, an unknown topic
UNKNOWN_TOPIC_OR_PARTITION; per partition: one the topic lacks is
UNKNOWN_TOPIC_OR_PARTITION, one this broker holds no replica of NOT_LEADER_OR_FOLLOWER
(a follower answers from its own copy of the log, as Kafka's does).

Version notes: v0 is the only version; it is flexible.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from broker.authorization import topic_allowed
from broker.context import RequestContext, Response
from broker.dispatch import api
from broker.links.forwarding import AnyReplica, on_owners
from broker.partitions.partition_ops import ProducersResult
from broker.protocol import codec
from broker.protocol.build import build
from broker.protocol.errors import ErrorCode
from coordination.acls.model import Operation
from coordination.topics import validate_topic_name
from storage.types import TopicPartition

if TYPE_CHECKING:  # ~200 kio classes, for mypy only: none is imported at run time (requests.py)
    from broker.protocol.requests import DescribeProducersRequest

KEY = 61


def _partition(index: int, code: int, message: str | None = None) -> dict[str, Any]:
    return {"partition_index": index, "error_code": code, "error_message": message, "active_producers": ()}


def _error(request: Any, version: int, code: int) -> Any:
    return build(codec.response_class(KEY, version), {"throttle_time": 0, "topics": [
        {"name": t.name, "partitions": [_partition(int(p), code) for p in t.partition_indexes]}
        for t in request.topics]})


def _producers(result: ProducersResult) -> list[dict[str, int]]:
    return [{"producer_id": p.producer_id, "producer_epoch": p.producer_epoch, "last_sequence": p.last_sequence,
             "last_timestamp": p.last_timestamp, "coordinator_epoch": p.coordinator_epoch,
             "current_txn_start_offset": p.current_txn_start_offset} for p in result.producers]


@api(KEY, "DescribeProducers", 0, 0, error_response=_error)
async def handle_describe_producers(ctx: RequestContext, request: DescribeProducersRequest) -> Response:
    node = ctx.node
    topics = []
    items: list[tuple[TopicPartition]] = []  # on_owners' items hold their partition first
    pending: list[dict[str, Any]] = []
    for topic in request.topics:
        name = topic.name
        invalid = validate_topic_name(name)
        info = None
        topic_code, message = 0, None
        if invalid is not None:
            topic_code, message = int(ErrorCode.invalid_topic_exception), invalid
        elif not topic_allowed(ctx, Operation.READ, name):
            topic_code = int(ErrorCode.topic_authorization_failed)
        else:
            info = node.topic(name)
            if info is None:
                topic_code = int(ErrorCode.unknown_topic_or_partition)
        partitions = []
        for index in topic.partition_indexes:
            if topic_code:
                entry = _partition(int(index), topic_code, message)
            elif info is None or not info.has_partition(int(index)):
                entry = _partition(int(index), int(ErrorCode.unknown_topic_or_partition))
            else:
                entry = _partition(int(index), 0)
                items.append((TopicPartition(name, int(index)),))
                pending.append(entry)
            partitions.append(entry)
        topics.append({"name": name, "partitions": partitions})
    if items:
        results = await on_owners(AnyReplica(node), items, lambda ops, part: ops.describe_producers([tp for tp, in part]),
                                  ProducersResult)
        for entry, result in zip(pending, results):
            entry.update(error_code=result.error_code, active_producers=_producers(result))
    return build(codec.response_class(KEY, ctx.api_version), {"throttle_time": 0, "topics": topics})
