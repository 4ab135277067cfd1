"""DescribeCluster (key 60), versions 0-2.

Behaviour: the brokers listed are the ones Metadata lists (every live broker, one node
each), at their advertised hosts and ports, no rack, never fenced; this broker is named as the controller.
Any principal may ask (Kafka checks DESCRIBE on the cluster only to fill in
cluster_authorized_operations: the bit field of what the principal may do on the cluster when
asked for, -2147483648, "not provided", when not). Asking for controller endpoints
(endpoint_type 2) is MISMATCHED_ENDPOINT_TYPE, as a Kafka broker answers; any other
type but 1 (brokers) is UNSUPPORTED_ENDPOINT_TYPE.

Version notes: all versions are flexible; v1 adds endpoint_type to request and
response; v2 adds include_fenced_brokers and each broker's is_fenced.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from broker.apis.metadata import advertised_nodes
from broker.authorization import operations_on
from broker.context import RequestContext, Response
from broker.dispatch import api
from broker.protocol import codec
from broker.protocol.build import build
from broker.protocol.errors import ErrorCode
from coordination.acls.model import CLUSTER_NAME, ResourceType

if TYPE_CHECKING:  # ~200 kio classes, for mypy only: none is imported at run time (requests.py)
    from broker.protocol.requests import DescribeClusterRequest

KEY = 60

ENDPOINT_BROKER = 1
ENDPOINT_CONTROLLER = 2
NO_AUTHORIZED_OPERATIONS = -2147483648


def _answer(version: int, code: int, message: str | None, cluster_id: str, controller_id: int,
            brokers: list[dict[str, Any]], operations: int = NO_AUTHORIZED_OPERATIONS) -> Any:
    return build(codec.response_class(KEY, version), {
        "throttle_time": 0,
        "error_code": code,
        "error_message": message,
        "endpoint_type": ENDPOINT_BROKER,
        "cluster_id": cluster_id,
        "controller_id": controller_id,
        "brokers": brokers,
        "cluster_authorized_operations": operations,
    })


def _error(request: Any, version: int, code: int) -> Any:
    return _answer(version, code, None, "", -1, [])


@api(KEY, "DescribeCluster", 0, 2, error_response=_error)
def handle_describe_cluster(ctx: RequestContext, request: DescribeClusterRequest) -> Response:
    node = ctx.node
    endpoint_type = getattr(request, "endpoint_type", ENDPOINT_BROKER)  # the field exists from v1
    if endpoint_type == ENDPOINT_CONTROLLER:
        return _answer(ctx.api_version, ErrorCode.mismatched_endpoint_type,
                       "The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type CONTROLLER",
                       "", -1, [])
    if endpoint_type != ENDPOINT_BROKER:
        return _answer(ctx.api_version, ErrorCode.unsupported_endpoint_type,
                       f"Unsupported endpoint type {endpoint_type}", "", -1, [])
    brokers = [{"broker_id": node_id, "host": host, "port": port, "rack": None, "is_fenced": False}
               for node_id, (host, port) in sorted(advertised_nodes(node, ctx.connection.listener.name).items())]
    operations = (operations_on(ctx, ResourceType.CLUSTER, CLUSTER_NAME)
                  if request.include_cluster_authorized_operations else NO_AUTHORIZED_OPERATIONS)
    return _answer(ctx.api_version, ErrorCode.none, None, node.cluster_id, node.node_id, brokers, operations)
