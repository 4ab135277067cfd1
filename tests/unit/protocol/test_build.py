"""build(): one plain description for any version; keys no version has are refused.

Real kio classes throughout: Metadata grew fields version by version (cluster_id in v2,
offline_replicas in v5, leader_epoch in v7, topic_id in v10), so one description with
every field fits v1 and v12 alike, and a misspelling fits neither.
"""

from __future__ import annotations

import dataclasses
import datetime
import importlib
import pkgutil
import types
import typing
import uuid
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from kio.static.primitive import i32Timedelta, i64Timedelta

import broker.apis
from broker.dispatch import REGISTRY
from broker.protocol import codec
from broker.protocol.build import build

METADATA = 3
CREATE_TOPICS = 19
HEARTBEAT = 12


def metadata(**partition_extra: Any) -> dict[str, Any]:
    return {
        "throttle_time": 0,
        "brokers": [{"node_id": 1, "host": "127.0.0.1", "port": 9092, "rack": None}],
        "cluster_id": "castle", "controller_id": 1,
        "topics": [{"error_code": 0, "name": "t", "topic_id": uuid.UUID(int=7), "is_internal": False,
                    "topic_authorized_operations": -2147483648,
                    "partitions": [{"error_code": 0, "partition_index": 0, "leader_id": 1, "leader_epoch": 3,
                                    "replica_nodes": [1], "isr_nodes": [1], "offline_replicas": [],
                                    **partition_extra}]}],
        "cluster_authorized_operations": -2147483648,
    }


def test_a_field_of_another_version_is_dropped():
    old = build(codec.response_class(METADATA, 1), metadata())
    new = build(codec.response_class(METADATA, 12), metadata())
    assert not hasattr(old, "cluster_id") and not hasattr(old.topics[0].partitions[0], "leader_epoch")
    assert new.cluster_id == "castle"
    assert new.topics[0].topic_id == uuid.UUID(int=7)
    assert new.topics[0].partitions[0].leader_epoch == 3
    assert old.topics[0].partitions[0].replica_nodes == new.topics[0].partitions[0].replica_nodes == (1,)


@pytest.mark.parametrize("version", [1, 12])
def test_a_misspelt_top_level_key_is_refused(version):
    data = metadata()
    data["trottle_time"] = data.pop("throttle_time")
    with pytest.raises(TypeError, match=rf"MetadataResponse v{version}: .*'trottle_time'") as caught:
        build(codec.response_class(METADATA, version), data)
    # v3 added throttle_time: from then on the misspelling also leaves the field missing
    assert ("needs field 'throttle_time'" in str(caught.value)) == (version >= 3)


@pytest.mark.parametrize("version", [1, 12])
def test_a_misspelt_nested_key_is_refused(version):
    with pytest.raises(TypeError, match=rf"MetadataResponsePartition v{version}: .*'leader_epok'") as caught:
        build(codec.response_class(METADATA, version), metadata(leader_epok=3))
    # the fields v1 lacks but later versions have are not among the refused
    assert "offline_replicas" not in str(caught.value) and "leader_epoch" not in str(caught.value)


def test_a_field_of_another_message_is_refused():
    """CreateTopics' configs look like DescribeConfigs' entries, but have no synonyms in any version."""
    config = {"name": "retention.ms", "value": "1000", "read_only": False, "config_source": 5,
              "is_sensitive": False, "synonyms": []}
    topic = {"name": "t", "topic_id": uuid.UUID(int=7), "error_code": 0, "error_message": None,
             "topic_config_error_code": 0, "num_partitions": 1, "replication_factor": 1, "configs": [config]}
    with pytest.raises(TypeError, match=r"CreatableTopicConfigs v7: .*'synonyms'"):
        build(codec.response_class(CREATE_TOPICS, 7), {"throttle_time": 0, "topics": [topic]})
    del config["synonyms"]
    built = build(codec.response_class(CREATE_TOPICS, 7), {"throttle_time": 0, "topics": [topic]})
    assert built.topics[0].configs[0].value == "1000"


def test_a_version_without_a_field_drops_it_and_refuses_only_the_unknown():
    # Heartbeat v0 has no throttle_time (v1 added it): dropped, not refused.
    assert build(codec.response_class(HEARTBEAT, 0), {"throttle_time": 0, "error_code": 27}).error_code == 27
    with pytest.raises(TypeError, match=r"HeartbeatResponse v0: no version .* 'eror_code'") as caught:
        build(codec.response_class(HEARTBEAT, 0), {"throttle_time": 0, "error_code": 0, "eror_code": 27})
    assert "throttle_time" not in str(caught.value)


def test_a_missing_required_field_is_still_named():
    with pytest.raises(TypeError, match=r"HeartbeatResponse v4: needs field 'error_code'"):
        build(codec.response_class(HEARTBEAT, 4), {"throttle_time": 0})


def sample(hint: Any) -> Any:
    """A value of a kio type: lists hold one element, so nested descriptions get built too."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is tuple:
        return (sample(args[0]),)
    if origin in (typing.Union, types.UnionType):
        return sample(next(a for a in args if a is not type(None)))
    if dataclasses.is_dataclass(hint):
        hints = typing.get_type_hints(hint)
        return hint(**{f.name: sample(hints[f.name]) for f in dataclasses.fields(hint) if f.init})
    if hint is ErrorCode:
        return ErrorCode.none
    if hint is bool:
        return False
    if hint in (i32Timedelta, i64Timedelta):
        return datetime.timedelta(milliseconds=1)
    if hint is uuid.UUID:
        return uuid.UUID(int=1)
    for base, value in ((int, 1), (float, 1.0), (str, "x"), (bytes, b"")):
        if isinstance(hint, type) and issubclass(hint, base):
            return hint(value)
    raise AssertionError(f"no sample for {hint!r}")


def _registered() -> list[tuple[int, int]]:
    for module in pkgutil.iter_modules(broker.apis.__path__):
        importlib.import_module(f"broker.apis.{module.name}")
    return [(key, version) for key, spec in sorted(REGISTRY.items()) if spec.error_response is not None
            for version in range(spec.min_version, spec.max_version + 1) if codec.request_class(key, version) is not None]


@pytest.mark.parametrize(("key", "version"), _registered())
def test_every_error_answer_builds(key, version):
    """Each API's error answer is a description build() takes, in every version: no key it
    carries is unknown to the message (a request with one of everything, so lists are not empty)."""
    request = sample(codec.request_class(key, version))
    decode = REGISTRY[key].decode
    if decode is not None:  # the handler takes its own decoder's request: read it from the wire
        request = decode(version, codec.encode_request(request), 0)
    answer = REGISTRY[key].error_response(request, version, ErrorCode.invalid_request)
    assert isinstance(answer, bytes) or isinstance(answer, codec.response_class(key, version))
    assert codec.encode_body(answer) if not isinstance(answer, bytes) else answer
