"""The bytes of the DescribeLogDirs op between a broker's processes (broker/links/mesh.py),
and of the note that a log dir failed.

An admin request, rare and small next to a Fetch: one entry after another, no columns.

    report    u32 n; per replica: string log dir, string topic, i32 partition, i64 size,
              i64 offset lag, u8 is future; then u32 m offline dirs, each a string
    failed    string log dir (the note Op.LOG_DIR_FAILED)
    moves     u32 n; per item: string topic, i32 partition, string log dir; answered with
              peer_codec's error codes
"""

from __future__ import annotations

import struct

from broker.links.peer_codec import Buffer, Reader
from broker.partitions.partition_ops import LogDirReplica, LogDirsReport, MoveItem
from storage.types import TopicPartition

_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_I32 = struct.Struct("<i")
_FIELDS = struct.Struct("<iqqB")  # partition, size, offset lag, is future


def _text(value: str) -> bytes:
    """A string as peer_codec's Reader reads it (never null here; a path fits in 64 KiB)."""
    data = value.encode()
    return _U16.pack(len(data)) + data


def encode_report(report: LogDirsReport) -> list[bytes]:
    parts = [_U32.pack(len(report.replicas))]
    for replica in report.replicas:
        parts.append(_text(replica.log_dir) + _text(replica.tp.topic)
                     + _FIELDS.pack(replica.tp.partition, replica.size, replica.offset_lag, replica.is_future))
    parts.append(_U32.pack(len(report.offline_dirs)))
    parts.extend(_text(path) for path in report.offline_dirs)
    return parts


def decode_report(data: Buffer) -> LogDirsReport:
    reader = Reader(data)
    replicas = []
    for _ in range(reader.u32()):
        log_dir = reader.text()
        topic = reader.text()
        partition, size, lag, future = reader.unpack(_FIELDS)
        replicas.append(LogDirReplica(log_dir, TopicPartition(topic, partition), size, lag, bool(future)))
    offline = tuple(reader.text() for _ in range(reader.u32()))
    return LogDirsReport(tuple(replicas), offline)


def encode_moves(items: list[MoveItem]) -> list[bytes]:
    parts = [_U32.pack(len(items))]
    parts.extend(_text(item.tp.topic) + _I32.pack(item.tp.partition) + _text(item.path) for item in items)
    return parts


def decode_moves(data: Buffer) -> list[MoveItem]:
    reader = Reader(data)
    out = []
    for _ in range(reader.u32()):
        topic = reader.text()
        partition = reader.i32()
        out.append(MoveItem(TopicPartition(topic, partition), reader.text()))
    return out


def encode_failed(path: str) -> list[bytes]:
    return [_text(path)]


def decode_failed(data: Buffer) -> str:
    return Reader(data).text()
