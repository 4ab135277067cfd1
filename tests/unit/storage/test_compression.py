"""Batch compression codecs: round trips, the two snappy framings, corrupt input."""

from __future__ import annotations

import gzip
import struct

import cramjam
import lz4.frame
import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from storage.batch import (
    COMPRESSION_GZIP,
    COMPRESSION_LZ4,
    COMPRESSION_NONE,
    COMPRESSION_SNAPPY,
    COMPRESSION_ZSTD,
)
from storage.compression import XERIAL_BLOCK_SIZE, XERIAL_MAGIC, compress, decompress
from storage.errors import CorruptRecordError, UnsupportedCompressionError

ALL_CODECS = [COMPRESSION_NONE, COMPRESSION_GZIP, COMPRESSION_SNAPPY, COMPRESSION_LZ4, COMPRESSION_ZSTD]
COMPRESSED_CODECS = ALL_CODECS[1:]
FAST = settings(max_examples=150, deadline=None)

# Mixed data: compressible runs and noise, so both literals and copies get exercised.
LARGE = (b"castle " * 9000) + bytes(range(256)) * 200 + b"tail"


@pytest.mark.parametrize("codec", ALL_CODECS)
@FAST
@given(data=st.binary(max_size=4096))
def test_round_trip(codec: int, data: bytes) -> None:
    assert decompress(codec, compress(codec, data)) == data


@pytest.mark.parametrize("codec", ALL_CODECS)
def test_round_trip_empty_and_large(codec: int) -> None:
    assert decompress(codec, compress(codec, b"")) == b""
    assert decompress(codec, compress(codec, LARGE)) == LARGE


@pytest.mark.parametrize("codec", ALL_CODECS)
def test_decompress_accepts_memoryview_slice(codec: int) -> None:
    framed = b"junk" + compress(codec, LARGE) + b"junk"
    assert decompress(codec, memoryview(framed)[4:-4]) == LARGE


# --- snappy -----------------------------------------------------------------------------


def test_snappy_writes_xerial_framing_in_32k_blocks() -> None:
    out = compress(COMPRESSION_SNAPPY, LARGE)
    assert out[:16] == XERIAL_MAGIC + struct.pack(">ii", 1, 1)
    position, blocks = 16, []
    while position < len(out):
        (length,) = struct.unpack_from(">i", out, position)
        blocks.append(bytes(cramjam.snappy.decompress_raw(out[position + 4 : position + 4 + length])))
        position += 4 + length
    assert position == len(out)
    assert all(len(block) == XERIAL_BLOCK_SIZE for block in blocks[:-1])
    assert 0 < len(blocks[-1]) <= XERIAL_BLOCK_SIZE
    assert b"".join(blocks) == LARGE


@FAST
@given(data=st.binary(max_size=4096))
def test_raw_snappy_as_librdkafka_writes_decodes(data: bytes) -> None:
    raw = bytes(cramjam.snappy.compress_raw(data))
    assert decompress(COMPRESSION_SNAPPY, raw) == data


def test_raw_snappy_large() -> None:
    assert decompress(COMPRESSION_SNAPPY, bytes(cramjam.snappy.compress_raw(LARGE))) == LARGE


def _raw_snappy_literal(data: bytes) -> bytes:
    """A raw snappy stream written by hand: length varint, one literal element (< 61 bytes)."""
    assert 0 < len(data) <= 60
    return bytes([len(data), (len(data) - 1) << 2]) + data


def test_golden_xerial_stream_built_from_the_layout() -> None:
    block1 = _raw_snappy_literal(b"hello ")
    block2 = _raw_snappy_literal(b"castle")
    stream = (
        b"\x82SNAPPY\x00"  # magic
        + b"\x00\x00\x00\x01"  # version 1
        + b"\x00\x00\x00\x01"  # compatible version 1
        + struct.pack(">i", len(block1))
        + block1
        + struct.pack(">i", len(block2))
        + block2
    )
    assert decompress(COMPRESSION_SNAPPY, stream) == b"hello castle"


def test_xerial_version_fields_are_ignored() -> None:
    """Some producers write the two version ints little-endian; the blocks still decode."""
    block = _raw_snappy_literal(b"abc")
    stream = XERIAL_MAGIC + struct.pack("<ii", 1, 1) + struct.pack(">i", len(block)) + block
    assert decompress(COMPRESSION_SNAPPY, stream) == b"abc"


@pytest.mark.parametrize(
    "stream",
    [
        XERIAL_MAGIC + b"\x00\x00\x00\x01",  # header cut short
        XERIAL_MAGIC + struct.pack(">ii", 1, 1) + b"\x00\x00",  # block length cut short
        XERIAL_MAGIC + struct.pack(">ii", 1, 1) + struct.pack(">i", 50) + b"\x05\x10abc",  # block cut short
        XERIAL_MAGIC + struct.pack(">ii", 1, 1) + struct.pack(">i", -1),  # negative length
        XERIAL_MAGIC + struct.pack(">ii", 1, 1) + struct.pack(">i", 3) + b"\x09\x10a",  # bad block
    ],
)
def test_corrupt_xerial_raises(stream: bytes) -> None:
    with pytest.raises(CorruptRecordError):
        decompress(COMPRESSION_SNAPPY, stream)


def test_raw_snappy_with_absurd_declared_length_is_refused() -> None:
    with pytest.raises(CorruptRecordError):
        decompress(COMPRESSION_SNAPPY, b"\xff\xff\xff\xff\x0f\x00")


# --- lz4 / zstd / gzip specifics --------------------------------------------------------


def test_lz4_writes_kafka_frame_settings() -> None:
    out = compress(COMPRESSION_LZ4, LARGE)
    info = lz4.frame.get_frame_info(out)
    assert info["block_linked"] is False
    assert info["content_checksum"] is False
    assert info["content_size"] == 0
    assert info["block_size_id"] == 4  # 64 KiB


def test_lz4_reads_linked_blocks_with_content_size() -> None:
    """Other writers (kafka-python's default lz4.frame settings) use linked blocks."""
    assert decompress(COMPRESSION_LZ4, lz4.frame.compress(LARGE, block_linked=True, store_size=True)) == LARGE


def test_zstd_frame_without_content_size() -> None:
    frame = zstandard.ZstdCompressor(write_content_size=False).compress(LARGE)
    assert zstandard.get_frame_parameters(frame).content_size == zstandard.CONTENTSIZE_UNKNOWN
    assert decompress(COMPRESSION_ZSTD, frame) == LARGE


def test_zstd_streamed_frame_and_concatenated_frames() -> None:
    chunker = zstandard.ZstdCompressor().chunker(chunk_size=4096)
    streamed = b"".join([*chunker.compress(LARGE), *chunker.finish()])
    second = zstandard.ZstdCompressor(write_content_size=False).compress(b"more")
    assert decompress(COMPRESSION_ZSTD, streamed) == LARGE
    assert decompress(COMPRESSION_ZSTD, streamed + second) == LARGE + b"more"


def test_lz4_concatenated_frames() -> None:
    assert decompress(COMPRESSION_LZ4, compress(COMPRESSION_LZ4, b"ab") + compress(COMPRESSION_LZ4, b"cd")) == b"abcd"


def test_gzip_is_gzip_format_with_members() -> None:
    out = compress(COMPRESSION_GZIP, LARGE)
    assert out[:2] == b"\x1f\x8b"
    assert gzip.decompress(out) == LARGE
    assert decompress(COMPRESSION_GZIP, gzip.compress(b"ab") + gzip.compress(b"cd")) == b"abcd"


@pytest.mark.parametrize("codec", COMPRESSED_CODECS)
@pytest.mark.parametrize("garbage", [b"", b"\x05", b"this is not compressed data at all", bytes(range(256))])
def test_garbage_raises_corrupt(codec: int, garbage: bytes) -> None:
    with pytest.raises(CorruptRecordError):
        decompress(codec, garbage)


@pytest.mark.parametrize("codec", COMPRESSED_CODECS)
def test_truncated_raises_corrupt(codec: int) -> None:
    out = compress(codec, LARGE)
    for cut in (1, 5, len(out) // 2):
        with pytest.raises(CorruptRecordError):
            decompress(codec, out[:-cut])


@pytest.mark.parametrize("codec", [COMPRESSION_GZIP, COMPRESSION_LZ4, COMPRESSION_ZSTD])
def test_trailing_junk_raises_corrupt(codec: int) -> None:
    with pytest.raises(CorruptRecordError):
        decompress(codec, compress(codec, LARGE) + b"junk")


@FAST
@given(codec=st.sampled_from(COMPRESSED_CODECS), data=st.binary(max_size=512))
def test_random_bytes_never_leak_other_errors(codec: int, data: bytes) -> None:
    try:
        decompress(codec, data)
    except CorruptRecordError:
        pass


@pytest.mark.parametrize("codec", [5, 6, 7, -1, 100])
def test_unknown_codec(codec: int) -> None:
    with pytest.raises(UnsupportedCompressionError):
        compress(codec, b"x")
    with pytest.raises(UnsupportedCompressionError):
        decompress(codec, b"x")


@pytest.mark.parametrize("codec", [COMPRESSION_GZIP, COMPRESSION_LZ4, COMPRESSION_ZSTD])
def test_levels(codec: int) -> None:
    for level in (1, 9):
        assert decompress(codec, compress(codec, LARGE, level=level)) == LARGE
