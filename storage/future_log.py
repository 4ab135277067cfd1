"""A partition's future log: the copy AlterReplicaLogDirs makes in another log dir of the
broker while the current log keeps serving (Kafka's future replica).

Its directory is ``<dest>/<topic>-<partition>.<id>-future``. The owner copies into it a
budget of bytes at a time (``catch_up``), whole batches as they are (offsets, epochs,
producers kept: the follower's append), from the current log's start; when it holds all
the current log does, the log manager swaps it in (``LogManager.move_future_logs``) on the
owner's thread, between two appends, so nothing is written meanwhile.
"""

from __future__ import annotations

import os
import uuid

from storage import checkpoint, files
from storage.log import PartitionLog
from storage.types import TopicPartition

FUTURE_DIR_SUFFIX = "-future"
CHUNK_BYTES = 1 << 20  # one read of the current log


def future_dir_name(tp: TopicPartition) -> str:
    return f"{tp.dir_name}.{uuid.uuid4().hex}{FUTURE_DIR_SUFFIX}"


def parse_future_dir_name(name: str) -> TopicPartition | None:
    """The partition of a future log's directory name, or None if it is not one."""
    if not name.endswith(FUTURE_DIR_SUFFIX):
        return None
    base, dot, _id = name[:-len(FUTURE_DIR_SUFFIX)].rpartition(".")
    if not dot:
        return None
    try:
        return TopicPartition.from_dir_name(base)
    except ValueError:
        return None


def copy_start(log: PartitionLog) -> int:
    """Where a copy of ``log`` starts: the first offset of the batch holding its log start
    (DeleteRecords may have put that inside a batch; batches are copied whole)."""
    first = next(log.iter_batch_headers(log.log_start_offset), None)
    return log.log_start_offset if first is None else min(first.base_offset, log.log_start_offset)


class FutureLog:
    """The future log of one partition, in log dir ``dest``."""

    def __init__(self, dest: str, log: PartitionLog) -> None:
        self.dest = dest
        self.log = log

    @classmethod
    def create(cls, dest: str, current: PartitionLog) -> "FutureLog":
        directory = os.path.join(dest, future_dir_name(current.tp))
        future = PartitionLog(directory, current.tp, current.config)
        start = copy_start(current)
        if start != future.log_start_offset:
            # (Only then: the new empty segment must not share its files' names with the
            # ones this drops, which are deleted in the background.)
            future.truncate_fully_and_start_at(start)
        metadata = checkpoint.read_bytes_if_exists(os.path.join(current.directory, checkpoint.PARTITION_METADATA))
        if metadata is not None:  # the topic id, as the current log has it
            checkpoint.write_bytes_atomically(os.path.join(directory, checkpoint.PARTITION_METADATA), metadata)
        files.fsync_dir(dest)
        return cls(dest, future)

    def lag(self, current: PartitionLog) -> int:
        """Kafka's offset lag of a future log: how far its end is behind the current log's."""
        return current.log_end_offset - self.log.log_end_offset

    def catch_up(self, current: PartitionLog, budget: int) -> bool:
        """Copy up to ``budget`` bytes (whole batches) from ``current``; True once it holds
        everything ``current`` does."""
        future = self.log
        if future.log_end_offset > current.log_end_offset:
            future.truncate_to(current.log_end_offset)  # the current log was truncated (a follower's)
        start = copy_start(current)
        if future.log_end_offset < start:
            future.truncate_fully_and_start_at(start)  # retention passed what was copied
        copied = 0
        while future.log_end_offset < current.log_end_offset and copied < budget:
            # Reads start at the log start at the earliest; the batch holding it comes whole.
            at = max(future.log_end_offset, current.log_start_offset)
            data = current.read_bytes(at, min(CHUNK_BYTES, budget - copied))
            if not data:
                break
            future.append_as_follower(data)
            copied += len(data)
        return future.log_end_offset == current.log_end_offset

