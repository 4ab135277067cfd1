"""Kafka's authorizer: ``AclRules``, a set of ACL bindings and AclAuthorizer's decisions over
them, pure (no I/O; the stores in coordination/acls/store.py feed it).

``AclRules``: AclAuthorizer.authorizeAction (``authorize``) and
AclAuthorizer.authorizeByResourceType (``authorize_any``), its acls() (``describe``) and
deleteAcls() (``delete``). StandardAuthorizerData (KRaft) agrees on every rule used here.

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
"""

from __future__ import annotations

from typing import Iterable, Iterator, Sequence

from coordination.acls.model import (
    ANY_FILTER,
    WILDCARD_HOST,
    WILDCARD_PRINCIPAL,
    WILDCARD_RESOURCE,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    EntryFields,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)
from coordination.acls.parsing import parse_super_users

# ALLOW ACLs that imply the operation (AclAuthorizer.authorizeAction's allowOps; ALL is handled apart).
IMPLIED_BY: dict[Operation, frozenset[Operation]] = {
    Operation.DESCRIBE: frozenset({Operation.DESCRIBE, Operation.READ, Operation.WRITE, Operation.DELETE, Operation.ALTER}),
    Operation.DESCRIBE_CONFIGS: frozenset({Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS}),
}


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
                    entries: Iterable[EntryFields]) -> None:
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
