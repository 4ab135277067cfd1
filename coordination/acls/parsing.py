"""Kafka's string forms of the ACL model (SecurityUtils): enum names as kafka-acls.sh and the
ACL znodes spell them (``Read``, ``READ``, ``TransactionalId``), principals (``Type:name``)
and the ``super.users`` list.
"""

from __future__ import annotations

from typing import Iterable

from coordination.acls.model import CodedEnum, Operation, Permission, ResourceType


def pascal_case(name: str) -> str:
    """SecurityUtils.toPascalCase: ``TRANSACTIONAL_ID`` -> ``TransactionalId``."""
    return "".join(part[:1].upper() + part[1:].lower() for part in name.split("_"))


def _by_kafka_name(members: Iterable[CodedEnum]) -> dict[str, CodedEnum]:
    # SecurityUtils' NAME_TO_* maps: the PascalCase name and its upper case ("Read", "READ"; "ClusterAction", "CLUSTERACTION").
    table: dict[str, CodedEnum] = {}
    for member in members:
        table[pascal_case(member.name)] = member
        table[pascal_case(member.name).upper()] = member
    return table


_RESOURCE_TYPE_NAMES = _by_kafka_name(ResourceType)
_OPERATION_NAMES = _by_kafka_name(Operation)
_PERMISSION_NAMES = _by_kafka_name(Permission)


def resource_type_from_name(name: str) -> ResourceType:
    """SecurityUtils.resourceType, also accepting the enum name (``TRANSACTIONAL_ID``); UNKNOWN if neither."""
    found = _RESOURCE_TYPE_NAMES.get(name)
    if found is None:
        found = ResourceType.__members__.get(name.upper(), ResourceType.UNKNOWN)
    return ResourceType(found)


def operation_from_name(name: str) -> Operation:
    """SecurityUtils.operation: ``Read`` / ``READ`` / ``IdempotentWrite``; UNKNOWN otherwise (as Kafka)."""
    return Operation(_OPERATION_NAMES.get(name, Operation.UNKNOWN))


def permission_from_name(name: str) -> Permission:
    """SecurityUtils.permissionType: ``Allow`` / ``ALLOW``; UNKNOWN otherwise (as Kafka)."""
    return Permission(_PERMISSION_NAMES.get(name, Permission.UNKNOWN))


def parse_principal(text: str) -> tuple[str, str]:
    """SecurityUtils.parseKafkaPrincipal: ``Type:name`` split at the first ``:`` (either part may be empty, as in Kafka)."""
    if not text or ":" not in text:
        raise ValueError(f"expected a string in format principalType:principalName but got {text!r}")
    principal_type, name = text.split(":", 1)
    return principal_type, name


def parse_super_users(value: str) -> frozenset[str]:
    """The ``super.users`` config as AclAuthorizer.configure reads it: ``;``-separated, each trimmed and parsed.

    Like Java's String.split, trailing empty items vanish ("User:a;" is fine) and an empty value means
    none; any other empty or malformed item raises ValueError (Kafka fails to start).
    """
    if not value:
        return frozenset()
    parts = value.split(";")
    while parts and parts[-1] == "":
        parts.pop()
    users = set()
    for part in parts:
        principal_type, name = parse_principal(part.strip())
        users.add(f"{principal_type}:{name}")
    return frozenset(users)
