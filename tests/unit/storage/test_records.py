"""Record codec for message format v2: varints, batch round trips, golden bytes, interop."""

from __future__ import annotations

import struct
import warnings
from typing import Callable

import crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storage.batch import (
    COMPRESSION_GZIP,
    COMPRESSION_LZ4,
    COMPRESSION_NONE,
    COMPRESSION_SNAPPY,
    COMPRESSION_ZSTD,
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    TIMESTAMP_TYPE_LOG_APPEND,
    BatchHeader,
    check_batch_frame,
    check_producer_batch,
    parse_header,
)
from storage.errors import CorruptRecordError, UnsupportedCompressionError
from storage.records import (
    CONTROL_TYPE_ABORT,
    CONTROL_TYPE_COMMIT,
    ControlRecord,
    Record,
    decode_batch,
    decode_varint,
    decode_varlong,
    encode_batch,
    encode_control_batch,
    encode_control_record,
    encode_varint,
    encode_varlong,
    iter_batches,
    make_records,
    parse_control_record,
    size_of_varint,
    write_varint,
)

with warnings.catch_warnings():
    # kafka-python loads its protocol schemas with deprecated importlib.resources calls.
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.record.default_records import (
        DefaultRecordBatch,
        DefaultRecordBatchBuilder,
    )

CODECS = [COMPRESSION_NONE, COMPRESSION_GZIP, COMPRESSION_SNAPPY, COMPRESSION_LZ4, COMPRESSION_ZSTD]
FAST = settings(max_examples=150, deadline=None)
INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)


def check(batch: bytes, producer: bool = True) -> BatchHeader:
    view = memoryview(batch)
    return check_producer_batch(view, 0, len(batch)) if producer else check_batch_frame(view, 0, len(batch))


# --- varints ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        (0, "00"),
        (-1, "01"),
        (1, "02"),
        (-2, "03"),
        (63, "7e"),
        (-64, "7f"),
        (64, "8001"),
        (150, "ac02"),
        (300, "d804"),
        (2**31 - 1, "feffffff0f"),
        (-(2**31), "ffffffff0f"),
    ],
)
def test_varint_known_bytes(value: int, encoded: str) -> None:
    assert encode_varint(value).hex() == encoded
    assert encode_varlong(value).hex() == encoded
    assert decode_varint(bytes.fromhex(encoded)) == (value, len(encoded) // 2)
    assert decode_varlong(bytes.fromhex(encoded)) == (value, len(encoded) // 2)


def test_varlong_known_bytes_at_the_int64_edges() -> None:
    assert encode_varlong(2**63 - 1).hex() == "fe" + "ff" * 8 + "01"
    assert encode_varlong(-(2**63)).hex() == "ff" * 9 + "01"


@FAST
@given(INT32)
def test_varint_round_trip_int32(value: int) -> None:
    encoded = encode_varint(value)
    assert len(encoded) == size_of_varint(value) <= 5
    assert decode_varint(b"\xaa" + encoded + b"\xbb", 1) == (value, 1 + len(encoded))


@FAST
@given(INT64)
def test_varlong_round_trip_int64(value: int) -> None:
    encoded = encode_varlong(value)
    assert len(encoded) == size_of_varint(value) <= 10
    assert decode_varlong(memoryview(b"\xaa" + encoded), 1) == (value, 1 + len(encoded))


def test_varint_write_appends() -> None:
    out = bytearray(b"x")
    write_varint(out, 300)
    assert out == b"x\xd8\x04"


@pytest.mark.parametrize("value", [2**31, -(2**31) - 1])
def test_varint_out_of_range_is_refused(value: int) -> None:
    with pytest.raises(ValueError):
        encode_varint(value)


@pytest.mark.parametrize("value", [2**63, -(2**63) - 1])
def test_varlong_out_of_range_is_refused(value: int) -> None:
    with pytest.raises(ValueError):
        encode_varlong(value)


@pytest.mark.parametrize(
    ("decoder", "encoded"),
    [
        (decode_varint, ""),
        (decode_varint, "80"),
        (decode_varint, "ffff"),
        (decode_varint, "ffffffffff01"),  # 6 bytes
        (decode_varint, "ffffffff1f"),  # 5 bytes, more than 32 bits
        (decode_varlong, "ff" * 9),
        (decode_varlong, "ff" * 10 + "01"),  # 11 bytes
        (decode_varlong, "ff" * 9 + "03"),  # 10 bytes, more than 64 bits
    ],
)
def test_bad_varints_raise_corrupt(decoder: Callable[[bytes], tuple[int, int]], encoded: str) -> None:
    with pytest.raises(CorruptRecordError):
        decoder(bytes.fromhex(encoded))


# --- strategies -------------------------------------------------------------------------

Drawn = tuple[int, list[Record]]
nullable_bytes = st.none() | st.binary(max_size=48)
headers_strategy = st.lists(st.tuples(st.text(max_size=8), nullable_bytes), max_size=3).map(tuple)
timestamps = st.integers(-1, 2**44)


@st.composite
def record_lists(draw: st.DrawFn, min_size: int = 1, gaps: bool = False) -> Drawn:
    """(base_offset, records) with consecutive offsets, or with gaps (compacted shape)."""
    base_offset = draw(st.integers(0, 2**62))
    count = draw(st.integers(min_size, 12))
    steps = draw(st.lists(st.integers(1, 50) if gaps else st.just(1), min_size=count, max_size=count))
    offset, records = base_offset - 1, []
    for step in steps:
        offset += step
        records.append(Record(offset, draw(timestamps), draw(nullable_bytes), draw(nullable_bytes), draw(headers_strategy)))
    if gaps:
        base_offset -= draw(st.integers(0, 5))
    return max(base_offset, 0), records


# --- round trips ------------------------------------------------------------------------


@FAST
@given(
    drawn=record_lists(),
    codec=st.sampled_from(CODECS),
    producer_id=st.integers(-1, 2**63 - 1),
    producer_epoch=st.integers(-1, 2**15 - 1),
    base_sequence=st.integers(-1, 2**31 - 1),
    transactional=st.booleans(),
    leader_epoch=INT32,
)
def test_encode_decode_round_trip(
    drawn: Drawn, codec: int, producer_id: int, producer_epoch: int, base_sequence: int, transactional: bool, leader_epoch: int
) -> None:
    base_offset, records = drawn
    batch = encode_batch(
        records,
        base_offset=base_offset,
        compression=codec,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        is_transactional=transactional,
        partition_leader_epoch=leader_epoch,
    )
    header = check(batch)
    assert header.size == len(batch)
    assert header.record_count == len(records)
    assert header.last_offset_delta == len(records) - 1
    assert header.compression == codec
    assert header.is_transactional is transactional
    assert not header.is_control
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (producer_id, producer_epoch, base_sequence)
    assert header.partition_leader_epoch == leader_epoch
    assert header.base_timestamp == min(r.timestamp for r in records)
    assert header.max_timestamp == max(r.timestamp for r in records)
    decoded_header, decoded = decode_batch(batch)
    assert decoded_header == header
    assert decoded == records


def test_tuples_are_accepted_as_records() -> None:
    batch = encode_batch([(0, 10, b"k", b"v"), (1, 11, None, b"w", (("h", b"1"),))])
    assert decode_batch(batch)[1] == [Record(0, 10, b"k", b"v"), Record(1, 11, None, b"w", (("h", b"1"),))]


@pytest.mark.parametrize("codec", CODECS)
def test_large_batch_round_trip(codec: int) -> None:
    records = make_records([b"value-%d " % i * 20 for i in range(2000)], keys=[b"k%d" % (i % 7) for i in range(2000)], start_offset=10, timestamp=1_700_000_000_000)
    batch = encode_batch(records, base_offset=10, compression=codec)
    check(batch)
    assert decode_batch(batch)[1] == records


@pytest.mark.parametrize("codec", CODECS)
def test_log_append_time_reports_max_timestamp(codec: int) -> None:
    records = make_records([b"a", b"b", b"c"], timestamp=100)
    batch = encode_batch(records, compression=codec, timestamp_type=TIMESTAMP_TYPE_LOG_APPEND, max_timestamp=5000)
    header, decoded = decode_batch(batch)
    assert header.timestamp_type == TIMESTAMP_TYPE_LOG_APPEND
    assert [r.timestamp for r in decoded] == [5000, 5000, 5000]
    assert [r.value for r in decoded] == [b"a", b"b", b"c"]


def test_explicit_timestamps_and_delete_horizon() -> None:
    """Compaction's shape: baseTimestamp is the delete horizon, deltas go negative."""
    records = [Record(0, 1000, b"k", None), Record(1, 2000, b"k2", b"v")]
    batch = encode_batch(records, base_timestamp=9000, has_delete_horizon=True)
    header, decoded = decode_batch(batch)
    assert header.has_delete_horizon
    assert header.base_timestamp == 9000
    assert header.max_timestamp == 2000
    assert decoded == records


@FAST
@given(drawn=record_lists(gaps=True), codec=st.sampled_from(CODECS), extra=st.integers(0, 100))
def test_compacted_batch_with_gaps(drawn: Drawn, codec: int, extra: int) -> None:
    base_offset, records = drawn
    last_delta = records[-1].offset - base_offset + extra
    batch = encode_batch(records, base_offset=base_offset, compression=codec, last_offset_delta=last_delta)
    header = check(batch, producer=False)
    assert header.last_offset_delta == last_delta
    assert header.record_count == len(records)
    if header.record_count != last_delta + 1:
        with pytest.raises(CorruptRecordError):
            check(batch)
    assert decode_batch(batch)[1] == records


def test_gap_batch_fails_the_producer_check() -> None:
    records = [Record(100, 1, b"a", b"1"), Record(103, 2, b"b", b"2")]
    batch = encode_batch(records, base_offset=100, last_offset_delta=5)
    assert check(batch, producer=False).last_offset == 105
    with pytest.raises(CorruptRecordError):
        check(batch)


@pytest.mark.parametrize("codec", CODECS)
def test_empty_batch_with_last_offset_delta(codec: int) -> None:
    batch = encode_batch(
        [], base_offset=500, compression=codec, last_offset_delta=9, base_timestamp=77, max_timestamp=88, producer_id=5, producer_epoch=2, base_sequence=40
    )
    header = check(batch, producer=False)
    assert len(batch) == HEADER_SIZE
    assert (header.record_count, header.last_offset_delta, header.next_offset) == (0, 9, 510)
    assert header.compression == COMPRESSION_NONE  # as Kafka writes empty batches
    assert (header.base_timestamp, header.max_timestamp, header.producer_id, header.last_sequence) == (77, 88, 5, 49)
    assert decode_batch(batch) == (header, [])


def test_empty_batch_needs_last_offset_delta() -> None:
    with pytest.raises(ValueError):
        encode_batch([])


@pytest.mark.parametrize(
    ("records", "kwargs"),
    [
        ([Record(1, 0, None, b"a"), Record(1, 0, None, b"b")], {}),  # repeated offset
        ([Record(2, 0, None, b"a"), Record(1, 0, None, b"b")], {}),  # decreasing
        ([Record(1, 0, None, b"a")], {"base_offset": 2}),  # below the base
        ([Record(3, 0, None, b"a")], {"last_offset_delta": 2}),  # last record beyond lastOffsetDelta
        ([Record(0, 0, None, b"a")], {"timestamp_type": 2}),
        ([Record(0, 0, None, b"a")], {"producer_epoch": 2**15}),
    ],
)
def test_encode_refuses_inconsistent_input(records: list[Record], kwargs: dict[str, int]) -> None:
    with pytest.raises(ValueError):
        encode_batch(records, **kwargs)


def test_encode_unknown_codec() -> None:
    with pytest.raises(UnsupportedCompressionError):
        encode_batch([Record(0, 0, None, b"a")], compression=5)


def test_iter_batches_over_concatenated_batches() -> None:
    first = encode_batch(make_records([b"a", b"b"], timestamp=1), compression=COMPRESSION_GZIP)
    second = encode_batch(make_records([b"c"], start_offset=2, timestamp=2), base_offset=2, compression=COMPRESSION_ZSTD)
    third = encode_control_batch(CONTROL_TYPE_COMMIT, 0, producer_id=1, producer_epoch=0, base_offset=3, timestamp=3)
    decoded = list(iter_batches(first + second + third))
    assert [h.base_offset for h, _ in decoded] == [0, 2, 3]
    assert [[r.value for r in records] for h, records in decoded[:2]] == [[b"a", b"b"], [b"c"]]
    with pytest.raises(CorruptRecordError):
        list(iter_batches(first + second[:-1]))
    assert list(iter_batches(b"")) == []


def test_decode_at_position_in_a_memoryview() -> None:
    batch = encode_batch(make_records([b"x"], timestamp=5), compression=COMPRESSION_SNAPPY)
    buf = bytearray(b"\x00" * 7 + batch + b"\xff" * 3)
    header, records = decode_batch(memoryview(buf), 7)
    assert header.size == len(batch)
    assert records[0].value == b"x"


# --- control records --------------------------------------------------------------------


@pytest.mark.parametrize("control_type", [CONTROL_TYPE_ABORT, CONTROL_TYPE_COMMIT])
def test_control_batch(control_type: int) -> None:
    batch = encode_control_batch(control_type, 17, producer_id=99, producer_epoch=4, base_offset=1234, timestamp=555, partition_leader_epoch=3)
    header = check(batch)
    assert header.is_control and header.is_transactional
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (99, 4, -1)
    assert header.partition_leader_epoch == 3
    _, (record,) = decode_batch(batch)
    assert (record.offset, record.timestamp) == (1234, 555)
    assert record.key == struct.pack(">hh", 0, control_type)
    assert record.value == struct.pack(">hi", 0, 17)
    marker = parse_control_record(record)
    assert marker == ControlRecord(version=0, type=control_type, coordinator_epoch=17)
    assert marker.is_commit is (control_type == CONTROL_TYPE_COMMIT)
    assert marker.is_abort is (control_type == CONTROL_TYPE_ABORT)


def test_control_record_round_trips_through_encode_batch() -> None:
    record = encode_control_record(CONTROL_TYPE_ABORT, -1, offset=7, timestamp=8)
    batch = encode_batch([record], base_offset=7, is_control=True, is_transactional=True, producer_id=1, producer_epoch=0)
    assert parse_control_record(decode_batch(batch)[1][0]) == ControlRecord(0, CONTROL_TYPE_ABORT, -1)


def test_parse_control_record_other_types_and_newer_versions() -> None:
    leader_change = Record(0, 0, struct.pack(">hh", 0, 2), b"\x00\x00opaque")
    assert parse_control_record(leader_change) == ControlRecord(0, 2, -1)
    newer = Record(0, 0, struct.pack(">hh", 1, 1) + b"\x00", struct.pack(">hi", 1, 9) + b"\x00\x00")
    assert parse_control_record(newer) == ControlRecord(1, 1, 9)


@pytest.mark.parametrize(
    "record",
    [
        Record(0, 0, None, b"\x00" * 6),
        Record(0, 0, b"\x00\x00\x00", b"\x00" * 6),
        Record(0, 0, struct.pack(">hh", 0, 1), None),
        Record(0, 0, struct.pack(">hh", 0, 0), b"\x00\x00\x00"),
    ],
)
def test_parse_control_record_corrupt(record: Record) -> None:
    with pytest.raises(CorruptRecordError):
        parse_control_record(record)


def test_encode_control_record_refuses_other_types() -> None:
    with pytest.raises(ValueError):
        encode_control_record(2, 0)


# --- golden bytes -----------------------------------------------------------------------

GOLDEN_RECORDS = bytes.fromhex(
    # record 0: length 14, attrs 0, tsDelta 0, offsetDelta 0, key "key", value "value", 0 headers
    "1c" "00" "00" "00" "06" "6b6579" "0a" "76616c7565" "00"
    # record 1: length 9, attrs 0, tsDelta 5, offsetDelta 1, null key, empty value,
    #           1 header: key "h", null value
    "12" "00" "0a" "02" "01" "00" "02" "02" "68" "01"
)


def _golden_batch() -> bytes:
    """Built field by field from the v2 layout, without storage.batch or encode_batch."""
    after_crc = (
        struct.pack(">h", 0)  # attributes: CreateTime, no compression
        + struct.pack(">i", 1)  # lastOffsetDelta
        + struct.pack(">q", 1_600_000_000_000)  # baseTimestamp
        + struct.pack(">q", 1_600_000_000_005)  # maxTimestamp
        + struct.pack(">q", 42)  # producerId
        + struct.pack(">h", 3)  # producerEpoch
        + struct.pack(">i", 10)  # baseSequence
        + struct.pack(">i", 2)  # recordCount
        + GOLDEN_RECORDS
    )
    after_length = struct.pack(">i", 7) + struct.pack(">b", 2) + struct.pack(">I", crc32c.crc32c(after_crc)) + after_crc
    return struct.pack(">q", 1000) + struct.pack(">i", len(after_length)) + after_length


GOLDEN_DECODED = [
    Record(1000, 1_600_000_000_000, b"key", b"value"),
    Record(1001, 1_600_000_000_005, None, b"", (("h", None),)),
]


def test_golden_batch_decodes() -> None:
    batch = _golden_batch()
    header = check(batch)
    assert (header.base_offset, header.partition_leader_epoch, header.record_count) == (1000, 7, 2)
    assert decode_batch(batch) == (header, GOLDEN_DECODED)


def test_encode_batch_reproduces_the_golden_bytes() -> None:
    batch = encode_batch(GOLDEN_DECODED, base_offset=1000, partition_leader_epoch=7, producer_id=42, producer_epoch=3, base_sequence=10)
    assert batch == _golden_batch()


# --- corrupt record data ----------------------------------------------------------------


def _reframe(batch: bytes, body: bytes, **fields: int) -> bytes:
    """The batch's header over a different records section, lengths and CRC fixed up."""
    values = parse_header(batch)._asdict()
    values.update(fields)
    values["batch_length"] = HEADER_SIZE - LOG_OVERHEAD + len(body)
    out = bytearray(HEADER.pack(*values.values()) + body)
    struct.pack_into(">I", out, 17, crc32c.crc32c(bytes(out[21:])))
    return bytes(out)


def test_truncated_buffer_raises_corrupt() -> None:
    batch = _golden_batch()
    for cut in range(len(batch)):
        with pytest.raises(CorruptRecordError):
            decode_batch(batch[:cut])


def test_truncated_record_section_raises_corrupt() -> None:
    """Framing consistent (lengths and CRC fixed), records cut anywhere: never IndexError."""
    batch = _golden_batch()
    for cut in range(len(GOLDEN_RECORDS)):
        with pytest.raises(CorruptRecordError):
            decode_batch(_reframe(batch, GOLDEN_RECORDS[:cut]))


@pytest.mark.parametrize(
    ("body", "fields"),
    [
        (GOLDEN_RECORDS + b"\x00", {}),  # trailing byte after the last record
        (GOLDEN_RECORDS, {"record_count": 3}),  # more records declared than present
        (GOLDEN_RECORDS, {"record_count": 1}),  # fewer declared: leftover bytes
        (GOLDEN_RECORDS, {"record_count": -1}),
        (GOLDEN_RECORDS, {"magic": 1}),
        (bytes.fromhex("1c000000066b65790a76616c756502"), {"record_count": 1}),  # header count 1 past the end
        (bytes.fromhex("0a0000000501"), {"record_count": 1}),  # key length -3
        (bytes.fromhex("0e00000003410000"), {"record_count": 1}),  # key length -2, rest would fit 1
        (bytes.fromhex("0a00000002ff0000"), {"record_count": 1}),  # length 5, fields take 7
        (bytes.fromhex("1600000002ff0000" "00000000"), {"record_count": 1}),  # length 11, fields take 7
        (bytes.fromhex("0e000000010102"), {"record_count": 1}),  # length 7, 6 bytes follow
        (bytes.fromhex("0e00000001900300"), {"record_count": 1}),  # value length 200 past the record
        (bytes.fromhex("12000000010102" "02ff" "01"), {"record_count": 1}),  # header key not UTF-8
        (bytes.fromhex("10000000010102" "01" "01"), {"record_count": 1}),  # null header key
        (bytes.fromhex("0e0000000101" "ffffffffff01"), {"record_count": 1}),  # 6-byte varint
        (b"garbage!", {"record_count": 1, "attributes": COMPRESSION_GZIP}),
        (b"garbage!", {"record_count": 1, "attributes": COMPRESSION_SNAPPY}),
        (b"garbage!", {"record_count": 1, "attributes": COMPRESSION_LZ4}),
        (b"garbage!", {"record_count": 1, "attributes": COMPRESSION_ZSTD}),
    ],
)
def test_garbage_records_raise_corrupt(body: bytes, fields: dict[str, int]) -> None:
    with pytest.raises(CorruptRecordError):
        decode_batch(_reframe(_golden_batch(), body, **fields))


def test_unknown_codec_bits_in_a_batch() -> None:
    with pytest.raises(UnsupportedCompressionError):
        decode_batch(_reframe(_golden_batch(), GOLDEN_RECORDS, attributes=6))


@FAST
@given(body=st.binary(max_size=200), count=st.integers(0, 5), codec=st.sampled_from(CODECS))
def test_random_record_bytes_never_leak_other_errors(body: bytes, count: int, codec: int) -> None:
    try:
        decode_batch(_reframe(_golden_batch(), body, record_count=count, attributes=codec))
    except CorruptRecordError:
        pass


@FAST
@given(position=st.integers(0, len(GOLDEN_RECORDS) - 1), byte=st.integers(0, 255))
def test_flipped_record_byte_decodes_or_raises_corrupt(position: int, byte: int) -> None:
    body = bytearray(GOLDEN_RECORDS)
    body[position] = byte
    try:
        decode_batch(_reframe(_golden_batch(), bytes(body)))
    except CorruptRecordError:
        pass


# --- interoperability with kafka-python ----------------------------------------------------


def _kafka_python_build(records: list[Record], codec: int) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=codec, is_transactional=False, producer_id=-1, producer_epoch=-1, base_sequence=-1, batch_size=1 << 24
    )
    for record in records:
        assert builder.append(record.offset, timestamp=record.timestamp, key=record.key, value=record.value, headers=list(record.headers))
    return bytes(builder.build())


def _kafka_python_read(batch: bytes) -> tuple[DefaultRecordBatch, list[Record]]:
    reader = DefaultRecordBatch(batch)
    assert reader.validate_crc()
    records = [Record(r.offset, r.timestamp, r.key, r.value, tuple(r.headers)) for r in reader]
    return reader, records


# Compressible enough that kafka-python keeps the codec (it sends uncompressed otherwise).
INTEROP_RECORDS = [
    Record(i, 1_700_000_000_000 + 3 * i, None if i % 5 == 0 else b"key-%d" % (i % 4), None if i % 7 == 3 else b"payload " * (i % 40), (("trace", b"abc"), ("n", None)) if i % 3 == 0 else ())
    for i in range(300)
]


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_batches_decode(codec: int) -> None:
    batch = _kafka_python_build(INTEROP_RECORDS, codec)
    header = check(batch)
    assert header.compression == codec
    assert decode_batch(batch)[1] == INTEROP_RECORDS


@pytest.mark.parametrize("codec", CODECS)
def test_our_batches_read_by_kafka_python(codec: int) -> None:
    batch = encode_batch(INTEROP_RECORDS, base_offset=0, compression=codec, producer_id=8, producer_epoch=1, base_sequence=0)
    reader, records = _kafka_python_read(batch)
    assert reader.compression_type == codec
    assert (reader.producer_id, reader.producer_epoch, reader.base_sequence) == (8, 1, 0)
    assert records == INTEROP_RECORDS


@settings(max_examples=60, deadline=None)
@given(drawn=record_lists(gaps=True), codec=st.sampled_from(CODECS))
def test_kafka_python_reads_random_batches(drawn: Drawn, codec: int) -> None:
    base_offset, records = drawn
    batch = encode_batch(records, base_offset=base_offset, compression=codec, last_offset_delta=records[-1].offset - base_offset + 3)
    reader, decoded = _kafka_python_read(batch)
    assert reader.last_offset_delta == records[-1].offset - base_offset + 3
    assert decoded == records


@settings(max_examples=60, deadline=None)
@given(drawn=record_lists(), codec=st.sampled_from(CODECS))
def test_random_kafka_python_batches_decode(drawn: Drawn, codec: int) -> None:
    _, records = drawn
    rebased = [Record(i, r.timestamp, r.key, r.value, r.headers) for i, r in enumerate(records)]
    assert decode_batch(_kafka_python_build(rebased, codec))[1] == rebased


def test_kafka_python_reads_log_append_time_and_control_batches() -> None:
    batch = encode_batch(make_records([b"a", b"b"], timestamp=10), timestamp_type=TIMESTAMP_TYPE_LOG_APPEND, max_timestamp=99)
    _, records = _kafka_python_read(batch)
    assert [r.timestamp for r in records] == [99, 99]
    marker = encode_control_batch(CONTROL_TYPE_COMMIT, 5, producer_id=3, producer_epoch=1, base_offset=40, timestamp=7)
    reader = DefaultRecordBatch(marker)
    assert reader.validate_crc() and reader.is_control_batch and reader.is_transactional
    (control,) = list(reader)
    assert control.commit and not control.abort
    assert control.offset == 40
