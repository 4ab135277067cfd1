"""The records of ``__consumer_offsets``, in Kafka's own key and value schemas.

Byte for byte what Apache Kafka's group coordinator writes, so Kafka's tools read our
topic and we read a topic Kafka wrote. The schemas are apache/kafka's
group-coordinator/src/main/resources/common/message/{OffsetCommitKey, LegacyOffsetCommitKey,
OffsetCommitValue, GroupMetadataKey, GroupMetadataValue}.json. A key and a value each
start with an int16::

    key    int16 record type (Kafka calls it the key version): 0 and 1 offset commit,
           2 group metadata; 3 and up are KIP-848 / share / streams group records, which
           decode_key returns as None, so the classic load skips them (the consumer
           group's, 3-8 and 16, are read by consumer/records.py)
    value  int16 value version, then that version's fields; a null value is a tombstone

Non-flexible encodings (every key; values v0-v3), big-endian::

    string     int16 length, UTF-8 bytes          nullable string: length -1 = null
    bytes      int32 length, bytes
    array      int32 count, elements

Flexible encodings (values v4: KIP-915 made the values flexible so that a later tagged
field cannot break an older reader; Kafka reads v4 but writes v1/v3)::

    compact string  uvarint length + 1, UTF-8 bytes   0 = null (nullable fields only)
    compact bytes   uvarint length + 1, bytes
    compact array   uvarint count + 1, elements
    tagged fields   uvarint count, then per field uvarint tag, uvarint size, data; after
                    each member struct and at the end of the value

A uvarint is unsigned, 7 bits a byte, low group first, at most 5 bytes: not the zigzag
varint of the record format (storage/records.py).

Keys (type 0 is what Kafka before 0.10 wrote; 0 and 1 share the layout)::

    OffsetCommitKey  (type 0, 1)  group string, topic string, partition int32
    GroupMetadataKey (type 2)     group string

OffsetCommitValue::

    v0, v2  offset int64, metadata string, commitTimestamp int64
    v1      offset int64, metadata string, commitTimestamp int64, expireTimestamp int64
    v3      offset int64, leaderEpoch int32, metadata string, commitTimestamp int64
    v4      v3, flexible: metadata a compact string, tagged fields at the end

GroupMetadataValue, and MemberMetadata (one per member) inside it::

    v0, v1  protocolType string, generation int32, protocol string?, leader string?,
            members [MemberMetadata]
    v2, v3  currentStateTimestamp int64 between leader and members
    v4      v3, flexible
    member v0   memberId string, clientId string, clientHost string,
                sessionTimeout int32, subscription bytes, assignment bytes
    member v1+  rebalanceTimeout int32 before sessionTimeout
    member v3+  groupInstanceId string? right after memberId

Written versions are those of Kafka's GroupCoordinatorRecordHelpers: key type 1 for an
offset commit, 2 for a group; OffsetCommitValue v1 when an expire timestamp is set (the
only version with that field, so the leader epoch is dropped, as Kafka drops it) and v3
otherwise; GroupMetadataValue v3. Every version 0-4 is read. A field missing from the
version read takes the schema default (leaderEpoch -1, expireTimestamp -1,
currentStateTimestamp -1, groupInstanceId null), except rebalanceTimeout, which member
v0 lacks and the schema gives no default: it takes the member's session timeout, as
Kafka's loaders do.

Decoding is stricter than Kafka's generated readers in two ways that only garbage can
hit (Kafka's writers never produce either): bytes left after the last field are an error,
and so is invalid UTF-8 (Java would substitute U+FFFD). Unknown tagged fields are
skipped, as Kafka skips them.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Iterator

from coordination.java_hash import java_abs, java_string_hash
from storage.batch import check_batch_frame, iter_headers
from storage.errors import CorruptRecordError
from storage.records import Record, decode_batch, encode_batch

Buffer = bytes | bytearray | memoryview

INT8 = struct.Struct(">b")
INT16 = struct.Struct(">h")
assert INT16.size == 2
INT32 = struct.Struct(">i")
assert INT32.size == 4
INT64 = struct.Struct(">q")
assert INT64.size == 8

OFFSET_COMMIT_KEY_TYPES = (0, 1)  # 0: LegacyOffsetCommitKey, same fields
GROUP_METADATA_KEY_TYPE = 2
OFFSET_COMMIT_KEY_TYPE_WRITTEN = 1

OFFSET_VALUE_VERSIONS = range(0, 5)
OFFSET_VALUE_VERSION_WITH_EXPIRE = 1
OFFSET_VALUE_VERSION_WRITTEN = 3
GROUP_VALUE_VERSIONS = range(0, 5)
GROUP_VALUE_VERSION_WRITTEN = 3
FIRST_FLEXIBLE_VERSION = 4  # the same for both values

NO_EXPIRE_TIMESTAMP = -1  # OffsetCommitRequest.DEFAULT_TIMESTAMP
NO_LEADER_EPOCH = -1
NO_STATE_TIMESTAMP = -1

_MAX_STRING_BYTES = 0x7FFF  # int16 length; Kafka enforces it on compact strings too
_INT32_MAX = (1 << 31) - 1
_MAX_UVARINT_BYTES = 5


class OffsetsSchemaError(ValueError):
    """Bytes that are no valid __consumer_offsets key or value (truncated, garbage, a
    value version Kafka does not define), or a value that does not fit its schema."""


# --- values -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OffsetKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class OffsetValue:
    """A committed offset. ``expire_timestamp`` -1: none (v3 is written, else v1)."""

    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int = NO_EXPIRE_TIMESTAMP


@dataclass(frozen=True, slots=True)
class GroupKey:
    group: str


@dataclass(frozen=True, slots=True)
class MemberValue:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int
    members: tuple[MemberValue, ...]


Entry = tuple[int, OffsetKey | GroupKey, OffsetValue | GroupValue | None]
"""What read_entries yields: (offset, key, value or None for a tombstone)."""


# --- reading ----------------------------------------------------------------------------


class SchemaReader:
    """A cursor over one key or value. Every read checks the bytes are there, so callers
    see OffsetsSchemaError, never IndexError or struct.error."""

    __slots__ = ("data", "position", "what")
    error: type[OffsetsSchemaError] = OffsetsSchemaError  # a subclass's schemas raise their own

    def __init__(self, data: Buffer, what: str) -> None:
        self.data = bytes(data)
        self.position = 0
        self.what = what

    def fail(self, message: str) -> OffsetsSchemaError:
        return self.error(f"{self.what}: {message} (byte {self.position} of {len(self.data)})")

    def _take(self, size: int, field: str) -> int:
        """Advance over ``size`` bytes; the position they start at."""
        start = self.position
        if size > len(self.data) - start:
            raise self.fail(f"{field} needs {size} bytes, {len(self.data) - start} left")
        self.position = start + size
        return start

    def take(self, size: int, field: str) -> bytes:
        if size < 0:
            raise self.fail(f"{field} has a negative size {size}")
        start = self._take(size, field)
        return self.data[start : start + size]

    def int8(self, field: str) -> int:
        value: int = INT8.unpack_from(self.data, self._take(INT8.size, field))[0]
        return value

    def int16(self, field: str) -> int:
        value: int = INT16.unpack_from(self.data, self._take(INT16.size, field))[0]
        return value

    def int32(self, field: str) -> int:
        value: int = INT32.unpack_from(self.data, self._take(INT32.size, field))[0]
        return value

    def int64(self, field: str) -> int:
        value: int = INT64.unpack_from(self.data, self._take(INT64.size, field))[0]
        return value

    def uvarint(self, field: str) -> int:
        result = 0
        for index in range(_MAX_UVARINT_BYTES):
            if self.position >= len(self.data):
                raise self.fail(f"{field}: varint truncated")
            byte = self.data[self.position]
            self.position += 1
            result |= (byte & 0x7F) << (7 * index)
            if byte < 0x80:
                if result > 0xFFFFFFFF:
                    raise self.fail(f"{field}: varint overflows 32 bits")
                return result
        raise self.fail(f"{field}: varint longer than {_MAX_UVARINT_BYTES} bytes")

    def string(self, field: str, flexible: bool) -> str:
        value = self.nullable_string(field, flexible)
        if value is None:
            raise self.fail(f"non-nullable {field} is null")
        return value

    def nullable_string(self, field: str, flexible: bool) -> str | None:
        # Non-flexible: any negative length reads as null, as Kafka's reader does.
        length = self.uvarint(field) - 1 if flexible else self.int16(field)
        if length < 0:
            return None
        if length > _MAX_STRING_BYTES:
            raise self.fail(f"{field} of {length} bytes is longer than a string can be")
        start = self._take(length, field)
        try:
            return self.data[start : start + length].decode("utf-8")
        except UnicodeDecodeError as exc:
            raise self.fail(f"{field} is not UTF-8: {exc.reason}") from None

    def bytes_(self, field: str, flexible: bool) -> bytes:
        length = self.uvarint(field) - 1 if flexible else self.int32(field)
        if length < 0:
            raise self.fail(f"non-nullable {field} is null")
        start = self._take(length, field)
        return self.data[start : start + length]

    def array_count(self, field: str, flexible: bool) -> int:
        count = self.nullable_array_count(field, flexible)
        if count < 0:
            raise self.fail(f"non-nullable array {field} is null")
        return count

    def nullable_array_count(self, field: str, flexible: bool) -> int:
        """An array's element count; -1 for a null array."""
        return self.uvarint(field) - 1 if flexible else self.int32(field)

    def skip_tagged_fields(self) -> None:
        """Unknown tagged fields are skipped (we know none of these schemas' tags)."""
        for _ in range(self.uvarint("tagged field count")):
            self.uvarint("tag")
            self._take(self.uvarint("tagged field size"), "tagged field")

    def finish(self) -> None:
        if self.position != len(self.data):
            raise self.fail(f"{len(self.data) - self.position} bytes left after the last field")


def decode_key(data: Buffer) -> OffsetKey | GroupKey | None:
    """The key of a __consumer_offsets record; None for a record type we do not know."""
    reader = SchemaReader(data, "__consumer_offsets key")
    record_type = reader.int16("key type")
    key: OffsetKey | GroupKey
    if record_type in OFFSET_COMMIT_KEY_TYPES:
        group = reader.string("group", False)
        topic = reader.string("topic", False)
        key = OffsetKey(group, topic, reader.int32("partition"))
    elif record_type == GROUP_METADATA_KEY_TYPE:
        key = GroupKey(reader.string("group", False))
    else:
        return None
    reader.finish()
    return key


def decode_offset_value(data: Buffer) -> OffsetValue:
    """An OffsetCommitValue of any version Kafka defines (0-4)."""
    reader = SchemaReader(data, "OffsetCommitValue")
    version = reader.int16("version")
    if version not in OFFSET_VALUE_VERSIONS:
        raise reader.fail(f"unknown version {version}")
    reader.what = f"OffsetCommitValue v{version}"
    flexible = version >= FIRST_FLEXIBLE_VERSION
    offset = reader.int64("offset")
    leader_epoch = reader.int32("leaderEpoch") if version >= 3 else NO_LEADER_EPOCH
    metadata = reader.string("metadata", flexible)
    commit_timestamp = reader.int64("commitTimestamp")
    expire_timestamp = reader.int64("expireTimestamp") if version == 1 else NO_EXPIRE_TIMESTAMP
    if flexible:
        reader.skip_tagged_fields()
    reader.finish()
    return OffsetValue(offset, leader_epoch, metadata, commit_timestamp, expire_timestamp)


def decode_group_value(data: Buffer) -> GroupValue:
    """A GroupMetadataValue of any version Kafka defines (0-4)."""
    reader = SchemaReader(data, "GroupMetadataValue")
    version = reader.int16("version")
    if version not in GROUP_VALUE_VERSIONS:
        raise reader.fail(f"unknown version {version}")
    reader.what = f"GroupMetadataValue v{version}"
    flexible = version >= FIRST_FLEXIBLE_VERSION
    protocol_type = reader.string("protocolType", flexible)
    generation = reader.int32("generation")
    protocol = reader.nullable_string("protocol", flexible)
    leader = reader.nullable_string("leader", flexible)
    state_timestamp = reader.int64("currentStateTimestamp") if version >= 2 else NO_STATE_TIMESTAMP
    count = reader.array_count("members", flexible)
    # No preallocation from ``count``: a garbage count runs out of bytes, not of memory.
    members = tuple(_read_member(reader, version, flexible) for _ in range(count))
    if flexible:
        reader.skip_tagged_fields()
    reader.finish()
    return GroupValue(protocol_type, generation, protocol, leader, state_timestamp, members)


def _read_member(reader: SchemaReader, version: int, flexible: bool) -> MemberValue:
    member_id = reader.string("memberId", flexible)
    instance_id = reader.nullable_string("groupInstanceId", flexible) if version >= 3 else None
    client_id = reader.string("clientId", flexible)
    client_host = reader.string("clientHost", flexible)
    rebalance_timeout = reader.int32("rebalanceTimeout") if version >= 1 else None
    session_timeout = reader.int32("sessionTimeout")
    subscription = reader.bytes_("subscription", flexible)
    assignment = reader.bytes_("assignment", flexible)
    if flexible:
        reader.skip_tagged_fields()
    if rebalance_timeout is None:  # member v0: Kafka's loaders use the session timeout
        rebalance_timeout = session_timeout
    return MemberValue(
        member_id, instance_id, client_id, client_host, rebalance_timeout, session_timeout, subscription, assignment
    )


# --- writing (non-flexible versions only: Kafka writes no v4 yet) -----------------------


def _put(out: bytearray, fmt: struct.Struct, value: int, field: str) -> None:
    try:
        out += fmt.pack(value)
    except struct.error:
        raise OffsetsSchemaError(f"{field} {value!r} does not fit {fmt.size * 8} bits") from None


def string_bytes(value: str, field: str) -> bytes:
    """``value`` as a Kafka string's UTF-8 bytes; OffsetsSchemaError if it cannot be one."""
    try:
        raw = value.encode("utf-8")
    except UnicodeEncodeError as exc:  # a lone surrogate: Java would write '?'
        raise OffsetsSchemaError(f"{field} is not encodable as UTF-8: {exc.reason}") from None
    if len(raw) > _MAX_STRING_BYTES:
        raise OffsetsSchemaError(f"{field} is {len(raw)} bytes of UTF-8, more than {_MAX_STRING_BYTES}")
    return raw


def _put_string(out: bytearray, value: str | None, field: str) -> None:
    if value is None:
        out += INT16.pack(-1)
        return
    raw = string_bytes(value, field)
    out += INT16.pack(len(raw))
    out += raw


def _put_bytes(out: bytearray, value: bytes, field: str) -> None:
    if len(value) > _INT32_MAX:
        raise OffsetsSchemaError(f"{field} of {len(value)} bytes is too long")
    out += INT32.pack(len(value))
    out += value


def encode_key(key: OffsetKey | GroupKey) -> bytes:
    """The key as Kafka writes it: type 1 for an offset commit, 2 for a group."""
    out = bytearray()
    if isinstance(key, OffsetKey):
        out += INT16.pack(OFFSET_COMMIT_KEY_TYPE_WRITTEN)
        _put_string(out, key.group, "group")
        _put_string(out, key.topic, "topic")
        _put(out, INT32, key.partition, "partition")
    elif isinstance(key, GroupKey):
        out += INT16.pack(GROUP_METADATA_KEY_TYPE)
        _put_string(out, key.group, "group")
    else:
        raise TypeError(f"not a __consumer_offsets key: {key!r}")
    return bytes(out)


def encode_offset_value(value: OffsetValue) -> bytes:
    """v1 when ``expire_timestamp`` is set (without the leader epoch, which v1 lacks), else v3."""
    out = bytearray()
    if value.expire_timestamp != NO_EXPIRE_TIMESTAMP:
        out += INT16.pack(OFFSET_VALUE_VERSION_WITH_EXPIRE)
        _put(out, INT64, value.offset, "offset")
        _put_string(out, value.metadata, "metadata")
        _put(out, INT64, value.commit_timestamp, "commitTimestamp")
        _put(out, INT64, value.expire_timestamp, "expireTimestamp")
    else:
        out += INT16.pack(OFFSET_VALUE_VERSION_WRITTEN)
        _put(out, INT64, value.offset, "offset")
        _put(out, INT32, value.leader_epoch, "leaderEpoch")
        _put_string(out, value.metadata, "metadata")
        _put(out, INT64, value.commit_timestamp, "commitTimestamp")
    return bytes(out)


def encode_group_value(value: GroupValue) -> bytes:
    """GroupMetadataValue v3, what Kafka writes."""
    out = bytearray(INT16.pack(GROUP_VALUE_VERSION_WRITTEN))
    _put_string(out, value.protocol_type, "protocolType")
    _put(out, INT32, value.generation, "generation")
    _put_string(out, value.protocol, "protocol")
    _put_string(out, value.leader, "leader")
    _put(out, INT64, value.current_state_timestamp, "currentStateTimestamp")
    _put(out, INT32, len(value.members), "member count")
    for member in value.members:
        _put_string(out, member.member_id, "memberId")
        _put_string(out, member.group_instance_id, "groupInstanceId")
        _put_string(out, member.client_id, "clientId")
        _put_string(out, member.client_host, "clientHost")
        _put(out, INT32, member.rebalance_timeout, "rebalanceTimeout")
        _put(out, INT32, member.session_timeout, "sessionTimeout")
        _put_bytes(out, member.subscription, "subscription")
        _put_bytes(out, member.assignment, "assignment")
    return bytes(out)


# --- placement and batches --------------------------------------------------------------


def partition_for(group: str, partitions: int) -> int:
    """The __consumer_offsets partition of ``group``: Utils.abs(groupId.hashCode()) % n.

    Kafka's Utils.abs is Math.abs with Integer.MIN_VALUE mapped to 0, not the bit mask
    x & 0x7fffffff of Utils.toPositive: for a negative hash the two pick different
    partitions (e.g. "my-group" is partition 12 of 50 in Kafka; the mask would say 36).
    """
    if partitions <= 0:
        raise ValueError(f"partition count must be positive, got {partitions}")
    return java_abs(java_string_hash(group)) % partitions


def offsets_batch(entries: list[tuple[bytes, bytes | None]], timestamp: int) -> bytes:
    """One uncompressed v2 batch of (key, value) records at offsets 0..n-1; None = tombstone.

    The base offset is rewritten on append, as for any batch.
    """
    if not entries:
        raise ValueError("an offsets batch needs at least one record")
    records = [Record(index, timestamp, key, value) for index, (key, value) in enumerate(entries)]
    return encode_batch(records)


def txn_offsets_batch(entries: list[tuple[bytes, bytes | None]], timestamp: int, producer_id: int,
                      producer_epoch: int) -> bytes:
    """``offsets_batch``'s records in a transactional batch of the producer (TxnOffsetCommit):
    they count once the producer's COMMIT marker follows them in the partition. Base
    sequence 0, as Kafka's coordinator writes it: the log takes the coordinator's own
    appends without the idempotent producer's sequence checks."""
    if not entries:
        raise ValueError("an offsets batch needs at least one record")
    records = [Record(index, timestamp, key, value) for index, (key, value) in enumerate(entries)]
    return encode_batch(records, producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=0,
                        is_transactional=True)


def read_entries(data: Buffer) -> Iterator[Entry]:
    """(offset, key, value or None for a tombstone) of every record in the complete batches
    of ``data``, in log order.

    As storage.batch.iter_headers, reading stops at a trailing partial batch (or a batch
    length no batch can have, such as the zeros past the end of a preallocated segment).
    A complete batch that fails its CRC or magic check raises. Control batches
    (transaction markers) and records of unknown types are skipped. Records of
    transactional batches (TxnOffsetCommit) come out like any other, committed or
    aborted alike: telling them apart takes the producer ids and markers, which this
    does not return (the coordinator's load reads them: coordination/groups/replay.py).
    """
    view = memoryview(data)
    for position, header in iter_headers(view):
        try:
            check_batch_frame(view, position, position + header.size)
            if header.is_control:
                continue
            _header, records = decode_batch(view, position)
        except CorruptRecordError as exc:
            raise OffsetsSchemaError(f"batch at byte {position}: {exc}") from exc
        for record in records:
            try:
                entry = _decode_record(record)
            except OffsetsSchemaError as exc:
                raise OffsetsSchemaError(f"record at offset {record.offset}: {exc}") from exc
            if entry is not None:
                yield entry


def _decode_record(record: Record) -> Entry | None:
    """One record's entry; None when its key is of a type we do not know."""
    if record.key is None:
        raise OffsetsSchemaError("a __consumer_offsets record has no key")
    key = decode_key(record.key)
    if key is None:
        return None
    if record.value is None:
        return record.offset, key, None
    if isinstance(key, OffsetKey):
        return record.offset, key, decode_offset_value(record.value)
    return record.offset, key, decode_group_value(record.value)
