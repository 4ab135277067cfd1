"""The ZooKeeper coordination backend (kazoo): registration, election, registry, group mirror.

One KazooClient, i.e. one ZooKeeper session, per backend object and per process.
``zookeeper.connect`` is "host:port[,host:port...][/chroot]"; the chroot is created on
start if missing (through a short-lived client without it, since a chrooted client cannot
reach above its root). Layout and JSON: coordination/znodes.py.

Election, as Kafka's ZooKeeper controller did it (KafkaZkClient
registerControllerAndIncrementControllerEpoch), with /consumers/coordinator for
/controller and /consumers/coordinator_epoch for /controller_epoch:

1. read the epoch and its znode version (create it as "0" if missing; losing that race
   is fine, we just read the winner's);
2. in ONE multi-op transaction, create the ephemeral /consumers/coordinator and set the
   epoch to epoch+1 *conditional on the version read in 1*;
3. NodeExists (someone is coordinator) or BadVersion (someone won since step 1) means we
   lost: leave an exists-watch on /consumers/coordinator, sleep on an Event until it
   fires (the coordinator's session ended, or our connection changed), go to 1.

Because the epoch only changes in that transaction, every win has its own epoch, epochs
only grow, and the coordinator znode and the epoch change in the same zxid (which lets
``coordinator()`` read the pair consistently). A commit whose answer was lost to a
connection drop may have succeeded: before calling a conflict a loss we check whether the
coordinator znode is ours (ephemeralOwner == our session), as Kafka's
checkControllerAndEpoch does.

Fencing our own writes: while coordinator, every group mirror write is a transaction that
also checks that /consumers/coordinator exists and the epoch znode still has the version
our win gave it; if either fails another process won (or our session ended) and the write
is refused with NotCoordinator, so a deposed coordinator cannot write.

Session states (kazoo's CONNECTED / SUSPENDED / LOST) go to the state listeners, from
kazoo's connection thread. On LOST our ephemeral znodes are gone: kazoo connects again
with a new session by itself, but the caller must ``reregister()`` and ``campaign()``
again; see coordination/backend.py.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Callable, Mapping, ParamSpec, TypeVar

from kazoo.client import KazooClient, KazooState, TransactionRequest
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError, NotEmptyError
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.recipe.watchers import ChildrenWatch, DataWatch
from kazoo.retry import KazooRetry

from coordination.acls.store import ZooKeeperAcls
from coordination.backend import (
    CONNECTED,
    LOST,
    SUSPENDED,
    BrokerIdInUse,
    CoordinationUnavailable,
    NotCoordinator,
    SessionCredentials,
    SessionState,
    StateListener,
    Watcher,
)
from coordination.broker_config_store import ZooKeeperBrokerConfigs
from coordination.client_metrics_store import zookeeper_client_metrics
from coordination.client_quotas import ZooKeeperQuotas
from coordination.credentials import ZooKeeperCredentials
from coordination.delegation_tokens import ZooKeeperTokens
from coordination.feature_store import ZooKeeperFeatures
from coordination.group_config_store import ZooKeeperGroupConfigs
from coordination.zk_calls import failure, retrying, transact
from coordination.znodes import (
    PERSISTENT_ROOTS,
    Address,
    BrokerIdsZNode,
    BrokerIdZNode,
    BrokerRegistration,
    BrokerSecretZNode,
    ClusterIdZNode,
    CoordinatorEpochZNode,
    CoordinatorZNode,
    Endpoints,
    GroupMemberZNode,
    GroupOwnerZNode,
    GroupZNode,
    LogDirsZNode,
    znode_name,
)
from coordination.zookeeper_topics import ZooKeeperTopicRegistry

log = logging.getLogger(__name__)
T = TypeVar("T")
P = ParamSpec("P")

DEFAULT_SESSION_TIMEOUT = 18.0   # Kafka's zookeeper.session.timeout.ms
DEFAULT_RETRY_DEADLINE = 30.0
# ZooKeeper refuses requests over jute.maxbuffer (1 MB): big mirrors go in several transactions.
MAX_OPS_PER_TRANSACTION = 500
# coordinator(): how often to re-read when an election lands between our two reads.
_CONSISTENT_READ_TRIES = 5

_STATES: dict[str, SessionState] = {KazooState.CONNECTED: CONNECTED, KazooState.SUSPENDED: SUSPENDED,
                                    KazooState.LOST: LOST}


def split_connect(zookeeper_connect: str) -> tuple[str, str]:
    """("h1:2181,h2:2181", "/chroot") from "h1:2181,h2:2181/chroot"; the chroot is ""
    when absent (or just "/")."""
    hosts, slash, chroot = zookeeper_connect.strip().partition("/")
    chroot = "/" + chroot.strip("/") if slash and chroot.strip("/") else ""
    return hosts, chroot


class ZooKeeperBackend:
    """CoordinationBackend over ZooKeeper. Thread-safe; methods block (use an executor)."""

    def __init__(self, zookeeper_connect: str, node_id: int, session_timeout: float = DEFAULT_SESSION_TIMEOUT,
                 retry_deadline: float = DEFAULT_RETRY_DEADLINE, resume: SessionCredentials | None = None) -> None:
        """``resume``: the id and password of a session to take over (a process of this
        broker that died); if it has expired, a new session starts."""
        self.connect = zookeeper_connect
        self.node_id = node_id
        self.hosts, self.chroot = split_connect(zookeeper_connect)
        if not self.hosts:
            raise ValueError(f"zookeeper.connect has no host: {zookeeper_connect!r}")
        self.session_timeout = session_timeout
        self._closed = threading.Event()
        self._retry = KazooRetry(max_tries=-1, delay=0.05, backoff=2, max_delay=1.0, deadline=retry_deadline,
                                 interrupt=self._closed.is_set)
        # Reconnect quickly (well inside the session timeout) so a short outage does not
        # cost the session: the delay between attempts never exceeds a third of it.
        self._client = KazooClient(hosts=self.hosts + self.chroot, timeout=session_timeout, client_id=resume,
                                   connection_retry=KazooRetry(max_tries=-1, delay=0.1, backoff=2,
                                                               max_delay=max(0.2, min(2.0, session_timeout / 3))))
        self._client.add_listener(self._on_state)
        self._mutex = threading.Lock()
        self._listeners: list[StateListener] = []
        self._waiters: set[threading.Event] = set()
        self._registration: tuple[int, dict[str, Address], dict[str, str]] | None = None
        self._credentials: ZooKeeperCredentials | None = None
        self._client_quotas: ZooKeeperQuotas | None = None
        self._delegation_tokens: ZooKeeperTokens | None = None
        self._acls: ZooKeeperAcls | None = None
        self._group_configs: ZooKeeperGroupConfigs | None = None
        self._client_metrics: ZooKeeperGroupConfigs | None = None
        self._features: ZooKeeperFeatures | None = None
        self._broker_configs: ZooKeeperBrokerConfigs | None = None
        self._fence: tuple[int, int] | None = None      # (epoch, epoch znode version) while coordinator
        self._topics = ZooKeeperTopicRegistry(self._client, node_id, self._retry)
        self._topic_watchers: list[Watcher] = []

    @property
    def client(self) -> KazooClient:
        return self._client

    def _call(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        return retrying(self._retry, fn, *args, **kwargs)

    def session_id(self) -> int | None:
        client_id = self._client.client_id
        return None if client_id is None else int(client_id[0])

    def session_credentials(self) -> SessionCredentials | None:
        """(id, password) of the live session, which another process can resume."""
        client_id = self._client.client_id
        return None if client_id is None else (int(client_id[0]), bytes(client_id[1]))

    # ------------------------------------------------------------------ life cycle
    def start(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        if self.chroot:
            bare = KazooClient(hosts=self.hosts, timeout=self.session_timeout)
            try:
                bare.start(timeout=timeout)
                bare.ensure_path(self.chroot)
            except KazooTimeoutError as exc:
                raise CoordinationUnavailable(f"cannot connect to ZooKeeper at {self.hosts} within {timeout} s") from exc
            finally:
                bare.stop()
                bare.close()
        try:
            self._client.start(timeout=max(0.1, deadline - time.monotonic()))
        except KazooTimeoutError as exc:
            raise CoordinationUnavailable(f"cannot connect to ZooKeeper at {self.connect} within {timeout} s") from exc
        for path in PERSISTENT_ROOTS:
            self._call(self._client.ensure_path, path)

    def close(self) -> None:
        """End the session (our ephemeral znodes are deleted at once, not after the timeout)."""
        self._closed.set()
        self._wake_waiters()
        for store in (self._credentials, self._acls, self._group_configs, self._client_metrics, self._features,
                      self._broker_configs, self._client_quotas, self._delegation_tokens):
            if store is not None:
                store.close()
        self._client.stop()
        self._client.close()

    def add_state_listener(self, fn: StateListener) -> None:
        with self._mutex:
            self._listeners.append(fn)

    def _on_state(self, state: str) -> None:
        # kazoo's connection thread: no ZooKeeper calls here, only bookkeeping and news.
        mapped = _STATES.get(state)
        if mapped is None:
            return
        with self._mutex:
            if mapped == LOST:
                self._fence = None  # our coordinator znode went with the session
            listeners = list(self._listeners)
        self._wake_waiters()
        for fn in listeners:
            try:
                fn(mapped)
            except Exception:
                log.exception("session state listener failed")

    def _wake_waiters(self) -> None:
        with self._mutex:
            waiters = list(self._waiters)
        for event in waiters:
            event.set()

    # ------------------------------------------------------------------ cluster and brokers
    def broker_secret(self) -> bytes:
        try:
            self._call(self._client.create, BrokerSecretZNode.PATH, BrokerSecretZNode.encode(os.urandom(32)), makepath=True)
        except NodeExistsError:
            pass
        data, _ = self._call(self._client.get, BrokerSecretZNode.PATH)
        return BrokerSecretZNode.decode(data)

    def cluster_id(self, proposed: str) -> str:
        try:
            self._call(self._client.create, ClusterIdZNode.PATH, ClusterIdZNode.encode(proposed))
        except NodeExistsError:
            pass
        data, _ = self._call(self._client.get, ClusterIdZNode.PATH)
        return ClusterIdZNode.decode(data)

    def check_log_dirs(self, node_id: int, directory_ids: list[str],
                       unclean_allowed: Callable[[Mapping[str, str]], bool]) -> bool:
        """Before the broker serves: if its log dirs are not the ones the cluster recorded
        (a lost or replaced disk), take it out of every ISR and hand its leaderships to
        in-sync replicas (coordination/controller.py's rules, as if it had died), so its
        empty log never leads while an in-sync replica lives; then record the new ids.
        True when the disk was found lost."""
        from coordination.controller import fence_replica

        path = LogDirsZNode.path(node_id)
        try:
            recorded: list[str] | None = LogDirsZNode.decode(node_id, self._call(self._client.get, path)[0])
        except NoNodeError:
            recorded = None
        lost = recorded is not None and recorded != sorted(directory_ids)
        if lost:
            log.warning("broker %d: its log dirs %s are not the ones it ran with (%s): its data is gone; it leaves "
                        "every ISR and catches up from the leaders", node_id, sorted(directory_ids), recorded)
            epoch = self.current_epoch()
            fence_replica(self._topics, node_id, set(self.live_brokers()) - {node_id}, unclean_allowed, epoch)
        data = LogDirsZNode.encode(directory_ids)
        if recorded is None:
            self._call(self._client.create, path, data, makepath=True)
        elif lost:
            self._call(self._client.set, path, data)
        return lost

    def register_broker(self, node_id: int, endpoints: Endpoints, protocol_map: Mapping[str, str] | None = None,
                        wait_for_stale: float = 0.0) -> None:
        """Create the ephemeral /brokers/ids/<node_id>: one node per broker, whatever its
        worker count (DESIGN.md, non-negotiable 9). If another session holds it, wait up to
        ``wait_for_stale`` seconds for it to go (a broker restarted right after a crash
        finds its previous session's node until that session times out), then raise
        BrokerIdInUse."""
        path = BrokerIdZNode.path(node_id)
        data = BrokerIdZNode.encode(endpoints, protocol_map)
        deadline = time.monotonic() + wait_for_stale
        while True:
            try:
                self._call(self._client.create, path, data, ephemeral=True)
                break
            except NodeExistsError:
                pass
            gone = threading.Event()
            try:
                other, stat = self._call(self._client.get, path, watch=lambda _event: gone.set())
            except NoNodeError:
                continue  # it just went: try again
            if stat.ephemeralOwner == self.session_id():
                self._call(self._client.set, path, data)  # ours: a create retried after a lost answer
                break
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not gone.wait(remaining):
                raise BrokerIdInUse(
                    f"broker id {node_id} is already registered in ZooKeeper ({self.connect}{path}: "
                    f"{other.decode('utf-8', 'replace')}) by another live session (0x{stat.ephemeralOwner:x}); "
                    f"give this broker another node.id, or if that was this broker before a restart, "
                    f"its old session ends within {self.session_timeout:g} s")
        with self._mutex:
            self._registration = (node_id, dict(endpoints), dict(protocol_map or {}))

    def reregister(self) -> None:
        """After LOST: register again what register_broker registered (if anything)."""
        with self._mutex:
            registration = self._registration
        if registration is not None:
            node_id, endpoints, protocol_map = registration
            self.register_broker(node_id, endpoints, protocol_map, wait_for_stale=self.session_timeout)

    def acls(self) -> ZooKeeperAcls:
        with self._mutex:
            if self._acls is None:
                self._acls = ZooKeeperAcls(self._client, self._call)
            return self._acls

    def group_configs(self) -> ZooKeeperGroupConfigs:
        with self._mutex:
            if self._group_configs is None:
                self._group_configs = ZooKeeperGroupConfigs(self._client, self._call)
            return self._group_configs

    def client_metrics(self) -> ZooKeeperGroupConfigs:
        with self._mutex:
            if self._client_metrics is None:
                self._client_metrics = zookeeper_client_metrics(self._client, self._call)
            return self._client_metrics

    def features(self) -> ZooKeeperFeatures:
        with self._mutex:
            if self._features is None:
                self._features = ZooKeeperFeatures(self._client, self._call)
            return self._features

    def broker_configs(self) -> ZooKeeperBrokerConfigs:
        with self._mutex:
            if self._broker_configs is None:
                self._broker_configs = ZooKeeperBrokerConfigs(self._client, self._call)
            return self._broker_configs

    def client_quotas(self) -> ZooKeeperQuotas:
        with self._mutex:
            if self._client_quotas is None:
                self._client_quotas = ZooKeeperQuotas(self._client, self._call)
            return self._client_quotas

    def delegation_tokens(self) -> ZooKeeperTokens:
        with self._mutex:
            if self._delegation_tokens is None:
                self._delegation_tokens = ZooKeeperTokens(self._client, self._call)
            return self._delegation_tokens

    def credentials(self) -> ZooKeeperCredentials:
        with self._mutex:
            if self._credentials is None:
                self._credentials = ZooKeeperCredentials(self._client, self._call)
            return self._credentials

    def live_brokers(self) -> dict[int, Endpoints]:
        return {node_id: r.endpoints for node_id, r in self.live_registrations().items()}

    def live_registrations(self) -> dict[int, BrokerRegistration]:
        """node id -> what every live broker registered."""
        def once() -> dict[int, BrokerRegistration]:
            ids = [int(c) for c in self._client.get_children(BrokerIdsZNode.PATH) if c.isdigit()]
            pending = [(i, self._client.get_async(BrokerIdZNode.path(i))) for i in ids]
            brokers: dict[int, BrokerRegistration] = {}
            for node_id, result in pending:
                try:
                    data, _ = result.get()
                    registration = BrokerIdZNode.decode(node_id, data)
                except NoNodeError:
                    continue  # left between the list and the read
                except ValueError as exc:
                    log.warning("ignoring broker %d: %s", node_id, exc)
                    continue
                brokers[node_id] = registration
            return brokers

        result: dict[int, BrokerRegistration] = self._call(once)
        return result

    def watch_brokers(self, fn: Watcher) -> None:
        ChildrenWatch(self._client, BrokerIdsZNode.PATH, func=lambda _children: _notify(fn))

    # ------------------------------------------------------------------ election
    def campaign(self, node_id: int, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            if self._closed.is_set():
                raise CoordinationUnavailable("the coordination backend is closed")
            wake = threading.Event()
            with self._mutex:
                self._waiters.add(wake)
            try:
                epoch = self._try_to_win(node_id)
                if epoch is not None:
                    log.info("coordinator: node %d won, epoch %d", node_id, epoch)
                    return epoch
                # Lost: sleep until the coordinator znode changes (or our connection does).
                stat = self._call(self._client.exists, CoordinatorZNode.PATH, watch=lambda _event: wake.set())
                if stat is None:
                    continue  # already gone: run again at once
                if deadline is None:
                    wake.wait()
                elif not wake.wait(max(0.0, deadline - time.monotonic())):
                    raise TimeoutError(f"node {node_id} is still not the coordinator after {timeout} s")
            finally:
                with self._mutex:
                    self._waiters.discard(wake)

    def _try_to_win(self, node_id: int) -> int | None:
        """One round of the election; our new epoch, or None if another process holds it."""
        epoch, version = self._read_epoch_for_update()
        coordinator_data = CoordinatorZNode.encode(node_id)
        epoch_data = CoordinatorEpochZNode.encode(epoch + 1)

        def build(tx: TransactionRequest) -> None:
            tx.create(CoordinatorZNode.PATH, coordinator_data, ephemeral=True)
            tx.set_data(CoordinatorEpochZNode.PATH, epoch_data, version=version)

        results = transact(self._client, self._retry, build)
        failed = failure(results)
        if failed is None:
            self._set_fence(epoch + 1, results[1].version)
            return epoch + 1
        if isinstance(failed[1], (NodeExistsError, BadVersionError)):
            return self._win_again_if_ours(node_id)
        raise failed[1]

    def _read_epoch_for_update(self) -> tuple[int, int]:
        while True:
            try:
                data, stat = self._call(self._client.get, CoordinatorEpochZNode.PATH)
                return CoordinatorEpochZNode.decode(data), stat.version
            except NoNodeError:
                pass
            try:
                self._call(self._client.create, CoordinatorEpochZNode.PATH, CoordinatorEpochZNode.encode(0))
            except NodeExistsError:
                pass  # another campaigner created it first: read theirs

    def _win_again_if_ours(self, node_id: int) -> int | None:
        """A new epoch if the coordinator znode belongs to our session, else None.

        Our session holds it when this process resumed the session of a predecessor that
        died (or when our own win's answer was lost). It is won again, with a new epoch, so
        whatever the predecessor still had in flight carries an older one and is fenced:
        in one transaction the znode is deleted and created again and the epoch bumped, so
        both still change in the same zxid (``coordinator()`` relies on it)."""
        try:
            _, coordinator_stat = self._call(self._client.get, CoordinatorZNode.PATH)
        except NoNodeError:
            return None
        if coordinator_stat.ephemeralOwner != self.session_id():
            return None
        epoch, version = self._read_epoch_for_update()
        with self._mutex:
            fence = self._fence
        if fence is not None and fence == (epoch, version):
            return epoch  # this process won already and still is the coordinator: the same epoch

        def build(tx: TransactionRequest) -> None:
            tx.delete(CoordinatorZNode.PATH, version=coordinator_stat.version)
            tx.create(CoordinatorZNode.PATH, CoordinatorZNode.encode(node_id), ephemeral=True)
            tx.set_data(CoordinatorEpochZNode.PATH, CoordinatorEpochZNode.encode(epoch + 1), version=version)

        results = transact(self._client, self._retry, build)
        if failure(results) is not None:
            return None  # changed meanwhile: the caller's next round looks again
        self._set_fence(epoch + 1, results[2].version)
        return epoch + 1

    def _set_fence(self, epoch: int, version: int) -> None:
        with self._mutex:
            self._fence = (epoch, version)

    def is_coordinator(self) -> bool:
        """True from a won campaign until resign(), close() or the session's loss."""
        return self._fence is not None

    def resign(self) -> None:
        with self._mutex:
            self._fence = None
        try:
            _, stat = self._call(self._client.get, CoordinatorZNode.PATH)
        except NoNodeError:
            return
        if stat.ephemeralOwner != self.session_id():
            return  # not ours: never delete another process's win
        try:
            self._call(self._client.delete, CoordinatorZNode.PATH, version=stat.version)
        except (NoNodeError, BadVersionError):
            pass

    def coordinator(self) -> tuple[int, int] | None:
        pair: tuple[int, int] | None = None
        for _ in range(_CONSISTENT_READ_TRIES):
            try:
                data, coordinator_stat = self._call(self._client.get, CoordinatorZNode.PATH)
            except NoNodeError:
                return None
            try:
                epoch_data, epoch_stat = self._call(self._client.get, CoordinatorEpochZNode.PATH)
            except NoNodeError:
                return CoordinatorZNode.decode(data), 0
            pair = CoordinatorZNode.decode(data), CoordinatorEpochZNode.decode(epoch_data)
            # Written by one transaction, so one zxid: a mismatch means an election
            # happened between our two reads, and the pair would be torn.
            if coordinator_stat.czxid == epoch_stat.mzxid:
                return pair
        return pair

    def current_epoch(self) -> int:
        try:
            data, _ = self._call(self._client.get, CoordinatorEpochZNode.PATH)
        except NoNodeError:
            return 0
        return CoordinatorEpochZNode.decode(data)

    def watch_coordinator(self, fn: Watcher) -> None:
        DataWatch(self._client, CoordinatorZNode.PATH, func=lambda _data, _stat: _notify(fn))

    # ------------------------------------------------------------------ registry
    def topics(self) -> ZooKeeperTopicRegistry:
        return self._topics

    def watch_topics(self, fn: Watcher) -> None:
        """``fn()`` once now and whenever the registry's watches mark a topic (or the list)
        changed; the next ``topics().refresh()`` reads it."""
        with self._mutex:
            self._topic_watchers.append(fn)
            self._topics.on_dirty = self._topics_dirty
        _notify(fn)

    def _topics_dirty(self) -> None:
        with self._mutex:
            watchers = list(self._topic_watchers)
        for fn in watchers:
            _notify(fn)

    # ------------------------------------------------------------------ group mirror (coordinator only)
    def _fenced(self, ops: list[tuple[str, str, bytes]]) -> None:
        """Run ``ops`` ("create" | "set" | "delete", path, data) in transactions that each
        also check we are still the coordinator; NotCoordinator if not."""
        fence = self._fence
        if fence is None:
            raise NotCoordinator(f"node {self.node_id} is not the coordinator")
        epoch, version = fence
        chunks = [ops[i:i + MAX_OPS_PER_TRANSACTION] for i in range(0, len(ops), MAX_OPS_PER_TRANSACTION)] or [[]]
        for chunk in chunks:
            def build(tx: TransactionRequest, chunk: list[tuple[str, str, bytes]] = chunk) -> None:
                tx.check(CoordinatorZNode.PATH, -1)
                tx.check(CoordinatorEpochZNode.PATH, version)
                for op, path, data in chunk:
                    if op == "create":
                        tx.create(path, data)
                    elif op == "set":
                        tx.set_data(path, data)
                    else:
                        tx.delete(path)

            failed = failure(transact(self._client, self._retry, build))
            if failed is None:
                continue
            if failed[0] < 2:
                with self._mutex:
                    if self._fence == fence:
                        self._fence = None
                raise NotCoordinator(f"node {self.node_id} lost the coordinator role of epoch {epoch}")
            raise failed[1]

    def _missing_parents(self, group: str, root: str) -> list[tuple[str, str, bytes]]:
        """Creates for /consumers/<group> and ``root`` when missing, to run inside the
        fenced transaction (a deposed coordinator must not create them either)."""
        if self._call(self._client.exists, root) is not None:
            return []
        ops: list[tuple[str, str, bytes]] = []
        if self._call(self._client.exists, GroupZNode.path(group)) is None:
            ops.append(("create", GroupZNode.path(group), b""))
        ops.append(("create", root, b""))
        return ops

    def _replace(self, compute: Callable[[], list[tuple[str, str, bytes]]]) -> None:
        """Compute the ops from what is there and run them fenced; if a concurrent write
        of ours to the same group moved things meanwhile, compute again."""
        for _ in range(_CONSISTENT_READ_TRIES):
            try:
                self._fenced(compute())
                return
            except (NodeExistsError, NoNodeError, NotEmptyError):
                continue
        self._fenced(compute())

    def write_group_members(self, group: str, members: Mapping[str, bytes]) -> None:
        self._replace(lambda: self._member_ops(group, members))

    def _member_ops(self, group: str, members: Mapping[str, bytes]) -> list[tuple[str, str, bytes]]:
        root = GroupZNode.ids_path(group)
        ops = self._missing_parents(group, root)
        existing = set() if ops else set(self._call(self._client.get_children, root))
        wanted = {znode_name(member): data for member, data in members.items()}
        ops += [("delete", f"{root}/{name}", b"") for name in sorted(existing - set(wanted))]
        ops += [("set" if name in existing else "create", GroupMemberZNode.path(group, member), data)
                for member, data in members.items() for name in [znode_name(member)]]
        return ops

    def write_group_owners(self, group: str, owners: Mapping[tuple[str, int], str]) -> None:
        self._replace(lambda: self._owner_ops(group, owners))

    def _owner_ops(self, group: str, owners: Mapping[tuple[str, int], str]) -> list[tuple[str, str, bytes]]:
        root = GroupZNode.owners_path(group)
        ops = self._missing_parents(group, root)
        existing: dict[str, set[str]] = {}
        for topic in [] if ops else self._call(self._client.get_children, root):
            existing[topic] = set(self._call(self._client.get_children, f"{root}/{topic}"))
        wanted: dict[str, dict[str, str]] = {}
        for (topic, partition), member in owners.items():
            wanted.setdefault(topic, {})[str(partition)] = member
        # Deletes first (partitions before their topic node), then creates (topic first).
        for topic, partitions in sorted(existing.items()):
            keep = wanted.get(topic, {})
            ops += [("delete", f"{root}/{topic}/{p}", b"") for p in sorted(partitions - set(keep))]
            if topic not in wanted:
                ops.append(("delete", f"{root}/{topic}", b""))
        for topic, partitions_wanted in sorted(wanted.items()):
            if topic not in existing:
                ops.append(("create", GroupOwnerZNode.topic_path(group, topic), b""))
            have = existing.get(topic, set())
            for p, member in sorted(partitions_wanted.items()):
                ops.append(("set" if p in have else "create", f"{root}/{topic}/{p}", GroupOwnerZNode.encode(member)))
        return ops

    def delete_group(self, group: str) -> None:
        self._fenced([])  # only the coordinator deletes; the recursive delete itself is not atomic
        self._call(self._client.delete, GroupZNode.path(group), recursive=True)


def _notify(fn: Watcher) -> None:
    """Run a user's watch callback on kazoo's thread; a failure must not kill the watch."""
    try:
        fn()
    except Exception:
        log.exception("watch callback failed")
