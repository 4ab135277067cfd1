"""OffsetForLeaderEpoch (key 23), versions 2-4.

Behaviour: for each partition, the largest leader epoch at or below the one asked that
the leader's log has, and the offset where it ends (the next epoch's start, or the log
end for the current epoch), from its leader-epoch-checkpoint cache (storage/leader_epochs.py);
(-1, -1) for an epoch newer than any it knows. A consumer asks it after a leader change
to find whether the log it read was truncated (KIP-320); a follower can ask it too
(replica_id), though Castle's followers learn divergence from Fetch (DivergingEpoch).
current_leader_epoch is checked as in Fetch: older than the leader's is
FENCED_LEADER_EPOCH, newer UNKNOWN_LEADER_EPOCH. A partition this broker does not lead is
NOT_LEADER_OR_FOLLOWER, an unknown one UNKNOWN_TOPIC_OR_PARTITION.

Version notes: v0-1 (no current_leader_epoch; Kafka 4.0 dropped them) are not served;
v2 adds current_leader_epoch and throttle_time; v3 replica_id; v4 is flexible.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from broker.authorization import topic_allowed
from broker.context import RequestContext, Response
from broker.dispatch import api
from broker.links.forwarding import on_owners
from broker.partitions.partition_ops import EpochEndResult, EpochItem
from broker.protocol import codec
from broker.protocol.build import build
from broker.protocol.errors import ErrorCode
from coordination.acls.model import Operation
from storage.types import TopicPartition

if TYPE_CHECKING:  # ~200 kio classes, for mypy only: none is imported at run time (requests.py)
    from broker.protocol.requests import OffsetForLeaderEpochRequest

KEY = 23


def _entry(partition: int, code: int, epoch: int = -1, end: int = -1) -> dict[str, Any]:
    return {"error_code": code, "partition": partition, "leader_epoch": epoch, "end_offset": end}


@api(KEY, "OffsetForLeaderEpoch", 2, 4)
async def handle_offset_for_leader_epoch(ctx: RequestContext, request: OffsetForLeaderEpochRequest) -> Response:
    node = ctx.node
    topics = []
    items: list[EpochItem] = []
    pending: list[dict[str, Any]] = []
    # Kafka's checks: a replica (replica_id >= 0, v3+) needs CLUSTER_ACTION, a client DESCRIBE on the topic.
    replica = int(getattr(request, "replica_id", -1)) >= 0
    replica_refused = replica and not ctx.node.security.is_broker(ctx.connection.auth.principal, ctx.connection.host)
    for topic in request.topics:
        info = node.topic(topic.topic)
        partitions = []
        denied = replica_refused or (not replica and not topic_allowed(ctx, Operation.DESCRIBE, topic.topic))
        for p in topic.partitions:
            if denied:
                entry = _entry(p.partition, ErrorCode.topic_authorization_failed)
            elif info is None or not info.has_partition(p.partition):
                entry = _entry(p.partition, ErrorCode.unknown_topic_or_partition)
            else:
                entry = _entry(p.partition, ErrorCode.none)
                items.append(EpochItem(TopicPartition(topic.topic, p.partition), p.current_leader_epoch, p.leader_epoch))
                pending.append(entry)
            partitions.append(entry)
        topics.append({"topic": topic.topic, "partitions": partitions})
    if items:
        results = await on_owners(node, items, lambda ops, part: ops.epoch_end_offsets(part), EpochEndResult)
        for entry, result in zip(pending, results):
            entry.update(error_code=result.error_code, leader_epoch=result.leader_epoch, end_offset=result.end_offset)
    return build(codec.response_class(KEY, ctx.api_version), {"throttle_time": 0, "topics": topics})
