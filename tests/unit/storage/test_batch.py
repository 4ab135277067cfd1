"""Batch header validation and in-place patching (storage/batch.py)."""

from __future__ import annotations

import struct

import crc32c
import pytest

from storage import batch as b
from storage.errors import CorruptRecordError
from tests.unit.storage.helpers import batch


def test_header_fields_are_parsed_without_touching_records():
    raw = batch(count=3, timestamp=5_000, producer_id=7, base_sequence=10)
    header = b.parse_header(raw)
    assert header.magic == 2
    assert header.size == len(raw)
    assert header.last_offset_delta == 2 and header.record_count == 3
    assert header.base_timestamp == 5_000 and header.max_timestamp == 5_002
    assert header.producer_id == 7 and header.base_sequence == 10 and header.last_sequence == 12
    assert header.crc == crc32c.crc32c(raw[21:])


def test_check_producer_batch_accepts_a_client_batch():
    raw = batch(count=2)
    assert b.check_producer_batch(memoryview(raw), 0, len(raw)).record_count == 2


def _patched(raw: bytes, position: int, fmt: str, value: int) -> bytes:
    out = bytearray(raw)
    struct.pack_into(fmt, out, position, value)
    return bytes(out)


def _with_crc(raw: bytes) -> bytes:
    return _patched(raw, b.CRC_POS, ">I", crc32c.crc32c(raw[b.CRC_START:]))


@pytest.mark.parametrize(
    "damage, message",
    [
        (lambda r: _patched(r, b.MAGIC_POS, ">b", 1), "magic"),
        (lambda r: _patched(r, b.BATCH_LENGTH_POS, ">i", len(r) - 12 + 5), "past the end"),
        (lambda r: _patched(r, b.BATCH_LENGTH_POS, ">i", 10), "below the minimum"),
        (lambda r: _patched(r, b.CRC_POS, ">I", 12345), "CRC"),
        (lambda r: r[:-1] + bytes([r[-1] ^ 0xFF]), "CRC"),
        (lambda r: _with_crc(_patched(r, 57, ">i", 5)), "record count"),
        (lambda r: _with_crc(_patched(r, 23, ">i", -1)), "lastOffsetDelta"),
        (lambda r: r[:40], "less than a batch header"),
    ],
)
def test_check_producer_batch_rejects(damage, message):
    raw = damage(batch(count=2))
    with pytest.raises(CorruptRecordError, match=message):
        b.check_producer_batch(memoryview(raw), 0, len(raw))


def test_length_shorter_than_the_bytes_is_caught_by_the_following_header():
    raw = batch(count=2)
    short = _patched(raw, b.BATCH_LENGTH_POS, ">i", len(raw) - 12 - 4)
    with pytest.raises(CorruptRecordError):
        b.check_producer_batch(memoryview(short), 0, len(short))


def test_recovery_accepts_a_compacted_batch_that_producers_may_not_send():
    raw = _with_crc(_patched(batch(count=3), 57, ">i", 1))  # 1 record left, lastOffsetDelta 2
    assert b.check_batch_frame(memoryview(raw), 0, len(raw)).record_count == 1
    with pytest.raises(CorruptRecordError):
        b.check_producer_batch(memoryview(raw), 0, len(raw))


def test_assigning_offsets_in_place_keeps_the_crc_valid():
    raw = bytearray(batch(count=4))
    b.set_base_offset_and_epoch(raw, 0, 1_000_000, 7)
    header = b.check_producer_batch(memoryview(raw), 0, len(raw))
    assert header.base_offset == 1_000_000 and header.partition_leader_epoch == 7
    assert header.last_offset == 1_000_003


def test_log_append_time_rewrites_timestamp_and_type_and_crc():
    raw = bytearray(batch(count=2, timestamp=10))
    view = memoryview(raw)
    b.set_log_append_time(view, 0, len(raw), 99_999)
    header = b.check_producer_batch(view, 0, len(raw))
    assert header.max_timestamp == 99_999
    assert header.timestamp_type == b.TIMESTAMP_TYPE_LOG_APPEND
    view.release()


def test_iter_headers_walks_concatenated_batches():
    raw = batch(count=1) + batch(count=3) + batch(count=2)
    counts = [h.record_count for _pos, h in b.iter_headers(memoryview(raw))]
    assert counts == [1, 3, 2]


@pytest.mark.parametrize("producer_id", [-1, 0, 7, (1 << 62) + 5])
def test_producer_id_at_reads_what_the_whole_header_holds(producer_id: int) -> None:
    data = b"\x00" * 9 + batch(3, producer_id=producer_id, base_sequence=0 if producer_id >= 0 else -1)
    assert b.producer_id_at(data, 9) == b.parse_header(data, 9).producer_id == producer_id
