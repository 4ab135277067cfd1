"""AlterPartitionReassignments (key 45) v0-1 and ListPartitionReassignments (key 46) v0.

Behaviour (KIP-455, as Kafka's ZooKeeper-mode controller runs it): a target replica list
is recorded in the topic znode (replicas = target then the leaving ones, with
adding_replicas and removing_replicas); the new replicas fetch as followers and join the
ISR; the controller then moves the leadership into the target if it must and drops the
leaving replicas, whose brokers delete their copy. A null target cancels a reassignment
in progress (NO_REASSIGNMENT_IN_PROGRESS when there is none). Targets must name distinct
live brokers (INVALID_REPLICA_ASSIGNMENT). v1's allow_replication_factor_change=false
refuses a target whose size differs from the current one (INVALID_REPLICATION_FACTOR).
The answer comes once the change is recorded, not when the move is done:
ListPartitionReassignments shows what is still moving (null topics: every topic).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from broker.authorization import on_cluster
from broker.context import RequestContext, Response
from broker.dispatch import api
from broker.protocol import codec
from broker.protocol.build import build
from broker.protocol.errors import ErrorCode
from coordination.acls.model import Operation

if TYPE_CHECKING:  # ~200 kio classes, for mypy only: none is imported at run time (requests.py)
    from broker.protocol.requests import AlterPartitionReassignmentsRequest, ListPartitionReassignmentsRequest

ALTER_KEY, LIST_KEY = 45, 46


def _alter_error(request: Any, version: int, code: int) -> Any:
    """The error at the top and for every partition asked for, as Kafka's getErrorResponse."""
    return build(codec.response_class(ALTER_KEY, version), {
        "throttle_time": 0, "allow_replication_factor_change": True, "error_code": code, "error_message": None,
        "responses": [{"name": t.name, "partitions": [{"partition_index": p.partition_index, "error_code": code,
                                                       "error_message": None} for p in t.partitions]}
                      for t in request.topics]})


def _list_error(request: Any, version: int, code: int) -> Any:
    return build(codec.response_class(LIST_KEY, version), {"throttle_time": 0, "error_code": code, "error_message": None,
                                                           "topics": []})


@api(ALTER_KEY, "AlterPartitionReassignments", 0, 1, error_response=_alter_error, authorize=on_cluster(Operation.ALTER))
async def handle_alter_partition_reassignments(ctx: RequestContext, request: AlterPartitionReassignmentsRequest) -> Response:
    node = ctx.node
    allow_resize = bool(getattr(request, "allow_replication_factor_change", True))
    responses = []
    for topic in request.topics:
        current = node.cluster.partitions_of(topic.name)
        targets: dict[int, list[int] | None] = {}
        refused: dict[int, tuple[int, str]] = {}
        for p in topic.partitions:
            target = None if p.replicas is None else [int(b) for b in p.replicas]
            view = current.get(p.partition_index)
            if target is not None and not allow_resize and view is not None and len(target) != len(view.replicas):
                refused[p.partition_index] = (ErrorCode.invalid_replication_factor,
                                              "allow_replication_factor_change is false")
            else:
                targets[p.partition_index] = target
        name = str(topic.name)
        results = await node.run_admin(lambda: node.cluster.reassign(name, targets)) if targets else {}
        results = {**results, **refused}
        await node.registry_changed()
        responses.append({"name": name, "partitions": [
            {"partition_index": p, "error_code": code, "error_message": message} for p, (code, message) in sorted(results.items())]})
    return build(codec.response_class(ALTER_KEY, ctx.api_version), {
        "throttle_time": 0, "allow_replication_factor_change": allow_resize, "error_code": 0, "error_message": None,
        "responses": responses})


@api(LIST_KEY, "ListPartitionReassignments", 0, 0, error_response=_list_error, authorize=on_cluster(Operation.DESCRIBE))
async def handle_list_partition_reassignments(ctx: RequestContext, request: ListPartitionReassignmentsRequest) -> Response:
    node = ctx.node
    await node.run_admin(node.cluster.refresh_now)
    wanted: list[tuple[str, list[int] | None]] = (
        [(info.name, None) for info in node.registry.all()] if request.topics is None
        else [(str(t.name), [int(p) for p in t.partition_indexes]) for t in request.topics])
    topics: list[dict[str, Any]] = []
    for name, indexes in wanted:
        ongoing = node.cluster.reassignments(name)
        partitions = [{"partition_index": p, "replicas": r, "adding_replicas": a, "removing_replicas": d}
                      for p, (r, a, d) in sorted(ongoing.items()) if indexes is None or p in indexes]
        if partitions:
            topics.append({"name": name, "partitions": partitions})
    return build(codec.response_class(LIST_KEY, ctx.api_version), {
        "throttle_time": 0, "error_code": 0, "error_message": None, "topics": topics})
