"""The store of SCRAM credentials: in ZooKeeper where Apache Kafka keeps them, or in a file.

Values are opaque here: user -> mechanism ("SCRAM-SHA-256" / "SCRAM-SHA-512") -> Kafka's
credential string ("salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=<n>", Kafka's
ScramCredentialUtils.credentialToString); parsing and checking them is the caller's job.

ZooKeeper, exactly as Kafka in ZooKeeper mode (2.x-3.x) writes them (kafka.zk.ZkData
ConfigEntityZNode / ConfigEntityChangeNotificationSequenceZNode, KafkaZkClient
setOrCreateEntityConfigs / createConfigChangeNotification, ZkAdminManager
alterUserScramCredentials), relative to the chroot::

    /config/users/<sanitized user>       {"version":1,"config":{"SCRAM-SHA-256":"salt=...,iterations=4096",
                                                                 "producer_byte_rate":"1024", ...}}
    /config/changes/config_change_<10-digit sequence>   persistent sequential,
                                          {"version":2,"entity_path":"users/<sanitized user>"}

* ``<sanitized user>`` is Kafka's Sanitizer.sanitize: java.net.URLEncoder (UTF-8) with "*"
  written "%2A" and " " written "%20", so only [A-Za-z0-9._-] stay as they are
  ("alice@EXAMPLE.COM" -> "alice%40EXAMPLE.COM", "~" -> "%7E"); read back with
  Sanitizer.desanitize (URL decoding, "+" is a space). ZkAdminManager applies it to SCRAM
  users as to quota users, and the brokers' UserConfigHandler desanitizes the entity name
  before updating its credential cache. The entity "<default>" (unsanitized, the default
  quota entity) never carries credentials and is skipped.
* The user's znode holds the user's whole config: quotas ("producer_byte_rate",
  "consumer_byte_rate", "request_percentage", ...) sit next to the SCRAM keys and are kept
  as they are when a SCRAM key is set or deleted.
* Kafka never deletes a user's config znode: removing the last key leaves
  {"version":1,"config":{}}; so does this store.
* After each change a notification is created, so Kafka brokers (and our watchers) notice.
  Here the config write and the notification are one transaction: conditional on the
  znode version read (or on the znode's absence), so concurrent writers never lose each
  other's keys; a lost race (BadVersion, NodeExists, NoNode) reads again and retries.

The single-machine backend keeps one file, written atomically (private tmp file with mode
0600, fsync, rename, fsync of the directory), since it holds salted keys::

    <data_dir>/scram-credentials.json       {"version":1,"users":{"alice":{"SCRAM-SHA-256":"salt=..."}}}
    <data_dir>/scram-credentials.json.lock  empty; an flock on it serializes read-modify-write
                                            between processes

Watches: ``watch(fn)`` calls ``fn()`` once at registration and again whenever something may
have changed; ``fn`` must not block (ZooKeeper: it runs on kazoo's threads; file: on the
store's polling thread) and should only mark the caller's copy stale.
"""

from __future__ import annotations

import fcntl
import logging
import os
import threading
from typing import Any, Callable, Mapping, Protocol, TypeVar
from urllib.parse import unquote_plus

import orjson
from kazoo.client import KazooClient, KazooState, TransactionRequest
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError
from kazoo.recipe.watchers import ChildrenWatch

from coordination.zookeeper_topics import failure
from storage import files

log = logging.getLogger(__name__)
T = TypeVar("T")

SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
SCRAM_KEY_PREFIX = "SCRAM-SHA-"

USERS_PATH = "/config/users"                     # ConfigEntityTypeZNode.path("users")
CHANGES_PATH = "/config/changes"                 # ConfigEntityChangeNotificationZNode.path
CHANGE_PREFIX = "config_change_"                 # ConfigEntityChangeNotificationSequenceZNode.SequenceNumberPrefix
USER_ENTITY_TYPE = "users"                       # ConfigType.User
DEFAULT_ENTITY = "<default>"                     # ConfigEntityName.Default
CONFIG_VERSION = 1
CHANGE_VERSION = 2

FILE_NAME = "scram-credentials.json"
FILE_VERSION = 1
FILE_MODE = 0o600
WATCH_INTERVAL = 0.25

# Lost races in a row before giving up (a livelock, not load).
MAX_CONFLICTS = 100

Credentials = dict[str, dict[str, str]]
Watcher = Callable[[], None]

# Java's URLEncoder leaves these alone; Kafka's Sanitizer then percent-encodes "*" too.
_SAFE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")


class CredentialStore(Protocol):
    def all(self) -> Credentials:
        """user -> mechanism -> credential string, for every user with a SCRAM credential."""
        ...

    def set(self, user: str, mechanism: str, credential: str) -> None:
        ...

    def delete(self, user: str, mechanism: str) -> bool:
        """False when the user had no credential for ``mechanism`` (nothing written)."""
        ...

    def watch(self, fn: Watcher) -> None:
        ...

    def close(self) -> None:
        ...


class CallWrapper(Protocol):
    """How the ZooKeeper store runs each request, e.g. ZooKeeperBackend._call (retries)."""

    def __call__(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        ...


class ConcurrentChanges(RuntimeError):
    """Other writers kept changing the same user faster than we could read and write."""


def sanitize(name: str) -> str:
    """Kafka's Sanitizer.sanitize: the user's znode name under /config/users."""
    out: list[str] = []
    for char in name:
        if char in _SAFE:
            out.append(char)
        else:
            try:
                encoded = char.encode("utf-8")
            except UnicodeEncodeError as exc:
                raise ValueError(f"user name {name!r} is not valid Unicode text") from exc
            out.extend(f"%{byte:02X}" for byte in encoded)
    return "".join(out)


def desanitize(name: str) -> str:
    """Kafka's Sanitizer.desanitize (URL decoding: "+" is a space)."""
    return unquote_plus(name, errors="strict")


def _check(user: str, mechanism: str) -> None:
    if not user:
        raise ValueError("the user name must not be empty")
    if mechanism not in SCRAM_MECHANISMS:
        raise ValueError(f"unknown SCRAM mechanism {mechanism!r}; expected one of {', '.join(SCRAM_MECHANISMS)}")


def _scram_only(config: Mapping[str, Any]) -> dict[str, str]:
    return {key: value for key, value in config.items() if key.startswith(SCRAM_KEY_PREFIX) and isinstance(value, str)}


def _notify(fn: Watcher) -> None:
    """A watcher failing must not kill the watch (nor kazoo's thread)."""
    try:
        fn()
    except Exception:
        log.exception("credential watcher failed")


def _direct(fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    return fn(*args, **kwargs)


# ----------------------------------------------------------------------------- ZooKeeper
class UserConfigZNode:
    """/config/users/<sanitized user>: Kafka's ConfigEntityZNode for the "users" type."""

    @staticmethod
    def path(user: str) -> str:
        name = sanitize(user)
        if name in (".", ".."):
            raise ValueError(f"user name {user!r} cannot be a znode name")
        return f"{USERS_PATH}/{name}"

    @staticmethod
    def encode(config: Mapping[str, Any]) -> bytes:
        return orjson.dumps({"version": CONFIG_VERSION, "config": dict(config)}, option=orjson.OPT_SORT_KEYS)

    @staticmethod
    def decode(path: str, data: bytes | None) -> dict[str, Any]:
        """The config object (values as found). Empty or null data is an empty config, as
        Kafka reads it; anything else unreadable raises ValueError naming the path."""
        if not data:
            return {}
        try:
            doc = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise ValueError(f"{path}: not JSON: {data[:200]!r}") from exc
        if doc is None:
            return {}
        if not isinstance(doc, dict):
            raise ValueError(f"{path}: expected a JSON object, got {data[:200]!r}")
        config = doc.get("config")
        if config is None:
            return {}
        if not isinstance(config, dict):
            raise ValueError(f"{path}: \"config\" is not an object: {data[:200]!r}")
        return config


class ConfigChangeZNode:
    """/config/changes/config_change_<seq>: Kafka's ConfigEntityChangeNotificationSequenceZNode."""

    CREATE_PATH = f"{CHANGES_PATH}/{CHANGE_PREFIX}"

    @staticmethod
    def encode_user(user: str) -> bytes:
        return orjson.dumps({"version": CHANGE_VERSION, "entity_path": f"{USER_ENTITY_TYPE}/{sanitize(user)}"})


class ZooKeeperCredentials:
    """CredentialStore over a started KazooClient (not owned: close() leaves it running).

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
        self._parents_ready = False
        self._session_lost = False

    # ------------------------------------------------------------------ reads
    def all(self) -> Credentials:
        """Every user's SCRAM keys (users without any are left out); an unreadable znode
        is logged and skipped rather than hiding every other user."""
        def once() -> Credentials:
            try:
                names = self._client.get_children(USERS_PATH)
            except NoNodeError:
                return {}
            pending = [(name, self._client.get_async(f"{USERS_PATH}/{name}")) for name in sorted(names)
                       if name != DEFAULT_ENTITY]
            found: Credentials = {}
            for name, result in pending:
                path = f"{USERS_PATH}/{name}"
                try:
                    data, _ = result.get()
                    scram = _scram_only(UserConfigZNode.decode(path, data))
                    user = desanitize(name)
                except NoNodeError:
                    continue  # deleted between the listing and the read
                except ValueError as exc:
                    log.warning("ignoring SCRAM credentials of %s: %s", path, exc)
                    continue
                if scram:
                    found[user] = scram
            return found

        return self._call(once)

    # ------------------------------------------------------------------ writes
    def set(self, user: str, mechanism: str, credential: str) -> None:
        _check(user, mechanism)

        def change(config: dict[str, Any]) -> bool:
            config[mechanism] = credential
            return True

        self._change(user, change, lambda config: config.get(mechanism) == credential)

    def delete(self, user: str, mechanism: str) -> bool:
        _check(user, mechanism)

        def change(config: dict[str, Any]) -> bool:
            return config.pop(mechanism, None) is not None

        return self._change(user, change, lambda config: mechanism not in config)

    def _change(self, user: str, change: Callable[[dict[str, Any]], bool], done: Callable[[dict[str, Any]], bool]) -> bool:
        """Read the user's config, ``change`` it in place (False: nothing to write), write it
        back conditionally with a change notification. After a lost race, ``done`` says
        whether what we wanted is there already (our own commit whose answer was lost to a
        connection drop, retried by ``call``, or an identical concurrent write)."""
        path = UserConfigZNode.path(user)
        notification = ConfigChangeZNode.encode_user(user)
        self._ensure_parents()
        conflicts = 0
        while True:
            try:
                data, stat = self._call(self._client.get, path)
                config = UserConfigZNode.decode(path, data)
                version: int | None = stat.version
            except NoNodeError:
                config, version = {}, None
            if conflicts and done(config):
                return True
            if not change(config):
                return False
            payload = UserConfigZNode.encode(config)

            def build(tx: TransactionRequest, version: int | None = version, payload: bytes = payload) -> None:
                if version is None:
                    tx.create(path, payload)
                else:
                    tx.set_data(path, payload, version=version)
                tx.create(ConfigChangeZNode.CREATE_PATH, notification, sequence=True)

            failed = failure(self._call(self._commit, build))
            if failed is None:
                return True
            index, error = failed
            if isinstance(error, NoNodeError) and (version is None or index == 1):
                self._parents_ready = False  # /config/users or /config/changes went away
                self._ensure_parents()
            elif not isinstance(error, (BadVersionError, NodeExistsError, NoNodeError)):
                raise error
            conflicts += 1
            if conflicts >= MAX_CONFLICTS:
                raise ConcurrentChanges(f"{path}: {conflicts} concurrent changes in a row; giving up")

    def _commit(self, build: Callable[[TransactionRequest], None]) -> list[Any]:
        tx = self._client.transaction()
        build(tx)
        return list(tx.commit())

    def _ensure_parents(self) -> None:
        if self._parents_ready:
            return
        self._call(self._client.ensure_path, USERS_PATH)
        self._call(self._client.ensure_path, CHANGES_PATH)
        self._parents_ready = True

    # ------------------------------------------------------------------ watches
    def watch(self, fn: Watcher) -> None:
        """``fn()`` now, then whenever a change notification appears (or Kafka purges old
        ones), a user znode is created or deleted, or the session was lost and is back
        (watches could have missed changes meanwhile). Runs on kazoo's threads."""
        with self._watch_lock:  # a second watch() waits until the watches are armed
            with self._mutex:
                if self._closed:
                    raise RuntimeError("the credential store is closed")
                self._watchers.append(fn)
                start = not self._watching
            if start:
                self._start_watching()
        _notify(fn)

    def _start_watching(self) -> None:
        self._ensure_parents()
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

        ChildrenWatch(self._client, CHANGES_PATH, func=on_children)
        ChildrenWatch(self._client, USERS_PATH, func=on_children)
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
class LocalCredentials:
    """CredentialStore in ``<data_dir>/scram-credentials.json``. Thread- and process-safe."""

    def __init__(self, data_dir: str) -> None:
        self.data_dir = data_dir
        self.path = os.path.join(data_dir, FILE_NAME)
        self._lock_path = self.path + ".lock"
        self._mutex = threading.Lock()
        self._closed = threading.Event()
        self._watchers: list[Watcher] = []
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ reads
    def all(self) -> Credentials:
        return {user: dict(mechanisms) for user, mechanisms in self._read().items() if mechanisms}

    def _read(self) -> Credentials:
        try:
            with open(self.path, "rb") as handle:
                data = handle.read()
        except FileNotFoundError:
            return {}
        try:
            doc = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise ValueError(f"{self.path}: not JSON: {data[:200]!r}") from exc
        users = doc.get("users") if isinstance(doc, dict) else None
        if not isinstance(users, dict):
            raise ValueError(f"{self.path}: expected {{\"version\":1,\"users\":{{...}}}}, got {data[:200]!r}")
        out: Credentials = {}
        for user, mechanisms in users.items():
            if not isinstance(mechanisms, dict):
                raise ValueError(f"{self.path}: user {user!r}: expected an object of mechanisms")
            out[user] = _scram_only(mechanisms)
        return out

    # ------------------------------------------------------------------ writes
    def set(self, user: str, mechanism: str, credential: str) -> None:
        _check(user, mechanism)

        def change(users: Credentials) -> bool:
            users.setdefault(user, {})[mechanism] = credential
            return True

        self._change(change)

    def delete(self, user: str, mechanism: str) -> bool:
        _check(user, mechanism)

        def change(users: Credentials) -> bool:
            mechanisms = users.get(user, {})
            if mechanisms.pop(mechanism, None) is None:
                return False
            if not mechanisms:
                del users[user]  # the file holds nothing else of a user's
            return True

        return self._change(change)

    def _change(self, change: Callable[[Credentials], bool]) -> bool:
        os.makedirs(self.data_dir, exist_ok=True)
        with self._mutex:
            fd = os.open(self._lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, FILE_MODE)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)  # released by the close below
                users = self._read()
                if not change(users):
                    return False
                self._write(users)
                return True
            finally:
                os.close(fd)

    def _write(self, users: Credentials) -> None:
        data = orjson.dumps({"version": FILE_VERSION, "users": {u: users[u] for u in sorted(users) if users[u]}},
                            option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS)
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
                raise RuntimeError("the credential store is closed")
            self._watchers.append(fn)
            if self._thread is None:
                baseline = self._stamp()
                self._thread = threading.Thread(target=self._poll, args=(baseline,), name="castle-credentials-watch",
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
                log.warning("credential watch: %s: %s", self.path, exc)
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
