"""DescribeTopicPartitions (key 75), version 0: KIP-966's paginated topic description, what a
Kafka 3.7+ AdminClient's describeTopics (and so kafka-topics.sh --describe) sends.

Behaviour, as Kafka's DescribeTopicPartitionsRequestHandler and its metadata cache answer:

* The topics asked for (every topic for an empty list), each named once, in name order,
  starting at the cursor's topic (names before it are left out) and, in that topic, at the
  cursor's partition. Each topic's partitions come in index order until the response holds
  ``ResponsePartitionLimit`` partitions (bounded to 1..``max.request.partition.size.limit``:
  0 or a negative limit gets one partition). When the limit stops the walk, ``NextCursor``
  names where to resume: the next partition of the topic cut short, or partition 0 of the
  next topic when the limit fell on a topic's end; no cursor once everything was answered.
* Each partition as Metadata describes it (broker/apis/metadata.py's helpers): leader (-1
  while its broker is not alive), leader epoch, replicas, ISR, offline replicas; its error is
  always 0, as Kafka's. Castle elects leaders without KIP-966's eligible leader replicas, so
  ``EligibleLeaderReplicas`` and ``LastKnownElr`` are empty lists, as Kafka answers them for a
  partition without an ELR.
* A topic named that does not exist: UNKNOWN_TOPIC_OR_PARTITION, or INVALID_TOPIC_EXCEPTION
  for a name Kafka would not accept. Nothing is auto-created.
* ACLs: a topic the principal may not DESCRIBE is TOPIC_AUTHORIZATION_FAILED with the zero
  topic id, listed after the others (without disclosing whether it exists); when every topic
  is asked for, such topics are silently left out. ``TopicAuthorizedOperations`` is always
  filled in (every operation without an authorizer).
* A cursor whose topic is not among the topics named, or whose partition is negative, is
  INVALID_REQUEST for every topic named (Kafka's InvalidRequestException answer). A cursor
  past a topic's last partition answers that topic with no partitions.
* ``IsInternal``: Kafka's internal topics (Topic.isInternal).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from broker.apis.metadata import NO_OPERATIONS, ZERO_UUID, live_leader, offline_replicas
from broker.authorization import operations_on, topic_allowed
from broker.context import RequestContext, Response
from broker.dispatch import api
from broker.protocol import codec
from broker.protocol.build import build
from broker.protocol.errors import ErrorCode
from coordination.acls.model import Operation, ResourceType
from coordination.topics import TopicInfo, validate_topic_name

if TYPE_CHECKING:  # ~200 kio classes, for mypy only: none is imported at run time (requests.py)
    from broker.protocol.requests import DescribeTopicPartitionsRequest

KEY = 75
KAFKA_INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})


def _topic(code: int, name: str, topic_id: Any = None, partitions: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"error_code": code, "name": name, "topic_id": topic_id or ZERO_UUID,
            "is_internal": name in KAFKA_INTERNAL_TOPICS and code != ErrorCode.topic_authorization_failed,
            "partitions": partitions or [], "topic_authorized_operations": NO_OPERATIONS}


def _partition(node: Any, topic: str, index: int) -> dict[str, Any]:
    view = node.cluster.partition(topic, index)
    if view is None:  # counted by the registry, not loaded yet: as Metadata answers a partition being created
        return {"error_code": ErrorCode.leader_not_available, "partition_index": index, "leader_id": -1,
                "leader_epoch": -1, "replica_nodes": (), "isr_nodes": (), "eligible_leader_replicas": (),
                "last_known_elr": (), "offline_replicas": ()}
    return {"error_code": 0, "partition_index": index, "leader_id": live_leader(node, view.leader),
            "leader_epoch": view.leader_epoch, "replica_nodes": tuple(view.replicas), "isr_nodes": tuple(view.isr),
            "eligible_leader_replicas": (), "last_known_elr": (),
            "offline_replicas": offline_replicas(node, view.replicas)}


def _answer(topics: list[dict[str, Any]], next_cursor: dict[str, Any] | None = None) -> Any:
    return build(codec.response_class(KEY, 0), {"throttle_time": 0, "topics": topics, "next_cursor": next_cursor})


def _error(request: Any, version: int, code: int) -> Any:
    """Kafka's getErrorResponse: every topic named, with ``code`` and nothing else."""
    return _answer([{**_topic(code, t.name), "is_internal": False} for t in request.topics])


def _describe(node: Any, names: list[str], start_of: dict[str, int], limit: int,
              every_topic: bool) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """Kafka's KRaftMetadataCache.describeTopicResponse: walk ``names`` (sorted) until
    ``limit`` partitions are answered; the topics and the cursor to resume at."""
    remaining = limit
    topics: list[dict[str, Any]] = []
    for name in names:
        if remaining == 0:  # the limit fell on the previous topic's end
            return topics, {"topic_name": name, "partition_index": 0}
        info: TopicInfo | None = node.topic(name)
        if info is None:
            if not every_topic:
                code = ErrorCode.invalid_topic_exception if validate_topic_name(name) else ErrorCode.unknown_topic_or_partition
                topics.append(_topic(code, name))
            continue
        count = max(info.partitions, 0)
        start = start_of.get(name, 0)
        upper = min(count, start + remaining)
        partitions = [_partition(node, name, p) for p in range(start, upper)]
        topics.append(_topic(0, name, info.topic_id, partitions))
        if upper < count:
            return topics, {"topic_name": name, "partition_index": upper}
        remaining -= len(partitions)
    return topics, None


@api(KEY, "DescribeTopicPartitions", 0, 0, error_response=_error)
def handle_describe_topic_partitions(ctx: RequestContext, request: DescribeTopicPartitionsRequest) -> Response:
    node = ctx.node
    node.registry.refresh()
    cursor = request.cursor
    cursor_topic = cursor.topic_name if cursor is not None else ""
    every_topic = not request.topics
    if every_topic:
        names = {info.name for info in node.registry.all() if info.name >= cursor_topic}
    else:
        names = {t.name for t in request.topics if t.name >= cursor_topic}
        if cursor is not None and cursor.topic_name not in names:
            return _error(request, 0, ErrorCode.invalid_request)
    if cursor is not None and cursor.partition_index < 0:
        return _error(request, 0, ErrorCode.invalid_request)
    refused: list[dict[str, Any]] = []
    authorized: list[str] = []
    for name in sorted(names):
        if topic_allowed(ctx, Operation.DESCRIBE, name):
            authorized.append(name)
        elif not every_topic:
            refused.append(_topic(ErrorCode.topic_authorization_failed, name))
    limit = max(min(node.config.get_int("max.request.partition.size.limit"), request.response_partition_limit), 1)
    start_of: dict[str, int] = {cursor.topic_name: cursor.partition_index} if cursor is not None else {}
    topics, next_cursor = _describe(node, authorized, start_of, limit, every_topic)
    for entry in topics:
        entry["topic_authorized_operations"] = operations_on(ctx, ResourceType.TOPIC, entry["name"])
    return _answer(topics + refused, next_cursor)
