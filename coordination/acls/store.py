"""The store of ACLs: in ZooKeeper where Apache Kafka's AclAuthorizer keeps them, or in a file.

The model and the ZooKeeper byte formats are this package's (model.py, zk_layout.py); this module
only reads and writes.

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
import logging
from typing import Any, Iterable, Protocol

import orjson
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from coordination.acls.model import AclBinding, Operation, PatternType, Permission, ResourceType
from coordination.acls.parsing import operation_from_name, pascal_case, permission_from_name, resource_type_from_name
from coordination.acls.validation import validate_binding
from coordination.acls.zk_layout import (
    ZK_EXTENDED_CHANGES,
    ZK_LITERAL_CHANGES,
    change_notification,
    decode_acl_node,
    encode_acl_node,
    zk_acl_paths,
    zk_type_path,
    znode_path,
)
from coordination.private_file import PrivateJsonFile
from coordination.watchers import Watcher
from coordination.zk_update import CallWrapper, Done, Write, ZnodeUpdater, direct
from coordination.zk_watch import ZkChangeWatch

log = logging.getLogger(__name__)

FILE_NAME = "acls.json"
FILE_VERSION = 1

PATTERN_TYPES = (PatternType.LITERAL, PatternType.PREFIXED)  # the two stores


def _has_zk_path(resource_type: ResourceType) -> bool:
    try:
        zk_type_path(resource_type, PatternType.LITERAL)
    except ValueError:
        return False
    return True


# AclEntry.RESOURCE_TYPES: the types with a node in each store.
STORED_RESOURCE_TYPES = tuple(rt for rt in ResourceType if _has_zk_path(rt))

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
        self._call: CallWrapper = call if call is not None else direct
        # The paths of KafkaZkClient.createAclPaths.
        self._updater = ZnodeUpdater(client, self._call, zk_acl_paths(), ConcurrentAclChanges)
        self._watch = ZkChangeWatch(client, (ZK_LITERAL_CHANGES, ZK_EXTENDED_CHANGES), self._updater.ensure_parents,
                                    "ACL", log)

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
        ``group``, write back conditionally with a change notification
        (coordination/zk_update.py). After a lost race, if nothing is left to do, the
        previous attempt's bindings are reported (our own commit whose answer was lost to a
        connection drop and retried by ``call``, or an identical concurrent write)."""
        resource_type, pattern_type, name = pattern
        path = znode_path(resource_type, pattern_type, name)
        notify_path, notification = change_notification(resource_type, pattern_type, name)
        pending: list[AclBinding] = []

        def plan(data: bytes | None, exists: bool, conflicts: int) -> Done[list[AclBinding]] | Write[list[AclBinding]]:
            nonlocal pending
            current = set(decode_acl_node(resource_type, pattern_type, name, data)) if exists else set()
            changing = [b for b in group if (b not in current) == adding]
            if not changing:
                return Done(pending if conflicts else [])
            pending = changing
            remaining = (current | set(changing)) if adding else (current - set(changing))
            # As Kafka: no znode with an empty list.
            return Write(encode_acl_node(remaining), pending, delete=not remaining)

        return self._updater.update(path, notify_path, notification, plan)

    # ------------------------------------------------------------------ watches
    def watch(self, fn: Watcher) -> None:
        """``fn()`` now, then whenever a change notification appears in either change root
        (or old ones are purged), or the session was lost and is back (watches could have
        missed changes meanwhile). Runs on kazoo's threads."""
        self._watch.watch(fn)

    def close(self) -> None:
        """Stop calling watchers (the client stays as it is: it is not ours)."""
        self._watch.close()


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


def _decode_file(path: str, doc: Any, data: bytes) -> set[AclBinding]:
    acls = doc.get("acls") if isinstance(doc, dict) else None
    if not isinstance(acls, list):
        raise ValueError(f"{path}: expected {{\"version\":1,\"acls\":[...]}}, got {data[:200]!r}")
    return {_decode_binding(path, item) for item in acls}


def _encode_file(acls: set[AclBinding]) -> bytes:
    return orjson.dumps({"version": FILE_VERSION, "acls": [_encode_binding(b) for b in sorted(acls)]},
                        option=orjson.OPT_INDENT_2)


class LocalAcls:
    """AclStore in ``<data_dir>/acls.json`` (coordination/private_file.py). Thread- and process-safe."""

    def __init__(self, data_dir: str) -> None:
        self.data_dir = data_dir
        self._file = PrivateJsonFile(data_dir, FILE_NAME, decode=_decode_file, encode=_encode_file, empty=set,
                                     what="ACL", log=log)
        self.path = self._file.path

    # ------------------------------------------------------------------ reads
    def all(self) -> list[AclBinding]:
        return sorted(self._file.read())

    # ------------------------------------------------------------------ writes
    def add(self, bindings: Iterable[AclBinding]) -> list[AclBinding]:
        wanted = _checked(bindings)

        def change(acls: set[AclBinding]) -> list[AclBinding]:
            added = [b for b in wanted if b not in acls]
            acls.update(added)
            return added

        return self._file.update(change)

    def remove(self, bindings: Iterable[AclBinding]) -> list[AclBinding]:
        wanted = _unique(bindings)

        def change(acls: set[AclBinding]) -> list[AclBinding]:
            removed = [b for b in wanted if b in acls]
            acls.difference_update(removed)
            return removed

        return self._file.update(change)

    # ------------------------------------------------------------------ watches
    def watch(self, fn: Watcher) -> None:
        """``fn()`` now, then within 250 ms of each change of the file (its inode, mtime or
        size), from the store's one daemon thread."""
        self._file.watch(fn)

    def close(self) -> None:
        """Stop the watch thread (waits for it, unless called from a watcher)."""
        self._file.close()
