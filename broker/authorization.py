"""The authorization checks API handlers share (Kafka's KafkaApis rules, Castle's authorizer).

Two kinds, as in Kafka:
* request-wide checks, declared with the API (``@api(..., authorize=on_cluster(ALTER))``): the
  connection runs them before the handler and answers the API's "everything failed with X"
  response, e.g. CLUSTER_AUTHORIZATION_FAILED for ElectLeaders;
* per-resource checks inside handlers (``topic_allowed``): a Produce answers
  TOPIC_AUTHORIZATION_FAILED for the partitions of a topic it may not WRITE and appends the
  others; Metadata leaves out the topics the principal may not DESCRIBE. Group and offset APIs
  are checked in the coordinator process (CoordinatorContext.allowed), where the request is.

Without ``authorizer.class.name`` everything is allowed, and these cost one attribute check.
The principal is the connection's (``User:ANONYMOUS``, a certificate's DN, or the SASL user),
the host its peer address.
"""

from __future__ import annotations

from typing import Any, Callable

from broker.context import RequestContext
from broker.protocol.errors import ErrorCode
from coordination.acls.model import CLUSTER_NAME, SUPPORTED_OPERATIONS, Operation, ResourceType

Check = Callable[[RequestContext, Any], int]
NOT_PROVIDED = -(2**31)  # an authorized-operations field the client did not ask for


def operations_field(allowed_on: Callable[[Operation], bool], resource_type: ResourceType) -> int:
    """Kafka's authorized-operations bit field (AuthHelper.authorizedOperations): bit ``op.code``
    for each operation the resource type supports that is allowed (all of them without an authorizer)."""
    bits = 0
    for operation in SUPPORTED_OPERATIONS[resource_type]:
        if allowed_on(operation):
            bits |= 1 << int(operation)
    return bits


def operations_on(ctx: RequestContext, resource_type: ResourceType, name: str) -> int:
    return operations_field(lambda op: allowed(ctx, op, resource_type, name), resource_type)


def allowed(ctx: RequestContext, operation: Operation, resource_type: ResourceType, name: str) -> bool:
    security = ctx.node.security
    if not security.authorizer_on:
        return True
    connection = ctx.connection
    return security.authorize(connection.auth.principal, connection.host, operation, resource_type, name)


def topic_allowed(ctx: RequestContext, operation: Operation, topic: str) -> bool:
    return allowed(ctx, operation, ResourceType.TOPIC, topic)


def cluster_allowed(ctx: RequestContext, operation: Operation) -> bool:
    return allowed(ctx, operation, ResourceType.CLUSTER, CLUSTER_NAME)


def group_allowed(ctx: RequestContext, operation: Operation, group: str) -> bool:
    return allowed(ctx, operation, ResourceType.GROUP, group)


def any_allowed(ctx: RequestContext, operation: Operation, resource_type: ResourceType) -> bool:
    security = ctx.node.security
    if not security.authorizer_on:
        return True
    return security.authorize_any(ctx.connection.auth.principal, ctx.connection.host, operation, resource_type)


def on_cluster(operation: Operation) -> Check:
    """A request-wide check of ``operation`` on the cluster."""
    def check(ctx: RequestContext, _request: Any) -> int:
        return 0 if cluster_allowed(ctx, operation) else int(ErrorCode.cluster_authorization_failed)
    return check


def acl_admin(operation: Operation) -> Check:
    """The ACL APIs: SECURITY_DISABLED without an authorizer (Kafka's answer), else ``operation`` on the cluster."""
    cluster_check = on_cluster(operation)

    def check(ctx: RequestContext, request: Any) -> int:
        if not ctx.node.security.authorizer_on:
            return int(ErrorCode.security_disabled)
        return cluster_check(ctx, request)
    return check
