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

Kafka 4.x writes value v0 unless transaction.version 2 is finalized; Castle speaks
transaction.version 1, so it writes v0 and reads both.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from coordination.groups.offsets_schema import Buffer, OffsetsSchemaError, _Reader
from coordination.groups.offsets_schema import partition_for as _partition_for
from storage.records import Record, encode_batch

INT8 = struct.Struct(">b")
INT16 = struct.Struct(">h")
INT32 = struct.Struct(">i")
INT64 = struct.Struct(">q")

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
    """A key or value that is not one of these schemas' versions."""


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


def encode_value(value: TxnLogValue) -> bytes:
    """TransactionLogValue v0."""
    out = bytearray(INT16.pack(VALUE_VERSION_WRITTEN))
    try:
        out += INT64.pack(value.producer_id)
        out += INT16.pack(value.producer_epoch)
        out += INT32.pack(value.timeout_ms)
        out += INT8.pack(value.status)
        if value.partitions is None:
            out += INT32.pack(-1)
        else:
            out += INT32.pack(len(value.partitions))
            for topic, ids in value.partitions.items():
                _string(out, topic, "topic")
                out += INT32.pack(len(ids))
                for partition in ids:
                    out += INT32.pack(partition)
        out += INT64.pack(value.last_update_ms)
        out += INT64.pack(value.start_ms)
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
    reader = _Reader(data, "TransactionLogKey")
    version = reader.int16("version")
    if version != KEY_VERSION:
        return None
    transactional_id = reader.string("transactionalId", False)
    reader.finish()
    return transactional_id


def _int8(reader: _Reader, what: str) -> int:
    value: int = INT8.unpack_from(reader.data, reader._take(1, what))[0]
    return value


def decode_value(data: Buffer) -> TxnLogValue:
    reader = _Reader(data, "TransactionLogValue")
    version = reader.int16("version")
    if version not in VALUE_VERSIONS:
        raise TxnSchemaError(f"TransactionLogValue version {version} is unknown")
    flexible = version >= FIRST_FLEXIBLE_VALUE_VERSION
    producer_id = reader.int64("producerId")
    producer_epoch = reader.int16("producerEpoch")
    timeout_ms = reader.int32("transactionTimeoutMs")
    status = _int8(reader, "transactionStatus")
    count = reader.uvarint("partitions") - 1 if flexible else reader.int32("partitions")
    partitions: dict[str, tuple[int, ...]] | None = None
    if count >= 0:
        partitions = {}
        for _ in range(count):
            topic = reader.string("topic", flexible)
            ids = reader.array_count("partitionIds", flexible)
            partitions[topic] = partitions.get(topic, ()) + tuple(reader.int32("partitionId") for _ in range(ids))
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
            start = reader._take(size, "tagged field")
            raw = reader.data[start:start + size]
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
