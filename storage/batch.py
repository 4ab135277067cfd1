"""Record batch v2 header: parse, validate and patch without touching the records.

Layout of one batch (Kafka message format v2, magic 2; big-endian)::

    offset  size  field
    ------  ----  -----------------------------------------------------------
         0     8  baseOffset            i64   rewritten on append (outside the CRC)
         8     4  batchLength           i32   bytes after this field = total - 12
        12     4  partitionLeaderEpoch  i32   rewritten on append (outside the CRC)
        16     1  magic                 i8    must be 2
        17     4  crc                   u32   CRC-32C of bytes [21, end)
        21     2  attributes            i16   bits 0-2 compression, 3 timestamp type,
                                              4 transactional, 5 control, 6 delete horizon
        23     4  lastOffsetDelta       i32
        27     8  baseTimestamp         i64   (firstTimestamp)
        35     8  maxTimestamp          i64   rewritten for LogAppendTime topics
        43     8  producerId            i64
        51     2  producerEpoch         i16
        53     4  baseSequence          i32
        57     4  recordCount           i32
        61     …  records (possibly compressed)

``LOG_OVERHEAD`` (12) is baseOffset + batchLength: the bytes a reader needs before it
knows how long the batch is. Only the header is parsed on the append path; records are
opaque bytes here (see records.py for the record codec).
"""

from __future__ import annotations

import struct
from typing import Iterator, NamedTuple

import crc32c

from storage.errors import CorruptRecordError
from storage.types import Offset

HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = 61
assert HEADER.size == HEADER_SIZE

LOG_OVERHEAD_STRUCT = struct.Struct(">qi")
LOG_OVERHEAD = 12
assert LOG_OVERHEAD_STRUCT.size == LOG_OVERHEAD

# Field positions, named after the diagram above.
BASE_OFFSET_POS = 0
BATCH_LENGTH_POS = 8
PARTITION_LEADER_EPOCH_POS = 12
MAGIC_POS = 16
CRC_POS = 17
ATTRIBUTES_POS = 21
MAX_TIMESTAMP_POS = 35
PRODUCER_ID_POS = 43
CRC_START = ATTRIBUTES_POS

I64 = struct.Struct(">q")
I32 = struct.Struct(">i")
U32 = struct.Struct(">I")
I16 = struct.Struct(">h")

MAGIC_V2 = 2
# The smallest batchLength a v2 batch can have: the header after LOG_OVERHEAD, no records.
MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
DELETE_HORIZON_MASK = 0x40

COMPRESSION_NONE = 0
COMPRESSION_GZIP = 1
COMPRESSION_SNAPPY = 2
COMPRESSION_LZ4 = 3
COMPRESSION_ZSTD = 4

TIMESTAMP_TYPE_CREATE = 0
TIMESTAMP_TYPE_LOG_APPEND = 1


class BatchHeader(NamedTuple):
    """The 61-byte header of one batch, decoded. ``size`` is the whole batch in bytes.

    A NamedTuple rather than a frozen dataclass: it is built once per batch on the append
    path, and tuple construction costs a quarter of a frozen dataclass's (measured).
    """

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def size(self) -> int:
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> Offset:
        return Offset(self.base_offset + self.last_offset_delta)

    @property
    def next_offset(self) -> Offset:
        return Offset(self.base_offset + self.last_offset_delta + 1)

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        return (self.attributes & TIMESTAMP_TYPE_MASK) >> 3

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & DELETE_HORIZON_MASK)

    @property
    def last_sequence(self) -> int:
        """Sequence of the last record; -1 when the batch carries no sequence."""
        if self.base_sequence < 0:
            return -1
        return (self.base_sequence + self.last_offset_delta) % (1 << 31)


def parse_header(buf: bytes | bytearray | memoryview | object, position: int = 0) -> BatchHeader:
    """Decode the header at ``position`` of ``buf`` (bytes, memoryview or mmap)."""
    return BatchHeader(*HEADER.unpack_from(buf, position))  # type: ignore[arg-type]


def producer_id_at(buf: bytes | bytearray | memoryview, position: int = 0) -> int:
    """The producerId of the batch at ``position`` (-1: not idempotent), without building
    a whole header: a Produce asks this of every batch before anything else."""
    return int(I64.unpack_from(buf, position + PRODUCER_ID_POS)[0])


def compute_crc(buf: memoryview, position: int, size: int) -> int:
    """CRC-32C over attributes..end of the batch at ``position``."""
    return int(crc32c.crc32c(buf[position + CRC_START : position + size]))


def check_batch_frame(buf: memoryview, position: int, end: int) -> BatchHeader:
    """Check what recovery checks: the batch fits in [position, end), magic 2, CRC-32C.

    Raises CorruptRecordError with the position of the first problem. Compacted batches
    (fewer records than lastOffsetDelta + 1) pass: recovery must accept them.
    """
    if end - position < HEADER_SIZE:
        raise CorruptRecordError(f"{end - position} bytes left, less than a batch header", position=position)
    header = parse_header(buf, position)
    if header.batch_length < MIN_BATCH_LENGTH:
        raise CorruptRecordError(f"batchLength {header.batch_length} below the minimum {MIN_BATCH_LENGTH}", position=position)
    size = header.size
    if position + size > end:
        raise CorruptRecordError(f"batch of {size} bytes runs past the end ({end - position} left)", position=position)
    if header.magic != MAGIC_V2:
        raise CorruptRecordError(f"magic {header.magic}, expected 2", position=position)
    if header.last_offset_delta < 0:
        raise CorruptRecordError(f"negative lastOffsetDelta {header.last_offset_delta}", position=position)
    actual = compute_crc(buf, position, size)
    if actual != header.crc:
        raise CorruptRecordError(f"CRC-32C {actual:#010x} does not match the stored {header.crc:#010x}", position=position)
    return header


def check_producer_batch(buf: memoryview, position: int, end: int) -> BatchHeader:
    """Everything recovery checks, plus what a batch fresh from a producer must satisfy.

    A producer's batch is never compacted, so its record count must be lastOffsetDelta + 1.
    """
    header = check_batch_frame(buf, position, end)
    if header.record_count != header.last_offset_delta + 1:
        raise CorruptRecordError(
            f"record count {header.record_count} disagrees with lastOffsetDelta {header.last_offset_delta}",
            position=position,
        )
    return header


def iter_headers(buf: memoryview, start: int = 0, end: int | None = None) -> Iterator[tuple[int, BatchHeader]]:
    """Yield (position, header) for each batch in buf[start:end], checking nothing."""
    end = len(buf) if end is None else end
    position = start
    while position + LOG_OVERHEAD <= end:
        _base_offset, batch_length = LOG_OVERHEAD_STRUCT.unpack_from(buf, position)
        if batch_length < MIN_BATCH_LENGTH or position + LOG_OVERHEAD + batch_length > end:
            return
        yield position, parse_header(buf, position)
        position += LOG_OVERHEAD + batch_length


def set_base_offset_and_epoch(buf: memoryview | object, position: int, base_offset: int, leader_epoch: int) -> None:
    """Assign offsets in place. Both fields lie outside the CRC: the CRC stays valid."""
    I64.pack_into(buf, position + BASE_OFFSET_POS, base_offset)  # type: ignore[arg-type]
    I32.pack_into(buf, position + PARTITION_LEADER_EPOCH_POS, leader_epoch)  # type: ignore[arg-type]


def set_log_append_time(buf: memoryview, position: int, size: int, timestamp_ms: int) -> None:
    """For LogAppendTime topics: maxTimestamp := append time, set the type bit, redo the CRC."""
    attributes = I16.unpack_from(buf, position + ATTRIBUTES_POS)[0]
    I16.pack_into(buf, position + ATTRIBUTES_POS, attributes | TIMESTAMP_TYPE_MASK)
    I64.pack_into(buf, position + MAX_TIMESTAMP_POS, timestamp_ms)
    U32.pack_into(buf, position + CRC_POS, compute_crc(buf, position, size))
