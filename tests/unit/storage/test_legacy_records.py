"""Legacy message sets (magic 0/1): parsing, up- and down-conversion, interop with kafka-python.

kafka-python's LegacyRecordBatchBuilder/LegacyRecordBatch stand in for the old clients on
both sides: sets they build must parse, sets down_convert builds must read back in them.
"""

from __future__ import annotations

import gzip
import struct
import warnings
import zlib
from typing import Any

import lz4.frame
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storage.batch import (
    COMPRESSION_GZIP,
    COMPRESSION_LZ4,
    COMPRESSION_NONE,
    COMPRESSION_SNAPPY,
    COMPRESSION_ZSTD,
    TIMESTAMP_TYPE_CREATE,
    TIMESTAMP_TYPE_LOG_APPEND,
    check_producer_batch,
)
from storage.errors import CorruptRecordError, InvalidRecordError, UnsupportedCompressionError
from storage.legacy_records import (
    MAGIC_V0,
    MAGIC_V1,
    NO_TIMESTAMP_TYPE,
    LegacyMessage,
    compress_legacy,
    decompress_legacy,
    down_convert,
    encode_message,
    encode_message_set,
    fetch_magic,
    parse_message_set,
    peek_magic,
    up_convert,
)
from storage.records import (
    CONTROL_TYPE_COMMIT,
    Record,
    decode_batch,
    encode_batch,
    encode_control_batch,
)

with warnings.catch_warnings():
    # kafka-python loads its protocol schemas with deprecated importlib.resources calls.
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka.codec
    from kafka.record.legacy_records import LegacyRecordBatch, LegacyRecordBatchBuilder
    from kafka.record.memory_records import MemoryRecords

MAGICS = [MAGIC_V0, MAGIC_V1]
LEGACY_CODECS = [COMPRESSION_NONE, COMPRESSION_GZIP, COMPRESSION_SNAPPY, COMPRESSION_LZ4]
COMPRESSED = LEGACY_CODECS[1:]
BASE_TS = 1_700_000_000_000
# (offset, timestamp, key, value): null key and value, empty ones, a larger compressible value.
ROWS = [
    (0, BASE_TS, None, b"first"),
    (1, BASE_TS + 5, b"k1", b""),
    (2, BASE_TS + 3, b"", None),
    (3, BASE_TS + 9, b"k3", b"castle " * 300),
]


# --- kafka-python's side --------------------------------------------------------------------


def kp_build(magic: int, codec: int, rows: list[tuple[int, int, bytes | None, bytes | None]] = ROWS) -> bytes:
    """A set as kafka-python's producer sends it."""
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=codec, batch_size=1 << 20)
    for offset, timestamp, key, value in rows:
        assert builder.append(offset, timestamp=timestamp, key=key, value=value) is not None
    return bytes(builder.build())


def kp_read(data: bytes) -> list[tuple[int, int | None, int | None, bytes | None, bytes | None]]:
    """(offset, timestamp, timestamp type, key, value) of every record, as kafka-python's
    consumer reads them; every CRC checked on the way."""
    out = []
    records = MemoryRecords(data)
    while records.has_next():
        batch = records.next_batch()
        assert isinstance(batch, LegacyRecordBatch)
        assert batch.validate_crc()
        for record in batch:
            assert record.validate_crc()
            out.append((record.offset, record.timestamp, record.timestamp_type, record.key, record.value))
    assert records.valid_bytes() == len(data)
    return out


def v2_records(base: int, count: int, *, ts: int = BASE_TS, headers: bool = False) -> list[Record]:
    return [
        Record(base + i, ts + i, b"key-%d" % (base + i), b"value-%d " % (base + i) * 20, (("h", b"x"),) if headers else ())
        for i in range(count)
    ]


# --- the magic 0 LZ4 header ----------------------------------------------------------------


def test_magic0_lz4_writes_kafkas_broken_header_checksum() -> None:
    frame = compress_legacy(COMPRESSION_LZ4, MAGIC_V0, b"hello " * 50)
    # Kafka's own test of its V0 framing (CompressionFactory, KAFKA-3160) reads this header.
    assert frame[:7] == bytes.fromhex("04224d1860401a")
    with pytest.raises(RuntimeError):  # a strict frame decoder refuses it ...
        lz4.frame.decompress(frame)
    assert decompress_legacy(COMPRESSION_LZ4, MAGIC_V0, frame) == b"hello " * 50  # ... we do not
    assert kafka.codec.lz4_decode_old_kafka(frame) == b"hello " * 50


def test_magic1_lz4_is_a_correct_frame() -> None:
    frame = compress_legacy(COMPRESSION_LZ4, MAGIC_V1, b"hello " * 50)
    assert frame[:7] == bytes.fromhex("04224d18604082")
    assert lz4.frame.decompress(frame) == b"hello " * 50


def test_magic0_lz4_with_a_correct_header_and_content_size_still_decodes() -> None:
    # A frame from a client that computed HC correctly (and stored the content size).
    frame = lz4.frame.compress(b"correct" * 40, store_size=True)
    assert decompress_legacy(COMPRESSION_LZ4, MAGIC_V0, frame) == b"correct" * 40


def test_magic1_lz4_with_the_broken_header_is_corrupt() -> None:
    frame = compress_legacy(COMPRESSION_LZ4, MAGIC_V0, b"data" * 20)
    with pytest.raises(CorruptRecordError):
        decompress_legacy(COMPRESSION_LZ4, MAGIC_V1, frame)


def test_magic0_lz4_garbage_is_corrupt() -> None:
    for data in (b"", b"\x04\x22\x4d", b"not an lz4 frame at all", bytes.fromhex("04224d1868401a")):
        with pytest.raises(CorruptRecordError):
            decompress_legacy(COMPRESSION_LZ4, MAGIC_V0, data)


# --- parsing producer sets --------------------------------------------------------------------


@pytest.mark.parametrize("codec", LEGACY_CODECS)
@pytest.mark.parametrize("magic", MAGICS)
def test_parse_kafka_python_sets(magic: int, codec: int) -> None:
    data = kp_build(magic, codec)
    assert peek_magic(data) == magic
    messages = parse_message_set(data)
    expected_type = NO_TIMESTAMP_TYPE if magic == MAGIC_V0 else TIMESTAMP_TYPE_CREATE
    assert messages == [
        LegacyMessage(offset, ts if magic == MAGIC_V1 else -1, key, value, magic, codec, expected_type)
        for offset, ts, key, value in ROWS
    ]
    if codec == COMPRESSION_LZ4:
        # kafka-python wrote the frame header Kafka 0.8 wrote (broken HC) for magic 0, a
        # correct one (with the content size) for magic 1.
        if magic == MAGIC_V0:
            assert data[12 + 6 + 8 :][:7] == bytes.fromhex("04224d1860401a")
        else:
            assert data[12 + 14 + 8 :][:6] == bytes.fromhex("04224d186840")


@pytest.mark.parametrize("codec", COMPRESSED)
@pytest.mark.parametrize("magic", MAGICS)
def test_kafka_python_wrapper_is_one_entry(magic: int, codec: int) -> None:
    """A compressed set is one wrapper message holding every record."""
    data = kp_build(magic, codec)
    offset, size = struct.unpack_from(">qi", data)
    assert 12 + size == len(data)
    assert data[17] & 0x07 == codec


@pytest.mark.parametrize("magic", MAGICS)
def test_uncompressed_sets_are_byte_identical_to_kafka_python(magic: int) -> None:
    records = [Record(offset, ts, key, value) for offset, ts, key, value in ROWS]
    assert encode_message_set(records, magic) == kp_build(magic, COMPRESSION_NONE)


@pytest.mark.parametrize("codec", COMPRESSED)
@pytest.mark.parametrize("magic", MAGICS)
def test_wrapper_inner_set_is_byte_identical_to_kafka_python(magic: int, codec: int) -> None:
    """Compressed bytes differ between codec libraries; what they hold must not."""
    records = [Record(offset, ts, key, value) for offset, ts, key, value in ROWS]
    ours = encode_message_set(records, magic, compression=codec)
    theirs = kp_build(magic, codec)
    key_position = 12 + (6 if magic == MAGIC_V0 else 14)  # log overhead, crc/magic/attributes[/timestamp]
    assert struct.unpack_from(">i", ours, key_position)[0] == -1  # null wrapper key
    ours_inner = decompress_legacy(codec, magic, ours[key_position + 8 :])
    theirs_inner = decompress_legacy(codec, magic, theirs[key_position + 8 :])
    assert ours_inner == theirs_inner == kp_build(magic, COMPRESSION_NONE)


def test_magic1_relative_offsets_resolve_as_kafka_does() -> None:
    records = [Record(50 + i, BASE_TS + i, None, b"v%d" % i) for i in range(3)]
    broker_style = encode_message_set(records, MAGIC_V1, compression=COMPRESSION_GZIP)
    assert struct.unpack_from(">q", broker_style)[0] == 52  # wrapper: last absolute offset
    assert [m.offset for m in parse_message_set(broker_style)] == [50, 51, 52]
    assert [r[0] for r in kp_read(broker_style)] == [50, 51, 52]
    # Java producer style: wrapper offset n - 1 over relative 0..n-1.
    java_style = encode_message_set([Record(i, BASE_TS, None, b"v") for i in range(3)], MAGIC_V1, compression=COMPRESSION_GZIP)
    assert [m.offset for m in parse_message_set(java_style)] == [0, 1, 2]


def test_magic1_wrapper_offset_below_last_inner_is_invalid() -> None:
    inner = b"".join(encode_message(i, MAGIC_V1, BASE_TS, None, b"v") for i in range(3))
    wrapper = encode_message(1, MAGIC_V1, BASE_TS, None, compress_legacy(COMPRESSION_GZIP, MAGIC_V1, inner), COMPRESSION_GZIP)
    with pytest.raises(InvalidRecordError, match="below the last inner offset"):
        parse_message_set(wrapper)


def test_magic0_inner_offsets_are_taken_as_they_are() -> None:
    inner = b"".join(encode_message(offset, MAGIC_V0, -1, None, b"v") for offset in (7, 3, 9))
    wrapper = encode_message(0, MAGIC_V0, -1, None, gzip.compress(inner), COMPRESSION_GZIP)
    assert [m.offset for m in parse_message_set(wrapper)] == [7, 3, 9]


def test_log_append_time_wrapper_overrides_inner_timestamps() -> None:
    records = [Record(i, BASE_TS + i, None, b"v") for i in range(3)]
    data = encode_message_set(
        records, MAGIC_V1, compression=COMPRESSION_SNAPPY, timestamp_type=TIMESTAMP_TYPE_LOG_APPEND, log_append_time=42
    )
    messages = parse_message_set(data)
    assert [(m.timestamp, m.timestamp_type) for m in messages] == [(42, TIMESTAMP_TYPE_LOG_APPEND)] * 3
    assert [(r[1], r[2]) for r in kp_read(data)] == [(42, 1)] * 3
    # Kept as they are in the up-converted batch; a LogAppendTime topic overwrites on append.
    _header, out = decode_batch(up_convert(messages))
    assert [r.timestamp for r in out] == [42, 42, 42]


def test_empty_set_holds_nothing() -> None:
    assert parse_message_set(b"") == []
    with pytest.raises(ValueError):
        up_convert([])


# --- refusals ------------------------------------------------------------------------------


@pytest.mark.parametrize("codec", LEGACY_CODECS)
@pytest.mark.parametrize("magic", MAGICS)
def test_crc_flip_is_refused(magic: int, codec: int) -> None:
    data = bytearray(kp_build(magic, codec))
    data[-1] ^= 0x01  # last byte of the (last) message's value
    with pytest.raises(CorruptRecordError, match="CRC-32"):
        parse_message_set(bytes(data))
    data = bytearray(kp_build(magic, codec))
    data[12] ^= 0x80  # the stored crc itself
    with pytest.raises(CorruptRecordError, match="CRC-32"):
        parse_message_set(bytes(data))


@pytest.mark.parametrize("magic", MAGICS)
def test_inner_crc_flip_is_refused(magic: int) -> None:
    inner = bytearray(kp_build(magic, COMPRESSION_NONE))
    inner[-1] ^= 0x01
    value = compress_legacy(COMPRESSION_GZIP, magic, bytes(inner))
    wrapper = encode_message(3, magic, BASE_TS, None, value, COMPRESSION_GZIP)  # outer CRC is right
    with pytest.raises(CorruptRecordError, match="inner set.*CRC-32"):
        parse_message_set(wrapper)


@pytest.mark.parametrize("codec", LEGACY_CODECS)
@pytest.mark.parametrize("magic", MAGICS)
def test_truncated_set_is_refused(magic: int, codec: int) -> None:
    data = kp_build(magic, codec)
    for cut in (1, len(data) // 2, len(data) - 5):
        with pytest.raises(CorruptRecordError, match="truncated"):
            parse_message_set(data[:-cut])


def test_trailing_junk_is_refused() -> None:
    with pytest.raises(CorruptRecordError, match="truncated"):
        parse_message_set(kp_build(MAGIC_V1, COMPRESSION_NONE) + b"\x00" * 5)


def test_size_below_the_minimum_is_refused() -> None:
    with pytest.raises(CorruptRecordError, match="below the minimum"):
        parse_message_set(struct.pack(">qi", 0, 10) + b"\x00" * 10)


def test_lengths_that_do_not_fit_the_message_are_refused() -> None:
    good = encode_message(0, MAGIC_V1, BASE_TS, b"key", b"value")
    bad = bytearray(good)
    struct.pack_into(">i", bad, 12 + 14, 1000)  # key length beyond the message
    struct.pack_into(">I", bad, 12, zlib.crc32(bytes(bad[16:])))
    with pytest.raises(CorruptRecordError, match="key length 1000"):
        parse_message_set(bytes(bad))


def test_unknown_magic_is_refused() -> None:
    bad = bytearray(encode_message(0, MAGIC_V1, BASE_TS, None, b"v"))
    bad[16] = 3
    with pytest.raises(CorruptRecordError, match="magic 3"):
        parse_message_set(bytes(bad))


def test_nested_wrapper_is_invalid() -> None:
    nested = kp_build(MAGIC_V1, COMPRESSION_GZIP)
    wrapper = encode_message(
        0, MAGIC_V1, BASE_TS, None, compress_legacy(COMPRESSION_SNAPPY, MAGIC_V1, nested), COMPRESSION_SNAPPY
    )
    with pytest.raises(InvalidRecordError, match="itself compressed"):
        parse_message_set(wrapper)


def test_mixed_magic_is_invalid() -> None:
    data = encode_message(0, MAGIC_V0, -1, None, b"a") + encode_message(1, MAGIC_V1, BASE_TS, None, b"b")
    with pytest.raises(InvalidRecordError, match="magic"):
        parse_message_set(data)


def test_inner_magic_must_match_the_wrapper() -> None:
    inner = encode_message(0, MAGIC_V0, -1, None, b"a")
    wrapper = encode_message(0, MAGIC_V1, BASE_TS, None, gzip.compress(inner), COMPRESSION_GZIP)
    with pytest.raises(InvalidRecordError, match="magic"):
        parse_message_set(wrapper)


def test_wrapper_must_be_alone() -> None:
    data = kp_build(MAGIC_V1, COMPRESSION_GZIP) + encode_message(9, MAGIC_V1, BASE_TS, None, b"extra")
    with pytest.raises(InvalidRecordError, match="alone"):
        parse_message_set(data)


def test_empty_and_null_wrappers_are_invalid() -> None:
    empty = encode_message(0, MAGIC_V1, BASE_TS, None, gzip.compress(b""), COMPRESSION_GZIP)
    with pytest.raises(InvalidRecordError, match="no messages"):
        parse_message_set(empty)
    null = encode_message(0, MAGIC_V1, BASE_TS, None, None, COMPRESSION_GZIP)
    with pytest.raises(InvalidRecordError, match="null value"):
        parse_message_set(null)


def test_undecodable_wrapper_is_corrupt() -> None:
    wrapper = encode_message(0, MAGIC_V1, BASE_TS, None, b"not gzip", COMPRESSION_GZIP)
    with pytest.raises(CorruptRecordError, match="gzip"):
        parse_message_set(wrapper)


@pytest.mark.parametrize("codec", [COMPRESSION_ZSTD, 5, 7])
def test_codecs_legacy_formats_cannot_carry_are_unsupported(codec: int) -> None:
    with pytest.raises(UnsupportedCompressionError):
        parse_message_set(encode_message(0, MAGIC_V1, BASE_TS, None, b"x", codec))


# --- up-conversion ----------------------------------------------------------------------------


@pytest.mark.parametrize("codec", LEGACY_CODECS)
@pytest.mark.parametrize("magic", MAGICS)
def test_up_convert_builds_one_v2_batch_as_log_validator(magic: int, codec: int) -> None:
    batch = up_convert(parse_message_set(kp_build(magic, codec)))
    header = check_producer_batch(memoryview(batch), 0, len(batch))  # CRC-32C, count, framing
    assert header.size == len(batch)
    assert (header.base_offset, header.producer_id, header.producer_epoch, header.base_sequence) == (0, -1, -1, -1)
    assert header.compression == codec
    assert header.timestamp_type == TIMESTAMP_TYPE_CREATE
    assert not header.is_transactional and not header.is_control
    _header, records = decode_batch(batch)
    assert records == [
        Record(i, ts if magic == MAGIC_V1 else -1, key, value, ()) for i, (_offset, ts, key, value) in enumerate(ROWS)
    ]
    assert header.max_timestamp == (max(r[1] for r in ROWS) if magic == MAGIC_V1 else -1)


def test_up_convert_takes_the_topic_codec_when_given() -> None:
    batch = up_convert(parse_message_set(kp_build(MAGIC_V1, COMPRESSION_GZIP)), compression=COMPRESSION_ZSTD)
    header, records = decode_batch(batch)
    assert header.compression == COMPRESSION_ZSTD
    assert [r.value for r in records] == [r[3] for r in ROWS]


@pytest.mark.parametrize("codec", LEGACY_CODECS)
@pytest.mark.parametrize("magic", MAGICS)
def test_up_then_down_convert_round_trips(magic: int, codec: int) -> None:
    batch = bytearray(up_convert(parse_message_set(kp_build(magic, codec))))
    struct.pack_into(">q", batch, 0, 1000)  # the log's offset assignment
    back = down_convert(bytes(batch), magic)
    messages = parse_message_set(back)
    assert [(m.offset, m.key, m.value, m.compression) for m in messages] == [
        (1000 + i, key, value, codec) for i, (_o, _t, key, value) in enumerate(ROWS)
    ]
    assert [m.timestamp for m in messages] == [ts if magic == MAGIC_V1 else -1 for _o, ts, _k, _v in ROWS]
    assert [r[0] for r in kp_read(back)] == [1000 + i for i in range(len(ROWS))]


# --- down-conversion --------------------------------------------------------------------------


@pytest.mark.parametrize("codec", LEGACY_CODECS)
@pytest.mark.parametrize("magic", MAGICS)
def test_down_convert_reads_back_in_kafka_python(magic: int, codec: int) -> None:
    first = encode_batch(v2_records(100, 4, headers=True), base_offset=100, compression=codec)
    marker = encode_control_batch(CONTROL_TYPE_COMMIT, 0, producer_id=7, producer_epoch=0, base_offset=104, timestamp=BASE_TS)
    second = encode_batch(v2_records(105, 3, ts=BASE_TS + 50), base_offset=105, compression=COMPRESSION_NONE)
    out = down_convert(first + marker + second, magic)
    expected = v2_records(100, 4) + v2_records(105, 3, ts=BASE_TS + 50)  # no marker, no headers
    rows: list[tuple[Any, ...]]
    if magic == MAGIC_V0:
        rows = [(r.offset, None, None, r.key, r.value) for r in expected]
    else:
        rows = [(r.offset, r.timestamp, TIMESTAMP_TYPE_CREATE, r.key, r.value) for r in expected]
    assert kp_read(out) == rows
    entries = 1 + 3 if codec != COMPRESSION_NONE else 4 + 3
    assert _count_entries(out) == entries


def _count_entries(data: bytes) -> int:
    count, position = 0, 0
    while position < len(data):
        position += 12 + struct.unpack_from(">i", data, position + 8)[0]
        count += 1
    return count


@pytest.mark.parametrize("codec", COMPRESSED)
def test_down_convert_magic1_wrapper_layout(codec: int) -> None:
    out = down_convert(encode_batch(v2_records(200, 3), base_offset=200, compression=codec), MAGIC_V1)
    offset, _size, _crc, magic, attributes, timestamp = struct.unpack_from(">qiIbbq", out)
    assert (offset, magic, attributes, timestamp) == (202, 1, codec, BASE_TS + 2)  # last offset, max timestamp
    inner = decompress_legacy(codec, MAGIC_V1, out[12 + 22 :])
    assert [m.offset for m in _raw_offsets(inner)] == [0, 1, 2]


@pytest.mark.parametrize("codec", COMPRESSED)
def test_down_convert_magic0_wrapper_uses_absolute_offsets(codec: int) -> None:
    out = down_convert(encode_batch(v2_records(200, 3), base_offset=200, compression=codec), MAGIC_V0)
    assert struct.unpack_from(">q", out)[0] == 202
    inner = decompress_legacy(codec, MAGIC_V0, out[12 + 14 :])
    assert [m.offset for m in _raw_offsets(inner)] == [200, 201, 202]
    if codec == COMPRESSION_LZ4:
        assert out[12 + 14 : 12 + 14 + 7] == bytes.fromhex("04224d1860401a")


def _raw_offsets(inner: bytes) -> list[Record]:
    """The inner entries' offsets as written (parse_message_set would resolve them)."""
    out, position = [], 0
    while position < len(inner):
        offset, size = struct.unpack_from(">qi", inner, position)
        out.append(Record(offset, 0, None, None))
        position += 12 + size
    return out


@pytest.mark.parametrize("codec", [COMPRESSION_NONE, COMPRESSION_GZIP])
def test_down_convert_log_append_time(codec: int) -> None:
    records = v2_records(10, 3)
    batch = encode_batch(records, base_offset=10, compression=codec, timestamp_type=TIMESTAMP_TYPE_LOG_APPEND, max_timestamp=99)
    out = down_convert(batch, MAGIC_V1)
    assert [(r[0], r[1], r[2]) for r in kp_read(out)] == [(10, 99, 1), (11, 99, 1), (12, 99, 1)]
    assert [(m.timestamp, m.timestamp_type) for m in parse_message_set(out)] == [(99, TIMESTAMP_TYPE_LOG_APPEND)] * 3
    # Magic 0 has neither timestamps nor the type bit.
    out0 = down_convert(batch, MAGIC_V0)
    assert out0[17] & 0x08 == 0
    assert [(r[1], r[2]) for r in kp_read(out0)] == [(None, None)] * 3


def test_down_convert_drops_a_trailing_partial_batch() -> None:
    whole = encode_batch(v2_records(0, 3), base_offset=0)
    partial = encode_batch(v2_records(3, 3), base_offset=3, compression=COMPRESSION_GZIP)
    expected = down_convert(whole, MAGIC_V1)
    for cut in (1, 12, 40, len(partial) - 1):
        assert down_convert(whole + partial[:cut], MAGIC_V1) == expected
    assert down_convert(partial[:30], MAGIC_V1) == b""


def test_down_convert_drops_uncompressed_records_below_the_fetch_offset() -> None:
    plain = encode_batch(v2_records(100, 5), base_offset=100)
    assert [r[0] for r in kp_read(down_convert(plain, MAGIC_V1, first_offset=102))] == [102, 103, 104]
    # A wrapper keeps them all: the client skips what it did not ask for.
    packed = encode_batch(v2_records(100, 5), base_offset=100, compression=COMPRESSION_GZIP)
    assert [r[0] for r in kp_read(down_convert(packed, MAGIC_V1, first_offset=102))] == [100, 101, 102, 103, 104]
    assert down_convert(plain, MAGIC_V1, first_offset=105) == b""


def test_down_convert_stops_at_max_bytes_but_returns_the_first_entry() -> None:
    data = encode_batch(v2_records(0, 10), base_offset=0) + encode_batch(
        v2_records(10, 5), base_offset=10, compression=COMPRESSION_GZIP
    )
    everything = down_convert(data, MAGIC_V1)
    entry = len(encode_message(0, MAGIC_V1, BASE_TS, b"key-0", b"value-0 " * 20))
    three = down_convert(data, MAGIC_V1, max_bytes=3 * entry + 1)
    assert len(three) <= 3 * entry + 1
    assert [r[0] for r in kp_read(three)] == [0, 1, 2]
    assert everything.startswith(three)
    one = down_convert(data, MAGIC_V1, max_bytes=1)
    assert [r[0] for r in kp_read(one)] == [0]
    # A wrapper is all or nothing: offsets 10-14 come whole or not at all.
    plain_size = len(down_convert(data[: len(encode_batch(v2_records(0, 10), base_offset=0))], MAGIC_V1))
    assert down_convert(data, MAGIC_V1, max_bytes=plain_size + 10) == everything[:plain_size]
    assert down_convert(data, MAGIC_V1, max_bytes=len(everything)) == everything


def test_down_convert_zstd_first_is_unsupported() -> None:
    zstd_batch = encode_batch(v2_records(0, 3), base_offset=0, compression=COMPRESSION_ZSTD)
    with pytest.raises(UnsupportedCompressionError, match="zstd"):
        down_convert(zstd_batch, MAGIC_V1)
    # After records it can deliver, the set ends before the zstd batch instead.
    plain = encode_batch(v2_records(0, 2), base_offset=0)
    zstd_later = encode_batch(v2_records(2, 3), base_offset=2, compression=COMPRESSION_ZSTD)
    assert [r[0] for r in kp_read(down_convert(plain + zstd_later, MAGIC_V0))] == [0, 1]


def test_down_convert_skips_control_and_empty_batches() -> None:
    marker = encode_control_batch(CONTROL_TYPE_COMMIT, 3, producer_id=1, producer_epoch=0, base_offset=0, timestamp=BASE_TS)
    empty = encode_batch([], base_offset=1, last_offset_delta=2)  # all records compacted away
    tail = encode_batch(v2_records(4, 1), base_offset=4)
    assert [r[0] for r in kp_read(down_convert(marker + empty + tail, MAGIC_V1))] == [4]
    assert down_convert(marker, MAGIC_V1) == b""


def test_down_convert_rejects_bad_targets() -> None:
    with pytest.raises(ValueError):
        down_convert(b"", 2)


# --- small helpers ----------------------------------------------------------------------------


def test_peek_magic_and_fetch_magic() -> None:
    assert peek_magic(encode_batch(v2_records(0, 1))) == 2
    assert peek_magic(b"xx" + kp_build(MAGIC_V0, COMPRESSION_NONE), 2) == 0
    with pytest.raises(CorruptRecordError):
        peek_magic(b"\x00" * 16)
    assert [fetch_magic(v) for v in range(6)] == [0, 0, 1, 1, 2, 2]


@settings(max_examples=60, deadline=None)
@given(
    magic=st.sampled_from(MAGICS),
    codec=st.sampled_from(LEGACY_CODECS),
    rows=st.lists(
        st.tuples(st.integers(-1, 2**50), st.none() | st.binary(max_size=40), st.none() | st.binary(max_size=200)),
        min_size=1,
        max_size=12,
    ),
)
def test_encode_parse_round_trip(magic: int, codec: int, rows: list[tuple[int, bytes | None, bytes | None]]) -> None:
    records = [Record(7 + i, ts, key, value) for i, (ts, key, value) in enumerate(rows)]
    data = encode_message_set(records, magic, compression=codec)
    messages = parse_message_set(data)
    assert [(m.offset, m.key, m.value) for m in messages] == [(r.offset, r.key, r.value) for r in records]
    assert [m.timestamp for m in messages] == [r.timestamp if magic == MAGIC_V1 else -1 for r in records]
    assert [(r[0], r[3], r[4]) for r in kp_read(data)] == [(r.offset, r.key, r.value) for r in records]
