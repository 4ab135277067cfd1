"""Storage exceptions. Each carries the Kafka error code the broker answers with.

The codes are Kafka's (clients/.../common/protocol/Errors.java); the broker's error table
maps exceptions to responses through ``kafka_error_code`` so storage need not import the
broker (import direction: broker -> coordination -> storage).
"""

from __future__ import annotations


class StorageError(Exception):
    """Base class: something went wrong in the log layer."""

    kafka_error_code = 56  # KAFKA_STORAGE_ERROR


class LogDirOfflineError(StorageError):
    """The disk refused a write (ENOSPC, EIO): the producer gets KAFKA_STORAGE_ERROR."""

    kafka_error_code = 56


class LogDirLockedError(StorageError):
    """Another process holds the .lock file of a log dir."""


class CorruptRecordError(StorageError):
    """A batch failed validation (CRC, magic, sizes) at a known file position."""

    kafka_error_code = 2  # CORRUPT_MESSAGE

    def __init__(self, message: str, path: str | None = None, position: int | None = None) -> None:
        super().__init__(message)
        self.path = path
        self.position = position


class InvalidRecordError(StorageError):
    """A batch is well formed but breaks a topic rule (e.g. no key on a compacted topic)."""

    kafka_error_code = 87  # INVALID_RECORD


class RecordTooLargeError(StorageError):
    """A batch is larger than max.message.bytes."""

    kafka_error_code = 10  # MESSAGE_TOO_LARGE


class RecordBatchTooLargeError(StorageError):
    """A batch does not fit in an empty segment (log.segment.bytes)."""

    kafka_error_code = 18  # RECORD_LIST_TOO_LARGE


class InvalidTimestampError(StorageError):
    kafka_error_code = 32  # INVALID_TIMESTAMP


class CorruptIndexError(StorageError):
    """An index file failed its sanity check; the caller rebuilds it from the log."""


class OffsetOutOfRangeError(StorageError):
    """A read below the log start offset or above the log end offset."""

    kafka_error_code = 1  # OFFSET_OUT_OF_RANGE


class UnsupportedCompressionError(StorageError):
    kafka_error_code = 76  # UNSUPPORTED_COMPRESSION_TYPE


class InvalidProducerEpochError(StorageError):
    """A transaction marker carries an older producer epoch than the log has seen."""

    kafka_error_code = 47  # INVALID_PRODUCER_EPOCH


class TransactionCoordinatorFencedError(StorageError):
    """A transaction marker comes from an older coordinator than the last one's."""

    kafka_error_code = 52  # TRANSACTION_COORDINATOR_FENCED
