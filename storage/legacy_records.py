"""Legacy message sets (magic 0 and 1): parse what old producers send, convert both ways.

Clients that speak Produce v0-2 send, and Fetch v0-3 clients expect, the message formats
that came before the v2 record batch. Castle stores v2 only, so, as Kafka 3.x does with
message.format.version 3.0, a legacy produce is up-converted into one v2 batch on the way
in (``parse_message_set`` then ``up_convert``) and stored v2 batches are down-converted on
the way out (``down_convert``).

A message set is entries back to back, with no count and no header of its own. One entry
(big-endian)::

    offset  size  field
    ------  ----  -----------------------------------------------------------------
         0     8  offset       i64  see "Offsets" below
         8     4  messageSize  i32  bytes of the message that follows (from 12 on)
        12     4  crc          u32  CRC-32 (zlib's, IEEE; not the CRC-32C of v2) of
                                    bytes [16, end of message)
        16     1  magic        i8   0 or 1: the same byte position as a v2 batch's
                                    magic, which is how a reader tells formats apart
        17     1  attributes   i8   bits 0-2 codec (0 none, 1 gzip, 2 snappy, 3 lz4),
                                    bit 3 timestamp type (magic 1: 0 CreateTime,
                                    1 LogAppendTime), bits 4-7 unused
        18     8  timestamp    i64  magic 1 only (ms, -1 for none); magic 0 has no field
     18/26     4  keyLength    i32  -1 for a null key (18 in magic 0, 26 in magic 1)
               k  key               keyLength bytes, none when null
               4  valueLength  i32  -1 for a null value
               v  value             valueLength bytes; a wrapper's: the compressed inner set

So a message is 14 bytes plus key and value in magic 0, 22 plus key and value in magic
1, and each entry adds 12 (offset and messageSize, the "log overhead").

Compression. There is no batch: an uncompressed set holds one message per record. A
compressed set is a single *wrapper* message whose attributes name the codec, whose key
is null and whose value is the compressed bytes of an inner message set (the records,
each with its own CRC, uncompressed and of the wrapper's magic). Wrappers do not nest.

Offsets::

    set                     wrapper offset              inner offsets
    ----------------------  --------------------------  -------------------------------
    magic 0, from producer  anything                    anything (the broker reassigns)
    magic 0, from broker    last inner (absolute)       absolute
    magic 1, from producer  n-1 (Java) or 0 (librdkafka, relative: 0..n-1
                            kafka-python)
    magic 1, from broker    last inner (absolute)       relative to the first record;
                                                        absolute = wrapper offset -
                                                        last inner + inner

A magic 1 wrapper with offset 0 means "not assigned" (Kafka's DeepRecordsIterator takes
the base to be 0). Uncompressed messages carry their absolute offset when a broker sends
them; a producer's are placeholders.

Timestamps: a magic 1 LogAppendTime wrapper's timestamp is the append time and replaces
every inner timestamp when read; with CreateTime the wrapper carries the inner maximum.

LZ4 in magic 0 (KAFKA-3160): Kafka 0.8/0.9 wrote an LZ4 frame whose header checksum byte
HC was computed over the frame magic *and* the descriptor (bytes 0..5) instead of the
descriptor alone (bytes 4..5, plus the content size when present). Readers of magic 0 LZ4
therefore ignore HC (Kafka's Lz4BlockInputStream) and writers of magic 0 keep the wrong
one, as old consumers check it the broken way. Magic 1 uses a correct frame. The frame
header (little-endian)::

    offset  size  field
    ------  ----  ------------------------------------------------------------------
         0     4  frame magic   04 22 4d 18
         4     1  FLG           0x60 from Kafka: version 01, independent blocks, no
                                checksums; bit 3 = content size present
         5     1  BD            0x40: 64 KiB blocks
       (6)    (8) content size  only with FLG bit 3 (kafka-python writes it in magic 1)
      6/14     1  HC            (xxh32(FLG .. content size) >> 8) & 0xff; magic 0:
                                (xxh32(bytes 0-5) >> 8) & 0xff, so 04 22 4d 18 60 40 1a
         …        blocks        u32 size (high bit: stored raw), data; a 0 size ends it

Errors: framing and CRC problems raise CorruptRecordError (CORRUPT_MESSAGE); sets Kafka's
LogValidator rejects as INVALID_RECORD (a wrapper inside a wrapper, mixed magic, more
entries beside a wrapper, an empty or null wrapper) raise InvalidRecordError; a codec
magic 0/1 cannot carry (zstd, 5-7) raises UnsupportedCompressionError.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from typing import Sequence

import xxhash

from storage.batch import (
    COMPRESSION_GZIP,
    COMPRESSION_LZ4,
    COMPRESSION_MASK,
    COMPRESSION_NONE,
    COMPRESSION_SNAPPY,
    COMPRESSION_ZSTD,
    HEADER_SIZE,
    LOG_OVERHEAD,
    LOG_OVERHEAD_STRUCT,
    MAGIC_POS,
    TIMESTAMP_TYPE_CREATE,
    TIMESTAMP_TYPE_LOG_APPEND,
    TIMESTAMP_TYPE_MASK,
)
from storage.compression import compress as compress_payload
from storage.compression import decompress as decompress_payload
from storage.errors import CorruptRecordError, InvalidRecordError, UnsupportedCompressionError
from storage.records import NO_SEQUENCE, Record, decode_batch, encode_batch
from storage.types import NO_PRODUCER_ID, NO_TIMESTAMP

Buffer = bytes | bytearray | memoryview

MAGIC_V0 = 0
MAGIC_V1 = 1
# Magic 0 has no timestamp and so no timestamp type (Kafka's TimestampType.NO_TIMESTAMP_TYPE).
NO_TIMESTAMP_TYPE = -1
LEGACY_CODECS = (COMPRESSION_NONE, COMPRESSION_GZIP, COMPRESSION_SNAPPY, COMPRESSION_LZ4)

ENTRY_HEADER = LOG_OVERHEAD_STRUCT  # offset i64, messageSize i32
MESSAGE_V0_HEADER = struct.Struct(">Ibb")  # crc, magic, attributes
MESSAGE_V1_HEADER = struct.Struct(">Ibbq")  # crc, magic, attributes, timestamp
assert MESSAGE_V0_HEADER.size == 6 and MESSAGE_V1_HEADER.size == 14
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")

CRC_POS = LOG_OVERHEAD  # 12: the crc of an entry, right after the log overhead
assert MAGIC_POS == CRC_POS + 4  # 16 in both formats
# Message sizes without key and value bytes (the two length fields included).
RECORD_OVERHEAD_V0 = MESSAGE_V0_HEADER.size + 2 * _I32.size
RECORD_OVERHEAD_V1 = MESSAGE_V1_HEADER.size + 2 * _I32.size
assert (RECORD_OVERHEAD_V0, RECORD_OVERHEAD_V1) == (14, 22)

_INT32_MAX = (1 << 31) - 1


@dataclass(frozen=True, slots=True)
class LegacyMessage:
    """One record of a legacy set, as a producer sent it, wrappers unpacked.

    ``offset`` is what the set says, resolved as Kafka resolves it (magic 1 inner offsets
    made absolute from the wrapper's); a producer's offsets are placeholders the log
    replaces. ``timestamp`` is -1 in magic 0; in a magic 1 LogAppendTime wrapper it is the
    wrapper's. ``compression`` is the codec of the wrapper the message came in (0 when it
    came uncompressed) and ``timestamp_type`` is -1 in magic 0, else 0 CreateTime or 1
    LogAppendTime (the wrapper's, for inner messages).
    """

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    magic: int
    compression: int
    timestamp_type: int


@dataclass(frozen=True, slots=True)
class _RawMessage:
    """One entry exactly as read, before wrappers are unpacked."""

    position: int
    offset: int
    magic: int
    attributes: int
    timestamp: int
    key: bytes | None
    value: bytes | None

    @property
    def codec(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        if self.magic == MAGIC_V0:
            return NO_TIMESTAMP_TYPE
        return TIMESTAMP_TYPE_LOG_APPEND if self.attributes & TIMESTAMP_TYPE_MASK else TIMESTAMP_TYPE_CREATE


# --- version helpers --------------------------------------------------------------------


def peek_magic(data: Buffer, position: int = 0) -> int:
    """The magic byte of the entry or batch at ``position``: 0, 1 (legacy) or 2 (v2).

    Byte 16 is the magic in every format, so a Produce handler can pick its parser here.
    """
    if len(data) - position <= MAGIC_POS:
        raise CorruptRecordError(f"{len(data) - position} bytes, too short to hold a magic byte", position=position)
    magic = data[position + MAGIC_POS]
    return magic - 256 if magic > 127 else magic  # an i8 on the wire


def fetch_magic(api_version: int) -> int:
    """The newest magic a Fetch of ``api_version`` can carry (KafkaApis' downConvertMagic)."""
    if api_version <= 1:
        return MAGIC_V0
    if api_version <= 3:
        return MAGIC_V1
    return 2


# --- parsing ----------------------------------------------------------------------------


def parse_message_set(data: Buffer) -> list[LegacyMessage]:
    """Validate a producer's message set (Produce v0-2) and return its records in order.

    Checks what Kafka's append path checks: every entry whole (a producer's set has no
    excuse for a partial tail, unlike a fetch response), every CRC (wrappers' and inner
    messages'), magic 0 or 1 and the same throughout, a known codec, at most one wrapper
    and then nothing beside it, no wrapper inside a wrapper. An empty ``data`` holds no
    records: the caller appends nothing, as Kafka does.
    """
    view = memoryview(data)
    entries = _read_messages(view, "message set")
    if not entries:
        return []
    magic = entries[0].magic
    for entry in entries:
        if entry.magic != magic:
            raise InvalidRecordError(f"message at {entry.position} has magic {entry.magic}, the first has {magic}")
        _check_codec(entry)
    wrappers = [entry for entry in entries if entry.codec != COMPRESSION_NONE]
    if not wrappers:
        return [
            LegacyMessage(e.offset, e.timestamp, e.key, e.value, e.magic, COMPRESSION_NONE, e.timestamp_type) for e in entries
        ]
    if len(entries) > 1:
        # LogValidator: "Compressed outer record has more than one batch".
        raise InvalidRecordError(f"a compressed message must be alone in its set; this set holds {len(entries)} entries")
    return _unpack_wrapper(wrappers[0])


def _read_messages(view: memoryview, context: str) -> list[_RawMessage]:
    """Every entry of ``view`` to its end; each must be whole and pass its CRC."""
    messages = []
    position = 0
    end = len(view)
    while position < end:
        if end - position < LOG_OVERHEAD:
            raise CorruptRecordError(
                f"{context}: {end - position} trailing bytes at {position}, too few for an entry header "
                f"({LOG_OVERHEAD}): the set is truncated",
                position=position,
            )
        offset, size = ENTRY_HEADER.unpack_from(view, position)
        body = position + LOG_OVERHEAD
        if size < RECORD_OVERHEAD_V0:
            raise CorruptRecordError(
                f"{context}: message size {size} at {position} below the minimum {RECORD_OVERHEAD_V0}", position=position
            )
        if body + size > end:
            raise CorruptRecordError(
                f"{context}: message at {position} declares {size} bytes but {end - body} remain: the set is truncated",
                position=position,
            )
        messages.append(_read_message(view, position, offset, body, body + size, context))
        position = body + size
    return messages


def _read_message(view: memoryview, position: int, offset: int, body: int, stop: int, context: str) -> _RawMessage:
    """The message in view[body:stop] of the entry at ``position``."""
    crc, magic, attributes = MESSAGE_V0_HEADER.unpack_from(view, body)
    if magic not in (MAGIC_V0, MAGIC_V1):
        raise CorruptRecordError(f"{context}: message at {position} has magic {magic}, expected 0 or 1", position=position)
    if magic == MAGIC_V1 and stop - body < RECORD_OVERHEAD_V1:
        raise CorruptRecordError(
            f"{context}: magic 1 message at {position} of {stop - body} bytes, below the minimum {RECORD_OVERHEAD_V1}",
            position=position,
        )
    # The CRC covers magic to the end: check it before trusting any length inside.
    actual = zlib.crc32(view[body + 4 : stop])
    if actual != crc:
        raise CorruptRecordError(
            f"{context}: message at {position} (offset {offset}) fails its CRC-32: computed {actual:#010x}, stored {crc:#010x}",
            position=position,
        )
    timestamp = NO_TIMESTAMP
    cursor = body + MESSAGE_V0_HEADER.size
    if magic == MAGIC_V1:
        timestamp = MESSAGE_V1_HEADER.unpack_from(view, body)[3]
        cursor = body + MESSAGE_V1_HEADER.size
    key, cursor = _read_bytes(view, cursor, stop, position, context, "key")
    value, cursor = _read_bytes(view, cursor, stop, position, context, "value")
    if cursor != stop:
        raise CorruptRecordError(f"{context}: message at {position} has {stop - cursor} bytes after its value", position=position)
    return _RawMessage(position, offset, magic, attributes, timestamp, key, value)


def _read_bytes(view: memoryview, cursor: int, stop: int, position: int, context: str, what: str) -> tuple[bytes | None, int]:
    """An i32-length-prefixed field (-1: null) that must end within the message."""
    if stop - cursor < _I32.size:
        raise CorruptRecordError(f"{context}: message at {position} ends inside its {what} length", position=position)
    (length,) = _I32.unpack_from(view, cursor)
    cursor += _I32.size
    if length == -1:
        return None, cursor
    if length < 0 or cursor + length > stop:
        raise CorruptRecordError(
            f"{context}: message at {position} has a {what} length {length} that does not fit ({stop - cursor} bytes left)",
            position=position,
        )
    return bytes(view[cursor : cursor + length]), cursor + length


def _check_codec(message: _RawMessage) -> None:
    codec = message.codec
    if codec == COMPRESSION_ZSTD:
        raise UnsupportedCompressionError(f"message at {message.position}: zstd needs message format v2 (magic 2)")
    if codec not in LEGACY_CODECS:
        raise UnsupportedCompressionError(f"message at {message.position}: unknown compression codec {codec}")


def _unpack_wrapper(wrapper: _RawMessage) -> list[LegacyMessage]:
    """The inner messages of a compressed wrapper, offsets and timestamps resolved."""
    where = f"wrapper at {wrapper.position}"
    if wrapper.value is None:
        raise InvalidRecordError(f"{where}: compressed message with a null value")
    try:
        inner_bytes = decompress_legacy(wrapper.codec, wrapper.magic, wrapper.value)
    except CorruptRecordError as exc:
        raise CorruptRecordError(f"{where}: {exc}", position=wrapper.position) from exc
    inner = _read_messages(memoryview(inner_bytes), f"inner set of the {where}")
    if not inner:
        raise InvalidRecordError(f"{where}: compressed message holds no messages")
    for message in inner:
        if message.codec != COMPRESSION_NONE:
            # LogValidator answers INVALID_RECORD: "Compressed outer record should not have an
            # inner record with a compression attribute set".
            raise InvalidRecordError(f"{where}: inner message at {message.position} is itself compressed (codec {message.codec})")
        if message.magic != wrapper.magic:
            raise InvalidRecordError(
                f"{where}: inner message at {message.position} has magic {message.magic}, the wrapper {wrapper.magic}"
            )
    base = 0  # magic 0: inner offsets are used as they are
    if wrapper.magic == MAGIC_V1 and wrapper.offset != 0:
        # Relative inner offsets; wrapper offset 0 ("unassigned", librdkafka, kafka-python)
        # means base 0, as in Kafka's DeepRecordsIterator.
        last_inner = inner[-1].offset
        if wrapper.offset < last_inner:
            raise InvalidRecordError(f"{where}: wrapper offset {wrapper.offset} below the last inner offset {last_inner}")
        base = wrapper.offset - last_inner
    log_append = wrapper.timestamp_type == TIMESTAMP_TYPE_LOG_APPEND
    return [
        LegacyMessage(
            base + m.offset,
            wrapper.timestamp if log_append else m.timestamp,
            m.key,
            m.value,
            m.magic,
            wrapper.codec,
            wrapper.timestamp_type,
        )
        for m in inner
    ]


# --- up-conversion ----------------------------------------------------------------------


def up_convert(messages: Sequence[LegacyMessage], *, compression: int | None = None) -> bytes:
    """One v2 batch holding ``messages``, ready for the log's append path.

    As LogValidator builds it for a legacy produce: base offset 0 and offsets 0..n-1 (the
    log assigns the real ones), no producer id, epoch or sequence (legacy producers are
    never idempotent), no headers, compressed with the codec the records came with unless
    ``compression`` (the topic's compression.type) says otherwise. Timestamps are kept:
    -1 (NO_TIMESTAMP) for magic 0, the producer's CreateTime for magic 1. A magic 1
    LogAppendTime wrapper's timestamp is kept too, in a CreateTime batch: the timestamp
    type is the topic's, and a LogAppendTime topic overwrites it on append anyway
    (batch.set_log_append_time), as Kafka overwrites it with the broker's clock.
    """
    if not messages:
        raise ValueError("no messages to convert: an empty legacy set appends nothing")
    codec = messages[0].compression if compression is None else compression
    records = [Record(index, m.timestamp, m.key, m.value) for index, m in enumerate(messages)]
    return encode_batch(
        records,
        base_offset=0,
        compression=codec,
        timestamp_type=TIMESTAMP_TYPE_CREATE,
        producer_id=NO_PRODUCER_ID,
        producer_epoch=-1,
        base_sequence=NO_SEQUENCE,
    )


# --- encoding ---------------------------------------------------------------------------


def encode_message(offset: int, magic: int, timestamp: int, key: bytes | None, value: bytes | None, attributes: int = 0) -> bytes:
    """One entry (log overhead and message) with its CRC-32; magic 0 drops the timestamp."""
    if magic not in (MAGIC_V0, MAGIC_V1):
        raise ValueError(f"legacy magic must be 0 or 1, not {magic}")
    header = MESSAGE_V0_HEADER if magic == MAGIC_V0 else MESSAGE_V1_HEADER
    key_length = -1 if key is None else len(key)
    value_length = -1 if value is None else len(value)
    size = header.size + 2 * _I32.size + max(key_length, 0) + max(value_length, 0)
    if size > _INT32_MAX:
        raise ValueError(f"message of {size} bytes does not fit a 32-bit size")
    out = bytearray(LOG_OVERHEAD + size)
    ENTRY_HEADER.pack_into(out, 0, offset, size)
    if magic == MAGIC_V0:
        header.pack_into(out, CRC_POS, 0, magic, attributes)
    else:
        header.pack_into(out, CRC_POS, 0, magic, attributes, timestamp)
    cursor = CRC_POS + header.size
    for length, field in ((key_length, key), (value_length, value)):
        _I32.pack_into(out, cursor, length)
        cursor += _I32.size
        if field is not None:
            out[cursor : cursor + length] = field
            cursor += length
    _U32.pack_into(out, CRC_POS, zlib.crc32(memoryview(out)[MAGIC_POS:]))
    return bytes(out)


def encode_message_set(
    records: Sequence[Record],
    magic: int,
    *,
    compression: int = COMPRESSION_NONE,
    timestamp_type: int = TIMESTAMP_TYPE_CREATE,
    log_append_time: int = NO_TIMESTAMP,
) -> bytes:
    """A message set of ``records`` (absolute offsets, ascending), as a broker writes one.

    What Kafka's MemoryRecordsBuilder writes for magic 0/1: uncompressed, one message per
    record at its absolute offset; compressed, one wrapper at the last record's offset
    around an inner set whose offsets are relative to the first record (magic 1) or
    absolute (magic 0). Headers are dropped (the format has none). Magic 0 drops the
    timestamps; in magic 1 with LogAppendTime every message, the wrapper too, carries
    ``log_append_time`` and the type bit, and a CreateTime wrapper carries the inner
    maximum (-1 when there is none).
    """
    return b"".join(_encode_entries(records, magic, compression, timestamp_type, log_append_time))


def _encode_entries(
    records: Sequence[Record], magic: int, compression: int, timestamp_type: int, log_append_time: int
) -> list[bytes]:
    """The entries of encode_message_set: one per record, or the single wrapper."""
    if compression not in LEGACY_CODECS:
        raise UnsupportedCompressionError(f"compression codec {compression} cannot be written in magic {magic}")
    if magic not in (MAGIC_V0, MAGIC_V1):
        raise ValueError(f"legacy magic must be 0 or 1, not {magic}")
    log_append = magic == MAGIC_V1 and timestamp_type == TIMESTAMP_TYPE_LOG_APPEND
    type_bit = TIMESTAMP_TYPE_MASK if log_append else 0

    def timestamp_of(record: Record) -> int:
        if magic == MAGIC_V0:
            return NO_TIMESTAMP
        return log_append_time if log_append else record.timestamp

    if compression == COMPRESSION_NONE:
        return [encode_message(r.offset, magic, timestamp_of(r), r.key, r.value, type_bit) for r in records]
    if not records:
        return []  # no wrapper around nothing: readers refuse empty wrappers
    base = records[0].offset if magic == MAGIC_V1 else 0
    inner = b"".join(encode_message(r.offset - base, magic, timestamp_of(r), r.key, r.value, type_bit) for r in records)
    # Kafka's builder tracks maxTimestamp from -1 up; LogAppendTime replaces it.
    wrapper_timestamp = log_append_time if log_append else max([NO_TIMESTAMP] + [timestamp_of(r) for r in records])
    value = compress_legacy(compression, magic, inner)
    return [encode_message(records[-1].offset, magic, wrapper_timestamp, None, value, compression | type_bit)]


# --- down-conversion --------------------------------------------------------------------


def down_convert(data: Buffer, magic: int, *, first_offset: int = 0, max_bytes: int = _INT32_MAX) -> bytes:
    """Stored v2 batches -> a magic 0 or 1 message set for Fetch v0-3 (RecordsUtil.downConvert).

    ``data`` is a slice of a segment: whole v2 batches, maybe a partial one at the end
    (a fetch stops wherever its byte limit falls), which is dropped. Per batch: control
    batches are skipped (old clients know no markers); a compressed batch becomes one
    wrapper of the same codec, an uncompressed one a message per record, and from those
    records below ``first_offset`` (the fetch offset) are dropped, since Kafka does so for
    clients (librdkafka) that cannot skip them without a wrapper to explain the gap.
    Headers are dropped, and so are timestamps in magic 0; magic 1 keeps the batch's
    timestamp type, LogAppendTime taking the batch's maxTimestamp.

    The output stops before the entry that would take it past ``max_bytes``, except that
    the first entry is always included so a consumer can make progress. Transactions are
    not filtered (Fetch v0-3 is read_uncommitted: aborted records are delivered, as Kafka
    delivers them). CRCs of the stored batches are not checked again: the log checked them
    on append and on recovery.

    A zstd batch has no magic 0/1 form: when nothing precedes it the call raises
    UnsupportedCompressionError (the partition's answer is UNSUPPORTED_COMPRESSION_TYPE);
    otherwise the set ends before it, and the consumer's next fetch, starting there, gets
    that error.
    """
    if magic not in (MAGIC_V0, MAGIC_V1):
        raise ValueError(f"down-conversion targets magic 0 or 1, not {magic}")
    view = memoryview(data)
    out: list[bytes] = []
    size = 0
    position = 0
    end = len(view)
    while end - position >= HEADER_SIZE:
        _base_offset, batch_length = ENTRY_HEADER.unpack_from(view, position)
        if position + LOG_OVERHEAD + batch_length > end:
            break  # the partial batch a fetch may end with
        header, records = decode_batch(view, position)
        position += header.size
        if header.is_control:
            continue
        if header.compression == COMPRESSION_ZSTD:
            if out:
                break
            raise UnsupportedCompressionError(
                f"batch at offset {header.base_offset} is zstd-compressed: it cannot be down-converted to magic {magic}"
            )
        if header.compression == COMPRESSION_NONE:
            records = [r for r in records if r.offset >= first_offset]
        if not records:
            continue
        entries = _encode_entries(records, magic, header.compression, header.timestamp_type, header.max_timestamp)
        for entry in entries:
            if out and size + len(entry) > max_bytes:
                return b"".join(out)
            out.append(entry)
            size += len(entry)
    return b"".join(out)


# --- codecs -----------------------------------------------------------------------------


def compress_legacy(codec: int, magic: int, data: Buffer) -> bytes:
    """compression.compress, but magic 0 LZ4 gets Kafka 0.8's broken header checksum."""
    if codec not in LEGACY_CODECS:
        raise UnsupportedCompressionError(f"compression codec {codec} cannot be written in magic {magic}")
    compressed = compress_payload(codec, data)
    if codec == COMPRESSION_LZ4 and magic == MAGIC_V0:
        return _set_lz4_header_checksum(compressed, broken=True)
    return compressed


def decompress_legacy(codec: int, magic: int, data: Buffer) -> bytes:
    """compression.decompress, ignoring the header checksum of magic 0 LZ4 as Kafka does."""
    if codec not in LEGACY_CODECS:
        raise UnsupportedCompressionError(f"compression codec {codec} cannot be read in magic {magic}")
    if codec == COMPRESSION_LZ4 and magic == MAGIC_V0:
        # Old producers wrote the broken HC, some newer ones (librdkafka before it learnt,
        # other clients) a correct one: rewrite it to the correct value so that the frame
        # decoder, which insists on HC, accepts both.
        data = _set_lz4_header_checksum(bytes(data), broken=False)
    return decompress_payload(codec, data)


_LZ4_FRAME_MAGIC = b"\x04\x22\x4d\x18"
_LZ4_FLG_CONTENT_SIZE = 0x08
_LZ4_FLG_DICT_ID = 0x01


def _set_lz4_header_checksum(frame: bytes, *, broken: bool) -> bytes:
    """``frame`` with HC replaced: over the descriptor, or (broken) over magic + descriptor."""
    if len(frame) < 7 or frame[:4] != _LZ4_FRAME_MAGIC:
        raise CorruptRecordError("lz4: not an LZ4 frame (bad magic or shorter than a frame header)")
    flg = frame[4]
    hc_position = 6  # after magic, FLG, BD
    if flg & _LZ4_FLG_CONTENT_SIZE:
        hc_position += 8
    if flg & _LZ4_FLG_DICT_ID:
        hc_position += 4
    if len(frame) <= hc_position:
        raise CorruptRecordError(f"lz4: frame of {len(frame)} bytes ends inside its {hc_position + 1}-byte header")
    covered = frame[0 if broken else 4 : hc_position]
    checksum = (xxhash.xxh32_intdigest(covered) >> 8) & 0xFF
    return frame[:hc_position] + bytes((checksum,)) + frame[hc_position + 1 :]
