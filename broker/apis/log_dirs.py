"""DescribeLogDirs (key 35), versions 1-5: this broker's log dirs and the partition logs in
each; AlterReplicaLogDirs (key 34), versions 1-2: move partition logs between them.

Behaviour (Kafka's KafkaApis.handleDescribeLogDirsRequest and ReplicaManager.describeLogDirs):
DESCRIBE on the cluster is required, else CLUSTER_AUTHORIZATION_FAILED with no dirs. Every
log dir of log.dirs is listed, with its absolute path, and for each the partition logs it
holds among those asked for (topics null: every one; a topic or partition this broker has
no log of is simply absent, as in Kafka: no error): the size of its segments, its offset lag
(for a current log, how far its end is below the high watermark, never negative: zero on a
leader), and whether it is a future log. A failed dir (an I/O error on a log there took
it offline: storage/manager.py fail_dir) or one whose volume cannot be read is
KAFKA_STORAGE_ERROR with no topics and -1 bytes.

The logs live in every worker of the broker (each writes its own partitions, all in the
same dirs): each worker is asked for its logs (owner op ``describe_log_dirs``) and the
answers are merged by dir. A worker that cannot answer (restarting) leaves its partitions
out of the answer.

AlterReplicaLogDirs (Kafka's ReplicaManager.alterReplicaLogDirs): ALTER on the cluster is
required, else every partition is CLUSTER_AUTHORIZATION_FAILED. Per partition, in Kafka's
order: a topic name too long for the future log's directory name is INVALID_TOPIC_EXCEPTION;
a path that is not one of log.dirs (as DescribeLogDirs names them) LOG_DIR_NOT_FOUND; a
partition the cluster does not have UNKNOWN_TOPIC_OR_PARTITION; one with no replica on this
broker REPLICA_NOT_AVAILABLE; then, checked by the partition's owner (which knows its failed
dirs), an offline dir or log KAFKA_STORAGE_ERROR (Kafka checks the dir before the partition). Else
the partition's owner starts a future log in that dir (storage/future_log.py), which its
housekeeping copies and swaps in; DescribeLogDirs shows it with is_future_key meanwhile. A
partition named twice takes the last dir, as Kafka's map of partition to dir does.

Version notes: v0 is gone from Kafka 4 (and from kio); v2 is the first flexible version;
v3 adds the top-level error code; v4 each dir's total and usable bytes (of its volume); v5
each dir's is_cordoned (KIP-1066), always false here: Castle has no cordoned log dirs.
"""

from __future__ import annotations

import asyncio
import logging
import os
from typing import TYPE_CHECKING, Any

from broker.authorization import on_cluster
from broker.context import RequestContext, Response
from broker.dispatch import api
from broker.links.forwarding import AnyReplica, on_owners
from broker.partitions.partition_ops import LogDirReplica, LogDirsReport, MoveItem
from broker.protocol import codec
from broker.protocol.build import build
from broker.protocol.errors import ErrorCode
from coordination.acls.model import Operation
from storage.future_log import future_dir_name
from storage.types import TopicPartition

if TYPE_CHECKING:  # ~200 kio classes, for mypy only: none is imported at run time (requests.py)
    from broker.protocol.requests import AlterReplicaLogDirsRequest, DescribeLogDirsRequest

KEY = 35
ALTER_KEY = 34
MAX_DIR_NAME = 255  # bytes of a directory name (the future log's must fit)

log = logging.getLogger(__name__)


def _error(_request: Any, version: int, code: int) -> Any:
    return build(codec.response_class(KEY, version), {"throttle_time": 0, "error_code": code, "results": []})


def volume_bytes(path: str) -> tuple[int, int]:
    """(total, usable) bytes of the volume holding ``path``, as Java's FileStore counts them
    (usable: the blocks an unprivileged process may still take). OSError if it cannot be read."""
    stats = os.statvfs(path)
    return stats.f_blocks * stats.f_frsize, stats.f_bavail * stats.f_frsize


async def all_reports(ctx: RequestContext) -> list[LogDirsReport]:
    """Every worker's partition logs and failed dirs."""
    node = ctx.node
    answers: list[LogDirsReport] = []
    waiting = []
    for worker in range(node.count):
        try:
            answer = node.ops_for(worker).describe_log_dirs()
        except Exception as exc:  # this worker's logs are left out; the others still answer
            log.warning("DescribeLogDirs: worker %d did not answer: %s", worker, exc)
            continue
        if isinstance(answer, LogDirsReport):
            answers.append(answer)
        else:
            waiting.append((worker, answer))
    for worker, pending in waiting:
        try:
            answers.append(await asyncio.shield(pending))
        except Exception as exc:
            log.warning("DescribeLogDirs: worker %d did not answer: %s", worker, exc)
    return answers


def _offline(path: str) -> dict[str, Any]:
    return {"error_code": int(ErrorCode.kafka_storage_error), "log_dir": path, "topics": [],
            "total_bytes": -1, "usable_bytes": -1, "is_cordoned": False}


def _dir_result(path: str, replicas: list[LogDirReplica]) -> dict[str, Any]:
    try:
        total, usable = volume_bytes(path)
    except OSError as exc:
        log.warning("DescribeLogDirs: cannot read the volume of %s: %s", path, exc)
        return _offline(path)
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for replica in sorted(replicas, key=lambda r: (r.tp.topic, r.tp.partition, r.is_future)):
        by_topic.setdefault(replica.tp.topic, []).append({
            "partition_index": replica.tp.partition, "partition_size": replica.size,
            "offset_lag": replica.offset_lag, "is_future_key": replica.is_future})
    return {"error_code": 0, "log_dir": path, "total_bytes": total, "usable_bytes": usable, "is_cordoned": False,
            "topics": [{"name": name, "partitions": partitions} for name, partitions in by_topic.items()]}


@api(KEY, "DescribeLogDirs", 1, 5, error_response=_error, authorize=on_cluster(Operation.DESCRIBE))
async def handle_describe_log_dirs(ctx: RequestContext, request: DescribeLogDirsRequest) -> Response:
    wanted: set[tuple[str, int]] | None = None
    if request.topics is not None:
        wanted = {(topic.topic, int(p)) for topic in request.topics for p in topic.partitions}
    reports = await all_reports(ctx)
    offline = {path for report in reports for path in report.offline_dirs}
    by_dir: dict[str, list[LogDirReplica]] = {}
    for report in reports:
        for replica in report.replicas:
            if wanted is None or (replica.tp.topic, replica.tp.partition) in wanted:
                by_dir.setdefault(replica.log_dir, []).append(replica)
    results = [_offline(path) if path in offline else _dir_result(path, by_dir.get(path, []))
               for path in ctx.node.logs.log_dir_paths]
    return build(codec.response_class(KEY, ctx.api_version), {"throttle_time": 0, "error_code": 0, "results": results})


def _moves(request: Any) -> dict[TopicPartition, str]:
    moves: dict[TopicPartition, str] = {}
    for entry in request.dirs:
        for topic in entry.topics:
            for partition in topic.partitions:
                moves[TopicPartition(topic.name, int(partition))] = entry.path
    return moves


def _alter_answer(version: int, codes: dict[TopicPartition, int]) -> Any:
    by_topic: dict[str, list[dict[str, int]]] = {}
    for tp, code in codes.items():
        by_topic.setdefault(tp.topic, []).append({"partition_index": tp.partition, "error_code": code})
    return build(codec.response_class(ALTER_KEY, version), {"throttle_time": 0, "results": [
        {"topic_name": name, "partitions": partitions} for name, partitions in by_topic.items()]})


def _alter_error(request: Any, version: int, code: int) -> Any:
    return _alter_answer(version, {tp: code for tp in _moves(request)})


def _check(ctx: RequestContext, tp: TopicPartition, path: str) -> int:
    node = ctx.node
    if len(future_dir_name(tp).encode()) > MAX_DIR_NAME:
        return int(ErrorCode.invalid_topic_exception)
    if path not in node.logs.log_dir_paths:
        return int(ErrorCode.log_dir_not_found)
    info = node.topic(tp.topic)
    if info is None or not info.has_partition(tp.partition):
        return int(ErrorCode.unknown_topic_or_partition)
    view = node.cluster.partition(tp.topic, tp.partition)
    if view is None or node.node_id not in view.replicas:
        return int(ErrorCode.replica_not_available)
    return 0


@api(ALTER_KEY, "AlterReplicaLogDirs", 1, 2, error_response=_alter_error, authorize=on_cluster(Operation.ALTER))
async def handle_alter_replica_log_dirs(ctx: RequestContext, request: AlterReplicaLogDirsRequest) -> Response:
    codes: dict[TopicPartition, int] = {}
    items: list[MoveItem] = []
    for tp, path in _moves(request).items():
        codes[tp] = _check(ctx, tp, path)
        if not codes[tp]:
            items.append(MoveItem(tp, path))
    if items:
        answers = await on_owners(AnyReplica(ctx.node), items, lambda ops, part: ops.alter_log_dirs(part), lambda code: code)
        for item, code in zip(items, answers):
            # A replica the owner turns out not to have (just reassigned away): Kafka's code for it.
            codes[item.tp] = int(ErrorCode.replica_not_available) if code == ErrorCode.not_leader_or_follower else code
    return _alter_answer(ctx.api_version, codes)
