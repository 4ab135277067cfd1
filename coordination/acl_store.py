"""The store of ACLs: in ZooKeeper where Apache Kafka's AclAuthorizer keeps them, or in a file.

The model and the byte formats are coordination/acls.py's; this module only reads and writes.

ZooKeeper, exactly as Kafka's ZooKeeper-mode AclAuthorizer (kafka.security.authorizer,
2.0-3.x) and kafka.zk.ZkData lay them out, relative to the chroot::

    /kafka-acl/<ResourceType>/<name>                    LITERAL ACLs of one resource
    /kafka-acl-extended/prefixed/<ResourceType>/<name>  PREFIXED ACLs of one resource
        {"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow","operation":"Read","host":"*"}]}
    /kafka-acl-changes/acl_changes_<10 digits>          persistent sequential, "TOPIC:orders"
    /kafka-acl-extended-changes/acl_changes_<10 digits> persistent sequential,
        {"version":1,"resourceType":"TOPIC","name":"app-","patternType":"PREFIXED"}

* ``<ResourceType>`` is the PascalCase name (Topic, Group, Cluster, TransactionalId,
  DelegationToken, User); the resource name is the znode name, unescaped.
* One znode per resource pattern holds all of its ACLs. Changing them is AclAuthorizer's
  updateResourceAcls: read the znode and its version, write the new set conditionally on that
  version (create it when absent; delete it when no ACL remains, Kafka never leaves an empty
  list), and after a lost race (BadVersion, NodeExists, NoNode) read again and retry.
* Then a change notification in the store's change root (literal or extended), which is how
  Kafka brokers learn that a resource's ACLs changed. Kafka writes it as a second request;
  here it goes in the same transaction as the ACL write, so no change is ever left
  unannounced and a failed write announces nothing. A request that changes nothing writes
  nothing and announces nothing (as Kafka, which only notifies when the set changed).
* The paths of KafkaZkClient.createAclPaths (``zk_acl_paths``) are created when missing.
* Kafka brokers purge notifications older than 15 minutes; this store never deletes them.

The single-machine backend keeps one file, replaced atomically (tmp file with mode 0600,
fsync, rename, fsync of the directory)::

    <data_dir>/acls.json       {"version":1,"acls":[{"resourceType":"TOPIC","name":"orders","patternType":"LITERAL",
                                "principal":"User:alice","host":"*","operation":"Read","permissionType":"Allow"}]}
    <data_dir>/acls.json.lock  empty; an flock on it serializes read-modify-write between processes

(resourceType and patternType spelt as in Kafka's extended change events, operation and
permissionType as in its ACL znodes.)

Writes: ``add`` refuses (ValueError, nothing written) a batch holding a binding that
``validate_binding`` rejects; ``remove`` ignores bindings whose resource pattern could have no
znode, since they cannot be present (ZooKeeper; the file store just finds them absent).
Batches are applied resource by resource (as Kafka), not atomically.

Watches: ``watch(fn)`` calls ``fn()`` once at registration and again whenever something may
have changed; ``fn`` must not block (ZooKeeper: it runs on kazoo's threads; file: on the
store's polling thread) and should only mark the caller's copy stale.
"""

from __future__ import annotations

import dataclasses
import fcntl
import logging
import os
import threading
from typing import Any, Callable, Iterable, Protocol, TypeVar

import orjson
from kazoo.client import KazooClient, KazooState, TransactionRequest
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError
from kazoo.recipe.watchers import ChildrenWatch

from coordination.acls import (
    ZK_EXTENDED_CHANGES,
    ZK_LITERAL_CHANGES,
    AclBinding,
    Operation,
    PatternType,
    Permission,
    ResourceType,
    change_notification,
    decode_acl_node,
    encode_acl_node,
    operation_from_name,
    pascal_case,
    permission_from_name,
    resource_type_from_name,
    validate_binding,
    zk_acl_paths,
    zk_type_path,
    znode_path,
)
from coordination.credentials import CallWrapper
from coordination.zookeeper_topics import failure
from storage import files

log = logging.getLogger(__name__)
T = TypeVar("T")

FILE_NAME = "acls.json"
FILE_VERSION = 1
FILE_MODE = 0o600
WATCH_INTERVAL = 0.25

# Lost races in a row on one resource before giving up (a livelock, not load).
MAX_CONFLICTS = 100

PATTERN_TYPES = (PatternType.LITERAL, PatternType.PREFIXED)  # the two stores


def _has_zk_path(resource_type: ResourceType) -> bool:
    try:
        zk_type_path(resource_type, PatternType.LITERAL)
    except ValueError:
        return False
    return True


# AclEntry.RESOURCE_TYPES: the types with a node in each store.
STORED_RESOURCE_TYPES = tuple(rt for rt in ResourceType if _has_zk_path(rt))

Watcher = Callable[[], None]
Pattern = tuple[ResourceType, PatternType, str]


class AclStore(Protocol):
    def all(self) -> list[AclBinding]:
        """Every stored ACL, literal and prefixed, sorted."""
        ...

    def add(self, bindings: Iterable[AclBinding]) -> list[AclBinding]:
        """The bindings newly added (those already present are not errors), in input order."""
        ...

    def remove(self, bindings: Iterable[AclBinding]) -> list[AclBinding]:
        """The bindings that were present and are now gone, in input order."""
        ...

    def watch(self, fn: Watcher) -> None:
        ...

    def close(self) -> None:
        ...


class ConcurrentAclChanges(RuntimeError):
    """Other writers kept changing the same resource faster than we could read and write."""


def _notify(fn: Watcher) -> None:
    """A watcher failing must not kill the watch (nor kazoo's thread)."""
    try:
        fn()
    except Exception:
        log.exception("ACL watcher failed")


def _direct(fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    return fn(*args, **kwargs)


def _unique(bindings: Iterable[AclBinding]) -> list[AclBinding]:
    return list(dict.fromkeys(bindings))


def _checked(bindings: Iterable[AclBinding]) -> list[AclBinding]:
    """The bindings, deduplicated; ValueError for the first that cannot be stored."""
    unique = _unique(bindings)
    for binding in unique:
        if not isinstance(binding, AclBinding):
            raise TypeError(f"expected an AclBinding, got {binding!r}")
        error = validate_binding(binding)
        if error is not None:
            raise ValueError(f"cannot store {binding}: {error.message}")
    return unique


def _removable(binding: AclBinding) -> bool:
    """Whether the binding's resource pattern has a znode it could be in. Its entry is not
    checked: an ACL Kafka wrote with an operation we do not know (read as UNKNOWN) can still
    be removed; nor is the CLUSTER name (a hand-written /kafka-acl/Cluster/other can go too)."""
    if binding.pattern_type not in PATTERN_TYPES or binding.resource_type not in STORED_RESOURCE_TYPES:
        return False
    # validate_binding's name checks (no "/", ".", "..", nor what ZooKeeper refuses in a path) on a
    # binding whose other fields are known to be good.
    probe = dataclasses.replace(binding, resource_type=ResourceType.TOPIC, principal="User:probe", host="*",
                                operation=Operation.READ, permission=Permission.ALLOW)
    return validate_binding(probe) is None


def _by_pattern(bindings: Iterable[AclBinding]) -> dict[Pattern, list[AclBinding]]:
    groups: dict[Pattern, list[AclBinding]] = {}
    for binding in bindings:
        groups.setdefault(binding.pattern, []).append(binding)
    return groups


# ----------------------------------------------------------------------------- ZooKeeper
class ZooKeeperAcls:
    """AclStore over a started KazooClient (not owned: close() leaves it running).

    ``call`` runs every ZooKeeper request (pass the backend's retrying ``_call``); by
    default requests are made directly. Methods block: use an executor from asyncio."""

    def __init__(self, client: KazooClient, call: CallWrapper | None = None) -> None:
        self._client = client
        self._call: CallWrapper = call if call is not None else _direct
        self._mutex = threading.Lock()
        self._watch_lock = threading.Lock()
        self._watchers: list[Watcher] = []
        self._watching = False
        self._closed = False
        self._paths_ready = False
        self._session_lost = False

    # ------------------------------------------------------------------ reads
    def all(self) -> list[AclBinding]:
        """Every ACL of both stores; an unreadable znode is logged and skipped rather than
        hiding every other resource's ACLs."""
        def once() -> list[AclBinding]:
            listings = [(rt, pt, self._client.get_children_async(zk_type_path(rt, pt)))
                        for pt in PATTERN_TYPES for rt in STORED_RESOURCE_TYPES]
            reads = []
            for rt, pt, listing in listings:
                try:
                    names = listing.get()
                except NoNodeError:
                    continue
                for name in sorted(names):
                    try:
                        path = znode_path(rt, pt, name)
                    except ValueError as exc:
                        log.warning("ignoring ACL znode %s/%s: %s", zk_type_path(rt, pt), name, exc)
                        continue
                    reads.append((rt, pt, name, path, self._client.get_async(path)))
            found: list[AclBinding] = []
            for rt, pt, name, path, result in reads:
                try:
                    data, _ = result.get()
                    found.extend(decode_acl_node(rt, pt, name, data))
                except NoNodeError:
                    continue  # deleted between the listing and the read
                except ValueError as exc:
                    log.warning("ignoring the ACLs of %s: %s", path, exc)
            return sorted(found)

        return self._call(once)

    # ------------------------------------------------------------------ writes
    def add(self, bindings: Iterable[AclBinding]) -> list[AclBinding]:
        wanted = _checked(bindings)
        added: set[AclBinding] = set()
        for pattern, group in _by_pattern(wanted).items():
            added.update(self._change(pattern, group, adding=True))
        return [b for b in wanted if b in added]

    def remove(self, bindings: Iterable[AclBinding]) -> list[AclBinding]:
        wanted = [b for b in _unique(bindings) if _removable(b)]
        removed: set[AclBinding] = set()
        for pattern, group in _by_pattern(wanted).items():
            removed.update(self._change(pattern, group, adding=False))
        return [b for b in wanted if b in removed]

    def _change(self, pattern: Pattern, group: list[AclBinding], adding: bool) -> list[AclBinding]:
        """Kafka's updateResourceAcls for one resource: read the znode, add or remove
        ``group``, write back conditionally with a change notification. After a lost race,
        if nothing is left to do, the previous attempt's bindings are reported (our own
        commit whose answer was lost to a connection drop and retried by ``call``, or an
        identical concurrent write)."""
        resource_type, pattern_type, name = pattern
        path = znode_path(resource_type, pattern_type, name)
        notify_path, notification = change_notification(resource_type, pattern_type, name)
        self._ensure_paths()
        conflicts = 0
        pending: list[AclBinding] = []
        while True:
            try:
                data, stat = self._call(self._client.get, path)
                current = set(decode_acl_node(resource_type, pattern_type, name, data))
                version: int | None = stat.version
            except NoNodeError:
                current, version = set(), None
            changing = [b for b in group if (b not in current) == adding]
            if not changing:
                return pending if conflicts else []
            pending = changing
            remaining = (current | set(changing)) if adding else (current - set(changing))
            payload = encode_acl_node(remaining)

            def build(tx: TransactionRequest, version: int | None = version, payload: bytes = payload,
                      empty: bool = not remaining) -> None:
                if version is None:
                    tx.create(path, payload)
                elif empty:
                    tx.delete(path, version=version)  # as Kafka: no znode with an empty list
                else:
                    tx.set_data(path, payload, version=version)
                tx.create(notify_path, notification, sequence=True)

            failed = failure(self._call(self._commit, build))
            if failed is None:
                return pending
            index, error = failed
            if isinstance(error, NoNodeError) and (version is None or index == 1):
                self._paths_ready = False  # a type node or a change root went away
                self._ensure_paths()
            elif not isinstance(error, (BadVersionError, NodeExistsError, NoNodeError)):
                raise error
            conflicts += 1
            if conflicts >= MAX_CONFLICTS:
                raise ConcurrentAclChanges(f"{path}: {conflicts} concurrent changes in a row; giving up")

    def _commit(self, build: Callable[[TransactionRequest], None]) -> list[Any]:
        tx = self._client.transaction()
        build(tx)
        return list(tx.commit())

    def _ensure_paths(self) -> None:
        """KafkaZkClient.createAclPaths."""
        if self._paths_ready:
            return
        for path in zk_acl_paths():
            self._call(self._client.ensure_path, path)
        self._paths_ready = True

    # ------------------------------------------------------------------ watches
    def watch(self, fn: Watcher) -> None:
        """``fn()`` now, then whenever a change notification appears in either change root
        (or old ones are purged), or the session was lost and is back (watches could have
        missed changes meanwhile). Runs on kazoo's threads."""
        with self._watch_lock:  # a second watch() waits until the watches are armed
            with self._mutex:
                if self._closed:
                    raise RuntimeError("the ACL store is closed")
                self._watchers.append(fn)
                start = not self._watching
            if start:
                self._start_watching()
        _notify(fn)

    def _start_watching(self) -> None:
        self._ensure_paths()
        # ChildrenWatch calls back at once from this thread; those first calls are
        # swallowed (``armed``), and watch()'s own call of fn stands for them: whatever
        # changed once the watches were set is seen by what that call makes the caller read.
        armed = threading.Event()

        def on_children(_children: list[str]) -> bool | None:
            if self._closed:
                return False  # unregisters the watch
            if armed.is_set():
                self._fire()
            return None

        ChildrenWatch(self._client, ZK_LITERAL_CHANGES, func=on_children)
        ChildrenWatch(self._client, ZK_EXTENDED_CHANGES, func=on_children)
        self._client.add_listener(self._on_state)
        with self._mutex:
            self._watching = True
        armed.set()

    def _on_state(self, state: str) -> None:
        # kazoo's connection thread: bookkeeping and news only.
        if state == KazooState.LOST:
            self._session_lost = True
        elif state == KazooState.CONNECTED and self._session_lost:
            self._session_lost = False
            self._fire()

    def _fire(self) -> None:
        with self._mutex:
            watchers = [] if self._closed else list(self._watchers)
        for fn in watchers:
            _notify(fn)

    def close(self) -> None:
        """Stop calling watchers (the client stays as it is: it is not ours)."""
        with self._mutex:
            self._closed = True
            self._watchers.clear()
            watching = self._watching
        if watching:
            self._client.remove_listener(self._on_state)


# ----------------------------------------------------------------------------- local file
def _encode_binding(binding: AclBinding) -> dict[str, str]:
    return {
        "resourceType": ResourceType(binding.resource_type).name,
        "name": binding.resource_name,
        "patternType": PatternType(binding.pattern_type).name,
        "principal": binding.principal,
        "host": binding.host,
        "operation": pascal_case(binding.operation.name),
        "permissionType": pascal_case(binding.permission.name),
    }


def _decode_binding(path: str, item: object) -> AclBinding:
    if not isinstance(item, dict):
        raise ValueError(f"{path}: expected an ACL object, got {item!r}")
    try:
        fields = {key: item[key] for key in ("resourceType", "name", "patternType", "principal", "host", "operation",
                                             "permissionType")}
    except KeyError as exc:
        raise ValueError(f"{path}: ACL {item!r} lacks {exc.args[0]!r}") from None
    if not all(isinstance(value, str) for value in fields.values()):
        raise ValueError(f"{path}: ACL {item!r}: every field must be a string")
    resource_type = resource_type_from_name(fields["resourceType"])
    pattern_type = PatternType.__members__.get(fields["patternType"].upper(), PatternType.UNKNOWN)
    if resource_type not in STORED_RESOURCE_TYPES or pattern_type not in PATTERN_TYPES:
        raise ValueError(f"{path}: ACL {item!r}: unknown resource or pattern type")
    return AclBinding(resource_type, fields["name"], pattern_type, fields["principal"], fields["host"],
                      operation_from_name(fields["operation"]), permission_from_name(fields["permissionType"]))


class LocalAcls:
    """AclStore in ``<data_dir>/acls.json``. Thread- and process-safe."""

    def __init__(self, data_dir: str) -> None:
        self.data_dir = data_dir
        self.path = os.path.join(data_dir, FILE_NAME)
        self._lock_path = self.path + ".lock"
        self._mutex = threading.Lock()
        self._closed = threading.Event()
        self._watchers: list[Watcher] = []
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ reads
    def all(self) -> list[AclBinding]:
        return sorted(self._read())

    def _read(self) -> set[AclBinding]:
        try:
            with open(self.path, "rb") as handle:
                data = handle.read()
        except FileNotFoundError:
            return set()
        try:
            doc = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise ValueError(f"{self.path}: not JSON: {data[:200]!r}") from exc
        acls = doc.get("acls") if isinstance(doc, dict) else None
        if not isinstance(acls, list):
            raise ValueError(f"{self.path}: expected {{\"version\":1,\"acls\":[...]}}, got {data[:200]!r}")
        return {_decode_binding(self.path, item) for item in acls}

    # ------------------------------------------------------------------ writes
    def add(self, bindings: Iterable[AclBinding]) -> list[AclBinding]:
        wanted = _checked(bindings)

        def change(acls: set[AclBinding]) -> list[AclBinding]:
            added = [b for b in wanted if b not in acls]
            acls.update(added)
            return added

        return self._change(change)

    def remove(self, bindings: Iterable[AclBinding]) -> list[AclBinding]:
        wanted = _unique(bindings)

        def change(acls: set[AclBinding]) -> list[AclBinding]:
            removed = [b for b in wanted if b in acls]
            acls.difference_update(removed)
            return removed

        return self._change(change)

    def _change(self, change: Callable[[set[AclBinding]], list[AclBinding]]) -> list[AclBinding]:
        os.makedirs(self.data_dir, exist_ok=True)
        with self._mutex:
            fd = os.open(self._lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, FILE_MODE)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)  # released by the close below
                acls = self._read()
                changed = change(acls)
                if changed:
                    self._write(acls)
                return changed
            finally:
                os.close(fd)

    def _write(self, acls: set[AclBinding]) -> None:
        data = orjson.dumps({"version": FILE_VERSION, "acls": [_encode_binding(b) for b in sorted(acls)]},
                            option=orjson.OPT_INDENT_2)
        tmp = f"{self.path}.{os.getpid()}.{threading.get_ident()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, FILE_MODE)
        try:
            try:
                os.fchmod(fd, FILE_MODE)  # whatever the umask, and a stale tmp file's mode
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, self.path)
        except BaseException:
            try:
                os.unlink(tmp)
            except FileNotFoundError:
                pass
            raise
        files.fsync_dir(self.data_dir)

    # ------------------------------------------------------------------ watches
    def watch(self, fn: Watcher) -> None:
        """``fn()`` now, then within 250 ms of each change of the file (its inode, mtime or
        size), from the store's one daemon thread."""
        with self._mutex:
            if self._closed.is_set():
                raise RuntimeError("the ACL store is closed")
            self._watchers.append(fn)
            if self._thread is None:
                baseline = self._stamp()
                self._thread = threading.Thread(target=self._poll, args=(baseline,), name="castle-acls-watch",
                                                daemon=True)
                self._thread.start()
        _notify(fn)

    def _stamp(self) -> tuple[int, int, int]:
        """(mtime_ns, size, inode) of the file; zeros while it does not exist."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return 0, 0, 0
        return st.st_mtime_ns, st.st_size, st.st_ino

    def _poll(self, last: tuple[int, int, int]) -> None:
        while not self._closed.wait(WATCH_INTERVAL):
            try:
                now = self._stamp()
            except OSError as exc:
                log.warning("ACL watch: %s: %s", self.path, exc)
                continue
            if now == last:
                continue
            last = now
            with self._mutex:
                watchers = list(self._watchers)
            for fn in watchers:
                _notify(fn)

    def close(self) -> None:
        """Stop the watch thread (waits for it, unless called from a watcher)."""
        with self._mutex:
            self._closed.set()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5.0)
