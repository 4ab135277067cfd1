"""Share groups (KIP-932), group side: ShareGroupHeartbeat (76) v1 and ShareGroupDescribe
(77) v1.

Behaviour: served by the coordinator process; the semantics are in
coordination/groups/share/ (heartbeat.py decides, service.py writes and applies). This
module translates kio entities to those values and back, and makes Kafka's KafkaApis
checks first: READ on the group for a heartbeat (GROUP_AUTHORIZATION_FAILED), DESCRIBE on
every topic it subscribes to (TOPIC_AUTHORIZATION_FAILED); DESCRIBE on each group described,
and on every topic its members are assigned (else the group answers TOPIC_AUTHORIZATION_FAILED).

Version notes: v1 is the only version Kafka 4.x serves (v0 was the early-access one,
withdrawn). In v1 the client names itself: a member joins with the UUID it generated and
epoch 0.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.static.protocol import Entity

from broker.authorization import operations_field
from broker.context import CoordinatorContext
from broker.coordinator.api import coordinator_api
from broker.protocol import codec
from broker.protocol.build import build
from broker.protocol.errors import ErrorCode
from coordination.acls.model import Operation, ResourceType
from coordination.groups.share.heartbeat import ShareHeartbeatAnswer, ShareHeartbeatRequest
from coordination.groups.share.service import ShareGroupDescription

if TYPE_CHECKING:  # ~200 kio classes, for mypy only: none is imported at run time (requests.py)
    from broker.protocol.requests import ShareGroupDescribeRequest, ShareGroupHeartbeatRequest

SHARE_GROUP_HEARTBEAT = 76
SHARE_GROUP_DESCRIBE = 77
NO_OPERATIONS = -2147483648  # Kafka's "not asked for"
TOPICS_REFUSED = "The group has described topic(s) that the client is not authorized to describe."


def _heartbeat_answer(version: int, answer: ShareHeartbeatAnswer) -> Entity:
    ok = answer.error_code == 0
    assignment = None
    if ok and answer.assignment is not None:
        assignment = {"topic_partitions": [{"topic_id": topic, "partitions": list(parts)}
                                           for topic, parts in sorted(answer.assignment.items(), key=lambda i: str(i[0]))]}
    return build(codec.response_class(SHARE_GROUP_HEARTBEAT, version), {
        "throttle_time": 0, "error_code": answer.error_code, "error_message": answer.error_message,
        "member_id": answer.member_id if ok else None, "member_epoch": answer.member_epoch if ok else 0,
        "heartbeat_interval": answer.heartbeat_interval_ms if ok else 0, "assignment": assignment})


def _heartbeat_error(request: ShareGroupHeartbeatRequest, version: int, code: int) -> Entity:
    return _heartbeat_answer(version, ShareHeartbeatAnswer(code))


@coordinator_api(SHARE_GROUP_HEARTBEAT, "ShareGroupHeartbeat", 1, 1, error_response=_heartbeat_error,
                 lost=ErrorCode.coordinator_not_available)
async def serve_share_group_heartbeat(ctx: CoordinatorContext, request: ShareGroupHeartbeatRequest) -> Entity:
    version = ctx.api_version
    if not ctx.allowed(Operation.READ, ResourceType.GROUP, request.group_id):
        return _heartbeat_answer(version, ShareHeartbeatAnswer(int(ErrorCode.group_authorization_failed)))
    names = request.subscribed_topic_names
    if names and not all(ctx.allowed(Operation.DESCRIBE, ResourceType.TOPIC, name) for name in names):
        return _heartbeat_answer(version, ShareHeartbeatAnswer(int(ErrorCode.topic_authorization_failed)))
    answer = await ctx.coordinator.share.heartbeat(ShareHeartbeatRequest(
        request.group_id, request.member_id, int(request.member_epoch), request.rack_id,
        tuple(names) if names is not None else None, ctx.client_id or "", ctx.client_host.lstrip("/")))
    return _heartbeat_answer(version, answer)


# ---------------------------------------------------------------------- ShareGroupDescribe


def _described(ctx: CoordinatorContext, described: ShareGroupDescription, with_operations: bool) -> dict[str, Any]:
    name_of = ctx.coordinator.share.catalog.name_of
    members = [{
        "member_id": m.member_id, "rack_id": m.rack_id, "member_epoch": m.member_epoch, "client_id": m.client_id,
        "client_host": m.client_host, "subscribed_topic_names": list(m.subscribed_topic_names),
        "assignment": {"topic_partitions": [
            {"topic_id": topic, "topic_name": name_of(topic), "partitions": sorted(parts)}
            for topic, parts in sorted(m.assigned.items(), key=lambda item: str(item[0]))
            if parts and name_of(topic) is not None]}}  # a topic deleted meanwhile is left out, as Kafka does
        for m in described.members]
    operations = NO_OPERATIONS
    if with_operations and described.error_code == 0:
        operations = operations_field(lambda op: ctx.allowed(op, ResourceType.GROUP, described.group_id),
                                      ResourceType.GROUP)
    return {"error_code": described.error_code, "error_message": described.error_message,
            "group_id": described.group_id, "group_state": described.state, "group_epoch": described.group_epoch,
            "assignment_epoch": described.assignment_epoch, "assignor_name": described.assignor,
            "members": members, "authorized_operations": operations}


def _describe_error(request: ShareGroupDescribeRequest, version: int, code: int) -> Entity:
    return build(codec.response_class(SHARE_GROUP_DESCRIBE, version), {"throttle_time": 0, "groups": [
        {"error_code": code, "error_message": None, "group_id": g, "group_state": "", "group_epoch": 0,
         "assignment_epoch": 0, "assignor_name": "", "members": (), "authorized_operations": NO_OPERATIONS}
        for g in request.group_ids]})


@coordinator_api(SHARE_GROUP_DESCRIBE, "ShareGroupDescribe", 1, 1, error_response=_describe_error)
def serve_share_group_describe(ctx: CoordinatorContext, request: ShareGroupDescribeRequest) -> Entity:
    wanted = list(request.group_ids)
    allowed = [g for g in wanted if ctx.allowed(Operation.DESCRIBE, ResourceType.GROUP, g)]
    found = {d.group_id: d for d in ctx.coordinator.share.describe(allowed)}
    groups = []
    name_of = ctx.coordinator.share.catalog.name_of
    for group_id in wanted:
        described = found.get(group_id) or ShareGroupDescription(int(ErrorCode.group_authorization_failed), group_id)
        # Clients may not see topics they may not describe: such a group is refused whole.
        names = {name for m in described.members for name in map(name_of, m.assigned) if name is not None}
        if not all(ctx.allowed(Operation.DESCRIBE, ResourceType.TOPIC, name) for name in names):
            described = ShareGroupDescription(int(ErrorCode.topic_authorization_failed), group_id, TOPICS_REFUSED)
        groups.append(_described(ctx, described, bool(request.include_authorized_operations)))
    return build(codec.response_class(SHARE_GROUP_DESCRIBE, ctx.api_version), {"throttle_time": 0, "groups": groups})
