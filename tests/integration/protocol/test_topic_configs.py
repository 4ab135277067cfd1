"""Every Kafka 4.0 topic config through real admin clients, and the ones that change what
is stored, through real producers and consumers: compression.type recompresses what
idempotent producers send, message.timestamp.after.max.ms refuses a clock from the future."""

from __future__ import annotations

import time
import uuid

import pytest

from storage.config import TOPIC_KEYS
from storage.records import iter_batches
from tests.integration.conftest import shared_broker, wait_until
from tests.integration.kio_client import KioClient

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


@pytest.fixture(scope="module")
def broker(request, tmp_path_factory):
    """One broker for the module: each test keeps to topics of its own."""
    yield from shared_broker(request, tmp_path_factory)

# A value other than the default for every key, as an operator would set it.
SET_ALL = {
    "cleanup.policy": "compact,delete", "compression.type": "lz4", "compression.gzip.level": "5",
    "compression.lz4.level": "10", "compression.zstd.level": "7", "delete.retention.ms": "3600000",
    "file.delete.delay.ms": "1000", "flush.messages": "100000", "flush.ms": "60000",
    "follower.replication.throttled.replicas": "*", "index.interval.bytes": "8192",
    "leader.replication.throttled.replicas": "0:0", "local.retention.bytes": "-2", "local.retention.ms": "-2",
    "max.compaction.lag.ms": "86400000", "max.message.bytes": "2000000",
    "message.timestamp.after.max.ms": "7200000", "message.timestamp.before.max.ms": "86400000000",
    "message.timestamp.type": "CreateTime", "min.cleanable.dirty.ratio": "0.3", "min.compaction.lag.ms": "1000",
    "min.insync.replicas": "1", "preallocate": "true", "remote.log.copy.disable": "false",
    "remote.log.delete.on.disable": "false", "remote.storage.enable": "false", "retention.bytes": "100000000",
    "retention.ms": "3600000", "segment.bytes": "16777216", "segment.index.bytes": "1048576",
    "segment.jitter.ms": "1000", "segment.ms": "3600000", "unclean.leader.election.enable": "false",
}


def _admin(broker):
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": broker.bootstrap})


def test_every_kafka_topic_config_is_accepted_described_and_altered(broker) -> None:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic, ResourceType

    assert set(SET_ALL) == set(TOPIC_KEYS) - {"preallocate.window.bytes"}
    admin = _admin(broker)
    admin.create_topics([NewTopic("all-configs", 1, 1, config=SET_ALL)])["all-configs"].result(20)
    resource = ConfigResource(ResourceType.TOPIC, "all-configs")
    described = admin.describe_configs([resource])[resource].result(20)
    for key, value in SET_ALL.items():
        entry = described[key]
        assert entry.value == value, key
        assert entry.source == 1, key  # DYNAMIC_TOPIC_CONFIG
    # A key left alone shows its default, named after its broker synonym (Kafka's way).
    admin.create_topics([NewTopic("defaults", 1, 1)])["defaults"].result(20)
    plain = ConfigResource(ResourceType.TOPIC, "defaults")
    defaults = admin.describe_configs([plain], request_timeout=20)[plain].result(20)
    assert defaults["compression.type"].value == "producer" and defaults["compression.type"].source == 5
    assert defaults["message.timestamp.after.max.ms"].value == "3600000"
    assert list(defaults["segment.jitter.ms"].synonyms) == ["log.roll.jitter.ms"]
    assert list(defaults["remote.storage.enable"].synonyms) == ["remote.storage.enable"]

    change = ConfigResource(ResourceType.TOPIC, "defaults", incremental_configs=[
        ConfigEntry("compression.type", "zstd", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([change])[change].result(20)
    assert admin.describe_configs([plain])[plain].result(20)["compression.type"].value == "zstd"

    # What Castle cannot honour is refused by name, with the reason.
    for config, why in ((({"remote.storage.enable": "true"}), "tiered storage"),
                        ({"message.format.version": "2.8"}, "Unknown topic config name: message.format.version"),
                        ({"compression.type": "brotli"}, "compression.type")):
        name = f"refused-{uuid.uuid4().hex[:6]}"
        with pytest.raises(KafkaException) as refused:
            admin.create_topics([NewTopic(name, 1, 1, config=config)])[name].result(20)
        assert refused.value.args[0].name() == "INVALID_CONFIG" and why in refused.value.args[0].str()


def _stored_codecs(broker, topic: str) -> list[int]:
    """The codec of every batch as the broker stores it (a raw Fetch hands out the bytes)."""
    from tests.integration.protocol.test_protocol_raw import _fetch

    codecs: list[int] = []
    offset = 0
    with KioClient(broker.bootstrap) as client:
        while True:
            (partition,) = _fetch(client, 12, topic, uuid.UUID(int=0), offset).responses[0].partitions
            assert partition.error_code == 0
            if offset >= partition.high_watermark:
                return codecs
            for header, _records in iter_batches(partition.records):
                codecs.append(header.compression)
                offset = header.next_offset


PAIRS = [("gzip", "lz4"), ("snappy", "zstd"), ("zstd", "uncompressed"), ("none", "gzip"), ("lz4", "producer")]


def test_idempotent_producers_are_recompressed_to_the_topics_codec(broker) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import NewTopic

    admin = _admin(broker)  # held: a collected client fails its futures
    codes = {"none": 0, "uncompressed": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
    for sent, stored in PAIRS:
        topic = f"recompress-{sent}-{stored}"
        admin.create_topics([NewTopic(topic, 1, 1, config={"compression.type": stored})])[topic].result(20)
        producer = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True,
                             "compression.type": sent, "linger.ms": 5})
        values = [f"{sent}->{stored} {i} ".encode() * 8 for i in range(300)]
        for value in values:
            producer.produce(topic, value=value, partition=0)
        assert producer.flush(30) == 0
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": topic})
        consumer.assign([TopicPartition(topic, 0, 0)])
        got: list[tuple[int, bytes]] = []
        try:
            def drained() -> bool:
                for message in consumer.consume(500, 0.5):
                    if message.error() is None:
                        got.append((message.offset(), message.value()))
                return len(got) >= len(values)
            wait_until(drained, 60, f"every record of {topic} back")
        finally:
            consumer.close()
        assert [v for _o, v in got] == values and [o for o, _v in got] == list(range(len(values)))
        expected = codes[sent] if stored == "producer" else codes[stored]
        assert set(_stored_codecs(broker, topic)) == {expected}, topic


def test_a_producer_clock_from_the_future_gets_invalid_timestamp(broker) -> None:
    from confluent_kafka import KafkaError, Producer
    from confluent_kafka.admin import NewTopic

    admin = _admin(broker)
    admin.create_topics([NewTopic("clocks", 1, 1)])["clocks"].result(20)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "retries": 0})
    errors: list[KafkaError] = []
    now_ms = int(time.time() * 1000)
    producer.produce("clocks", value=b"now", partition=0, timestamp=now_ms)
    producer.produce("clocks", value=b"two hours ahead", partition=0, timestamp=now_ms + 2 * 3_600_000,
                     on_delivery=lambda err, _msg: errors.append(err))
    producer.flush(30)
    assert errors and errors[0] is not None and errors[0].code() == KafkaError.INVALID_TIMESTAMP
