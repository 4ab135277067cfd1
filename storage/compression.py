"""Batch compression codecs behind one interface, keyed by the attribute bits 0-2.

    codec  name    what goes on the wire (the records section of a v2 batch)
    -----  ------  --------------------------------------------------------------
        0  none    the records as they are
        1  gzip    one or more gzip members (RFC 1952), as java.util.zip.GZIPOutputStream
        2  snappy  xerial framing (Java client, kafka-python) or raw snappy (librdkafka)
        3  lz4     LZ4 frame format; Kafka writes independent 64 KiB blocks, no content
                   size, no checksums
        4  zstd    one or more zstd frames, often without the content size in the header

Xerial snappy framing (snappy-java's SnappyOutputStream; big-endian)::

    offset  size  field
    ------  ----  -----------------------------------------------------------
         0     8  magic              b"\\x82SNAPPY\\x00"
         8     4  version            i32   1
        12     4  compatibleVersion  i32   1
        16     4  block 1 length     i32   bytes of the raw snappy block that follows
        20     n  block 1            raw snappy of at most 32 KiB of input
         …        block 2 length, block 2, … until the end of the data

A raw snappy stream can never begin with the xerial magic: b"\\x82S" would be the
uncompressed-length varint and the next byte b"N" a copy element, and a copy cannot
come first (there is nothing to copy from yet). So the 8-byte magic tells the two
apart without guessing. The version fields are ignored when reading: only one layout
was ever defined, and some producers write those two ints little-endian.

Errors: an unknown codec raises UnsupportedCompressionError, data that does not decode
(garbage, truncated, trailing junk) raises CorruptRecordError.
"""

from __future__ import annotations

import gzip
import struct
import zlib
from typing import Callable, Protocol

import cramjam
import lz4.frame
import zstandard

from storage.batch import (
    COMPRESSION_GZIP,
    COMPRESSION_LZ4,
    COMPRESSION_NONE,
    COMPRESSION_SNAPPY,
    COMPRESSION_ZSTD,
)
from storage.errors import CorruptRecordError, UnsupportedCompressionError

Buffer = bytes | bytearray | memoryview

XERIAL_MAGIC = b"\x82SNAPPY\x00"
XERIAL_VERSION = 1
XERIAL_COMPATIBLE_VERSION = 1
XERIAL_HEADER = struct.Struct(">8sii")
assert XERIAL_HEADER.size == 16
XERIAL_BLOCK_LENGTH = struct.Struct(">i")
assert XERIAL_BLOCK_LENGTH.size == 4
# snappy-java's default block size, which the Java client keeps.
XERIAL_BLOCK_SIZE = 32 * 1024

# Deflater.DEFAULT_COMPRESSION (zlib level 6) is what Kafka's gzip uses by default; the
# stdlib default (9) is several times slower for a few percent.
GZIP_DEFAULT_LEVEL = 6
ZSTD_DEFAULT_LEVEL = 3

# A snappy element of n compressed bytes yields at most 64 bytes per 3 input bytes
# (a 2-byte-offset copy). A declared length beyond this bound is a lie: refuse it before
# the decoder allocates a buffer that large.
_SNAPPY_MAX_RATIO = 22


class _StreamDecompressor(Protocol):
    eof: bool
    unused_data: bytes

    def decompress(self, data: Buffer) -> bytes: ...


def compress(codec: int, data: Buffer, *, level: int | None = None) -> bytes:
    """Compress a records section with ``codec``; ``level`` as compression.<codec>.level."""
    if codec == COMPRESSION_NONE:
        return bytes(data)
    if codec == COMPRESSION_GZIP:
        return gzip.compress(data, compresslevel=GZIP_DEFAULT_LEVEL if level is None else level, mtime=0)
    if codec == COMPRESSION_SNAPPY:
        return _xerial_compress(data)
    if codec == COMPRESSION_LZ4:
        return _lz4_compress(data, level)
    if codec == COMPRESSION_ZSTD:
        return zstandard.ZstdCompressor(level=ZSTD_DEFAULT_LEVEL if level is None else level).compress(data)
    raise UnsupportedCompressionError(f"unknown compression codec {codec}")


def decompress(codec: int, data: Buffer) -> bytes:
    """Decompress a records section; raises CorruptRecordError when it does not decode."""
    if codec == COMPRESSION_NONE:
        return bytes(data)
    if codec == COMPRESSION_GZIP:
        return _gzip_decompress(data)
    if codec == COMPRESSION_SNAPPY:
        return _snappy_decompress(data)
    if codec == COMPRESSION_LZ4:
        return _decompress_frames(data, lz4.frame.LZ4FrameDecompressor, (RuntimeError,), "lz4")
    if codec == COMPRESSION_ZSTD:
        return _decompress_frames(data, _zstd_decompressobj, (zstandard.ZstdError,), "zstd")
    raise UnsupportedCompressionError(f"unknown compression codec {codec}")


# --- gzip -------------------------------------------------------------------------------


def _gzip_decompress(data: Buffer) -> bytes:
    """All members, as GZIPInputStream reads them; an empty input is not a gzip stream."""
    if len(data) == 0:
        raise CorruptRecordError("gzip: empty input")
    try:
        return gzip.decompress(data)
    except (OSError, EOFError, zlib.error) as exc:  # BadGzipFile is an OSError
        raise CorruptRecordError(f"gzip: {exc}") from exc


# --- snappy -----------------------------------------------------------------------------


def _xerial_compress(data: Buffer) -> bytes:
    """Xerial framing, as the Java client writes it, so every client can read it back."""
    view = memoryview(data)
    parts = [XERIAL_HEADER.pack(XERIAL_MAGIC, XERIAL_VERSION, XERIAL_COMPATIBLE_VERSION)]
    for start in range(0, len(view), XERIAL_BLOCK_SIZE):
        block = bytes(cramjam.snappy.compress_raw(view[start : start + XERIAL_BLOCK_SIZE]))
        parts.append(XERIAL_BLOCK_LENGTH.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _snappy_decompress(data: Buffer) -> bytes:
    view = memoryview(data)
    if view[: len(XERIAL_MAGIC)] == XERIAL_MAGIC:
        return _xerial_decompress(view)
    return _raw_snappy_decompress(view)


def _xerial_decompress(view: memoryview) -> bytes:
    """Blocks after the 16-byte header, each a length-prefixed raw snappy block."""
    if len(view) < XERIAL_HEADER.size:
        raise CorruptRecordError(f"snappy: xerial header truncated ({len(view)} bytes)")
    out = []
    position = XERIAL_HEADER.size
    end = len(view)
    while position < end:
        if end - position < XERIAL_BLOCK_LENGTH.size:
            raise CorruptRecordError(f"snappy: xerial block length truncated at {position}")
        (length,) = XERIAL_BLOCK_LENGTH.unpack_from(view, position)
        position += XERIAL_BLOCK_LENGTH.size
        if length < 0 or position + length > end:
            raise CorruptRecordError(f"snappy: xerial block of {length} bytes at {position} runs past the end")
        out.append(_raw_snappy_decompress(view[position : position + length]))
        position += length
    return b"".join(out)


def _raw_snappy_decompress(view: memoryview) -> bytes:
    try:
        declared = cramjam.snappy.decompress_raw_len(view)
        if declared > len(view) * _SNAPPY_MAX_RATIO:
            raise CorruptRecordError(f"snappy: {len(view)} bytes claim to hold {declared}")
        return bytes(cramjam.snappy.decompress_raw(view))
    except cramjam.DecompressionError as exc:
        message = str(exc)  # cramjam's messages already start with "snappy: "
        raise CorruptRecordError(message if message.startswith("snappy") else f"snappy: {message}") from exc


# --- lz4 and zstd -----------------------------------------------------------------------


def _lz4_compress(data: Buffer, level: int | None) -> bytes:
    """Frame settings of Kafka's KafkaLZ4BlockOutputStream: independent 64 KiB blocks."""
    return lz4.frame.compress(
        data,
        compression_level=0 if level is None else level,
        block_size=lz4.frame.BLOCKSIZE_MAX64KB,
        block_linked=False,
        content_checksum=False,
        store_size=False,
    )


def _zstd_decompressobj() -> _StreamDecompressor:
    """One frame at a time; streaming, so frames without a content size decode too."""
    return zstandard.ZstdDecompressor().decompressobj()  # type: ignore[return-value]


def _decompress_frames(
    data: Buffer,
    new_decompressor: Callable[[], _StreamDecompressor],
    errors: tuple[type[Exception], ...],
    name: str,
) -> bytes:
    """Decode concatenated frames to the end of ``data``; each frame must be complete.

    A streaming decompressor needs no size up front (zstd frames from librdkafka and
    zstd-jni often carry none) and reports ``eof`` only once a frame's end is seen, which
    is how a truncated frame is told from a short one.
    """
    out = []
    remaining: Buffer = data
    try:
        while True:
            decompressor = new_decompressor()
            out.append(decompressor.decompress(remaining))
            if not decompressor.eof:
                raise CorruptRecordError(f"{name}: frame truncated or empty input")
            remaining = decompressor.unused_data
            if not remaining:
                return b"".join(out)
    except errors as exc:
        raise CorruptRecordError(f"{name}: {exc}") from exc
