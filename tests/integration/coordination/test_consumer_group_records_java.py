"""Castle's consumer group records (coordination/groups/consumer/records.py) against Kafka's own
serializer: the group coordinator's GroupCoordinatorRecordSerde and generated record classes, from
the broker jars of the Kafka peer (loadtest/kafka_peer.py, ~/.cache/castle-kafka-broker/<version>).

The Java program (tests/java_coordinator/castle/ConsumerGroupRecords.java) prints records it
builds field by field, which must be our bytes for the same fields, and reads records we wrote
and writes them back, which must give our bytes again.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coordination.groups.consumer import records as cr
from coordination.groups.consumer.records import (
    ClassicMemberMetadata,
    ClassicProtocol,
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupKey,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupValue,
    CurrentTopicPartitions,
    decode_record,
    encode_key,
    encode_value,
)
from tests.integration.coordination.kafka_serde_java import compile_program, run_program
from tests.unit.coordination.test_consumer_group_records import EVERY_KEY, EVERY_VALUE, TOPIC_A, texts, values

pytestmark = [pytest.mark.integration, pytest.mark.kafka_serde, pytest.mark.timeout(600)]

PROGRAM = "ConsumerGroupRecords"

# The program's GOLDEN records, by name: what we encode for the same fields.
GOLDEN: dict[str, tuple[ConsumerGroupKey, ConsumerGroupValue | None]] = {
    name: (key, value) for name, key, value in zip(
        ["metadata", "partition-metadata", "member-metadata", "target-metadata", "target-member",
         "current-assignment", "regular-expression"], EVERY_KEY, EVERY_VALUE)
}
GOLDEN["member-metadata-consumer"] = (ConsumerGroupMemberMetadataKey("g", "m"), ConsumerGroupMemberMetadataValue(
    None, None, "c", "/h", ("t",), None, 300_000, "uniform", None))
GOLDEN["current-assignment-empty-epochs"] = (ConsumerGroupCurrentMemberAssignmentKey("g", "m"),
                                             ConsumerGroupCurrentMemberAssignmentValue(
                                                 1, 0, 0, (CurrentTopicPartitions(TOPIC_A, (3,), ()),), ()))
GOLDEN["current-assignment-null-epochs"] = (ConsumerGroupCurrentMemberAssignmentKey("g", "m"),
                                            ConsumerGroupCurrentMemberAssignmentValue(
                                                1, 0, 0, (CurrentTopicPartitions(TOPIC_A, (3,), None),), ()))
GOLDEN["metadata-tombstone"] = (ConsumerGroupMetadataKey("g"), None)


@pytest.fixture(scope="module")
def classpath(tmp_path_factory: Any) -> str:
    return compile_program(PROGRAM, tmp_path_factory.mktemp("classes"))


def run_kafka_serde(classpath: str, records: list[tuple[bytes, bytes | None]]) -> list[list[str]]:
    stdin = "".join(f"{key.hex()} {'-' if value is None else value.hex()}\n" for key, value in records)
    return run_program(classpath, PROGRAM, stdin)


def test_kafka_builds_the_bytes_we_write(classpath: str) -> None:
    lines = run_kafka_serde(classpath, [])
    golden = {words[1]: (bytes.fromhex(words[2]), None if words[3] == "-" else bytes.fromhex(words[3]))
              for words in lines if words[0] == "GOLDEN"}
    assert set(golden) == set(GOLDEN)
    for name, (key, value) in GOLDEN.items():
        kafka_key, kafka_value = golden[name]
        assert encode_key(key) == kafka_key, name
        assert (None if value is None else encode_value(value)) == kafka_value, name
        assert decode_record(kafka_key, kafka_value) == (key, value), name


def _key_for(value: ConsumerGroupValue, group: str, second: str) -> ConsumerGroupKey:
    key_class = next(k for k, v in cr.VALUE_OF_KEY.items() if v is type(value))
    key: ConsumerGroupKey = key_class(group) if len(dataclasses.fields(key_class)) == 1 else key_class(group, second)
    return key


# A JVM per example: few examples, of many records each.
@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.lists(st.builds(lambda v, g, s: (_key_for(v, g, s), v), values, texts, texts) | st.builds(
    lambda v, g: (_key_for(v, g, "m"), None), values, texts), min_size=30, max_size=60))
def test_kafka_reads_what_we_write_and_writes_it_back_the_same(classpath: str, pairs: list[tuple[Any, Any]]) -> None:
    pairs.append((ConsumerGroupMemberMetadataKey("g", "m"), ConsumerGroupMemberMetadataValue(
        None, None, "c", "h", (), None, 1, None, ClassicMemberMetadata(5, (ClassicProtocol("range", b"\x00"),)))))
    ours = [(encode_key(key), None if value is None else encode_value(value)) for key, value in pairs]
    answers = [words for words in run_kafka_serde(classpath, ours) if words[0] != "GOLDEN"]
    assert len(answers) == len(ours)
    for (key, value), (key_bytes, value_bytes), words in zip(pairs, ours, answers):
        assert words[0] == "READ", (key, value, words)
        assert bytes.fromhex(words[1]) == key_bytes, key
        assert (None if words[2] == "-" else bytes.fromhex(words[2])) == value_bytes, value
