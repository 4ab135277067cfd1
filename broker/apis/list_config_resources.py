"""ListConfigResources (key 74): which config resources exist, as Kafka 4.4 answers it.

v0 is KIP-714's ListClientMetricsResources (same key, renamed by KIP-1142): the names of
every client-metrics subscription. v1 lists the resource types asked for, every supported
one when none is named: GROUP (the groups that have configs of their own), CLIENT_METRICS
(the subscriptions), BROKER_LOGGER and BROKER (every live broker's id), TOPIC (every topic,
internal ones too), in that order, as Kafka's KafkaApis.handleListConfigResources. A type
the version does not support (at v0 everything but CLIENT_METRICS) fails the whole request
with UNSUPPORTED_VERSION. Authorization: DESCRIBE_CONFIGS on the cluster, else
CLUSTER_AUTHORIZATION_FAILED; nothing is filtered per resource (Kafka neither).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from broker.apis.metadata import advertised_nodes
from broker.authorization import cluster_allowed
from broker.context import RequestContext, Response
from broker.dispatch import api
from broker.protocol import codec
from broker.protocol.build import build
from broker.protocol.errors import ErrorCode
from coordination.acls.model import Operation

if TYPE_CHECKING:  # ~200 kio classes, for mypy only: none is imported at run time (requests.py)
    from broker.protocol.requests import ListConfigResourcesRequest

KEY = 74
TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32
SUPPORTED_BY_VERSION = {0: (CLIENT_METRICS,), 1: (TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP)}


def _answer(version: int, code: int, resources: list[dict[str, Any]]) -> Any:
    return build(codec.response_class(KEY, version), {"throttle_time": 0, "error_code": code,
                                                      "config_resources": resources})


def _error(_request: Any, version: int, code: int) -> Any:
    return _answer(version, code, [])


def _authorize(ctx: RequestContext, _request: Any) -> int:
    return 0 if cluster_allowed(ctx, Operation.DESCRIBE_CONFIGS) else int(ErrorCode.cluster_authorization_failed)


def _listed(names: list[str], resource_type: int) -> list[dict[str, Any]]:
    return [{"resource_name": name, "resource_type": resource_type} for name in names]


@api(KEY, "ListConfigResources", 0, 1, error_response=_error, authorize=_authorize)
async def handle_list_config_resources(ctx: RequestContext, request: ListConfigResourcesRequest) -> Response:
    node, version = ctx.node, ctx.api_version
    supported = SUPPORTED_BY_VERSION[version]
    wanted = set(getattr(request, "resource_types", ()) or supported)
    if not wanted <= set(supported):
        return _answer(version, ErrorCode.unsupported_version, [])
    resources: list[dict[str, Any]] = []
    if GROUP in wanted:
        groups = await node.run_admin(node.group_configs.store.all)
        resources += _listed(sorted(group for group, overrides in groups.items() if overrides), GROUP)
    if CLIENT_METRICS in wanted:
        resources += _listed(await node.run_admin(node.telemetry.subscriptions.list_fresh), CLIENT_METRICS)
    brokers = [str(node_id) for node_id in sorted(advertised_nodes(node, ctx.connection.listener.name))]
    if BROKER_LOGGER in wanted:
        resources += _listed(brokers, BROKER_LOGGER)
    if BROKER in wanted:
        resources += _listed(brokers, BROKER)
    if TOPIC in wanted:
        node.registry.refresh()
        resources += _listed(sorted(info.name for info in node.registry.all()), TOPIC)
    return _answer(version, ErrorCode.none, resources)
