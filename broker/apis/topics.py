"""CreateTopics (key 19) v2-7, DeleteTopics (key 20) v1-6, CreatePartitions (key 37) v0-3.

Behaviour: topics live in the topic registry (coordination.local_topics); after any
change the handler waits until every worker has synced its partitions
(``node.registry_changed()``), so a client that reads Metadata next sees the change on
whichever worker it reaches. The request ``timeout`` is not used: the answer comes once
that sync is done.

* Replication: a replication factor of -1 means default.replication.factor; more than
  the live brokers is INVALID_REPLICATION_FACTOR. Replicas are spread over the live
  brokers as Kafka's rack-unaware assignment does (one broker with the local backend;
  the brokers registered in ZooKeeper otherwise), or placed by an explicit assignment,
  whose replicas must be distinct live brokers, as many for every partition (else
  INVALID_REPLICA_ASSIGNMENT). Each partition's state (leader: its first replica, ISR:
  all of them, leader epoch 0) is written with the topic.
* CreateTopics checks, in order: the name (Kafka's Topic.validate rules, and no collision
  of '.' with '_' against an existing topic: INVALID_TOPIC_EXCEPTION), null config values
  (INVALID_CONFIG), partitions/replication/assignments, the configs
  (LogConfig.with_overrides: INVALID_CONFIG with the reason), then creation
  (TOPIC_ALREADY_EXISTS). A name given twice in one request is INVALID_REQUEST
  ("Duplicate topic name."), answered once, after the other results, as Kafka's
  controller does. validate_only does every check and creates nothing. The '.'/'_'
  collision check is not atomic with the creation (a concurrent create through another
  worker can slip between them).
* DeleteTopics: delete.topic.enable=false fails every topic (TOPIC_DELETION_DISABLED, or
  INVALID_REQUEST before v3, as Kafka). Unknown names are UNKNOWN_TOPIC_OR_PARTITION,
  unknown ids UNKNOWN_TOPIC_ID; an entry naming both or neither, and a name or id given
  twice, are INVALID_REQUEST. There are no internal topics yet, so none is protected.
  A topic deleted by id is looked up then deleted by name: a delete-and-recreate by
  another process in between would delete the new topic.
* CreatePartitions only grows a topic (else INVALID_PARTITIONS), with as many replicas
  per new partition as the topic has; assignments, when given, name them.
* controller_mutation_rate (broker/apis/mutation_quota.py): each topic's partitions
  created, added or deleted are counted just before the change, after every other check;
  from CreateTopics v6, DeleteTopics v5, CreatePartitions v3 a topic is refused
  (THROTTLING_QUOTA_EXCEEDED) while the client's quota is exhausted, older versions are
  applied and throttled. A change the registry then refuses gives its count back.

Version notes: CreateTopics v2-4 answer name, error code and message; v5 (flexible) adds
num_partitions, replication_factor and the topic's configs (as DescribeConfigs shows
them) and the tagged topic_config_error_code; v6 is v5; v7 adds topic_id. DeleteTopics
v4 is flexible, v5 adds error_message, v6 deletes by name or by topic id and answers
topic_id. CreatePartitions v1 is v0, v2 and v3 are flexible.
"""

from __future__ import annotations

import functools
from collections import Counter
from typing import TYPE_CHECKING, Any

from broker.apis.configs import check_overrides, topic_config_entries
from broker.apis.mutation_quota import MutationQuota
from broker.authorization import cluster_allowed, topic_allowed
from broker.context import RequestContext, Response, WorkerServices
from broker.dispatch import api
from broker.protocol import codec
from broker.protocol.build import build
from broker.protocol.errors import ErrorCode, KafkaError
from coordination.acls.model import Operation
from coordination.topics import TopicRegistryError, validate_topic_name

if TYPE_CHECKING:  # ~200 kio classes, for mypy only: none is imported at run time (requests.py)
    from broker.protocol.requests import CreatePartitionsRequest, CreateTopicsRequest, DeleteTopicsRequest

CREATE_KEY = 19
DELETE_KEY = 20
PARTITIONS_KEY = 37

NO_NUM_PARTITIONS = -1
NO_REPLICATION_FACTOR = -1
# TOPIC_DELETION_DISABLED exists from DeleteTopics v3; older clients get INVALID_REQUEST.
DELETION_DISABLED_SINCE = 3
# controller_mutation_rate refuses topics (THROTTLING_QUOTA_EXCEEDED) from these versions (KIP-599).
CREATE_STRICT_SINCE, DELETE_STRICT_SINCE, PARTITIONS_STRICT_SINCE = 6, 5, 3


def _duplicates(names: list[str]) -> list[str]:
    """Names given more than once, in order of first appearance."""
    counts = Counter(names)
    return list(dict.fromkeys(name for name in names if counts[name] > 1))


def _registry_error(exc: TopicRegistryError) -> KafkaError:
    return KafkaError(ErrorCode(exc.code), str(exc))


def _check_replicas(node: Any, broker_ids: Any, what: str) -> None:
    live = sorted(node.cluster.live_brokers())
    replicas = list(broker_ids)
    if not replicas or len(set(replicas)) != len(replicas) or not set(replicas) <= set(live):
        raise KafkaError(ErrorCode.invalid_replica_assignment,
                         f"{what}: replicas {replicas} must be distinct live brokers (live: {live})")


# ---------------------------------------------------------------------------- CreateTopics
def _create_failed(name: str, code: int, message: str | None) -> dict[str, Any]:
    return {"name": name, "topic_id": None, "error_code": code, "error_message": message, "topic_config_error_code": 0,
            "num_partitions": -1, "replication_factor": -1, "configs": []}


def _collision(node: Any, name: str) -> str | None:
    """An existing topic whose name differs from ``name`` only by '.' versus '_'."""
    if "." not in name and "_" not in name:
        return None
    node.registry.refresh()
    folded = name.replace(".", "_")
    for info in node.registry.all():
        if info.name != name and info.name.replace(".", "_") == folded:
            return str(info.name)
    return None


# CreateTopics' CreatableTopicConfigs has these of DescribeConfigs' entry fields (no
# synonyms, config type or documentation in any version).
_CREATED_CONFIG_FIELDS = ("name", "value", "read_only", "config_source", "is_sensitive")


def _created_configs(node: Any, overrides: dict[str, str]) -> list[dict[str, Any]]:
    """The new topic's effective config, as CreateTopics v5+ answers it."""
    return [{field: entry[field] for field in _CREATED_CONFIG_FIELDS} for entry in topic_config_entries(node, overrides)]


def _partition_count(node: Any, topic: Any) -> tuple[int, int]:
    """(partitions, replication factor) the request asks for, checked."""
    if topic.assignments:
        if topic.num_partitions != NO_NUM_PARTITIONS or topic.replication_factor != NO_REPLICATION_FACTOR:
            raise KafkaError(ErrorCode.invalid_request, "Both numPartitions or replicationFactor and replicasAssignments "
                                                        "were set. Both cannot be used at the same time.")
        if sorted(a.partition_index for a in topic.assignments) != list(range(len(topic.assignments))):
            raise KafkaError(ErrorCode.invalid_replica_assignment,
                             "partitions should be a consecutive 0-based integer sequence")
        for assignment in topic.assignments:
            _check_replicas(node, assignment.broker_ids, f"partition {assignment.partition_index}")
        return len(topic.assignments), len(topic.assignments[0].broker_ids)
    count = node.config.get_int("num.partitions") if topic.num_partitions == NO_NUM_PARTITIONS else topic.num_partitions
    if count <= 0:
        raise KafkaError(ErrorCode.invalid_partitions, "Number of partitions was set to an invalid non-positive value.")
    factor = topic.replication_factor
    if factor == 0 or factor < NO_REPLICATION_FACTOR:
        raise KafkaError(ErrorCode.invalid_replication_factor,
                         "Replication factor must be larger than 0, or -1 to use the default value.")
    if factor == NO_REPLICATION_FACTOR:
        factor = node.config.get_int("default.replication.factor")
    live = len(node.cluster.live_brokers())
    if factor > live:
        raise KafkaError(ErrorCode.invalid_replication_factor,
                         f"Replication factor: {factor} larger than available brokers: {live}.")
    return count, factor


async def _create_one(node: WorkerServices, topic: Any, validate_only: bool,
                      quota: MutationQuota) -> tuple[dict[str, Any], bool]:
    """(result description, whether the registry changed)."""
    name = topic.name
    try:
        why = validate_topic_name(name)
        if why:
            raise KafkaError(ErrorCode.invalid_topic_exception, why)
        other = _collision(node, name)
        if other is not None:
            raise KafkaError(ErrorCode.invalid_topic_exception, f"Topic '{name}' collides with existing topic: {other}")
        nulls = [c.name for c in topic.configs if c.value is None]
        if nulls:
            raise KafkaError(ErrorCode.invalid_config, f"Null value not supported for topic configs: {','.join(nulls)}")
        partitions, factor = _partition_count(node, topic)
        configs = check_overrides(node, {c.name: c.value for c in topic.configs})
        if not validate_only:
            quota.record(partitions)
        try:
            assignment = {a.partition_index: list(a.broker_ids) for a in topic.assignments} if topic.assignments else None
            info = await node.run_admin(lambda: node.registry.create(name, partitions, configs, validate_only=validate_only,
                                                                     assignment=assignment, replication_factor=factor))
        except TopicRegistryError as exc:
            if not validate_only:
                quota.give_back(partitions)
            raise _registry_error(exc) from None
    except KafkaError as exc:
        return _create_failed(name, exc.code, str(exc)), False
    return {
        "name": name,
        "topic_id": info.topic_id,
        "error_code": 0,
        "error_message": None,
        "topic_config_error_code": 0,
        "num_partitions": partitions,
        "replication_factor": factor,
        "configs": _created_configs(node, dict(info.configs)),
    }, not validate_only


def _create_error(request: Any, version: int, code: int) -> Any:
    names = list(dict.fromkeys(t.name for t in request.topics))
    return build(codec.response_class(CREATE_KEY, version),
                 {"throttle_time": 0, "topics": [_create_failed(name, code, None) for name in names]})


@api(CREATE_KEY, "CreateTopics", 2, 7, error_response=_create_error)
async def handle_create_topics(ctx: RequestContext, request: CreateTopicsRequest) -> Response:
    node = ctx.node
    dupes = _duplicates([t.name for t in request.topics])
    results = []
    changed = False
    may_create_any = cluster_allowed(ctx, Operation.CREATE)  # Kafka: CREATE on the cluster, or on the topic
    quota = MutationQuota(ctx, CREATE_STRICT_SINCE)
    for topic in request.topics:
        if topic.name in dupes:
            continue
        if not may_create_any and not topic_allowed(ctx, Operation.CREATE, topic.name):
            results.append(_create_failed(topic.name, ErrorCode.topic_authorization_failed, "Authorization failed."))
            continue
        result, created = await _create_one(node, topic, bool(request.validate_only), quota)
        results.append(result)
        changed |= created
    results.extend(_create_failed(name, ErrorCode.invalid_request, "Duplicate topic name.") for name in dupes)
    if changed:
        await node.registry_changed()
    return build(codec.response_class(CREATE_KEY, ctx.api_version), {"throttle_time": quota.finish(), "topics": results})


# ---------------------------------------------------------------------------- DeleteTopics
def _delete_entries(request: Any) -> list[tuple[str | None, Any]]:
    """(name, topic id) per requested topic: v6 sends name-or-id pairs, v1-5 names only."""
    topics = getattr(request, "topics", None)
    if topics is not None:
        return [(t.name, t.topic_id) for t in topics]
    return [(name, None) for name in request.topic_names]


def _deleted(name: str | None, topic_id: Any, code: int = 0, message: str | None = None) -> dict[str, Any]:
    return {"name": name, "topic_id": topic_id, "error_code": code, "error_message": message}


def _delete_error(request: Any, version: int, code: int) -> Any:
    return build(codec.response_class(DELETE_KEY, version),
                 {"throttle_time": 0, "responses": [_deleted(n, i, code) for n, i in _delete_entries(request)]})


@api(DELETE_KEY, "DeleteTopics", 1, 6, error_response=_delete_error)
async def handle_delete_topics(ctx: RequestContext, request: DeleteTopicsRequest) -> Response:
    node = ctx.node
    entries = _delete_entries(request)
    response_class = codec.response_class(DELETE_KEY, ctx.api_version)
    if not node.config.get_bool("delete.topic.enable"):
        code = ErrorCode.topic_deletion_disabled if ctx.api_version >= DELETION_DISABLED_SINCE else ErrorCode.invalid_request
        return build(response_class, {"throttle_time": 0, "responses": [
            _deleted(name, topic_id, code, "Topic deletion is disabled.") for name, topic_id in entries]})

    node.registry.refresh()
    # Resolve every entry to a name first, so duplicates (also a name given once by name
    # and once through its id) are found before anything is deleted.
    resolved: list[tuple[str | None, Any, str | None, KafkaError | None]] = []
    for name, topic_id in entries:
        if name is not None and topic_id is not None:
            resolved.append((name, topic_id, None, KafkaError(ErrorCode.invalid_request,
                                                              "You may not specify both topic name and topic id.")))
        elif name is None and topic_id is None:
            resolved.append((None, None, None, KafkaError(ErrorCode.invalid_request,
                                                          "Neither topic name nor id were specified.")))
        elif name is not None:
            resolved.append((name, None, name, None))
        else:
            info = node.registry.by_id(topic_id)
            if info is None:
                resolved.append((None, topic_id, None, KafkaError(ErrorCode.unknown_topic_id,
                                                                  "This server does not host this topic ID.")))
            else:
                resolved.append((None, topic_id, info.name, None))
    counts = Counter(target for _n, _i, target, error in resolved if error is None)

    responses = []
    changed = False
    quota = MutationQuota(ctx, DELETE_STRICT_SINCE)
    for name, topic_id, target, error in resolved:
        if error is None and target is not None and counts[target] > 1:
            error = KafkaError(ErrorCode.invalid_request, "Duplicate topic name." if topic_id is None else "Duplicate topic id.")
        if error is None and target is not None and not topic_allowed(ctx, Operation.DELETE, target):
            error = KafkaError(ErrorCode.topic_authorization_failed, "Authorization failed.")
        if error is not None or target is None:
            code = error.code if error is not None else ErrorCode.invalid_request
            responses.append(_deleted(name, topic_id, code, str(error)))
            continue
        existing = node.registry.get(target)
        partitions = existing.partitions if existing is not None else 0
        try:
            quota.record(partitions)
        except KafkaError as exc:
            responses.append(_deleted(name, topic_id, exc.code, str(exc)))
            continue
        try:
            info = await node.run_admin(functools.partial(node.registry.delete, target))
        except TopicRegistryError as exc:
            quota.give_back(partitions)
            code = ErrorCode.unknown_topic_id if topic_id is not None else ErrorCode(exc.code)
            responses.append(_deleted(name, topic_id, code, str(exc)))
            continue
        changed = True
        responses.append(_deleted(info.name, info.topic_id))
    if changed:
        await node.registry_changed()
    return build(response_class, {"throttle_time": quota.finish(), "responses": responses})


# ---------------------------------------------------------------------------- CreatePartitions
async def _grow_one(node: WorkerServices, topic: Any, validate_only: bool, quota: MutationQuota) -> bool:
    """Raises KafkaError; True when the registry changed."""
    info = node.topic(topic.name)
    if info is None:
        raise KafkaError(ErrorCode.unknown_topic_or_partition, f"The topic '{topic.name}' does not exist.")
    if topic.count == info.partitions:
        raise KafkaError(ErrorCode.invalid_partitions, f"Topic already has {info.partitions} partitions.")
    if topic.count < info.partitions:
        raise KafkaError(ErrorCode.invalid_partitions, f"Topic currently has {info.partitions} partitions, which is "
                                                       f"higher than the requested {topic.count}.")
    if topic.assignments is not None:
        added = topic.count - info.partitions
        if len(topic.assignments) != added:
            raise KafkaError(ErrorCode.invalid_replica_assignment, f"Increasing the number of partitions by {added} but "
                                                                   f"{len(topic.assignments)} assignments provided.")
        for offset, assignment in enumerate(topic.assignments):
            _check_replicas(node, assignment.broker_ids, f"new partition {info.partitions + offset}")
    placed = ({info.partitions + i: list(a.broker_ids) for i, a in enumerate(topic.assignments)}
              if topic.assignments else None)
    added = topic.count - info.partitions
    if not validate_only:
        quota.record(added)
    try:
        await node.run_admin(functools.partial(node.registry.set_partitions, topic.name, topic.count,
                                               validate_only=validate_only, assignment=placed))
    except TopicRegistryError as exc:
        if not validate_only:
            quota.give_back(added)
        raise _registry_error(exc) from None
    return not validate_only


def _partitions_error(request: Any, version: int, code: int) -> Any:
    return build(codec.response_class(PARTITIONS_KEY, version), {"throttle_time": 0, "results": [
        {"name": name, "error_code": code, "error_message": None} for name in dict.fromkeys(t.name for t in request.topics)]})


@api(PARTITIONS_KEY, "CreatePartitions", 0, 3, error_response=_partitions_error)
async def handle_create_partitions(ctx: RequestContext, request: CreatePartitionsRequest) -> Response:
    node = ctx.node
    dupes = _duplicates([t.name for t in request.topics])
    results = []
    changed = False
    quota = MutationQuota(ctx, PARTITIONS_STRICT_SINCE)
    for topic in request.topics:
        if topic.name in dupes:
            continue
        out = {"name": topic.name, "error_code": 0, "error_message": None}
        if not topic_allowed(ctx, Operation.ALTER, topic.name):
            out.update(error_code=ErrorCode.topic_authorization_failed, error_message="Authorization failed.")
            results.append(out)
            continue
        try:
            changed |= await _grow_one(node, topic, bool(request.validate_only), quota)
        except KafkaError as exc:
            out.update(error_code=exc.code, error_message=str(exc))
        results.append(out)
    results.extend({"name": name, "error_code": ErrorCode.invalid_request, "error_message": "Duplicate topic in request."}
                   for name in dupes)
    if changed:
        await node.registry_changed()
    return build(codec.response_class(PARTITIONS_KEY, ctx.api_version), {"throttle_time": quota.finish(), "results": results})
