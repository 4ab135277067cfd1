"""Kafka's ACL model, pure (no I/O): the enums with their wire codes, the names and
tables every ACL module shares, what an ACL is and what a filter matches.

Why here: the model is shared by the ACL stores (coordination/) and by the broker's request
handlers, so the package imports nothing from broker/. Every rule follows Apache Kafka 3.x;
the classes named below are the ones the behaviour was taken from.

* Codes: ``ResourceType``, ``PatternType``, ``Operation``, ``Permission`` carry the wire codes of
  org.apache.kafka.common.resource.ResourceType / PatternType and
  org.apache.kafka.common.acl.AclOperation / AclPermissionType (``from_code`` maps a code Kafka
  does not know to UNKNOWN, as their ``fromCode`` does).
* ``AclBinding`` is Kafka's AclBinding (ResourcePattern + AccessControlEntry) flattened;
  ``AclBindingFilter`` is AclBindingFilter (ResourcePatternFilter + AccessControlEntryFilter):
  None or ANY matches anything; pattern type MATCH matches a LITERAL binding of the same name, the
  LITERAL wildcard ``*`` and every PREFIXED binding whose name prefixes the filter's name.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Protocol, Self


class CodedEnum(enum.IntEnum):
    """A Kafka ACL enum: its values are the wire codes."""

    @classmethod
    def from_code(cls, code: int) -> Self:
        try:
            return cls(code)
        except ValueError:
            return cls(0)  # every Kafka ACL enum has UNKNOWN = 0


class ResourceType(CodedEnum):
    """org.apache.kafka.common.resource.ResourceType."""

    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(CodedEnum):
    """org.apache.kafka.common.resource.PatternType."""

    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class Operation(CodedEnum):
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


class Permission(CodedEnum):
    """org.apache.kafka.common.acl.AclPermissionType."""

    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


CLUSTER_NAME = "kafka-cluster"  # Resource.CLUSTER_NAME
WILDCARD_RESOURCE = "*"  # ResourcePattern.WILDCARD_RESOURCE
WILDCARD_HOST = "*"  # AclEntry.WILDCARD_HOST
WILDCARD_PRINCIPAL = "User:*"  # AclEntry.WILDCARD_PRINCIPAL (only the User type is a wildcard)

# AclEntry.supportedOperations: what kafka-acls.sh lets one grant per resource type (not enforced by brokers).
SUPPORTED_OPERATIONS: dict[ResourceType, frozenset[Operation]] = {
    ResourceType.TOPIC: frozenset({Operation.READ, Operation.WRITE, Operation.CREATE, Operation.DESCRIBE, Operation.DELETE,
                                   Operation.ALTER, Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS}),
    ResourceType.GROUP: frozenset({Operation.READ, Operation.DESCRIBE, Operation.DELETE, Operation.DESCRIBE_CONFIGS,
                                   Operation.ALTER_CONFIGS}),
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


class EntryFields(Protocol):
    """Anything with an access control entry's four fields (AccessControlEntry, AclBinding)."""

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
    def of(resource_type: ResourceType, pattern_type: PatternType, resource_name: str, entry: EntryFields) -> "AclBinding":
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

    def matches_entry(self, entry: EntryFields) -> bool:
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
