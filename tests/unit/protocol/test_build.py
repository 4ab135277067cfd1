"""build(): one plain description for any version; keys no version has are refused.

Real kio classes throughout: Metadata grew fields version by version (cluster_id in v2,
offline_replicas in v5, leader_epoch in v7, topic_id in v10), so one description with
every field fits v1 and v12 alike, and a misspelling fits neither.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

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
