"""Topic administration through confluent_kafka.admin.AdminClient and kafka-python's
KafkaAdminClient: create, describe, configs, partitions, delete records, delete; each
change is checked through the data path too (produce, consume, offsets)."""

from __future__ import annotations

import os

import pytest

from loadtest.common import process_tree
from tests.integration.clients import confluent_consume, confluent_produce, make_records
from tests.integration.conftest import shared_broker, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


@pytest.fixture(scope="module")
def broker(request, tmp_path_factory):
    """One broker for the module: each test keeps to topics of its own names; the test that
    restarts its broker starts one of its own."""
    yield from shared_broker(request, tmp_path_factory)

# The default test broker: node 0 with two workers, each its own node.
NODES = [0]  # a two-worker broker is one node


def _confluent_admin(broker):
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": broker.bootstrap})


def _result(futures, key, timeout=20):
    return futures[key].result(timeout=timeout)


def test_confluent_admin_topic_lifecycle(broker):
    from confluent_kafka import KafkaException, TopicCollection, TopicPartition
    from confluent_kafka.admin import (
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        NewPartitions,
        NewTopic,
        OffsetSpec,
        ResourceType,
    )

    admin = _confluent_admin(broker)
    topic = "admin-confluent"

    # create (and a second create of the same name fails with TOPIC_ALREADY_EXISTS)
    _result(admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1,
                                          config={"retention.ms": "3600000"})], operation_timeout=10), topic)
    with pytest.raises(KafkaException) as refused:
        _result(admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1)]), topic)
    assert refused.value.args[0].name() == "TOPIC_ALREADY_EXISTS"

    # list and describe
    listed = admin.list_topics(timeout=10)
    assert topic in listed.topics and len(listed.topics[topic].partitions) == 3
    assert sorted(listed.brokers) == NODES and listed.brokers[0].port == broker.port
    description = _result(admin.describe_topics(TopicCollection([topic])), topic)
    assert description.name == topic
    assert [p.id for p in description.partitions] == [0, 1, 2]
    assert all(p.leader.id == 0 and [r.id for r in p.replicas] == [p.leader.id]
               for p in description.partitions)
    cluster = admin.describe_cluster().result(timeout=10)
    assert sorted(n.id for n in cluster.nodes) == NODES and cluster.controller.id == 0
    assert next(n.port for n in cluster.nodes if n.id == 0) == broker.port

    # configs: describe, incremental alter, describe again
    resource = ConfigResource(ResourceType.TOPIC, topic)
    configs = _result(admin.describe_configs([resource]), resource)
    assert configs["retention.ms"].value == "3600000"
    assert configs["cleanup.policy"].value == "delete"
    altered = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry("retention.ms", "7200000", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("max.message.bytes", "2000000", incremental_operation=AlterConfigOpType.SET),
    ])
    _result(admin.incremental_alter_configs([altered]), altered)
    configs = _result(admin.describe_configs([resource]), resource)
    assert configs["retention.ms"].value == "7200000"
    assert configs["max.message.bytes"].value == "2000000"
    unset = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry("max.message.bytes", None, incremental_operation=AlterConfigOpType.DELETE)])
    _result(admin.incremental_alter_configs([unset]), unset)
    configs = _result(admin.describe_configs([resource]), resource)
    assert configs["max.message.bytes"].value == "1048588"

    # create partitions, then produce to the new ones
    _result(admin.create_partitions([NewPartitions(topic, 5)], operation_timeout=10), topic)
    wait_until(lambda: len(admin.list_topics(topic, timeout=5).topics[topic].partitions) == 5, 10, "5 partitions")
    records = make_records(100, 5, tag=topic)
    confluent_produce(broker.bootstrap, topic, records)

    # delete records: the log start moves, earliest offsets follow, consumers start there
    deleted = admin.delete_records([TopicPartition(topic, 0, 7), TopicPartition(topic, 4, -1)], operation_timeout=10)
    assert deleted[TopicPartition(topic, 0, 7)].result(timeout=10).low_watermark == 7
    assert deleted[TopicPartition(topic, 4, -1)].result(timeout=10).low_watermark == 20
    offsets = admin.list_offsets({TopicPartition(topic, p): OffsetSpec.earliest() for p in (0, 1, 4)})
    assert {tp.partition: f.result(timeout=10).offset for tp, f in offsets.items()} == {0: 7, 1: 0, 4: 20}
    latest = admin.list_offsets({TopicPartition(topic, 0): OffsetSpec.latest()})
    assert [f.result(timeout=10).offset for f in latest.values()] == [20]
    got = confluent_consume(broker.bootstrap, topic, [0], 13)
    assert [g.offset for g in sorted(got)] == list(range(7, 20))

    # delete the topic
    _result(admin.delete_topics([topic], operation_timeout=10), topic)
    wait_until(lambda: topic not in admin.list_topics(timeout=5).topics, 10, "the topic to disappear")
    with pytest.raises(KafkaException) as missing:
        _result(admin.delete_topics([topic], operation_timeout=10), topic)
    assert missing.value.args[0].name() == "UNKNOWN_TOPIC_OR_PART"


def test_kafka_python_admin_topic_lifecycle(broker):
    from kafka import TopicPartition
    from kafka.admin import ConfigResource, KafkaAdminClient, NewPartitions, NewTopic, OffsetSpec
    from kafka.errors import TopicAlreadyExistsError

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    topic = "admin-kafka-python"
    try:
        admin.create_topics([NewTopic(topic, 2, 1, topic_configs={"retention.ms": "3600000"})], timeout_ms=10000)
        with pytest.raises(TopicAlreadyExistsError):
            admin.create_topics([NewTopic(topic, 2, 1)], timeout_ms=10000)
        assert topic in admin.list_topics()
        (described,) = admin.describe_topics([topic])
        assert described["name"] == topic and described["error_code"] == 0
        assert [p["partition_index"] for p in described["partitions"]] == [0, 1]
        assert all(p["leader_id"] == 0 and p["replica_nodes"] == [p["leader_id"]]
                   for p in described["partitions"])
        cluster = admin.describe_cluster()
        assert sorted(b["broker_id"] for b in cluster["brokers"]) == NODES
        assert next(b["port"] for b in cluster["brokers"] if b["broker_id"] == 0) == broker.port

        configs = admin.describe_configs([ConfigResource("TOPIC", topic)])["topic"][topic]
        assert configs["retention.ms"]["value"] == "3600000"
        assert configs["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
        result = admin.alter_configs([ConfigResource("TOPIC", topic, {"retention.ms": "7200000",
                                                                      "segment.bytes": "1048576"})])
        assert result["topic"][topic] == "OK", result
        configs = admin.describe_configs([ConfigResource("TOPIC", topic)], config_filter="all")["topic"][topic]
        assert configs["retention.ms"]["value"] == "7200000"
        assert configs["segment.bytes"]["value"] == "1048576"
        assert configs["cleanup.policy"]["value"] == "delete"

        admin.create_partitions({topic: NewPartitions(4)})
        wait_until(lambda: len(admin.describe_topics([topic])[0]["partitions"]) == 4, 10, "4 partitions")
        confluent_produce(broker.bootstrap, topic, make_records(40, 4, tag=topic))

        deleted = admin.delete_records({TopicPartition(topic, 3): 4, TopicPartition(topic, 1): -1})
        assert deleted[TopicPartition(topic, 3)]["low_watermark"] == 4
        assert deleted[TopicPartition(topic, 1)]["low_watermark"] == 10
        earliest = admin.list_partition_offsets({TopicPartition(topic, p): OffsetSpec.EARLIEST for p in range(4)})
        assert {tp.partition: o.offset for tp, o in earliest.items()} == {0: 0, 1: 10, 2: 0, 3: 4}
        latest = admin.list_partition_offsets({TopicPartition(topic, p): OffsetSpec.LATEST for p in range(4)})
        assert {tp.partition: o.offset for tp, o in latest.items()} == {0: 10, 1: 10, 2: 10, 3: 10}

        admin.delete_topics([topic], timeout_ms=10000)
        wait_until(lambda: topic not in admin.list_topics(), 10, "the topic to disappear")
    finally:
        admin.close()


def test_topic_recreated_after_delete_starts_empty(broker):
    """Delete then create the same name: a new topic id, no old data, offsets from 0."""
    from confluent_kafka.admin import NewTopic

    admin = _confluent_admin(broker)
    topic = "admin-recreate"
    _result(admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)]), topic)
    confluent_produce(broker.bootstrap, topic, make_records(30, 2, tag="old"))
    _result(admin.delete_topics([topic], operation_timeout=10), topic)
    wait_until(lambda: topic not in admin.list_topics(timeout=5).topics, 10, "the topic to disappear")
    _result(admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)]), topic)
    records = make_records(10, 2, tag="new", seed=3)
    delivered = confluent_produce(broker.bootstrap, topic, records)
    assert sorted(delivered) == [(p, o) for p in range(2) for o in range(5)]
    got = confluent_consume(broker.bootstrap, topic, range(2), 10)
    assert sorted(g.value for g in got) == sorted(r.value for r in records)


def _deleted_files_held(broker, topic: str) -> list[str]:
    """Files of ``topic`` that some broker process still holds open after their deletion."""
    held = []
    for pid in process_tree(broker.pid):
        try:
            names = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for name in names:
            try:
                target = os.readlink(f"/proc/{pid}/fd/{name}")
            except OSError:
                continue
            if topic in target and target.endswith("(deleted)"):
                held.append(f"{pid}: {target}")
    return held


def test_a_deleted_topic_leaves_no_open_files_behind(broker):
    """Workers cache fetched segments' fds; a deleted topic's files must not stay open
    (their blocks stay allocated while any fd holds them: the disk filled up so)."""
    from confluent_kafka.admin import NewTopic

    admin = _confluent_admin(broker)
    topic = "admin-delete-frees-space"
    _result(admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)]), topic)
    records = make_records(40, 2, tag="v")
    confluent_produce(broker.bootstrap, topic, records)
    assert len(confluent_consume(broker.bootstrap, topic, range(2), 40)) == 40  # the fetches cache the files
    _result(admin.delete_topics([topic], operation_timeout=10), topic)
    wait_until(lambda: not _deleted_files_held(broker, topic), 15, "the deleted topic's files to be closed")
    assert not [n for n in os.listdir(broker.log_dir) if n.startswith(topic)]


def test_out_of_range_topic_configs_are_refused_and_the_broker_still_restarts(broker_factory):
    """segment.bytes=0 once registered a topic whose log could not be mapped: the owner
    failed and every later start of the broker stopped at boot. Now CreateTopics and
    AlterConfigs answer INVALID_CONFIG and nothing is registered or changed."""
    broker = broker_factory()
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

    admin = _confluent_admin(broker)
    for name, config in [("bad-segment", {"segment.bytes": "0"}), ("bad-ratio", {"min.cleanable.dirty.ratio": "2"}),
                         ("bad-flush", {"flush.messages": "0"})]:
        with pytest.raises(KafkaException) as caught:
            _result(admin.create_topics([NewTopic(name, num_partitions=2, replication_factor=1, config=config)]), name)
        assert caught.value.args[0].code() == KafkaError.INVALID_CONFIG, caught.value
    _result(admin.create_topics([NewTopic("good", num_partitions=2, replication_factor=1)]), "good")
    resource = ConfigResource(ConfigResource.Type.TOPIC, "good", incremental_configs=[
        ConfigEntry("segment.bytes", "-1", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(KafkaException) as caught:
        admin.incremental_alter_configs([resource])[resource].result(timeout=20)
    assert caught.value.args[0].code() == KafkaError.INVALID_CONFIG

    broker.restart()
    topics = _confluent_admin(broker).list_topics(timeout=10).topics
    assert "good" in topics and not {"bad-segment", "bad-ratio", "bad-flush"} & set(topics)
    delivered = confluent_produce(broker.bootstrap, "good", make_records(10, 2, tag="after"))
    assert len(delivered) == 10
