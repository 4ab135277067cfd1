"""The topic registry of the local backend: one JSON file in the first log dir.

    <log.dirs[0]>/cluster-metadata.json
    {"version": 1,
     "topics": {"<name>": {"id": "<uuid>", "partitions": N, "configs": {"retention.ms": "…"}}},
     "next_producer_id": <first producer id not yet handed out>}

Any broker process may change it: a change is read-modify-write under an exclusive
flock on ``cluster-metadata.lock`` and lands with tmp -> fsync -> rename, so readers see
the old file or the new one. Readers reload when the file's (inode, mtime) changed.
The ZooKeeper backend (groups issue) keeps the same facts under /brokers/topics and
/config/topics. What a topic is (``TopicInfo``) and the errors are coordination/topics.py's.
"""

from __future__ import annotations

import fcntl
import os
import threading
import uuid
from dataclasses import dataclass
from typing import Callable, Mapping, TypeVar

import orjson
from kio.schema.errors import ErrorCode

from coordination.topics import TopicInfo, TopicRegistryError, validate_topic_name
from storage.checkpoint import write_bytes_atomically

T = TypeVar("T")

FILE_NAME = "cluster-metadata.json"
LOCK_NAME = "cluster-metadata.lock"
FORMAT_VERSION = 1


@dataclass
class _Snapshot:
    topics: dict[str, TopicInfo]
    next_producer_id: int

    def by_id(self) -> dict[uuid.UUID, TopicInfo]:
        return {t.topic_id: t for t in self.topics.values()}


class LocalTopicRegistry:
    """Read view plus locked changes. Reads see an immutable snapshot, replaced whole by
    refresh(), which one thread at a time runs (a reader thread and an admin thread may
    both refresh)."""

    def __init__(self, log_dir: str) -> None:
        self.path = os.path.join(log_dir, FILE_NAME)
        self._lock_path = os.path.join(log_dir, LOCK_NAME)
        self._stamp: tuple[int, int] | None = None
        # (snapshot, by id): one attribute, so a reader never sees one half new.
        self._view: tuple[_Snapshot, dict[uuid.UUID, TopicInfo]] = (_Snapshot({}, 0), {})
        self._refresh_lock = threading.Lock()
        # Bumped whenever the snapshot is replaced (see ZooKeeperTopicRegistry).
        self.snapshot_generation = 0

    # ------------------------------------------------------------------ reading
    def exists(self) -> bool:
        return os.path.exists(self.path)

    def refresh(self) -> bool:
        """Reload if the file changed; True when it did."""
        with self._refresh_lock:
            try:
                st = os.stat(self.path)
            except FileNotFoundError:
                changed = self._stamp is not None
                self._stamp = None
                if changed:
                    self._set(_Snapshot({}, 0))
                return changed
            stamp = (st.st_ino, st.st_mtime_ns)
            if stamp == self._stamp:
                return False
            self._set(self._read_file())
            self._stamp = stamp
            return True

    def _set(self, snapshot: _Snapshot) -> None:
        self._view = (snapshot, snapshot.by_id())
        self.snapshot_generation += 1

    def _read_file(self) -> _Snapshot:
        with open(self.path, "rb") as handle:
            doc = orjson.loads(handle.read())
        if doc.get("version") != FORMAT_VERSION:
            raise ValueError(f"{self.path}: unknown format version {doc.get('version')!r}")
        topics = {
            name: TopicInfo(name, uuid.UUID(t["id"]), int(t["partitions"]), dict(t.get("configs", {})))
            for name, t in doc.get("topics", {}).items()
        }
        return _Snapshot(topics, int(doc.get("next_producer_id", 0)))

    def get(self, name: str) -> TopicInfo | None:
        return self._view[0].topics.get(name)

    def by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        return self._view[1].get(topic_id)

    def all(self) -> list[TopicInfo]:
        return sorted(self._view[0].topics.values(), key=lambda t: t.name)

    # ------------------------------------------------------------------ changing
    def _change(self, mutate: Callable[[_Snapshot], T], dry_run: bool = False) -> T:
        """Run ``mutate`` on the current file's contents under the lock and write the
        result; with ``dry_run`` (validate_only), check and answer without writing."""
        fd = os.open(self._lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            current = self._read_file() if os.path.exists(self.path) else _Snapshot({}, 0)
            result = mutate(current)
            if dry_run:
                return result
            doc = {
                "version": FORMAT_VERSION,
                "topics": {t.name: {"id": str(t.topic_id), "partitions": t.partitions, "configs": dict(t.configs)}
                           for t in current.topics.values()},
                "next_producer_id": current.next_producer_id,
            }
            write_bytes_atomically(self.path, orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS))
        finally:
            os.close(fd)
        self.refresh()
        return result

    def create(self, name: str, partitions: int, configs: Mapping[str, str], topic_id: uuid.UUID | None = None,
               validate_only: bool = False) -> TopicInfo:
        why = validate_topic_name(name)
        if why:
            raise TopicRegistryError(ErrorCode.invalid_topic_exception, why)
        if partitions <= 0:
            raise TopicRegistryError(ErrorCode.invalid_partitions, f"number of partitions must be positive, not {partitions}")
        info = TopicInfo(name, topic_id or uuid.uuid4(), partitions, dict(configs))

        def mutate(snapshot: _Snapshot) -> TopicInfo:
            if name in snapshot.topics:
                raise TopicRegistryError(ErrorCode.topic_already_exists, f"topic '{name}' already exists")
            snapshot.topics[name] = info
            return info

        return self._change(mutate, dry_run=validate_only)

    def delete(self, name: str) -> TopicInfo:
        def mutate(snapshot: _Snapshot) -> TopicInfo:
            return snapshot.topics.pop(_existing(snapshot, name).name)

        return self._change(mutate)

    def set_partitions(self, name: str, count: int, validate_only: bool = False,
                       assignment: Mapping[int, list[int]] | None = None) -> TopicInfo:
        def mutate(snapshot: _Snapshot) -> TopicInfo:
            info = _existing(snapshot, name)
            if count <= info.partitions:
                raise TopicRegistryError(ErrorCode.invalid_partitions,
                                         f"topic '{name}' has {info.partitions} partitions; the new count {count} must be larger")
            grown = TopicInfo(name, info.topic_id, count, info.configs)
            snapshot.topics[name] = grown
            return grown

        return self._change(mutate, dry_run=validate_only)

    def set_configs(self, name: str, update: Callable[[dict[str, str]], dict[str, str]]) -> TopicInfo:
        """Replace a topic's overrides with ``update(current)`` (which validates)."""

        def mutate(snapshot: _Snapshot) -> TopicInfo:
            info = _existing(snapshot, name)
            changed = TopicInfo(name, info.topic_id, info.partitions, update(dict(info.configs)))
            snapshot.topics[name] = changed
            return changed

        return self._change(mutate)

    def allocate_producer_ids(self, count: int) -> int:
        """Reserve ``count`` producer ids on disk; returns the first. Ids are never reused."""

        def mutate(snapshot: _Snapshot) -> int:
            first = snapshot.next_producer_id
            snapshot.next_producer_id = first + count
            return first

        return self._change(mutate)


def _existing(snapshot: _Snapshot, name: str) -> TopicInfo:
    info = snapshot.topics.get(name)
    if info is None:
        raise TopicRegistryError(ErrorCode.unknown_topic_or_partition, f"topic '{name}' does not exist")
    return info
