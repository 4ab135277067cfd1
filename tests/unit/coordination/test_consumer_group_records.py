"""The consumer group protocol's (KIP-848) __consumer_offsets records: golden bytes built
field by field from Kafka's JSON schemas (group-coordinator/src/main/resources/common/
message/ConsumerGroup*.json), round trips of every record, tombstones, tagged fields,
garbage, and a load of a log that holds them next to the classic records."""

from __future__ import annotations

import asyncio
import logging
import os
import struct
import uuid
from typing import Any, Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coordination.groups import offsets_schema as schema
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
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupPartitionMetadataValue,
    ConsumerGroupRegularExpressionKey,
    ConsumerGroupRegularExpressionValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
    ConsumerGroupValue,
    CurrentTopicPartitions,
    PartitionRacks,
    TargetTopicPartitions,
    TopicMetadata,
    decode_key,
    decode_record,
    encode_key,
    encode_value,
)
from coordination.groups.offsets_schema import OffsetsSchemaError
from coordination.groups.replay import OffsetsRecord, load_entries
from coordination.groups.requests import JoiningMember, MemberRef
from storage.records import iter_batches
from tests.unit.coordination.test_coordinator_offsets import FileOffsetsLog, coordinator, known
from tests.unit.coordination.test_offsets_schema import i16, i32, i64, string

# --- the primitive types, spelled out independently of the module under test -------------


def i8(n: int) -> bytes:
    return struct.pack(">b", n)


def uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def cstring(text: str | None) -> bytes:
    """COMPACT_(NULLABLE_)STRING: uvarint length + 1 (0 null), UTF-8."""
    if text is None:
        return uvarint(0)
    raw = text.encode()
    return uvarint(len(raw) + 1) + raw


def carray(*elements: bytes) -> bytes:
    return uvarint(len(elements) + 1) + b"".join(elements)


def tags(*fields: tuple[int, bytes]) -> bytes:
    return uvarint(len(fields)) + b"".join(uvarint(tag) + uvarint(len(data)) + data for tag, data in fields)


TOPIC_A = uuid.UUID("00112233-4455-6677-8899-aabbccddeeff")
TOPIC_B = uuid.UUID("ffeeddcc-bbaa-9988-7766-554433221100")


# --- golden bytes, by hand ----------------------------------------------------------------


def test_group_metadata_golden_bytes() -> None:
    key = ConsumerGroupMetadataKey("grp")
    value = ConsumerGroupMetadataValue(epoch=5, metadata_hash=0x0102030405060708)
    key_bytes = bytes.fromhex(
        "0003"      # record type 3: ConsumerGroupMetadataKey ("apiKey": 3)
        "0003"      # groupId: int16 length 3 (keys are not flexible)
        "677270"    # "grp"
    )  # fmt: skip
    value_bytes = bytes.fromhex(
        "0000"              # value version 0 (flexible: "flexibleVersions": "0+")
        "00000005"          # Epoch int32 5
        "01"                # tagged fields: uvarint count 1
        "00"                #   tag 0: MetadataHash
        "08"                #   size 8
        "0102030405060708"  #   int64
    )  # fmt: skip
    assert encode_key(key) == key_bytes
    assert encode_value(value) == value_bytes
    assert decode_record(key_bytes, value_bytes) == (key, value)
    # MetadataHash 0 is its default: not written, so a Kafka before 4.1 writes the same value.
    assert encode_value(ConsumerGroupMetadataValue(5)) == bytes.fromhex("0000 00000005 00")


def test_current_member_assignment_golden_bytes() -> None:
    key = ConsumerGroupCurrentMemberAssignmentKey("g", "m1")
    value = ConsumerGroupCurrentMemberAssignmentValue(
        member_epoch=7, previous_member_epoch=6, state=0,
        assigned_partitions=(CurrentTopicPartitions(TOPIC_A, (0, 2), (3, 3)),), partitions_pending_revocation=())
    key_bytes = bytes.fromhex(
        "0008"      # record type 8: ConsumerGroupCurrentMemberAssignmentKey
        "0001 67"   # groupId "g"
        "0002 6d31" # memberId "m1"
    )  # fmt: skip
    value_bytes = bytes.fromhex(
        "0000"                              # version 0
        "00000007"                          # MemberEpoch
        "00000006"                          # PreviousMemberEpoch
        "00"                                # State int8 0 (stable)
        "02"                                # AssignedPartitions: compact array, 1 element (+1)
        "00112233445566778899aabbccddeeff"  #   TopicId: the uuid's 16 bytes
        "03"                                #   Partitions: compact array of 2 int32s
        "00000000 00000002"                 #     0, 2
        "01"                                #   tagged fields: 1 field
        "00 09"                             #     tag 0 (AssignmentEpochs), 9 bytes:
        "03 00000003 00000003"              #     a compact array of 2 int32s: 3, 3
        "01"                                # PartitionsPendingRevocation: empty compact array
        "00"                                # the value's tagged fields: none
    )  # fmt: skip
    assert encode_key(key) == key_bytes
    assert encode_value(value) == value_bytes
    assert decode_record(key_bytes, value_bytes) == (key, value)


def test_member_metadata_golden_bytes() -> None:
    value = ConsumerGroupMemberMetadataValue(
        instance_id=None, rack_id="r", client_id="c", client_host="/h", subscribed_topic_names=("t",),
        subscribed_topic_regex=None, rebalance_timeout_ms=300_000, server_assignor="uniform")
    expected = (i16(0)                 # version
                + cstring(None)        # InstanceId null: uvarint 0
                + cstring("r")         # RackId: uvarint 2, "r"
                + cstring("c") + cstring("/h")
                + carray(cstring("t"))  # SubscribedTopicNames
                + cstring(None)        # SubscribedTopicRegex
                + i32(300_000)         # RebalanceTimeoutMs
                + cstring("uniform")   # ServerAssignor
                + tags((0, b"\x00")))  # ClassicMemberMetadata null, as Kafka writes it: a 0 marker
    assert encode_value(value) == expected
    classic = ClassicMemberMetadata(45_000, (ClassicProtocol("range", b"\x01\x02"),))
    with_classic = (expected[:-4]
                    + tags((0, uvarint(1)  # present marker
                            + i32(45_000) + carray(cstring("range") + uvarint(3) + b"\x01\x02" + tags()) + tags())))
    assert encode_value(ConsumerGroupMemberMetadataValue(**{**_fields(value), "classic_member_metadata": classic})) == with_classic
    key = encode_key(ConsumerGroupMemberMetadataKey("g", "m"))
    assert decode_record(key, with_classic) == (ConsumerGroupMemberMetadataKey("g", "m"),
                                                ConsumerGroupMemberMetadataValue(**{**_fields(value), "classic_member_metadata": classic}))


def _fields(value: Any) -> dict[str, Any]:
    return {name: getattr(value, name) for name in value.__dataclass_fields__}


def test_other_keys_golden_bytes() -> None:
    assert encode_key(ConsumerGroupPartitionMetadataKey("g")) == i16(4) + string("g")
    assert encode_key(ConsumerGroupMemberMetadataKey("g", "m")) == i16(5) + string("g") + string("m")
    assert encode_key(ConsumerGroupTargetAssignmentMetadataKey("g")) == i16(6) + string("g")
    assert encode_key(ConsumerGroupTargetAssignmentMemberKey("g", "m")) == i16(7) + string("g") + string("m")
    assert encode_key(ConsumerGroupRegularExpressionKey("g", "t.*")) == i16(16) + string("g") + string("t.*")


def test_other_values_golden_bytes() -> None:
    assert encode_value(ConsumerGroupPartitionMetadataValue((TopicMetadata(TOPIC_A, "t", 3, (PartitionRacks(0, ("r1",)),)),))) == (
        i16(0) + carray(TOPIC_A.bytes + cstring("t") + i32(3) + carray(i32(0) + carray(cstring("r1")) + tags()) + tags()) + tags())
    assert encode_value(ConsumerGroupTargetAssignmentMetadataValue(9)) == i16(0) + i32(9) + tags()
    assert encode_value(ConsumerGroupTargetAssignmentMetadataValue(9, 1_700_000_000_000)) == (
        i16(0) + i32(9) + tags((0, i64(1_700_000_000_000))))
    assert encode_value(ConsumerGroupTargetAssignmentMemberValue((TargetTopicPartitions(TOPIC_B, (1,)),))) == (
        i16(0) + carray(TOPIC_B.bytes + carray(i32(1)) + tags()) + tags())
    assert encode_value(ConsumerGroupRegularExpressionValue(("t1", "t2"), 12, 1_700_000_000_000)) == (
        i16(0) + carray(cstring("t1"), cstring("t2")) + i64(12) + i64(1_700_000_000_000) + tags())
    epochs = ConsumerGroupCurrentMemberAssignmentValue(1, 0, 1, (), (CurrentTopicPartitions(TOPIC_A, (4, 5), (1, 1)),))
    assert encode_value(epochs) == (i16(0) + i32(1) + i32(0) + i8(1) + carray()
                                    + carray(TOPIC_A.bytes + carray(i32(4), i32(5)) + tags((0, carray(i32(1), i32(1)))))
                                    + tags())


def test_tagged_struct_and_array_defaults_are_the_generated_classes() -> None:
    # Kafka's generated class starts with an empty struct and an empty array: those are
    # left out, null is written, and a record without the tag reads as the empty one.
    empty = ClassicMemberMetadata(0, ())
    member = ConsumerGroupMemberMetadataValue(None, None, "c", "h", (), None, 1, None, empty)
    data = encode_value(member)
    assert data == encode_value(ConsumerGroupMemberMetadataValue(None, None, "c", "h", (), None, 1, None))[:-4] + tags()
    assert cr.decode_value(ConsumerGroupMemberMetadataKey, data) == member
    null_epochs = ConsumerGroupCurrentMemberAssignmentValue(1, 0, 0, (CurrentTopicPartitions(TOPIC_A, (1,), None),), ())
    empty_epochs = ConsumerGroupCurrentMemberAssignmentValue(1, 0, 0, (CurrentTopicPartitions(TOPIC_A, (1,)),), ())
    assert encode_value(null_epochs) == i16(0) + i32(1) + i32(0) + i8(0) + carray(
        TOPIC_A.bytes + carray(i32(1)) + tags((0, uvarint(0)))) + carray() + tags()
    assert encode_value(empty_epochs) == i16(0) + i32(1) + i32(0) + i8(0) + carray(
        TOPIC_A.bytes + carray(i32(1)) + tags()) + carray() + tags()
    for value in (null_epochs, empty_epochs):
        assert cr.decode_value(ConsumerGroupCurrentMemberAssignmentKey, encode_value(value)) == value


# --- dispatch and tombstones --------------------------------------------------------------

EVERY_KEY: list[ConsumerGroupKey] = [
    ConsumerGroupMetadataKey("g"), ConsumerGroupPartitionMetadataKey("g"), ConsumerGroupMemberMetadataKey("g", "m"),
    ConsumerGroupTargetAssignmentMetadataKey("g"), ConsumerGroupTargetAssignmentMemberKey("g", "m"),
    ConsumerGroupCurrentMemberAssignmentKey("g", "m"), ConsumerGroupRegularExpressionKey("g", "^t.*$"),
]
EVERY_VALUE: list[ConsumerGroupValue] = [
    ConsumerGroupMetadataValue(3, -5),
    ConsumerGroupPartitionMetadataValue((TopicMetadata(TOPIC_A, "orders", 6), TopicMetadata(TOPIC_B, "b", 1, (PartitionRacks(0, ("a", "b")),)))),
    ConsumerGroupMemberMetadataValue("inst", "rack", "client", "/10.0.0.1", ("a", "b"), "x.*", 45_000, "range",
                                     ClassicMemberMetadata(10_000, (ClassicProtocol("range", b"m"), ClassicProtocol("sticky", b"")))),
    ConsumerGroupTargetAssignmentMetadataValue(4, 99),
    ConsumerGroupTargetAssignmentMemberValue((TargetTopicPartitions(TOPIC_A, (0, 1, 2)), TargetTopicPartitions(TOPIC_B, ()))),
    ConsumerGroupCurrentMemberAssignmentValue(5, 4, 2, (CurrentTopicPartitions(TOPIC_A, (0,), (5,)),),
                                              (CurrentTopicPartitions(TOPIC_B, (1, 2)),)),
    ConsumerGroupRegularExpressionValue(("t1",), 7, 8),
]


@pytest.mark.parametrize("key,value", list(zip(EVERY_KEY, EVERY_VALUE)), ids=lambda v: type(v).__name__)
def test_decode_record_dispatches_on_the_record_type(key: ConsumerGroupKey, value: ConsumerGroupValue) -> None:
    assert decode_record(encode_key(key), encode_value(value)) == (key, value)
    assert decode_record(bytearray(encode_key(key)), memoryview(encode_value(value))) == (key, value)


@pytest.mark.parametrize("key", EVERY_KEY, ids=lambda k: type(k).__name__)
def test_tombstones(key: ConsumerGroupKey) -> None:
    assert decode_record(encode_key(key), None) == (key, None)


@pytest.mark.parametrize("key", EVERY_KEY, ids=lambda k: type(k).__name__)
def test_the_classic_decoder_skips_these_keys(key: ConsumerGroupKey) -> None:
    assert key.RECORD_TYPE in cr.RECORD_TYPES
    assert schema.decode_key(encode_key(key)) is None


def test_other_record_types_are_not_ours() -> None:
    assert decode_record(schema.encode_key(schema.OffsetKey("g", "t", 0)), b"") is None
    assert decode_record(schema.encode_key(schema.GroupKey("g")), None) is None
    for record_type in (0, 2, 9, 11, 15, 17, 100, -1):  # share (9-15) and streams (17+) groups among them
        assert decode_key(i16(record_type) + string("g")) is None


def test_a_value_of_another_record_type_does_not_pass() -> None:
    # A metadata value (int32 epoch, tags) under a regular expression key is garbage there.
    with pytest.raises(OffsetsSchemaError):
        decode_record(encode_key(ConsumerGroupRegularExpressionKey("g", "r")), encode_value(ConsumerGroupMetadataValue(1)))


def test_encoding_refuses_what_is_not_a_record() -> None:
    with pytest.raises(TypeError):
        encode_key(schema.GroupKey("g"))  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        encode_value(schema.OffsetValue(1, -1, "", 0))  # type: ignore[arg-type]


# --- tagged fields and newer versions ------------------------------------------------------


def test_unknown_tagged_fields_are_skipped_at_every_level() -> None:
    # Tag 3 at the value level next to the known tag 0, tag 1 inside a topic entry.
    data = (i16(0) + carray(TOPIC_A.bytes + carray(i32(7)) + tags((1, b"\xde\xad"))) + tags((0, b"\x00" * 8), (3, b"xyz")))
    assert cr.decode_value(ConsumerGroupTargetAssignmentMemberKey, data) == ConsumerGroupTargetAssignmentMemberValue(
        (TargetTopicPartitions(TOPIC_A, (7,)),))
    data = i16(0) + i32(5) + tags((0, i64(77)), (9, b""))
    assert cr.decode_value(ConsumerGroupMetadataKey, data) == ConsumerGroupMetadataValue(5, 77)
    # A member with an unknown tag 4 after the known tag 0, and one inside a protocol.
    classic = uvarint(1) + i32(9) + carray(cstring("p") + uvarint(2) + b"m" + tags((2, b"??"))) + tags()
    data = (i16(0) + cstring(None) + cstring(None) + cstring("c") + cstring("h") + carray() + cstring(None) + i32(1)
            + cstring(None) + tags((0, classic), (4, b"\x07")))
    assert cr.decode_value(ConsumerGroupMemberMetadataKey, data) == ConsumerGroupMemberMetadataValue(
        None, None, "c", "h", (), None, 1, None, ClassicMemberMetadata(9, (ClassicProtocol("p", b"m"),)))


def test_a_known_tag_of_the_wrong_size_is_refused() -> None:
    with pytest.raises(OffsetsSchemaError):
        cr.decode_value(ConsumerGroupMetadataKey, i16(0) + i32(5) + tags((0, i32(77))))  # int64 field, 4 bytes
    with pytest.raises(OffsetsSchemaError, match="left"):
        cr.decode_value(ConsumerGroupMetadataKey, i16(0) + i32(5) + tags((0, i64(77) + b"\x00")))


def test_a_newer_value_version_reads_the_known_fields() -> None:
    # A later version may add tagged fields (skipped) and fields after them (left unread).
    data = i16(1) + i32(12) + tags((0, i64(3)), (1, b"new")) + b"a field v1 added"
    assert cr.decode_value(ConsumerGroupMetadataKey, data) == ConsumerGroupMetadataValue(12, 3)
    data = i16(3) + carray(cstring("t")) + i64(1) + i64(2) + tags()
    assert cr.decode_value(ConsumerGroupRegularExpressionKey, data) == ConsumerGroupRegularExpressionValue(("t",), 1, 2)


# --- garbage ----------------------------------------------------------------------------

VALID = [(encode_key(key), encode_value(value)) for key, value in zip(EVERY_KEY, EVERY_VALUE)] + [
    (encode_key(EVERY_KEY[2]), encode_value(ConsumerGroupMemberMetadataValue(None, None, "", "", (), None, -1, None))),
    (encode_key(EVERY_KEY[5]), encode_value(ConsumerGroupCurrentMemberAssignmentValue(0, -1, 0, (CurrentTopicPartitions(TOPIC_A, (1,)),), ()))),
]


@pytest.mark.parametrize("key_bytes,value_bytes", VALID)
def test_every_truncated_key_and_value_is_refused(key_bytes: bytes, value_bytes: bytes) -> None:
    assert decode_record(key_bytes, value_bytes) is not None
    for cut in range(2, len(key_bytes)):  # under 2 bytes there is no record type: the classic reader's case
        with pytest.raises(OffsetsSchemaError):
            decode_record(key_bytes[:cut], value_bytes)
    for cut in range(len(value_bytes)):
        with pytest.raises(OffsetsSchemaError):
            decode_record(key_bytes, value_bytes[:cut])


@pytest.mark.parametrize("key_bytes,value_bytes", VALID[:3])
def test_trailing_bytes_of_version_0_are_refused(key_bytes: bytes, value_bytes: bytes) -> None:
    with pytest.raises(OffsetsSchemaError, match="left after the last field"):
        decode_record(key_bytes + b"\x00", value_bytes)
    with pytest.raises(OffsetsSchemaError, match="left after the last field"):
        decode_record(key_bytes, value_bytes + b"\x00")


@pytest.mark.parametrize(
    "key,data",
    [
        (ConsumerGroupMetadataKey, b""),
        (ConsumerGroupMetadataKey, b"\x00"),
        (ConsumerGroupMetadataKey, i16(-1) + i32(1) + tags()),  # a negative version
        (ConsumerGroupRegularExpressionKey, i16(0) + uvarint(0) + i64(1) + i64(2) + tags()),  # null topics
        (ConsumerGroupRegularExpressionKey, i16(0) + carray(cstring(None)) + i64(1) + i64(2) + tags()),  # null topic name
        (ConsumerGroupMemberMetadataKey, i16(0) + cstring(None) * 2 + cstring(None) + cstring("h") + carray() + cstring(None)
         + i32(1) + cstring(None) + tags()),  # null clientId
        (ConsumerGroupTargetAssignmentMemberKey, i16(0) + carray(TOPIC_A.bytes[:10])),  # a uuid cut short
        (ConsumerGroupTargetAssignmentMemberKey, i16(0) + uvarint(0x7FFFFFFF) + tags()),  # a count with no elements
        (ConsumerGroupTargetAssignmentMemberKey, i16(0) + b"\xff\xff\xff\xff\xff\x01"),  # a varint too long
        (ConsumerGroupPartitionMetadataKey, i16(0) + carray(TOPIC_A.bytes + uvarint(3) + b"\xff\xfe" + i32(1) + carray() + tags())
         + tags()),  # not UTF-8
        (ConsumerGroupMetadataKey, i16(0) + i32(1) + tags((1, b"abc"))[:-1]),  # tag data cut short
    ],
)
def test_garbage_values_are_refused(key: type, data: bytes) -> None:
    with pytest.raises(OffsetsSchemaError):
        cr.decode_value(key, data)


def test_garbage_keys_are_refused() -> None:
    for data in (b"", b"\x00", i16(3) + i16(-1), i16(5) + string("g"), i16(16) + string("g") + i16(4) + b"ab"):
        with pytest.raises(OffsetsSchemaError):
            decode_key(data)


@settings(max_examples=200)
@given(st.sampled_from(list(cr.VALUE_OF_KEY)), st.binary(max_size=60))
def test_random_bytes_raise_nothing_but_schema_errors(key_class: type, data: bytes) -> None:
    try:
        cr.decode_value(key_class, i16(0) + data)
    except OffsetsSchemaError:
        pass


@pytest.mark.parametrize(
    "call",
    [
        lambda: encode_key(ConsumerGroupMetadataKey("x" * 0x8000)),
        lambda: encode_key(ConsumerGroupMemberMetadataKey("g", "\ud800")),
        lambda: encode_value(ConsumerGroupMetadataValue(2**31)),
        lambda: encode_value(ConsumerGroupMetadataValue(1, 2**63)),
        lambda: encode_value(ConsumerGroupCurrentMemberAssignmentValue(1, 1, 128, (), ())),
        lambda: encode_value(ConsumerGroupTargetAssignmentMemberValue((TargetTopicPartitions(TOPIC_A, (2**31,)),))),
        lambda: encode_value(ConsumerGroupRegularExpressionValue(("é" * 0x4000,), 1, 1)),
    ],
)
def test_values_out_of_schema_are_refused(call: Callable[[], bytes]) -> None:
    with pytest.raises(OffsetsSchemaError):
        call()


# --- round trips -------------------------------------------------------------------------

int8s = st.integers(-(2**7), 2**7 - 1)
int32s = st.integers(-(2**31), 2**31 - 1)
int64s = st.integers(-(2**63), 2**63 - 1)
texts = st.text(st.characters(codec="utf-8"), max_size=20)
uuids = st.uuids()


def tuples(elements: st.SearchStrategy[Any], max_size: int = 3) -> st.SearchStrategy[tuple[Any, ...]]:
    return st.lists(elements, max_size=max_size).map(tuple)


keys = st.one_of(
    st.builds(ConsumerGroupMetadataKey, texts), st.builds(ConsumerGroupPartitionMetadataKey, texts),
    st.builds(ConsumerGroupMemberMetadataKey, texts, texts), st.builds(ConsumerGroupTargetAssignmentMetadataKey, texts),
    st.builds(ConsumerGroupTargetAssignmentMemberKey, texts, texts),
    st.builds(ConsumerGroupCurrentMemberAssignmentKey, texts, texts), st.builds(ConsumerGroupRegularExpressionKey, texts, texts),
)
classic = st.builds(ClassicMemberMetadata, int32s, tuples(st.builds(ClassicProtocol, texts, st.binary(max_size=10))))
current_topics = st.builds(CurrentTopicPartitions, uuids, tuples(int32s), st.none() | tuples(int32s, 4))
values = st.one_of(
    st.builds(ConsumerGroupMetadataValue, int32s, int64s),
    st.builds(ConsumerGroupPartitionMetadataValue, tuples(st.builds(
        TopicMetadata, uuids, texts, int32s, tuples(st.builds(PartitionRacks, int32s, tuples(texts)))))),
    st.builds(ConsumerGroupMemberMetadataValue, st.none() | texts, st.none() | texts, texts, texts, tuples(texts),
              st.none() | texts, int32s, st.none() | texts, st.none() | classic),
    st.builds(ConsumerGroupTargetAssignmentMetadataValue, int32s, int64s),
    st.builds(ConsumerGroupTargetAssignmentMemberValue, tuples(st.builds(TargetTopicPartitions, uuids, tuples(int32s)))),
    st.builds(ConsumerGroupCurrentMemberAssignmentValue, int32s, int32s, int8s, tuples(current_topics), tuples(current_topics)),
    st.builds(ConsumerGroupRegularExpressionValue, tuples(texts), int64s, int64s),
)


@given(keys)
def test_key_round_trip(key: ConsumerGroupKey) -> None:
    assert decode_key(encode_key(key)) == key
    assert schema.decode_key(encode_key(key)) is None


@settings(max_examples=300)
@given(values)
def test_value_round_trip(value: ConsumerGroupValue) -> None:
    key_class = next(k for k, v in cr.VALUE_OF_KEY.items() if v is type(value))
    assert cr.decode_value(key_class, encode_value(value)) == value


# --- the load of a log that holds them ----------------------------------------------------


def _classic_value(key: bytes, value: bytes) -> Any:
    decoded = schema.decode_key(key)
    return schema.decode_offset_value(value) if isinstance(decoded, schema.OffsetKey) else schema.decode_group_value(value)


def test_a_load_reads_consumer_group_records_beside_the_classic_state(tmp_path: Any, caplog: Any) -> None:
    classic_dir, mixed_dir = tmp_path / "classic", tmp_path / "mixed"
    os.makedirs(classic_dir)
    os.makedirs(mixed_dir)
    classic_log, mixed_log = FileOffsetsLog(str(classic_dir)), FileOffsetsLog(str(mixed_dir))

    async def write_classic_state() -> None:
        coord = coordinator(classic_log)
        member = JoiningMember("", None, "consumer", (("range", b"meta"),), 10_000, 10_000, "c", "/h")
        joined = await coord.join_group("g", member, False)
        ref = MemberRef(joined.generation, joined.member_id, None)
        await coord.sync_group("g", ref, None, None, [(joined.member_id, b"assigned")])
        assert await coord.commit_offsets("g", ref, -1, [("t", 0, 42, 3, "m"), ("t", 1, 7, -1, None)], known) == [0, 0]
        assert await coord.commit_offsets("simple", MemberRef(-1, "", None), -1, [("u", 0, 5, -1, "")], known) == [0]

    consumer_records: list[tuple[bytes, bytes | None]] = [
        (encode_key(key), encode_value(value)) for key, value in zip(EVERY_KEY, EVERY_VALUE)]
    consumer_records.append((encode_key(ConsumerGroupMetadataKey("g")), None))  # a tombstone among them
    try:
        asyncio.run(write_classic_state())
        # The mixed log: every classic batch again, each followed by the consumer group
        # records, and one batch mixing both kinds.
        expected: list[list[tuple[Any, Any]]] = [[] for _ in classic_log.logs]
        batches = [0 for _ in classic_log.logs]
        for partition, log in enumerate(classic_log.logs):
            data = log.read_bytes(0, 1 << 24) if log.log_end_offset else b""
            for _header, records in iter_batches(data):
                batches[partition] += 1
                pairs: list[tuple[bytes, bytes | None]] = [
                    (record.key, record.value) for record in records if record.key is not None]
                decoded = [(schema.decode_key(k), None if v is None else _classic_value(k, v)) for k, v in pairs]
                expected[partition] += decoded + decoded
                mixed_log.logs[partition].append(memoryview(schema.offsets_batch(pairs, 0)))
                mixed_log.logs[partition].append(memoryview(schema.offsets_batch(consumer_records, 0)))
                mixed_log.logs[partition].append(memoryview(schema.offsets_batch(consumer_records[:2] + pairs, 0)))
        assert sum(log.log_end_offset for log in mixed_log.logs) > 3 * sum(log.log_end_offset for log in classic_log.logs)

        with caplog.at_level(logging.WARNING, logger="coordination.groups.replay"):
            classic_loaded, mixed_loaded = classic_log.loaded(), mixed_log.loaded()
        assert not caplog.records, "consumer group records are read, none as unreadable"

        def kinds(loaded: list[tuple[int, list[Any]]]) -> list[tuple[int, list[tuple[Any, Any]]]]:
            return [(p, [(e.key, e.value) for e in entries if isinstance(e, OffsetsRecord)
                         and isinstance(e.key, (schema.OffsetKey, schema.GroupKey))]) for p, entries in loaded]

        written = [(key, value) for key, value in zip(EVERY_KEY, EVERY_VALUE)] + [(ConsumerGroupMetadataKey("g"), None)]
        for _p, entries in mixed_loaded:
            consumer = [(e.key, e.value) for e in entries if isinstance(e, OffsetsRecord)
                        and not isinstance(e.key, (schema.OffsetKey, schema.GroupKey))]
            # after each classic batch: every consumer record, then the first two again
            assert consumer == (written + written[:2]) * batches[_p]

        assert [records for _p, records in kinds(mixed_loaded)] == expected  # every classic record (twice), nothing else
        assert any(expected), "the classic state was written"
        for partition, log in enumerate(mixed_log.logs):
            data = log.read_bytes(0, 1 << 24) if log.log_end_offset else b""
            assert [(key, value) for _o, key, value in schema.read_entries(data)] == expected[partition]
            assert load_entries(data, 0)[1] == log.log_end_offset

        from_classic, from_mixed = coordinator(classic_log), coordinator(mixed_log)
        from_classic.load(classic_loaded)
        from_mixed.load(mixed_loaded)
        assert set(from_mixed.groups) == set(from_classic.groups) == {"g", "simple"}
        for name in ("g", "simple"):
            a, b = from_classic.groups[name], from_mixed.groups[name]
            assert (b.state, b.generation, b.protocol_name, b.leader_id) == (a.state, a.generation, a.protocol_name, a.leader_id)
            assert {m: v.assignment for m, v in b.members.items()} == {m: v.assignment for m, v in a.members.items()}
            assert b.offsets == a.offsets
        assert from_mixed.groups["g"].offsets[("t", 0)].offset == 42
    finally:
        classic_log.close()
        mixed_log.close()
