"""WriteTxnMarkers (key 27), versions 1-2: a transaction coordinator ends a transaction on
the partitions this broker leads.

Behaviour: only brokers send it (Kafka: CLUSTER_ACTION on the cluster). Here that is a
connection that proved the cluster's secret (broker/security/broker_proof.py), the
inter-broker SASL user, or with an authorizer a principal granted CLUSTER_ACTION
(BrokerSecurity.is_broker); anyone else gets CLUSTER_AUTHORIZATION_FAILED on every
partition. Each marker (producer id and epoch, COMMIT or ABORT, the coordinator's epoch)
is appended as a control batch to each of its partitions by the worker that owns it (owner
op ``write_markers``, through broker.links.forwarding.on_owners), all owners at once, and
answered once committed (acks=all, as Kafka writes markers) or REQUEST_TIMED_OUT after
WRITE_TIMEOUT_MS. Per partition: UNKNOWN_TOPIC_OR_PARTITION for a partition the registry
does not have, NOT_LEADER_OR_FOLLOWER for one this broker does not lead,
NOT_ENOUGH_REPLICAS when its ISR is below min.insync.replicas, INVALID_PRODUCER_EPOCH for
an epoch older than the producer's on that partition, TRANSACTION_COORDINATOR_FENCED for a
coordinator epoch older than the one that last wrote the producer's marker there.
Internal topics (__consumer_offsets) take markers like any other: the transaction
coordinator completes its transactional offsets itself (it runs beside the group
coordinator), so no group coordinator is told here.

Version notes: Kafka 4.0 dropped v0 (kio lacks it); v1 is flexible; v2 adds each marker's
transaction_version (KIP-890), which does not change what is written.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from broker.context import RequestContext, Response
from broker.dispatch import api
from broker.links.forwarding import on_owners
from broker.partitions.partition_ops import MarkerItem
from broker.protocol import codec
from broker.protocol.build import build
from broker.protocol.errors import ErrorCode
from storage.types import TopicPartition

if TYPE_CHECKING:  # ~200 kio classes, for mypy only: none is imported at run time (requests.py)
    from broker.protocol.requests import WriteTxnMarkersRequest

KEY = 27
WRITE_TIMEOUT_MS = 30_000  # Kafka waits request.timeout.ms for the markers' replication


def _answer(version: int, markers: list[tuple[int, list[tuple[str, list[tuple[int, int]]]]]]) -> Any:
    """``markers``: (producer id, [(topic, [(partition, error code)])])."""
    return build(codec.response_class(KEY, version), {"markers": [
        {"producer_id": producer_id, "topics": [
            {"name": name, "partitions": [{"partition_index": index, "error_code": code} for index, code in partitions]}
            for name, partitions in topics]}
        for producer_id, topics in markers]})


def _error(request: Any, version: int, code: int) -> Any:
    return _answer(version, [(marker.producer_id, [(topic.name, [(index, code) for index in topic.partition_indexes])
                                                   for topic in marker.topics]) for marker in request.markers])


def _from_a_broker(ctx: RequestContext, _request: Any) -> int:
    connection = ctx.connection
    if ctx.node.security.is_broker(connection.auth.principal, connection.host):
        return 0
    return int(ErrorCode.cluster_authorization_failed)


@api(KEY, "WriteTxnMarkers", 1, 2, error_response=_error, authorize=_from_a_broker)
async def handle_write_txn_markers(ctx: RequestContext, request: WriteTxnMarkersRequest) -> Response:
    node = ctx.node
    answers: list[tuple[int, list[tuple[str, list[tuple[int, int]]]]]] = []
    items: list[MarkerItem] = []
    pending: list[list[int]] = []  # [partition, code] of each item, filled in from the owners' answers
    for marker in request.markers:
        topics: list[tuple[str, list[tuple[int, int]]]] = []
        for topic in marker.topics:
            info = node.topic(topic.name)
            partitions: list[Any] = []
            for index in topic.partition_indexes:
                if info is None or not info.has_partition(index):
                    partitions.append((index, int(ErrorCode.unknown_topic_or_partition)))
                    continue
                entry = [index, 0]
                partitions.append(entry)
                pending.append(entry)
                items.append(MarkerItem(TopicPartition(topic.name, index), marker.producer_id, marker.producer_epoch,
                                        marker.transaction_result, marker.coordinator_epoch,
                                        int(getattr(marker, "transaction_version", 0))))  # v2 only
            topics.append((topic.name, partitions))
        answers.append((marker.producer_id, topics))
    if items:
        codes = await on_owners(node, items, lambda ops, part: ops.write_markers(part, WRITE_TIMEOUT_MS), int)
        for entry, code in zip(pending, codes):
            entry[1] = code
    return _answer(ctx.api_version, answers)
