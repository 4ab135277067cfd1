"""The messages of the share ops between a broker's processes (ShareFetch and
ShareAcknowledge parts on their way to the partitions' owners).

Unlike the fixed column layouts of broker/links/peer_codec.py, these are orjson arrays: an
item carries nested lists of acknowledgement batches, and one message stands for a whole poll
of a share consumer (hundreds of records), so its cost per record is small. No pickle, as for
every message on the rings: a field of the wrong shape is a ProtocolViolation.
"""

from __future__ import annotations

from typing import Any

import orjson

from broker.partitions.partition_ops import ShareAck, ShareAckItem, ShareFetchItem, ShareFetchResult
from broker.protocol.errors import ProtocolViolation
from storage.types import TopicPartition

Buffer = bytes | bytearray | memoryview


def _acks(raw: Any) -> tuple[ShareAck, ...]:
    return tuple((int(first), int(last), tuple(int(t) for t in types)) for first, last, types in raw)


def encode_fetch_items(items: list[ShareFetchItem]) -> list[bytes]:
    return [orjson.dumps([[i.tp.topic, i.tp.partition, i.topic_id, i.group_id, i.member_id, i.fetch, i.max_bytes,
                           i.max_records, i.acks, i.watcher, i.fresh] for i in items])]


def decode_fetch_items(data: Buffer) -> list[ShareFetchItem]:
    try:
        return [ShareFetchItem(TopicPartition(str(topic), int(partition)), str(topic_id), str(group), str(member),
                               bool(fetch), int(max_bytes), int(max_records), _acks(acks), int(watcher), bool(fresh))
                for topic, partition, topic_id, group, member, fetch, max_bytes, max_records, acks, watcher, fresh
                in orjson.loads(bytes(data))]
    except (ValueError, TypeError) as exc:
        raise ProtocolViolation(f"bad share fetch items: {exc}") from exc


def encode_fetch_results(results: list[ShareFetchResult]) -> list[bytes]:
    return [orjson.dumps([list(r) for r in results])]


def decode_fetch_results(data: Buffer) -> list[ShareFetchResult]:
    try:
        return [ShareFetchResult(int(code), int(ack_code), int(epoch), str(path), int(inode), int(position),
                                 int(length), tuple((int(a), int(b), int(c)) for a, b, c in acquired))
                for code, ack_code, epoch, path, inode, position, length, acquired in orjson.loads(bytes(data))]
    except (ValueError, TypeError) as exc:
        raise ProtocolViolation(f"bad share fetch results: {exc}") from exc


def encode_ack_items(items: list[ShareAckItem]) -> list[bytes]:
    return [orjson.dumps([[i.tp.topic, i.tp.partition, i.topic_id, i.group_id, i.member_id, i.acks, i.release]
                          for i in items])]


def decode_ack_items(data: Buffer) -> list[ShareAckItem]:
    try:
        return [ShareAckItem(TopicPartition(str(topic), int(partition)), str(topic_id), str(group), str(member),
                             _acks(acks), bool(release))
                for topic, partition, topic_id, group, member, acks, release in orjson.loads(bytes(data))]
    except (ValueError, TypeError) as exc:
        raise ProtocolViolation(f"bad share acknowledge items: {exc}") from exc
