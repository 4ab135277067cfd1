"""Small state files, written atomically, in Apache Kafka's on-disk formats.

Every file here is rewritten whole through ``write_text_atomically``: write
``<path>.tmp``, fsync it, rename it over ``<path>``, fsync the directory. A crash
leaves either the old file or the new one, never a torn mix (at worst a stray
``.tmp`` that the next write truncates). The formats are Kafka's so operators'
tools and habits (``cat``, kafka-log-dirs, hand edits) carry over.

Offset checkpoints (``recovery-point-offset-checkpoint``,
``log-start-offset-checkpoint``, ``cleaner-offset-checkpoint``; one per log dir)::

    0                       <- format version; only 0 exists and only 0 is accepted
    2                       <- number of entry lines that follow
    orders 0 1234           <- topic partition offset, separated by whitespace
    orders 1 987

Leader epoch checkpoint (``leader-epoch-checkpoint``; one per partition dir)::

    0                       <- format version; only 0 is accepted
    2                       <- number of entry lines
    0 0                     <- leaderEpoch startOffset
    3 4521

Partition metadata (``partition.metadata``; one per partition dir)::

    version: 0
    topic_id: Yx2Hq8lCRb2NExgV8gQ5Ww      <- the topic UUID, base64url, no padding (22 chars)

Broker metadata (``meta.properties``; one per log dir; Java properties text)::

    #Written by Castle 2024-05-01T12:00:00+00:00
    version=1
    cluster.id=MkU3OEVBNTcwNTJENDM2Qk
    node.id=1
    directory.id=J8aAPcfLQt2bqs1JT_rMgQ      <- optional

Reading rules shared by the two numbered formats: a missing file reads as empty;
an *empty* file also reads as empty, because Kafka creates its checkpoint files
empty before the first write. Anything else that is not exactly the layout above
(unknown version, wrong count, a line that does not parse) raises StorageError
naming the file and the 1-based line number: silently dropping a recovery point
would make the broker trust unflushed data, so we refuse instead of guessing.
Lines end in ``\\n``; a trailing ``\\r`` is tolerated (hand edits on Windows).

I/O failures other than "file not found" are raised as LogDirOfflineError: like
Kafka, a log dir whose state files cannot be written or read is taken offline.
"""

from __future__ import annotations

import base64
import binascii
import datetime
import os
import re
import uuid
from typing import Callable, TypeVar, Union

from storage import files
from storage.errors import LogDirOfflineError, StorageError
from storage.types import TopicPartition

StrPath = Union[str, "os.PathLike[str]"]
T = TypeVar("T")

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"  # high watermarks
PARTITION_METADATA = "partition.metadata"
META_PROPERTIES = "meta.properties"

TMP_SUFFIX = ".tmp"

CHECKPOINT_VERSION = 0
PARTITION_METADATA_VERSION = 0
META_PROPERTIES_VERSION = 1

INT32_MAX = (1 << 31) - 1
INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1

# Kafka's legal topic characters. Writing anything else (a space, a newline) would
# produce a checkpoint line that no longer splits into three fields.
_TOPIC_RE = re.compile(r"[a-zA-Z0-9._-]+")
# Strict decimal: Python's int() would also accept " 1", "1_000" and non-ASCII digits.
_INT_RE = re.compile(r"-?[0-9]+")
# Values we write into meta.properties unescaped: base64url ids never need escaping.
_PROPERTY_VALUE_RE = re.compile(r"[A-Za-z0-9_-]+")
_BASE64URL_UUID_RE = re.compile(r"[A-Za-z0-9_-]{22}")


# --------------------------------------------------------------------------- atomic writes




def write_bytes_atomically(path: StrPath, data: bytes) -> None:
    """Replace ``path`` with ``data`` so that readers and crashes see old or new, never half.

    Raises LogDirOfflineError if the disk refuses (ENOSPC, EIO, EROFS...).
    """
    target = os.fspath(path)
    tmp = target + TMP_SUFFIX
    try:
        _write_and_fsync(tmp, data)
        os.replace(tmp, target)
        # The rename lives in the directory's metadata: without this fsync a crash can
        # bring back the old file even though we already reported success.
        files.fsync_dir(os.path.dirname(os.path.abspath(target)))
    except OSError as exc:
        _remove_quietly(tmp)
        raise LogDirOfflineError(f"cannot write {target}: {exc}") from exc


def write_text_atomically(path: StrPath, text: str) -> None:
    """UTF-8 text flavour of write_bytes_atomically; used by every small state file."""
    write_bytes_atomically(path, text.encode("utf-8"))


def _write_and_fsync(path: str, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:  # os.write may write less than asked
            written = os.write(fd, view)
            view = view[written:]
        os.fsync(fd)
    finally:
        os.close(fd)


def _remove_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def read_bytes_if_exists(path: StrPath) -> bytes | None:
    """The file's bytes, or None if it does not exist; other failures take the dir offline."""
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise LogDirOfflineError(f"cannot read {os.fspath(path)}: {exc}") from exc


def _read_text(path: StrPath) -> str | None:
    """The file's text, or None if it does not exist."""
    raw = read_bytes_if_exists(path)
    if raw is None:
        return None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise StorageError(f"{os.fspath(path)} is not valid UTF-8: {exc}") from exc


def _split_lines(text: str) -> list[str]:
    """Split on \\n only (str.splitlines also splits on \\x0c, \\u2028...), drop CRs."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the newline that ends the last line
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def _malformed(path: StrPath, line_no: int, line: str | None, why: str) -> StorageError:
    shown = "<end of file>" if line is None else repr(line)
    return StorageError(f"malformed {os.fspath(path)} line {line_no}: {why} (got {shown})")


def _parse_int(text: str, lo: int, hi: int) -> int | None:
    if not _INT_RE.fullmatch(text):
        return None
    value = int(text)
    return value if lo <= value <= hi else None


# --------------------------------------------------------------------------- versioned line files


def _format_checkpoint(entry_lines: list[str]) -> str:
    header = [str(CHECKPOINT_VERSION), str(len(entry_lines))]
    return "".join(line + "\n" for line in header + entry_lines)


def _read_checkpoint(path: StrPath, parse_entry: Callable[[list[str]], T | None], what: str) -> list[T] | None:
    """Parse the ``version / count / entries`` layout; None when the file is missing.

    ``parse_entry`` gets one line split on whitespace and returns None if it is bad;
    ``what`` describes a good entry for the error message.
    """
    text = _read_text(path)
    if text is None:
        return None
    lines = _split_lines(text)
    if not lines:
        return []  # Kafka creates these files empty before the first write
    version = _parse_int(lines[0], 0, INT32_MAX)
    if version != CHECKPOINT_VERSION:
        raise _malformed(path, 1, lines[0], f"expected format version {CHECKPOINT_VERSION}")
    if len(lines) < 2:
        raise _malformed(path, 2, None, "expected the entry count")
    count = _parse_int(lines[1], 0, INT32_MAX)
    if count is None:
        raise _malformed(path, 2, lines[1], "expected the entry count")
    entries: list[T] = []
    for line_no, line in enumerate(lines[2:], start=3):
        entry = parse_entry(line.split())
        if entry is None:
            raise _malformed(path, line_no, line, f"expected '{what}'")
        entries.append(entry)
    if len(entries) != count:
        raise StorageError(f"malformed {os.fspath(path)}: header announces {count} entries, found {len(entries)}")
    return entries


# --------------------------------------------------------------------------- offset checkpoints


def write_offset_checkpoint(path: StrPath, offsets: dict[TopicPartition, int]) -> None:
    """Write a topic/partition -> offset checkpoint (recovery points, log start offsets...)."""
    lines = []
    for tp in sorted(offsets):  # sorted: identical maps give identical files
        _check_topic(tp.topic)
        _check_int(tp.partition, 0, INT32_MAX, "partition")
        _check_int(offsets[tp], INT64_MIN, INT64_MAX, "offset")
        lines.append(f"{tp.topic} {tp.partition} {offsets[tp]}")
    write_text_atomically(path, _format_checkpoint(lines))


def read_offset_checkpoint(path: StrPath) -> dict[TopicPartition, int]:
    """Read an offset checkpoint; a missing or empty file is {}. Only version 0 is accepted."""
    entries = _read_checkpoint(path, _parse_offset_entry, "topic partition offset")
    return dict(entries or [])


def _parse_offset_entry(fields: list[str]) -> tuple[TopicPartition, int] | None:
    if len(fields) != 3:
        return None
    topic, partition_text, offset_text = fields
    partition = _parse_int(partition_text, 0, INT32_MAX)
    offset = _parse_int(offset_text, INT64_MIN, INT64_MAX)
    if partition is None or offset is None:
        return None
    return TopicPartition(topic, partition), offset


def _check_int(value: int, lo: int, hi: int, what: str) -> None:
    """Refuse to write what the reader would reject: a checkpoint we cannot read back
    would stop the next startup."""
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise ValueError(f"{what} {value!r} is not an integer in [{lo}, {hi}]")


def _check_topic(topic: str) -> None:
    if not _TOPIC_RE.fullmatch(topic):
        raise ValueError(f"illegal topic name {topic!r}: Kafka topics use only [a-zA-Z0-9._-]")


# --------------------------------------------------------------------------- leader epochs


def write_leader_epoch_checkpoint(path: StrPath, entries: list[tuple[int, int]]) -> None:
    """Write (leaderEpoch, startOffset) pairs in the order given (ascending by epoch)."""
    for epoch, start in entries:
        _check_int(epoch, 0, INT32_MAX, "leader epoch")
        _check_int(start, INT64_MIN, INT64_MAX, "start offset")
    write_text_atomically(path, _format_checkpoint([f"{epoch} {start}" for epoch, start in entries]))


def read_leader_epoch_checkpoint(path: StrPath) -> list[tuple[int, int]]:
    """Read (leaderEpoch, startOffset) pairs in file order; missing or empty file -> [].

    Only the syntax is checked here; the leader epoch cache decides whether the
    sequence makes sense (monotonic epochs and offsets).
    """
    return _read_checkpoint(path, _parse_epoch_entry, "epoch startOffset") or []


def _parse_epoch_entry(fields: list[str]) -> tuple[int, int] | None:
    if len(fields) != 2:
        return None
    epoch = _parse_int(fields[0], 0, INT32_MAX)
    start = _parse_int(fields[1], INT64_MIN, INT64_MAX)
    if epoch is None or start is None:
        return None
    return epoch, start


# --------------------------------------------------------------------------- partition.metadata


def uuid_to_base64url(value: uuid.UUID) -> str:
    """Kafka's textual UUID: the 16 bytes in base64url without '=' padding (22 chars)."""
    return base64.urlsafe_b64encode(value.bytes).rstrip(b"=").decode("ascii")


def base64url_to_uuid(text: str) -> uuid.UUID:
    """Inverse of uuid_to_base64url; ValueError unless ``text`` is 22 base64url chars."""
    if not _BASE64URL_UUID_RE.fullmatch(text):
        raise ValueError(f"not a 22-character base64url UUID: {text!r}")
    try:
        raw = base64.urlsafe_b64decode(text + "==")
    except binascii.Error as exc:  # pragma: no cover - the regex already rules this out
        raise ValueError(f"not a base64url UUID: {text!r}") from exc
    # 22 chars carry 132 bits; the last 4 must be zero or the text is not canonical.
    if uuid_to_base64url(uuid.UUID(bytes=raw)) != text:
        raise ValueError(f"not a canonical base64url UUID: {text!r}")
    return uuid.UUID(bytes=raw)


def write_partition_metadata(partition_dir: StrPath, topic_id: uuid.UUID) -> None:
    """Write ``<partition_dir>/partition.metadata`` recording the partition's topic id."""
    if topic_id.int == 0:
        raise ValueError("the zero UUID is not a topic id")
    text = f"version: {PARTITION_METADATA_VERSION}\ntopic_id: {uuid_to_base64url(topic_id)}\n"
    write_text_atomically(os.path.join(partition_dir, PARTITION_METADATA), text)


def read_partition_metadata(partition_dir: StrPath) -> uuid.UUID | None:
    """The topic id stored in ``partition.metadata``, or None if the file is missing.

    Like Kafka, any version >= 0 is accepted (a newer broker may add lines after
    topic_id; we read only the two we know, which keeps downgrades possible).
    """
    path = os.path.join(partition_dir, PARTITION_METADATA)
    text = _read_text(path)
    if text is None:
        return None
    lines = _split_lines(text)
    version_text = _metadata_value(path, lines, 0, "version")
    if _parse_int(version_text, 0, INT32_MAX) is None:
        raise _malformed(path, 1, lines[0], "expected 'version: <n>' with n >= 0")
    id_text = _metadata_value(path, lines, 1, "topic_id")
    try:
        topic_id = base64url_to_uuid(id_text)
    except ValueError:
        raise _malformed(path, 2, lines[1], "expected a 22-character base64url topic id") from None
    if topic_id.int == 0:
        raise _malformed(path, 2, lines[1], "the zero UUID is not a topic id")
    return topic_id


def _metadata_value(path: str, lines: list[str], index: int, key: str) -> str:
    """The value of the ``key: value`` line at ``index`` (Kafka splits on ':' + whitespace)."""
    line = lines[index] if index < len(lines) else None
    parts = re.split(r":\s+", line, maxsplit=1) if line is not None else []
    if len(parts) != 2 or parts[0] != key:
        raise _malformed(path, index + 1, line, f"expected '{key}: <value>'")
    return parts[1].strip()


# --------------------------------------------------------------------------- meta.properties


def write_meta_properties(
    log_dir: StrPath, cluster_id: str, node_id: int, directory_id: str | None = None
) -> None:
    """Write ``<log_dir>/meta.properties`` (version 1, the KRaft-era layout).

    ``directory_id`` is optional; Kafka uses a base64url UUID per log dir there.
    """
    if node_id < 0:
        raise ValueError(f"node.id must be >= 0, got {node_id}")
    props = {"version": str(META_PROPERTIES_VERSION), "cluster.id": cluster_id, "node.id": str(node_id)}
    if directory_id is not None:
        props["directory.id"] = directory_id
    for key, value in props.items():
        # Restricting values to base64url characters means we never need Java's
        # backslash escaping, so any properties reader gets back what we wrote.
        if not _PROPERTY_VALUE_RE.fullmatch(value):
            raise ValueError(f"{key} {value!r} must use only [A-Za-z0-9_-]")
    stamp = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    lines = [f"#Written by Castle {stamp}"] + [f"{key}={value}" for key, value in props.items()]
    write_text_atomically(os.path.join(log_dir, META_PROPERTIES), "\n".join(lines) + "\n")


def read_meta_properties(log_dir: StrPath) -> dict[str, str] | None:
    """All key/value pairs of ``<log_dir>/meta.properties``, or None if it does not exist.

    Accepts what Java's Properties.load accepts for the simple files Kafka writes:
    ``#``/``!`` comments, blank lines, ``key=value``, ``key: value`` or ``key value``,
    backslash escapes. Multi-line (backslash-continued) values are not supported.
    Interpreting the keys (version 0 has broker.id, version 1 node.id) is the caller's job.
    """
    path = os.path.join(log_dir, META_PROPERTIES)
    text = _read_text(path)
    if text is None:
        return None
    props: dict[str, str] = {}
    for line_no, raw_line in enumerate(_split_lines(text), start=1):
        line = raw_line.lstrip()
        if not line or line[0] in "#!":
            continue
        match = _PROPERTY_LINE_RE.fullmatch(line)
        if match is None:
            raise _malformed(path, line_no, raw_line, "expected 'key=value'")
        props[_unescape(match.group(1))] = _unescape(match.group(2))  # later lines win, as in Java
    return props


# key: one or more characters that are not separators (backslash-escaped ones allowed);
# separator: '=' or ':' with optional whitespace around, or whitespace alone.
_PROPERTY_LINE_RE = re.compile(r"((?:\\.|[^\\=:\s])+)(?:\s*[=:]\s*|\s+)(.*)")
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(text: str) -> str:
    def replace(match: re.Match[str]) -> str:
        escaped = match.group(1)
        if escaped.startswith("u"):
            return chr(int(escaped[1:], 16))
        return _ESCAPES.get(escaped, escaped)

    return re.sub(r"\\(u[0-9a-fA-F]{4}|.)", replace, text)
