"""The bytes of the messages between a broker's processes (broker/links/mesh.py carries them).

No pickle: every op has a fixed layout, little-endian. Items are grouped in runs of the same
topic (a request usually names few topics and many partitions), and each field of a run is
one packed column (``struct.pack("<{n}q", *values)``), so a 1,000-partition Fetch costs a
handful of C calls, not 1,000 Python ones. Record bytes are never copied here: an append's
batches are separate parts that the ring copies once, and on the owner's side they are
views of the ring itself, which the log copies into the segment.

    string    u16 length + UTF-8 (0xFFFF: null)
    tps       u32 runs; per run: string topic, u32 n, i32[n] partitions
    append    i64 fence epoch, tps, i16[n] versions, u32[n] sizes (per run); then the
              batches of every item, in order
    read      i32 watcher (-1: none), tps, i64[n] offsets, i32[n] max bytes, u8[n] refuse zstd,
              i32[n] replica ids, i32[n] leader epochs, i32[n] last fetched epochs, u8[n]
              isolation levels; answered with u32 n, i16[n] error codes, i64[n] high
              watermarks, log starts, log ends, i32[n] leader epochs, diverging epochs,
              i64[n] diverging end offsets, last stable offsets; u32 m located, each u32
              index, u64 inode, i64 position, u32 length, string path; u32 k with aborted
              transactions, each u32 index, u32 count, i64[2 count] (producer id, first offset)
    markers   i32 timeout ms, tps, i64[n] producer ids, i16[n] producer epochs, u8[n] commit,
              i32[n] coordinator epochs; answered with u32 n, i16[n] error codes
    commit    i32 timeout ms, tps, i64[n] offsets; answered with u32 n, i16[n] error codes
    epochs    tps, i32[n] current leader epochs, i32[n] epochs; answered with u32 n, i16[n]
              error codes, i32[n] epochs, i64[n] end offsets
    offsets   tps, i64[n] timestamps (ListOffsets) or offsets (DeleteRecords)
    producers tps; answered with u32 n, i16[n] error codes, u32[n] producer counts, then the
              m producers of all partitions in order, as columns: i64[m] producer ids, i16[m]
              epochs, i32[m] last sequences, i64[m] last timestamps, i32[m] coordinator
              epochs, i64[m] current transactions' first offsets
    serve     i16 api key, i16 version, string client id, string client host, string principal,
              string listener, request body (broker/coordinator/forwarded.py)
"""

from __future__ import annotations

import functools
import struct
from typing import Any, Callable, Sequence, TypeVar

from broker.partitions.partition_ops import (
    NO_FENCE,
    AppendItem,
    AppendResult,
    CommitItem,
    DeleteItem,
    EpochEndResult,
    EpochItem,
    MarkerItem,
    OffsetItem,
    OffsetResult,
    PartitionState,
    ProducerInfo,
    ProducersResult,
    ReadItem,
    ReadResult,
)
from broker.protocol.errors import ProtocolViolation
from storage.types import TopicPartition, partitions_of

Buffer = bytes | bytearray | memoryview
ItemT = TypeVar("ItemT")

_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_I32 = struct.Struct("<i")
_I64 = struct.Struct("<q")
_SERVE = struct.Struct("<hh")
_FIND = struct.Struct("<hii")
_READ_DATA = struct.Struct("<IqqI")  # item index, inode, position, length
_ABORTED = struct.Struct("<II")  # item index, count of (producer id, first offset) pairs
NULL = 0xFFFF


@functools.lru_cache(maxsize=4096)
def _string(value: str | None) -> bytes:
    if value is None:
        return _U16.pack(NULL)
    data = value.encode()
    if len(data) >= NULL:
        raise ValueError(f"string of {len(data)} bytes is too long")
    return _U16.pack(len(data)) + data


class Reader:
    """A bounds-checked cursor over one message. A short or malformed message is a bug
    in this broker (both ends are ours), reported as ProtocolViolation."""

    __slots__ = ("data", "at")

    def __init__(self, data: Buffer, at: int = 0) -> None:
        self.data = data
        self.at = at

    def _take(self, size: int) -> int:
        at = self.at
        if at + size > len(self.data):
            raise ProtocolViolation(f"peer message truncated at {at} (+{size} of {len(self.data)})")
        self.at = at + size
        return at

    def u32(self) -> int:
        value: int = _U32.unpack_from(self.data, self._take(4))[0]
        return value

    def i32(self) -> int:
        value: int = _I32.unpack_from(self.data, self._take(4))[0]
        return value

    def i64(self) -> int:
        value: int = _I64.unpack_from(self.data, self._take(8))[0]
        return value

    def string(self) -> str | None:
        (length,) = _U16.unpack_from(self.data, self._take(2))
        if length == NULL:
            return None
        return bytes(self.data[self._take(length):self.at]).decode()

    def text(self) -> str:
        value = self.string()
        if value is None:
            raise ProtocolViolation("null string in a peer message")
        return value

    def column(self, code: str, count: int) -> tuple[int, ...]:
        layout = struct.Struct(f"<{count}{code}")
        values: tuple[int, ...] = layout.unpack_from(self.data, self._take(layout.size))
        return values

    def rest(self) -> Buffer:
        at = self.at
        self.at = len(self.data)
        return self.data[at:]

    def unpack(self, layout: struct.Struct) -> tuple[Any, ...]:
        values: tuple[Any, ...] = layout.unpack_from(self.data, self._take(layout.size))
        return values

    def view(self, size: int) -> Buffer:
        at = self._take(size)
        return self.data[at:at + size]


def _column(code: str, values: Sequence[int]) -> bytes:
    return struct.pack(f"<{len(values)}{code}", *values)


# ---------------------------------------------------------------------- partitions in runs
def _runs(tps: Sequence[TopicPartition]) -> list[tuple[str, int, int]]:
    """(topic, start, end) of each run of consecutive items on the same topic."""
    runs = []
    start = 0
    for i in range(1, len(tps) + 1):
        if i == len(tps) or tps[i].topic != tps[start].topic:
            runs.append((tps[start].topic, start, i))
            start = i
    return runs


def _encode_runs(tps: Sequence[TopicPartition], columns: Sequence[tuple[str, Sequence[int]]]) -> list[bytes]:
    """The tps and per-item integer columns, run by run."""
    runs = _runs(tps)
    out = [_U32.pack(len(runs))]
    for topic, start, end in runs:
        out.append(_string(topic))
        out.append(_U32.pack(end - start))
        out.append(_column("i", [tp.partition for tp in tps[start:end]]))
        for code, values in columns:
            out.append(_column(code, values[start:end]))
    return out


def _decode_runs(reader: Reader, codes: str) -> tuple[list[TopicPartition], list[list[int]]]:
    tps: list[TopicPartition] = []
    columns: list[list[int]] = [[] for _ in codes]
    for _ in range(reader.u32()):
        topic = reader.text()
        count = reader.u32()
        partitions = reader.column("i", count)
        known = partitions_of(topic, max(partitions) + 1) if partitions else []
        tps.extend(known[p] if p >= 0 else TopicPartition(topic, p) for p in partitions)
        for column, code in zip(columns, codes):
            column.extend(reader.column(code, count))
    return tps, columns


def encode_tps(tps: Sequence[TopicPartition]) -> list[bytes]:
    return _encode_runs(tps, ())


def decode_tps(data: Buffer) -> list[TopicPartition]:
    return _decode_runs(Reader(data), "")[0]


def encode_epoch(epoch: int) -> list[bytes]:
    return [_I64.pack(epoch)]


def decode_epoch(data: Buffer) -> int:
    return int(_I64.unpack_from(data)[0])


# ---------------------------------------------------------------------- append
def encode_append(items: Sequence[AppendItem], fence_epoch: int) -> list[Buffer]:
    """The parts of an append call; the batches are parts of their own (not copied here)."""
    tps = [item.tp for item in items]
    sizes = [len(item.records) for item in items]
    parts: list[Buffer] = [_I64.pack(fence_epoch)]
    parts.extend(_encode_runs(tps, (("h", [item.version for item in items]), ("I", sizes))))
    parts.extend(item.records for item in items)
    return parts


def decode_append(data: Buffer) -> tuple[list[AppendItem], int]:
    """The items (their batches are views of ``data``) and the fence epoch."""
    reader = Reader(data)
    fence_epoch = reader.i64()
    tps, (versions, sizes) = _decode_runs(reader, "hI")
    items = [AppendItem(tp, reader.view(size), version) for tp, version, size in zip(tps, versions, sizes)]
    return items, fence_epoch


def encode_append_verified(items: Sequence[AppendItem], guards: Sequence[int]) -> list[Buffer]:
    """An append of transactional batches verified by the coordinator: each item's guard
    (storage/producer_state.py), then the append as ``encode_append`` lays it out."""
    return [_U32.pack(len(guards)), _column("q", guards), *encode_append(items, NO_FENCE)]


def decode_append_verified(data: Buffer) -> tuple[list[AppendItem], list[int]]:
    reader = Reader(data)
    guards = list(reader.column("q", reader.u32()))
    items, _fence = decode_append(reader.rest())
    if len(guards) != len(items):
        raise ProtocolViolation(f"{len(guards)} guards for {len(items)} appends")
    return items, guards


def _encode_messages(messages: Sequence[str | None]) -> list[bytes]:
    present = [(i, m) for i, m in enumerate(messages) if m is not None]
    out = [_U32.pack(len(present))]
    for index, message in present:
        out.append(_U32.pack(index))
        out.append(_string(message[:4096]))
    return out


def _decode_messages(reader: Reader, count: int) -> list[str | None]:
    messages: list[str | None] = [None] * count
    for _ in range(reader.u32()):
        index = reader.u32()
        message = reader.string()
        if index >= count:
            raise ProtocolViolation(f"message for item {index} of {count}")
        messages[index] = message
    return messages


def encode_append_results(results: Sequence[AppendResult]) -> list[bytes]:
    columns = list(zip(*results)) if results else [()] * 7
    return [_U32.pack(len(results)), _column("h", columns[0]), _column("q", columns[1]), _column("q", columns[2]),
            _column("q", columns[3]), _column("i", columns[5]), _column("q", columns[6]), *_encode_messages(columns[4])]


def decode_append_results(data: Buffer) -> list[AppendResult]:
    reader = Reader(data)
    count = reader.u32()
    errors, bases, times, starts, counts, watermarks = (reader.column(code, count) for code in "hqqqiq")
    messages = _decode_messages(reader, count)
    return [AppendResult(*fields) for fields in zip(errors, bases, times, starts, messages, counts, watermarks)]


# ---------------------------------------------------------------------- read
def encode_read(items: Sequence[ReadItem], watcher: int | None) -> list[bytes]:
    tps = [item.tp for item in items]
    return [_I32.pack(-1 if watcher is None else watcher),
            *_encode_runs(tps, (("q", [item.offset for item in items]), ("i", [item.max_bytes for item in items]),
                                ("B", [1 if item.refuse_zstd else 0 for item in items]),
                                ("i", [item.replica_id for item in items]), ("i", [item.leader_epoch for item in items]),
                                ("i", [item.last_fetched_epoch for item in items]),
                                ("B", [item.isolation_level for item in items])))]


def decode_read(data: Buffer) -> tuple[list[ReadItem], int | None]:
    reader = Reader(data)
    watcher = reader.i32()
    tps, (offsets, max_bytes, refuse, replicas, epochs, fetched, isolation) = _decode_runs(reader, "qiBiiiB")
    items = [ReadItem(tp, offset, limit, bool(no_zstd), replica, epoch, last, level)
             for tp, offset, limit, no_zstd, replica, epoch, last, level in zip(tps, offsets, max_bytes, refuse, replicas,
                                                                                epochs, fetched, isolation)]
    return items, (None if watcher < 0 else watcher)


def encode_read_results(results: Sequence[ReadResult]) -> list[bytes]:
    count = len(results)
    out = [_U32.pack(count), _column("h", [r.error_code for r in results]),
           _column("q", [r.high_watermark for r in results]), _column("q", [r.log_start_offset for r in results]),
           _column("q", [r.log_end_offset for r in results]), _column("i", [r.leader_epoch for r in results]),
           _column("i", [r.diverging_epoch for r in results]), _column("q", [r.diverging_end_offset for r in results]),
           _column("q", [r.last_stable_offset for r in results])]
    located = [(i, r) for i, r in enumerate(results) if r.path]
    out.append(_U32.pack(len(located)))
    for index, result in located:
        out.append(_READ_DATA.pack(index, result.inode, result.position, result.length))
        out.append(_string(result.path))
    # Only read_committed reads of a range holding aborted transactions have any.
    aborted = [(i, r.aborted) for i, r in enumerate(results) if r.aborted]
    out.append(_U32.pack(len(aborted)))
    for index, pairs in aborted:
        out.append(_ABORTED.pack(index, len(pairs)))
        out.append(_column("q", [value for pair in pairs for value in pair]))
    return out


def decode_read_results(data: Buffer) -> list[ReadResult]:
    reader = Reader(data)
    count = reader.u32()
    errors, watermarks, starts, ends, epochs, diverging, diverging_ends, stable = (
        reader.column(code, count) for code in "hqqqiiqq")
    results = [ReadResult(error, hw, start, end, "", 0, 0, 0, epoch, div, div_end, lso)
               for error, hw, start, end, epoch, div, div_end, lso in zip(errors, watermarks, starts, ends, epochs,
                                                                          diverging, diverging_ends, stable)]
    for _ in range(reader.u32()):
        index, inode, position, length = reader.unpack(_READ_DATA)
        path = reader.text()
        if index >= count:
            raise ProtocolViolation(f"file range for item {index} of {count}")
        results[index] = results[index]._replace(path=path, inode=inode, position=position, length=length)
    for _ in range(reader.u32()):
        index, pairs = reader.unpack(_ABORTED)
        values = reader.column("q", 2 * pairs)
        if index >= count:
            raise ProtocolViolation(f"aborted transactions for item {index} of {count}")
        results[index] = results[index]._replace(aborted=tuple(zip(values[::2], values[1::2])))
    return results


# ---------------------------------------------------------------------- acks=all
def encode_commit_wait(items: Sequence[CommitItem], timeout_ms: int) -> list[bytes]:
    return [_I32.pack(timeout_ms), *_encode_runs([item.tp for item in items], (("q", [item.offset for item in items]),))]


def decode_commit_wait(data: Buffer) -> tuple[list[CommitItem], int]:
    reader = Reader(data)
    timeout_ms = reader.i32()
    tps, (offsets,) = _decode_runs(reader, "q")
    return [CommitItem(tp, offset) for tp, offset in zip(tps, offsets)], timeout_ms


# ---------------------------------------------------------------------- transaction markers
def encode_markers(items: Sequence[MarkerItem], timeout_ms: int) -> list[bytes]:
    return [_I32.pack(timeout_ms), *_encode_runs([item.tp for item in items], (
        ("q", [item.producer_id for item in items]), ("h", [item.producer_epoch for item in items]),
        ("B", [1 if item.commit else 0 for item in items]), ("i", [item.coordinator_epoch for item in items]),
        ("B", [item.transaction_version for item in items])))]


def decode_markers(data: Buffer) -> tuple[list[MarkerItem], int]:
    reader = Reader(data)
    timeout_ms = reader.i32()
    tps, (producer_ids, producer_epochs, commits, coordinator_epochs, versions) = _decode_runs(reader, "qhBiB")
    items = [MarkerItem(tp, producer_id, producer_epoch, bool(commit), coordinator_epoch, version)
             for tp, producer_id, producer_epoch, commit, coordinator_epoch, version
             in zip(tps, producer_ids, producer_epochs, commits, coordinator_epochs, versions)]
    return items, timeout_ms


def encode_codes(codes: Sequence[int]) -> list[bytes]:
    return [_U32.pack(len(codes)), _column("h", list(codes))]


def decode_codes(data: Buffer) -> list[int]:
    reader = Reader(data)
    return list(reader.column("h", reader.u32()))


# ---------------------------------------------------------------------- OffsetForLeaderEpoch
def encode_epoch_items(items: Sequence[EpochItem]) -> list[bytes]:
    return _encode_runs([item.tp for item in items], (("i", [item.current_leader_epoch for item in items]),
                                                      ("i", [item.leader_epoch for item in items])))


def decode_epoch_items(data: Buffer) -> list[EpochItem]:
    tps, (currents, epochs) = _decode_runs(Reader(data), "ii")
    return [EpochItem(tp, current, epoch) for tp, current, epoch in zip(tps, currents, epochs)]


def encode_epoch_results(results: Sequence[EpochEndResult]) -> list[bytes]:
    return [_U32.pack(len(results)), _column("h", [r.error_code for r in results]),
            _column("i", [r.leader_epoch for r in results]), _column("q", [r.end_offset for r in results])]


def decode_epoch_results(data: Buffer) -> list[EpochEndResult]:
    reader = Reader(data)
    count = reader.u32()
    columns = [reader.column(code, count) for code in "hiq"]
    return [EpochEndResult(*fields) for fields in zip(*columns)]


# ---------------------------------------------------------------------- offsets
def encode_offset_items(items: Sequence[OffsetItem] | Sequence[DeleteItem]) -> list[bytes]:
    return _encode_runs([item[0] for item in items], (("q", [item[1] for item in items]),))


def decode_offset_items(data: Buffer, make: Callable[[TopicPartition, int], ItemT]) -> list[ItemT]:
    tps, (values,) = _decode_runs(Reader(data), "q")
    return [make(tp, value) for tp, value in zip(tps, values)]


def encode_offset_results(results: Sequence[OffsetResult]) -> list[bytes]:
    columns = list(zip(*results)) if results else [()] * 4
    return [_U32.pack(len(results)), _column("h", columns[0]), _column("q", columns[1]), _column("q", columns[2]),
            _column("i", columns[3])]


def decode_offset_results(data: Buffer) -> list[OffsetResult]:
    reader = Reader(data)
    count = reader.u32()
    columns = [reader.column(code, count) for code in "hqqi"]
    return [OffsetResult(*fields) for fields in zip(*columns)]


def encode_states(states: Sequence[PartitionState]) -> list[bytes]:
    columns = list(zip(*states)) if states else [()] * 3
    return [_U32.pack(len(states)), *(_column("q", column) for column in columns)]


def decode_states(data: Buffer) -> list[PartitionState]:
    reader = Reader(data)
    count = reader.u32()
    columns = [reader.column("q", count) for _ in range(3)]
    return [PartitionState(*fields) for fields in zip(*columns)]


# ---------------------------------------------------------------------- DescribeProducers
_PRODUCER_COLUMNS = "qhiqiq"  # ProducerInfo's fields, in order


def encode_producers_results(results: Sequence[ProducersResult]) -> list[bytes]:
    producers = [p for r in results for p in r.producers]
    columns = list(zip(*producers)) if producers else [()] * len(_PRODUCER_COLUMNS)
    return [_U32.pack(len(results)), _column("h", [r.error_code for r in results]),
            _column("I", [len(r.producers) for r in results]),
            *(_column(code, column) for code, column in zip(_PRODUCER_COLUMNS, columns))]


def decode_producers_results(data: Buffer) -> list[ProducersResult]:
    reader = Reader(data)
    count = reader.u32()
    codes = reader.column("h", count)
    sizes = reader.column("I", count)
    total = sum(sizes)
    producers = [ProducerInfo(*fields) for fields in zip(*(reader.column(code, total) for code in _PRODUCER_COLUMNS))]
    results = []
    start = 0
    for code, size in zip(codes, sizes):
        results.append(ProducersResult(code, tuple(producers[start:start + size])))
        start += size
    return results


# ---------------------------------------------------------------------- the coordinator
def encode_serve(api_key: int, api_version: int, client_id: str | None, client_host: str, principal: str,
                 listener: str, body: bytes) -> list[Buffer]:
    return [_SERVE.pack(api_key, api_version), _string(client_id), _string(client_host), _string(principal),
            _string(listener), body]


def decode_serve(data: Buffer) -> tuple[int, int, str | None, str, str, str, Buffer]:
    """(api key, version, client id, client host, principal, listener, request body)."""
    reader = Reader(data)
    api_key, api_version = reader.unpack(_SERVE)
    client_id = reader.string()
    client_host = reader.text()
    principal = reader.text()
    listener = reader.text()
    return api_key, api_version, client_id, client_host, principal, listener, reader.rest()


def encode_found(error_code: int, node_id: int, host: str, port: int) -> list[bytes]:
    return [_FIND.pack(error_code, node_id, port), _string(host)]


def decode_found(data: Buffer) -> tuple[int, int, str, int]:
    reader = Reader(data)
    error_code, node_id, port = reader.unpack(_FIND)
    return error_code, node_id, reader.text(), port
