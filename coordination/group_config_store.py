"""Where groups' config overrides are kept: in ZooKeeper in Kafka's config layout, or in a file.

ZooKeeper, in the layout Kafka uses for every config entity (kafka.zk.ZkData ConfigEntityZNode
and ConfigEntityChangeNotificationSequenceZNode), with the entity type Kafka names "groups"
(ConfigType.GROUP), relative to the chroot::

    /config/groups/<sanitized group>     {"version":1,"config":{"consumer.session.timeout.ms":"6000"}}
    /config/changes/config_change_<seq>  persistent sequential, {"version":2,"entity_path":"groups/<sanitized group>"}

* ``<sanitized group>`` is Kafka's Sanitizer (coordination/credentials.py ``sanitize``): a
  group id is free text and may hold "/", which a znode name cannot; "." and ".." get their
  first character escaped too ("%2E"), which Sanitizer.desanitize reads back.
* As for Kafka's other entities, a group whose last override is removed keeps its znode with
  an empty config; readers skip empty configs.
* The write and its change notification are one conditional transaction
  (coordination/zk_update.py), so concurrent writers never lose each other's keys.

The single-machine backend keeps one file (coordination/private_file.py: flocked
read-modify-write, atomic replace, polled for changes every 250 ms)::

    <data_dir>/group-configs.json        {"version":1,"groups":{"<group>":{"<name>":"<value>"}}}
    <data_dir>/group-configs.json.lock

Values are kept as the text the client sent (as Kafka keeps them); checking them is the
caller's job (coordination/group_config_keys.py ``validate``).
"""

from __future__ import annotations

import functools
import logging
from typing import Any, Callable, Protocol

import orjson
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from coordination.credentials import CHANGES_PATH, ConfigChangeZNode, UserConfigZNode, desanitize, sanitize
from coordination.private_file import PrivateJsonFile
from coordination.watchers import Watcher
from coordination.zk_update import CallWrapper, Done, Write, ZnodeUpdater, direct
from coordination.zk_watch import ZkChangeWatch

log = logging.getLogger(__name__)

GROUPS_PATH = "/config/groups"   # ConfigEntityTypeZNode.path(ConfigType.GROUP)
GROUP_ENTITY_TYPE = "groups"     # ConfigType.GROUP
CONFIG_VERSION = 1
CHANGE_VERSION = 2

FILE_NAME = "group-configs.json"
FILE_VERSION = 1

Overrides = dict[str, str]
Change = Callable[[Overrides], Overrides]  # a group's overrides -> its new overrides


class GroupConfigStore(Protocol):
    def all(self) -> dict[str, Overrides]:
        """group id -> its overrides, for every group with at least one."""
        ...

    def get(self, group_id: str) -> Overrides:
        ...

    def update(self, group_id: str, change: Change) -> Overrides:
        """Replace the group's overrides with ``change(current)`` (a locked or conditional
        read-modify-write: ``change`` may run more than once); the new overrides."""
        ...

    def watch(self, fn: Watcher) -> None:
        """``fn()`` now and whenever a group's overrides may have changed; must not block."""
        ...

    def close(self) -> None:
        ...


class ConcurrentChanges(RuntimeError):
    """Other writers kept changing the same group faster than we could read and write."""


def group_znode_name(group_id: str) -> str:
    name = sanitize(group_id)
    if name in (".", ".."):
        name = "%2E" + name[1:]
    return name


def _strings(path: str, config: dict[str, Any]) -> Overrides:
    out: Overrides = {}
    for key, value in config.items():
        if not isinstance(value, str):
            raise ValueError(f"{path}: the value of {key!r} is not a string")
        out[key] = value
    return out


# ----------------------------------------------------------------------------- ZooKeeper
class EntityConfigZNode:
    """/config/<entity type>/<znode name>: Kafka's ConfigEntityZNode for one entity type
    ("groups" here; "client-metrics" for coordination/client_metrics_store.py, "brokers" for
    coordination/broker_config_store.py). ``znode_name`` and ``name_of`` map an entity's name to
    its znode's and back (Kafka's Sanitizer by default)."""

    def __init__(self, entity_type: str, znode_name: Callable[[str], str] = group_znode_name,
                 name_of: Callable[[str], str] = desanitize) -> None:
        self.entity_type = entity_type
        self.root = f"/config/{entity_type}"
        self.znode_name = znode_name
        self.name_of = name_of

    def path(self, name: str) -> str:
        return f"{self.root}/{self.znode_name(name)}"

    @staticmethod
    def encode(config: Overrides) -> bytes:
        return orjson.dumps({"version": CONFIG_VERSION, "config": dict(config)}, option=orjson.OPT_SORT_KEYS)

    @staticmethod
    def decode(path: str, data: bytes | None) -> Overrides:
        return _strings(path, UserConfigZNode.decode(path, data))  # the same ConfigEntityZNode shape

    def change_notification(self, name: str) -> bytes:
        return orjson.dumps({"version": CHANGE_VERSION, "entity_path": f"{self.entity_type}/{self.znode_name(name)}"})


GroupConfigZNode = EntityConfigZNode(GROUP_ENTITY_TYPE)


class ZooKeeperGroupConfigs:
    """GroupConfigStore over a started KazooClient (not owned). ``call`` runs every request
    (the backend's retrying ``_call``). Methods block: use an executor from asyncio."""

    def __init__(self, client: KazooClient, call: CallWrapper | None = None,
                 znode: EntityConfigZNode = GroupConfigZNode, what: str = "group config") -> None:
        self._client = client
        self._call: CallWrapper = call if call is not None else direct
        self._znode = znode
        self._what = what
        root = znode.root
        self._updater = ZnodeUpdater(client, self._call, (root, CHANGES_PATH), ConcurrentChanges)
        self._watch = ZkChangeWatch(client, (CHANGES_PATH, root), self._updater.ensure_parents, what, log)

    def all(self) -> dict[str, Overrides]:
        """Every group's overrides; an unreadable znode is logged and skipped rather than
        hiding every other group's."""
        def once() -> dict[str, Overrides]:
            try:
                names = self._client.get_children(self._znode.root)
            except NoNodeError:
                return {}
            pending = [(name, self._client.get_async(f"{self._znode.root}/{name}")) for name in sorted(names)]
            found: dict[str, Overrides] = {}
            for name, result in pending:
                path = f"{self._znode.root}/{name}"
                try:
                    data, _ = result.get()
                    config = self._znode.decode(path, data)
                    group_id = self._znode.name_of(name)
                except NoNodeError:
                    continue  # deleted between the listing and the read
                except ValueError as exc:
                    log.warning("ignoring the %ss of %s: %s", self._what, path, exc)
                    continue
                if config:
                    found[group_id] = config
            return found

        return self._call(once)

    def get(self, group_id: str) -> Overrides:
        path = self._znode.path(group_id)
        try:
            data, _ = self._call(self._client.get, path)
        except NoNodeError:
            return {}
        return self._znode.decode(path, data)

    def update(self, group_id: str, change: Change) -> Overrides:
        path = self._znode.path(group_id)

        def plan(data: bytes | None, exists: bool, _conflicts: int) -> Done[Overrides] | Write[Overrides]:
            current = self._znode.decode(path, data) if exists else {}
            new = change(dict(current))
            if new == current and (exists or not new):
                return Done(new)
            return Write(self._znode.encode(new), new)

        return self._updater.update(path, ConfigChangeZNode.CREATE_PATH, self._znode.change_notification(group_id),
                                    plan)

    def watch(self, fn: Watcher) -> None:
        """``fn()`` now, then whenever a change notification appears, a group's znode is
        created or deleted, or a lost session is back. Runs on kazoo's threads."""
        self._watch.watch(fn)

    def close(self) -> None:
        self._watch.close()


# ----------------------------------------------------------------------------- local file
def _same(name: str) -> str:
    return name


def _decode_file(path: str, doc: Any, data: bytes, key: str = "groups",
                 name_of: Callable[[str], str] = _same) -> dict[str, Overrides]:
    groups = doc.get(key) if isinstance(doc, dict) else None
    if not isinstance(groups, dict):
        raise ValueError(f"{path}: expected {{\"version\":1,\"{key}\":{{...}}}}, got {data[:200]!r}")
    out: dict[str, Overrides] = {}
    for name, config in groups.items():
        if not isinstance(config, dict):
            raise ValueError(f"{path}: {key} entry {name!r}: expected an object of configs")
        out[name_of(name)] = _strings(path, config)
    return out


def _encode_file(groups: dict[str, Overrides], key: str = "groups", key_of: Callable[[str], str] = _same) -> bytes:
    return orjson.dumps({"version": FILE_VERSION, key: {key_of(g): groups[g] for g in sorted(groups) if groups[g]}},
                        option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS)


class LocalGroupConfigs:
    """GroupConfigStore in ``<data_dir>/group-configs.json``. Thread- and process-safe."""

    def __init__(self, data_dir: str, file_name: str = FILE_NAME, key: str = "groups", what: str = "group config",
                 key_of: Callable[[str], str] = _same, name_of: Callable[[str], str] = _same) -> None:
        """``key_of`` and ``name_of``: an entity's name as the file's key, and back."""
        self._file = PrivateJsonFile(data_dir, file_name, decode=functools.partial(_decode_file, key=key, name_of=name_of),
                                     encode=functools.partial(_encode_file, key=key, key_of=key_of), empty=dict,
                                     what=what, log=log)
        self.path = self._file.path

    def all(self) -> dict[str, Overrides]:
        return {group_id: dict(config) for group_id, config in self._file.read().items() if config}

    def get(self, group_id: str) -> Overrides:
        return dict(self._file.read().get(group_id, {}))

    def update(self, group_id: str, change: Change) -> Overrides:
        result: list[Overrides] = []

        def apply(groups: dict[str, Overrides]) -> bool:
            current = groups.get(group_id, {})
            new = change(dict(current))
            result.append(new)
            if new == current:
                return False
            if new:
                groups[group_id] = new
            else:
                groups.pop(group_id, None)
            return True

        self._file.update(apply)
        return result[-1]

    def watch(self, fn: Watcher) -> None:
        """``fn()`` now, then within 250 ms of each change of the file, from one daemon thread."""
        self._file.watch(fn)

    def close(self) -> None:
        self._file.close()
