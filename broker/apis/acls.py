"""DescribeAcls (key 29), CreateAcls (key 30) and DeleteAcls (key 31), versions 1-3.

Behaviour: Kafka's KafkaApis over its ZooKeeper-mode AclAuthorizer, with the rules of
coordination/acls/ (validate_binding, validate_filter, AclRules):

* CreateAcls checks each creation on its own (unknown codes, ANY/MATCH, a CLUSTER name other
  than ``kafka-cluster``, an empty name or one a znode cannot hold, a principal without
  ``Type:``): each refused one gets its error code and message, the valid ones are stored in
  one call. An ACL that already exists is a success (nothing changes).
* DescribeAcls checks its filter (an UNKNOWN anywhere: INVALID_REQUEST for the whole answer)
  and answers the matching bindings grouped by resource pattern (type, name, pattern type),
  each group with its entries. Groups and entries come sorted (Kafka's are in hash order).
* DeleteAcls checks each filter (a refused one gets its error and matches nothing), removes
  every binding some valid filter matches, and answers per filter the bindings it removed,
  each with error 0. A binding matched by several filters is listed under the first of them
  only, as AclAuthorizer.deleteAcls does (KRaft's controller lists it under each).

Version 0 (no pattern types) is not served: kio does not carry it, and every client that
speaks ACLs knows version 1 (Kafka 2.0+).

Authorization of these APIs (DESCRIBE or ALTER on the cluster; SECURITY_DISABLED without an
authorizer) is a request-wide check declared with ``@api(..., authorize=...)``: the connection
runs it before the handler, which never sees a refused request.

The bindings are kept by the coordination backend's ACL store (``ctx.node.cluster.acls()``:
ZooKeeper's /kafka-acl znodes, a file with the local backend); matches are computed from its
``all()`` with AclRules. Store calls may wait on ZooKeeper, so they run on the admin thread.
A failing store call ends the request in the API's "everything failed" answer.
"""

from __future__ import annotations

from typing import Any, Iterable

from broker.authorization import acl_admin
from broker.context import RequestContext, Response
from broker.dispatch import api
from broker.protocol import codec
from broker.protocol.acl_requests import CreateAclsRequest, DeleteAclsRequest, DescribeAclsRequest
from broker.protocol.build import build
from coordination.acls.authorizer import AclRules
from coordination.acls.model import AclBinding, AclBindingFilter, Operation, PatternType, Permission, ResourceType
from coordination.acls.validation import filter_for_version, validate_binding, validate_filter

DESCRIBE_KEY = 29
CREATE_KEY = 30
DELETE_KEY = 31
MIN_VERSION = 1
MAX_VERSION = 3


def _filter(resource_type: int, name: str | None, pattern_type: int, principal: str | None, host: str | None,
            operation: int, permission: int, version: int) -> AclBindingFilter:
    """A request's filter as Kafka reads it: unknown codes become UNKNOWN (refused by validate_filter)."""
    return filter_for_version(AclBindingFilter(ResourceType.from_code(resource_type), name, PatternType.from_code(pattern_type),
                                               principal, host, Operation.from_code(operation),
                                               Permission.from_code(permission)), version)


# ---------------------------------------------------------------------------- DescribeAcls
def _describe_answer(version: int, code: int, message: str | None, resources: list[dict[str, Any]]) -> Any:
    return build(codec.response_class(DESCRIBE_KEY, version),
                 {"throttle_time": 0, "error_code": code, "error_message": message, "resources": resources})


def _describe_error(request: Any, version: int, code: int) -> Any:
    return _describe_answer(version, code, None, [])


def _grouped(bindings: Iterable[AclBinding]) -> list[dict[str, Any]]:
    """DescribeAclsResponse.aclsResources: one resource per pattern, with its entries (sorted)."""
    groups: dict[tuple[int, str, int], list[dict[str, Any]]] = {}
    for b in sorted(bindings):
        groups.setdefault((int(b.resource_type), b.resource_name, int(b.pattern_type)), []).append(
            {"principal": b.principal, "host": b.host, "operation": int(b.operation), "permission_type": int(b.permission)})
    return [{"resource_type": rt, "resource_name": name, "pattern_type": pt, "acls": acls}
            for (rt, name, pt), acls in groups.items()]


# Authorization: a request-wide check (DESCRIBE on the cluster) goes in this decorator.
@api(DESCRIBE_KEY, "DescribeAcls", MIN_VERSION, MAX_VERSION, error_response=_describe_error,
     authorize=acl_admin(Operation.DESCRIBE))
async def handle_describe(ctx: RequestContext, request: DescribeAclsRequest) -> Response:
    wanted = _filter(request.resource_type_filter, request.resource_name_filter, request.pattern_type_filter,
                     request.principal_filter, request.host_filter, request.operation, request.permission_type,
                     ctx.api_version)
    refused = validate_filter(wanted, ctx.api_version)
    if refused is not None:
        return _describe_answer(ctx.api_version, refused.code, refused.message, [])
    store = ctx.node.cluster.acls()
    stored = await ctx.node.run_admin(store.all)
    return _describe_answer(ctx.api_version, 0, None, _grouped(AclRules(stored).describe(wanted)))


# ---------------------------------------------------------------------------- CreateAcls
def _create_answer(version: int, results: list[dict[str, Any]]) -> Any:
    return build(codec.response_class(CREATE_KEY, version), {"throttle_time": 0, "results": results})


def _create_error(request: Any, version: int, code: int) -> Any:
    return _create_answer(version, [{"error_code": code, "error_message": None} for _ in request.creations])


# Authorization: a request-wide check (ALTER on the cluster) goes in this decorator.
@api(CREATE_KEY, "CreateAcls", MIN_VERSION, MAX_VERSION, error_response=_create_error, authorize=acl_admin(Operation.ALTER))
async def handle_create(ctx: RequestContext, request: CreateAclsRequest) -> Response:
    results: list[dict[str, Any]] = []
    valid: list[AclBinding] = []
    for creation in request.creations:
        binding = AclBinding(ResourceType.from_code(creation.resource_type), creation.resource_name,
                             PatternType.from_code(creation.resource_pattern_type), creation.principal, creation.host,
                             Operation.from_code(creation.operation), Permission.from_code(creation.permission_type))
        refused = validate_binding(binding, ctx.api_version)
        if refused is None:
            valid.append(binding)
            results.append({"error_code": 0, "error_message": None})
        else:
            results.append({"error_code": refused.code, "error_message": refused.message})
    if valid:
        store = ctx.node.cluster.acls()
        await ctx.node.run_admin(lambda: store.add(valid))
    return _create_answer(ctx.api_version, results)


# ---------------------------------------------------------------------------- DeleteAcls
def _delete_answer(version: int, results: list[dict[str, Any]]) -> Any:
    return build(codec.response_class(DELETE_KEY, version), {"throttle_time": 0, "filter_results": results})


def _delete_error(request: Any, version: int, code: int) -> Any:
    return _delete_answer(version, [{"error_code": code, "error_message": None, "matching_acls": []}
                                    for _ in request.filters])


def _matching(binding: AclBinding) -> dict[str, Any]:
    return {"error_code": 0, "error_message": None, "resource_type": int(binding.resource_type),
            "resource_name": binding.resource_name, "pattern_type": int(binding.pattern_type),
            "principal": binding.principal, "host": binding.host, "operation": int(binding.operation),
            "permission_type": int(binding.permission)}


# Authorization: a request-wide check (ALTER on the cluster) goes in this decorator.
@api(DELETE_KEY, "DeleteAcls", MIN_VERSION, MAX_VERSION, error_response=_delete_error, authorize=acl_admin(Operation.ALTER))
async def handle_delete(ctx: RequestContext, request: DeleteAclsRequest) -> Response:
    results: list[dict[str, Any]] = []
    valid: list[tuple[int, AclBindingFilter]] = []  # (index in results, filter)
    for f in request.filters:
        wanted = _filter(f.resource_type_filter, f.resource_name_filter, f.pattern_type_filter, f.principal_filter,
                         f.host_filter, f.operation, f.permission_type, ctx.api_version)
        refused = validate_filter(wanted, ctx.api_version)
        if refused is None:
            valid.append((len(results), wanted))
            results.append({"error_code": 0, "error_message": None, "matching_acls": []})
        else:
            results.append({"error_code": refused.code, "error_message": refused.message, "matching_acls": []})
    if valid:
        store = ctx.node.cluster.acls()

        def delete() -> tuple[list[list[AclBinding]], set[AclBinding]]:
            # Read and remove on the one admin thread; what another broker removed meanwhile
            # is not reported as removed by this request.
            selected = AclRules(store.all()).select_for_delete([wanted for _, wanted in valid])
            doomed = [binding for bindings in selected for binding in bindings]
            return selected, set(store.remove(doomed)) if doomed else set()

        selected, removed = await ctx.node.run_admin(delete)
        for (index, _), bindings in zip(valid, selected):
            results[index]["matching_acls"] = [_matching(b) for b in bindings if b in removed]
    return _delete_answer(ctx.api_version, results)
