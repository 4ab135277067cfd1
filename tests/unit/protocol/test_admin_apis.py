"""The admin APIs: ListOffsets, CreateTopics, DeleteTopics, CreatePartitions, DeleteRecords,
DescribeConfigs, AlterConfigs, IncrementalAlterConfigs, DescribeCluster, InitProducerId.

Two layers, both checked against an independent implementation (STYLE anti-pattern 12):

* For every registered (API, version): a representative response built with
  ``build`` is encoded by kio and decoded by kafka-python's protocol classes (or, where
  kafka-python lacks the API/version, read back by kio's entity reader), field by field;
  so is each module's "everything failed" answer.
* The handlers answer requests that kafka-python encoded, on a real WorkerNode (one
  worker, real files in a tmp dir); their answers are decoded by kafka-python.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import importlib
import os
import types
import uuid
from typing import Any

import pytest
from kio.serial import entity_reader

import broker.apis.configs  # noqa: F401  (each module registers itself)
import broker.apis.delete_records  # noqa: F401
import broker.apis.describe_cluster  # noqa: F401
import broker.apis.init_producer_id  # noqa: F401
import broker.apis.list_offsets  # noqa: F401
import broker.apis.topics  # noqa: F401
from broker.config import load_config
from broker.dispatch import REGISTRY
from broker.links.rings import SharedRings
from broker.partitions.partition_ops import AppendItem
from broker.process.node import WorkerNode
from broker.protocol import codec
from broker.protocol.build import build
from storage.records import Record, encode_batch
from storage.types import TopicPartition

KEYS = (2, 19, 20, 21, 22, 32, 33, 37, 44, 60)
# The versions kio carries (ListOffsets v0, which Kafka 4.0 dropped, is tested against
# kafka-python in test_legacy_versions.py and with a real client in test_old_clients.py).
VERSIONS = [(key, version) for key in KEYS for version in range(REGISTRY[key].min_version, REGISTRY[key].max_version + 1)
            if codec.request_class(key, version) is not None]

NONE = 0
OFFSET_OUT_OF_RANGE = 1
UNKNOWN_TOPIC_OR_PARTITION = 3
INVALID_TOPIC_EXCEPTION = 17
TOPIC_ALREADY_EXISTS = 36
INVALID_PARTITIONS = 37
INVALID_REPLICATION_FACTOR = 38
INVALID_REPLICA_ASSIGNMENT = 39
INVALID_CONFIG = 40
INVALID_REQUEST = 42
POLICY_VIOLATION = 44
TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
TOPIC_DELETION_DISABLED = 73
UNKNOWN_TOPIC_ID = 100
MISMATCHED_ENDPOINT_TYPE = 114


# ---------------------------------------------------------------------------- kafka-python
def _kafka_python_classes() -> dict[tuple[int, str], Any]:
    found: dict[tuple[int, str], Any] = {}
    for module_name in ("kafka.protocol.admin", "kafka.protocol.consumer", "kafka.protocol.producer",
                        "kafka.protocol.metadata"):
        module = importlib.import_module(module_name)
        for value in vars(module).values():
            json = getattr(value, "_json", None)
            if isinstance(value, type) and isinstance(json, dict) and json.get("type") in ("request", "response"):
                found[(json["apiKey"], json["type"])] = value
    return found


KAFKA_PYTHON = _kafka_python_classes()


def _kafka_python(key: int, kind: str, version: int) -> Any | None:
    cls = KAFKA_PYTHON.get((key, kind))
    if cls is None:
        return None
    low, high = cls.valid_versions
    return cls if low <= version <= high else None


def _kp_object(cls: Any, data: dict[str, Any], version: int) -> Any:
    """A kafka-python message from nested dicts; fields this version lacks are dropped."""
    fields = cls.fields
    kwargs = {}
    for name, value in data.items():
        field = fields[name]
        if not field.for_version_q(version):
            continue
        if field.is_struct_array() and value is not None:
            value = [_kp_object(field.data_class, item, version) for item in value]
        elif field.is_struct() and value is not None:
            value = _kp_object(field.data_class, value, version)
        kwargs[name] = value
    return cls(version=version, **kwargs)


def kio_request(key: int, version: int, data: dict[str, Any]) -> Any:
    """Encode a request with kafka-python, decode it with our codec (kio)."""
    cls = _kafka_python(key, "request", version)
    assert cls is not None, f"kafka-python has no request class for api {key} v{version}"
    body = bytes(_kp_object(cls, data, version).encode())
    return codec.decode_request(key, version, body, 0)


# kafka-python renames these and reads them as bit fields (-2147483648, "not provided", as None).
_RENAMED = {"cluster_authorized_operations": "authorized_operations"}
NOT_PROVIDED = -2147483648


def _their_value(theirs: Any, name: str) -> Any:
    fields = type(theirs).fields
    if name in fields:
        return getattr(theirs, name)
    if name in _RENAMED:
        value = getattr(theirs, _RENAMED[name])
        return NOT_PROVIDED if value is None else value
    assert f"{name}_ms" in fields, f"kafka-python's {type(theirs).__name__} has no field {name}"
    return getattr(theirs, f"{name}_ms")


def _same(mine: Any, theirs: Any, path: str) -> None:
    if dataclasses.is_dataclass(mine):
        for field in dataclasses.fields(mine):
            _same(getattr(mine, field.name), _their_value(theirs, field.name), f"{path}.{field.name}")
    elif isinstance(mine, tuple):
        assert theirs is not None and len(mine) == len(theirs), f"{path}: {mine!r} != {theirs!r}"
        for index, (a, b) in enumerate(zip(mine, theirs)):
            _same(a, b, f"{path}[{index}]")
    elif isinstance(mine, datetime.timedelta):
        assert theirs == mine // datetime.timedelta(milliseconds=1), f"{path}: {mine!r} != {theirs!r}"
    elif isinstance(mine, uuid.UUID) or (mine is None and isinstance(theirs, uuid.UUID)):
        zero = uuid.UUID(int=0)
        assert (mine or zero) == (theirs or zero), f"{path}: {mine!r} != {theirs!r}"
    else:
        assert mine == theirs, f"{path}: {mine!r} != {theirs!r}"


def check_decodes_independently(entity: Any, key: int, version: int) -> Any:
    """Encode with kio; decode with kafka-python (else kio's reader) and compare every field."""
    body = codec.encode_body(entity)
    cls = _kafka_python(key, "response", version)
    if cls is None:
        back, size = entity_reader(type(entity))(body, 0)
        assert size == len(body)
        assert back == entity
        return back
    theirs = cls.decode(body, version=version)
    _same(entity, theirs, f"api {key} v{version}")
    return theirs


# ---------------------------------------------------------------------------- representative responses
TOPIC_ID = uuid.UUID("6b1d0a58-2f0e-4c41-9d0c-3f5d0f7e2a11")
CONFIG_ENTRY = {
    "name": "retention.ms", "value": "1000", "read_only": False, "config_source": 1, "is_sensitive": False,
    "synonyms": [{"name": "retention.ms", "value": "1000", "source": 1},
                 {"name": "log.retention.ms", "value": "604800000", "source": 5}],
    "config_type": 5, "documentation": "The topic's retention.ms.",
}
RESPONSES: dict[int, dict[str, Any]] = {
    2: {"throttle_time": 7, "topics": [{"name": "t", "partitions": [
        {"partition_index": 0, "error_code": 0, "timestamp": 1_700_000_000_000, "offset": 42, "leader_epoch": 0},
        {"partition_index": 1, "error_code": 3, "timestamp": -1, "offset": -1, "leader_epoch": -1}]}]},
    19: {"throttle_time": 0, "topics": [
        {"name": "created", "topic_id": TOPIC_ID, "error_code": 0, "error_message": None, "topic_config_error_code": 0,
         "num_partitions": 3, "replication_factor": 1,
         "configs": [{k: CONFIG_ENTRY[k] for k in ("name", "value", "read_only", "config_source", "is_sensitive")}]},
        {"name": "failed", "topic_id": None, "error_code": 38, "error_message": "only 1 broker", "topic_config_error_code": 0,
         "num_partitions": -1, "replication_factor": -1, "configs": []}]},
    20: {"throttle_time": 0, "responses": [
        {"name": "gone", "topic_id": TOPIC_ID, "error_code": 0, "error_message": None},
        {"name": "missing", "topic_id": None, "error_code": 3, "error_message": "topic 'missing' does not exist"}]},
    21: {"throttle_time": 0, "topics": [{"name": "t", "partitions": [
        {"partition_index": 0, "low_watermark": 5, "error_code": 0},
        {"partition_index": 9, "low_watermark": -1, "error_code": 3}]}]},
    22: {"throttle_time": 0, "error_code": 0, "producer_id": 1234, "producer_epoch": 3},
    32: {"throttle_time": 0, "results": [
        {"error_code": 0, "error_message": None, "resource_type": 2, "resource_name": "t", "configs": [CONFIG_ENTRY]},
        {"error_code": 3, "error_message": "topic 'x' does not exist", "resource_type": 2, "resource_name": "x",
         "configs": []}]},
    33: {"throttle_time": 0, "responses": [
        {"error_code": 0, "error_message": None, "resource_type": 2, "resource_name": "t"},
        {"error_code": 42, "error_message": "broker configs are static", "resource_type": 4, "resource_name": "0"}]},
    37: {"throttle_time": 0, "results": [
        {"name": "t", "error_code": 0, "error_message": None},
        {"name": "u", "error_code": 37, "error_message": "Topic already has 3 partitions."}]},
    44: {"throttle_time": 0, "responses": [
        {"error_code": 40, "error_message": "bad value", "resource_type": 2, "resource_name": "t"}]},
    60: {"throttle_time": 0, "error_code": 0, "error_message": None, "endpoint_type": 1, "cluster_id": "cluster",
         "controller_id": 0, "brokers": [{"broker_id": 0, "host": "127.0.0.1", "port": 9092, "rack": None,
                                          "is_fenced": False}],
         "cluster_authorized_operations": -2147483648},
}

# Requests in kafka-python's field names, each holding every field any version has.
REQUESTS: dict[int, dict[str, Any]] = {
    2: {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": "t", "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1},
                                     {"partition_index": 1, "current_leader_epoch": -1, "timestamp": -2}]}]},
    19: {"topics": [{"name": "t", "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}],
         "timeout_ms": 1000, "validate_only": False},
    20: {"topic_names": ["t"], "topics": [{"name": "t", "topic_id": None}], "timeout_ms": 1000},
    21: {"topics": [{"name": "t", "partitions": [{"partition_index": 0, "offset": 1}]}], "timeout_ms": 1000},
    22: {"transactional_id": None, "transaction_timeout_ms": 60000, "producer_id": -1, "producer_epoch": -1},
    32: {"resources": [{"resource_type": 2, "resource_name": "t", "configuration_keys": None}],
         "include_synonyms": False, "include_documentation": False},
    33: {"resources": [{"resource_type": 2, "resource_name": "t", "configs": [{"name": "retention.ms", "value": "1"}]}],
         "validate_only": False},
    37: {"topics": [{"name": "t", "count": 2, "assignments": None}], "timeout_ms": 1000, "validate_only": False},
    44: {"resources": [{"resource_type": 2, "resource_name": "t",
                        "configs": [{"name": "retention.ms", "config_operation": 0, "value": "1"}]}],
         "validate_only": False},
    60: {"include_cluster_authorized_operations": False, "endpoint_type": 1, "include_fenced_brokers": False},
}


def test_every_module_registers_what_kio_has():
    for key in KEYS:
        spec = REGISTRY[key]
        assert spec.error_response is not None, spec.name
        for version in range(spec.min_version, spec.max_version + 1):
            assert codec.request_class(key, version) is not None or spec.decode is not None, (spec.name, version)


@pytest.mark.parametrize(("key", "version"), VERSIONS)
def test_response_decodes_independently(key, version):
    entity = build(codec.response_class(key, version), RESPONSES[key])
    check_decodes_independently(entity, key, version)


@pytest.mark.parametrize(("key", "version"), VERSIONS)
def test_error_response_decodes_independently(key, version):
    request = kio_request(key, version, REQUESTS[key])
    entity = REGISTRY[key].error_response(request, version, INVALID_REQUEST)
    theirs = check_decodes_independently(entity, key, version)
    assert INVALID_REQUEST in _error_codes(theirs)


def _error_codes(message: Any) -> set[int]:
    """Every error_code anywhere in a decoded kafka-python message."""
    found = set()
    fields = getattr(type(message), "fields", None)
    if fields is None:
        return found
    for name in fields:
        value = getattr(message, name)
        if name == "error_code":
            found.add(value)
        elif isinstance(value, list):
            for item in value:
                found |= _error_codes(item)
    return found


# ---------------------------------------------------------------------------- a real worker node
class Broker:
    """One WorkerNode (worker 0 of 1) over real files; handlers are called as the connection would."""

    def __init__(self, root: str, overrides: dict[str, str]) -> None:
        data = os.path.join(root, "data")
        os.makedirs(data, exist_ok=True)
        config = load_config(None, {"log.dirs": data, "workers": "1", "run.dir": root, **overrides})
        self.rings = SharedRings(1)
        self.node = WorkerNode(config, 0, 1, root, "test-cluster", True, self.rings)
        self.node.open()
        self.runner = asyncio.Runner()

    def call(self, key: int, version: int, request: dict[str, Any]) -> Any:
        spec = REGISTRY[key]
        connection = types.SimpleNamespace(peer="127.0.0.1:1", listener=self.node.config.listeners.bound[0])
        ctx = types.SimpleNamespace(node=self.node, connection=connection, api_key=key, api_version=version,
                                    correlation_id=1, client_id="test")
        result = spec.handle(ctx, kio_request(key, version, request))
        if spec.is_async:
            result = self.runner.run(result)
        return check_decodes_independently(result, key, version)

    def create(self, name: str, partitions: int = 1, configs: dict[str, str] | None = None) -> None:
        answer = self.call(19, 7, {"topics": [_new_topic(name, partitions, configs=configs)], "timeout_ms": 1000,
                                   "validate_only": False})
        assert answer.topics[0].error_code == NONE, answer

    def append(self, tp: TopicPartition, timestamps: list[int]) -> None:
        records = [Record(i, ts, b"k", b"v") for i, ts in enumerate(timestamps)]
        [result] = self.node.owner.append([AppendItem(tp, encode_batch(records), 9)])
        assert result.error_code == NONE, result

    def close(self) -> None:
        self.runner.close()
        self.node.close()
        self.rings.close()


@pytest.fixture
def make_broker(tmp_path):
    started: list[Broker] = []

    def make(**overrides: str) -> Broker:
        b = Broker(str(tmp_path / f"broker-{len(started)}"), overrides)
        started.append(b)
        return b

    yield make
    for b in started:
        b.close()


@pytest.fixture
def broker(make_broker):
    return make_broker()


def _new_topic(name: str, partitions: int = 1, replication: int = -1, assignments: list[dict[str, Any]] | None = None,
               configs: dict[str, str | None] | None = None) -> dict[str, Any]:
    return {"name": name, "num_partitions": partitions, "replication_factor": replication, "assignments": assignments or [],
            "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()]}


def _versions(key: int) -> list[int]:
    return [version for k, version in VERSIONS if k == key]


# ---------------------------------------------------------------------------- CreateTopics
@pytest.mark.parametrize("version", _versions(19))
def test_create_topics(broker, version):
    answer = broker.call(19, version, {"topics": [_new_topic("events", 3, configs={"retention.ms": "1000"})],
                                       "timeout_ms": 1000, "validate_only": False})
    [result] = answer.topics
    assert (result.name, result.error_code) == ("events", NONE)
    info = broker.node.registry.get("events")
    assert info is not None and info.partitions == 3 and dict(info.configs) == {"retention.ms": "1000"}
    assert sorted(tp.partition for tp in broker.node.logs.logs if tp.topic == "events") == [0, 1, 2]
    if version >= 5:
        assert (result.num_partitions, result.replication_factor) == (3, 1)
        configs = {c.name: c for c in result.configs}
        assert (configs["retention.ms"].value, configs["retention.ms"].config_source) == ("1000", 1)
        assert (configs["segment.bytes"].value, configs["segment.bytes"].config_source) == (str(1 << 30), 5)
    if version >= 7:
        assert result.topic_id == info.topic_id


def test_create_topics_defaults_and_assignments(make_broker):
    broker = make_broker(**{"num.partitions": "4"})
    answer = broker.call(19, 7, {"topics": [
        _new_topic("by-default", -1, -1),
        _new_topic("assigned", -1, -1, assignments=[{"partition_index": 1, "broker_ids": [0]},
                                                    {"partition_index": 0, "broker_ids": [0]}]),
    ], "timeout_ms": 1000, "validate_only": False})
    assert [(t.name, t.error_code, t.num_partitions) for t in answer.topics] == [("by-default", NONE, 4), ("assigned", NONE, 2)]
    assert broker.node.registry.get("assigned").partitions == 2


def test_create_topics_errors(broker):
    broker.create("existing")
    broker.create("dotted_name")
    answer = broker.call(19, 7, {"topics": [
        _new_topic("existing"),
        _new_topic("bad name!"),
        _new_topic("dotted.name"),
        _new_topic("replicated", 1, 3),
        _new_topic("zero-rf", 1, 0),
        _new_topic("no-partitions", 0),
        _new_topic("bad-config", configs={"retention.ms": "soon"}),
        _new_topic("zero-segment", configs={"segment.bytes": "0"}),  # once created a log that could not open
        _new_topic("ratio-2", configs={"min.cleanable.dirty.ratio": "2"}),
        _new_topic("unknown-config", configs={"no.such.key": "1"}),
        _new_topic("null-config", configs={"retention.ms": None}),
        _new_topic("other-broker", -1, -1, assignments=[{"partition_index": 0, "broker_ids": [5]}]),
        _new_topic("gap", -1, -1, assignments=[{"partition_index": 1, "broker_ids": [0]}]),
        _new_topic("both", 2, -1, assignments=[{"partition_index": 0, "broker_ids": [0]}]),
        _new_topic("twice"),
        _new_topic("twice"),
    ], "timeout_ms": 1000, "validate_only": False})
    codes = {t.name: t.error_code for t in answer.topics}
    assert codes == {
        "existing": TOPIC_ALREADY_EXISTS, "bad name!": INVALID_TOPIC_EXCEPTION, "dotted.name": INVALID_TOPIC_EXCEPTION,
        "replicated": INVALID_REPLICATION_FACTOR, "zero-rf": INVALID_REPLICATION_FACTOR,
        "no-partitions": INVALID_PARTITIONS, "bad-config": INVALID_CONFIG, "unknown-config": INVALID_CONFIG,
        "zero-segment": INVALID_CONFIG, "ratio-2": INVALID_CONFIG,
        "null-config": INVALID_CONFIG, "other-broker": INVALID_REPLICA_ASSIGNMENT, "gap": INVALID_REPLICA_ASSIGNMENT,
        "both": INVALID_REQUEST, "twice": INVALID_REQUEST,
    }
    assert len(answer.topics) == 15  # a duplicated name is answered once
    assert all(t.error_message for t in answer.topics)
    assert [t.name for t in broker.node.registry.all()] == ["dotted_name", "existing"]


def test_create_topics_validate_only(broker):
    answer = broker.call(19, 7, {"topics": [_new_topic("dry", 2)], "timeout_ms": 1000, "validate_only": True})
    assert (answer.topics[0].error_code, answer.topics[0].num_partitions) == (NONE, 2)
    assert broker.node.registry.get("dry") is None
    assert not broker.node.logs.logs


# ---------------------------------------------------------------------------- DeleteTopics
@pytest.mark.parametrize("version", _versions(20))
def test_delete_topics_by_name(broker, version):
    broker.create("doomed", 2)
    topic_id = broker.node.registry.get("doomed").topic_id
    answer = broker.call(20, version, {"topic_names": ["doomed", "absent"], "timeout_ms": 1000,
                                       "topics": [{"name": "doomed", "topic_id": None}, {"name": "absent", "topic_id": None}]})
    assert [(r.name, r.error_code) for r in answer.responses] == [("doomed", NONE), ("absent", UNKNOWN_TOPIC_OR_PARTITION)]
    if version >= 6:
        assert answer.responses[0].topic_id == topic_id
    assert broker.node.registry.get("doomed") is None
    assert not [tp for tp in broker.node.logs.logs if tp.topic == "doomed"]


def test_delete_topics_by_id(broker):
    broker.create("by-id")
    broker.create("twice")
    topic_id = broker.node.registry.get("by-id").topic_id
    answer = broker.call(20, 6, {"topics": [
        {"name": None, "topic_id": topic_id},
        {"name": None, "topic_id": uuid.uuid4()},
        {"name": "by-id", "topic_id": topic_id},
        {"name": None, "topic_id": None},
        {"name": "twice", "topic_id": None},
        {"name": "twice", "topic_id": None},
    ], "timeout_ms": 1000})
    assert [r.error_code for r in answer.responses] == [NONE, UNKNOWN_TOPIC_ID, INVALID_REQUEST, INVALID_REQUEST,
                                                        INVALID_REQUEST, INVALID_REQUEST]
    assert (answer.responses[0].name, answer.responses[0].topic_id) == ("by-id", topic_id)
    assert broker.node.registry.get("by-id") is None
    assert broker.node.registry.get("twice") is not None


@pytest.mark.parametrize(("version", "code"), [(1, INVALID_REQUEST), (2, INVALID_REQUEST), (3, TOPIC_DELETION_DISABLED),
                                               (6, TOPIC_DELETION_DISABLED)])
def test_delete_topics_disabled(make_broker, version, code):
    broker = make_broker(**{"delete.topic.enable": "false"})
    broker.create("kept")
    answer = broker.call(20, version, {"topic_names": ["kept"], "topics": [{"name": "kept", "topic_id": None}],
                                       "timeout_ms": 1000})
    assert [r.error_code for r in answer.responses] == [code]
    assert broker.node.registry.get("kept") is not None


# ---------------------------------------------------------------------------- CreatePartitions
@pytest.mark.parametrize("version", _versions(37))
def test_create_partitions(broker, version):
    broker.create("grow", 1)
    broker.create("fixed", 3)
    answer = broker.call(37, version, {"topics": [
        {"name": "grow", "count": 3, "assignments": [{"broker_ids": [0]}, {"broker_ids": [0]}]},
        {"name": "fixed", "count": 3, "assignments": None},
        {"name": "absent", "count": 3, "assignments": None},
    ], "timeout_ms": 1000, "validate_only": False})
    assert [(r.name, r.error_code) for r in answer.results] == [
        ("grow", NONE), ("fixed", INVALID_PARTITIONS), ("absent", UNKNOWN_TOPIC_OR_PARTITION)]
    assert broker.node.registry.get("grow").partitions == 3
    assert TopicPartition("grow", 2) in broker.node.logs.logs


def test_create_partitions_refusals(broker):
    broker.create("t", 2)
    answer = broker.call(37, 3, {"topics": [
        {"name": "t", "count": 1, "assignments": None},
        {"name": "t", "count": 4, "assignments": None},
    ], "timeout_ms": 1000, "validate_only": False})
    assert [(r.name, r.error_code) for r in answer.results] == [("t", INVALID_REQUEST)]
    answer = broker.call(37, 3, {"topics": [
        {"name": "t", "count": 1, "assignments": None},
    ], "timeout_ms": 1000, "validate_only": False})
    assert answer.results[0].error_code == INVALID_PARTITIONS
    answer = broker.call(37, 3, {"topics": [{"name": "t", "count": 4, "assignments": [{"broker_ids": [0]}]}],
                                 "timeout_ms": 1000, "validate_only": False})
    assert answer.results[0].error_code == INVALID_REPLICA_ASSIGNMENT
    answer = broker.call(37, 3, {"topics": [{"name": "t", "count": 3, "assignments": [{"broker_ids": [1]}]}],
                                 "timeout_ms": 1000, "validate_only": False})
    assert answer.results[0].error_code == INVALID_REPLICA_ASSIGNMENT
    answer = broker.call(37, 3, {"topics": [{"name": "t", "count": 4, "assignments": None}], "timeout_ms": 1000,
                                 "validate_only": True})
    assert answer.results[0].error_code == NONE
    assert broker.node.registry.get("t").partitions == 2


# ---------------------------------------------------------------------------- DescribeConfigs
def _describe(broker: Broker, version: int, resources: list[tuple[int, str, list[str] | None]], synonyms: bool = False,
              documentation: bool = False) -> Any:
    return broker.call(32, version, {"resources": [{"resource_type": t, "resource_name": n, "configuration_keys": k}
                                                   for t, n, k in resources],
                                     "include_synonyms": synonyms, "include_documentation": documentation})


@pytest.mark.parametrize("version", _versions(32))
def test_describe_topic_configs(make_broker, version):
    broker = make_broker(**{"log.retention.bytes": "5000"})
    broker.create("t", configs={"retention.ms": "1000"})
    answer = _describe(broker, version, [(2, "t", None), (2, "absent", None)], synonyms=True, documentation=True)
    found, missing = answer.results
    assert (found.error_code, missing.error_code) == (NONE, UNKNOWN_TOPIC_OR_PARTITION)
    configs = {c.name: c for c in found.configs}
    assert set(configs) == set(broker.node.logs.default_log_config.topic_values())
    assert (configs["retention.ms"].value, configs["retention.ms"].config_source) == ("1000", 1)
    assert (configs["retention.bytes"].value, configs["retention.bytes"].config_source) == ("5000", 4)
    assert configs["segment.bytes"].config_source == 5
    assert [(s.name, s.source) for s in configs["retention.ms"].synonyms] == [("retention.ms", 1), ("log.retention.ms", 5)]
    assert [(s.name, s.value, s.source) for s in configs["retention.bytes"].synonyms] == [
        ("log.retention.bytes", "5000", 4), ("log.retention.bytes", "-1", 5)]
    assert not any(c.read_only or c.is_sensitive for c in found.configs)
    if version >= 3:
        assert configs["retention.ms"].config_type == 5  # LONG
        assert configs["segment.bytes"].config_type == 3  # INT
        assert configs["cleanup.policy"].config_type == 7  # LIST
        assert configs["min.cleanable.dirty.ratio"].config_type == 6  # DOUBLE
        assert configs["retention.ms"].documentation


def test_describe_configs_keys_and_no_synonyms(broker):
    broker.create("t")
    answer = _describe(broker, 4, [(2, "t", ["retention.ms", "no.such.key"])])
    [result] = answer.results
    assert [(c.name, c.synonyms, c.documentation) for c in result.configs] == [("retention.ms", [], None)]


def test_describe_broker_configs(broker):
    answer = _describe(broker, 4, [(4, "0", None), (4, "", None), (4, "7", None), (4, "zero", None), (1, "0", None)],
                       synonyms=True, documentation=True)
    mine, defaults, other, garbage, unsupported = answer.results
    assert mine.error_code == NONE and defaults.error_code == NONE
    configs = {c.name: c for c in mine.configs}
    assert configs["log.dirs"].config_source == 4 and configs["node.id"].config_source == 5
    assert configs["delete.topic.enable"].value == "true" and configs["delete.topic.enable"].config_type == 1
    assert configs["num.partitions"].read_only and not configs["log.retention.ms"].read_only
    assert configs["num.partitions"].documentation
    assert defaults.configs == []
    assert [other.error_code, garbage.error_code, unsupported.error_code] == [INVALID_REQUEST] * 3


# ---------------------------------------------------------------------------- AlterConfigs
@pytest.mark.parametrize("version", _versions(33))
def test_alter_configs_replaces_the_overrides(broker, version):
    broker.create("t", configs={"retention.ms": "1000", "cleanup.policy": "compact"})
    answer = broker.call(33, version, {"resources": [
        {"resource_type": 2, "resource_name": "t", "configs": [{"name": "segment.ms", "value": "60000"}]},
        {"resource_type": 2, "resource_name": "absent", "configs": []},
        {"resource_type": 4, "resource_name": "0", "configs": [{"name": "num.partitions", "value": "3"}]},
    ], "validate_only": False})
    assert [r.error_code for r in answer.responses] == [NONE, UNKNOWN_TOPIC_OR_PARTITION, INVALID_REQUEST]
    assert dict(broker.node.registry.get("t").configs) == {"segment.ms": "60000"}
    assert broker.node.logs.topic_overrides("t") == {"segment.ms": "60000"}  # applied by the sync


def test_alter_configs_refusals(broker):
    broker.create("t", configs={"retention.ms": "1000"})
    answer = broker.call(33, 2, {"resources": [
        {"resource_type": 2, "resource_name": "t", "configs": [{"name": "retention.ms", "value": "soon"}]},
    ], "validate_only": False})
    assert answer.responses[0].error_code == INVALID_CONFIG
    assert answer.responses[0].error_message.startswith("Invalid value soon for configuration retention.ms")
    answer = broker.call(33, 2, {"resources": [
        {"resource_type": 2, "resource_name": "t", "configs": [{"name": "segment.bytes", "value": "-1"}]},
    ], "validate_only": False})
    assert answer.responses[0].error_code == INVALID_CONFIG
    assert "Value must be at least 14" in answer.responses[0].error_message
    assert dict(broker.node.registry.get("t").configs) == {"retention.ms": "1000"}
    answer = broker.call(33, 2, {"resources": [
        {"resource_type": 2, "resource_name": "t", "configs": [{"name": "retention.ms", "value": "5"}]},
    ], "validate_only": True})
    assert answer.responses[0].error_code == NONE
    answer = broker.call(33, 2, {"resources": [
        {"resource_type": 2, "resource_name": "t", "configs": []},
        {"resource_type": 2, "resource_name": "t", "configs": []},
    ], "validate_only": False})
    assert [r.error_code for r in answer.responses] == [INVALID_REQUEST]
    assert dict(broker.node.registry.get("t").configs) == {"retention.ms": "1000"}


# ---------------------------------------------------------------------------- IncrementalAlterConfigs
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def _incremental(broker: Broker, version: int, ops: list[tuple[str, int, str | None]], name: str = "t",
                 validate_only: bool = False) -> int:
    answer = broker.call(44, version, {"resources": [{"resource_type": 2, "resource_name": name, "configs": [
        {"name": n, "config_operation": op, "value": v} for n, op, v in ops]}], "validate_only": validate_only})
    [response] = answer.responses
    return int(response.error_code)


@pytest.mark.parametrize("version", _versions(44))
def test_incremental_alter_configs(broker, version):
    broker.create("t", configs={"retention.ms": "1000"})
    assert _incremental(broker, version, [("segment.ms", SET, "60000"), ("retention.ms", DELETE, None)]) == NONE
    assert dict(broker.node.registry.get("t").configs) == {"segment.ms": "60000"}
    assert _incremental(broker, version, [("cleanup.policy", APPEND, "compact")]) == NONE
    assert broker.node.registry.get("t").configs["cleanup.policy"] == "delete,compact"
    assert _incremental(broker, version, [("cleanup.policy", SUBTRACT, "delete")]) == NONE
    assert broker.node.registry.get("t").configs["cleanup.policy"] == "compact"
    assert broker.node.logs.log_config_for("t").compact and not broker.node.logs.log_config_for("t").delete


def test_incremental_alter_configs_refusals(broker):
    broker.create("t")
    assert _incremental(broker, 1, [("retention.ms", APPEND, "5")]) == INVALID_CONFIG
    assert _incremental(broker, 1, [("cleanup.policy", SUBTRACT, "delete")]) == INVALID_CONFIG  # nothing left
    assert _incremental(broker, 1, [("no.such.key", DELETE, None)]) == INVALID_CONFIG
    assert _incremental(broker, 1, [("retention.ms", SET, "x")]) == INVALID_CONFIG
    assert _incremental(broker, 1, [("segment.bytes", SET, "0")]) == INVALID_CONFIG
    assert _incremental(broker, 1, [("flush.messages", SET, "0")]) == INVALID_CONFIG
    assert _incremental(broker, 1, [("retention.ms", SET, "-2")]) == INVALID_CONFIG
    assert _incremental(broker, 1, [("retention.ms", SET, "5"), ("retention.ms", DELETE, None)]) == INVALID_REQUEST
    assert _incremental(broker, 1, [("retention.ms", 9, "5")]) == INVALID_REQUEST
    assert _incremental(broker, 1, [("retention.ms", SET, "5")], name="absent") == UNKNOWN_TOPIC_OR_PARTITION
    assert _incremental(broker, 1, [("retention.ms", SET, "5")], validate_only=True) == NONE
    assert dict(broker.node.registry.get("t").configs) == {}


# ---------------------------------------------------------------------------- ListOffsets
def _list_offsets(broker: Broker, version: int, topic: str, queries: list[tuple[int, int]]) -> list[Any]:
    answer = broker.call(2, version, {"replica_id": -1, "isolation_level": 0, "topics": [{"name": topic, "partitions": [
        {"partition_index": p, "current_leader_epoch": -1, "timestamp": ts} for p, ts in queries]}]})
    [result] = answer.topics
    return list(result.partitions)


@pytest.mark.parametrize("version", _versions(2))
def test_list_offsets(broker, version):
    broker.create("t", 2)
    broker.append(TopicPartition("t", 0), [1000, 3000, 2000])
    queries = [(0, -2), (0, -1), (0, 1500), (0, 9999), (1, -1), (5, -1)]
    if version >= 7:
        queries.append((0, -3))
    if version >= 8:
        queries.append((0, -4))
    # One request per query: a partition asked for twice in one request is INVALID_REQUEST.
    got = [(p.partition_index, p.error_code, p.offset, p.timestamp)
           for query in queries for p in _list_offsets(broker, version, "t", [query])]
    expected = [(0, NONE, 0, -1), (0, NONE, 3, -1), (0, NONE, 1, 3000), (0, NONE, -1, -1), (1, NONE, 0, -1),
                (5, UNKNOWN_TOPIC_OR_PARTITION, -1, -1)]
    if version >= 7:
        expected.append((0, NONE, 1, 3000))
    if version >= 8:
        expected.append((0, NONE, 0, -1))
    assert got == expected
    if version >= 4:
        assert [p.leader_epoch for p in _list_offsets(broker, version, "t", [(0, -1), (1, 9999)])] == [0, -1]


def test_list_offsets_unknown_topic_and_duplicates(broker):
    broker.create("t")
    assert [p.error_code for p in _list_offsets(broker, 8, "absent", [(0, -1)])] == [UNKNOWN_TOPIC_OR_PARTITION]
    assert [p.error_code for p in _list_offsets(broker, 8, "t", [(0, -1), (0, -2)])] == [INVALID_REQUEST] * 2


# ---------------------------------------------------------------------------- DeleteRecords
@pytest.mark.parametrize("version", _versions(21))
def test_delete_records(broker, version):
    broker.create("t", 3)
    broker.create("compacted", configs={"cleanup.policy": "compact"})
    for partition in range(3):
        broker.append(TopicPartition("t", partition), [1000] * 10)
    answer = broker.call(21, version, {"topics": [
        {"name": "t", "partitions": [{"partition_index": 0, "offset": 5}, {"partition_index": 1, "offset": -1},
                                     {"partition_index": 2, "offset": 11}, {"partition_index": 7, "offset": 1}]},
        {"name": "compacted", "partitions": [{"partition_index": 0, "offset": 0}]},
        {"name": "absent", "partitions": [{"partition_index": 0, "offset": 0}]},
    ], "timeout_ms": 1000})
    got = [[(p.partition_index, p.error_code, p.low_watermark) for p in t.partitions] for t in answer.topics]
    assert got == [[(0, NONE, 5), (1, NONE, 10), (2, OFFSET_OUT_OF_RANGE, -1), (7, UNKNOWN_TOPIC_OR_PARTITION, -1)],
                   [(0, POLICY_VIOLATION, -1)], [(0, UNKNOWN_TOPIC_OR_PARTITION, -1)]]
    assert broker.node.logs.get_log(TopicPartition("t", 0)).log_start_offset == 5


# ---------------------------------------------------------------------------- DescribeCluster
@pytest.mark.parametrize("version", _versions(60))
def test_describe_cluster(broker, version):
    answer = broker.call(60, version, REQUESTS[60])
    assert (answer.error_code, answer.cluster_id, answer.controller_id) == (NONE, "test-cluster", 0)
    assert [(b.broker_id, b.host, b.port) for b in answer.brokers] == [(0, "127.0.0.1", 9092)]
    assert answer.authorized_operations is None  # kafka-python's reading of -2147483648, "not provided"
    if version >= 1:
        controllers = broker.call(60, version, dict(REQUESTS[60], endpoint_type=2))
        assert controllers.error_code == MISMATCHED_ENDPOINT_TYPE and controllers.brokers == []


# ---------------------------------------------------------------------------- InitProducerId
def _init(broker: Broker, version: int, transactional_id: str | None = None, producer_id: int = -1,
          epoch: int = -1) -> tuple[int, int, int]:
    answer = broker.call(22, version, {"transactional_id": transactional_id, "transaction_timeout_ms": 60000,
                                       "producer_id": producer_id, "producer_epoch": epoch})
    return answer.error_code, answer.producer_id, answer.producer_epoch


@pytest.mark.parametrize("version", _versions(22))
def test_init_producer_id(broker, version):
    first, second = _init(broker, version), _init(broker, version)
    assert first[0] == second[0] == NONE and first[2] == second[2] == 0
    assert first[1] >= 0 and second[1] > first[1]
    if version >= 3:
        assert _init(broker, version, producer_id=first[1], epoch=4) == (NONE, first[1], 5)
        code, new_id, epoch = _init(broker, version, producer_id=first[1], epoch=32766)
        assert code == NONE and new_id not in (first[1], second[1]) and epoch == 0
        assert _init(broker, version, producer_id=first[1], epoch=-1)[0] == INVALID_REQUEST
