"""Where Kafka keeps ACLs in ZooKeeper and in what bytes: kafka.zk.ZkData's LiteralAclStore /
ExtendedAclStore / ResourceZNode / LiteralAclChangeStore / ExtendedAclChangeStore and
AclEntry's JSON, byte for byte. Pure (no I/O): the store that reads and writes these znodes
is coordination/acls/store.py.
"""

from __future__ import annotations

from typing import Iterable

import orjson

from coordination.acls.model import AccessControlEntry, AclBinding, EntryFields, Operation, PatternType, Permission, ResourceType
from coordination.acls.parsing import (
    operation_from_name,
    parse_principal,
    pascal_case,
    permission_from_name,
    resource_type_from_name,
)

ZK_LITERAL_ACLS = "/kafka-acl"  # LiteralAclStore.aclPath
ZK_EXTENDED_ACLS = "/kafka-acl-extended"  # ExtendedAclZNode.path
ZK_LITERAL_CHANGES = "/kafka-acl-changes"  # LiteralAclChangeStore.aclChangePath
ZK_EXTENDED_CHANGES = "/kafka-acl-extended-changes"  # ExtendedAclChangeStore.aclChangePath
ZK_CHANGE_PREFIX = "acl_changes_"  # ZkAclChangeStore.SequenceNumberPrefix (PERSISTENT_SEQUENTIAL nodes)
_STORED_RESOURCE_TYPES = (ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER, ResourceType.TRANSACTIONAL_ID,
                          ResourceType.DELEGATION_TOKEN, ResourceType.USER)  # AclEntry.RESOURCE_TYPES


def zk_store_root(pattern_type: PatternType) -> str:
    """``/kafka-acl`` for LITERAL, ``/kafka-acl-extended/prefixed`` for PREFIXED (ExtendedAclStore: the lower-case name)."""
    if pattern_type == PatternType.LITERAL:
        return ZK_LITERAL_ACLS
    if pattern_type == PatternType.PREFIXED:
        return f"{ZK_EXTENDED_ACLS}/{pattern_type.name.lower()}"
    raise ValueError(f"no ZooKeeper ACL store for pattern type {pattern_type!r}")


def zk_type_path(resource_type: ResourceType, pattern_type: PatternType) -> str:
    """ZkAclStore.path(resourceType): the parent of one type's resource znodes, e.g. ``/kafka-acl/TransactionalId``."""
    if resource_type not in _STORED_RESOURCE_TYPES:
        raise ValueError(f"no ZooKeeper ACL path for resource type {resource_type!r}")
    return f"{zk_store_root(pattern_type)}/{pascal_case(resource_type.name)}"


def znode_path(resource_type: ResourceType, pattern_type: PatternType, name: str) -> str:
    """ResourceZNode.path: ``/kafka-acl/Topic/orders``, ``/kafka-acl-extended/prefixed/Group/app-``.

    Kafka writes the name unescaped (CreateAcls refuses names containing ``/``).
    """
    if not name or "/" in name or name in (".", ".."):
        raise ValueError(f"resource name {name!r} cannot be a znode name")
    return f"{zk_type_path(resource_type, pattern_type)}/{name}"


def zk_acl_paths() -> list[str]:
    """The persistent znodes KafkaZkClient.createAclPaths makes, parents first."""
    paths = [ZK_LITERAL_ACLS]
    paths.extend(zk_type_path(rt, PatternType.LITERAL) for rt in _STORED_RESOURCE_TYPES)
    paths.extend([ZK_EXTENDED_ACLS, zk_store_root(PatternType.PREFIXED)])
    paths.extend(zk_type_path(rt, PatternType.PREFIXED) for rt in _STORED_RESOURCE_TYPES)
    paths.extend([ZK_LITERAL_CHANGES, ZK_EXTENDED_CHANGES])
    return paths


def encode_acl_node(entries: Iterable[EntryFields]) -> bytes:
    """ResourceZNode.encode: ``{"version":1,"acls":[{"principal":..,"permissionType":..,"operation":..,"host":..}]}``.

    Key order as Kafka up to 3.7 writes it (Scala maps; 3.8+ writes the same keys in HashMap order,
    ``acls`` first); entries sorted for stable bytes. Kafka deletes the znode rather than writing
    an empty list.
    """
    acls = [{
        "principal": e.principal,
        "permissionType": pascal_case(Permission(e.permission).name),
        "operation": pascal_case(Operation(e.operation).name),
        "host": e.host,
    } for e in sorted({AccessControlEntry(e.principal, e.host, e.operation, e.permission) for e in entries},
                      key=lambda e: (e.principal, e.host, e.operation, e.permission))]
    return orjson.dumps({"version": 1, "acls": acls})


def decode_acl_node(resource_type: ResourceType, pattern_type: PatternType, name: str, data: bytes | None) -> list[AclBinding]:
    """AclEntry.fromBytes: the bindings one resource znode holds; ValueError if unreadable.

    Empty data means no ACLs; names are read as SecurityUtils does ("Read" or "READ"; unknown
    names become UNKNOWN, which never matches).
    """
    if not data:
        return []
    path = f"{pattern_type.name} {resource_type.name} {name!r}"
    try:
        document = orjson.loads(data)
    except orjson.JSONDecodeError as error:
        raise ValueError(f"ACL znode of {path}: not JSON: {error}") from None
    if document is None:
        return []
    if not isinstance(document, dict) or document.get("version") != 1 or not isinstance(document.get("acls"), list):
        raise ValueError(f"ACL znode of {path}: expected {{\"version\":1,\"acls\":[...]}}, got {data[:200]!r}")
    bindings = set()
    for item in document["acls"]:
        try:
            principal_type, principal_name = parse_principal(item["principal"])
            host, permission, operation = item["host"], item["permissionType"], item["operation"]
            if not all(isinstance(value, str) for value in (host, permission, operation)):
                raise TypeError("host, permissionType and operation must be strings")
        except (KeyError, TypeError, ValueError) as error:
            raise ValueError(f"ACL znode of {path}: bad entry {item!r}: {error}") from None
        bindings.add(AclBinding(resource_type, name, pattern_type, f"{principal_type}:{principal_name}", host,
                                operation_from_name(operation), permission_from_name(permission)))
    return sorted(bindings)


def change_notification(resource_type: ResourceType, pattern_type: PatternType, name: str) -> tuple[str, bytes]:
    """The sequential znode to create after changing a resource's ACLs: (path prefix, data).

    LITERAL (LiteralAclChangeStore): ``/kafka-acl-changes/acl_changes_`` with ``TOPIC:orders`` (the
    enum name, upper case). PREFIXED (ExtendedAclChangeStore): ``/kafka-acl-extended-changes/acl_changes_``
    with ``{"version":1,"resourceType":"TOPIC","name":"app-","patternType":"PREFIXED"}``.
    """
    if pattern_type == PatternType.LITERAL:
        return f"{ZK_LITERAL_CHANGES}/{ZK_CHANGE_PREFIX}", f"{resource_type.name}:{name}".encode()
    if pattern_type == PatternType.PREFIXED:
        event = {"version": 1, "resourceType": resource_type.name, "name": name, "patternType": pattern_type.name}
        return f"{ZK_EXTENDED_CHANGES}/{ZK_CHANGE_PREFIX}", orjson.dumps(event)
    raise ValueError(f"no ACL change notification for pattern type {pattern_type!r}")


def decode_change_notification(path: str, data: bytes) -> tuple[ResourceType, PatternType, str]:
    """The resource pattern a change notification names; ``path`` is the notification znode (or its parent).

    Resource type names are read as Kafka reads them (``TOPIC``, ``Topic``), plus PascalCase of
    multi-word types (``TransactionalId``, written by Kafka before 2.0); UNKNOWN if unrecognised.
    """
    if path.startswith(ZK_EXTENDED_CHANGES):
        try:
            event = orjson.loads(data)
            version, resource_type, name, pattern_type = event["version"], event["resourceType"], event["name"], event["patternType"]
        except (orjson.JSONDecodeError, KeyError, TypeError) as error:
            raise ValueError(f"{path}: not an ACL change event: {error}") from None
        if not isinstance(version, int) or version > 1:
            raise ValueError(f"{path}: ACL change event of unsupported version {version!r}")
        if not all(isinstance(value, str) for value in (resource_type, name, pattern_type)):
            raise ValueError(f"{path}: ACL change event fields must be strings: {event!r}")
        return resource_type_from_name(resource_type), PatternType.__members__.get(pattern_type.upper(), PatternType.UNKNOWN), name
    if path.startswith(ZK_LITERAL_CHANGES):
        text = data.decode("utf-8", errors="replace")
        if ":" not in text:
            raise ValueError(f"{path}: expected ResourceType:ResourceName, got {text!r}")
        resource_type, name = text.split(":", 1)
        return resource_type_from_name(resource_type), PatternType.LITERAL, name
    raise ValueError(f"{path} is not under {ZK_LITERAL_CHANGES} or {ZK_EXTENDED_CHANGES}")
