"""Where client quotas are kept: in ZooKeeper in Kafka's config layout, or in a file.

An entity is what Kafka's ClientQuotaEntity is: a set of (entity type, name) pairs, the
types "user", "client-id" and "ip", a name of None meaning the type's default. Here it is a
tuple of those pairs sorted by type (``entity()`` makes one).

ZooKeeper, as Kafka in ZooKeeper mode keeps them (kafka.zk.ZkData ConfigEntityZNode,
ZkAdminManager.alterClientQuotas, AdminZkClient.changeConfigs), relative to the chroot::

    /config/users/<user>                      {"version":1,"config":{"producer_byte_rate":"1048576", ...}}
    /config/users/<default>                   the default of every user
    /config/users/<user>/clients/<client>     a (user, client id) pair; <default> on either side
    /config/clients/<client>, /config/clients/<default>
    /config/ips/<ip>, /config/ips/<default>   connection_creation_rate only
    /config/changes/config_change_<seq>       {"version":2,"entity_path":"users/<user>/clients/<client>"}

* Names are Kafka's Sanitizer (coordination/credentials.py ``sanitize``); "<default>" is the
  default entity, written as is. IPs are written as given.
* ``/config/users/<user>`` also holds the user's SCRAM credentials (coordination/
  credentials.py): one config map for both, as in Kafka. Changing a quota rewrites only
  quota keys and keeps every other key; the credential store does the same for its keys.
* Values are strings, as Kafka writes them: the integer types (producer_byte_rate,
  consumer_byte_rate: LONG; connection_creation_rate: INT) as integers, the DOUBLE ones
  (request_percentage, controller_mutation_rate) as Java's Double.toString ("50.0").
* The write and its change notification are one conditional transaction
  (coordination/zk_update.py); removing the last key leaves an empty config, as Kafka does.

The single-machine backend keeps one file (coordination/private_file.py)::

    <data_dir>/client-quotas.json   {"version":1,"quotas":[{"entity":{"user":"alice"},"config":{...}}]}

Validating keys and values is the caller's job (broker/apis/client_quotas.py).
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Iterable, Mapping, Protocol

import orjson
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from coordination.credentials import (
    CHANGES_PATH,
    USERS_PATH,
    ConfigChangeZNode,
    UserConfigZNode,
    desanitize,
    sanitize,
)
from coordination.private_file import PrivateJsonFile
from coordination.watchers import Watcher
from coordination.zk_update import CallWrapper, Done, Write, ZnodeUpdater, direct
from coordination.zk_watch import ZkChangeWatch

log = logging.getLogger(__name__)

USER = "user"            # ClientQuotaEntity.USER
CLIENT_ID = "client-id"  # ClientQuotaEntity.CLIENT_ID
IP = "ip"                # ClientQuotaEntity.IP
ENTITY_TYPES = (USER, CLIENT_ID, IP)

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
CONNECTION_CREATION_RATE = "connection_creation_rate"

# Kafka's QuotaConfig: the keys of user / client-id entities and of ip entities, with their
# ConfigDef types (which decide how a value is checked and written).
USER_CLIENT_KEYS = {PRODUCER_BYTE_RATE: "LONG", CONSUMER_BYTE_RATE: "LONG", REQUEST_PERCENTAGE: "DOUBLE",
                    CONTROLLER_MUTATION_RATE: "DOUBLE"}
IP_KEYS = {CONNECTION_CREATION_RATE: "INT"}
QUOTA_KEYS = frozenset(USER_CLIENT_KEYS) | frozenset(IP_KEYS)

CLIENTS_PATH = "/config/clients"
IPS_PATH = "/config/ips"
DEFAULT = "<default>"  # ConfigEntityName.Default
CHANGE_VERSION = 2

FILE_NAME = "client-quotas.json"
FILE_VERSION = 1

Entity = tuple[tuple[str, "str | None"], ...]
Quotas = dict[str, float]
Changes = Mapping[str, "float | None"]  # key -> new value, None removes it

def entity(pairs: Iterable[tuple[str, str | None]]) -> Entity:
    return tuple(sorted(pairs, key=lambda pair: pair[0]))

class QuotaStore(Protocol):
    def all(self) -> dict[Entity, Quotas]:
        """Every entity with at least one quota."""
        ...

    def alter(self, entity: Entity, changes: Changes) -> None:
        """Set and remove the entity's quota keys as ``changes`` says, all at once."""
        ...

    def watch(self, fn: Watcher) -> None:
        """``fn()`` now and whenever a quota may have changed; must not block."""
        ...

    def close(self) -> None:
        ...

class ConcurrentChanges(RuntimeError):
    """Other writers kept changing the same entity faster than we could read and write."""

def format_value(key: str, value: float) -> str:
    """The text Kafka writes for a quota value."""
    kind = USER_CLIENT_KEYS.get(key) or IP_KEYS.get(key)
    if kind in ("LONG", "INT"):
        return str(int(value + 1e-6))
    return repr(float(value))  # Java's Double.toString for ordinary values: "50.0"

def _quotas_of(config: Mapping[str, Any]) -> Quotas:
    out: Quotas = {}
    for key, value in config.items():
        if key in QUOTA_KEYS:
            try:
                out[key] = float(value)
            except (TypeError, ValueError):
                log.warning("ignoring the quota %s=%r: not a number", key, value)
    return out

def _apply(config: dict[str, Any], changes: Changes) -> bool:
    """Change the quota keys of a znode's config in place (other keys stay); whether anything changed."""
    changed = False
    for key, value in changes.items():
        if value is None:
            changed |= config.pop(key, None) is not None
        else:
            text = format_value(key, value)
            if config.get(key) != text:
                config[key] = text
                changed = True
    return changed

# ----------------------------------------------------------------------------- ZooKeeper
def _znode_name(name: str | None) -> str:
    if name is None:
        return DEFAULT
    sanitized = sanitize(name)
    return "%2E" + sanitized[1:] if sanitized in (".", "..") else sanitized

def entity_path(quota_entity: Entity) -> str:
    """The entity's path below /config (also the change notification's entity_path)."""
    names = dict(quota_entity)
    if IP in names:
        ip = names[IP]
        return f"ips/{DEFAULT if ip is None else ip}"
    if USER in names and CLIENT_ID in names:
        return f"users/{_znode_name(names[USER])}/clients/{_znode_name(names[CLIENT_ID])}"
    if USER in names:
        return f"users/{_znode_name(names[USER])}"
    if CLIENT_ID in names:
        return f"clients/{_znode_name(names[CLIENT_ID])}"
    raise ValueError(f"not a quota entity: {quota_entity!r}")

def _entity_name(znode_name: str) -> str | None:
    return None if znode_name == DEFAULT else desanitize(znode_name)

class ZooKeeperQuotas:
    """QuotaStore over a started KazooClient (not owned). Methods block: use an executor."""

    def __init__(self, client: KazooClient, call: CallWrapper | None = None) -> None:
        self._client = client
        self._call: CallWrapper = call if call is not None else direct
        self._updater = ZnodeUpdater(client, self._call, (USERS_PATH, CLIENTS_PATH, IPS_PATH, CHANGES_PATH),
                                     ConcurrentChanges)
        self._watch = ZkChangeWatch(client, (CHANGES_PATH, USERS_PATH, CLIENTS_PATH, IPS_PATH),
                                    self._updater.ensure_parents, "client quota", log)

    def all(self) -> dict[Entity, Quotas]:
        def children(path: str) -> list[str]:
            try:
                return sorted(self._client.get_children(path))
            except NoNodeError:
                return []

        def once() -> dict[Entity, Quotas]:
            wanted: list[tuple[Entity, str]] = []
            for name in children(USERS_PATH):
                user = _entity_name(name)
                wanted.append((entity([(USER, user)]), f"{USERS_PATH}/{name}"))
                for client_name in children(f"{USERS_PATH}/{name}/clients"):
                    wanted.append((entity([(USER, user), (CLIENT_ID, _entity_name(client_name))]),
                                   f"{USERS_PATH}/{name}/clients/{client_name}"))
            for name in children(CLIENTS_PATH):
                wanted.append((entity([(CLIENT_ID, _entity_name(name))]), f"{CLIENTS_PATH}/{name}"))
            for name in children(IPS_PATH):
                wanted.append((entity([(IP, None if name == DEFAULT else name)]), f"{IPS_PATH}/{name}"))
            pending = [(key, path, self._client.get_async(path)) for key, path in wanted]
            found: dict[Entity, Quotas] = {}
            for key, path, result in pending:
                try:
                    data, _ = result.get()
                    quotas = _quotas_of(UserConfigZNode.decode(path, data))
                except NoNodeError:
                    continue
                except ValueError as exc:
                    log.warning("ignoring the client quotas of %s: %s", path, exc)
                    continue
                if quotas:
                    found[key] = quotas
            return found

        return self._call(once)

    def alter(self, quota_entity: Entity, changes: Changes) -> None:
        relative = entity_path(quota_entity)
        path = f"/config/{relative}"
        if "/clients/" in relative:
            # Kafka's createRecursive makes /config/users/<user> (empty) and its clients node.
            self._call(self._client.ensure_path, path.rpartition("/")[0])

        def plan(data: bytes | None, exists: bool, _conflicts: int) -> Done[None] | Write[None]:
            config = UserConfigZNode.decode(path, data) if exists else {}
            if not _apply(config, changes) and exists:
                return Done(None)
            return Write(UserConfigZNode.encode(config), None)

        notification = orjson.dumps({"version": CHANGE_VERSION, "entity_path": relative})
        self._updater.update(path, ConfigChangeZNode.CREATE_PATH, notification, plan)

    def watch(self, fn: Watcher) -> None:
        self._watch.watch(fn)

    def close(self) -> None:
        self._watch.close()

# ----------------------------------------------------------------------------- local file
FileQuotas = dict[Entity, Quotas]

def _decode_file(path: str, doc: Any, data: bytes) -> FileQuotas:
    rows = doc.get("quotas") if isinstance(doc, dict) else None
    if not isinstance(rows, list):
        raise ValueError(f"{path}: expected {{\"version\":1,\"quotas\":[...]}}, got {data[:200]!r}")
    out: FileQuotas = {}
    for row in rows:
        if not isinstance(row, dict) or not isinstance(row.get("entity"), dict) or not isinstance(row.get("config"), dict):
            raise ValueError(f"{path}: expected {{\"entity\":{{...}},\"config\":{{...}}}}, got {row!r}")
        out[entity(row["entity"].items())] = _quotas_of(row["config"])
    return out

def _encode_file(quotas: FileQuotas) -> bytes:
    rows = [{"entity": dict(key), "config": {k: format_value(k, v) for k, v in sorted(value.items())}}
            for key, value in sorted(quotas.items(), key=lambda item: repr(item[0])) if value]
    return orjson.dumps({"version": FILE_VERSION, "quotas": rows}, option=orjson.OPT_INDENT_2)

class LocalQuotas:
    """QuotaStore in ``<data_dir>/client-quotas.json``. Thread- and process-safe."""

    def __init__(self, data_dir: str) -> None:
        self._file = PrivateJsonFile(data_dir, FILE_NAME, decode=_decode_file, encode=_encode_file, empty=dict,
                                     what="client quota", log=log)
        self.path = self._file.path

    def all(self) -> dict[Entity, Quotas]:
        return {key: dict(value) for key, value in self._file.read().items() if value}

    def alter(self, quota_entity: Entity, changes: Changes) -> None:
        entity_path(quota_entity)  # refuses what is not an entity

        def apply(quotas: FileQuotas) -> bool:
            current = {key: format_value(key, value) for key, value in quotas.get(quota_entity, {}).items()}
            if not _apply(current, changes):
                return False
            quotas[quota_entity] = _quotas_of(current)
            if not quotas[quota_entity]:
                del quotas[quota_entity]
            return True

        self._file.update(apply)

    def watch(self, fn: Watcher) -> None:
        self._file.watch(fn)

    def close(self) -> None:
        self._file.close()

Opener = Callable[[], QuotaStore]
