"""The consumer group protocol (KIP-848): ConsumerGroupHeartbeat (68) 0-1 and
ConsumerGroupDescribe (69) 0-1.

Behaviour: served by the coordinator process; the semantics are in
coordination/groups/consumer/ (heartbeat.py decides, service.py writes and applies). This
module translates kio entities to those values and back, and makes Kafka's KafkaApis
checks first: READ on the group for a heartbeat (GROUP_AUTHORIZATION_FAILED), DESCRIBE on
every topic it subscribes to by name (TOPIC_AUTHORIZATION_FAILED); DESCRIBE on each group
described.

Version notes: ConsumerGroupHeartbeat v1 adds SubscribedTopicRegex and requires the client
to name itself (a non-empty member id, KIP-1082; v0 lets the coordinator name a joining
member). ConsumerGroupDescribe v1 adds each member's MemberType (KIP-1099): 0 for a member
that joined with the classic protocol (online migration), 1 for the consumer protocol's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.static.protocol import Entity

from broker.authorization import operations_field
from broker.context import CoordinatorContext
from broker.coordinator.api import coordinator_api
from broker.coordinator.groups import milliseconds
from broker.protocol import codec
from broker.protocol.build import build
from broker.protocol.errors import ErrorCode
from coordination.acls.model import Operation, ResourceType
from coordination.groups.consumer.assignment_spec import TopicKey
from coordination.groups.consumer.heartbeat import HeartbeatAnswer, HeartbeatRequest
from coordination.groups.consumer.service import GroupDescription

if TYPE_CHECKING:  # ~200 kio classes, for mypy only: none is imported at run time (requests.py)
    from broker.protocol.requests import ConsumerGroupDescribeRequest, ConsumerGroupHeartbeatRequest

CONSUMER_GROUP_HEARTBEAT = 68
CONSUMER_GROUP_DESCRIBE = 69
MEMBER_TYPE_CLASSIC, MEMBER_TYPE_CONSUMER = 0, 1  # KIP-1099
NO_OPERATIONS = -2147483648  # Kafka's "not asked for"


def _heartbeat_answer(version: int, answer: HeartbeatAnswer) -> Entity:
    assignment = None
    if answer.error_code == 0 and answer.assignment is not None:
        assignment = {"topic_partitions": [{"topic_id": topic, "partitions": list(parts)}
                                           for topic, parts in sorted(answer.assignment.items(), key=lambda i: str(i[0]))]}
    return build(codec.response_class(CONSUMER_GROUP_HEARTBEAT, version), {
        "throttle_time": 0, "error_code": answer.error_code, "error_message": answer.error_message,
        "member_id": answer.member_id if answer.error_code == 0 else None,
        "member_epoch": answer.member_epoch if answer.error_code == 0 else 0,
        "heartbeat_interval": answer.heartbeat_interval_ms if answer.error_code == 0 else 0,
        "assignment": assignment})


def _heartbeat_error(request: ConsumerGroupHeartbeatRequest, version: int, code: int) -> Entity:
    return _heartbeat_answer(version, HeartbeatAnswer(code))


@coordinator_api(CONSUMER_GROUP_HEARTBEAT, "ConsumerGroupHeartbeat", 0, 1, error_response=_heartbeat_error,
                 lost=ErrorCode.coordinator_not_available)
async def serve_consumer_group_heartbeat(ctx: CoordinatorContext, request: ConsumerGroupHeartbeatRequest) -> Entity:
    version = ctx.api_version
    if not ctx.allowed(Operation.READ, ResourceType.GROUP, request.group_id):
        return _heartbeat_answer(version, HeartbeatAnswer(int(ErrorCode.group_authorization_failed)))
    names = request.subscribed_topic_names
    if names and not all(ctx.allowed(Operation.DESCRIBE, ResourceType.TOPIC, name) for name in names):
        return _heartbeat_answer(version, HeartbeatAnswer(int(ErrorCode.topic_authorization_failed)))
    owned: dict[TopicKey, tuple[int, ...]] | None = None
    if request.topic_partitions is not None:
        owned = {}
        for topic in request.topic_partitions:
            if topic.topic_id is not None:
                owned[topic.topic_id] = tuple(int(p) for p in topic.partitions)
    answer = await ctx.coordinator.consumer.heartbeat(HeartbeatRequest(
        request.group_id, request.member_id, int(request.member_epoch), request.instance_id, request.rack_id,
        milliseconds(request.rebalance_timeout), tuple(names) if names is not None else None,
        getattr(request, "subscribed_topic_regex", None), request.server_assignor, owned,
        ctx.client_id or "", ctx.client_host.lstrip("/"), version))
    return _heartbeat_answer(version, answer)


# ---------------------------------------------------------------------- ConsumerGroupDescribe


def _described(ctx: CoordinatorContext, described: GroupDescription, with_operations: bool) -> dict[str, Any]:
    name_of = ctx.coordinator.consumer.catalog.name_of

    def assignment(partitions: Any) -> dict[str, Any]:
        return {"topic_partitions": [
            {"topic_id": topic, "topic_name": name_of(topic) or "", "partitions": sorted(parts)}
            for topic, parts in sorted(partitions.items(), key=lambda item: str(item[0])) if parts]}

    members = [{
        "member_id": m.member.member_id, "instance_id": m.member.instance_id, "rack_id": m.member.rack_id,
        "member_epoch": m.member.member_epoch, "client_id": m.member.client_id, "client_host": m.member.client_host,
        "subscribed_topic_names": list(m.member.subscribed_topic_names),
        "subscribed_topic_regex": m.member.subscribed_topic_regex,
        "assignment": assignment(m.member.assignment.assigned), "target_assignment": assignment(m.target),
        "member_type": MEMBER_TYPE_CLASSIC if m.member.uses_classic_protocol else MEMBER_TYPE_CONSUMER}
        for m in described.members]
    operations = NO_OPERATIONS
    if with_operations and described.error_code == 0:
        operations = _group_operations(ctx, described.group_id)
    return {"error_code": described.error_code, "error_message": described.error_message,
            "group_id": described.group_id, "group_state": described.state, "group_epoch": described.group_epoch,
            "assignment_epoch": described.assignment_epoch, "assignor_name": described.assignor,
            "members": members, "authorized_operations": operations}


def _group_operations(ctx: CoordinatorContext, group_id: str) -> int:
    return operations_field(lambda operation: ctx.allowed(operation, ResourceType.GROUP, group_id), ResourceType.GROUP)


def _describe_error(request: ConsumerGroupDescribeRequest, version: int, code: int) -> Entity:
    return build(codec.response_class(CONSUMER_GROUP_DESCRIBE, version), {"throttle_time": 0, "groups": [
        {"error_code": code, "error_message": None, "group_id": g, "group_state": "", "group_epoch": 0,
         "assignment_epoch": 0, "assignor_name": "", "members": (), "authorized_operations": NO_OPERATIONS}
        for g in request.group_ids]})


@coordinator_api(CONSUMER_GROUP_DESCRIBE, "ConsumerGroupDescribe", 0, 1, error_response=_describe_error)
def serve_consumer_group_describe(ctx: CoordinatorContext, request: ConsumerGroupDescribeRequest) -> Entity:
    wanted = list(request.group_ids)
    allowed = [g for g in wanted if ctx.allowed(Operation.DESCRIBE, ResourceType.GROUP, g)]
    found = {d.group_id: d for d in ctx.coordinator.consumer.describe(allowed)}
    groups = []
    for group_id in wanted:
        described = found.get(group_id) or GroupDescription(int(ErrorCode.group_authorization_failed), group_id)
        groups.append(_described(ctx, described, bool(request.include_authorized_operations)))
    return build(codec.response_class(CONSUMER_GROUP_DESCRIBE, ctx.api_version), {"throttle_time": 0, "groups": groups})
