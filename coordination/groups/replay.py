"""What the load of __consumer_offsets replays, one partition at a time in log order: its
records, and the transaction markers that decide the transactional ones."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Union

from coordination.groups import offsets_schema as schema
from coordination.groups.consumer import records as consumer_records
from coordination.groups.offsets_schema import GroupKey, GroupValue, OffsetKey, OffsetValue
from coordination.share import records as share_records
from storage.errors import CorruptRecordError
from storage.records import Record, iter_batches, parse_control_record
from storage.types import NO_PRODUCER_ID

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class OffsetsRecord:
    # The classic records (offsets_schema.py), the consumer protocol's (consumer/records.py) and
    # share groups' (share/records.py).
    key: OffsetKey | GroupKey | consumer_records.ConsumerGroupKey | share_records.ShareGroupKey
    value: (OffsetValue | GroupValue | consumer_records.ConsumerGroupValue | share_records.ShareGroupValue
            | None)  # None: a tombstone
    offset: int = -1  # its offset in the partition
    # The producer of the transactional batch it came in (TxnOffsetCommit); NO_PRODUCER_ID
    # for every other batch: its offset waits for that producer's marker.
    producer_id: int = NO_PRODUCER_ID


@dataclass(frozen=True, slots=True)
class TxnMarker:
    """A COMMIT or ABORT control batch: it ends the producer's transaction in this partition."""

    producer_id: int
    committed: bool
    offset: int = -1


LoadEntry = Union[OffsetsRecord, TxnMarker]


def load_entries(data: bytes | bytearray | memoryview, from_offset: int) -> tuple[list[LoadEntry], int]:
    """The entries of the whole batches in ``data`` at or after ``from_offset`` (a read of
    one partition), and the offset after the last whole batch (``from_offset`` if none).
    Records of unknown key types and unreadable ones are skipped (with a warning), as are
    control batches other than transaction markers."""
    entries: list[LoadEntry] = []
    next_offset = from_offset
    for header, records in iter_batches(data):
        next_offset = max(next_offset, header.next_offset)
        if header.is_control:
            marker = _marker_of(header.producer_id, records, from_offset)
            if marker is not None:
                entries.append(marker)
            continue
        producer_id = header.producer_id if header.is_transactional else NO_PRODUCER_ID
        for record in records:
            if record.offset < from_offset or record.key is None:
                continue
            entry = _record_of(record, producer_id)
            if entry is not None:
                entries.append(entry)
    return entries, next_offset


def _marker_of(producer_id: int, records: list[Record], from_offset: int) -> TxnMarker | None:
    for record in records:  # a marker batch holds one record
        if record.offset < from_offset:
            continue
        try:
            control = parse_control_record(record)
        except CorruptRecordError as exc:
            log.warning("skipping an unreadable __consumer_offsets control record: %s", exc)
            continue
        if control.is_commit or control.is_abort:
            return TxnMarker(producer_id, control.is_commit, record.offset)
    return None


def _record_of(record: Record, producer_id: int) -> OffsetsRecord | None:
    assert record.key is not None
    try:
        key = schema.decode_key(record.key)
        if key is None:
            decoded = consumer_records.decode_record(record.key, record.value)
            if decoded is not None:
                return OffsetsRecord(decoded[0], decoded[1], record.offset, producer_id)
            shared = share_records.decode_record(record.key, record.value)
            if shared is None:
                return None
            return OffsetsRecord(shared[0], shared[1], record.offset, producer_id)
        if record.value is None:
            value: OffsetValue | GroupValue | None = None
        elif isinstance(key, OffsetKey):
            value = schema.decode_offset_value(record.value)
        else:
            value = schema.decode_group_value(record.value)
    except schema.OffsetsSchemaError as exc:
        log.warning("skipping an unreadable __consumer_offsets record: %s", exc)
        return None
    return OffsetsRecord(key, value, record.offset, producer_id)
