"""The operations on a partition that only its owning worker may run, as one typed interface.

Two implementations: ``broker.partitions.owner.Owner`` runs them on the partitions this process writes
and answers at once; ``broker.links.remote_ops.RemotePartitionOps`` sends them to the owning
worker over the shared-memory rings and answers with a future. Handlers and the
coordinator call them through ``broker.links.forwarding.on_owners`` and never need to know which.

Every op takes a list of items for several partitions and answers one result per item, in
order. Expected failures are error codes in the results, never exceptions.
"""

from __future__ import annotations

import asyncio
from typing import NamedTuple, Protocol, TypeVar, Union

from storage.types import TopicPartition

T = TypeVar("T")

# A local op answers at once; a remote one answers later.
Reply = Union[T, "asyncio.Future[T]"]

NO_FENCE = -1  # an append that is not the coordinator's (no epoch to check)
# Not a Kafka error code, never sent to a client: the transactional batch would open a
# transaction on the partition, so the transaction coordinator must confirm it first; the
# result's base_offset holds the verification guard to append it with (append_verified).
VERIFICATION_NEEDED = -2


class AppendItem(NamedTuple):
    tp: TopicPartition
    records: bytes | bytearray | memoryview  # record batches as the client sent them
    version: int  # of the Produce request (below 7 refuses zstd)


class ReadItem(NamedTuple):
    tp: TopicPartition
    offset: int
    max_bytes: int
    refuse_zstd: bool  # Fetch below v10
    replica_id: int = -1  # a follower broker's id (it reads to the log end and moves the high watermark)
    leader_epoch: int = -1  # the fetcher's current_leader_epoch (-1: unchecked)
    last_fetched_epoch: int = -1  # a follower's epoch of its last batch (-1: no divergence check)
    isolation_level: int = 0  # 1: read_committed, below the last stable offset (consumers only)


class CommitItem(NamedTuple):
    tp: TopicPartition
    offset: int  # the high watermark an acks=all append waits for (its last offset + 1)


class EpochItem(NamedTuple):
    tp: TopicPartition
    current_leader_epoch: int  # the asker's (-1: unchecked)
    leader_epoch: int  # where does this epoch end?


class EpochEndResult(NamedTuple):
    error_code: int
    leader_epoch: int = -1  # the largest epoch <= the one asked that this log has
    end_offset: int = -1  # the first offset after it


LOG_END = -100  # an OffsetItem timestamp meaning the log end offset (never from a client: -1 to -4 only)
LATEST_STABLE = -101  # an OffsetItem timestamp meaning the last stable offset (-1 asked with read_committed)


class OffsetItem(NamedTuple):
    tp: TopicPartition
    timestamp: int  # or -1 latest (the high watermark), -2 earliest, -3 max timestamp, LOG_END, LATEST_STABLE


class DeleteItem(NamedTuple):
    tp: TopicPartition
    offset: int  # the new log start; -1: the high watermark


class MarkerItem(NamedTuple):
    """A transaction's end on one partition: a COMMIT or ABORT control batch of the producer."""

    tp: TopicPartition
    producer_id: int
    producer_epoch: int
    commit: bool  # False: ABORT
    coordinator_epoch: int  # of the transaction coordinator's __transaction_state partition
    transaction_version: int = 0  # the transaction's (WriteTxnMarkers v2): 2 when EndTxn bumped the epoch


class AppendResult(NamedTuple):
    error_code: int
    base_offset: int = -1
    log_append_time: int = -1
    log_start_offset: int = -1
    error_message: str | None = None
    record_count: int = 0
    high_watermark: int = -1  # right after the append: acks=all waits only while it is below the batch's end


class ReadResult(NamedTuple):
    """Where a fetch's bytes lie. ``path``/``inode`` let any process open the same file
    (the inode proves it is the file the owner read, not a replacement)."""

    error_code: int
    high_watermark: int = -1
    log_start_offset: int = -1
    log_end_offset: int = -1
    path: str = ""
    inode: int = 0
    position: int = 0
    length: int = 0
    leader_epoch: int = -1  # the partition's current leader epoch
    diverging_epoch: int = -1  # a follower's log diverged: its last epoch here ends ...
    diverging_end_offset: int = -1  # ... at this offset (truncate there)
    last_stable_offset: int = -1  # below it every transaction is decided (-1: unknown, answer the high watermark)
    # read_committed: (producer id, first offset) of the aborted transactions the bytes may hold
    aborted: tuple[tuple[int, int], ...] = ()


class OffsetResult(NamedTuple):
    error_code: int
    offset: int = -1
    timestamp: int = -1
    leader_epoch: int = -1


class ProducerInfo(NamedTuple):
    """One producer's state on a partition, as DescribeProducers reports it (Kafka's
    ProducerStateEntry: the fields of its snapshot entry)."""

    producer_id: int
    producer_epoch: int
    last_sequence: int  # -1: no data batch in this epoch
    last_timestamp: int  # of its last batch or marker
    coordinator_epoch: int  # of its last marker here, -1: none yet
    current_txn_start_offset: int  # first offset of its open transaction, -1: none


class ProducersResult(NamedTuple):
    error_code: int
    producers: tuple[ProducerInfo, ...] = ()


class LogDirReplica(NamedTuple):
    """One partition log of this broker, as DescribeLogDirs reports it."""

    log_dir: str  # the absolute path of the log dir holding it
    tp: TopicPartition
    size: int  # bytes of its segments
    offset_lag: int  # Kafka's: max(high watermark - log end, 0) for a current log
    is_future: bool  # a copy AlterReplicaLogDirs is making, to replace the current log


class MoveItem(NamedTuple):
    """AlterReplicaLogDirs: move ``tp``'s log to log dir ``path`` of this broker."""

    tp: TopicPartition
    path: str


class LogDirsReport(NamedTuple):
    """A worker's logs for DescribeLogDirs, and the log dirs it found failed."""

    replicas: tuple[LogDirReplica, ...]
    offline_dirs: tuple[str, ...]


class PartitionState(NamedTuple):
    """-1s for a partition the owner does not have."""

    log_start_offset: int
    high_watermark: int
    log_end_offset: int


# One acknowledgement batch of a share partition: (first offset, last offset, acknowledge
# types: one for the whole range, or one per offset; 0 gap, 1 accept, 2 release, 3 reject).
ShareAck = tuple[int, int, tuple[int, ...]]


class ShareFetchItem(NamedTuple):
    """One partition of a ShareFetch, for the owner's share partition of ``group_id``."""

    tp: TopicPartition
    topic_id: str  # the topic's id (str of the UUID): the share state is keyed by it
    group_id: str
    member_id: str
    fetch: bool  # acquire records (False: only acknowledge)
    max_bytes: int
    max_records: int
    acks: tuple[ShareAck, ...] = ()
    watcher: int = -1  # the worker to note on the next append here (a parked share fetch), or -1
    fresh: bool = False  # the first fetch of a share session here: the leader checks its state is current


class ShareFetchResult(NamedTuple):
    """What a share fetch acquired: the whole batches holding it (a file range, as a
    ReadResult's) and the acquired offset ranges with their delivery counts."""

    error_code: int
    ack_error_code: int = 0
    leader_epoch: int = -1
    path: str = ""
    inode: int = 0
    position: int = 0
    length: int = 0
    acquired: tuple[tuple[int, int, int], ...] = ()  # (first offset, last offset, delivery count)


class ShareAckItem(NamedTuple):
    """Acknowledgements of one share partition (ShareAcknowledge), or, with ``release``,
    every record ``member_id`` holds there given back (its share session closed)."""

    tp: TopicPartition
    topic_id: str
    group_id: str
    member_id: str
    acks: tuple[ShareAck, ...] = ()
    release: bool = False


class PartitionOps(Protocol):
    def append(self, items: list[AppendItem], fence_epoch: int = NO_FENCE) -> Reply[list[AppendResult]]:
        """Append each item's batches. ``fence_epoch``: the coordinator's epoch, for its
        writes to __consumer_offsets; an epoch older than the current one is refused
        (NOT_COORDINATOR), so a deposed coordinator cannot write."""
        ...

    def append_verified(self, items: list[AppendItem], guards: list[int]) -> Reply[list[AppendResult]]:
        """Append transactional batches the transaction coordinator verified: each with the
        guard its first append was answered (VERIFICATION_NEEDED); a guard that is gone (a
        marker came meanwhile: the transaction ended) is INVALID_TXN_STATE."""
        ...

    def read(self, items: list[ReadItem], watcher: int | None) -> Reply[list[ReadResult]]:
        """Where each item's bytes are. ``watcher``: the worker to notify on the next append
        to any of these partitions (a parked long-poll), or None."""
        ...

    def wait_committed(self, items: list[CommitItem], timeout_ms: int) -> Reply[list[int]]:
        """acks=all: an error code per item once its high watermark reaches the offset
        (NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR is then below min.insync.replicas),
        or REQUEST_TIMED_OUT."""
        ...

    def write_markers(self, items: list[MarkerItem], timeout_ms: int) -> Reply[list[int]]:
        """WriteTxnMarkers: append each item's marker; an error code per item, answered
        once the marker is committed (acks=all, as Kafka writes markers) or REQUEST_TIMED_OUT."""
        ...

    def list_offsets(self, items: list[OffsetItem]) -> Reply[list[OffsetResult]]: ...

    def epoch_end_offsets(self, items: list[EpochItem]) -> Reply[list[EpochEndResult]]:
        """OffsetForLeaderEpoch: where each epoch ends in the leader's log."""
        ...

    def delete_records(self, items: list[DeleteItem]) -> Reply[list[OffsetResult]]:
        """Move each log start; the result's offset is the new log start."""
        ...

    def partition_state(self, tps: list[TopicPartition]) -> Reply[list[PartitionState]]: ...

    def describe_producers(self, tps: list[TopicPartition]) -> Reply[list[ProducersResult]]:
        """DescribeProducers: the producers each partition's log knows (on any replica, as
        Kafka answers on followers too)."""
        ...

    def describe_log_dirs(self) -> Reply[LogDirsReport]:
        """DescribeLogDirs: every partition log this owner keeps in an online dir, with the
        dir holding it, and the dirs it knows failed."""
        ...

    def alter_log_dirs(self, items: list[MoveItem]) -> Reply[list[int]]:
        """AlterReplicaLogDirs: start each move (a future log, caught up and swapped in by
        the owner's housekeeping); an error code per item."""
        ...

    def share_fetch(self, items: list[ShareFetchItem]) -> Reply[list[ShareFetchResult]]:
        """ShareFetch: apply each item's acknowledgements, then acquire records for its
        member in the group's share partition (broker/partitions/share_partitions.py)."""
        ...

    def share_acknowledge(self, items: list[ShareAckItem]) -> Reply[list[int]]:
        """ShareAcknowledge, or a closed share session's release: an error code per item,
        answered once the share partition's state is persisted."""
        ...

    def sync_registry(self) -> Reply[None]:
        """Create the owned partitions the topic registry has and delete the dropped ones."""
        ...
