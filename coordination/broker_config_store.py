"""Where dynamic broker configs are kept: in ZooKeeper in Kafka 3.9's layout, or in a file.

ZooKeeper, as Kafka's AdminZkClient.changeBrokerConfig writes them (ConfigType.BROKER,
entity names a broker id or ``<default>``, ConfigEntityName.DEFAULT), relative to the chroot::

    /config/brokers/<id>                 {"version":1,"config":{"log.retention.ms":"60000"}}
    /config/brokers/<default>            the cluster-wide default (kafka-configs --entity-default)
    /config/changes/config_change_<seq>  {"version":2,"entity_path":"brokers/<id or <default>>"}

The write and its change notification are one conditional transaction
(coordination/zk_update.py), so concurrent writers never lose each other's keys. An entity
whose last config is removed keeps its znode with an empty config, as in Kafka.

The single-machine backend keeps one file (coordination/private_file.py: flocked
read-modify-write, atomic replace, polled for changes every 250 ms)::

    <data_dir>/broker-configs.json   {"version":1,"brokers":{"<default>":{...},"0":{...}}}

Entities are named here as in the protocol: "" is the cluster default, else a broker id.
Values are the text the client sent; checking them is the caller's job.
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Protocol

import orjson
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from coordination.credentials import CHANGES_PATH, ConfigChangeZNode, UserConfigZNode
from coordination.private_file import PrivateJsonFile
from coordination.watchers import Watcher
from coordination.zk_update import CallWrapper, Done, Write, ZnodeUpdater, direct
from coordination.zk_watch import ZkChangeWatch

log = logging.getLogger(__name__)

BROKERS_PATH = "/config/brokers"   # ConfigEntityTypeZNode.path(ConfigType.BROKER)
BROKER_ENTITY_TYPE = "brokers"     # ConfigType.BROKER
DEFAULT_ENTITY = "<default>"       # ConfigEntityName.DEFAULT
CONFIG_VERSION = 1
CHANGE_VERSION = 2

FILE_NAME = "broker-configs.json"
FILE_VERSION = 1

Overrides = dict[str, str]
Change = Callable[[Overrides], Overrides]


class BrokerConfigStore(Protocol):
    def all(self) -> dict[str, Overrides]:
        """entity ("" for the cluster default, else a broker id) -> its configs, non-empty ones."""
        ...

    def get(self, entity: str) -> Overrides:
        ...

    def update(self, entity: str, change: Change) -> Overrides:
        """Replace the entity's configs with ``change(current)`` (locked or conditional
        read-modify-write: ``change`` may run more than once); the new configs."""
        ...

    def watch(self, fn: Watcher) -> None:
        """``fn()`` now and whenever an entity's configs may have changed; must not block."""
        ...

    def close(self) -> None:
        ...


class ConcurrentChanges(RuntimeError):
    """Other writers kept changing the same entity faster than we could read and write."""


def znode_name(entity: str) -> str:
    return entity or DEFAULT_ENTITY


def entity_of(znode: str) -> str:
    return "" if znode == DEFAULT_ENTITY else znode


def _strings(path: str, config: dict[str, Any]) -> Overrides:
    out: Overrides = {}
    for key, value in config.items():
        if not isinstance(value, str):
            raise ValueError(f"{path}: the value of {key!r} is not a string")
        out[key] = value
    return out


# ----------------------------------------------------------------------------- ZooKeeper
class BrokerConfigZNode:
    """/config/brokers/<id or <default>>: Kafka's ConfigEntityZNode for the "brokers" type."""

    @staticmethod
    def path(entity: str) -> str:
        return f"{BROKERS_PATH}/{znode_name(entity)}"

    @staticmethod
    def encode(config: Overrides) -> bytes:
        return orjson.dumps({"version": CONFIG_VERSION, "config": dict(config)}, option=orjson.OPT_SORT_KEYS)

    @staticmethod
    def decode(path: str, data: bytes | None) -> Overrides:
        return _strings(path, UserConfigZNode.decode(path, data))  # the same ConfigEntityZNode shape

    @staticmethod
    def change_notification(entity: str) -> bytes:
        return orjson.dumps({"version": CHANGE_VERSION, "entity_path": f"{BROKER_ENTITY_TYPE}/{znode_name(entity)}"})


class ZooKeeperBrokerConfigs:
    """BrokerConfigStore over a started KazooClient (not owned). Methods block."""

    def __init__(self, client: KazooClient, call: CallWrapper | None = None) -> None:
        self._client = client
        self._call: CallWrapper = call if call is not None else direct
        self._updater = ZnodeUpdater(client, self._call, (BROKERS_PATH, CHANGES_PATH), ConcurrentChanges)
        self._watch = ZkChangeWatch(client, (CHANGES_PATH, BROKERS_PATH), self._updater.ensure_parents,
                                    "broker config", log)

    def all(self) -> dict[str, Overrides]:
        def once() -> dict[str, Overrides]:
            try:
                names = self._client.get_children(BROKERS_PATH)
            except NoNodeError:
                return {}
            pending = [(name, self._client.get_async(f"{BROKERS_PATH}/{name}")) for name in sorted(names)]
            found: dict[str, Overrides] = {}
            for name, result in pending:
                path = f"{BROKERS_PATH}/{name}"
                try:
                    data, _ = result.get()
                    config = BrokerConfigZNode.decode(path, data)
                except NoNodeError:
                    continue
                except ValueError as exc:
                    log.warning("ignoring the broker configs of %s: %s", path, exc)
                    continue
                if config:
                    found[entity_of(name)] = config
            return found

        return self._call(once)

    def get(self, entity: str) -> Overrides:
        path = BrokerConfigZNode.path(entity)
        try:
            data, _ = self._call(self._client.get, path)
        except NoNodeError:
            return {}
        return BrokerConfigZNode.decode(path, data)

    def update(self, entity: str, change: Change) -> Overrides:
        path = BrokerConfigZNode.path(entity)

        def plan(data: bytes | None, exists: bool, _conflicts: int) -> Done[Overrides] | Write[Overrides]:
            current = BrokerConfigZNode.decode(path, data) if exists else {}
            new = change(dict(current))
            if new == current and (exists or not new):
                return Done(new)
            return Write(BrokerConfigZNode.encode(new), new)

        return self._updater.update(path, ConfigChangeZNode.CREATE_PATH, BrokerConfigZNode.change_notification(entity),
                                    plan)

    def watch(self, fn: Watcher) -> None:
        self._watch.watch(fn)

    def close(self) -> None:
        self._watch.close()


# ----------------------------------------------------------------------------- local file
def _decode_file(path: str, doc: Any, data: bytes) -> dict[str, Overrides]:
    brokers = doc.get("brokers") if isinstance(doc, dict) else None
    if not isinstance(brokers, dict):
        raise ValueError(f"{path}: expected {{\"version\":1,\"brokers\":{{...}}}}, got {data[:200]!r}")
    out: dict[str, Overrides] = {}
    for name, config in brokers.items():
        if not isinstance(config, dict):
            raise ValueError(f"{path}: broker {name!r}: expected an object of configs")
        out[entity_of(name)] = _strings(path, config)
    return out


def _encode_file(brokers: dict[str, Overrides]) -> bytes:
    return orjson.dumps({"version": FILE_VERSION,
                         "brokers": {znode_name(e): brokers[e] for e in sorted(brokers) if brokers[e]}},
                        option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS)


class LocalBrokerConfigs:
    """BrokerConfigStore in ``<data_dir>/broker-configs.json``. Thread- and process-safe."""

    def __init__(self, data_dir: str) -> None:
        self._file = PrivateJsonFile(data_dir, FILE_NAME, decode=_decode_file, encode=_encode_file, empty=dict,
                                     what="broker config", log=log, thread_name="castle-broker-configs-watch")
        self.path = self._file.path

    def all(self) -> dict[str, Overrides]:
        return {entity: dict(config) for entity, config in self._file.read().items() if config}

    def get(self, entity: str) -> Overrides:
        return dict(self._file.read().get(entity, {}))

    def update(self, entity: str, change: Change) -> Overrides:
        result: list[Overrides] = []

        def apply(brokers: dict[str, Overrides]) -> bool:
            current = brokers.get(entity, {})
            new = change(dict(current))
            result.append(new)
            if new == current:
                return False
            if new:
                brokers[entity] = new
            else:
                brokers.pop(entity, None)
            return True

        self._file.update(apply)
        return result[-1]

    def watch(self, fn: Watcher) -> None:
        self._file.watch(fn)

    def close(self) -> None:
        self._file.close()
