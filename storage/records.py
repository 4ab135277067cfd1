"""Record codec for message format v2: the bytes after the 61-byte batch header.

The header is batch.py's business; this module decodes and builds what follows it,
decompressing with compression.py. One record (lengths are zigzag varints, the two
deltas too; see the Kafka docs, "Record")::

    field           type      meaning
    --------------  --------  ------------------------------------------------------
    length          varint    bytes of the record after this field
    attributes      int8      unused, written 0
    timestampDelta  varlong   timestamp - batch baseTimestamp
    offsetDelta     varint    offset - batch baseOffset
    keyLength       varint    -1 for a null key
    key             bytes
    valueLength     varint    -1 for a null value
    value           bytes
    headerCount     varint
    headers         per header: keyLength varint, key (UTF-8, never null),
                                valueLength varint (-1 for null), value bytes

Zigzag maps signed to unsigned so small magnitudes stay short: 0 -> 0, -1 -> 1, 1 -> 2,
-2 -> 3, …; the result is written 7 bits at a time, low group first, high bit set on
every byte but the last (a varint takes at most 5 bytes, a varlong at most 10).

Control records (control bit 5 of the batch attributes) carry, for transaction markers::

    key    int16 version (0), int16 type (0 ABORT, 1 COMMIT)
    value  int16 version (0), int32 coordinatorEpoch

Offsets and timestamps in ``Record`` are absolute. In a LogAppendTime batch every
record's timestamp is the batch maxTimestamp, as clients report it. Compacted batches
keep their baseOffset and lastOffsetDelta while records go missing, so the offset
deltas of a batch may have gaps and recordCount may be below lastOffsetDelta + 1.
"""

from __future__ import annotations

import struct
import time
from dataclasses import dataclass
from typing import Any, Iterable, Iterator, Sequence

from storage.batch import (
    COMPRESSION_MASK,
    COMPRESSION_NONE,
    CONTROL_MASK,
    CRC_POS,
    DELETE_HORIZON_MASK,
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_V2,
    MIN_BATCH_LENGTH,
    TIMESTAMP_TYPE_CREATE,
    TIMESTAMP_TYPE_LOG_APPEND,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    U32,
    BatchHeader,
    compute_crc,
    parse_header,
)
from storage.compression import compress as compress_payload
from storage.compression import decompress as decompress_payload
from storage.errors import CorruptRecordError
from storage.types import NO_PARTITION_LEADER_EPOCH, NO_PRODUCER_ID, NO_TIMESTAMP

Buffer = bytes | bytearray | memoryview

CONTROL_TYPE_ABORT = 0
CONTROL_TYPE_COMMIT = 1
CONTROL_KEY = struct.Struct(">hh")
assert CONTROL_KEY.size == 4
END_TXN_MARKER_VALUE = struct.Struct(">hi")
assert END_TXN_MARKER_VALUE.size == 6
CONTROL_KEY_VERSION = 0
END_TXN_MARKER_VERSION = 0
NO_SEQUENCE = -1

_INT32_MIN, _INT32_MAX = -(1 << 31), (1 << 31) - 1
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
_MAX_VARINT_BYTES = 5
_MAX_VARLONG_BYTES = 10


# --- varints ----------------------------------------------------------------------------
# Written for CPython speed: values of one byte (|n| < 64) or two (|n| < 8192), i.e. most
# deltas and lengths, take a fast path without a loop. Readers raise CorruptRecordError,
# never IndexError; positions are never negative here (decode_batch checks its own).


def zigzag_encode(value: int) -> int:
    """Signed int64 -> unsigned: 0, -1, 1, -2 … -> 0, 1, 2, 3 …"""
    return (value << 1) ^ (value >> 63)


def _write_unsigned(out: bytearray, value: int) -> None:
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def write_varint(out: bytearray, value: int) -> None:
    """Append the zigzag varint of an int32 to ``out``."""
    if not _INT32_MIN <= value <= _INT32_MAX:
        raise ValueError(f"varint out of int32 range: {value}")
    _write_zigzag(out, value)


def write_varlong(out: bytearray, value: int) -> None:
    """Append the zigzag varlong of an int64 to ``out``."""
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise ValueError(f"varlong out of int64 range: {value}")
    _write_zigzag(out, value)


def _write_zigzag(out: bytearray, value: int) -> None:
    """Zigzag (the same formula serves int32 and int64 once the range is checked)."""
    unsigned = (value << 1) ^ (value >> 63)
    if unsigned < 0x80:  # |value| < 64: the common one-byte case, no loop
        out.append(unsigned)
        return
    _write_unsigned(out, unsigned)


def encode_varint(value: int) -> bytes:
    out = bytearray()
    write_varint(out, value)
    return bytes(out)


def encode_varlong(value: int) -> bytes:
    out = bytearray()
    write_varlong(out, value)
    return bytes(out)


def size_of_varint(value: int) -> int:
    """Bytes the zigzag varint/varlong of ``value`` takes (same for both widths)."""
    unsigned = zigzag_encode(value)
    return max(1, (unsigned.bit_length() + 6) // 7)


def decode_varint(buf: Buffer, position: int = 0) -> tuple[int, int]:
    """Read a zigzag varint (int32) at ``position``; returns (value, next position)."""
    return _decode_zigzag(buf, position, _MAX_VARINT_BYTES, 0xFFFFFFFF)


def _decode_zigzag(buf: Buffer, position: int, max_bytes: int, max_unsigned: int) -> tuple[int, int]:
    """Inline paths for the 1- and 2-byte forms (most lengths and deltas), else the loop."""
    try:
        byte = buf[position]
        if byte < 0x80:
            return (byte >> 1) ^ -(byte & 1), position + 1
        second = buf[position + 1]
        if second < 0x80:
            unsigned = (byte & 0x7F) | (second << 7)
            return (unsigned >> 1) ^ -(unsigned & 1), position + 2
    except IndexError:
        raise CorruptRecordError(f"varint truncated at {position}", position=position) from None
    return _decode_long_form(buf, position, max_bytes, max_unsigned)


def decode_varlong(buf: Buffer, position: int = 0) -> tuple[int, int]:
    """Read a zigzag varlong (int64) at ``position``; returns (value, next position)."""
    return _decode_zigzag(buf, position, _MAX_VARLONG_BYTES, 0xFFFFFFFFFFFFFFFF)


def _decode_long_form(buf: Buffer, position: int, max_bytes: int, max_unsigned: int) -> tuple[int, int]:
    """The general case of the two readers above: up to ``max_bytes`` 7-bit groups."""
    result = 0
    shift = 0
    try:
        for index in range(position, position + max_bytes):
            byte = buf[index]
            result |= (byte & 0x7F) << shift
            if byte < 0x80:
                if result > max_unsigned:
                    raise CorruptRecordError(f"varint overflows {max_unsigned.bit_length()} bits at {position}", position=position)
                return (result >> 1) ^ -(result & 1), index + 1
            shift += 7
    except IndexError:
        raise CorruptRecordError(f"varint truncated at {position}", position=position) from None
    raise CorruptRecordError(f"varint longer than {max_bytes} bytes at {position}", position=position)


# --- values -----------------------------------------------------------------------------

Header = tuple[str, bytes | None]


@dataclass(frozen=True, slots=True)
class Record:
    """One record with absolute offset and timestamp (ms)."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = ()


@dataclass(frozen=True, slots=True)
class ControlRecord:
    """The decoded key (and, for transaction markers, value) of a control record.

    ``coordinator_epoch`` is -1 for control types other than ABORT/COMMIT (KRaft's
    leader-change and snapshot records), whose values are not end-transaction markers.
    """

    version: int
    type: int
    coordinator_epoch: int

    @property
    def is_commit(self) -> bool:
        return self.type == CONTROL_TYPE_COMMIT

    @property
    def is_abort(self) -> bool:
        return self.type == CONTROL_TYPE_ABORT


def parse_control_record(record: Record) -> ControlRecord:
    """Decode a control record's key and, for ABORT/COMMIT, its marker value.

    Longer keys/values than version 0 needs are accepted: newer versions append fields.
    """
    if record.key is None or len(record.key) < CONTROL_KEY.size:
        raise CorruptRecordError(f"control record at offset {record.offset} has a key too short: {record.key!r}")
    version, control_type = CONTROL_KEY.unpack_from(record.key)
    if control_type not in (CONTROL_TYPE_ABORT, CONTROL_TYPE_COMMIT):
        return ControlRecord(version, control_type, -1)
    if record.value is None or len(record.value) < END_TXN_MARKER_VALUE.size:
        raise CorruptRecordError(f"transaction marker at offset {record.offset} has a value too short: {record.value!r}")
    _value_version, coordinator_epoch = END_TXN_MARKER_VALUE.unpack_from(record.value)
    return ControlRecord(version, control_type, coordinator_epoch)


def encode_control_record(control_type: int, coordinator_epoch: int, *, offset: int = 0, timestamp: int = NO_TIMESTAMP) -> Record:
    """The single record of a COMMIT/ABORT marker batch (see ``encode_control_batch``)."""
    if control_type not in (CONTROL_TYPE_ABORT, CONTROL_TYPE_COMMIT):
        raise ValueError(f"not a transaction marker type: {control_type}")
    key = CONTROL_KEY.pack(CONTROL_KEY_VERSION, control_type)
    value = END_TXN_MARKER_VALUE.pack(END_TXN_MARKER_VERSION, coordinator_epoch)
    return Record(offset, timestamp, key, value)


def encode_control_batch(
    control_type: int,
    coordinator_epoch: int,
    *,
    producer_id: int,
    producer_epoch: int,
    base_offset: int = 0,
    timestamp: int,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
) -> bytes:
    """A whole marker batch, shaped as Kafka writes one: transactional + control bits,
    uncompressed, CreateTime, no sequence, one record."""
    record = encode_control_record(control_type, coordinator_epoch, offset=base_offset, timestamp=timestamp)
    return encode_batch(
        [record],
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=NO_SEQUENCE,
        is_transactional=True,
        is_control=True,
        partition_leader_epoch=partition_leader_epoch,
    )


def read_control_record(buf: Buffer, position: int = 0) -> ControlRecord:
    """The key and marker value of the control batch at ``position`` (one record, as
    every writer makes them; the record's offset and timestamp do not matter)."""
    header, records = decode_batch(buf, position)
    if not header.is_control or not records:
        raise CorruptRecordError(f"no control record in the batch at offset {header.base_offset}", position=position)
    return parse_control_record(records[0])


def make_records(
    values: Iterable[bytes | None],
    keys: Iterable[bytes | None] | None = None,
    start_offset: int = 0,
    timestamp: int | None = None,
) -> list[Record]:
    """Records at consecutive offsets sharing one timestamp (now, when not given)."""
    ts = int(time.time() * 1000) if timestamp is None else timestamp
    value_list = list(values)
    key_list: list[bytes | None] = [None] * len(value_list) if keys is None else list(keys)
    if len(key_list) != len(value_list):
        raise ValueError(f"{len(key_list)} keys for {len(value_list)} values")
    return [Record(start_offset + i, ts, k, v) for i, (k, v) in enumerate(zip(key_list, value_list))]


# --- decoding ---------------------------------------------------------------------------


def decode_batch(buf: Buffer, position: int = 0) -> tuple[BatchHeader, list[Record]]:
    """Decode the whole batch at ``position``: header and records, decompressed.

    Checks the framing (length fits, magic 2) and every record's structure, not the CRC:
    callers that need it call batch.check_batch_frame first.
    """
    view = memoryview(buf)
    header = _parse_header_checked(view, position)
    if header.record_count == 0:
        # As the Java client: an empty batch (kept by compaction) has nothing to decode.
        return header, []
    section = view[position + HEADER_SIZE : position + header.size]
    try:
        # bytes, not a view: indexing and slicing bytes is what the record loop does most.
        payload = bytes(section) if header.compression == COMPRESSION_NONE else decompress_payload(header.compression, section)
        records = _decode_records(payload, header)
    except CorruptRecordError as exc:
        raise CorruptRecordError(f"batch at {position}: {exc}", position=position) from exc
    return header, records


def iter_batches(buf: Buffer) -> Iterator[tuple[BatchHeader, list[Record]]]:
    """Decode concatenated batches to the end of ``buf``; a partial last batch is corrupt."""
    view = memoryview(buf)
    position = 0
    while position < len(view):
        header, records = decode_batch(view, position)
        yield header, records
        position += header.size


def _parse_header_checked(view: memoryview, position: int) -> BatchHeader:
    """parse_header plus the checks that make reading the rest of the batch safe."""
    available = len(view) - position
    if position < 0 or available < HEADER_SIZE:
        raise CorruptRecordError(f"{available} bytes left, less than a batch header", position=position)
    header = parse_header(view, position)
    if header.magic != MAGIC_V2:
        raise CorruptRecordError(f"magic {header.magic}, expected 2", position=position)
    if header.batch_length < MIN_BATCH_LENGTH:
        raise CorruptRecordError(f"batchLength {header.batch_length} below the minimum {MIN_BATCH_LENGTH}", position=position)
    if header.size > available:
        raise CorruptRecordError(f"batch of {header.size} bytes runs past the end ({available} left)", position=position)
    if header.record_count < 0:
        raise CorruptRecordError(f"negative record count {header.record_count}", position=position)
    return header


def _decode_records(payload: bytes, header: BatchHeader) -> list[Record]:
    """All ``record_count`` records; the payload must end exactly after the last one."""
    fixed_timestamp = header.max_timestamp if header.timestamp_type == TIMESTAMP_TYPE_LOG_APPEND else None
    base_offset = header.base_offset
    base_timestamp = header.base_timestamp
    records = []
    position = 0
    end = len(payload)
    try:
        for _ in range(header.record_count):
            record, position = _decode_record(payload, position, end, base_offset, base_timestamp, fixed_timestamp)
            records.append(record)
    except IndexError:  # a one-byte varint read inline ran off the end
        raise CorruptRecordError(f"records truncated after {len(records)} of {header.record_count}") from None
    if position != end:
        raise CorruptRecordError(f"{end - position} bytes left after {header.record_count} records")
    return records


def _decode_record(
    buf: bytes, position: int, end: int, base_offset: int, base_timestamp: int, fixed_timestamp: int | None
) -> tuple[Record, int]:
    """One record at ``position``; it must fill exactly its declared length.

    ``fixed_timestamp`` (LogAppendTime batches) replaces the record's own timestamp. This
    is the hot loop of every decode (compaction reads every record), so a key or value
    length of one byte (even zigzag: not negative) that fits the record is read inline;
    everything else, errors included, goes through _read_nullable_bytes. The caller maps
    IndexError to corrupt.
    """
    length, position = decode_varint(buf, position)
    record_end = position + length
    if length < 0 or record_end > end:
        raise CorruptRecordError(f"record length {length} at {position} runs past the records ({end})")
    timestamp_delta, position = decode_varlong(buf, position + 1)  # + 1: attributes, unused
    offset_delta, position = decode_varint(buf, position)
    key: bytes | None
    value: bytes | None
    byte = buf[position]
    if not byte & 0x81 and position + 1 + (byte >> 1) <= record_end:  # one-byte length >= 0
        key = buf[position + 1 : position + 1 + (byte >> 1)]
        position += 1 + (byte >> 1)
    else:
        key, position = _read_nullable_bytes(buf, position, record_end)
    byte = buf[position]
    if not byte & 0x81 and position + 1 + (byte >> 1) <= record_end:  # one-byte length >= 0
        value = buf[position + 1 : position + 1 + (byte >> 1)]
        position += 1 + (byte >> 1)
    else:
        value, position = _read_nullable_bytes(buf, position, record_end)
    header_count, position = decode_varint(buf, position)
    headers: tuple[Header, ...] = ()
    if header_count:
        headers, position = _read_headers(buf, position, record_end, header_count)
    if position != record_end:
        raise CorruptRecordError(f"record declares {length} bytes but its fields end {position - record_end:+d} from there")
    timestamp = base_timestamp + timestamp_delta if fixed_timestamp is None else fixed_timestamp
    return Record(base_offset + offset_delta, timestamp, key, value, headers), position


def _read_headers(buf: bytes, position: int, limit: int, count: int) -> tuple[tuple[Header, ...], int]:
    if count < 0:
        raise CorruptRecordError(f"negative header count {count}")
    headers = []
    for _ in range(count):
        name, position = _read_header_key(buf, position, limit)
        header_value, position = _read_nullable_bytes(buf, position, limit)
        headers.append((name, header_value))
    return tuple(headers), position


def _read_nullable_bytes(buf: bytes, position: int, limit: int) -> tuple[bytes | None, int]:
    length, position = decode_varint(buf, position)
    if length < 0:
        if length != -1:
            raise CorruptRecordError(f"length {length} at {position}")
        return None, position
    stop = position + length
    if stop > limit:
        raise CorruptRecordError(f"{length} bytes at {position} run past the record end {limit}")
    return buf[position:stop], stop


def _read_header_key(buf: bytes, position: int, limit: int) -> tuple[str, int]:
    raw, position = _read_nullable_bytes(buf, position, limit)
    if raw is None:
        raise CorruptRecordError(f"null header key before {position}")
    try:
        return raw.decode("utf-8"), position
    except UnicodeDecodeError as exc:
        raise CorruptRecordError(f"header key is not UTF-8: {raw!r}") from exc


# --- encoding ---------------------------------------------------------------------------


def encode_batch(
    records: Sequence[Record] | Sequence[tuple[Any, ...]],  # tuples: Record fields, in order
    *,
    base_offset: int = 0,
    compression: int = COMPRESSION_NONE,
    compression_level: int | None = None,
    timestamp_type: int = TIMESTAMP_TYPE_CREATE,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = -1,
    base_sequence: int = NO_SEQUENCE,
    is_transactional: bool = False,
    is_control: bool = False,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    last_offset_delta: int | None = None,
    base_timestamp: int | None = None,
    max_timestamp: int | None = None,
    has_delete_horizon: bool = False,
) -> bytes:
    """Build a complete v2 batch with a correct CRC-32C.

    ``records`` are Records or tuples of Record's fields in order (offset, timestamp,
    key, value[, headers]). Offset deltas are record offset - ``base_offset``, strictly
    increasing, so a compacted batch (gaps, ``last_offset_delta`` beyond the last record)
    can be rebuilt; with no records ``last_offset_delta`` is required, and the batch is
    written uncompressed, as Kafka writes the empty batches compaction keeps. With
    ``has_delete_horizon`` ``base_timestamp`` is the delete horizon (KIP-534).
    """
    rows = [r if isinstance(r, Record) else Record(*r) for r in records]
    if not rows:
        if last_offset_delta is None:
            raise ValueError("an empty batch needs last_offset_delta")
        compression = COMPRESSION_NONE
    if compression & ~COMPRESSION_MASK:
        raise ValueError(f"compression codec {compression} does not fit bits 0-2")
    if timestamp_type not in (TIMESTAMP_TYPE_CREATE, TIMESTAMP_TYPE_LOG_APPEND):
        raise ValueError(f"timestamp type {timestamp_type} is neither 0 (CreateTime) nor 1 (LogAppendTime)")
    first_ts = min((r.timestamp for r in rows), default=NO_TIMESTAMP) if base_timestamp is None else base_timestamp
    last_delta = _check_offset_deltas(rows, base_offset, last_offset_delta)
    body = _encode_records(rows, base_offset, first_ts)
    if compression != COMPRESSION_NONE:
        body = compress_payload(compression, body, level=compression_level)
    attributes = (
        compression
        | (TIMESTAMP_TYPE_MASK if timestamp_type == TIMESTAMP_TYPE_LOG_APPEND else 0)
        | (TRANSACTIONAL_MASK if is_transactional else 0)
        | (CONTROL_MASK if is_control else 0)
        | (DELETE_HORIZON_MASK if has_delete_horizon else 0)
    )
    header_values = (
        base_offset,
        HEADER_SIZE - LOG_OVERHEAD + len(body),
        partition_leader_epoch,
        MAGIC_V2,
        0,  # crc, computed below over the finished bytes
        attributes,
        last_delta,
        first_ts,
        max((r.timestamp for r in rows), default=NO_TIMESTAMP) if max_timestamp is None else max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        len(rows),
    )
    return _finish_batch(header_values, body)


def rebuild_batch(header: BatchHeader, records: Sequence[Record], *, compression: int | None = None,
                  compression_level: int | None = None) -> bytes:
    """The batch ``header`` describes, holding ``records``: offsets, timestamps, producer
    id, epoch, sequence and flags as they were (compaction keeps fewer records; the
    max timestamp stays, so the segment's age does not change), in ``compression``
    (default: the batch's own codec)."""
    return encode_batch(
        records,
        base_offset=header.base_offset,
        last_offset_delta=header.last_offset_delta,
        compression=header.compression if compression is None else compression,
        compression_level=compression_level,
        timestamp_type=header.timestamp_type,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        is_transactional=header.is_transactional,
        is_control=header.is_control,
        partition_leader_epoch=header.partition_leader_epoch,
        base_timestamp=header.base_timestamp,
        max_timestamp=header.max_timestamp,
        has_delete_horizon=header.has_delete_horizon,
    )


def _check_offset_deltas(rows: list[Record], base_offset: int, last_offset_delta: int | None) -> int:
    """Validate offsets (increasing, within int32 of the base); the batch's lastOffsetDelta."""
    previous = -1
    for record in rows:
        delta = record.offset - base_offset
        if delta <= previous:
            raise ValueError(f"record offset {record.offset} not above the previous one / base offset {base_offset}")
        previous = delta
    if last_offset_delta is None:
        last_offset_delta = previous
    if last_offset_delta < previous or last_offset_delta > _INT32_MAX:
        raise ValueError(f"last_offset_delta {last_offset_delta} below the last record's delta {previous} or too large")
    return last_offset_delta


def _encode_records(rows: list[Record], base_offset: int, base_timestamp: int) -> bytes:
    out = bytearray()
    scratch = bytearray()
    for record in rows:
        scratch.clear()
        _write_record_body(scratch, record, record.offset - base_offset, record.timestamp - base_timestamp)
        write_varint(out, len(scratch))
        out += scratch
    return bytes(out)


def _write_record_body(out: bytearray, record: Record, offset_delta: int, timestamp_delta: int) -> None:
    """Everything of one record after its length varint."""
    out.append(0)  # attributes
    write_varlong(out, timestamp_delta)
    write_varint(out, offset_delta)
    _write_nullable_bytes(out, record.key)
    _write_nullable_bytes(out, record.value)
    write_varint(out, len(record.headers))
    for name, value in record.headers:
        _write_nullable_bytes(out, name.encode("utf-8"))
        _write_nullable_bytes(out, value)


def _write_nullable_bytes(out: bytearray, data: bytes | None) -> None:
    if data is None:
        out.append(1)  # zigzag(-1)
        return
    write_varint(out, len(data))
    out += data


def _finish_batch(header_values: tuple[int, ...], body: bytes) -> bytes:
    """Header + body, then the CRC-32C over attributes..end patched in."""
    batch = bytearray(HEADER_SIZE + len(body))
    try:
        HEADER.pack_into(batch, 0, *header_values)
    except struct.error as exc:
        raise ValueError(f"batch header field out of range: {exc}") from exc
    batch[HEADER_SIZE:] = body
    view = memoryview(batch)
    U32.pack_into(batch, CRC_POS, compute_crc(view, 0, len(batch)))
    view.release()
    return bytes(batch)
