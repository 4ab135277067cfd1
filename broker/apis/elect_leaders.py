"""ElectLeaders (key 43), versions 0-2.

Behaviour: a preferred election (v0's only kind) makes each partition's first replica
its leader when it is alive and in the ISR (PREFERRED_LEADER_NOT_AVAILABLE otherwise,
ELECTION_NOT_NEEDED when it leads already); an unclean election (v1+) gives a partition
whose leader is down a leader from its live replicas, in-sync ones first
(ELIGIBLE_LEADERS_NOT_AVAILABLE when none is alive, ELECTION_NOT_NEEDED when its leader
lives). Null topic partitions means every partition not led by its preferred replica.
The state znodes are written as the controller writes them, conditionally on their
version (coordination/controller.py), by whichever broker received the request; the
answer comes once they are written (the leaders switch within a watch's delay). With the
local backend one broker leads everything: ELECTION_NOT_NEEDED.

Version notes: v1 adds election_type and the top-level error_code; v2 is flexible.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from broker.authorization import on_cluster
from broker.context import RequestContext, Response
from broker.dispatch import api
from broker.protocol import codec
from broker.protocol.build import build
from coordination.acls.model import Operation

if TYPE_CHECKING:  # ~200 kio classes, for mypy only: none is imported at run time (requests.py)
    from broker.protocol.requests import ElectLeadersRequest

KEY = 43
MESSAGES = {80: "The preferred leader is not alive or not in the ISR.", 83: "No live replica can lead.",
            84: "Leader election not needed for topic partition.", 3: "This partition does not exist."}


def _error(request: Any, version: int, code: int) -> Any:
    """Every partition asked for fails with ``code`` (v0 has no top-level error), as Kafka's getErrorResponse."""
    results = [{"topic": t.topic, "partition_result": [{"partition_id": p, "error_code": code, "error_message": None}
                                                       for p in t.partitions]} for t in request.topic_partitions or ()]
    return build(codec.response_class(KEY, version), {"throttle_time": 0, "error_code": code, "replica_election_results": results})


@api(KEY, "ElectLeaders", 0, 2, error_response=_error, authorize=on_cluster(Operation.ALTER))
async def handle_elect_leaders(ctx: RequestContext, request: ElectLeadersRequest) -> Response:
    node = ctx.node
    election_type = int(getattr(request, "election_type", 0))
    wanted = None if request.topic_partitions is None else \
        [(str(t.topic), int(p)) for t in request.topic_partitions for p in t.partitions]
    results = await node.run_admin(lambda: node.cluster.elect_leaders(wanted, election_type))
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (topic, partition), code in results.items():
        by_topic.setdefault(topic, []).append({"partition_id": partition, "error_code": code,
                                               "error_message": MESSAGES.get(code)})
    return build(codec.response_class(KEY, ctx.api_version), {
        "throttle_time": 0, "error_code": 0,
        "replica_election_results": [{"topic": t, "partition_result": r} for t, r in sorted(by_topic.items())]})
