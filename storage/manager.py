"""LogManager: every partition log under log.dirs, and the periodic work on them.

Opening, in order (a crash at any step leaves something the next open handles)::

    1. lock each log dir (.lock, flock): two processes never open the same dirs
    2. meta.properties: write it on first use; refuse a dir that belongs to another node
    3. read recovery-point and log-start-offset checkpoints; note whether
       .kafka_cleanshutdown exists (then no recovery is needed) and remove it
    4. open every <topic>-<partition> dir as a PartitionLog (recovering after an unclean
       stop); finish deletions of <topic>-<partition>.<id>-delete dirs

Periodic work is exposed as ``tasks()``. The storage layer stays synchronous: the
broker's worker schedules them on its own loop (single writer); ``flush`` is the only
task that is safe on another thread, and ``start_flusher`` runs it on one.

Closing: flush and close every log (trimming files), write the checkpoints, write
.kafka_cleanshutdown, release the locks.

Shared mode (``owns=`` given): several processes each own a subset of the partitions of
the same log dirs (the broker's workers, one writer per partition). Then the process that
forks them claims the dirs with ``claim_log_dirs`` (steps 1-3) and writes the marker with
``mark_clean_shutdown`` after every owner closed; each owner opens only its partitions and
merges its entries into the shared checkpoint files under a file lock.
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import threading
import uuid
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterable, Mapping

from storage import checkpoint, files
from storage.config import LONG_MAX, LogConfig
from storage.dir_lock import LogDirLock
from storage.errors import LogDirOfflineError, StorageError
from storage.future_log import FutureLog, parse_future_dir_name
from storage.log import PartitionLog, now_ms
from storage.releaser import RELEASER
from storage.types import TopicPartition

log = logging.getLogger(__name__)

# What a checkpoint holds, computed from the logs as they are when it is written.
CheckpointValues = Callable[[list[tuple[TopicPartition, PartitionLog]]], Mapping[TopicPartition, int]]


@dataclass(frozen=True, slots=True)
class ManagerConfig:
    """Broker-level settings of the log manager (Kafka's names in ``from_broker_config``)."""

    log_dirs: tuple[str, ...]
    node_id: int = 0
    cluster_id: str | None = None
    retention_check_interval_ms: int = 300_000
    flush_scheduler_interval_ms: int = LONG_MAX
    flush_offset_checkpoint_interval_ms: int = 60_000
    flush_start_offset_checkpoint_interval_ms: int = 60_000
    high_watermark_checkpoint_interval_ms: int = 5_000
    cleaner_enable: bool = True
    cleaner_backoff_ms: int = 15_000
    # Broker settings, not topic ones: a producer's state expires alike in every partition.
    producer_id_expiration_ms: int = 86_400_000
    producer_id_expiration_check_interval_ms: int = 600_000

    @classmethod
    def from_broker_config(cls, settings: Mapping[str, Any]) -> "ManagerConfig":
        dirs = settings.get("log.dirs", settings.get("log.dir", "./data"))
        if isinstance(dirs, str):
            dirs = [d.strip() for d in dirs.split(",") if d.strip()]
        return cls(
            log_dirs=tuple(dirs),
            node_id=int(settings.get("node.id", 0)),
            cluster_id=settings.get("cluster.id"),
            retention_check_interval_ms=int(settings.get("log.retention.check.interval.ms", 300_000)),
            flush_scheduler_interval_ms=int(settings.get("log.flush.scheduler.interval.ms", LONG_MAX)),
            flush_offset_checkpoint_interval_ms=int(settings.get("log.flush.offset.checkpoint.interval.ms", 60_000)),
            flush_start_offset_checkpoint_interval_ms=int(settings.get("log.flush.start.offset.checkpoint.interval.ms", 60_000)),
            high_watermark_checkpoint_interval_ms=int(settings.get("replica.high.watermark.checkpoint.interval.ms", 5_000)),
            cleaner_enable=str(settings.get("log.cleaner.enable", "true")).lower() == "true",
            cleaner_backoff_ms=int(settings.get("log.cleaner.backoff.ms", 15_000)),
            producer_id_expiration_ms=int(settings.get("producer.id.expiration.ms", 86_400_000)),
            producer_id_expiration_check_interval_ms=int(settings.get("producer.id.expiration.check.interval.ms",
                                                                      600_000)),
        )


@dataclass(frozen=True, slots=True)
class Task:
    """A periodic job. ``owner_thread`` jobs change segment lists: run them on the owner."""

    name: str
    interval_ms: int
    run: Callable[[], Any]
    owner_thread: bool = True


@dataclass
class _DirState:
    path: str
    lock: LogDirLock = field(default_factory=LogDirLock)
    clean_shutdown: bool = False
    directory_id: str = ""


class LogManager:
    """Owns the logs of one broker process. Not thread-safe except ``flush_due``."""

    def __init__(self, config: ManagerConfig, default_log_config: LogConfig | None = None,
                 topic_overrides: Mapping[str, Mapping[str, Any]] | None = None, *,
                 owns: Callable[[TopicPartition], bool] | None = None, clean_shutdown: bool = False) -> None:
        self.config = config
        # Shared mode: only partitions for which owns(tp) holds are opened and checkpointed.
        self._owns = owns
        self._shared_clean_shutdown = clean_shutdown
        self.default_log_config = default_log_config or LogConfig()
        self._topic_overrides: dict[str, dict[str, Any]] = {t: dict(o) for t, o in (topic_overrides or {}).items()}
        # topic -> its LogConfig: building one parses every override (~9 µs), and acks=all
        # Produce asks for min.insync.replicas per partition. Cleared when either part changes.
        self._configs: dict[str, LogConfig] = {}
        self._dirs: list[_DirState] = []
        self.logs: dict[TopicPartition, PartitionLog] = {}
        self._log_dir_of: dict[TopicPartition, str] = {}
        # Log dirs that failed (an I/O error): their logs are offline until the next start.
        self.offline_dirs: set[str] = set()
        # Told the path of a dir that this manager failed itself (a flush on the flusher
        # thread, a checkpoint write on the block releaser's): the owner then does what it
        # does for a failure it found (tell the broker's other workers, fence the replicas
        # there). Called on the failing thread.
        self.on_dir_failed: Callable[[str], None] = lambda _path: None
        # AlterReplicaLogDirs: the copies being made of partitions in other dirs, swapped
        # in once caught up (move_future_logs); and those found at open, loaded after the dirs.
        self.futures: dict[TopicPartition, FutureLog] = {}
        self._found_futures: list[tuple[str, str, TopicPartition]] = []
        self.cleaner_checkpoints: dict[TopicPartition, int] = {}
        self._flusher: threading.Thread | None = None
        self._checkpoint_write_lock = threading.Lock()
        self._stop_flusher = threading.Event()
        self.cluster_id = config.cluster_id
        self._last_run: dict[str, int] = {}

    # ----------------------------------------------------------------- open
    def open(self) -> "LogManager":
        if self._owns is not None:
            for path in self.config.log_dirs:
                state = _DirState(os.path.abspath(path), clean_shutdown=self._shared_clean_shutdown)
                self._dirs.append(state)
                meta = checkpoint.read_meta_properties(state.path) or {}
                self.cluster_id = self.cluster_id or meta.get("cluster.id")
            for state in self._dirs:
                self._load_logs(state)
            self._load_futures()
            return self
        try:
            for path in self.config.log_dirs:
                self._dirs.append(self._open_dir(path))
            for state in self._dirs:
                self._load_logs(state)
                # From now on a crash is an unclean shutdown.
                marker = os.path.join(state.path, files.CLEAN_SHUTDOWN_FILE)
                if os.path.exists(marker):
                    os.unlink(marker)
                    files.fsync_dir(state.path)
            self._load_futures()
        except BaseException:
            for state in self._dirs:
                state.lock.release()
            raise
        return self

    def _open_dir(self, path: str) -> _DirState:
        os.makedirs(path, exist_ok=True)
        state = _DirState(os.path.abspath(path))
        state.lock.acquire(state.path)
        meta = checkpoint.read_meta_properties(state.path)
        if meta is None:
            # A new (or emptied) dir gets a new directory.id: a broker whose id no longer
            # matches what the cluster recorded has lost its data (coordination/controller.py).
            self.cluster_id = self.cluster_id or checkpoint.uuid_to_base64url(uuid.uuid4())
            state.directory_id = checkpoint.uuid_to_base64url(uuid.uuid4())
            checkpoint.write_meta_properties(state.path, self.cluster_id, self.config.node_id, state.directory_id)
        else:
            if int(meta.get("node.id", self.config.node_id)) != self.config.node_id:
                state.lock.release()
                raise StorageError(f"log dir {state.path} belongs to node.id {meta.get('node.id')}, not {self.config.node_id}")
            if self.cluster_id and meta.get("cluster.id") not in (None, self.cluster_id):
                state.lock.release()
                raise StorageError(f"log dir {state.path} belongs to cluster {meta.get('cluster.id')}, not {self.cluster_id}")
            self.cluster_id = self.cluster_id or meta.get("cluster.id")
            state.directory_id = meta.get("directory.id", "")
            if not state.directory_id:  # written before directory ids: give it one
                state.directory_id = checkpoint.uuid_to_base64url(uuid.uuid4())
                checkpoint.write_meta_properties(state.path, str(meta.get("cluster.id") or self.cluster_id),
                                                 self.config.node_id, state.directory_id)
        state.clean_shutdown = os.path.exists(os.path.join(state.path, files.CLEAN_SHUTDOWN_FILE))
        return state

    def _load_logs(self, state: _DirState) -> None:
        recovery_points = checkpoint.read_offset_checkpoint(os.path.join(state.path, checkpoint.RECOVERY_POINT_CHECKPOINT))
        log_starts = checkpoint.read_offset_checkpoint(os.path.join(state.path, checkpoint.LOG_START_OFFSET_CHECKPOINT))
        cleaner = checkpoint.read_offset_checkpoint(os.path.join(state.path, checkpoint.CLEANER_OFFSET_CHECKPOINT))
        high_watermarks = checkpoint.read_offset_checkpoint(os.path.join(state.path, checkpoint.REPLICATION_OFFSET_CHECKPOINT))
        for name in sorted(os.listdir(state.path)):
            full = os.path.join(state.path, name)
            if not os.path.isdir(full):
                continue
            if name.endswith(files.DELETE_DIR_SUFFIX):
                shutil.rmtree(full, ignore_errors=True)  # a deletion interrupted by a crash
                continue
            future_tp = parse_future_dir_name(name)
            if future_tp is not None:
                if self._owns is None or self._owns(future_tp):
                    self._found_futures.append((state.path, full, future_tp))
                continue
            try:
                tp = TopicPartition.from_dir_name(name)
            except ValueError:
                continue
            if self._owns is not None and not self._owns(tp):
                continue
            if tp in self.logs:
                raise StorageError(f"{tp} exists in two log dirs: {self._log_dir_of[tp]} and {state.path}")
            self.logs[tp] = PartitionLog(full, tp, self.log_config_for(tp.topic),
                                         recovery_point=recovery_points.get(tp, 0),
                                         log_start_offset=log_starts.get(tp, 0),
                                         clean_shutdown=state.clean_shutdown,
                                         high_watermark=high_watermarks.get(tp))
            self._log_dir_of[tp] = state.path
            if tp in cleaner:
                self.cleaner_checkpoints[tp] = cleaner[tp]

    def _load_futures(self) -> None:
        """The future logs found at open: a move still under way resumes (its log is
        recovered like any after a crash); one whose current log is gone was being swapped
        in when the process stopped (the current one is renamed away first), so it becomes
        the current log."""
        found, self._found_futures = self._found_futures, []
        for dest, full, tp in found:
            if tp in self.futures:  # two futures of one partition: keep the first
                shutil.rmtree(full, ignore_errors=True)
                continue
            if tp in self.logs:
                self.futures[tp] = FutureLog(dest, PartitionLog(full, tp, self.log_config_for(tp.topic),
                                                                clean_shutdown=False))
                continue
            final = os.path.join(dest, tp.dir_name)
            os.rename(full, final)
            files.fsync_dir(dest)
            self.logs[tp] = PartitionLog(final, tp, self.log_config_for(tp.topic), clean_shutdown=False)
            self._log_dir_of[tp] = dest
            log.warning("%s: the move to %s was being completed when the process stopped: completed", tp, dest)

    # ----------------------------------------------------------------- moves between log dirs
    def start_move(self, tp: TopicPartition, dest: str) -> None:
        """AlterReplicaLogDirs: start copying ``tp``'s log into log dir ``dest`` (a future
        log), replacing a move to another dir; nothing to do if it is there already."""
        current = self.logs[tp]
        existing = self.futures.get(tp)
        if existing is not None and existing.dest == dest:
            return
        if existing is not None:
            self._drop_future(tp)
        if self._log_dir_of.get(tp) == dest:
            return
        self.futures[tp] = FutureLog.create(dest, current)
        log.info("%s: moving from %s to %s", tp, self._log_dir_of.get(tp), dest)

    def _drop_future(self, tp: TopicPartition) -> None:
        future = self.futures.pop(tp, None)
        if future is None:
            return
        future.log.close_for_deletion()
        RELEASER.submit(shutil.rmtree, future.log.directory, True)

    def move_future_logs(self, budget: int) -> list[TopicPartition]:
        """Copy up to ``budget`` bytes into each future log; swap in those caught up. On the
        owner's thread (no append can come between the last copy and the swap). The
        partitions whose log moved."""
        moved = []
        for tp, future in list(self.futures.items()):
            current = self.logs.get(tp)
            if current is None:
                self._drop_future(tp)
                continue
            if current.offline or future.dest in self.offline_dirs:
                continue
            try:
                if future.catch_up(current, budget):
                    self._swap_in(tp, future)
                    moved.append(tp)
            except (LogDirOfflineError, OSError) as exc:
                self._drop_future(tp)
                self.fail_dir(future.dest, f"the move of {tp} failed: {exc}")
            except StorageError as exc:  # not the disk: the move is given up, the dir stays online
                log.error("%s: the move to %s failed: %s", tp, future.dest, exc)
                self._drop_future(tp)
        return moved

    def _swap_in(self, tp: TopicPartition, future: FutureLog) -> None:
        """Make the caught-up future log ``tp``'s log: the current one's dir is renamed away
        first (a stop between the renames leaves only the future, which open completes),
        then the future's takes the partition's name."""
        current = self.logs[tp]
        high_watermark, replicated = current.high_watermark, current.replicated
        future.log.close()
        end, start = future.log.log_end_offset, current.log_start_offset
        current.close_for_deletion()
        parent = self._log_dir_of[tp]
        doomed = os.path.join(parent, f"{tp.dir_name}.{uuid.uuid4().hex}{files.DELETE_DIR_SUFFIX}")
        os.rename(current.directory, doomed)
        files.fsync_dir(parent)
        final = os.path.join(future.dest, tp.dir_name)
        os.rename(future.log.directory, final)
        files.fsync_dir(future.dest)
        moved = PartitionLog(final, tp, self.log_config_for(tp.topic), recovery_point=end, log_start_offset=start,
                             clean_shutdown=True, high_watermark=high_watermark)
        moved.set_replicated(replicated)
        self.futures.pop(tp, None)
        self.logs[tp] = moved
        self._log_dir_of[tp] = future.dest
        # The checkpoints' entries move with it (the old dir's are dropped).
        self.checkpoint_recovery_points()
        self.checkpoint_log_start_offsets()
        self.checkpoint_high_watermarks()
        self._checkpoint_cleaner_offsets()
        RELEASER.submit(shutil.rmtree, doomed, True)
        log.info("%s: moved from %s to %s", tp, parent, future.dest)

    # ----------------------------------------------------------------- topics & partitions
    def log_config_for(self, topic: str) -> LogConfig:
        config = self._configs.get(topic)
        if config is None:
            config = self._configs[topic] = self.default_log_config.with_overrides(self._topic_overrides.get(topic, {}))
        return config

    def get_log(self, tp: TopicPartition) -> PartitionLog | None:
        return self.logs.get(tp)

    @property
    def log_dir_paths(self) -> list[str]:
        """The absolute paths of the open log dirs, in log.dirs order."""
        return [state.path for state in self._dirs]

    def log_dir_of(self, tp: TopicPartition) -> str | None:
        """The log dir (absolute path) holding ``tp``'s log, or None if it has none here."""
        return self._log_dir_of.get(tp)

    def fail_dir(self, path: str, why: str) -> bool:
        """Take log dir ``path`` offline (Kafka's LogDirFailureChannel): every log in it
        refuses reads and writes from now on; the other dirs keep serving. True if it
        was online until now."""
        if path in self.offline_dirs or path not in self.log_dir_paths:
            return False
        self.offline_dirs.add(path)
        failed = [tp for tp, parent in self._log_dir_of.items() if parent == path]
        for tp in failed:
            self.logs[tp].offline = True
        for tp, future in list(self.futures.items()):
            if future.dest == path:
                self._drop_future(tp)
        log.error("log dir %s is offline (%s): %d partition logs here are offline", path, why, len(failed))
        return True

    def logs_in(self, path: str) -> list[TopicPartition]:
        """The partitions whose log is in log dir ``path``."""
        return [tp for tp, parent in self._log_dir_of.items() if parent == path]

    def _online(self) -> list[tuple[TopicPartition, PartitionLog]]:
        return [(tp, lg) for tp, lg in list(self.logs.items()) if not lg.offline]

    def create_log(self, tp: TopicPartition, overrides: Mapping[str, Any] | None = None,
                   topic_id: uuid.UUID | None = None) -> PartitionLog:
        """Create (or return the existing) log of ``tp`` in the least loaded log dir."""
        if overrides:
            self._topic_overrides.setdefault(tp.topic, {}).update(overrides)
            self._configs.pop(tp.topic, None)
        existing = self.logs.get(tp)
        if existing is not None:
            if overrides:
                existing.update_config(self.log_config_for(tp.topic))
            return existing
        if not self._dirs:
            raise StorageError("the log manager is not open")
        online = [state for state in self._dirs if state.path not in self.offline_dirs]
        if not online:
            raise LogDirOfflineError(f"cannot create {tp}: every log dir is offline")
        counts = {state.path: 0 for state in self._dirs}
        for path in self._log_dir_of.values():
            counts[path] += 1
        target = min(online, key=lambda s: counts[s.path]).path
        directory = os.path.join(target, tp.dir_name)
        new_log = PartitionLog(directory, tp, self.log_config_for(tp.topic))
        if topic_id is not None:
            checkpoint.write_partition_metadata(directory, topic_id)
        files.fsync_dir(target)
        self.logs[tp] = new_log
        self._log_dir_of[tp] = target
        return new_log

    def delete_log(self, tp: TopicPartition) -> None:
        """Remove a partition: rename its dir to ``<tp>.<id>-delete``, then remove it."""
        self.delete_logs([tp])

    def delete_logs(self, tps: Iterable[TopicPartition]) -> None:
        """Remove partitions (``delete_log``), writing the checkpoints once for all of them.

        Once per partition, deleting a 1,000-partition topic rewrote three checkpoints
        (each read, merged, written and fsynced under the directory lock) 1,000 times:
        5.2 s during which the worker answered nothing."""
        doomed: list[str] = []
        parents: set[str] = set()
        for tp in tps:
            self._drop_future(tp)
            removed = self.logs.pop(tp, None)
            parent = self._log_dir_of.pop(tp, None)
            self.cleaner_checkpoints.pop(tp, None)
            if removed is None or parent is None:
                continue
            removed.close_for_deletion()
            target = os.path.join(parent, f"{tp.dir_name}.{uuid.uuid4().hex}{files.DELETE_DIR_SUFFIX}")
            os.rename(removed.directory, target)
            doomed.append(target)
            parents.add(parent)
        if not doomed:
            return
        for parent in parents:
            files.fsync_dir(parent)
        # Forget their checkpoints now: a partition re-created under the same name must
        # not inherit them after a crash (Kafka rewrites them on delete too).
        self.checkpoint_recovery_points()
        self.checkpoint_log_start_offsets()
        self.checkpoint_high_watermarks()
        self._checkpoint_cleaner_offsets()
        for target in doomed:
            # Freeing a deleted topic's blocks can take seconds (storage/releaser.py).
            RELEASER.submit(shutil.rmtree, target, True)

    def set_topic_config(self, topic: str, overrides: Mapping[str, Any]) -> LogConfig:
        """Replace a topic's overrides (validated first) and apply them to its logs."""
        new_config = self.default_log_config.with_overrides(overrides)
        self._topic_overrides[topic] = dict(overrides)
        self._configs[topic] = new_config
        for tp, partition_log in self.logs.items():
            if tp.topic == topic:
                partition_log.update_config(new_config)
        return new_config

    def set_default_log_config(self, config: LogConfig) -> None:
        """New broker-level defaults (a SIGHUP reload): every log takes its topic's
        overrides on top of them at once."""
        self.default_log_config = config
        self._configs.clear()
        for tp, partition_log in list(self.logs.items()):
            partition_log.update_config(self.log_config_for(tp.topic))

    def set_cleaner_backoff_ms(self, backoff_ms: int) -> None:
        """A new log.cleaner.backoff.ms (dynamic): the cleaner's next due time uses it."""
        self.config = replace(self.config, cleaner_backoff_ms=backoff_ms)

    def set_producer_id_expiration_ms(self, expiration_ms: int) -> None:
        """A new producer.id.expiration.ms (a SIGHUP reload): the next expiry check uses it."""
        self.config = replace(self.config, producer_id_expiration_ms=expiration_ms)

    def topic_overrides(self, topic: str) -> dict[str, Any]:
        return dict(self._topic_overrides.get(topic, {}))

    # ----------------------------------------------------------------- periodic work
    def flush_due(self, now: int | None = None) -> int:
        """Flush every log whose flush.ms elapsed. Safe on a thread other than the owner's."""
        now = now_ms() if now is None else now
        flushed = 0
        for tp, partition_log in list(self.logs.items()):
            try:
                flushed += partition_log.flush_if_due(now)
            except (StorageError, OSError) as exc:
                # A flush the disk refused fails the whole dir, as in Kafka.
                self._fail_dir_here(self._log_dir_of.get(tp), f"flush of {tp} failed: {exc}")
        return flushed

    def run_retention(self, now: int | None = None) -> int:
        """Delete expired segments (time, size, log start) and unlink due .deleted files."""
        now = now_ms() if now is None else now
        deleted = 0
        for _tp, partition_log in self._online():
            deleted += partition_log.delete_old_segments(now)
            partition_log.delete_pending_files(now)
        if deleted:
            self.checkpoint_log_start_offsets(in_background=True)
        return deleted

    def run_cleaner(self, now: int | None = None) -> int:
        """Compact every log with cleanup.policy containing compact; return logs cleaned."""
        from storage.cleaner import clean_log, needs_cleaning

        now = now_ms() if now is None else now
        cleaned = 0
        for tp, partition_log in self._online():
            if not partition_log.config.compact:
                continue
            # min.cleanable.dirty.ratio: skip logs that are mostly clean already.
            if not needs_cleaning(partition_log, self.cleaner_checkpoints.get(tp), now_ms=now):
                continue
            result = clean_log(partition_log, now_ms=now, first_dirty_offset=self.cleaner_checkpoints.get(tp))
            self.cleaner_checkpoints[tp] = result.first_dirty_offset
            cleaned += 1
        if cleaned:
            self._checkpoint_cleaner_offsets(in_background=True)
        return cleaned

    def expire_producers(self, now: int | None = None) -> int:
        """producer.id.expiration.ms over every log; returns the producer ids forgotten."""
        now = now_ms() if now is None else now
        expired = 0
        for tp, partition_log in self._online():
            gone = partition_log.remove_expired_producers(now, self.config.producer_id_expiration_ms)
            if gone:
                log.debug("%s: producer ids %s expired", tp, gone)
                expired += len(gone)
        return expired

    def checkpoint_recovery_points(self, *, in_background: bool = False) -> None:
        self._write_checkpoint(checkpoint.RECOVERY_POINT_CHECKPOINT,
                               lambda logs: {tp: lg.recovery_point for tp, lg in logs}, in_background)

    def checkpoint_log_start_offsets(self, *, in_background: bool = False) -> None:
        self._write_checkpoint(checkpoint.LOG_START_OFFSET_CHECKPOINT,
                               lambda logs: {tp: lg.log_start_offset for tp, lg in logs}, in_background)

    def checkpoint_high_watermarks(self, *, in_background: bool = False) -> None:
        self._write_checkpoint(checkpoint.REPLICATION_OFFSET_CHECKPOINT,
                               lambda logs: {tp: lg.high_watermark for tp, lg in logs}, in_background)

    def _checkpoint_cleaner_offsets(self, *, in_background: bool = False) -> None:
        self._write_checkpoint(checkpoint.CLEANER_OFFSET_CHECKPOINT, lambda _logs: dict(self.cleaner_checkpoints),
                               in_background)

    def _write_checkpoint(self, name: str, values: CheckpointValues, in_background: bool) -> None:
        """Write checkpoint ``name`` in every log dir.

        ``in_background``: on the block releaser's thread, for the periodic writes (an
        fsync, and a replace that frees the old file's block, can each wait on the disk:
        storage/releaser.py). ``values`` is taken when the file is written, from the logs
        as they are then, so a write that runs late never brings back a partition
        deleted meanwhile; the lock keeps a late write and one in place from sharing the
        temporary file."""
        if in_background:
            RELEASER.submit(self._write_checkpoint_now, name, values)
        else:
            self._write_checkpoint_now(name, values)

    def _write_checkpoint_now(self, name: str, values: CheckpointValues) -> None:
        with self._checkpoint_write_lock:
            current = values(list(self.logs.items()))
            for state in list(self._dirs):
                if state.path in self.offline_dirs:
                    continue  # a failed dir takes no writes: its checkpoints stay as they were
                mine = {tp: offset for tp, offset in current.items() if self._log_dir_of.get(tp) == state.path}
                try:
                    self._write_dir_checkpoint(state.path, name, mine)
                except LogDirOfflineError as exc:
                    # A checkpoint the disk refuses fails its dir, as Kafka's checkpoint files do.
                    self._fail_dir_here(state.path, f"cannot write its {name}: {exc}")

    def _write_dir_checkpoint(self, log_dir: str, name: str, mine: dict[TopicPartition, int]) -> None:
        path = os.path.join(log_dir, name)
        if self._owns is None:
            checkpoint.write_offset_checkpoint(path, mine)
            return
        owns = self._owns
        # Read-merge-write under a lock: the other owners' entries stay as they are.
        with _checkpoint_lock(log_dir):
            merged = {tp: off for tp, off in checkpoint.read_offset_checkpoint(path).items() if not owns(tp)}
            merged.update(mine)
            checkpoint.write_offset_checkpoint(path, merged)

    def _fail_dir_here(self, path: str | None, why: str) -> None:
        """``fail_dir`` for a failure the manager found itself; the owner is told (``on_dir_failed``)."""
        if path is not None and self.fail_dir(path, why):
            self.on_dir_failed(path)

    def tasks(self) -> list[Task]:
        """The periodic jobs with their intervals, for the owner's scheduler."""
        c = self.config
        jobs = [
            Task("kafka-log-retention", c.retention_check_interval_ms, self.run_retention),
            Task("kafka-recovery-point-checkpoint", c.flush_offset_checkpoint_interval_ms,
                 lambda: self.checkpoint_recovery_points(in_background=True)),
            Task("kafka-log-start-offset-checkpoint", c.flush_start_offset_checkpoint_interval_ms,
                 lambda: self.checkpoint_log_start_offsets(in_background=True)),
            Task("highwatermark-checkpoint", c.high_watermark_checkpoint_interval_ms,
                 lambda: self.checkpoint_high_watermarks(in_background=True)),
            Task("kafka-log-flusher", self.flush_interval_ms(), self.flush_due, owner_thread=False),
            Task("PeriodicProducerExpirationCheck", c.producer_id_expiration_check_interval_ms, self.expire_producers),
        ]
        if c.cleaner_enable:
            jobs.append(Task("kafka-log-cleaner", c.cleaner_backoff_ms, self.run_cleaner))
        return jobs

    def run_due_tasks(self, now: int | None = None, *, include_flush: bool = True) -> list[str]:
        """Run every task whose interval has elapsed since its last run; return their names.

        The owner calls this from its own loop (a worker: every few hundred ms), which
        keeps retention, cleaning and checkpoints on the single writer's thread.
        """
        now = now_ms() if now is None else now
        ran = []
        for task in self.tasks():
            if task.name == "kafka-log-flusher" and not include_flush:
                continue
            last = self._last_run.setdefault(task.name, now)
            if now - last >= task.interval_ms:
                self._last_run[task.name] = now
                task.run()
                ran.append(task.name)
        return ran

    def flush_interval_ms(self) -> int:
        """How often flush.ms deadlines are checked: the scheduler setting, else the
        smallest flush.ms in use (capped to [1, 1000] ms)."""
        if self.config.flush_scheduler_interval_ms != LONG_MAX:
            return self.config.flush_scheduler_interval_ms
        smallest = min([lg.config.flush_ms for lg in self.logs.values()] + [self.default_log_config.flush_ms])
        return max(1, min(1000, smallest))

    def start_flusher(self) -> None:
        """Run time-based flushes (flush.ms) on a background thread, off the append path."""
        if self._flusher is not None:
            return
        self._stop_flusher.clear()

        def loop() -> None:
            while not self._stop_flusher.wait(self.flush_interval_ms() / 1000):
                try:
                    self.flush_due()
                except Exception:  # keep flushing the other logs; say what failed
                    log.exception("background flush failed")

        self._flusher = threading.Thread(target=loop, name="castle-log-flusher", daemon=True)
        self._flusher.start()

    def stop_flusher(self) -> None:
        if self._flusher is None:
            return
        self._stop_flusher.set()
        self._flusher.join(timeout=10)
        self._flusher = None

    # ----------------------------------------------------------------- close
    def close(self) -> None:
        """Clean shutdown: the next open needs no recovery."""
        self.stop_flusher()
        RELEASER.drain()  # deletions and checkpoint writes still queued
        for partition_log in self.logs.values():
            partition_log.close()
        for future in self.futures.values():
            future.log.close()  # the move resumes at the next open
        self.futures = {}
        self.checkpoint_recovery_points()
        self.checkpoint_log_start_offsets()
        self.checkpoint_high_watermarks()
        if self._owns is None:
            # A failed dir is not marked clean: the next start recovers its logs.
            mark_clean_shutdown([state.path for state in self._dirs if state.path not in self.offline_dirs])
        for state in self._dirs:
            state.lock.release()
        self._dirs = []
        self.logs = {}


class _checkpoint_lock:
    """flock on <dir>/.checkpoint.lock, for owners sharing a dir's checkpoint files."""

    def __init__(self, directory: str) -> None:
        self._path = os.path.join(directory, ".checkpoint.lock")
        self._fd = -1

    def __enter__(self) -> None:
        self._fd = os.open(self._path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        fcntl.flock(self._fd, fcntl.LOCK_EX)

    def __exit__(self, *exc: object) -> None:
        os.close(self._fd)  # closing the descriptor releases the flock


@dataclass
class ClaimedDirs:
    """What ``claim_log_dirs`` hands to the process that forks the partition owners."""

    paths: list[str]
    locks: list[LogDirLock]
    cluster_id: str
    clean_shutdown: bool
    directory_ids: list[str]  # meta.properties' directory.id of each dir

    def release(self) -> None:
        for lock in self.locks:
            lock.release()


def claim_log_dirs(config: ManagerConfig) -> ClaimedDirs:
    """Steps 1-3 of opening for shared mode: lock the dirs, check meta.properties, and take
    the clean-shutdown markers (removed: from now on a crash is unclean)."""
    probe = LogManager(config)
    states: list[_DirState] = []
    try:
        for path in config.log_dirs:
            states.append(probe._open_dir(path))
    except BaseException:
        for state in states:
            state.lock.release()
        raise
    clean = all(state.clean_shutdown for state in states)
    for state in states:
        marker = os.path.join(state.path, files.CLEAN_SHUTDOWN_FILE)
        if os.path.exists(marker):
            os.unlink(marker)
            files.fsync_dir(state.path)
    assert probe.cluster_id is not None
    return ClaimedDirs([s.path for s in states], [s.lock for s in states], probe.cluster_id, clean,
                       [s.directory_id for s in states])


def mark_clean_shutdown(paths: list[str]) -> None:
    """Write .kafka_cleanshutdown in each dir: the next open skips recovery."""
    for path in paths:
        marker = os.path.join(path, files.CLEAN_SHUTDOWN_FILE)
        with open(marker, "wb") as handle:
            os.fsync(handle.fileno())
        files.fsync_dir(path)
