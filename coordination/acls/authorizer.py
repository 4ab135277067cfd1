"""Kafka's ACL model and authorization rules, pure (no I/O): what CreateAcls accepts, what
DescribeAcls/DeleteAcls filters match, what the authorizer allows, and the ZooKeeper format.

Why here: the rules are shared by the ZooKeeper ACL store (coordination/) and by the broker's
request handlers, so this module imports nothing from broker/. Every rule follows Apache Kafka
3.x; the classes named below are the ones the behaviour was taken from.

* Codes: ``ResourceType``, ``PatternType``, ``Operation``, ``Permission`` carry the wire codes of
  org.apache.kafka.common.resource.ResourceType / PatternType and
  org.apache.kafka.common.acl.AclOperation / AclPermissionType (``from_code`` maps a code Kafka
  does not know to UNKNOWN, as their ``fromCode`` does).
* ``AclBinding`` is Kafka's AclBinding (ResourcePattern + AccessControlEntry) flattened;
  ``AclBindingFilter`` is AclBindingFilter (ResourcePatternFilter + AccessControlEntryFilter):
  None or ANY matches anything; pattern type MATCH matches a LITERAL binding of the same name, the
  LITERAL wildcard ``*`` and every PREFIXED binding whose name prefixes the filter's name.
* ``validate_binding`` / ``validate_filter``: the checks CreateAcls, DescribeAcls and DeleteAcls
  make (CreateAclsRequest.validate, ResourcePattern / AccessControlEntry constructors, AclApis,
  AclAuthorizer.validateAclBinding, AclControlManager.validateNewAcl/validateFilter).
* ``AclRules``: AclAuthorizer.authorizeAction (``authorize``) and
  AclAuthorizer.authorizeByResourceType (``authorize_any``), its acls() (``describe``) and
  deleteAcls() (``delete``). StandardAuthorizerData (KRaft) agrees on every rule used here.
* ZooKeeper: kafka.zk.ZkData's LiteralAclStore / ExtendedAclStore / ResourceZNode /
  LiteralAclChangeStore / ExtendedAclChangeStore and AclEntry's JSON, byte for byte.

Authorization (AclAuthorizer.authorizeAction):

1. A principal listed in ``super.users`` (``User:admin;User:broker``) is always allowed.
2. The ACLs of the resource are those bound to the LITERAL name, to the LITERAL wildcard ``*``
   and to every PREFIXED pattern that is a prefix of the name, whatever their principal, host or
   operation. If there are none, ``allow.everyone.if.no.acl.found`` decides (default: deny).
3. Otherwise an ACL applies when its principal is the caller's or ``User:*`` (which applies to
   every caller, whatever its principal type) and its host is the caller's address or ``*``. An applying DENY for the operation or for ALL denies: DENY wins,
   wherever it comes from (a prefixed DENY beats a literal ALLOW).
4. Else an applying ALLOW for the operation, for ALL, or for an operation that implies it allows:
   DESCRIBE is implied by READ, WRITE, DELETE and ALTER; DESCRIBE_CONFIGS by ALTER_CONFIGS.
   Implication only widens ALLOWs: a DENY of READ does not deny DESCRIBE.
5. Nothing else implies anything (WRITE does not imply IDEMPOTENT_WRITE; Kafka's InitProducerId
   instead asks ``IDEMPOTENT_WRITE on the cluster or authorize_any(WRITE, TOPIC)``).

``authorize_any`` ("could this principal do OP on some resource of this type", used by
InitProducerId) is AclAuthorizer.authorizeByResourceType, quirks included: no operation
implication; a LITERAL ``*`` DENY denies; then ``allow.everyone.if.no.acl.found`` allows outright
(even when ACLs exist); then some ALLOW must survive: a LITERAL ALLOW of ``*`` always survives, a
LITERAL ALLOW of a name survives unless that name has a LITERAL DENY or a PREFIXED DENY on one of
its prefixes, a PREFIXED ALLOW survives unless a PREFIXED DENY is a prefix of (or equal to) it.

Error codes for invalid ACLs (``AclError``): Kafka rejects some bad creations while parsing the
request (unknown codes: the connection is closed) or while building the binding (ANY, MATCH:
the whole request fails with UNKNOWN_SERVER_ERROR), and reports an unparsable principal as
UNKNOWN_SERVER_ERROR (AclEntry's IllegalArgumentException, wrapped). Castle answers each of these
per ACL with INVALID_REQUEST, the code Kafka's own controller gives them (AclControlManager),
and keeps Kafka's INVALID_REQUEST for a CLUSTER name other than ``kafka-cluster``, an empty name
and a name containing ``/``; a name ZooKeeper cannot hold in a path (``.``, ``..``, control
characters: Kafka fails in ZooKeeper, UNKNOWN_SERVER_ERROR) is INVALID_REQUEST too.
UNSUPPORTED_VERSION for a non-LITERAL pattern in version 0 requests, as Kafka.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Iterable, Iterator, Protocol, Self, Sequence

import orjson

# --------------------------------------------------------------------------- codes


class _Coded(enum.IntEnum):
    @classmethod
    def from_code(cls, code: int) -> Self:
        try:
            return cls(code)
        except ValueError:
            return cls(0)  # every Kafka ACL enum has UNKNOWN = 0


class ResourceType(_Coded):
    """org.apache.kafka.common.resource.ResourceType."""

    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(_Coded):
    """org.apache.kafka.common.resource.PatternType."""

    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class Operation(_Coded):
    """org.apache.kafka.common.acl.AclOperation."""

    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class Permission(_Coded):
    """org.apache.kafka.common.acl.AclPermissionType."""

    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


CLUSTER_NAME = "kafka-cluster"  # Resource.CLUSTER_NAME
WILDCARD_RESOURCE = "*"  # ResourcePattern.WILDCARD_RESOURCE
WILDCARD_HOST = "*"  # AclEntry.WILDCARD_HOST
WILDCARD_PRINCIPAL = "User:*"  # AclEntry.WILDCARD_PRINCIPAL (only the User type is a wildcard)

# ALLOW ACLs that imply the operation (AclAuthorizer.authorizeAction's allowOps; ALL is handled apart).
IMPLIED_BY: dict[Operation, frozenset[Operation]] = {
    Operation.DESCRIBE: frozenset({Operation.DESCRIBE, Operation.READ, Operation.WRITE, Operation.DELETE, Operation.ALTER}),
    Operation.DESCRIBE_CONFIGS: frozenset({Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS}),
}

# AclEntry.supportedOperations: what kafka-acls.sh lets one grant per resource type (not enforced by brokers).
SUPPORTED_OPERATIONS: dict[ResourceType, frozenset[Operation]] = {
    ResourceType.TOPIC: frozenset({Operation.READ, Operation.WRITE, Operation.CREATE, Operation.DESCRIBE, Operation.DELETE,
                                   Operation.ALTER, Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS}),
    ResourceType.GROUP: frozenset({Operation.READ, Operation.DESCRIBE, Operation.DELETE}),
    ResourceType.CLUSTER: frozenset({Operation.CREATE, Operation.CLUSTER_ACTION, Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS,
                                     Operation.IDEMPOTENT_WRITE, Operation.ALTER, Operation.DESCRIBE}),
    ResourceType.TRANSACTIONAL_ID: frozenset({Operation.DESCRIBE, Operation.WRITE}),
    ResourceType.DELEGATION_TOKEN: frozenset({Operation.DESCRIBE}),
    ResourceType.USER: frozenset({Operation.CREATE_TOKENS, Operation.DESCRIBE_TOKENS}),
}

# AclEntry.authorizationError: the error a request gets when denied on a resource of this type.
AUTHORIZATION_ERRORS: dict[ResourceType, tuple[str, int]] = {
    ResourceType.TOPIC: ("TOPIC_AUTHORIZATION_FAILED", 29),
    ResourceType.GROUP: ("GROUP_AUTHORIZATION_FAILED", 30),
    ResourceType.CLUSTER: ("CLUSTER_AUTHORIZATION_FAILED", 31),
    ResourceType.TRANSACTIONAL_ID: ("TRANSACTIONAL_ID_AUTHORIZATION_FAILED", 53),
    ResourceType.DELEGATION_TOKEN: ("DELEGATION_TOKEN_AUTHORIZATION_FAILED", 65),
}


def pascal_case(name: str) -> str:
    """SecurityUtils.toPascalCase: ``TRANSACTIONAL_ID`` -> ``TransactionalId``."""
    return "".join(part[:1].upper() + part[1:].lower() for part in name.split("_"))


def _by_kafka_name(members: Iterable[_Coded]) -> dict[str, _Coded]:
    # SecurityUtils' NAME_TO_* maps: the PascalCase name and its upper case ("Read", "READ"; "ClusterAction", "CLUSTERACTION").
    table: dict[str, _Coded] = {}
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


# --------------------------------------------------------------------------- principals


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


# --------------------------------------------------------------------------- bindings and filters


class _Entry(Protocol):
    @property
    def principal(self) -> str: ...
    @property
    def host(self) -> str: ...
    @property
    def operation(self) -> Operation: ...
    @property
    def permission(self) -> Permission: ...


@dataclass(frozen=True, slots=True)
class AccessControlEntry:
    """Kafka's AccessControlEntry: who, from where, what, allow or deny."""

    principal: str
    host: str
    operation: Operation
    permission: Permission


@dataclass(frozen=True, slots=True, order=True)
class AclBinding:
    """Kafka's AclBinding: a resource pattern bound to an access control entry."""

    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: Operation
    permission: Permission

    @property
    def pattern(self) -> tuple[ResourceType, PatternType, str]:
        return (self.resource_type, self.pattern_type, self.resource_name)

    @property
    def entry(self) -> AccessControlEntry:
        return AccessControlEntry(self.principal, self.host, self.operation, self.permission)

    def to_filter(self) -> "AclBindingFilter":
        return AclBindingFilter(self.resource_type, self.resource_name, self.pattern_type,
                                self.principal, self.host, self.operation, self.permission)

    @staticmethod
    def of(resource_type: ResourceType, pattern_type: PatternType, resource_name: str, entry: _Entry) -> "AclBinding":
        return AclBinding(resource_type, resource_name, pattern_type, entry.principal, entry.host, entry.operation, entry.permission)


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """Kafka's AclBindingFilter; None (or ANY for the enums) matches anything."""

    resource_type: ResourceType | None = ResourceType.ANY
    resource_name: str | None = None
    pattern_type: PatternType | None = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: Operation | None = Operation.ANY
    permission: Permission | None = Permission.ANY

    def __post_init__(self) -> None:
        if self.resource_type is None:
            object.__setattr__(self, "resource_type", ResourceType.ANY)
        if self.pattern_type is None:
            object.__setattr__(self, "pattern_type", PatternType.ANY)
        if self.operation is None:
            object.__setattr__(self, "operation", Operation.ANY)
        if self.permission is None:
            object.__setattr__(self, "permission", Permission.ANY)

    def matches_pattern(self, resource_type: ResourceType, pattern_type: PatternType, name: str) -> bool:
        """ResourcePatternFilter.matches."""
        if self.resource_type != ResourceType.ANY and self.resource_type != resource_type:
            return False
        wanted = self.pattern_type
        if wanted not in (PatternType.ANY, PatternType.MATCH) and wanted != pattern_type:
            return False
        if self.resource_name is None:
            return True
        if wanted == PatternType.ANY or wanted == pattern_type:
            return self.resource_name == name
        # MATCH: the bindings that would apply to a resource called resource_name.
        if pattern_type == PatternType.LITERAL:
            return self.resource_name == name or name == WILDCARD_RESOURCE
        if pattern_type == PatternType.PREFIXED:
            return self.resource_name.startswith(name)
        return False  # Kafka throws on a binding of another pattern type; none is ever stored.

    def matches_entry(self, entry: _Entry) -> bool:
        """AccessControlEntryFilter.matches."""
        if self.principal is not None and self.principal != entry.principal:
            return False
        if self.host is not None and self.host != entry.host:
            return False
        if self.operation != Operation.ANY and self.operation != entry.operation:
            return False
        return self.permission == Permission.ANY or self.permission == entry.permission

    def matches(self, binding: AclBinding) -> bool:
        """AclBindingFilter.matches."""
        return self.matches_pattern(binding.resource_type, binding.pattern_type, binding.resource_name) and self.matches_entry(binding)

    def indefinite_field(self) -> str | None:
        """AclBindingFilter.findIndefiniteField: why this filter may match more than one binding (None if it cannot)."""
        if self.resource_type == ResourceType.ANY:
            return "Resource type is ANY."
        if self.resource_type == ResourceType.UNKNOWN:
            return "Resource type is UNKNOWN."
        if self.resource_name is None:
            return "Resource name is NULL."
        if self.pattern_type == PatternType.MATCH:
            return "Resource pattern type is MATCH."
        if self.pattern_type == PatternType.UNKNOWN:
            return "Resource pattern type is UNKNOWN."
        if self.principal is None:
            return "Principal is NULL"
        if self.host is None:
            return "Host is NULL"
        if self.operation in (Operation.ANY, Operation.UNKNOWN):
            return f"Operation is {Operation(self.operation).name}"
        if self.permission in (Permission.ANY, Permission.UNKNOWN):
            return f"Permission type is {Permission(self.permission).name}"
        return None


ANY_FILTER = AclBindingFilter()  # AclBindingFilter.ANY


# --------------------------------------------------------------------------- validation


@dataclass(frozen=True, slots=True)
class AclError:
    """An error for one ACL creation or one filter: Kafka's error name, code and message."""

    name: str
    code: int
    message: str


def _invalid(message: str) -> AclError:
    return AclError("INVALID_REQUEST", 42, message)


def _unsupported(message: str) -> AclError:
    return AclError("UNSUPPORTED_VERSION", 35, message)


# Characters ZooKeeper's PathUtils.validatePath refuses in a path (checked on UTF-16 code units,
# so anything outside the BMP, sent as surrogates, is refused too).
def _zookeeper_refuses(char: str) -> bool:
    c = ord(char)
    return c == 0 or c <= 0x1F or 0x7F <= c <= 0x9F or 0xD800 <= c <= 0xF8FF or c >= 0xFFF0


def validate_binding(binding: AclBinding, api_version: int | None = None) -> AclError | None:
    """The checks CreateAcls makes before storing one ACL, in Kafka's order; None if it may be stored.

    ``api_version``: the CreateAcls version (version 0 only knows LITERAL patterns:
    CreateAclsRequest.validate answers UNSUPPORTED_VERSION).
    """
    rt, pt = ResourceType.from_code(binding.resource_type), PatternType.from_code(binding.pattern_type)
    op, perm = Operation.from_code(binding.operation), Permission.from_code(binding.permission)
    if api_version == 0 and pt != PatternType.LITERAL:
        return _unsupported("Version 0 only supports literal resource pattern types")
    # CreateAclsRequest.validate, then the ResourcePattern / AccessControlEntry constructors
    # (AclControlManager.validateNewAcl words them so).
    if rt in (ResourceType.UNKNOWN, ResourceType.ANY):
        return _invalid(f"Invalid resourceType {rt.name}")
    if pt not in (PatternType.LITERAL, PatternType.PREFIXED):
        return _invalid(f"Invalid patternType {pt.name}")
    if op in (Operation.UNKNOWN, Operation.ANY):
        return _invalid(f"Invalid operation {op.name}")
    if perm not in (Permission.ALLOW, Permission.DENY):
        return _invalid(f"Invalid permissionType {perm.name}")
    # AclApis.handleCreateAcls.
    if rt == ResourceType.CLUSTER and binding.resource_name != CLUSTER_NAME:
        return _invalid(f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
    if not binding.resource_name:
        return _invalid("Invalid empty resource name")
    # AclAuthorizer.validateAclBinding (the name becomes a znode name), and what ZooKeeper itself refuses.
    name = binding.resource_name
    if "/" in name:
        return _invalid(f"Failed to create ACL: ACL binding contains invalid resource name: {name}")
    if name in (".", "..") or any(_zookeeper_refuses(char) for char in name):
        return _invalid(f"Failed to create ACL: resource name {name!r} cannot be stored as a znode name")
    # AclEntry's constructor (SecurityUtils.parseKafkaPrincipal).
    try:
        parse_principal(binding.principal)
    except ValueError as error:
        return _invalid(f"Failed to create ACL: {error}")
    if binding.host is None:
        return _invalid("Invalid null host")
    return None


def validate_filter(filter_: AclBindingFilter, api_version: int | None = None) -> AclError | None:
    """The checks DescribeAcls and DeleteAcls make on a filter; None if it is usable.

    Kafka refuses UNKNOWN anywhere (DescribeAclsRequest/DeleteAclsRequest.normalizeAndValidate,
    AclControlManager.validateFilter) and, in version 0, any pattern type but LITERAL and ANY (apply
    ``filter_for_version`` first: version 0's ANY means LITERAL).
    """
    if api_version == 0 and filter_.pattern_type not in (PatternType.LITERAL, PatternType.ANY):
        pattern_name = filter_.pattern_type.name if filter_.pattern_type is not None else "ANY"
        return _unsupported(f"Version 0 does not support pattern type {pattern_name} "
                            "(only LITERAL and ANY are supported)")
    if filter_.resource_type == ResourceType.UNKNOWN or filter_.pattern_type == PatternType.UNKNOWN:
        return _invalid("Unknown patternFilter.")
    if filter_.operation == Operation.UNKNOWN or filter_.permission == Permission.UNKNOWN:
        return _invalid("Unknown entryFilter.")
    return None


def filter_for_version(filter_: AclBindingFilter, api_version: int) -> AclBindingFilter:
    """Describe/DeleteAcls version 0 had no pattern types: its ANY means LITERAL (the wildcard ``*`` is LITERAL)."""
    if api_version == 0 and filter_.pattern_type == PatternType.ANY:
        return AclBindingFilter(filter_.resource_type, filter_.resource_name, PatternType.LITERAL,
                                filter_.principal, filter_.host, filter_.operation, filter_.permission)
    return filter_


# --------------------------------------------------------------------------- the authorizer

_Pattern = tuple[ResourceType, PatternType, str]
# AclAuthorizer's ResourceTypeKey (ace, resourceType, patternType), flattened.
_TypeKey = tuple[str, str, Operation, Permission, ResourceType, PatternType]


def _check_args(operation: Operation, resource_type: ResourceType) -> None:
    # SecurityUtils.authorizeByResourceTypeCheckArgs; for authorize() such values are a caller's bug.
    if resource_type in (ResourceType.ANY, ResourceType.UNKNOWN):
        raise ValueError(f"a concrete resource type is needed, not {resource_type!r}")
    if operation in (Operation.ANY, Operation.UNKNOWN):
        raise ValueError(f"a concrete operation is needed, not {operation!r}")


class AclRules:
    """A set of ACL bindings and Kafka's AclAuthorizer decisions over them.

    Indexes: per pattern type and resource type, name -> entries (AclAuthorizer's aclCache, for
    ``authorize``) and (principal, host, operation, permission, resource type, pattern type) ->
    names (its resourceCache, for ``authorize_any``). Single-threaded use, or one writer and
    readers that tolerate seeing an update half-applied.
    """

    def __init__(self, bindings: Iterable[AclBinding] = (), super_users: Iterable[str] | str = (),
                 allow_everyone_if_no_acl_found: bool = False) -> None:
        self.super_users: frozenset[str] = (parse_super_users(super_users) if isinstance(super_users, str)
                                            else frozenset(super_users))
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self._acls: dict[PatternType, dict[ResourceType, dict[str, set[AccessControlEntry]]]] = {
            PatternType.LITERAL: {}, PatternType.PREFIXED: {},
        }
        self._names: dict[_TypeKey, set[str]] = {}
        self._count = 0
        self.add(bindings)

    # ---- contents

    def __len__(self) -> int:
        return self._count

    def __contains__(self, binding: object) -> bool:
        if not isinstance(binding, AclBinding):
            return False
        return binding.entry in self.entries(binding.resource_type, binding.pattern_type, binding.resource_name)

    def __iter__(self) -> Iterator[AclBinding]:
        return iter(self.bindings())

    def resources(self) -> list[_Pattern]:
        """Every (resource type, pattern type, name) with at least one ACL (AclAuthorizer's aclCache keys)."""
        return sorted((rt, pt, name) for pt, by_type in self._acls.items() for rt, by_name in by_type.items() for name in by_name)

    def entries(self, resource_type: ResourceType, pattern_type: PatternType, name: str) -> frozenset[AccessControlEntry]:
        """The entries bound to one resource pattern (what its znode holds)."""
        return frozenset(self._acls.get(pattern_type, {}).get(resource_type, {}).get(name, ()))

    def bindings(self) -> list[AclBinding]:
        return self.describe(ANY_FILTER)

    def add(self, bindings: Iterable[AclBinding]) -> list[AclBinding]:
        """Adds bindings (assumed valid: see ``validate_binding``); returns those that were not there yet."""
        added = []
        for binding in bindings:
            if self._add(binding.pattern, binding.entry):
                added.append(binding)
        return added

    def remove(self, bindings: Iterable[AclBinding]) -> list[AclBinding]:
        """Removes bindings; returns those that were there."""
        removed = []
        for binding in bindings:
            if self._remove(binding.pattern, binding.entry):
                removed.append(binding)
        return removed

    def set_entries(self, resource_type: ResourceType, pattern_type: PatternType, name: str,
                    entries: Iterable[_Entry]) -> None:
        """Replaces the entries of one resource pattern, as after reading its znode (AclAuthorizer.updateCache)."""
        pattern = (resource_type, pattern_type, name)
        new = {AccessControlEntry(e.principal, e.host, e.operation, e.permission) for e in entries}
        old = set(self.entries(resource_type, pattern_type, name))
        for entry in old - new:
            self._remove(pattern, entry)
        for entry in new - old:
            self._add(pattern, entry)

    def _add(self, pattern: _Pattern, entry: AccessControlEntry) -> bool:
        rt, pt, name = pattern
        if pt not in self._acls:
            raise ValueError(f"only LITERAL and PREFIXED bindings can be stored, not {pt!r}")
        entries = self._acls[pt].setdefault(rt, {}).setdefault(name, set())
        if entry in entries:
            return False
        entries.add(entry)
        self._names.setdefault((entry.principal, entry.host, entry.operation, entry.permission, rt, pt), set()).add(name)
        self._count += 1
        return True

    def _remove(self, pattern: _Pattern, entry: AccessControlEntry) -> bool:
        rt, pt, name = pattern
        by_name = self._acls.get(pt, {}).get(rt)
        entries = by_name.get(name) if by_name is not None else None
        if by_name is None or entries is None or entry not in entries:
            return False
        entries.discard(entry)
        if not entries:
            del by_name[name]
            if not by_name:
                del self._acls[pt][rt]
        key = (entry.principal, entry.host, entry.operation, entry.permission, rt, pt)
        names = self._names[key]
        names.discard(name)
        if not names:
            del self._names[key]
        self._count -= 1
        return True

    # ---- DescribeAcls / DeleteAcls

    def describe(self, filter_: AclBindingFilter) -> list[AclBinding]:
        """AclAuthorizer.acls(filter): every binding the filter matches, in a stable order."""
        found: list[AclBinding] = []
        for pt, by_type in self._acls.items():
            for rt, by_name in by_type.items():
                for name, entries in by_name.items():
                    if filter_.matches_pattern(rt, pt, name):
                        found.extend(AclBinding.of(rt, pt, name, e) for e in entries if filter_.matches_entry(e))
        return sorted(found)

    def select_for_delete(self, filters: Sequence[AclBindingFilter]) -> list[list[AclBinding]]:
        """What ``delete(filters)`` would remove, per filter, without removing it.

        As AclAuthorizer.deleteAcls: a binding matched by several filters is reported once, under
        the first of them (KRaft's controller would list it under each).
        """
        results: list[list[AclBinding]] = [[] for _ in filters]
        for pt, by_type in self._acls.items():
            for rt, by_name in by_type.items():
                for name, entries in by_name.items():
                    matching = [(i, f) for i, f in enumerate(filters) if f.matches_pattern(rt, pt, name)]
                    if not matching:
                        continue
                    for entry in entries:
                        for i, f in matching:
                            if f.matches_entry(entry):
                                results[i].append(AclBinding.of(rt, pt, name, entry))
                                break
        for result in results:
            result.sort()
        return results

    def delete(self, filters: Sequence[AclBindingFilter]) -> list[list[AclBinding]]:
        """DeleteAcls: removes every binding some filter matches; returns, per filter, the bindings it removed."""
        results = self.select_for_delete(filters)
        for result in results:
            self.remove(result)
        return results

    # ---- authorization

    def is_super_user(self, principal: str) -> bool:
        return principal in self.super_users

    def _matching_entries(self, resource_type: ResourceType, name: str) -> list[set[AccessControlEntry]]:
        # AclAuthorizer.matchingAcls: prefixed patterns prefixing the name, the literal wildcard, the literal name.
        found: list[set[AccessControlEntry]] = []
        prefixed = self._acls[PatternType.PREFIXED].get(resource_type)
        if prefixed:
            if len(prefixed) < len(name):
                found.extend(entries for prefix, entries in prefixed.items() if name.startswith(prefix))
            else:
                for end in range(1, len(name) + 1):
                    entries = prefixed.get(name[:end])
                    if entries:
                        found.append(entries)
        literal = self._acls[PatternType.LITERAL].get(resource_type)
        if literal:
            wildcard = literal.get(WILDCARD_RESOURCE)
            if wildcard:
                found.append(wildcard)
            if name != WILDCARD_RESOURCE:
                exact = literal.get(name)
                if exact:
                    found.append(exact)
        return found

    def authorize(self, principal: str, host: str, operation: Operation, resource_type: ResourceType, resource_name: str) -> bool:
        """AclAuthorizer.authorizeAction for a LITERAL resource name.

        ``principal`` is ``Type:name`` (``User:alice``); ``host`` the client's address as Java's
        InetAddress.getHostAddress writes it (``10.0.0.1``; IPv6 uncompressed, ``0:0:0:0:0:0:0:1``),
        since ACL hosts are compared as strings.
        """
        _check_args(operation, resource_type)
        if principal in self.super_users:
            return True
        groups = self._matching_entries(resource_type, resource_name)
        if not groups:
            return self.allow_everyone_if_no_acl_found
        allow_ops = IMPLIED_BY.get(operation, frozenset((operation,)))
        allowed = False
        for entries in groups:
            for e in entries:
                if (e.principal != principal and e.principal != WILDCARD_PRINCIPAL) or (e.host != host and e.host != WILDCARD_HOST):
                    continue
                if e.permission == Permission.DENY:
                    if e.operation == operation or e.operation == Operation.ALL:
                        return False
                elif e.permission == Permission.ALLOW and not allowed:
                    allowed = e.operation == Operation.ALL or e.operation in allow_ops
        return allowed

    def _names_for(self, principal: str, host: str, operation: Operation, permission: Permission,
                   resource_type: ResourceType, pattern_type: PatternType) -> list[set[str]]:
        # AclAuthorizer.matchingResources: principal or User:*, host or *, operation or ALL.
        found: list[set[str]] = []
        for p in {principal, WILDCARD_PRINCIPAL}:
            for h in {host, WILDCARD_HOST}:
                for o in {operation, Operation.ALL}:
                    names = self._names.get((p, h, o, permission, resource_type, pattern_type))
                    if names:
                        found.append(names)
        return found

    def authorize_any(self, principal: str, host: str, operation: Operation, resource_type: ResourceType) -> bool:
        """AclAuthorizer.authorizeByResourceType: could ``operation`` be allowed on some resource of this type?

        See the module docstring for the exact rules (no operation implication; ``allow.everyone.if.no.acl.found``
        allows unless a LITERAL ``*`` DENY applies, even when other ACLs exist).
        """
        _check_args(operation, resource_type)
        if principal in self.super_users:
            return True
        deny_literals = self._names_for(principal, host, operation, Permission.DENY, resource_type, PatternType.LITERAL)
        if any(WILDCARD_RESOURCE in names for names in deny_literals):
            return False
        if self.allow_everyone_if_no_acl_found:
            return True
        deny_prefixes = self._names_for(principal, host, operation, Permission.DENY, resource_type, PatternType.PREFIXED)
        allow_literals = self._names_for(principal, host, operation, Permission.ALLOW, resource_type, PatternType.LITERAL)
        allow_prefixes = self._names_for(principal, host, operation, Permission.ALLOW, resource_type, PatternType.PREFIXED)
        if not deny_literals and not deny_prefixes:
            return bool(allow_literals or allow_prefixes)

        def dominant_prefixed_deny(name: str) -> bool:
            # A PREFIXED DENY whose name is a prefix of (or equals) ``name``.
            return any(name[:end] in names for end in range(1, len(name) + 1) for names in deny_prefixes)

        for names in allow_prefixes:
            if any(not dominant_prefixed_deny(prefix) for prefix in names):
                return True
        for names in allow_literals:
            for literal in names:
                if literal == WILDCARD_RESOURCE:
                    return True
                if not any(literal in denied for denied in deny_literals) and not dominant_prefixed_deny(literal):
                    return True
        return False


# --------------------------------------------------------------------------- ZooKeeper format

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


def encode_acl_node(entries: Iterable[_Entry]) -> bytes:
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
