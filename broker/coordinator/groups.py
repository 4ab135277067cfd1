"""The classic group protocol: JoinGroup (11) 0-9, SyncGroup (14) 0-5, Heartbeat (12) 0-4,
LeaveGroup (13) 0-5.

Behaviour: served by the coordinator process (broker/coordinator/api.py: workers forward
the undecoded request); the semantics live in coordination/groups/coordinator.py. This
module only translates between kio entities and the coordinator's typed values.

Version notes: JoinGroup v1 adds rebalance_timeout (v0: the session timeout is used),
v4 requires a member id (first join answers MEMBER_ID_REQUIRED with one), v5
group_instance_id (static membership), v6 flexible, v7 protocol type/name nullable in
answers, v8 reason, v9 skip_assignment (always false: we never skip). SyncGroup v3
group_instance_id, v5 protocol type/name (checked when sent). Heartbeat v3
group_instance_id. LeaveGroup v3 batches members (per-member errors), v5 reason.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

from kio.static.protocol import Entity

from broker.context import CoordinatorContext
from broker.coordinator.api import coordinator_api
from broker.protocol import codec
from broker.protocol.build import build
from broker.protocol.errors import ErrorCode
from coordination.acls.model import Operation, ResourceType
from coordination.groups.requests import JoiningMember, MemberRef

if TYPE_CHECKING:  # ~200 kio classes, for mypy only: none is imported at run time (requests.py)
    from broker.protocol.requests import HeartbeatRequest, JoinGroupRequest, LeaveGroupRequest, SyncGroupRequest


def milliseconds(value: timedelta | int | None, default: int = -1) -> int:
    """A kio i32Timedelta (or a plain int) in milliseconds."""
    if value is None:
        return default
    if isinstance(value, timedelta):
        return int(round(value.total_seconds() * 1000))
    return int(value)


# ---------------------------------------------------------------------- JoinGroup
JOIN_GROUP = 11


def _join_answer(version: int, code: int, generation: int = -1, protocol_type: str | None = None,
                 protocol_name: str | None = None, leader: str = "", member_id: str = "",
                 members: list[tuple[str, str | None, bytes]] | None = None) -> Entity:
    nullable = version >= 7  # before v7 the protocol name is a non-null string
    return build(codec.response_class(JOIN_GROUP, version), {
        "throttle_time": 0, "error_code": code, "generation_id": generation,
        "protocol_type": protocol_type if nullable else None,
        "protocol_name": protocol_name if nullable else (protocol_name or ""),
        "leader": leader, "skip_assignment": False, "member_id": member_id,
        "members": [{"member_id": m, "group_instance_id": i, "metadata": md} for m, i, md in members or ()],
    })


def _join_error(request: JoinGroupRequest, version: int, code: int) -> Entity:
    return _join_answer(version, code, member_id=request.member_id)


@coordinator_api(JOIN_GROUP, "JoinGroup", 0, 9, error_response=_join_error)
async def serve_join_group(ctx: CoordinatorContext, request: JoinGroupRequest) -> Entity:
    if not ctx.allowed(Operation.READ, ResourceType.GROUP, request.group_id):
        return _join_error(request, ctx.api_version, ErrorCode.group_authorization_failed)
    version = ctx.api_version
    joining = JoiningMember(request.member_id, getattr(request, "group_instance_id", None), request.protocol_type,
                            tuple((p.name, bytes(p.metadata)) for p in request.protocols),
                            milliseconds(request.session_timeout), milliseconds(getattr(request, "rebalance_timeout", None)),
                            ctx.client_id or "", ctx.client_host)
    result = await ctx.coordinator.join_group(request.group_id, joining, require_known_member_id=version >= 4)
    return _join_answer(version, result.error_code, result.generation, result.protocol_type, result.protocol_name,
                        result.leader, result.member_id, result.members)


# ---------------------------------------------------------------------- SyncGroup
SYNC_GROUP = 14


def _sync_answer(version: int, code: int, protocol_type: str | None = None, protocol_name: str | None = None,
                 assignment: bytes = b"") -> Entity:
    return build(codec.response_class(SYNC_GROUP, version), {
        "throttle_time": 0, "error_code": code, "protocol_type": protocol_type, "protocol_name": protocol_name,
        "assignment": assignment,
    })


def _sync_error(request: SyncGroupRequest, version: int, code: int) -> Entity:
    return _sync_answer(version, code)


@coordinator_api(SYNC_GROUP, "SyncGroup", 0, 5, error_response=_sync_error)
async def serve_sync_group(ctx: CoordinatorContext, request: SyncGroupRequest) -> Entity:
    if not ctx.allowed(Operation.READ, ResourceType.GROUP, request.group_id):
        return _sync_error(request, ctx.api_version, ErrorCode.group_authorization_failed)
    member = MemberRef(int(request.generation_id), request.member_id, getattr(request, "group_instance_id", None))
    result = await ctx.coordinator.sync_group(
        request.group_id, member, getattr(request, "protocol_type", None), getattr(request, "protocol_name", None),
        [(a.member_id, bytes(a.assignment)) for a in request.assignments])
    return _sync_answer(ctx.api_version, result.error_code, result.protocol_type, result.protocol_name, result.assignment)


# ---------------------------------------------------------------------- Heartbeat
HEARTBEAT = 12


def _heartbeat_answer(version: int, code: int) -> Entity:
    return build(codec.response_class(HEARTBEAT, version), {"throttle_time": 0, "error_code": code})


def _heartbeat_error(request: HeartbeatRequest, version: int, code: int) -> Entity:
    return _heartbeat_answer(version, code)


# A heartbeat the coordinator process died holding is answered as Kafka's coordinator
# answers heartbeats while it loads a group, "just blindly" with no error: the member's
# session (librdkafka counts it from the last heartbeat answered without an error) lives on
# while the successor loads the group, whose members' deadlines start afresh.
@coordinator_api(HEARTBEAT, "Heartbeat", 0, 4, error_response=_heartbeat_error, lost=ErrorCode.none)
def serve_heartbeat(ctx: CoordinatorContext, request: HeartbeatRequest) -> Entity:
    if not ctx.allowed(Operation.READ, ResourceType.GROUP, request.group_id):
        return _heartbeat_error(request, ctx.api_version, ErrorCode.group_authorization_failed)
    member = MemberRef(int(request.generation_id), request.member_id, getattr(request, "group_instance_id", None))
    code = ctx.coordinator.heartbeat(request.group_id, member)
    return _heartbeat_answer(ctx.api_version, code)


# ---------------------------------------------------------------------- LeaveGroup
LEAVE_GROUP = 13


def _leaving(request: LeaveGroupRequest) -> list[tuple[str, str | None]]:
    members = getattr(request, "members", None)
    if members is None:  # v0-2: one member
        return [(getattr(request, "member_id", ""), None)]
    return [(m.member_id, m.group_instance_id) for m in members]


def _leave_answer(version: int, code: int, leaving: list[tuple[str, str | None]], codes: list[int]) -> Entity:
    top = code
    if version < 3 and not top and codes:
        top = codes[0]  # v0-2 answer for their single member at the top
    return build(codec.response_class(LEAVE_GROUP, version), {
        "throttle_time": 0, "error_code": top,
        "members": [{"member_id": m, "group_instance_id": i, "error_code": c} for (m, i), c in zip(leaving, codes)],
    })


def _leave_error(request: LeaveGroupRequest, version: int, code: int) -> Entity:
    leaving = _leaving(request)
    return _leave_answer(version, code, leaving, [code] * len(leaving))


@coordinator_api(LEAVE_GROUP, "LeaveGroup", 0, 5, error_response=_leave_error)
async def serve_leave_group(ctx: CoordinatorContext, request: LeaveGroupRequest) -> Entity:
    if not ctx.allowed(Operation.READ, ResourceType.GROUP, request.group_id):
        return _leave_error(request, ctx.api_version, ErrorCode.group_authorization_failed)
    leaving = _leaving(request)
    code, codes = await ctx.coordinator.leave_group(request.group_id, leaving)
    return _leave_answer(ctx.api_version, code, leaving, codes)
