"""Kafka's embedded consumer protocol, the bytes a classic consumer puts in JoinGroup and gets
from SyncGroup: ConsumerProtocolSubscription and ConsumerProtocolAssignment (clients'
consumer/internals/ConsumerProtocol; schemas ConsumerProtocolSubscription.json and
ConsumerProtocolAssignment.json, versions 0-3, not flexible)::

    Subscription  version int16, topics [string], user_data bytes?,
                  v1+ owned_partitions [topic string, partitions [int32]],
                  v2+ generation_id int32, v3+ rack_id string?
    Assignment    version int16, assigned_partitions [topic string, partitions [int32]],
                  user_data bytes?

A consumer group (KIP-848) serves classic members by reading their subscription and writing
their assignment in these shapes, and a group that changes protocol carries members'
assignments over in them. A version newer than 3 is read as 3 (newer versions only add
fields at the end, which are left unread), as Kafka's clients do.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
MAX_VERSION = 3


class EmbeddedProtocolError(ValueError):
    """Bytes that are not a consumer subscription or assignment."""


@dataclass(frozen=True)
class Subscription:
    version: int
    topics: tuple[str, ...]
    user_data: bytes | None = None
    owned: tuple[tuple[str, int], ...] | None = None  # None before v1: not told
    generation: int = -1
    rack_id: str | None = None


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.position = data, 0

    def int16(self) -> int:
        value = _I16.unpack_from(self.data, self.position)[0]
        self.position += 2
        return int(value)

    def int32(self) -> int:
        value = _I32.unpack_from(self.data, self.position)[0]
        self.position += 4
        return int(value)

    def count(self) -> int:
        count = self.int32()
        if count < -1 or count > len(self.data):
            raise EmbeddedProtocolError(f"bad count {count}")
        return max(count, 0)

    def string(self, nullable: bool = False) -> str | None:
        length = self.int16()
        if length < 0:
            if nullable:
                return None
            raise EmbeddedProtocolError("a null string where one is required")
        end = self.position + length
        if end > len(self.data):
            raise EmbeddedProtocolError("a string runs past the end")
        value = self.data[self.position:end].decode()
        self.position = end
        return value

    def bytes_(self) -> bytes | None:
        length = self.int32()
        if length < 0:
            return None
        end = self.position + length
        if end > len(self.data):
            raise EmbeddedProtocolError("bytes run past the end")
        value = self.data[self.position:end]
        self.position = end
        return bytes(value)

    def partitions(self) -> list[tuple[str, int]]:
        out = []
        for _ in range(self.count()):
            topic = self.string() or ""
            out += [(topic, self.int32()) for _ in range(self.count())]
        return out


def parse_subscription(data: bytes) -> Subscription:
    try:
        reader = _Reader(data)
        version = reader.int16()
        if version < 0:
            raise EmbeddedProtocolError(f"bad version {version}")
        topics = tuple(reader.string() or "" for _ in range(reader.count()))
        user_data = reader.bytes_()
        owned = tuple(reader.partitions()) if version >= 1 else None
        generation = reader.int32() if version >= 2 else -1
        rack = reader.string(nullable=True) if version >= 3 else None
        return Subscription(version, topics, user_data, owned, generation, rack)
    except (struct.error, UnicodeDecodeError) as exc:
        raise EmbeddedProtocolError(f"not a consumer subscription: {exc}") from None


def parse_version(data: bytes) -> int:
    try:
        return min(int(_I16.unpack_from(data, 0)[0]), MAX_VERSION)
    except struct.error:
        raise EmbeddedProtocolError("not a consumer protocol message") from None


def encode_assignment(partitions: Mapping[str, Iterable[int]], version: int = 0) -> bytes:
    """A ConsumerProtocolAssignment of ``version`` (capped at 3), topics and partitions in order,
    no user data."""
    out = bytearray(_I16.pack(min(max(version, 0), MAX_VERSION)))
    topics = sorted(partitions)
    out += _I32.pack(len(topics))
    for topic in topics:
        name = topic.encode()
        numbers = sorted(partitions[topic])
        out += _I16.pack(len(name)) + name + _I32.pack(len(numbers))
        out += b"".join(_I32.pack(p) for p in numbers)
    out += _I32.pack(-1)  # user data: null
    return bytes(out)
