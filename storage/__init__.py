"""Castle's storage layer: partition logs of Kafka record batches on local disk.

A library with no sockets and no asyncio; the broker drives it. Import direction:
broker -> coordination -> storage, and storage imports nothing from the others.
"""

from storage.config import LogConfig
from storage.errors import (
    CorruptRecordError,
    InvalidRecordError,
    LogDirLockedError,
    LogDirOfflineError,
    OffsetOutOfRangeError,
    RecordBatchTooLargeError,
    RecordTooLargeError,
    StorageError,
)
from storage.log import AppendInfo, PartitionLog, ReadInfo
from storage.manager import LogManager, ManagerConfig
from storage.types import (
    FileRange,
    LeaderEpoch,
    Offset,
    Position,
    RelativeOffset,
    TopicPartition,
)

__all__ = [
    "AppendInfo", "CorruptRecordError", "FileRange", "InvalidRecordError", "LeaderEpoch", "LogConfig",
    "LogDirLockedError", "LogDirOfflineError", "LogManager", "ManagerConfig", "Offset", "OffsetOutOfRangeError",
    "PartitionLog", "Position", "ReadInfo", "RecordBatchTooLargeError", "RecordTooLargeError", "RelativeOffset",
    "StorageError", "TopicPartition",
]
