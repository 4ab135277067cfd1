"""The bytes of the DescribeLogDirs op between a broker's processes (broker/links/mesh.py).

An admin request, rare and small next to a Fetch: one entry after another, no columns.

    replicas  u32 n; per replica: string log dir, string topic, i32 partition, i64 size,
              i64 offset lag, u8 is future
"""

from __future__ import annotations

import struct

from broker.links.peer_codec import Buffer, Reader
from broker.partitions.partition_ops import LogDirReplica
from storage.types import TopicPartition

_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_FIELDS = struct.Struct("<iqqB")  # partition, size, offset lag, is future


def _text(value: str) -> bytes:
    """A string as peer_codec's Reader reads it (never null here; a path fits in 64 KiB)."""
    data = value.encode()
    return _U16.pack(len(data)) + data


def encode_replicas(replicas: list[LogDirReplica]) -> list[bytes]:
    parts = [_U32.pack(len(replicas))]
    for replica in replicas:
        parts.append(_text(replica.log_dir) + _text(replica.tp.topic)
                     + _FIELDS.pack(replica.tp.partition, replica.size, replica.offset_lag, replica.is_future))
    return parts


def decode_replicas(data: Buffer) -> list[LogDirReplica]:
    reader = Reader(data)
    out = []
    for _ in range(reader.u32()):
        log_dir = reader.text()
        topic = reader.text()
        partition, size, lag, future = reader.unpack(_FIELDS)
        out.append(LogDirReplica(log_dir, TopicPartition(topic, partition), size, lag, bool(future)))
    return out
