"""__consumer_offsets records: golden bytes built field by field from Kafka's JSON schemas
(group-coordinator/src/main/resources/common/message/*.json), every value version read,
Java's String.hashCode placement, whole batches, and garbage."""

from __future__ import annotations

import struct
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coordination.groups.offsets_schema import (
    GroupKey,
    GroupValue,
    MemberValue,
    OffsetKey,
    OffsetsSchemaError,
    OffsetValue,
    decode_group_value,
    decode_key,
    decode_offset_value,
    encode_group_value,
    encode_key,
    encode_offset_value,
    offsets_batch,
    partition_for,
    read_entries,
)
from coordination.java_hash import java_string_hash
from storage.batch import HEADER_SIZE, check_batch_frame, parse_header, set_base_offset_and_epoch
from storage.records import CONTROL_TYPE_COMMIT, Record, decode_batch, encode_batch, encode_control_batch

# --- the primitive types, spelled out independently of the module under test -------------


def i16(n: int) -> bytes:
    return struct.pack(">h", n)


def i32(n: int) -> bytes:
    return struct.pack(">i", n)


def i64(n: int) -> bytes:
    return struct.pack(">q", n)


def string(text: str | None) -> bytes:
    """STRING / NULLABLE_STRING: int16 length (-1 null), UTF-8."""
    if text is None:
        return i16(-1)
    raw = text.encode()
    return i16(len(raw)) + raw


def blob(data: bytes) -> bytes:
    """BYTES: int32 length."""
    return i32(len(data)) + data


def uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def compact_string(text: str | None) -> bytes:
    """COMPACT_(NULLABLE_)STRING: uvarint length + 1 (0 null), UTF-8."""
    if text is None:
        return uvarint(0)
    raw = text.encode()
    return uvarint(len(raw) + 1) + raw


def compact_blob(data: bytes) -> bytes:
    return uvarint(len(data) + 1) + data


def tags(*fields: tuple[int, bytes]) -> bytes:
    """A tagged-fields section: count, then tag, size, data per field."""
    return uvarint(len(fields)) + b"".join(uvarint(tag) + uvarint(len(data)) + data for tag, data in fields)


# --- keys -------------------------------------------------------------------------------


def test_offset_key_golden_bytes() -> None:
    # OffsetCommitKey.json: apiKey 1; group string, topic string, partition int32.
    expected = i16(1) + string("my-group") + string("orders") + i32(7)
    assert encode_key(OffsetKey("my-group", "orders", 7)) == expected
    # The same, byte by byte, so the helpers cannot hide a mistake.
    assert expected == bytes.fromhex("0001 0008") + b"my-group" + bytes.fromhex("0006") + b"orders" + bytes.fromhex("00000007")


def test_group_key_golden_bytes() -> None:
    # GroupMetadataKey.json: apiKey 2; group string.
    assert encode_key(GroupKey("g")) == bytes.fromhex("0002 0001") + b"g"
    assert encode_key(GroupKey("grüße")) == i16(2) + string("grüße")


@pytest.mark.parametrize("record_type", [0, 1])
def test_decode_offset_key_both_types(record_type: int) -> None:
    # Type 0 is LegacyOffsetCommitKey: same fields as type 1.
    data = i16(record_type) + string("g") + string("t") + i32(2_000_000)
    assert decode_key(data) == OffsetKey("g", "t", 2_000_000)


def test_decode_group_key() -> None:
    assert decode_key(i16(2) + string("group-1")) == GroupKey("group-1")
    assert decode_key(bytearray(i16(2) + string(""))) == GroupKey("")
    assert decode_key(memoryview(i16(2) + string("x"))) == GroupKey("x")


@pytest.mark.parametrize("record_type", [3, 4, 5, 8, 16, 100, -1, 32767])
def test_decode_unknown_key_type_is_none(record_type: int) -> None:
    # KIP-848 consumer-group records (3..8, 16), share/streams records, and anything else.
    assert decode_key(i16(record_type) + string("g") + string("member")) is None


# --- OffsetCommitValue --------------------------------------------------------------------


def test_offset_value_v3_golden_bytes() -> None:
    # v3: offset int64, leaderEpoch int32, metadata string, commitTimestamp int64.
    value = OffsetValue(offset=42, leader_epoch=5, metadata="meta", commit_timestamp=1_700_000_000_000)
    expected = i16(3) + i64(42) + i32(5) + string("meta") + i64(1_700_000_000_000)
    assert encode_offset_value(value) == expected
    assert expected == (bytes.fromhex("0003 000000000000002a 00000005 0004") + b"meta" + (1_700_000_000_000).to_bytes(8, "big"))


def test_offset_value_v1_written_when_expire_timestamp_set() -> None:
    # v1: offset, metadata, commitTimestamp, expireTimestamp; no leaderEpoch (Kafka drops it).
    value = OffsetValue(offset=9, leader_epoch=3, metadata="", commit_timestamp=1000, expire_timestamp=5000)
    assert encode_offset_value(value) == i16(1) + i64(9) + string("") + i64(1000) + i64(5000)
    assert decode_offset_value(encode_offset_value(value)) == replace(value, leader_epoch=-1)


def test_decode_offset_value_v0_and_v2() -> None:
    for version in (0, 2):
        data = i16(version) + i64(100) + string("m") + i64(123)
        assert decode_offset_value(data) == OffsetValue(100, -1, "m", 123, -1)


def test_decode_offset_value_v1() -> None:
    data = i16(1) + i64(100) + string("m") + i64(123) + i64(456)
    assert decode_offset_value(data) == OffsetValue(100, -1, "m", 123, 456)


def test_decode_offset_value_v3() -> None:
    data = i16(3) + i64(-1) + i32(17) + string("ünïcode") + i64(0)
    assert decode_offset_value(data) == OffsetValue(-1, 17, "ünïcode", 0, -1)


def test_decode_offset_value_v4_flexible() -> None:
    # v4: v3's fields, metadata a compact string, then tagged fields.
    data = i16(4) + i64(77) + i32(2) + compact_string("meta") + i64(999) + tags()
    assert decode_offset_value(data) == OffsetValue(77, 2, "meta", 999, -1)


def test_decode_offset_value_v4_skips_unknown_tagged_fields() -> None:
    data = i16(4) + i64(77) + i32(2) + compact_string("") + i64(999) + tags((0, b"\x01" * 16), (300, b"later field"))
    assert decode_offset_value(data) == OffsetValue(77, 2, "", 999, -1)


def test_decode_offset_value_long_metadata() -> None:
    # A compact length over 127 takes a two-byte uvarint.
    text = "x" * 300
    assert decode_offset_value(i16(4) + i64(1) + i32(0) + compact_string(text) + i64(2) + tags()).metadata == text
    assert decode_offset_value(i16(3) + i64(1) + i32(0) + string(text) + i64(2)).metadata == text


# --- GroupMetadataValue ----------------------------------------------------------------------

MEMBER_A = MemberValue(
    member_id="consumer-1-aaaa",
    group_instance_id="instance-a",
    client_id="consumer-1",
    client_host="/10.0.0.1",
    rebalance_timeout=300_000,
    session_timeout=45_000,
    subscription=b"\x00\x01sub-a",
    assignment=b"\x00\x01assign-a",
)
MEMBER_B = MemberValue(
    member_id="consumer-2-bbbb",
    group_instance_id=None,
    client_id="consumer-2",
    client_host="/10.0.0.2",
    rebalance_timeout=60_000,
    session_timeout=10_000,
    subscription=b"",
    assignment=b"",
)


def member_v3(m: MemberValue) -> bytes:
    return (
        string(m.member_id)
        + string(m.group_instance_id)
        + string(m.client_id)
        + string(m.client_host)
        + i32(m.rebalance_timeout)
        + i32(m.session_timeout)
        + blob(m.subscription)
        + blob(m.assignment)
    )


def test_group_value_v3_golden_bytes() -> None:
    value = GroupValue("consumer", 5, "range", MEMBER_A.member_id, 1_700_000_000_123, (MEMBER_A, MEMBER_B))
    expected = (
        i16(3)
        + string("consumer")
        + i32(5)
        + string("range")
        + string(MEMBER_A.member_id)
        + i64(1_700_000_000_123)
        + i32(2)
        + member_v3(MEMBER_A)
        + member_v3(MEMBER_B)
    )
    assert encode_group_value(value) == expected
    assert decode_group_value(expected) == value


def test_empty_group_value_v3_golden_bytes() -> None:
    # What Kafka writes for an Empty group: protocolType "", generation 0, null protocol and leader.
    value = GroupValue("", 0, None, None, 123, ())
    expected = bytes.fromhex("0003 0000 00000000 ffff ffff 000000000000007b 00000000")
    assert encode_group_value(value) == expected
    assert decode_group_value(expected) == value


def test_decode_group_value_v0() -> None:
    # v0: no currentStateTimestamp; member without groupInstanceId and rebalanceTimeout.
    member = string("m1") + string("client") + string("/host") + i32(30_000) + blob(b"sub") + blob(b"asg")
    data = i16(0) + string("consumer") + i32(1) + string("range") + string("m1") + i32(1) + member
    expected_member = MemberValue("m1", None, "client", "/host", 30_000, 30_000, b"sub", b"asg")
    assert decode_group_value(data) == GroupValue("consumer", 1, "range", "m1", -1, (expected_member,))


def test_decode_group_value_v1() -> None:
    # v1: member gains rebalanceTimeout before sessionTimeout.
    member = string("m1") + string("client") + string("/host") + i32(90_000) + i32(30_000) + blob(b"s") + blob(b"a")
    data = i16(1) + string("consumer") + i32(2) + string(None) + string(None) + i32(1) + member
    expected_member = MemberValue("m1", None, "client", "/host", 90_000, 30_000, b"s", b"a")
    assert decode_group_value(data) == GroupValue("consumer", 2, None, None, -1, (expected_member,))


def test_decode_group_value_v2() -> None:
    # v2: currentStateTimestamp after leader.
    member = string("m1") + string("c") + string("h") + i32(90_000) + i32(30_000) + blob(b"s") + blob(b"a")
    data = i16(2) + string("consumer") + i32(3) + string("rr") + string("m1") + i64(555) + i32(1) + member
    expected_member = MemberValue("m1", None, "c", "h", 90_000, 30_000, b"s", b"a")
    assert decode_group_value(data) == GroupValue("consumer", 3, "rr", "m1", 555, (expected_member,))


def test_decode_group_value_v3_with_no_members() -> None:
    data = i16(3) + string("") + i32(0) + string(None) + string(None) + i64(-1) + i32(0)
    assert decode_group_value(data) == GroupValue("", 0, None, None, -1, ())


def test_decode_group_value_v4_flexible() -> None:
    def member_v4(m: MemberValue, member_tags: bytes) -> bytes:
        return (
            compact_string(m.member_id)
            + compact_string(m.group_instance_id)
            + compact_string(m.client_id)
            + compact_string(m.client_host)
            + i32(m.rebalance_timeout)
            + i32(m.session_timeout)
            + compact_blob(m.subscription)
            + compact_blob(m.assignment)
            + member_tags
        )

    data = (
        i16(4)
        + compact_string("consumer")
        + i32(8)
        + compact_string("cooperative-sticky")
        + compact_string(MEMBER_A.member_id)
        + i64(42)
        + uvarint(2 + 1)  # compact array: count + 1
        + member_v4(MEMBER_A, tags())
        + member_v4(MEMBER_B, tags((5, b"future")))
        + tags((1, b"\x00\x00"))
    )
    expected = GroupValue("consumer", 8, "cooperative-sticky", MEMBER_A.member_id, 42, (MEMBER_A, MEMBER_B))
    assert decode_group_value(data) == expected


def test_decode_group_value_v4_null_protocol_and_leader() -> None:
    data = i16(4) + compact_string("") + i32(0) + compact_string(None) + compact_string(None) + i64(7) + uvarint(1) + tags()
    assert decode_group_value(data) == GroupValue("", 0, None, None, 7, ())


# --- partition_for -----------------------------------------------------------------------


def reference_hash(text: str) -> int:
    """String.hashCode by its definition: sum of s[i] * 31^(n-1-i) over UTF-16 code units,
    reduced to a signed int32."""
    raw = text.encode("utf-16-be", "surrogatepass")
    units = [int.from_bytes(raw[i : i + 2], "big") for i in range(0, len(raw), 2)]
    total = sum(unit * 31 ** (len(units) - 1 - i) for i, unit in enumerate(units)) % (1 << 32)
    return total - (1 << 32) if total >= 1 << 31 else total


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", 0),
        ("a", 97),
        ("hello", 99162322),
        ("Aa", 2112),
        ("BB", 2112),  # Java's classic collision
        ("hello world", 1794106052),
        ("my-group", -1906497762),
        ("polygenelubricants", -(1 << 31)),  # Integer.MIN_VALUE
        ("\U0001f600", 0xD83D * 31 + 0xDE00),  # one code point, two UTF-16 units: 1772899
        ("g\U0001f600", 1871882),
    ],
)
def test_java_string_hash(text: str, expected: int) -> None:
    assert java_string_hash(text) == expected
    assert reference_hash(text) == expected


def test_partition_for_positive_hashes() -> None:
    assert partition_for("", 50) == 0
    assert partition_for("a", 50) == 97 % 50
    assert partition_for("hello", 50) == 99162322 % 50
    assert partition_for("hello", 1) == 0


def test_partition_for_non_bmp_uses_utf16_code_units() -> None:
    # By code point the hash would be 0x1F600 = 128512 -> 12; by UTF-16 units 1772899 -> 49.
    assert partition_for("\U0001f600", 50) == 1772899 % 50 == 49


def test_partition_for_negative_hash_uses_kafka_abs() -> None:
    # Kafka's Utils.abs is Math.abs (MIN_VALUE -> 0), not the mask of Utils.toPositive.
    assert partition_for("my-group", 50) == 1906497762 % 50 == 12
    assert (-1906497762 & 0x7FFFFFFF) % 50 == 36  # what the mask would have said
    assert partition_for("polygenelubricants", 50) == 0
    assert partition_for("polygenelubricants", 7) == 0


@given(st.text(max_size=40), st.integers(min_value=1, max_value=1000))
def test_partition_for_matches_definition(text: str, partitions: int) -> None:
    h = reference_hash(text)
    expected = (0 if h == -(1 << 31) else abs(h)) % partitions
    assert partition_for(text, partitions) == expected


def test_partition_for_rejects_no_partitions() -> None:
    with pytest.raises(ValueError):
        partition_for("g", 0)


# --- batches -----------------------------------------------------------------------------


def test_offsets_batch_shape() -> None:
    key = encode_key(OffsetKey("g", "t", 0))
    value = encode_offset_value(OffsetValue(5, -1, "", 1000))
    batch = offsets_batch([(key, value), (key, None)], timestamp=1000)
    header = check_batch_frame(memoryview(batch), 0, len(batch))  # magic 2, CRC-32C
    assert header.compression == 0 and not header.is_control and not header.is_transactional
    assert header.base_offset == 0 and header.last_offset_delta == 1 and header.record_count == 2
    _, records = decode_batch(batch)
    assert records == [Record(0, 1000, key, value), Record(1, 1000, key, None)]


def test_offsets_batch_needs_records() -> None:
    with pytest.raises(ValueError):
        offsets_batch([], timestamp=0)


def test_read_entries_over_several_batches() -> None:
    offset_key = OffsetKey("g", "orders", 3)
    group_key = GroupKey("g")
    commit = OffsetValue(41, 2, "m", 1000)
    expiring = OffsetValue(42, -1, "", 2000, expire_timestamp=9000)
    group = GroupValue("consumer", 1, "range", "m1", 1500, (MEMBER_A,))

    first = offsets_batch(
        [(encode_key(offset_key), encode_offset_value(commit)), (encode_key(group_key), encode_group_value(group))], 1000
    )
    marker = encode_control_batch(CONTROL_TYPE_COMMIT, 0, producer_id=7, producer_epoch=0, timestamp=1000)
    # A KIP-848 record (type 3, ConsumerGroupMetadataKey) between ours: skipped.
    second = offsets_batch(
        [
            (encode_key(offset_key), encode_offset_value(expiring)),
            (i16(3) + string("g"), i16(0) + i32(5)),
            (encode_key(offset_key), None),
            (encode_key(group_key), None),
        ],
        2000,
    )
    tail = offsets_batch([(encode_key(group_key), encode_group_value(group))], 3000)

    # Place the batches as the log would: base offsets 0, 2, 3.
    marker_buf = bytearray(marker)
    set_base_offset_and_epoch(marker_buf, 0, 2, 0)
    second_buf = bytearray(second)
    set_base_offset_and_epoch(second_buf, 0, 3, 0)
    segment = first + bytes(marker_buf) + bytes(second_buf) + tail[: len(tail) // 2]

    assert list(read_entries(segment)) == [
        (0, offset_key, commit),
        (1, group_key, group),
        (3, offset_key, expiring),
        (5, offset_key, None),
        (6, group_key, None),
    ]


def test_read_entries_ignores_every_kind_of_truncated_tail() -> None:
    batch = offsets_batch([(encode_key(GroupKey("g")), None)], 0)
    expected = [(0, GroupKey("g"), None)]
    for cut in range(len(batch)):
        assert list(read_entries(batch + batch[:cut])) == expected
    # Zeros after the last batch (a preallocated segment) read as the end.
    assert list(read_entries(batch + bytes(4096))) == expected
    assert list(read_entries(b"")) == []


def test_read_entries_accepts_bytearray_and_memoryview() -> None:
    batch = offsets_batch([(encode_key(GroupKey("g")), None)], 0)
    assert list(read_entries(bytearray(batch))) == list(read_entries(memoryview(batch))) == [(0, GroupKey("g"), None)]


def test_read_entries_rejects_a_corrupt_complete_batch() -> None:
    batch = bytearray(offsets_batch([(encode_key(GroupKey("g")), None)], 0))
    batch[-1] ^= 0xFF  # inside the CRC-covered bytes
    with pytest.raises(OffsetsSchemaError, match="CRC"):
        list(read_entries(bytes(batch)))


def test_read_entries_rejects_a_bad_value_with_its_offset() -> None:
    batch = offsets_batch([(encode_key(GroupKey("g")), None), (encode_key(OffsetKey("g", "t", 0)), i16(9))], 0)
    with pytest.raises(OffsetsSchemaError, match="offset 1.*unknown version 9"):
        list(read_entries(batch))


def test_read_entries_rejects_a_record_without_key() -> None:
    batch = encode_batch([Record(0, 0, None, b"value")])
    with pytest.raises(OffsetsSchemaError, match="no key"):
        list(read_entries(batch))


def test_read_entries_skips_an_empty_compacted_batch() -> None:
    empty = encode_batch([], last_offset_delta=4)
    assert parse_header(empty).record_count == 0 and len(empty) == HEADER_SIZE
    batch = bytearray(offsets_batch([(encode_key(GroupKey("g")), None)], 0))
    set_base_offset_and_epoch(batch, 0, 5, 0)
    assert list(read_entries(empty + bytes(batch))) == [(5, GroupKey("g"), None)]


# --- garbage -----------------------------------------------------------------------------

VALID_KEYS = [
    i16(1) + string("group") + string("topic") + i32(1),
    i16(0) + string("group") + string("topic") + i32(1),
    i16(2) + string("group"),
]
VALID_OFFSET_VALUES = [
    i16(0) + i64(1) + string("m") + i64(2),
    i16(1) + i64(1) + string("m") + i64(2) + i64(3),
    i16(2) + i64(1) + string("m") + i64(2),
    i16(3) + i64(1) + i32(0) + string("m") + i64(2),
    i16(4) + i64(1) + i32(0) + compact_string("m") + i64(2) + tags((1, b"ab")),
]
VALID_GROUP_VALUES = [
    encode_group_value(GroupValue("consumer", 5, "range", "m", 1, (MEMBER_A, MEMBER_B))),
    i16(0) + string("c") + i32(1) + string("p") + string("l") + i32(1)
    + string("m") + string("c") + string("h") + i32(1) + blob(b"s") + blob(b"a"),
    i16(4) + compact_string("c") + i32(1) + compact_string(None) + compact_string("l") + i64(0) + uvarint(2)
    + compact_string("m") + compact_string(None) + compact_string("c") + compact_string("h") + i32(1) + i32(2)
    + compact_blob(b"s") + compact_blob(b"a") + tags() + tags(),
]  # fmt: skip


@pytest.mark.parametrize("data", VALID_KEYS)
def test_every_truncated_key_raises(data: bytes) -> None:
    decode_key(data)
    for cut in range(len(data)):
        with pytest.raises(OffsetsSchemaError):
            decode_key(data[:cut])


@pytest.mark.parametrize("data", VALID_OFFSET_VALUES)
def test_every_truncated_offset_value_raises(data: bytes) -> None:
    decode_offset_value(data)
    for cut in range(len(data)):
        with pytest.raises(OffsetsSchemaError):
            decode_offset_value(data[:cut])


@pytest.mark.parametrize("data", VALID_GROUP_VALUES)
def test_every_truncated_group_value_raises(data: bytes) -> None:
    decode_group_value(data)
    for cut in range(len(data)):
        with pytest.raises(OffsetsSchemaError):
            decode_group_value(data[:cut])


@pytest.mark.parametrize("data", VALID_KEYS[:1] + VALID_OFFSET_VALUES[:1] + VALID_GROUP_VALUES[:1])
def test_trailing_bytes_raise(data: bytes) -> None:
    decoder = decode_key if data in VALID_KEYS else decode_offset_value if data in VALID_OFFSET_VALUES else decode_group_value
    with pytest.raises(OffsetsSchemaError, match="left after the last field"):
        decoder(data + b"\x00")


@pytest.mark.parametrize("version", [5, 6, -1, 32767])
def test_unknown_value_versions_raise(version: int) -> None:
    with pytest.raises(OffsetsSchemaError, match="unknown version"):
        decode_offset_value(i16(version) + i64(1) + i32(0) + string("m") + i64(2))
    with pytest.raises(OffsetsSchemaError, match="unknown version"):
        decode_group_value(i16(version) + string("c") + i32(1) + string(None) + string(None) + i64(0) + i32(0))


@pytest.mark.parametrize(
    "data",
    [
        i16(3) + i64(1) + i32(0) + i16(-1) + i64(2),  # null metadata: not nullable
        i16(3) + i64(1) + i32(0) + i16(-2) + i64(2),
        i16(3) + i64(1) + i32(0) + i16(2) + b"\xff\xfe" + i64(2),  # not UTF-8
        i16(4) + i64(1) + i32(0) + uvarint(0) + i64(2) + tags(),  # compact null metadata
        i16(4) + i64(1) + i32(0) + b"\xff\xff\xff\xff\xff\x01" + i64(2) + tags(),  # varint too long
        i16(4) + i64(1) + i32(0) + b"\xff\xff\xff\xff\x7f" + i64(2) + tags(),  # varint over 32 bits
        i16(4) + i64(1) + i32(0) + uvarint(0x8000 + 1) + b"x" * 0x8000 + i64(2) + tags(),  # string too long
        i16(4) + i64(1) + i32(0) + compact_string("m") + i64(2) + tags((1, b"abc"))[:-1],  # tag data short
    ],
)
def test_garbage_offset_values_raise(data: bytes) -> None:
    with pytest.raises(OffsetsSchemaError):
        decode_offset_value(data)


@pytest.mark.parametrize(
    "data",
    [
        i16(3) + string("c") + i32(1) + string(None) + string(None) + i64(0) + i32(-1),  # null members
        i16(3) + string("c") + i32(1) + string(None) + string(None) + i64(0) + i32(2**31 - 1),  # count, no members
        i16(3) + i16(-1) + i32(1) + string(None) + string(None) + i64(0) + i32(0),  # null protocolType
        i16(4) + compact_string("c") + i32(1) + uvarint(0) + uvarint(0) + i64(0) + uvarint(0) + tags(),  # null array
        i16(0) + string("c") + i32(1) + string(None) + string(None) + i32(1)
        + string("m") + string("c") + string("h") + i32(1) + i32(-1) + blob(b""),  # null subscription
    ],
)  # fmt: skip
def test_garbage_group_values_raise(data: bytes) -> None:
    with pytest.raises(OffsetsSchemaError):
        decode_group_value(data)


def test_garbage_keys_raise() -> None:
    for data in (b"", b"\x00", i16(1) + i16(-1) + string("t") + i32(0), i16(2) + i16(5) + b"abc", i16(2) + i16(1) + b"\x80"):
        with pytest.raises(OffsetsSchemaError):
            decode_key(data)


@settings(max_examples=300)
@given(st.binary(max_size=80))
def test_random_bytes_never_raise_anything_but_schema_errors(data: bytes) -> None:
    for decoder in (decode_key, decode_offset_value, decode_group_value):
        try:
            decoder(data)
        except OffsetsSchemaError:
            pass


def test_errors_are_value_errors() -> None:
    assert issubclass(OffsetsSchemaError, ValueError)


# --- encoding limits ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "call",
    [
        lambda: encode_key(OffsetKey("g", "t", 2**31)),
        lambda: encode_key(GroupKey("x" * 0x8000)),
        lambda: encode_key(GroupKey("\ud800")),  # a lone surrogate has no UTF-8
        lambda: encode_offset_value(OffsetValue(2**63, -1, "", 0)),
        lambda: encode_offset_value(OffsetValue(0, 2**31, "", 0)),
        lambda: encode_group_value(GroupValue("c", 2**31, None, None, 0, ())),
        lambda: encode_group_value(GroupValue("c", 0, None, None, 0, (replace(MEMBER_A, session_timeout=-(2**31) - 1),))),
    ],
)
def test_values_out_of_schema_raise(call: object) -> None:
    with pytest.raises(OffsetsSchemaError):
        call()  # type: ignore[operator]


def test_longest_string_fits() -> None:
    text = "x" * 0x7FFF
    assert decode_key(encode_key(GroupKey(text))) == GroupKey(text)


# --- round trips -------------------------------------------------------------------------

int32s = st.integers(min_value=-(2**31), max_value=2**31 - 1)
int64s = st.integers(min_value=-(2**63), max_value=2**63 - 1)
texts = st.text(st.characters(codec="utf-8"), max_size=30)
members = st.builds(
    MemberValue,
    member_id=texts,
    group_instance_id=st.none() | texts,
    client_id=texts,
    client_host=texts,
    rebalance_timeout=int32s,
    session_timeout=int32s,
    subscription=st.binary(max_size=30),
    assignment=st.binary(max_size=30),
)


@given(st.builds(OffsetKey, texts, texts, int32s) | st.builds(GroupKey, texts))
def test_key_round_trip(key: OffsetKey | GroupKey) -> None:
    assert decode_key(encode_key(key)) == key


@given(st.builds(OffsetValue, int64s, int32s, texts, int64s, int64s))
def test_offset_value_round_trip(value: OffsetValue) -> None:
    decoded = decode_offset_value(encode_offset_value(value))
    # v1 (written when an expire timestamp is set) has no leader epoch.
    assert decoded == (value if value.expire_timestamp == -1 else replace(value, leader_epoch=-1))


@given(
    st.builds(GroupValue, texts, int32s, st.none() | texts, st.none() | texts, int64s, st.lists(members, max_size=3).map(tuple))
)
def test_group_value_round_trip(value: GroupValue) -> None:
    assert decode_group_value(encode_group_value(value)) == value
