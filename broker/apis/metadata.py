"""Metadata (key 3), versions 0-12.

Behaviour: each partition as the cluster records it: leader, leader epoch, replicas, ISR,
and the replicas on brokers that are not alive (offline). Each
broker is one node, whatever its worker count (DESIGN.md, non-negotiable 9). A request for topics that do not exist auto-creates them
(num.partitions) when the request allows it (v4+: allow_auto_topic_creation; always
allowed below v4, as in Kafka) and auto.create.topics.enable is true; creation is
synchronous across workers, so the answer already lists the new partitions. Names that
are not legal topic names answer INVALID_TOPIC_EXCEPTION; unknown topic ids (v10+)
UNKNOWN_TOPIC_ID. Authorized operations are not computed (-2147483648, "not asked").

Version notes: v1 controller_id, is_internal, null = all topics (v0: empty = all);
v2 cluster_id; v4 allow_auto_topic_creation; v5 offline_replicas; v7 leader_epoch;
v8 authorized operations; v9 flexible; v10 topic ids; v11 drops cluster authorized ops.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any, Iterable

from broker.authorization import cluster_allowed, operations_on, topic_allowed
from broker.context import RequestContext, Response
from broker.dispatch import api
from broker.protocol import codec
from broker.protocol.build import build
from broker.protocol.errors import ErrorCode
from coordination.acls.model import CLUSTER_NAME, Operation, ResourceType
from coordination.topics import TopicInfo, TopicRegistryError, validate_topic_name

if TYPE_CHECKING:  # ~200 kio classes, for mypy only: none is imported at run time (requests.py)
    from broker.protocol.requests import MetadataRequest

KEY = 3
INTERNAL_TOPICS = frozenset({"__consumer_offsets"})
NO_OPERATIONS = -(2**31)
ZERO_UUID = uuid.UUID(int=0)


def advertised_nodes(node: Any, listener: str) -> dict[int, tuple[str, int]]:
    """Node id -> (host, port) on ``listener`` (the request's) of every live broker: one
    node each. This broker is always among them: it answers, so it is alive."""
    addresses: dict[int, tuple[str, int]] = node.cluster.addresses(listener)
    return addresses


def current_leader(node: Any, topic: str, partition: int) -> tuple[int, int] | None:
    """(leader, leader epoch) of a partition as the cluster records it; None without one."""
    view = node.cluster.partition(topic, partition)
    return None if view is None or view.leader < 0 else (view.leader, view.leader_epoch)


def leader_endpoints(node: Any, listener: str, leaders: Iterable[int]) -> list[tuple[int, str, int]]:
    """KIP-951's node endpoints: (node id, host, port) on ``listener`` of the live ones among ``leaders``."""
    live = node.cluster.addresses(listener)
    return [(b, *live[b]) for b in sorted(set(leaders)) if b in live]


def offline_replicas(node: Any, replicas: Iterable[int]) -> tuple[int, ...]:
    """The replicas on brokers that are not alive (this broker always is: it answers)."""
    live = node.cluster.live_brokers()
    return tuple(b for b in replicas if b not in live and b != node.node_id)


def live_leader(node: Any, leader: int) -> int:
    """``leader`` if it is a live broker, else -1 (Kafka's NO_LEADER_ID)."""
    if leader < 0 or (leader != node.node_id and leader not in node.cluster.live_brokers()):
        return -1
    return leader


def _partition_entry(node: Any, topic: str, partition: int) -> dict[str, Any]:
    """While its leader is down (and before the controller elects another) a partition has
    no leader (-1, LEADER_NOT_AVAILABLE), as Kafka reports an offline partition."""
    view = node.cluster.partition(topic, partition)
    if view is None:
        return {"error_code": ErrorCode.leader_not_available, "partition_index": partition, "leader_id": -1,
                "leader_epoch": -1, "replica_nodes": (), "isr_nodes": (), "offline_replicas": ()}
    leader = live_leader(node, view.leader)
    return {"error_code": ErrorCode.leader_not_available if leader < 0 else 0, "partition_index": partition,
            "leader_id": leader, "leader_epoch": view.leader_epoch, "replica_nodes": tuple(view.replicas),
            "isr_nodes": tuple(view.isr), "offline_replicas": offline_replicas(node, view.replicas)}


def _topic_entry(node: Any, info: TopicInfo) -> dict[str, Any]:
    if info.partitions <= 0:  # known, its partitions not loaded yet: as Kafka answers a topic being created
        return _error_entry(ErrorCode.leader_not_available, info.name, info.topic_id)
    return {
        "error_code": 0, "name": info.name, "topic_id": info.topic_id, "is_internal": info.name in INTERNAL_TOPICS,
        "topic_authorized_operations": NO_OPERATIONS,  # filled in below when the client asks
        "partitions": [_partition_entry(node, info.name, p) for p in range(info.partitions)],
    }


def _error_entry(code: int, name: str | None, topic_id: uuid.UUID | None = None) -> dict[str, Any]:
    return {"error_code": code, "name": name, "topic_id": topic_id or ZERO_UUID, "is_internal": False,
            "partitions": (), "topic_authorized_operations": NO_OPERATIONS}


async def _auto_create(ctx: RequestContext, name: str) -> dict[str, Any]:
    node = ctx.node
    try:
        info = await node.run_admin(lambda: node.registry.create(
            name, node.config.get_int("num.partitions"), {},
            replication_factor=node.config.get_int("default.replication.factor")))
    except TopicRegistryError as exc:
        if exc.code != ErrorCode.topic_already_exists:
            return _error_entry(exc.code, name)
        await node.run_admin(node.cluster.refresh_now)  # another worker or broker made it: load it
        existing = node.topic(name)
        return _topic_entry(node, existing) if existing else _error_entry(ErrorCode.leader_not_available, name)
    await node.registry_changed()
    return _topic_entry(node, info)


@api(KEY, "Metadata", 0, 12)
async def handle_metadata(ctx: RequestContext, request: MetadataRequest) -> Response:
    node = ctx.node
    version = ctx.api_version
    node.registry.refresh()
    requested = request.topics
    if requested is not None and version == 0 and len(requested) == 0:
        requested = None  # v0: an empty list means every topic
    allow_create = bool(getattr(request, "allow_auto_topic_creation", True)) and node.config.get_bool("auto.create.topics.enable")
    topics: list[dict[str, Any]] = []
    # Kafka's checks: only topics the principal may DESCRIBE are listed; one named without
    # that right is TOPIC_AUTHORIZATION_FAILED; creating one takes CREATE (cluster or topic).
    authorizing = node.security.authorizer_on
    if requested is None:
        topics = [_topic_entry(node, info) for info in node.registry.all()
                  if not authorizing or topic_allowed(ctx, Operation.DESCRIBE, info.name)]
    else:
        for wanted in requested:
            name = wanted.name
            topic_id = getattr(wanted, "topic_id", None)
            # By id (v10+): the name is null, or empty as Kafka's Java consumer sends it when it
            # resolves the topic ids of its assignment (KIP-848).
            if not name and topic_id is not None and topic_id != ZERO_UUID:
                info = node.registry.by_id(topic_id)
                topics.append(_topic_entry(node, info) if info else _error_entry(ErrorCode.unknown_topic_id, None, topic_id))
                continue
            if name is None:
                topics.append(_error_entry(ErrorCode.invalid_request, None))
                continue
            if authorizing and not topic_allowed(ctx, Operation.DESCRIBE, name):
                topics.append(_error_entry(ErrorCode.topic_authorization_failed, name))
                continue
            info = node.topic(name)
            if info is not None:
                topics.append(_topic_entry(node, info))
            elif validate_topic_name(name) is not None:
                topics.append(_error_entry(ErrorCode.invalid_topic_exception, name))
            elif allow_create and (not authorizing or cluster_allowed(ctx, Operation.CREATE)
                                   or topic_allowed(ctx, Operation.CREATE, name)):
                topics.append(await _auto_create(ctx, name))
            else:
                topics.append(_error_entry(ErrorCode.unknown_topic_or_partition, name))
    if getattr(request, "include_topic_authorized_operations", False):  # v8+
        for entry in topics:
            if entry["error_code"] == 0:
                entry["topic_authorized_operations"] = operations_on(ctx, ResourceType.TOPIC, entry["name"])
    cluster_operations = (operations_on(ctx, ResourceType.CLUSTER, CLUSTER_NAME)
                          if getattr(request, "include_cluster_authorized_operations", False) else NO_OPERATIONS)
    nodes = advertised_nodes(node, ctx.connection.listener.name)
    return build(codec.response_class(KEY, version), {
        "throttle_time": 0,
        "brokers": [{"node_id": b, "host": h, "port": p, "rack": None} for b, (h, p) in sorted(nodes.items())],
        "cluster_id": node.cluster_id,
        "controller_id": node.node_id,
        "topics": topics,
        "cluster_authorized_operations": cluster_operations,
    })
