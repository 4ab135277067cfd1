"""Small builders shared by the storage tests (real batches, real files)."""

from __future__ import annotations

import os

from storage.config import LogConfig
from storage.log import PartitionLog
from storage.records import Record, encode_batch, iter_batches
from storage.types import TopicPartition

TP = TopicPartition("events", 0)


def batch(count: int = 1, value_size: int = 100, timestamp: int = 1_000, key: bytes | None = b"k",
          compression: int = 0, producer_id: int = -1, base_sequence: int = -1) -> bytes:
    """A producer's batch of ``count`` records (offsets 0..count-1, as clients send them)."""
    records = [Record(i, timestamp + i, key, bytes([65 + i % 26]) * value_size) for i in range(count)]
    return encode_batch(records, compression=compression, producer_id=producer_id,
                        producer_epoch=0 if producer_id >= 0 else -1, base_sequence=base_sequence)


def open_log(tmp_path, config: LogConfig | None = None, clean_shutdown: bool = True, **kwargs) -> PartitionLog:
    return PartitionLog(os.path.join(str(tmp_path), TP.dir_name), TP, config or LogConfig(), clean_shutdown=clean_shutdown, **kwargs)


def read_all(log: PartitionLog, start: int = 0) -> list[Record]:
    """Every record from ``start`` to the log end, read through the public read path."""
    out: list[Record] = []
    offset = max(start, log.log_start_offset)
    while offset < log.log_end_offset:
        raw = log.read_bytes(offset, 1 << 20)
        assert raw, f"no bytes at {offset} below the log end {log.log_end_offset}"
        for header, records in iter_batches(raw):
            out.extend(r for r in records if r.offset >= offset)
            offset = header.next_offset
    return out
