"""Kafka's ACL model (coordination/acls/): codes, filters, CreateAcls validation, AclAuthorizer's
decisions (authorizeAction, authorizeByResourceType), Describe/DeleteAcls, and the ZooKeeper format."""

from __future__ import annotations

import orjson
import pytest

from coordination.acls.authorizer import AclRules
from coordination.acls.model import (
    ANY_FILTER,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)
from coordination.acls.parsing import (
    operation_from_name,
    parse_principal,
    parse_super_users,
    permission_from_name,
    resource_type_from_name,
)
from coordination.acls.validation import filter_for_version, validate_binding, validate_filter
from coordination.acls.zk_layout import (
    change_notification,
    decode_acl_node,
    decode_change_notification,
    encode_acl_node,
    zk_acl_paths,
    znode_path,
)

T, G, C, TX = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER, ResourceType.TRANSACTIONAL_ID
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
Op = Operation
ALLOW, DENY = Permission.ALLOW, Permission.DENY
ALICE, BOB = "User:alice", "User:bob"
H1, H2 = "10.0.0.1", "10.0.0.2"


def acl(name: str, op: Operation = Op.READ, perm: Permission = ALLOW, principal: str = ALICE, host: str = "*",
        rt: ResourceType = T, pt: PatternType = LIT) -> AclBinding:
    return AclBinding(rt, name, pt, principal, host, op, perm)


def rules(*bindings: AclBinding, **kwargs: object) -> AclRules:
    return AclRules(bindings, **kwargs)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- codes and names


def test_wire_codes_are_kafkas() -> None:
    assert {m.name: m.value for m in ResourceType} == {
        "UNKNOWN": 0, "ANY": 1, "TOPIC": 2, "GROUP": 3, "CLUSTER": 4, "TRANSACTIONAL_ID": 5, "DELEGATION_TOKEN": 6, "USER": 7}
    assert {m.name: m.value for m in PatternType} == {"UNKNOWN": 0, "ANY": 1, "MATCH": 2, "LITERAL": 3, "PREFIXED": 4}
    assert {m.name: m.value for m in Operation} == {
        "UNKNOWN": 0, "ANY": 1, "ALL": 2, "READ": 3, "WRITE": 4, "CREATE": 5, "DELETE": 6, "ALTER": 7, "DESCRIBE": 8,
        "CLUSTER_ACTION": 9, "DESCRIBE_CONFIGS": 10, "ALTER_CONFIGS": 11, "IDEMPOTENT_WRITE": 12, "CREATE_TOKENS": 13,
        "DESCRIBE_TOKENS": 14}
    assert {m.name: m.value for m in Permission} == {"UNKNOWN": 0, "ANY": 1, "DENY": 2, "ALLOW": 3}


def test_unknown_codes_become_unknown() -> None:
    assert ResourceType.from_code(42) is ResourceType.UNKNOWN
    assert Operation.from_code(99) is Operation.UNKNOWN
    assert Operation.from_code(12) is Operation.IDEMPOTENT_WRITE
    assert PatternType.from_code(-1) is PatternType.UNKNOWN
    assert Permission.from_code(3) is Permission.ALLOW


def test_names_as_security_utils_reads_them() -> None:
    assert operation_from_name("Read") is Op.READ
    assert operation_from_name("READ") is Op.READ
    assert operation_from_name("IdempotentWrite") is Op.IDEMPOTENT_WRITE
    assert operation_from_name("IDEMPOTENTWRITE") is Op.IDEMPOTENT_WRITE
    assert operation_from_name("read") is Op.UNKNOWN
    assert operation_from_name("Frobnicate") is Op.UNKNOWN
    assert permission_from_name("Deny") is DENY
    assert permission_from_name("ALLOW") is ALLOW
    assert resource_type_from_name("TransactionalId") is TX
    assert resource_type_from_name("TRANSACTIONAL_ID") is TX
    assert resource_type_from_name("topic") is T
    assert resource_type_from_name("Nope") is ResourceType.UNKNOWN


def test_principals_and_super_users() -> None:
    assert parse_principal("User:alice") == ("User", "alice")
    assert parse_principal("User:CN=a:b") == ("User", "CN=a:b")
    with pytest.raises(ValueError):
        parse_principal("alice")
    with pytest.raises(ValueError):
        parse_principal("")
    assert parse_super_users("User:admin;User:broker") == {"User:admin", "User:broker"}
    assert parse_super_users(" User:admin ; User:broker;") == {"User:admin", "User:broker"}
    assert parse_super_users("") == frozenset()
    with pytest.raises(ValueError):
        parse_super_users(";User:admin")
    with pytest.raises(ValueError):
        parse_super_users("User:admin;broker")


# --------------------------------------------------------------------------- authorize (authorizeAction)


def test_literal_allow_is_per_principal_and_name() -> None:
    r = rules(acl("orders"))
    assert r.authorize(ALICE, H1, Op.READ, T, "orders")
    assert not r.authorize(BOB, H1, Op.READ, T, "orders")
    assert not r.authorize(ALICE, H1, Op.WRITE, T, "orders")
    assert not r.authorize(ALICE, H1, Op.READ, T, "orders2")
    assert not r.authorize(ALICE, H1, Op.READ, G, "orders")  # another resource type


def test_prefixed_allow_covers_names_starting_with_it() -> None:
    r = rules(acl("app-", pt=PRE))
    assert r.authorize(ALICE, H1, Op.READ, T, "app-1")
    assert r.authorize(ALICE, H1, Op.READ, T, "app-")
    assert not r.authorize(ALICE, H1, Op.READ, T, "app")
    assert not r.authorize(ALICE, H1, Op.READ, T, "xapp-1")


def test_prefixed_lookup_works_both_ways() -> None:
    # Few prefixes and a long name, many prefixes and a short name: both index walks find the same ACLs.
    few = rules(acl("a", pt=PRE))
    assert few.authorize(ALICE, H1, Op.READ, T, "a" + "x" * 50)
    many = rules(*(acl(f"p{i}", pt=PRE) for i in range(20)), acl("ab", pt=PRE))
    assert many.authorize(ALICE, H1, Op.READ, T, "abc")
    assert not many.authorize(ALICE, H1, Op.READ, T, "ac")


def test_wildcard_resource_is_a_literal_star() -> None:
    r = rules(acl("*"))
    assert r.authorize(ALICE, H1, Op.READ, T, "anything")
    prefixed_star = rules(acl("*", pt=PRE))
    assert not prefixed_star.authorize(ALICE, H1, Op.READ, T, "anything")  # a prefixed "*" only prefixes "*..."
    assert prefixed_star.authorize(ALICE, H1, Op.READ, T, "*x")


def test_wildcard_principal_is_user_star_only() -> None:
    assert rules(acl("orders", principal="User:*")).authorize(BOB, H1, Op.READ, T, "orders")
    assert not rules(acl("orders", principal="Group:*")).authorize("Group:ops", H1, Op.READ, T, "orders")
    # As in AclAuthorizer.matchingAclExists: an ACL for User:* applies to every principal, of any type.
    assert rules(acl("orders", principal="User:*")).authorize("Group:ops", H1, Op.READ, T, "orders")


def test_host_matches_exactly_or_star() -> None:
    r = rules(acl("orders", host=H1))
    assert r.authorize(ALICE, H1, Op.READ, T, "orders")
    assert not r.authorize(ALICE, H2, Op.READ, T, "orders")
    assert rules(acl("orders", host="*")).authorize(ALICE, H2, Op.READ, T, "orders")


def test_deny_wins() -> None:
    allow = acl("orders")
    assert not rules(allow, acl("orders", perm=DENY)).authorize(ALICE, H1, Op.READ, T, "orders")
    assert not rules(allow, acl("ord", pt=PRE, perm=DENY)).authorize(ALICE, H1, Op.READ, T, "orders")  # prefixed deny, literal allow
    assert not rules(allow, acl("*", perm=DENY, principal="User:*")).authorize(ALICE, H1, Op.READ, T, "orders")
    assert not rules(allow, acl("orders", op=Op.ALL, perm=DENY)).authorize(ALICE, H1, Op.READ, T, "orders")
    assert not rules(acl("orders", op=Op.ALL), acl("orders", perm=DENY, host=H1)).authorize(ALICE, H1, Op.READ, T, "orders")
    # A deny that does not apply (other operation, principal or host) leaves the allow standing.
    assert rules(allow, acl("orders", op=Op.WRITE, perm=DENY)).authorize(ALICE, H1, Op.READ, T, "orders")
    assert rules(allow, acl("orders", perm=DENY, principal=BOB)).authorize(ALICE, H1, Op.READ, T, "orders")
    assert rules(allow, acl("orders", perm=DENY, host=H2)).authorize(ALICE, H1, Op.READ, T, "orders")


def test_implied_describe() -> None:
    for op in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER):
        assert rules(acl("orders", op=op)).authorize(ALICE, H1, Op.DESCRIBE, T, "orders"), op
    for op in (Op.CREATE, Op.ALTER_CONFIGS, Op.DESCRIBE_CONFIGS):
        assert not rules(acl("orders", op=op)).authorize(ALICE, H1, Op.DESCRIBE, T, "orders"), op
    # Implication widens allows only: DENY READ does not deny DESCRIBE.
    assert rules(acl("orders", op=Op.DESCRIBE), acl("orders", perm=DENY)).authorize(ALICE, H1, Op.DESCRIBE, T, "orders")
    # ... and the implied operation does not give back the implying one.
    assert not rules(acl("orders", op=Op.DESCRIBE)).authorize(ALICE, H1, Op.READ, T, "orders")


def test_implied_describe_configs() -> None:
    assert rules(acl("orders", op=Op.ALTER_CONFIGS)).authorize(ALICE, H1, Op.DESCRIBE_CONFIGS, T, "orders")
    assert not rules(acl("orders", op=Op.DESCRIBE)).authorize(ALICE, H1, Op.DESCRIBE_CONFIGS, T, "orders")
    assert not rules(acl("orders", op=Op.ALTER)).authorize(ALICE, H1, Op.DESCRIBE_CONFIGS, T, "orders")
    assert not rules(acl("orders", op=Op.DESCRIBE_CONFIGS)).authorize(ALICE, H1, Op.ALTER_CONFIGS, T, "orders")


def test_all_allows_every_operation_and_nothing_else_is_implied() -> None:
    r = rules(acl("orders", op=Op.ALL))
    for op in (Op.READ, Op.WRITE, Op.DESCRIBE, Op.DELETE, Op.ALTER_CONFIGS):
        assert r.authorize(ALICE, H1, op, T, "orders")
    cluster_write = rules(acl("kafka-cluster", op=Op.WRITE, rt=C))
    assert not cluster_write.authorize(ALICE, H1, Op.IDEMPOTENT_WRITE, C, "kafka-cluster")


def test_super_users_bypass_acls() -> None:
    r = rules(acl("orders", perm=DENY, principal="User:admin"), super_users="User:admin;User:broker")
    assert r.authorize("User:admin", H1, Op.READ, T, "orders")
    assert r.authorize("User:broker", H1, Op.ALTER, C, "kafka-cluster")
    assert not r.authorize(ALICE, H1, Op.READ, T, "orders")
    assert r.is_super_user("User:admin") and not r.is_super_user("User:Admin")


def test_allow_everyone_if_no_acl_found() -> None:
    assert not rules().authorize(ALICE, H1, Op.READ, T, "orders")
    everyone = rules(allow_everyone_if_no_acl_found=True)
    assert everyone.authorize(ALICE, H1, Op.READ, T, "orders")
    # Any ACL on the resource, for anyone and any operation, turns the default off for it...
    others = rules(acl("orders", op=Op.WRITE, principal=BOB), allow_everyone_if_no_acl_found=True)
    assert not others.authorize(ALICE, H1, Op.READ, T, "orders")
    via_prefix = rules(acl("ord", pt=PRE, op=Op.WRITE, principal=BOB), allow_everyone_if_no_acl_found=True)
    assert not via_prefix.authorize(ALICE, H1, Op.READ, T, "orders")
    # ... but ACLs on other resources (or types) do not.
    assert others.authorize(ALICE, H1, Op.READ, T, "payments")
    assert others.authorize(ALICE, H1, Op.READ, G, "orders")
    # And without the setting, an ACL elsewhere does not open this resource either.
    assert not rules(acl("payments")).authorize(ALICE, H1, Op.READ, T, "orders")


def test_authorize_rejects_filter_values() -> None:
    with pytest.raises(ValueError):
        rules().authorize(ALICE, H1, Op.ANY, T, "orders")
    with pytest.raises(ValueError):
        rules().authorize(ALICE, H1, Op.READ, ResourceType.ANY, "orders")


# --------------------------------------------------------------------------- authorize_any (authorizeByResourceType)


@pytest.mark.parametrize("bindings, expected", [
    ((), False),
    ((acl("orders", op=Op.WRITE),), True),
    ((acl("app-", op=Op.WRITE, pt=PRE),), True),
    ((acl("orders", op=Op.ALL),), True),
    ((acl("orders", op=Op.WRITE, principal="User:*"),), True),
    ((acl("orders", op=Op.WRITE, host=H2),), False),
    ((acl("orders", op=Op.WRITE, principal=BOB),), False),
    ((acl("orders", op=Op.READ),), False),  # no implication between operations
    ((acl("orders", op=Op.WRITE, rt=G),), False),
    ((acl("orders", op=Op.WRITE), acl("orders", op=Op.WRITE, perm=DENY)), False),
    ((acl("orders", op=Op.WRITE), acl("ord", op=Op.WRITE, perm=DENY, pt=PRE)), False),
    ((acl("orders", op=Op.WRITE), acl("orders-", op=Op.WRITE, perm=DENY, pt=PRE)), True),
    ((acl("orders", op=Op.WRITE), acl("payments", op=Op.WRITE, perm=DENY)), True),
    ((acl("orders", op=Op.WRITE), acl("*", op=Op.WRITE, perm=DENY)), False),
    ((acl("orders", op=Op.WRITE), acl("*", op=Op.ALL, perm=DENY, principal="User:*")), False),
    ((acl("app", op=Op.WRITE, pt=PRE), acl("ap", op=Op.WRITE, perm=DENY, pt=PRE)), False),
    ((acl("app", op=Op.WRITE, pt=PRE), acl("app", op=Op.WRITE, perm=DENY, pt=PRE)), False),
    ((acl("ap", op=Op.WRITE, pt=PRE), acl("app", op=Op.WRITE, perm=DENY, pt=PRE)), True),
    ((acl("app", op=Op.WRITE, pt=PRE), acl("app", op=Op.WRITE, perm=DENY)), True),  # a literal deny leaves the rest of the prefix
    ((acl("*", op=Op.WRITE), acl("a", op=Op.WRITE, perm=DENY, pt=PRE)), True),  # Kafka: a literal "*" allow survives prefix denies
    ((acl("orders", op=Op.WRITE), acl("orders", op=Op.WRITE, perm=DENY, principal=BOB)), True),
])
def test_authorize_any(bindings: tuple[AclBinding, ...], expected: bool) -> None:
    assert rules(*bindings).authorize_any(ALICE, H1, Op.WRITE, T) is expected


def test_authorize_any_super_users_and_allow_everyone() -> None:
    deny_all = acl("*", op=Op.WRITE, perm=DENY)
    assert rules(deny_all, super_users="User:alice").authorize_any(ALICE, H1, Op.WRITE, T)
    assert rules(allow_everyone_if_no_acl_found=True).authorize_any(ALICE, H1, Op.WRITE, T)
    # Kafka allows as soon as the setting is on, even with a non-wildcard deny in place...
    assert rules(acl("orders", op=Op.WRITE, perm=DENY), allow_everyone_if_no_acl_found=True).authorize_any(ALICE, H1, Op.WRITE, T)
    # ... unless a literal "*" deny applies.
    assert not rules(deny_all, allow_everyone_if_no_acl_found=True).authorize_any(ALICE, H1, Op.WRITE, T)
    with pytest.raises(ValueError):
        rules().authorize_any(ALICE, H1, Op.WRITE, ResourceType.ANY)
    with pytest.raises(ValueError):
        rules().authorize_any(ALICE, H1, Op.UNKNOWN, T)


def test_authorize_any_follows_removals() -> None:
    allow, deny = acl("orders", op=Op.WRITE), acl("orders", op=Op.WRITE, perm=DENY)
    r = rules(allow, deny)
    assert not r.authorize_any(ALICE, H1, Op.WRITE, T)
    r.remove([deny])
    assert r.authorize_any(ALICE, H1, Op.WRITE, T)
    r.remove([allow])
    assert not r.authorize_any(ALICE, H1, Op.WRITE, T)


# --------------------------------------------------------------------------- filters, describe, delete

LIT_FOO, LIT_STAR, LIT_FOOD = acl("foo"), acl("*"), acl("food")
PRE_F, PRE_FOO, PRE_FOOBAR = acl("f", pt=PRE), acl("foo", pt=PRE), acl("foo-bar", pt=PRE)
GROUP_FOO = acl("foo", rt=G)
ALL = (LIT_FOO, LIT_STAR, LIT_FOOD, PRE_F, PRE_FOO, PRE_FOOBAR, GROUP_FOO)


def test_match_filter_is_what_applies_to_a_resource() -> None:
    match = AclBindingFilter(T, "foo", PatternType.MATCH)
    assert [b for b in ALL if match.matches(b)] == [LIT_FOO, LIT_STAR, PRE_F, PRE_FOO]
    assert [b for b in ALL if AclBindingFilter(T, None, PatternType.MATCH).matches(b)] == [b for b in ALL if b.resource_type == T]


def test_any_and_exact_pattern_filters() -> None:
    assert [b for b in ALL if AclBindingFilter(T, "foo", PatternType.ANY).matches(b)] == [LIT_FOO, PRE_FOO]
    assert [b for b in ALL if AclBindingFilter(T, "foo", LIT).matches(b)] == [LIT_FOO]
    assert [b for b in ALL if AclBindingFilter(T, "*", LIT).matches(b)] == [LIT_STAR]
    assert [b for b in ALL if AclBindingFilter(T, None, PRE).matches(b)] == [PRE_F, PRE_FOO, PRE_FOOBAR]
    assert [b for b in ALL if AclBindingFilter(ResourceType.ANY, "foo", LIT).matches(b)] == [LIT_FOO, GROUP_FOO]
    assert all(ANY_FILTER.matches(b) for b in ALL)
    assert all(AclBindingFilter(None, None, None, None, None, None, None).matches(b) for b in ALL)


def test_entry_filter_fields() -> None:
    b = acl("foo", op=Op.WRITE, perm=DENY, principal=BOB, host=H1)
    assert AclBindingFilter(principal=BOB, host=H1, operation=Op.WRITE, permission=DENY).matches(b)
    assert not AclBindingFilter(principal=ALICE).matches(b)
    assert not AclBindingFilter(host="*").matches(b)  # no wildcard semantics in filters
    assert not AclBindingFilter(operation=Op.ALL).matches(b)
    assert not AclBindingFilter(permission=ALLOW).matches(b)
    assert b.to_filter().matches(b) and b.to_filter().indefinite_field() is None


def test_indefinite_field() -> None:
    assert ANY_FILTER.indefinite_field() == "Resource type is ANY."
    assert AclBindingFilter(T, None, LIT).indefinite_field() == "Resource name is NULL."
    assert AclBindingFilter(T, "foo", PatternType.MATCH).indefinite_field() == "Resource pattern type is MATCH."
    assert AclBindingFilter(T, "foo", LIT, ALICE, "*").indefinite_field() == "Operation is ANY"


def test_describe() -> None:
    r = rules(*ALL)
    assert r.describe(AclBindingFilter(T, "foo", PatternType.MATCH)) == sorted([LIT_FOO, LIT_STAR, PRE_F, PRE_FOO])
    assert r.describe(AclBindingFilter(G)) == [GROUP_FOO]
    assert r.describe(ANY_FILTER) == sorted(ALL) == r.bindings()
    assert r.describe(AclBindingFilter(principal=BOB)) == []


def test_delete_reports_per_filter_first_match_wins() -> None:
    r = rules(*ALL)
    filters = [AclBindingFilter(T, "foo", LIT), AclBindingFilter(T, "foo", PatternType.MATCH), AclBindingFilter(T, "nothing", LIT)]
    planned = r.select_for_delete(filters)
    assert len(r) == len(ALL)  # planning removes nothing
    result = r.delete(filters)
    assert result == planned
    assert result == [[LIT_FOO], sorted([LIT_STAR, PRE_F, PRE_FOO]), []]
    assert r.bindings() == sorted([LIT_FOOD, PRE_FOOBAR, GROUP_FOO])
    assert r.delete([ANY_FILTER]) == [sorted([LIT_FOOD, PRE_FOOBAR, GROUP_FOO])]
    assert len(r) == 0 and r.resources() == []


def test_delete_by_entry_filter_keeps_others_on_the_resource() -> None:
    keep, drop = acl("foo", op=Op.WRITE), acl("foo", op=Op.READ)
    r = rules(keep, drop)
    assert r.delete([AclBindingFilter(T, "foo", LIT, operation=Op.READ)]) == [[drop]]
    assert r.bindings() == [keep]
    assert r.authorize(ALICE, H1, Op.WRITE, T, "foo") and not r.authorize(ALICE, H1, Op.READ, T, "foo")


def test_contents_add_remove_set_entries() -> None:
    r = rules()
    assert r.add([LIT_FOO, LIT_FOO, PRE_F]) == [LIT_FOO, PRE_F]
    assert r.add([LIT_FOO]) == []
    assert len(r) == 2 and LIT_FOO in r and LIT_STAR not in r
    assert r.resources() == [(T, LIT, "foo"), (T, PRE, "f")]
    assert r.entries(T, LIT, "foo") == {LIT_FOO.entry}
    new_entry = AccessControlEntry(BOB, H1, Op.WRITE, ALLOW)
    r.set_entries(T, LIT, "foo", [new_entry])
    assert r.entries(T, LIT, "foo") == {new_entry}
    assert r.authorize(BOB, H1, Op.WRITE, T, "foo") and not r.authorize(BOB, H1, Op.WRITE, T, "goo")
    assert r.authorize(ALICE, H1, Op.READ, T, "foo")  # still allowed by the prefixed "f"
    assert r.authorize_any(BOB, H1, Op.WRITE, T)
    r.set_entries(T, LIT, "foo", [])
    assert r.resources() == [(T, PRE, "f")] and not r.authorize_any(BOB, H1, Op.WRITE, T)
    assert r.remove([PRE_F, PRE_F]) == [PRE_F] and len(r) == 0
    assert not r.authorize(ALICE, H1, Op.READ, T, "foo")
    with pytest.raises(ValueError):
        r.add([acl("foo", pt=PatternType.MATCH)])


# --------------------------------------------------------------------------- validation


@pytest.mark.parametrize("binding, message", [
    (acl("foo", rt=ResourceType.UNKNOWN), "Invalid resourceType UNKNOWN"),
    (acl("foo", rt=ResourceType.ANY), "Invalid resourceType ANY"),
    (acl("foo", pt=PatternType.ANY), "Invalid patternType ANY"),
    (acl("foo", pt=PatternType.MATCH), "Invalid patternType MATCH"),
    (acl("foo", pt=PatternType.UNKNOWN), "Invalid patternType UNKNOWN"),
    (acl("foo", op=Op.ANY), "Invalid operation ANY"),
    (acl("foo", op=Op.UNKNOWN), "Invalid operation UNKNOWN"),
    (acl("foo", perm=Permission.ANY), "Invalid permissionType ANY"),
    (acl("foo", perm=Permission.UNKNOWN), "Invalid permissionType UNKNOWN"),
    (acl("my-cluster", op=Op.ALTER, rt=C), "The only valid name for the CLUSTER resource is kafka-cluster"),
    (acl("*", op=Op.ALTER, rt=C), "The only valid name for the CLUSTER resource is kafka-cluster"),
    (acl(""), "Invalid empty resource name"),
    (acl("a/b", rt=G), "invalid resource name: a/b"),
    (acl("..", rt=G), "cannot be stored as a znode name"),
    (acl("a\x00b", rt=G), "cannot be stored as a znode name"),
    (acl("foo", principal="alice"), "principalType:principalName"),
])
def test_invalid_bindings_are_invalid_request(binding: AclBinding, message: str) -> None:
    error = validate_binding(binding)
    assert error is not None
    assert (error.name, error.code) == ("INVALID_REQUEST", 42)
    assert message in error.message


def test_valid_bindings() -> None:
    for binding in (acl("foo"), acl("*"), acl("app-", pt=PRE), acl("kafka-cluster", op=Op.IDEMPOTENT_WRITE, rt=C),
                    acl("tx", op=Op.WRITE, rt=TX, principal="User:*"), acl("grp.1", rt=G, principal="User:CN=x,O=y")):
        assert validate_binding(binding) is None, binding
        assert validate_binding(binding, api_version=1) is None


def test_version_0_only_knows_literal() -> None:
    error = validate_binding(acl("app-", pt=PRE), api_version=0)
    assert error is not None and (error.name, error.code) == ("UNSUPPORTED_VERSION", 35)
    assert validate_binding(acl("app"), api_version=0) is None
    v0_any = filter_for_version(AclBindingFilter(T, "foo", PatternType.ANY), 0)
    assert v0_any.pattern_type is LIT and validate_filter(v0_any, 0) is None
    assert filter_for_version(AclBindingFilter(T, "foo", PatternType.ANY), 1).pattern_type is PatternType.ANY
    error = validate_filter(AclBindingFilter(T, "foo", PatternType.MATCH), 0)
    assert error is not None and error.name == "UNSUPPORTED_VERSION"


def test_filter_validation() -> None:
    assert validate_filter(ANY_FILTER) is None
    assert validate_filter(AclBindingFilter(T, "foo", PatternType.MATCH)) is None
    for bad in (AclBindingFilter(ResourceType.UNKNOWN), AclBindingFilter(pattern_type=PatternType.UNKNOWN),
                AclBindingFilter(operation=Op.UNKNOWN), AclBindingFilter(permission=Permission.UNKNOWN)):
        error = validate_filter(bad)
        assert error is not None and error.name == "INVALID_REQUEST", bad


# --------------------------------------------------------------------------- ZooKeeper


def test_znode_paths() -> None:
    assert znode_path(T, LIT, "topic-1") == "/kafka-acl/Topic/topic-1"
    assert znode_path(C, LIT, "kafka-cluster") == "/kafka-acl/Cluster/kafka-cluster"
    assert znode_path(G, PRE, "group-1") == "/kafka-acl-extended/prefixed/Group/group-1"
    assert znode_path(TX, LIT, "tx") == "/kafka-acl/TransactionalId/tx"
    assert znode_path(ResourceType.DELEGATION_TOKEN, LIT, "t") == "/kafka-acl/DelegationToken/t"
    assert znode_path(ResourceType.USER, PRE, "u") == "/kafka-acl-extended/prefixed/User/u"
    assert znode_path(T, LIT, "*") == "/kafka-acl/Topic/*"
    for bad in ((T, LIT, "a/b"), (T, PatternType.MATCH, "a"), (ResourceType.ANY, LIT, "a"), (T, LIT, "")):
        with pytest.raises(ValueError):
            znode_path(*bad)


def test_acl_root_paths() -> None:
    paths = zk_acl_paths()
    assert paths[0] == "/kafka-acl"
    assert {"/kafka-acl/Topic", "/kafka-acl/User", "/kafka-acl-extended", "/kafka-acl-extended/prefixed",
            "/kafka-acl-extended/prefixed/TransactionalId", "/kafka-acl-changes", "/kafka-acl-extended-changes"} <= set(paths)
    assert len(paths) == 2 * 6 + 5
    assert all(paths.index(p.rsplit("/", 1)[0]) < i for i, p in enumerate(paths) if p.count("/") > 1)


def test_acl_node_is_written_as_kafka_writes_it() -> None:
    entries = [AccessControlEntry(ALICE, "*", Op.READ, ALLOW)]
    assert encode_acl_node(entries) == (
        b'{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow","operation":"Read","host":"*"}]}')
    names = orjson.loads(encode_acl_node([acl("x", op=op) for op in (Op.CLUSTER_ACTION, Op.IDEMPOTENT_WRITE, Op.DESCRIBE_CONFIGS, Op.ALL)]))
    assert sorted(e["operation"] for e in names["acls"]) == ["All", "ClusterAction", "DescribeConfigs", "IdempotentWrite"]
    assert orjson.loads(encode_acl_node([acl("x", perm=DENY)]))["acls"][0]["permissionType"] == "Deny"


def test_decode_kafkas_own_test_document() -> None:
    # AclEntryTest.AclJson (Kafka's core tests): spaces, "READ" in capitals, keys in any order.
    data = b"""{"version": 1, "acls": [{"host": "host1","permissionType": "Deny","operation": "READ", "principal": "User:alice"  },
    {  "host":  "*" ,  "permissionType": "Allow",  "operation":  "Read", "principal": "User:bob"  },
    {  "host": "host1",  "permissionType": "Deny",  "operation":   "Read" ,  "principal": "User:bob"}]}"""
    assert decode_acl_node(T, LIT, "t", data) == sorted([
        AclBinding(T, "t", LIT, ALICE, "host1", Op.READ, DENY),
        AclBinding(T, "t", LIT, BOB, "*", Op.READ, ALLOW),
        AclBinding(T, "t", LIT, BOB, "host1", Op.READ, DENY),
    ])


def test_acl_node_round_trip_and_errors() -> None:
    bindings = [acl("app-", op=op, perm=perm, principal=p, host=h, pt=PRE)
                for op in (Op.READ, Op.ALL, Op.ALTER_CONFIGS) for perm in (ALLOW, DENY) for p in (ALICE, "User:*") for h in ("*", H1)]
    assert decode_acl_node(T, PRE, "app-", encode_acl_node(bindings)) == sorted(bindings)
    assert decode_acl_node(T, LIT, "t", b"") == [] and decode_acl_node(T, LIT, "t", None) == []
    unknown = decode_acl_node(T, LIT, "t", b'{"version":1,"acls":[{"principal":"User:a","permissionType":"Allow","operation":"Fly","host":"*"}]}')
    assert unknown[0].operation is Op.UNKNOWN
    for bad in (b"not json", b'{"version":2,"acls":[]}', b'{"version":1}',
                b'{"version":1,"acls":[{"principal":"alice","permissionType":"Allow","operation":"Read","host":"*"}]}',
                b'{"version":1,"acls":[{"principal":"User:a","permissionType":"Allow","operation":"Read"}]}'):
        with pytest.raises(ValueError):
            decode_acl_node(T, LIT, "t", bad)


def test_change_notifications() -> None:
    assert change_notification(T, LIT, "some-topic") == ("/kafka-acl-changes/acl_changes_", b"TOPIC:some-topic")
    assert change_notification(TX, LIT, "tx") == ("/kafka-acl-changes/acl_changes_", b"TRANSACTIONAL_ID:tx")
    path, data = change_notification(T, PRE, "some-topic")
    assert path == "/kafka-acl-extended-changes/acl_changes_"
    assert data == b'{"version":1,"resourceType":"TOPIC","name":"some-topic","patternType":"PREFIXED"}'
    for rt, pt, name in ((T, LIT, "some-topic"), (TX, LIT, "a:b"), (G, PRE, "g-"), (ResourceType.DELEGATION_TOKEN, PRE, "d")):
        node, body = change_notification(rt, pt, name)
        assert decode_change_notification(node + "0000000007", body) == (rt, pt, name)
    with pytest.raises(ValueError):
        change_notification(T, PatternType.ANY, "x")


def test_decode_change_notifications_as_kafka() -> None:
    # LiteralAclStoreTest.shouldDecodeResourceUsingTwoPartLogic
    name = "PREFIXED:this, including the PREFIXED part, is a valid two part group name"
    assert decode_change_notification("/kafka-acl-changes/acl_changes_0000000001", b"GROUP:" + name.encode()) == (G, LIT, name)
    assert decode_change_notification("/kafka-acl-changes", b"Topic:t") == (T, LIT, "t")  # pre-2.0 Kafka wrote "Topic"
    assert decode_change_notification("/kafka-acl-changes", b"TransactionalId:t") == (TX, LIT, "t")
    with pytest.raises(ValueError):
        decode_change_notification("/kafka-acl-changes/acl_changes_1", b"no-separator")
    with pytest.raises(ValueError):
        decode_change_notification("/kafka-acl-extended-changes/acl_changes_1",
                                   b'{"version":2,"resourceType":"TOPIC","name":"a","patternType":"PREFIXED"}')
    with pytest.raises(ValueError):
        decode_change_notification("/elsewhere/acl_changes_1", b"TOPIC:a")
