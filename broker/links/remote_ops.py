"""PartitionOps across processes: the proxy that sends them over the mesh, and the handlers
that run them on the owner's side.

On the owner's side every op runs synchronously in the doorbell callback (Owner's ops never
wait), so an append reads its batches straight from the ring into the segment.
"""

from __future__ import annotations

import asyncio
from typing import Protocol

from broker.links import log_dir_codec, share_codec
from broker.links import peer_codec as codec
from broker.links.mesh import Mesh, Op, Parts
from broker.partitions.partition_ops import (
    NO_FENCE,
    AppendItem,
    AppendResult,
    CommitItem,
    DeleteItem,
    EpochEndResult,
    EpochItem,
    LogDirsReport,
    MarkerItem,
    MoveItem,
    OffsetItem,
    OffsetResult,
    PartitionState,
    ProducersResult,
    ReadItem,
    ReadResult,
    ShareAckItem,
    ShareFetchItem,
    ShareFetchResult,
)
from storage.types import TopicPartition

DEFAULT_TIMEOUT = 30.0


def _nothing(_body: memoryview) -> None:
    return None


class RemotePartitionOps:
    """The PartitionOps of process ``peer`` of this broker. ``wait_for_peer``: calls made
    while it is down wait for it (within the timeout) instead of failing at once."""

    def __init__(self, mesh: Mesh, peer: int, timeout: float = DEFAULT_TIMEOUT, wait_for_peer: bool = False) -> None:
        self._mesh = mesh
        self.peer = peer
        self._timeout = timeout
        self._wait = wait_for_peer

    def append(self, items: list[AppendItem], fence_epoch: int = NO_FENCE) -> "asyncio.Future[list[AppendResult]]":
        parts = codec.encode_append(items, fence_epoch)
        return self._mesh.call(self.peer, Op.APPEND, parts, codec.decode_append_results, self._timeout, self._wait)

    def append_verified(self, items: list[AppendItem], guards: list[int]) -> "asyncio.Future[list[AppendResult]]":
        parts = codec.encode_append_verified(items, guards)
        return self._mesh.call(self.peer, Op.APPEND_VERIFIED, parts, codec.decode_append_results, self._timeout,
                               self._wait)

    def read(self, items: list[ReadItem], watcher: int | None) -> "asyncio.Future[list[ReadResult]]":
        parts = codec.encode_read(items, watcher)
        return self._mesh.call(self.peer, Op.READ, parts, codec.decode_read_results, self._timeout, self._wait)

    def wait_committed(self, items: list[CommitItem], timeout_ms: int) -> "asyncio.Future[list[int]]":
        parts = codec.encode_commit_wait(items, timeout_ms)
        # The owner answers by timeout_ms; the call's own deadline leaves it room to.
        return self._mesh.call(self.peer, Op.WAIT_COMMITTED, parts, codec.decode_codes,
                               max(self._timeout, timeout_ms / 1000 + 5), self._wait)

    def write_markers(self, items: list[MarkerItem], timeout_ms: int) -> "asyncio.Future[list[int]]":
        parts = codec.encode_markers(items, timeout_ms)
        # Answered once committed, by timeout_ms, like wait_committed.
        return self._mesh.call(self.peer, Op.WRITE_MARKERS, parts, codec.decode_codes,
                               max(self._timeout, timeout_ms / 1000 + 5), self._wait)

    def epoch_end_offsets(self, items: list[EpochItem]) -> "asyncio.Future[list[EpochEndResult]]":
        return self._mesh.call(self.peer, Op.EPOCH_END, codec.encode_epoch_items(items), codec.decode_epoch_results,
                               self._timeout, self._wait)

    def list_offsets(self, items: list[OffsetItem]) -> "asyncio.Future[list[OffsetResult]]":
        parts = codec.encode_offset_items(items)
        return self._mesh.call(self.peer, Op.LIST_OFFSETS, parts, codec.decode_offset_results,
                               self._timeout, self._wait)

    def delete_records(self, items: list[DeleteItem]) -> "asyncio.Future[list[OffsetResult]]":
        parts = codec.encode_offset_items(items)
        return self._mesh.call(self.peer, Op.DELETE_RECORDS, parts, codec.decode_offset_results,
                               self._timeout, self._wait)

    def partition_state(self, tps: list[TopicPartition]) -> "asyncio.Future[list[PartitionState]]":
        parts = codec.encode_tps(tps)
        return self._mesh.call(self.peer, Op.PARTITION_STATE, parts, codec.decode_states,
                               self._timeout, self._wait)

    def describe_producers(self, tps: list[TopicPartition]) -> "asyncio.Future[list[ProducersResult]]":
        return self._mesh.call(self.peer, Op.DESCRIBE_PRODUCERS, codec.encode_tps(tps), codec.decode_producers_results,
                               self._timeout, self._wait)

    def sync_registry(self) -> "asyncio.Future[None]":
        return self._mesh.call(self.peer, Op.SYNC_REGISTRY, [], _nothing, self._timeout, self._wait)

    def alter_log_dirs(self, items: list[MoveItem]) -> "asyncio.Future[list[int]]":
        return self._mesh.call(self.peer, Op.ALTER_LOG_DIRS, log_dir_codec.encode_moves(items), codec.decode_codes,
                               self._timeout, self._wait)

    def describe_log_dirs(self) -> "asyncio.Future[LogDirsReport]":
        return self._mesh.call(self.peer, Op.DESCRIBE_LOG_DIRS, [], log_dir_codec.decode_report, self._timeout,
                               self._wait)

    def share_fetch(self, items: list[ShareFetchItem]) -> "asyncio.Future[list[ShareFetchResult]]":
        return self._mesh.call(self.peer, Op.SHARE_FETCH, share_codec.encode_fetch_items(items),
                               share_codec.decode_fetch_results, self._timeout, self._wait)

    def share_acknowledge(self, items: list[ShareAckItem]) -> "asyncio.Future[list[int]]":
        return self._mesh.call(self.peer, Op.SHARE_ACK, share_codec.encode_ack_items(items), codec.decode_codes,
                               self._timeout, self._wait)


class LocalPartitionOps(Protocol):
    """What the owner's side needs: PartitionOps that answer at once (broker.partitions.owner.Owner)."""

    def append(self, items: list[AppendItem], fence_epoch: int = NO_FENCE) -> list[AppendResult]: ...

    def append_verified(self, items: list[AppendItem], guards: list[int]) -> list[AppendResult]: ...

    def read(self, items: list[ReadItem], watcher: int | None) -> list[ReadResult]: ...

    def wait_committed(self, items: list[CommitItem], timeout_ms: int) -> "list[int] | asyncio.Future[list[int]]": ...

    def write_markers(self, items: list[MarkerItem], timeout_ms: int) -> "list[int] | asyncio.Future[list[int]]": ...

    def list_offsets(self, items: list[OffsetItem]) -> list[OffsetResult]: ...

    def epoch_end_offsets(self, items: list[EpochItem]) -> list[EpochEndResult]: ...

    def delete_records(self, items: list[DeleteItem]) -> list[OffsetResult]: ...

    def partition_state(self, tps: list[TopicPartition]) -> list[PartitionState]: ...

    def describe_producers(self, tps: list[TopicPartition]) -> list[ProducersResult]: ...

    def sync_registry(self) -> None: ...

    def describe_log_dirs(self) -> LogDirsReport: ...

    def alter_log_dirs(self, items: list[MoveItem]) -> list[int]: ...

    def share_fetch(self, items: list[ShareFetchItem]) -> "asyncio.Future[list[ShareFetchResult]]": ...

    def share_acknowledge(self, items: list[ShareAckItem]) -> "asyncio.Future[list[int]]": ...


def serve_partition_ops(mesh: Mesh, owner: LocalPartitionOps) -> None:
    """Answer the other processes' PartitionOps calls with ``owner``'s."""

    def append(body: memoryview) -> Parts:
        items, fence_epoch = codec.decode_append(body)
        return codec.encode_append_results(owner.append(items, fence_epoch))

    def append_verified(body: memoryview) -> Parts:
        items, guards = codec.decode_append_verified(body)
        return codec.encode_append_results(owner.append_verified(items, guards))

    def read(body: memoryview) -> Parts:
        items, watcher = codec.decode_read(body)
        return codec.encode_read_results(owner.read(items, watcher))

    def wait_committed(body: memoryview) -> "Parts | asyncio.Future[Parts]":
        items, timeout_ms = codec.decode_commit_wait(body)
        answer = owner.wait_committed(items, timeout_ms)
        if isinstance(answer, list):
            return codec.encode_codes(answer)
        return asyncio.ensure_future(_encoded(answer))

    def write_markers(body: memoryview) -> "Parts | asyncio.Future[Parts]":
        items, timeout_ms = codec.decode_markers(body)
        answer = owner.write_markers(items, timeout_ms)
        if isinstance(answer, list):
            return codec.encode_codes(answer)
        return asyncio.ensure_future(_encoded(answer))

    def epoch_end_offsets(body: memoryview) -> Parts:
        return codec.encode_epoch_results(owner.epoch_end_offsets(codec.decode_epoch_items(body)))

    def list_offsets(body: memoryview) -> Parts:
        return codec.encode_offset_results(owner.list_offsets(codec.decode_offset_items(body, OffsetItem)))

    def delete_records(body: memoryview) -> Parts:
        return codec.encode_offset_results(owner.delete_records(codec.decode_offset_items(body, DeleteItem)))

    def partition_state(body: memoryview) -> Parts:
        return codec.encode_states(owner.partition_state(codec.decode_tps(body)))

    def describe_producers(body: memoryview) -> Parts:
        return codec.encode_producers_results(owner.describe_producers(codec.decode_tps(body)))

    def sync_registry(_body: memoryview) -> Parts:
        owner.sync_registry()
        return []

    def share_fetch(body: memoryview) -> "asyncio.Future[Parts]":
        return asyncio.ensure_future(_share_fetched(owner.share_fetch(share_codec.decode_fetch_items(body))))

    def share_acknowledge(body: memoryview) -> "asyncio.Future[Parts]":
        return asyncio.ensure_future(_encoded(owner.share_acknowledge(share_codec.decode_ack_items(body))))

    def describe_log_dirs(_body: memoryview) -> Parts:
        return log_dir_codec.encode_report(owner.describe_log_dirs())

    mesh.handlers.update({Op.SHARE_FETCH: share_fetch, Op.SHARE_ACK: share_acknowledge})
    def alter_log_dirs(body: memoryview) -> Parts:
        return codec.encode_codes(owner.alter_log_dirs(log_dir_codec.decode_moves(body)))

    mesh.handlers[Op.DESCRIBE_LOG_DIRS] = describe_log_dirs
    mesh.handlers[Op.ALTER_LOG_DIRS] = alter_log_dirs
    mesh.handlers.update({Op.APPEND: append, Op.APPEND_VERIFIED: append_verified, Op.READ: read, Op.WAIT_COMMITTED: wait_committed,
                          Op.WRITE_MARKERS: write_markers, Op.EPOCH_END: epoch_end_offsets,
                          Op.LIST_OFFSETS: list_offsets, Op.DELETE_RECORDS: delete_records,
                          Op.PARTITION_STATE: partition_state, Op.DESCRIBE_PRODUCERS: describe_producers,
                          Op.SYNC_REGISTRY: sync_registry})


async def _encoded(pending: "asyncio.Future[list[int]]") -> Parts:
    return codec.encode_codes(await pending)


async def _share_fetched(pending: "asyncio.Future[list[ShareFetchResult]]") -> Parts:
    return share_codec.encode_fetch_results(await pending)
