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

import logging
from typing import Any, Callable, Mapping, Protocol
from urllib.parse import unquote_plus

import orjson
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from coordination.private_file import PrivateJsonFile
from coordination.watchers import Watcher
from coordination.zk_update import CallWrapper, Done, Write, ZnodeUpdater, direct
from coordination.zk_watch import ZkChangeWatch

log = logging.getLogger(__name__)

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

Credentials = dict[str, dict[str, str]]

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
        self._call: CallWrapper = call if call is not None else direct
        self._updater = ZnodeUpdater(client, self._call, (USERS_PATH, CHANGES_PATH), ConcurrentChanges)
        self._watch = ZkChangeWatch(client, (CHANGES_PATH, USERS_PATH), self._updater.ensure_parents, "credential", log)

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
        back conditionally with a change notification (coordination/zk_update.py). After a
        lost race, ``done`` says whether what we wanted is there already (our own commit
        whose answer was lost to a connection drop, retried by ``call``, or an identical
        concurrent write)."""
        path = UserConfigZNode.path(user)

        def plan(data: bytes | None, exists: bool, conflicts: int) -> Done[bool] | Write[bool]:
            config = UserConfigZNode.decode(path, data) if exists else {}
            if conflicts and done(config):
                return Done(True)
            if not change(config):
                return Done(False)
            return Write(UserConfigZNode.encode(config), True)

        return self._updater.update(path, ConfigChangeZNode.CREATE_PATH, ConfigChangeZNode.encode_user(user), plan)

    # ------------------------------------------------------------------ watches
    def watch(self, fn: Watcher) -> None:
        """``fn()`` now, then whenever a change notification appears (or Kafka purges old
        ones), a user znode is created or deleted, or the session was lost and is back
        (watches could have missed changes meanwhile). Runs on kazoo's threads."""
        self._watch.watch(fn)

    def close(self) -> None:
        """Stop calling watchers (the client stays as it is: it is not ours)."""
        self._watch.close()


# ----------------------------------------------------------------------------- local file
def _decode_file(path: str, doc: Any, data: bytes) -> Credentials:
    users = doc.get("users") if isinstance(doc, dict) else None
    if not isinstance(users, dict):
        raise ValueError(f"{path}: expected {{\"version\":1,\"users\":{{...}}}}, got {data[:200]!r}")
    out: Credentials = {}
    for user, mechanisms in users.items():
        if not isinstance(mechanisms, dict):
            raise ValueError(f"{path}: user {user!r}: expected an object of mechanisms")
        out[user] = _scram_only(mechanisms)
    return out


def _encode_file(users: Credentials) -> bytes:
    return orjson.dumps({"version": FILE_VERSION, "users": {u: users[u] for u in sorted(users) if users[u]}},
                        option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS)


class LocalCredentials:
    """CredentialStore in ``<data_dir>/scram-credentials.json`` (coordination/private_file.py).
    Thread- and process-safe."""

    def __init__(self, data_dir: str) -> None:
        self.data_dir = data_dir
        self._file = PrivateJsonFile(data_dir, FILE_NAME, decode=_decode_file, encode=_encode_file, empty=dict,
                                     what="credential", log=log)
        self.path = self._file.path

    # ------------------------------------------------------------------ reads
    def all(self) -> Credentials:
        return {user: dict(mechanisms) for user, mechanisms in self._file.read().items() if mechanisms}

    # ------------------------------------------------------------------ writes
    def set(self, user: str, mechanism: str, credential: str) -> None:
        _check(user, mechanism)

        def change(users: Credentials) -> bool:
            users.setdefault(user, {})[mechanism] = credential
            return True

        self._file.update(change)

    def delete(self, user: str, mechanism: str) -> bool:
        _check(user, mechanism)

        def change(users: Credentials) -> bool:
            mechanisms = users.get(user, {})
            if mechanisms.pop(mechanism, None) is None:
                return False
            if not mechanisms:
                del users[user]  # the file holds nothing else of a user's
            return True

        return self._file.update(change)

    # ------------------------------------------------------------------ watches
    def watch(self, fn: Watcher) -> None:
        """``fn()`` now, then within 250 ms of each change of the file (its inode, mtime or
        size), from the store's one daemon thread."""
        self._file.watch(fn)

    def close(self) -> None:
        """Stop the watch thread (waits for it, unless called from a watcher)."""
        self._file.close()
