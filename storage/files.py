"""File and directory names, exactly as Apache Kafka names them (LogFileUtils.java).

A segment is named by its base offset, zero-padded to 20 digits::

    00000000000000368769.log         record batches
    00000000000000368769.index       sparse offset index
    00000000000000368769.timeindex   sparse time index
    00000000000000368769.txnindex    aborted transactions whose markers the segment holds
    00000000000000368769.snapshot    producer-state snapshot taken at that offset

Suffixes added to a name mark a file in transit: ``.deleted`` (waiting for
file.delete.delay.ms before unlink), ``.cleaned`` (a cleaner output being written),
``.swap`` (a complete cleaner output about to replace its source). ``.corrupt-<pos>``
holds bytes that recovery cut from a segment, kept for a post-mortem.
"""

from __future__ import annotations

import os

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"
SNAPSHOT_SUFFIX = ".snapshot"
DELETED_SUFFIX = ".deleted"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
CORRUPT_SUFFIX = ".corrupt"

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
META_PROPERTIES = "meta.properties"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
PARTITION_METADATA = "partition.metadata"

# A partition directory renamed for asynchronous deletion: <topic>-<p>.<uuid>-delete
DELETE_DIR_SUFFIX = "-delete"


def filename_prefix(offset: int) -> str:
    """The 20-digit zero-padded base offset used for every per-segment file."""
    return f"{offset:020d}"


def log_path(directory: str, base_offset: int) -> str:
    return os.path.join(directory, filename_prefix(base_offset) + LOG_SUFFIX)


def index_path(directory: str, base_offset: int) -> str:
    return os.path.join(directory, filename_prefix(base_offset) + INDEX_SUFFIX)


def time_index_path(directory: str, base_offset: int) -> str:
    return os.path.join(directory, filename_prefix(base_offset) + TIME_INDEX_SUFFIX)


def txn_index_path(directory: str, base_offset: int) -> str:
    return os.path.join(directory, filename_prefix(base_offset) + TXN_INDEX_SUFFIX)


def snapshot_path(directory: str, offset: int) -> str:
    return os.path.join(directory, filename_prefix(offset) + SNAPSHOT_SUFFIX)


def offset_from_filename(name: str) -> int:
    """Base offset from a name such as 00000000000000000042.log (or .log.swap)."""
    return int(os.path.basename(name).split(".", 1)[0])


def is_segment_log(name: str) -> bool:
    """True for exactly ``<20 digits>.log`` (not .log.deleted, .log.swap, …)."""
    prefix, _, suffix = name.partition(".")
    return suffix == "log" and len(prefix) == 20 and prefix.isdigit()


def unlink_if_exists(path: str) -> None:
    """Remove ``path``; a file that is already gone is not an error."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def replace_file(path: str, data: bytes) -> None:
    """Replace ``path`` with ``data`` through a temporary file, so a reader sees the old
    or the new bytes, never half; not fsynced (run-dir state files, rewritten often)."""
    tmp = f"{path}.tmp"
    with open(tmp, "wb") as handle:
        handle.write(data)
    os.replace(tmp, path)


def fsync_dir(directory: str) -> None:
    """Make renames and new files in ``directory`` durable."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
