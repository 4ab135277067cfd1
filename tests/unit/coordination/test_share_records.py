"""Share groups' records (KIP-932): golden bytes built field by field from Kafka's JSON schemas
(group-coordinator and share-coordinator src/main/resources/common/message/Share*.json), round
trips of every record, tombstones, tagged-field defaults, garbage, and the load of a
__consumer_offsets log that holds share group records (skipped, quietly)."""

from __future__ import annotations

import logging
import struct
import uuid
from typing import Any, Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coordination.groups import offsets_schema as schema
from coordination.groups.consumer import records as cr
from coordination.groups.replay import OffsetsRecord, load_entries
from coordination.share import records as sr
from coordination.share.records import (
    ShareGroupCurrentMemberAssignmentKey,
    ShareGroupCurrentMemberAssignmentValue,
    ShareGroupMemberMetadataKey,
    ShareGroupMemberMetadataValue,
    ShareGroupMetadataKey,
    ShareGroupMetadataValue,
    ShareGroupStatePartitionMetadataKey,
    ShareGroupStatePartitionMetadataValue,
    ShareGroupTargetAssignmentMemberKey,
    ShareGroupTargetAssignmentMemberValue,
    ShareGroupTargetAssignmentMetadataKey,
    ShareGroupTargetAssignmentMetadataValue,
    ShareKey,
    ShareRecordError,
    ShareSnapshotKey,
    ShareSnapshotValue,
    ShareUpdateKey,
    ShareUpdateValue,
    ShareValue,
    StateBatch,
    TopicInfo,
    TopicPartitions,
    TopicPartitionsInfo,
    decode_key,
    decode_record,
    decode_state_key,
    decode_state_record,
    encode_key,
    encode_value,
)
from tests.unit.coordination.test_consumer_group_records import (
    carray,
    cstring,
    i8,
    int8s,
    int32s,
    int64s,
    tags,
    texts,
    tuples,
    uuids,
    uvarint,
)
from tests.unit.coordination.test_offsets_schema import i16, i32, i64, string

TOPIC_A = uuid.UUID("00112233-4455-6677-8899-aabbccddeeff")
TOPIC_B = uuid.UUID("ffeeddcc-bbaa-9988-7766-554433221100")

# One record of each type, with every field set; the Java check builds the same in Kafka's classes.
EVERY_RECORD: list[tuple[ShareKey, ShareValue]] = [
    (ShareGroupMemberMetadataKey("g", "m"), ShareGroupMemberMetadataValue("rack", "client", "/10.0.0.1", ("a", "b"))),
    (ShareGroupMetadataKey("g"), ShareGroupMetadataValue(3, -5)),
    (ShareGroupTargetAssignmentMetadataKey("g"), ShareGroupTargetAssignmentMetadataValue(4, 99)),
    (ShareGroupTargetAssignmentMemberKey("g", "m"), ShareGroupTargetAssignmentMemberValue(
        (TopicPartitions(TOPIC_A, (0, 1, 2)), TopicPartitions(TOPIC_B, ())))),
    (ShareGroupCurrentMemberAssignmentKey("g", "m"), ShareGroupCurrentMemberAssignmentValue(
        5, 4, 0, (TopicPartitions(TOPIC_A, (0, 7)),))),
    (ShareGroupStatePartitionMetadataKey("g"), ShareGroupStatePartitionMetadataValue(
        (TopicPartitionsInfo(TOPIC_A, "orders", (2,)),), (TopicPartitionsInfo(TOPIC_A, "orders", (0, 1)),),
        (TopicInfo(TOPIC_B, "gone"),))),
    (ShareSnapshotKey("g", TOPIC_A, 3), ShareSnapshotValue(
        2, 1, 7, 100, 1_000, 2_000, (StateBatch(100, 104, 2, 1), StateBatch(105, 105, 0, 3)), 4)),
    (ShareUpdateKey("g", TOPIC_B, 0), ShareUpdateValue(2, 7, -1, (StateBatch(110, 119, 4, 5),), 0)),
]
GROUP_RECORDS = EVERY_RECORD[:6]
STATE_RECORDS = EVERY_RECORD[6:]


def decode_any(key_bytes: bytes, value_bytes: bytes | None) -> Any:
    """The record read as its topic's reader reads it (the types tell the topics apart here)."""
    record_type = struct.unpack(">h", key_bytes[:2])[0] if len(key_bytes) >= 2 else None
    if record_type in sr.STATE_RECORD_TYPES:
        return decode_state_record(key_bytes, value_bytes)
    return decode_record(key_bytes, value_bytes)


# --- golden bytes, by hand ----------------------------------------------------------------


def test_snapshot_golden_bytes() -> None:
    key, value = STATE_RECORDS[0]
    assert isinstance(value, ShareSnapshotValue)
    key_bytes = bytes.fromhex(
        "0000"                              # record type 0: ShareSnapshotKey ("apiKey": 0)
        "0001 67"                           # GroupId "g": int16 length (keys are not flexible)
        "00112233445566778899aabbccddeeff"  # TopicId: the uuid's 16 bytes
        "00000003"                          # Partition int32
    )  # fmt: skip
    value_bytes = bytes.fromhex(
        "0000"                              # value version 0 (flexible)
        "00000002"                          # SnapshotEpoch
        "00000001"                          # StateEpoch
        "00000007"                          # LeaderEpoch
        "0000000000000064"                  # StartOffset 100
        "00000000000003e8"                  # CreateTimestamp 1000 (after the tagged field in the schema,
        "00000000000007d0"                  # WriteTimestamp 2000   but tagged fields go at the end)
        "03"                                # StateBatches: compact array of 2
        "0000000000000064 0000000000000068 02 0001 00"  # 100..104 acknowledged, 1 delivery, no tags
        "0000000000000069 0000000000000069 00 0003 00"  # 105..105 available, 3 deliveries, no tags
        "01 00 04 00000004"                 # tagged fields: 1; tag 0 DeliveryCompleteCount, 4 bytes, 4
    )  # fmt: skip
    assert encode_key(key) == key_bytes
    assert encode_value(value) == value_bytes
    assert decode_state_record(key_bytes, value_bytes) == (key, value)
    # -1, the schema's default, is not written: what Kafka before 4.2 wrote, and reads back as -1.
    unknown_count = ShareSnapshotValue(2, 1, 7, 100, 1_000, 2_000, value.state_batches)
    assert unknown_count.delivery_complete_count == sr.NO_DELIVERY_COMPLETE_COUNT
    assert encode_value(unknown_count) == value_bytes[:-7] + b"\x00"
    assert decode_state_record(key_bytes, value_bytes[:-7] + b"\x00") == (key, unknown_count)


def test_update_golden_bytes() -> None:
    key, value = STATE_RECORDS[1]
    assert encode_key(key) == bytes.fromhex("0001 0001 67") + TOPIC_B.bytes + i32(0)
    assert encode_value(value) == (
        i16(0) + i32(2) + i32(7) + i64(-1)
        + carray(i64(110) + i64(119) + i8(4) + i16(5) + tags())
        + tags((0, i32(0)))  # 0 is not the default (-1): written
    )
    assert decode_state_record(encode_key(key), encode_value(value)) == (key, value)


def test_member_metadata_golden_bytes() -> None:
    key, value = GROUP_RECORDS[0]
    key_bytes = bytes.fromhex(
        "000a"      # record type 10: ShareGroupMemberMetadataKey
        "0001 67"   # GroupId "g"
        "0001 6d"   # MemberId "m"
    )  # fmt: skip
    value_bytes = bytes.fromhex(
        "0000"                      # version 0
        "05 7261636b"               # RackId "rack": compact nullable string (length + 1)
        "07 636c69656e74"           # ClientId "client"
        "0a 2f31302e302e302e31"     # ClientHost "/10.0.0.1"
        "03 0261 0262"              # SubscribedTopicNames: compact array of 2 compact strings
        "00"                        # no tagged fields
    )  # fmt: skip
    assert encode_key(key) == key_bytes
    assert encode_value(value) == value_bytes
    assert decode_record(key_bytes, value_bytes) == (key, value)
    no_rack = ShareGroupMemberMetadataValue(None, "c", "/h", ())
    assert encode_value(no_rack) == i16(0) + cstring(None) + cstring("c") + cstring("/h") + carray() + tags()


def test_other_group_records_golden_bytes() -> None:
    a, b = TOPIC_A.bytes, TOPIC_B.bytes
    expected = [
        # ShareGroupMetadataValue: MetadataHash is an ordinary int64 here, not a tagged field.
        (i16(11) + string("g"), i16(0) + i32(3) + i64(-5) + tags()),
        (i16(12) + string("g"), i16(0) + i32(4) + tags((0, i64(99)))),
        (i16(13) + string("g") + string("m"),
         i16(0) + carray(a + carray(i32(0), i32(1), i32(2)) + tags(), b + carray() + tags()) + tags()),
        (i16(14) + string("g") + string("m"), i16(0) + i32(5) + i32(4) + i8(0) + carray(a + carray(i32(0), i32(7)) + tags())
         + tags()),
        (i16(15) + string("g"),
         i16(0) + carray(a + cstring("orders") + carray(i32(2)) + tags())
         + carray(a + cstring("orders") + carray(i32(0), i32(1)) + tags()) + carray(b + cstring("gone") + tags()) + tags()),
    ]
    for (key, value), (key_bytes, value_bytes) in zip(GROUP_RECORDS[1:], expected):
        assert (encode_key(key), encode_value(value)) == (key_bytes, value_bytes), type(value).__name__
        assert decode_record(key_bytes, value_bytes) == (key, value)
    # AssignmentTimestamp 0 is its default: not written, as Kafka before 4.3 wrote the record.
    assert encode_value(ShareGroupTargetAssignmentMetadataValue(4)) == i16(0) + i32(4) + tags()


@pytest.mark.parametrize("key,value", EVERY_RECORD, ids=lambda v: type(v).__name__)
def test_tombstones(key: ShareKey, value: ShareValue) -> None:
    assert decode_any(encode_key(key), None) == (key, None)


@pytest.mark.parametrize("key,value", GROUP_RECORDS, ids=lambda v: type(v).__name__)
def test_the_other_offsets_readers_do_not_take_share_group_keys(key: ShareKey, value: ShareValue) -> None:
    assert schema.decode_key(encode_key(key)) is None
    assert cr.decode_key(encode_key(key)) is None
    assert decode_state_key(encode_key(key)) is None


def test_each_topic_reads_only_its_record_types() -> None:
    # The two topics' record types overlap: 0 and 1 are share state here, offset commits there.
    offset_key = schema.encode_key(schema.OffsetKey("g", "t", 0))
    assert decode_key(offset_key) is None
    assert decode_key(cr.encode_key(cr.ConsumerGroupMetadataKey("g"))) is None
    assert decode_key(encode_key(STATE_RECORDS[0][0])) is None
    assert decode_record(offset_key, b"whatever") is None
    assert decode_state_key(i16(2) + string("g")) is None
    assert decode_state_record(i16(11) + string("g"), None) is None


def test_a_value_of_another_record_type_does_not_pass() -> None:
    with pytest.raises(ShareRecordError):
        sr.decode_value(ShareUpdateKey, encode_value(STATE_RECORDS[0][1]))
    with pytest.raises(TypeError):
        sr.decode_value(cr.ConsumerGroupMetadataKey, encode_value(GROUP_RECORDS[1][1]))


def test_encoding_refuses_what_is_not_a_share_record() -> None:
    with pytest.raises(TypeError):
        encode_key(cr.ConsumerGroupMetadataKey("g"))  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        encode_value(cr.ConsumerGroupMetadataValue(1))  # type: ignore[arg-type]


def test_unknown_tagged_fields_are_skipped_at_every_level() -> None:
    data = (i16(0) + i32(2) + i32(7) + i64(5)
            + carray(i64(5) + i64(6) + i8(0) + i16(1) + tags((3, b"x")))
            + tags((0, i32(9)), (7, b"later")))
    assert sr.decode_value(ShareUpdateKey, data) == ShareUpdateValue(2, 7, 5, (StateBatch(5, 6, 0, 1),), 9)


def test_a_known_tag_of_the_wrong_size_is_refused() -> None:
    with pytest.raises(ShareRecordError, match="left"):
        sr.decode_value(ShareGroupTargetAssignmentMetadataKey, i16(0) + i32(1) + tags((0, i64(1) + b"\x00")))
    with pytest.raises(ShareRecordError):
        sr.decode_value(ShareSnapshotKey, encode_value(STATE_RECORDS[0][1])[:-7] + tags((0, b"\x00\x01")))


def test_only_value_version_0_is_read() -> None:
    # Kafka's serde refuses a version outside the schema's (UnknownRecordVersionException).
    body = encode_value(GROUP_RECORDS[1][1])[2:]
    for version in (-1, 1, 0x7FFF):
        with pytest.raises(ShareRecordError, match="unknown version"):
            sr.decode_value(ShareGroupMetadataKey, i16(version) + body)


# --- garbage ----------------------------------------------------------------------------

VALID = [(encode_key(key), encode_value(value)) for key, value in EVERY_RECORD] + [
    (encode_key(GROUP_RECORDS[0][0]), encode_value(ShareGroupMemberMetadataValue(None, "", "", ()))),
    (encode_key(STATE_RECORDS[1][0]), encode_value(ShareUpdateValue(0, 0, 0, ()))),
]


@pytest.mark.parametrize("key_bytes,value_bytes", VALID)
def test_every_truncated_key_and_value_is_refused(key_bytes: bytes, value_bytes: bytes) -> None:
    assert decode_any(key_bytes, value_bytes) is not None
    for cut in range(2, len(key_bytes)):  # under 2 bytes there is no record type: the classic reader's case
        with pytest.raises(ShareRecordError):
            decode_any(key_bytes[:cut], value_bytes)
    for cut in range(len(value_bytes)):
        with pytest.raises(ShareRecordError):
            decode_any(key_bytes, value_bytes[:cut])


@pytest.mark.parametrize("key_bytes,value_bytes", VALID)
def test_trailing_bytes_are_refused(key_bytes: bytes, value_bytes: bytes) -> None:
    with pytest.raises(ShareRecordError, match="left after the last field"):
        decode_any(key_bytes + b"\x00", value_bytes)
    with pytest.raises(ShareRecordError, match="left after the last field"):
        decode_any(key_bytes, value_bytes + b"\x00")


@pytest.mark.parametrize(
    "key,data",
    [
        (ShareGroupMetadataKey, b""),
        (ShareGroupMetadataKey, b"\x00"),
        (ShareGroupMemberMetadataKey, i16(0) + cstring(None) + cstring(None) + cstring("h") + carray() + tags()),  # null clientId
        (ShareGroupMemberMetadataKey, i16(0) + cstring(None) + cstring("c") + cstring("h") + b"\x00" + tags()),  # null names
        (ShareGroupStatePartitionMetadataKey, i16(0) + carray() + carray() + carray(TOPIC_A.bytes + cstring(None) + tags())
         + tags()),  # null topic name
        (ShareGroupStatePartitionMetadataKey, i16(0) + carray(TOPIC_A.bytes + uvarint(3) + b"\xff\xfe" + carray()
                                                              + tags()) + carray() + carray() + tags()),  # not UTF-8
        (ShareGroupTargetAssignmentMemberKey, i16(0) + carray(TOPIC_A.bytes[:10])),  # a uuid cut short
        (ShareSnapshotKey, i16(0) + i32(0) * 3 + i64(0) * 3 + bytes.fromhex("ffffffff0f") + tags()),  # a count with no elements
        (ShareUpdateKey, i16(0) + i32(0) * 2 + i64(0) + b"\xff\xff\xff\xff\xff\x01"),  # a varint too long
        (ShareUpdateKey, i16(0) + i32(0) * 2 + i64(0) + carray() + tags((1, b"abc"))[:-1]),  # tag data cut short
    ],
)
def test_garbage_values_are_refused(key: type, data: bytes) -> None:
    with pytest.raises(ShareRecordError):
        sr.decode_value(key, data)


def test_garbage_keys_are_refused() -> None:
    for data in (b"", b"\x00", i16(11) + i16(-1), i16(10) + string("g"), i16(15) + string("g") + i16(4) + b"ab"):
        with pytest.raises(ShareRecordError):
            decode_key(data)
    for data in (b"\x00", i16(0) + string("g") + TOPIC_A.bytes, i16(1) + i16(-1) + TOPIC_A.bytes + i32(0)):
        with pytest.raises(ShareRecordError):
            decode_state_key(data)


@settings(max_examples=200)
@given(st.sampled_from(list(sr.VALUE_OF_KEY)), st.binary(max_size=60))
def test_random_bytes_raise_nothing_but_share_record_errors(key_class: type, data: bytes) -> None:
    try:
        sr.decode_value(key_class, i16(0) + data)
    except ShareRecordError:
        pass


@pytest.mark.parametrize(
    "call",
    [
        lambda: encode_key(ShareGroupMetadataKey("x" * 0x8000)),
        lambda: encode_key(ShareGroupMemberMetadataKey("g", "\ud800")),
        lambda: encode_key(ShareSnapshotKey("g", TOPIC_A, 2**31)),
        lambda: encode_value(ShareGroupMetadataValue(2**31, 0)),
        lambda: encode_value(ShareGroupMetadataValue(1, 2**63)),
        lambda: encode_value(ShareGroupCurrentMemberAssignmentValue(1, 1, 128, ())),
        lambda: encode_value(ShareGroupTargetAssignmentMemberValue((TopicPartitions(TOPIC_A, (2**31,)),))),
        lambda: encode_value(ShareGroupStatePartitionMetadataValue((), (), (TopicInfo(TOPIC_A, "é" * 0x4000),))),
        lambda: encode_value(ShareUpdateValue(0, 0, 0, (StateBatch(0, 0, 0, 2**15),))),
        lambda: encode_value(ShareSnapshotValue(0, 0, 0, 0, 0, 0, (), 2**31)),
    ],
)
def test_values_out_of_schema_are_refused(call: Callable[[], bytes]) -> None:
    with pytest.raises(ShareRecordError):
        call()


# --- round trips -------------------------------------------------------------------------

int16s = st.integers(-(2**15), 2**15 - 1)
group_keys = st.one_of(
    st.builds(ShareGroupMemberMetadataKey, texts, texts), st.builds(ShareGroupMetadataKey, texts),
    st.builds(ShareGroupTargetAssignmentMetadataKey, texts), st.builds(ShareGroupTargetAssignmentMemberKey, texts, texts),
    st.builds(ShareGroupCurrentMemberAssignmentKey, texts, texts), st.builds(ShareGroupStatePartitionMetadataKey, texts),
)
state_keys = st.one_of(st.builds(ShareSnapshotKey, texts, uuids, int32s), st.builds(ShareUpdateKey, texts, uuids, int32s))
topic_partitions = st.builds(TopicPartitions, uuids, tuples(int32s))
partitions_info = st.builds(TopicPartitionsInfo, uuids, texts, tuples(int32s))
batches = tuples(st.builds(StateBatch, int64s, int64s, int8s, int16s))
group_values = st.one_of(
    st.builds(ShareGroupMemberMetadataValue, st.none() | texts, texts, texts, tuples(texts)),
    st.builds(ShareGroupMetadataValue, int32s, int64s),
    st.builds(ShareGroupTargetAssignmentMetadataValue, int32s, int64s),
    st.builds(ShareGroupTargetAssignmentMemberValue, tuples(topic_partitions)),
    st.builds(ShareGroupCurrentMemberAssignmentValue, int32s, int32s, int8s, tuples(topic_partitions)),
    st.builds(ShareGroupStatePartitionMetadataValue, tuples(partitions_info), tuples(partitions_info),
              tuples(st.builds(TopicInfo, uuids, texts))),
)
state_values = st.one_of(
    st.builds(ShareSnapshotValue, int32s, int32s, int32s, int64s, int64s, int64s, batches, int32s),
    st.builds(ShareUpdateValue, int32s, int32s, int64s, batches, int32s),
)
values = group_values | state_values


def key_class_of(value: ShareValue) -> type:
    return next(k for k, v in sr.VALUE_OF_KEY.items() if v is type(value))


@given(group_keys)
def test_group_key_round_trip(key: ShareKey) -> None:
    assert decode_key(encode_key(key)) == key


@given(state_keys)
def test_state_key_round_trip(key: ShareKey) -> None:
    assert decode_state_key(encode_key(key)) == key


@settings(max_examples=300)
@given(values)
def test_value_round_trip(value: ShareValue) -> None:
    data = encode_value(value)
    assert sr.decode_value(key_class_of(value), data) == value
    assert encode_value(sr.decode_value(key_class_of(value), data)) == data


# --- the load of __consumer_offsets -------------------------------------------------------


def test_a_load_reads_share_group_records_among_the_others(caplog: Any) -> None:
    # Kafka 4.4's coordinator writes share groups into the same partitions as the other
    # groups; the load reads them, in log order, with the offset commits and consumer groups.
    offset_commit: tuple[bytes, bytes | None] = (schema.encode_key(schema.OffsetKey("g", "t", 0)),
                     schema.encode_offset_value(schema.OffsetValue(42, 3, "m", 1_000)))
    consumer: tuple[bytes, bytes | None] = (cr.encode_key(cr.ConsumerGroupMetadataKey("c")), cr.encode_value(cr.ConsumerGroupMetadataValue(2)))
    share: list[tuple[bytes, bytes | None]] = [(encode_key(key), encode_value(value)) for key, value in GROUP_RECORDS]
    share.append((encode_key(GROUP_RECORDS[1][0]), None))  # a share group tombstone
    data = b""
    next_offset = 0
    for batch in ([offset_commit] + share, share, share + [consumer]):
        # A batch's base offset (its first 8 bytes, outside the CRC) as the log would assign it.
        data += struct.pack(">q", next_offset) + schema.offsets_batch(batch, 0)[8:]
        next_offset += len(batch)

    with caplog.at_level(logging.DEBUG, logger="coordination.groups.replay"):
        entries, loaded_to = load_entries(data, 0)
    assert not caplog.records, "share group records load without a word"
    assert loaded_to == next_offset == 3 * len(share) + 2
    records = [entry for entry in entries if isinstance(entry, OffsetsRecord)]
    shared = [(key, value) for key, value in GROUP_RECORDS] + [(GROUP_RECORDS[1][0], None)]
    assert [(r.key, r.value) for r in records] == (
        [(schema.OffsetKey("g", "t", 0), schema.OffsetValue(42, 3, "m", 1_000))] + shared * 3
        + [(cr.ConsumerGroupMetadataKey("c"), cr.ConsumerGroupMetadataValue(2))])
    assert [r.offset for r in records] == list(range(next_offset))
    assert [(key, value) for _offset, key, value in schema.read_entries(data)] == [
        (schema.OffsetKey("g", "t", 0), schema.OffsetValue(42, 3, "m", 1_000))]
