"""Group administration: DescribeGroups (15) 0-6, ListGroups (16) 0-5, DeleteGroups (42) 0-2.

Behaviour: answered by the coordinator process from its in-memory groups. DescribeGroups
gives members' metadata and assignments only for a Stable group (as Kafka does); an
unknown group is reported as state "Dead" with no error before v6 and as
GROUP_ID_NOT_FOUND from v6 (KIP-1043). ListGroups filters by state (v4+, names matched
case-insensitively) and by type (v5+: every group here is "classic"). DeleteGroups
refuses a group with members (NON_EMPTY_GROUP) and writes tombstones for its offsets
and metadata. Authorized operations are not computed (-2147483648).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

from kio.static.protocol import Entity

from broker.authorization import operations_field
from broker.context import CoordinatorContext
from broker.coordinator.api import coordinator_api
from broker.protocol import codec
from broker.protocol.build import build
from broker.protocol.errors import ErrorCode
from coordination.acls.model import CLUSTER_NAME, Operation, ResourceType
from coordination.groups.coordinator import GroupSummary

if TYPE_CHECKING:  # ~200 kio classes, for mypy only: none is imported at run time (requests.py)
    from broker.protocol.requests import DeleteGroupsRequest, DescribeGroupsRequest, ListGroupsRequest

NO_OPERATIONS = -(2**31)

# ---------------------------------------------------------------------- DescribeGroups
DESCRIBE_GROUPS = 15


def _describe_entry(version: int, summary: GroupSummary) -> dict[str, Any]:
    code = summary.error_code
    if code == ErrorCode.group_id_not_found and version < 6:
        code = 0  # before v6 an unknown group is simply "Dead"
    return {
        "error_code": code, "error_message": None, "group_id": summary.group_id,
        "group_state": summary.state, "protocol_type": summary.protocol_type, "protocol_data": summary.protocol,
        "members": [{"member_id": m.member_id, "group_instance_id": m.group_instance_id, "client_id": m.client_id,
                     "client_host": m.client_host, "member_metadata": m.metadata, "member_assignment": m.assignment}
                    for m in summary.members],
        "authorized_operations": NO_OPERATIONS,
    }


def _group_operations(ctx: CoordinatorContext, group: str) -> int:
    def allowed_on(operation: Operation) -> bool:
        return ctx.allowed(operation, ResourceType.GROUP, group)

    return operations_field(allowed_on, ResourceType.GROUP)


def _refused_entry(group: str) -> dict[str, Any]:
    return {"error_code": ErrorCode.group_authorization_failed, "error_message": None, "group_id": group, "group_state": "",
            "protocol_type": "", "protocol_data": "", "members": (), "authorized_operations": NO_OPERATIONS}


def _describe_error(request: DescribeGroupsRequest, version: int, code: int) -> Entity:
    return build(codec.response_class(DESCRIBE_GROUPS, version), {"throttle_time": 0, "groups": [
        {"error_code": code, "error_message": None, "group_id": g, "group_state": "", "protocol_type": "",
         "protocol_data": "", "members": (), "authorized_operations": NO_OPERATIONS} for g in request.groups]})


@coordinator_api(DESCRIBE_GROUPS, "DescribeGroups", 0, 6, error_response=_describe_error)
def serve_describe_groups(ctx: CoordinatorContext, request: DescribeGroupsRequest) -> Entity:
    version = ctx.api_version
    groups = [_describe_entry(version, ctx.coordinator.describe(g))
              if ctx.allowed(Operation.DESCRIBE, ResourceType.GROUP, g) else _refused_entry(g) for g in request.groups]
    if getattr(request, "include_authorized_operations", False):  # v3+
        for entry in groups:
            if entry["error_code"] == 0:
                entry["authorized_operations"] = _group_operations(ctx, entry["group_id"])
    return build(codec.response_class(DESCRIBE_GROUPS, version), {"throttle_time": 0, "groups": groups})


# ---------------------------------------------------------------------- ListGroups
LIST_GROUPS = 16


def _list_error(request: ListGroupsRequest, version: int, code: int) -> Entity:
    return build(codec.response_class(LIST_GROUPS, version), {"throttle_time": 0, "error_code": code, "groups": ()})


@coordinator_api(LIST_GROUPS, "ListGroups", 0, 5, error_response=_list_error)
def serve_list_groups(ctx: CoordinatorContext, request: ListGroupsRequest) -> Entity:
    version = ctx.api_version
    wanted_states = getattr(request, "states_filter", ())
    states = {name.lower() for name in wanted_states} if wanted_states else None
    types = {t.lower() for t in getattr(request, "types_filter", ())}
    code, groups = ctx.coordinator.list_groups(states)
    if types:
        groups = [entry for entry in groups if entry[3] in types]
    if not ctx.allowed(Operation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):  # Kafka: else only describable groups
        groups = [entry for entry in groups if ctx.allowed(Operation.DESCRIBE, ResourceType.GROUP, entry[0])]
    return build(codec.response_class(LIST_GROUPS, version), {"throttle_time": 0, "error_code": code, "groups": [
        {"group_id": g, "protocol_type": protocol_type, "group_state": state, "group_type": group_type}
        for g, protocol_type, state, group_type in groups]})


# ---------------------------------------------------------------------- DeleteGroups
DELETE_GROUPS = 42


def _delete_answer(version: int, names: Sequence[str], codes: list[int]) -> Entity:
    return build(codec.response_class(DELETE_GROUPS, version), {
        "throttle_time": 0, "results": [{"group_id": g, "error_code": c} for g, c in zip(names, codes)]})


def _delete_error(request: DeleteGroupsRequest, version: int, code: int) -> Entity:
    return _delete_answer(version, request.groups_names, [code] * len(request.groups_names))


@coordinator_api(DELETE_GROUPS, "DeleteGroups", 0, 2, error_response=_delete_error)
async def serve_delete_groups(ctx: CoordinatorContext, request: DeleteGroupsRequest) -> Entity:
    names = list(request.groups_names)
    permitted = [g for g in names if ctx.allowed(Operation.DELETE, ResourceType.GROUP, g)]
    deleted = dict(zip(permitted, await ctx.coordinator.delete_groups(permitted))) if permitted else {}
    codes = [deleted.get(g, ErrorCode.group_authorization_failed) for g in names]
    return _delete_answer(ctx.api_version, names, codes)
