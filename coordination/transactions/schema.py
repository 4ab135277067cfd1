"""The records of ``__transaction_state``, in Kafka's own key and value schemas.

Byte for byte what Apache Kafka's transaction coordinator writes, so Kafka's tools
(kafka-dump-log --transaction-log-decoder) read our topic and we read one Kafka wrote. The
schemas are apache/kafka's transaction-coordinator/src/main/resources/common/message/
{TransactionLogKey, TransactionLogValue}.json. A key and a value each start with an int16
version; a null value is a tombstone (the transactional id expired)::

    TransactionLogKey v0      transactionalId string
    TransactionLogValue v0    producerId int64, producerEpoch int16, transactionTimeoutMs int32,
                              transactionStatus int8, transactionPartitions [topic string,
                              partitionIds [int32]] (nullable: null when Empty),
                              transactionLastUpdateTimestampMs int64,
                              transactionStartTimestampMs int64
    TransactionLogValue v1    v0, flexible (compact strings and arrays, tagged fields after
                              each partitions entry and at the end); tags 0 previousProducerId
                              int64, 1 nextProducerId int64, 2 clientTransactionVersion int16

Kafka 4.x writes value v0 unless transaction.version 2 is finalized, v1 then; so does
Castle (the ``transaction.version`` setting), and it reads both. Tagged fields are written
only when they differ from their defaults (-1, -1, 0), as Kafka's generated code does.
"""

from __future__ import annotations

import logging
import struct
from dataclasses import dataclass, field

from coordination.groups.offsets_schema import INT8, INT16, INT32, INT64, Buffer, OffsetsSchemaError, SchemaReader
from coordination.groups.offsets_schema import partition_for as _partition_for
from storage.records import Record, encode_batch, iter_batches

log = logging.getLogger(__name__)


KEY_VERSION = 0
VALUE_VERSION_WRITTEN = 0
VALUE_VERSIONS = (0, 1)
FIRST_FLEXIBLE_VALUE_VERSION = 1
NO_PRODUCER_ID = -1

TAG_PREVIOUS_PRODUCER_ID = 0
TAG_NEXT_PRODUCER_ID = 1
TAG_CLIENT_TRANSACTION_VERSION = 2

_MAX_STRING_BYTES = 0x7FFF


class TxnSchemaError(OffsetsSchemaError):
    """A key or value that is not one of these schemas' versions, or bytes that are not one."""


class _TxnReader(SchemaReader):
    """The __consumer_offsets records' reader, raising TxnSchemaError."""

    __slots__ = ()
    error = TxnSchemaError


@dataclass(frozen=True)
class TxnLogValue:
    """One TransactionLogValue: a transactional id's state as last written."""

    producer_id: int
    producer_epoch: int
    timeout_ms: int
    status: int  # TransactionState's id
    partitions: dict[str, tuple[int, ...]] | None  # None (null) when Empty
    last_update_ms: int
    start_ms: int
    previous_producer_id: int = NO_PRODUCER_ID  # v1 tagged fields (kept, not written in v0)
    next_producer_id: int = NO_PRODUCER_ID
    client_transaction_version: int = 0
    _unknown_tags: tuple[tuple[int, bytes], ...] = field(default=(), compare=False)


def partition_for(transactional_id: str, partitions: int) -> int:
    """The __transaction_state partition of a transactional id: Utils.abs(hashCode) % n,
    as for groups."""
    return _partition_for(transactional_id, partitions)


# --- writing ----------------------------------------------------------------------------


def _string(out: bytearray, value: str, what: str) -> None:
    try:
        raw = value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise TxnSchemaError(f"{what} is not encodable as UTF-8: {exc.reason}") from None
    if len(raw) > _MAX_STRING_BYTES:
        raise TxnSchemaError(f"{what} is {len(raw)} bytes of UTF-8, more than {_MAX_STRING_BYTES}")
    out += INT16.pack(len(raw))
    out += raw


def encode_key(transactional_id: str) -> bytes:
    out = bytearray(INT16.pack(KEY_VERSION))
    _string(out, transactional_id, "transactionalId")
    return bytes(out)


def _uvarint(out: bytearray, value: int) -> None:
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def _count(out: bytearray, count: int, flexible: bool) -> None:
    """An array length (or a nullable one: -1); compact (length + 1) when flexible."""
    if flexible:
        _uvarint(out, count + 1)
    else:
        out += INT32.pack(count)


def encode_value(value: TxnLogValue, version: int = VALUE_VERSION_WRITTEN) -> bytes:
    """TransactionLogValue ``version`` (0, or 1 with transaction.version 2)."""
    if version not in VALUE_VERSIONS:
        raise TxnSchemaError(f"TransactionLogValue version {version} is unknown")
    flexible = version >= FIRST_FLEXIBLE_VALUE_VERSION
    out = bytearray(INT16.pack(version))
    try:
        out += INT64.pack(value.producer_id)
        out += INT16.pack(value.producer_epoch)
        out += INT32.pack(value.timeout_ms)
        out += INT8.pack(value.status)
        if value.partitions is None:
            _count(out, -1, flexible)
        else:
            _count(out, len(value.partitions), flexible)
            for topic, ids in value.partitions.items():
                if flexible:
                    raw = topic.encode("utf-8")
                    if len(raw) > _MAX_STRING_BYTES:
                        raise TxnSchemaError(f"topic is {len(raw)} bytes of UTF-8, more than {_MAX_STRING_BYTES}")
                    _uvarint(out, len(raw) + 1)
                    out += raw
                else:
                    _string(out, topic, "topic")
                _count(out, len(ids), flexible)
                for partition in ids:
                    out += INT32.pack(partition)
                if flexible:
                    out.append(0)  # the entry's tagged fields: none
        out += INT64.pack(value.last_update_ms)
        out += INT64.pack(value.start_ms)
        if flexible:
            tagged: list[tuple[int, bytes]] = []
            if value.previous_producer_id != NO_PRODUCER_ID:
                tagged.append((TAG_PREVIOUS_PRODUCER_ID, INT64.pack(value.previous_producer_id)))
            if value.next_producer_id != NO_PRODUCER_ID:
                tagged.append((TAG_NEXT_PRODUCER_ID, INT64.pack(value.next_producer_id)))
            if value.client_transaction_version != 0:
                tagged.append((TAG_CLIENT_TRANSACTION_VERSION, INT16.pack(value.client_transaction_version)))
            tagged.extend(value._unknown_tags)
            _uvarint(out, len(tagged))
            for tag, raw in sorted(tagged):
                _uvarint(out, tag)
                _uvarint(out, len(raw))
                out += raw
    except struct.error as exc:
        raise TxnSchemaError(f"a field does not fit its type: {exc}") from None
    return bytes(out)


def state_batch(entries: list[tuple[bytes, bytes | None]], timestamp: int) -> bytes:
    """One uncompressed batch of (key, value) records (None: a tombstone), as Kafka writes
    the transaction log (compression none); its base offset is set on append."""
    if not entries:
        raise ValueError("a batch needs at least one record")
    return encode_batch([Record(index, timestamp, key, value) for index, (key, value) in enumerate(entries)])


# --- reading ----------------------------------------------------------------------------


def decode_key(data: Buffer) -> str | None:
    """The transactional id of a key; None for a key version Kafka does not know (its
    loader skips those)."""
    reader = _TxnReader(data, "TransactionLogKey")
    version = reader.int16("version")
    if version != KEY_VERSION:
        return None
    transactional_id = reader.string("transactionalId", False)
    reader.finish()
    return transactional_id


def decode_value(data: Buffer) -> TxnLogValue:
    reader = _TxnReader(data, "TransactionLogValue")
    version = reader.int16("version")
    if version not in VALUE_VERSIONS:
        raise TxnSchemaError(f"TransactionLogValue version {version} is unknown")
    flexible = version >= FIRST_FLEXIBLE_VALUE_VERSION
    producer_id = reader.int64("producerId")
    producer_epoch = reader.int16("producerEpoch")
    timeout_ms = reader.int32("transactionTimeoutMs")
    status = reader.int8("transactionStatus")
    count = reader.nullable_array_count("transactionPartitions", flexible)
    partitions: dict[str, tuple[int, ...]] | None = None
    if count >= 0:
        partitions = {}
        for _ in range(count):
            topic = reader.string("topic", flexible)
            ids = reader.nullable_array_count("partitionIds", flexible)
            if ids < 0:
                raise TxnSchemaError("TransactionLogValue: non-nullable partitionIds is null")
            partitions[topic] = partitions.get(topic, ()) + tuple(reader.int32("partitionId")
                                                                  for _ in range(ids))
            if flexible:
                reader.skip_tagged_fields()
    last_update_ms = reader.int64("transactionLastUpdateTimestampMs")
    start_ms = reader.int64("transactionStartTimestampMs")
    tagged = {TAG_PREVIOUS_PRODUCER_ID: NO_PRODUCER_ID, TAG_NEXT_PRODUCER_ID: NO_PRODUCER_ID,
              TAG_CLIENT_TRANSACTION_VERSION: 0}
    unknown: list[tuple[int, bytes]] = []
    if flexible:
        for _ in range(reader.uvarint("tagged field count")):
            tag = reader.uvarint("tag")
            size = reader.uvarint("tagged field size")
            raw = reader.take(size, "tagged field")
            if tag in (TAG_PREVIOUS_PRODUCER_ID, TAG_NEXT_PRODUCER_ID) and size == INT64.size:
                tagged[tag] = INT64.unpack(raw)[0]
            elif tag == TAG_CLIENT_TRANSACTION_VERSION and size == INT16.size:
                tagged[tag] = INT16.unpack(raw)[0]
            else:
                unknown.append((tag, raw))
    reader.finish()
    return TxnLogValue(producer_id, producer_epoch, timeout_ms, status, partitions, last_update_ms, start_ms,
                       tagged[TAG_PREVIOUS_PRODUCER_ID], tagged[TAG_NEXT_PRODUCER_ID],
                       tagged[TAG_CLIENT_TRANSACTION_VERSION], tuple(unknown))


Entry = tuple[str, TxnLogValue | None]


def entries_of(data: bytes, from_offset: int) -> tuple[list[Entry], int]:
    """(transactional id, value or None for a tombstone) of the records of the whole
    batches in ``data`` at or after ``from_offset``, in log order, and the offset after the
    last whole batch (``from_offset`` if there is none). Records of unknown key versions
    are skipped, as Kafka's loader skips them; an unreadable value is skipped with a warning."""
    entries: list[Entry] = []
    next_offset = from_offset
    for header, records in iter_batches(data):
        next_offset = max(next_offset, header.next_offset)
        if header.is_control:
            continue
        for record in records:
            if record.offset < from_offset or record.key is None:
                continue
            try:
                transactional_id = decode_key(record.key)
                if transactional_id is None:
                    continue
                entries.append((transactional_id, None if record.value is None else decode_value(record.value)))
            except OffsetsSchemaError as exc:
                log.warning("skipping an unreadable __transaction_state record at offset %d: %s", record.offset, exc)
    return entries, next_offset
