"""The single-machine coordination backend: no ZooKeeper, files in the first log dir.

    <data_dir>/coordinator.lock       exclusive flock = "I am the coordinator" (empty file)
    <data_dir>/coordinator_epoch      the latest epoch granted, decimal text (like /consumers/coordinator_epoch)
    <data_dir>/coordinator.json       {"version":1,"brokerid":N,"timestamp":"<ms>"} of the last winner
    <data_dir>/cluster-id.json        {"version":"1","id":"<22-char id>"}, created once
    <data_dir>/cluster-metadata.json  the topic registry (coordination/local_topics.py)
    <data_dir>/broker-secret.json     {"version":1,"secret":"<hex>"}, 0600: what brokers prove themselves with
    <data_dir>/groups/<group>.json    {"version":1,"group":g,"members":{id: {...}},"owners":{topic: {"p": id}}}

Election: the process holding the flock is the coordinator until it releases it or dies
(the kernel drops a flock with its last descriptor, however the process ends, so there is
no stale lock). The winner bumps ``coordinator_epoch`` and writes ``coordinator.json``,
both atomically (tmp, fsync, rename); only the lock holder writes them, so no other
locking is needed. ``coordinator.json`` outlives its writer: whether a coordinator is alive
is answered by probing the lock (a shared flock that fails means someone holds it).

Waiting for the lock: flock(2) has no timeout and cannot be interrupted by close() from
another thread, and a thread stuck in it would keep a ThreadPoolExecutor from joining at
exit. So the blocking flock runs on a daemon thread of its own; ``campaign`` waits on an
Event and can give up (timeout, close). A given-up attempt that later gets the lock drops
it at once.

Watches: a released flock leaves no trace in the file system to be notified of, so
``watch_coordinator`` and ``watch_topics`` are served by the process's file-polling thread (coordination/file_poller.py), which re-checks
(lock held?, epoch file changed?, registry file changed?) every 250 ms. Brokers: one machine, one broker: ``live_brokers`` is just what
this process registered, and there is no session to lose (listeners hear CONNECTED once,
at start).
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import threading
import uuid
from typing import Any, Callable, Mapping

import orjson
from kio.schema.errors import ErrorCode

from coordination.acls.store import LocalAcls
from coordination.backend import (
    CONNECTED,
    CoordinationUnavailable,
    NotCoordinator,
    StateListener,
    Watcher,
)
from coordination.broker_config_store import LocalBrokerConfigs
from coordination.client_metrics_store import local_client_metrics
from coordination.client_quotas import LocalQuotas
from coordination.credentials import LocalCredentials
from coordination.delegation_tokens import LocalTokens
from coordination.feature_store import LocalFeatures
from coordination.file_poller import POLLER
from coordination.group_config_store import LocalGroupConfigs
from coordination.local_topics import LocalTopicRegistry
from coordination.topics import TopicInfo, TopicRegistryError
from coordination.znodes import (
    BrokerSecretZNode,
    ClusterIdZNode,
    CoordinatorEpochZNode,
    CoordinatorZNode,
    Endpoints,
    PartitionState,
    znode_name,
)
from storage import files
from storage.checkpoint import read_bytes_if_exists, write_bytes_atomically

log = logging.getLogger(__name__)

LOCK_NAME = "coordinator.lock"
EPOCH_NAME = "coordinator_epoch"
COORDINATOR_NAME = "coordinator.json"
CLUSTER_ID_NAME = "cluster-id.json"
BROKER_SECRET_NAME = "broker-secret.json"  # 0600
GROUPS_DIR = "groups"
GROUP_FORMAT_VERSION = 1


class LocalTopics(LocalTopicRegistry):
    """The local registry plus ``replicas``: every partition lives on this one broker."""

    def __init__(self, log_dir: str, node_id: int) -> None:
        super().__init__(log_dir)
        self.node_id = node_id

    def create(self, name: str, partitions: int, configs: Mapping[str, str], topic_id: uuid.UUID | None = None,
               validate_only: bool = False, assignment: Mapping[int, list[int]] | None = None,
               brokers: list[int] | None = None, replication_factor: int = 1) -> TopicInfo:
        """As LocalTopicRegistry.create; a placement can only name this broker."""
        if replication_factor != 1:
            raise TopicRegistryError(ErrorCode.invalid_replication_factor,
                                     f"Replication factor: {replication_factor} larger than available brokers: 1.")
        for replicas in (assignment or {}).values():
            if list(replicas) != [self.node_id]:
                raise TopicRegistryError(ErrorCode.invalid_replica_assignment,
                                         f"replicas {list(replicas)}: this broker ({self.node_id}) is the only one")
        return super().create(name, partitions, configs, topic_id=topic_id, validate_only=validate_only)

    def replicas(self, name: str) -> dict[int, list[int]]:
        info = self.get(name)
        if info is None:
            raise TopicRegistryError(ErrorCode.unknown_topic_or_partition, f"topic '{name}' does not exist")
        return {p: [self.node_id] for p in range(info.partitions)}

    def partition_states(self, name: str) -> dict[int, PartitionState]:
        """This broker leads every partition, alone in its ISR, in epoch 0."""
        info = self.get(name)
        if info is None:
            return {}
        state = PartitionState(self.node_id, 0, [self.node_id], 0)
        return {p: state for p in range(info.partitions)}


class _LockAttempt:
    """One blocking flock on a daemon thread, which the waiter may abandon.

    The descriptor ends in exactly one of two ways: ``acquired`` (the waiter owns it and
    the lock), or closed here, once, by whichever of run() and abandon() comes second.
    """

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.finished = threading.Event()   # acquired, failed or abandoned
        self.acquired = False
        self.error: OSError | None = None
        self._mutex = threading.Lock()
        self._ran = False
        self._abandoned = False

    def run(self) -> None:
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX)
        except OSError as exc:
            self.error = exc
        with self._mutex:
            self._ran = True
            if self._abandoned:
                os.close(self.fd)  # nobody wants it any more: let the next campaigner have it
            elif self.error is None:
                self.acquired = True
        self.finished.set()

    def abandon(self) -> bool:
        """Give up; False if too late (the lock was acquired and now belongs to the caller)."""
        with self._mutex:
            if self.acquired:
                return False
            if not self._abandoned:
                self._abandoned = True
                if self._ran:  # failed: run() left the descriptor to us
                    os.close(self.fd)
        self.finished.set()
        return True


class LocalBackend:
    """CoordinationBackend for one machine. Thread-safe, except ``topics()``, which is
    LocalTopicRegistry and, like it, meant for one thread at a time."""

    def __init__(self, data_dir: str, node_id: int) -> None:
        self.data_dir = data_dir
        self.node_id = node_id
        self._lock_path = os.path.join(data_dir, LOCK_NAME)
        self._epoch_path = os.path.join(data_dir, EPOCH_NAME)
        self._coordinator_path = os.path.join(data_dir, COORDINATOR_NAME)
        self._mutex = threading.RLock()
        self._closed = threading.Event()
        self._started = False
        self._lock_fd: int | None = None       # set while we are the coordinator
        self._epoch = 0
        self._attempts: set[_LockAttempt] = set()
        self._listeners: list[StateListener] = []
        self._broker_watchers: list[Watcher] = []
        # What the watch looks at, by name: watchers hear of a change of its signature.
        self._watchers: dict[str, list[Watcher]] = {"coordinator": [], "topics": []}
        self._poll_key: int | None = None  # the watch's check in the process's file poller
        self._last_signatures: dict[str, tuple[int, ...]] = {}
        self._registered: tuple[int, Endpoints] | None = None
        self._credentials: LocalCredentials | None = None
        self._client_quotas: LocalQuotas | None = None
        self._delegation_tokens: LocalTokens | None = None
        self._acls: LocalAcls | None = None
        self._group_configs: LocalGroupConfigs | None = None
        self._client_metrics: LocalGroupConfigs | None = None
        self._features: LocalFeatures | None = None
        self._broker_configs: LocalBrokerConfigs | None = None
        self._topics = LocalTopics(data_dir, node_id)

    # ------------------------------------------------------------------ life cycle
    def start(self, timeout: float = 30.0) -> None:
        os.makedirs(self.data_dir, exist_ok=True)
        with self._mutex:
            self._started = True
            listeners = list(self._listeners)
        for fn in listeners:
            fn(CONNECTED)

    def close(self) -> None:
        with self._mutex:
            self._closed.set()
            attempts = list(self._attempts)
        for attempt in attempts:
            attempt.abandon()
        self.resign()
        for store in (self._credentials, self._acls, self._group_configs, self._client_metrics, self._features,
                      self._broker_configs, self._client_quotas, self._delegation_tokens):
            if store is not None:
                store.close()
        with self._mutex:
            key, self._poll_key = self._poll_key, None
        if key is not None:
            POLLER.remove(key)

    def session_credentials(self) -> None:
        """No session: a successor finds the flock free (the kernel dropped it) and wins."""
        return None

    def add_state_listener(self, fn: StateListener) -> None:
        with self._mutex:
            self._listeners.append(fn)
            started = self._started
        if started:
            fn(CONNECTED)

    # ------------------------------------------------------------------ cluster and brokers
    def broker_secret(self) -> bytes:
        """One machine, one broker: a 0600 file, made once (only this broker's processes read it)."""
        path = os.path.join(self.data_dir, BROKER_SECRET_NAME)
        return BrokerSecretZNode.decode(_create_once(path, lambda: BrokerSecretZNode.encode(os.urandom(32)), 0o600))

    def cluster_id(self, proposed: str) -> str:
        path = os.path.join(self.data_dir, CLUSTER_ID_NAME)
        return ClusterIdZNode.decode(_create_once(path, lambda: ClusterIdZNode.encode(proposed), 0o644))

    def check_log_dirs(self, node_id: int, directory_ids: list[str],
                       unclean_allowed: Callable[[Mapping[str, str]], bool]) -> bool:
        """One broker, no replicas: a lost disk has nothing to fence."""
        return False

    def register_broker(self, node_id: int, endpoints: Endpoints, protocol_map: Mapping[str, str] | None = None,
                        wait_for_stale: float = 0.0) -> None:
        """One machine, one broker: its address is kept (``wait_for_stale``: no sessions
        to wait for)."""
        with self._mutex:
            self._registered = (node_id, dict(endpoints))
            watchers = list(self._broker_watchers)
        for fn in watchers:
            fn()

    def reregister(self) -> None:
        """Nothing to do: there is no session whose end would drop the registration."""

    def acls(self) -> LocalAcls:
        with self._mutex:
            if self._acls is None:
                self._acls = LocalAcls(self.data_dir)
            return self._acls

    def client_quotas(self) -> LocalQuotas:
        with self._mutex:
            if self._client_quotas is None:
                self._client_quotas = LocalQuotas(self.data_dir)
            return self._client_quotas

    def delegation_tokens(self) -> LocalTokens:
        with self._mutex:
            if self._delegation_tokens is None:
                self._delegation_tokens = LocalTokens(self.data_dir)
            return self._delegation_tokens

    def credentials(self) -> LocalCredentials:
        with self._mutex:
            if self._credentials is None:
                self._credentials = LocalCredentials(self.data_dir)
            return self._credentials

    def group_configs(self) -> LocalGroupConfigs:
        with self._mutex:
            if self._group_configs is None:
                self._group_configs = LocalGroupConfigs(self.data_dir)
            return self._group_configs

    def client_metrics(self) -> LocalGroupConfigs:
        with self._mutex:
            if self._client_metrics is None:
                self._client_metrics = local_client_metrics(self.data_dir)
            return self._client_metrics

    def features(self) -> LocalFeatures:
        with self._mutex:
            if self._features is None:
                self._features = LocalFeatures(self.data_dir)
            return self._features

    def broker_configs(self) -> LocalBrokerConfigs:
        with self._mutex:
            if self._broker_configs is None:
                self._broker_configs = LocalBrokerConfigs(self.data_dir)
            return self._broker_configs

    def live_brokers(self) -> dict[int, Endpoints]:
        registered = self._registered
        return {} if registered is None else {registered[0]: registered[1]}

    def watch_brokers(self, fn: Watcher) -> None:
        with self._mutex:
            self._broker_watchers.append(fn)
        fn()

    # ------------------------------------------------------------------ election
    def campaign(self, node_id: int, timeout: float | None = None) -> int:
        with self._mutex:
            if self._closed.is_set():
                raise CoordinationUnavailable("the coordination backend is closed")
            if self._lock_fd is not None:
                return self._epoch
        os.makedirs(self.data_dir, exist_ok=True)
        fd = os.open(self._lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._wait_for_lock(fd, timeout)  # owns fd from here on, closes it on failure
        except BaseException:
            os.close(fd)
            raise
        try:
            epoch = self.current_epoch() + 1
            write_bytes_atomically(self._epoch_path, CoordinatorEpochZNode.encode(epoch))
            write_bytes_atomically(self._coordinator_path, CoordinatorZNode.encode(node_id))
        except BaseException:
            os.close(fd)
            raise
        with self._mutex:
            if self._closed.is_set():  # close() ran while we were writing: do not keep the lock
                os.close(fd)
                raise CoordinationUnavailable("the coordination backend is closed")
            self._lock_fd = fd
            self._epoch = epoch
        log.info("coordinator: node %d holds %s, epoch %d", node_id, self._lock_path, epoch)
        return epoch

    def _wait_for_lock(self, fd: int, timeout: float | None) -> None:
        attempt = _LockAttempt(fd)
        with self._mutex:
            if self._closed.is_set():
                os.close(fd)
                raise CoordinationUnavailable("the coordination backend is closed")
            self._attempts.add(attempt)
        try:
            threading.Thread(target=attempt.run, name="castle-coordinator-flock", daemon=True).start()
            attempt.finished.wait(timeout)
            if not attempt.acquired and attempt.abandon():
                if attempt.error is not None:
                    raise attempt.error
                if self._closed.is_set():
                    raise CoordinationUnavailable("the coordination backend is closed")
                raise TimeoutError(f"still not the coordinator after {timeout} s: another process holds {self._lock_path}")
        finally:
            with self._mutex:
                self._attempts.discard(attempt)

    def resign(self) -> None:
        with self._mutex:
            fd, self._lock_fd = self._lock_fd, None
            if fd is None:
                return
            try:
                os.unlink(self._coordinator_path)
            except FileNotFoundError:
                pass
            finally:
                os.close(fd)  # releases the flock

    def is_coordinator(self) -> bool:
        return self._lock_fd is not None

    def coordinator(self) -> tuple[int, int] | None:
        if self._lock_fd is None and not self._lock_held_elsewhere():
            return None
        data = read_bytes_if_exists(self._coordinator_path)
        # Between a winner's flock and its write, the file is missing or the previous
        # winner's; on one machine every coordinator is this node anyway.
        broker_id = self.node_id
        if data:
            try:
                broker_id = CoordinatorZNode.decode(data)
            except ValueError:
                log.warning("unreadable %s: %r", self._coordinator_path, data[:200])
        return broker_id, self.current_epoch()

    def _lock_held_elsewhere(self) -> bool:
        try:
            fd = os.open(self._lock_path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return False
        try:
            # A shared lock conflicts only with an exclusive holder, and two probes never
            # conflict with each other; held for two syscalls, a campaigner barely waits.
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            return False
        except OSError as exc:
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                return True
            raise
        finally:
            os.close(fd)

    def current_epoch(self) -> int:
        data = read_bytes_if_exists(self._epoch_path)
        return CoordinatorEpochZNode.decode(data) if data else 0

    def watch_coordinator(self, fn: Watcher) -> None:
        self._watch("coordinator", fn)

    def watch_topics(self, fn: Watcher) -> None:
        self._watch("topics", fn)

    def _watch(self, what: str, fn: Watcher) -> None:
        with self._mutex:
            self._watchers[what].append(fn)
            if self._poll_key is None and not self._closed.is_set():
                self._last_signatures = self._signatures()
                self._poll_key = POLLER.add(self._poll, f"{self.data_dir} (coordinator, topics)")
        fn()

    def _signatures(self) -> dict[str, tuple[int, ...]]:
        held = self._lock_fd is not None or self._lock_held_elsewhere()
        return {"coordinator": (held, *_file_stamp(self._epoch_path)), "topics": _file_stamp(self._topics.path)}

    def _poll(self) -> None:
        """Run by the process's file-polling thread (coordination/file_poller.py) every 250 ms."""
        try:
            now = self._signatures()
        except OSError as exc:
            log.warning("local watch: %s", exc)
            return
        changed = [what for what in now if now[what] != self._last_signatures[what]]
        self._last_signatures = now
        for what in changed:
            with self._mutex:
                watchers = list(self._watchers[what])
            for fn in watchers:
                try:
                    fn()
                except Exception:
                    log.exception("%s watcher failed", what)

    # ------------------------------------------------------------------ registry and group mirror
    def topics(self) -> LocalTopics:
        return self._topics

    def _group_path(self, group: str) -> str:
        return os.path.join(self.data_dir, GROUPS_DIR, znode_name(group) + ".json")

    def _change_group(self, group: str, mutate: Callable[[dict[str, Any]], None]) -> None:
        if self._lock_fd is None:
            raise NotCoordinator(f"node {self.node_id} does not hold {self._lock_path}")
        path = self._group_path(group)
        data = read_bytes_if_exists(path)
        doc: dict[str, Any] = orjson.loads(data) if data else {}
        doc.update(version=GROUP_FORMAT_VERSION, group=group)
        doc.setdefault("members", {})
        doc.setdefault("owners", {})
        mutate(doc)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        write_bytes_atomically(path, orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS))

    def write_group_members(self, group: str, members: Mapping[str, bytes]) -> None:
        def mutate(doc: dict[str, Any]) -> None:
            doc["members"] = {member: _embed(data) for member, data in members.items()}

        self._change_group(group, mutate)

    def write_group_owners(self, group: str, owners: Mapping[tuple[str, int], str]) -> None:
        def mutate(doc: dict[str, Any]) -> None:
            by_topic: dict[str, dict[str, str]] = {}
            for (topic, partition), member in owners.items():
                by_topic.setdefault(topic, {})[str(partition)] = member
            doc["owners"] = by_topic

        self._change_group(group, mutate)

    def delete_group(self, group: str) -> None:
        if self._lock_fd is None:
            raise NotCoordinator(f"node {self.node_id} does not hold {self._lock_path}")
        try:
            os.unlink(self._group_path(group))
        except FileNotFoundError:
            return
        files.fsync_dir(os.path.join(self.data_dir, GROUPS_DIR))


def _create_once(path: str, make: Callable[[], bytes], mode: int) -> bytes:
    """The file's content, writing ``make()`` first if it does not exist. Create-if-absent
    with the whole content at once: a private tmp file is written, then link(2)ed into place,
    which fails if the name exists; the first writer wins and nobody sees a half-written file."""
    data = read_bytes_if_exists(path)
    if data is not None:
        return data
    tmp = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, mode)
        with os.fdopen(fd, "wb") as handle:
            handle.write(make())
            handle.flush()
            os.fsync(handle.fileno())
        try:
            os.link(tmp, path)
            files.fsync_dir(os.path.dirname(path))
        except FileExistsError:
            pass
    finally:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
    data = read_bytes_if_exists(path)
    assert data is not None
    return data


def _file_stamp(path: str) -> tuple[int, int]:
    """(inode, mtime) of a file replaced atomically, (0, 0) while it does not exist."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return 0, 0
    return st.st_ino, st.st_mtime_ns


def _embed(data: bytes) -> Any:
    """A member's znode bytes inside the group file: as JSON when they are JSON."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return data.decode("utf-8", "replace")

