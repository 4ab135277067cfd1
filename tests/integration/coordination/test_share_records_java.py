"""Castle's share group records (coordination/share/records.py) against Kafka's own serializers:
the group coordinator's GroupCoordinatorRecordSerde (share group records of __consumer_offsets)
and the share coordinator's ShareCoordinatorRecordSerde (__share_group_state), with their
generated record classes, from the broker jars of the Kafka peer.

The Java program (tests/java_coordinator/castle/ShareRecords.java) prints records it builds
field by field, which must be our bytes for the same fields, and reads records we wrote and
writes them back, which must give our bytes again.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coordination.share import records as sr
from coordination.share.records import (
    ShareGroupMemberMetadataKey,
    ShareGroupMemberMetadataValue,
    ShareGroupMetadataKey,
    ShareGroupTargetAssignmentMetadataKey,
    ShareGroupTargetAssignmentMetadataValue,
    ShareKey,
    ShareSnapshotKey,
    ShareSnapshotValue,
    ShareUpdateKey,
    ShareUpdateValue,
    ShareValue,
    encode_key,
    encode_value,
)
from tests.integration.coordination.kafka_serde_java import compile_program, run_program
from tests.unit.coordination.test_consumer_group_records import int32s, texts, uuids
from tests.unit.coordination.test_share_records import (
    EVERY_RECORD,
    TOPIC_A,
    TOPIC_B,
    decode_any,
    group_keys,
    key_class_of,
    state_keys,
    values,
)

pytestmark = [pytest.mark.integration, pytest.mark.kafka_serde, pytest.mark.timeout(600)]

PROGRAM = "ShareRecords"

# The program's GOLDEN records, by name: what we encode for the same fields.
GOLDEN: dict[str, tuple[ShareKey, ShareValue | None]] = {
    name: record for name, record in zip(
        ["member-metadata", "metadata", "target-metadata", "target-member", "current-assignment",
         "state-partition-metadata", "snapshot", "update"], EVERY_RECORD)
}
GOLDEN["member-metadata-no-rack"] = (ShareGroupMemberMetadataKey("g", "m"),
                                     ShareGroupMemberMetadataValue(None, "c", "/h", ()))
GOLDEN["target-metadata-default"] = (ShareGroupTargetAssignmentMetadataKey("g"), ShareGroupTargetAssignmentMetadataValue(4))
GOLDEN["snapshot-default"] = (ShareSnapshotKey("g", TOPIC_A, 0), ShareSnapshotValue(0, 0, 0, 0, 0, 0, ()))
GOLDEN["update-default"] = (ShareUpdateKey("g", TOPIC_A, 0), ShareUpdateValue(0, 0, -1, ()))
GOLDEN["metadata-tombstone"] = (ShareGroupMetadataKey("g"), None)
GOLDEN["snapshot-tombstone"] = (ShareSnapshotKey("g", TOPIC_B, 1), None)


def topic_of(key: ShareKey) -> str:
    """The program's name of the topic (and so the serde) of the key's record type."""
    return "state" if isinstance(key, (ShareSnapshotKey, ShareUpdateKey)) else "group"


@pytest.fixture(scope="module")
def classpath(tmp_path_factory: Any) -> str:
    return compile_program(PROGRAM, tmp_path_factory.mktemp("classes"))


def run_kafka_serde(classpath: str, records: list[tuple[str, bytes, bytes | None]]) -> list[list[str]]:
    stdin = "".join(f"{topic} {key.hex()} {'-' if value is None else value.hex()}\n" for topic, key, value in records)
    return run_program(classpath, PROGRAM, stdin)


def test_kafka_builds_the_bytes_we_write(classpath: str) -> None:
    lines = run_kafka_serde(classpath, [])
    golden = {words[1]: (words[2], bytes.fromhex(words[3]), None if words[4] == "-" else bytes.fromhex(words[4]))
              for words in lines if words[0] == "GOLDEN"}
    assert set(golden) == set(GOLDEN)
    for name, (key, value) in GOLDEN.items():
        kafka_topic, kafka_key, kafka_value = golden[name]
        assert topic_of(key) == kafka_topic, name
        assert encode_key(key) == kafka_key, name
        assert (None if value is None else encode_value(value)) == kafka_value, name
        assert decode_any(kafka_key, kafka_value) == (key, value), name


def test_kafka_refuses_a_value_version_we_refuse(classpath: str) -> None:
    key, value = EVERY_RECORD[1]
    newer = b"\x00\x01" + encode_value(value)[2:]
    [answer] = [words for words in run_kafka_serde(classpath, [("group", encode_key(key), newer)])
                if words[0] != "GOLDEN"]
    assert answer[0] == "ERROR"
    with pytest.raises(sr.ShareRecordError, match="unknown version"):
        decode_any(encode_key(key), newer)


def _record(key: ShareKey, value: ShareValue | None) -> tuple[str, bytes, bytes | None]:
    return topic_of(key), encode_key(key), None if value is None else encode_value(value)


def _key_for(value: ShareValue, group: str, member: str, topic_id: uuid.UUID, partition: int) -> ShareKey:
    key_class = key_class_of(value)
    if key_class in (ShareSnapshotKey, ShareUpdateKey):
        key: ShareKey = key_class(group, topic_id, partition)
    elif key_class in (ShareGroupMemberMetadataKey, sr.ShareGroupTargetAssignmentMemberKey,
                       sr.ShareGroupCurrentMemberAssignmentKey):
        key = key_class(group, member)
    else:
        key = key_class(group)
    return key


records = st.one_of(
    st.builds(lambda v, g, m, t, p: (_key_for(v, g, m, t, p), v), values, texts, texts, uuids, int32s),
    st.builds(lambda k: (k, None), group_keys | state_keys),  # tombstones
)


# A JVM per example: few examples, of many records each.
@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.lists(records, min_size=30, max_size=60))
def test_kafka_reads_what_we_write_and_writes_it_back_the_same(classpath: str, pairs: list[tuple[Any, Any]]) -> None:
    ours = [_record(key, value) for key, value in pairs + EVERY_RECORD]
    answers = [words for words in run_kafka_serde(classpath, ours) if words[0] != "GOLDEN"]
    assert len(answers) == len(ours)
    for (key, value), (_topic, key_bytes, value_bytes), words in zip(pairs + EVERY_RECORD, ours, answers):
        assert words[0] == "READ", (key, value, words)
        assert bytes.fromhex(words[1]) == key_bytes, key
        assert (None if words[2] == "-" else bytes.fromhex(words[2])) == value_bytes, value
