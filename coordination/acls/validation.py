"""The checks the ACL APIs make before storing an ACL or using a filter, and the errors they
answer.

``validate_binding`` / ``validate_filter``: the checks CreateAcls, DescribeAcls and DeleteAcls
make (CreateAclsRequest.validate, ResourcePattern / AccessControlEntry constructors, AclApis,
AclAuthorizer.validateAclBinding, AclControlManager.validateNewAcl/validateFilter).

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

from dataclasses import dataclass

from coordination.acls.model import (
    CLUSTER_NAME,
    AclBinding,
    AclBindingFilter,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)
from coordination.acls.parsing import parse_principal


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
