"""The ACL APIs: DescribeAcls (29), CreateAcls (30), DeleteAcls (31), versions 1-3.

As tests/unit/protocol/test_admin_apis.py: every response shape (and the "everything failed"
answers) is encoded by kio and decoded by kafka-python, field by field; the handlers answer
requests kafka-python encoded, on a real WorkerNode whose ACL store is the local backend's
file, and their answers are decoded by kafka-python. The semantics are Kafka's ZooKeeper-mode
AclAuthorizer's (coordination/acls/ holds the rules; tests/unit/coordination/test_acls.py
checks them one by one). Also the pure part of ``castle acls``: which bindings and filters
its options stand for.
"""

from __future__ import annotations

import argparse
from typing import Any

import pytest

import broker.apis.acls  # noqa: F401  (registers itself)
from broker.admin import acls as acl_cli
from broker.admin.session import UsageError
from broker.dispatch import REGISTRY
from broker.protocol import codec
from broker.protocol.build import build
from coordination.acls.model import AclBinding, AclBindingFilter, Operation, PatternType, Permission, ResourceType
from tests.unit.protocol.test_admin_apis import Broker, check_decodes_independently, kio_request

DESCRIBE, CREATE, DELETE = 29, 30, 31
KEYS = (DESCRIBE, CREATE, DELETE)
VERSIONS = [(key, version) for key in KEYS for version in (1, 2, 3)]
NONE = 0
INVALID_REQUEST = 42
CLUSTER_AUTHORIZATION_FAILED = 31

# Kafka's codes (org.apache.kafka.common.resource / acl).
ANY_TYPE, TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID = 1, 2, 3, 4, 5
ANY_PATTERN, MATCH, LITERAL, PREFIXED = 1, 2, 3, 4
ANY_OP, ALL, READ, WRITE, DESCRIBE_OP, ALTER = 1, 2, 3, 4, 8, 7
ANY_PERMISSION, DENY, ALLOW = 1, 2, 3


# ---------------------------------------------------------------------------- shapes
RESPONSES: dict[int, dict[str, Any]] = {
    DESCRIBE: {"throttle_time": 0, "error_code": 0, "error_message": None, "resources": [
        {"resource_type": TOPIC, "resource_name": "orders", "pattern_type": LITERAL, "acls": [
            {"principal": "User:alice", "host": "*", "operation": READ, "permission_type": ALLOW},
            {"principal": "User:bob", "host": "10.0.0.1", "operation": WRITE, "permission_type": DENY}]},
        {"resource_type": GROUP, "resource_name": "app-", "pattern_type": PREFIXED, "acls": [
            {"principal": "User:*", "host": "*", "operation": ALL, "permission_type": ALLOW}]}]},
    CREATE: {"throttle_time": 0, "results": [{"error_code": 0, "error_message": None},
                                             {"error_code": 42, "error_message": "Invalid empty resource name"}]},
    DELETE: {"throttle_time": 0, "filter_results": [
        {"error_code": 0, "error_message": None, "matching_acls": [
            {"error_code": 0, "error_message": None, "resource_type": TOPIC, "resource_name": "orders",
             "pattern_type": LITERAL, "principal": "User:alice", "host": "*", "operation": READ,
             "permission_type": ALLOW}]},
        {"error_code": 42, "error_message": "Unknown patternFilter.", "matching_acls": []}]},
}


def _filter(resource_type: int = ANY_TYPE, name: str | None = None, pattern_type: int = ANY_PATTERN,
            principal: str | None = None, host: str | None = None, operation: int = ANY_OP,
            permission: int = ANY_PERMISSION) -> dict[str, Any]:
    """A DescribeAcls request / DeleteAcls filter in kafka-python's field names."""
    return {"resource_type_filter": resource_type, "resource_name_filter": name, "pattern_type_filter": pattern_type,
            "principal_filter": principal, "host_filter": host, "operation": operation, "permission_type": permission}


def _creation(resource_type: int, name: str, pattern_type: int = LITERAL, principal: str = "User:alice",
              host: str = "*", operation: int = READ, permission: int = ALLOW) -> dict[str, Any]:
    return {"resource_type": resource_type, "resource_name": name, "resource_pattern_type": pattern_type,
            "principal": principal, "host": host, "operation": operation, "permission_type": permission}


REQUESTS: dict[int, dict[str, Any]] = {
    DESCRIBE: _filter(TOPIC, "orders", LITERAL),
    CREATE: {"creations": [_creation(TOPIC, "orders"), _creation(GROUP, "app-", PREFIXED)]},
    DELETE: {"filters": [_filter(TOPIC, "orders", LITERAL), _filter()]},
}


def test_registered_versions():
    for key in KEYS:
        spec = REGISTRY[key]
        assert (spec.min_version, spec.max_version) == (1, 3), spec.name
        assert spec.error_response is not None and spec.is_async


@pytest.mark.parametrize(("key", "version"), VERSIONS)
def test_response_decodes_independently(key, version):
    check_decodes_independently(build(codec.response_class(key, version), RESPONSES[key]), key, version)


@pytest.mark.parametrize(("key", "version"), VERSIONS)
def test_error_response_decodes_independently(key, version):
    request = kio_request(key, version, REQUESTS[key])
    error_response = REGISTRY[key].error_response
    assert error_response is not None
    theirs = check_decodes_independently(error_response(request, version, CLUSTER_AUTHORIZATION_FAILED), key, version)
    if key == DESCRIBE:
        assert (theirs.error_code, theirs.resources) == (CLUSTER_AUTHORIZATION_FAILED, [])
    elif key == CREATE:
        assert [r.error_code for r in theirs.results] == [CLUSTER_AUTHORIZATION_FAILED] * 2
    else:
        assert [(r.error_code, r.matching_acls) for r in theirs.filter_results] == [(CLUSTER_AUTHORIZATION_FAILED, [])] * 2


def test_flexible_versions_encode_differently():
    """Version 1 is not flexible, 2 and 3 are: the bytes differ, kafka-python reads each the same."""
    bodies = {version: codec.encode_body(build(codec.response_class(DESCRIBE, version), RESPONSES[DESCRIBE]))
              for version in (1, 2, 3)}
    assert bodies[1] != bodies[2] and bodies[2] == bodies[3]
    decoded = [check_decodes_independently(build(codec.response_class(DESCRIBE, v), RESPONSES[DESCRIBE]), DESCRIBE, v)
               for v in (1, 3)]
    assert [(r.resource_name, r.pattern_type, len(r.acls)) for r in decoded[0].resources] == \
           [(r.resource_name, r.pattern_type, len(r.acls)) for r in decoded[1].resources]


# ---------------------------------------------------------------------------- a real worker node
@pytest.fixture(name="broker")
def broker_fixture(tmp_path):
    b = Broker(str(tmp_path / "broker"), {})
    yield b
    b.close()


def _stored(b: Broker) -> list[AclBinding]:
    return b.node.cluster.acls().all()


def _binding(resource_type: int, name: str, pattern_type: int = LITERAL, principal: str = "User:alice",
             host: str = "*", operation: int = READ, permission: int = ALLOW) -> AclBinding:
    return AclBinding(ResourceType(resource_type), name, PatternType(pattern_type), principal, host,
                      Operation(operation), Permission(permission))


def _create(b: Broker, version: int, creations: list[dict[str, Any]]) -> list[tuple[int, str | None]]:
    answer = b.call(CREATE, version, {"creations": creations})
    return [(r.error_code, r.error_message) for r in answer.results]


VALID = [
    _creation(TOPIC, "orders"),
    _creation(TOPIC, "orders", principal="User:bob", operation=WRITE),
    _creation(TOPIC, "*", principal="User:carol", operation=DESCRIBE_OP),
    _creation(TOPIC, "ord", PREFIXED, principal="User:dave", permission=DENY),
    _creation(TOPIC, "x", PREFIXED, principal="User:eve"),
    _creation(GROUP, "orders"),
    _creation(CLUSTER, "kafka-cluster", principal="User:admin", operation=ALTER),
    _creation(TRANSACTIONAL_ID, "tx-1", host="10.0.0.1", operation=WRITE),
]


def _seed(b: Broker) -> None:
    assert [code for code, _ in _create(b, 3, VALID)] == [NONE] * len(VALID)


@pytest.mark.parametrize("version", [1, 2, 3])
def test_create_valid_and_invalid(broker, version):
    creations = [
        _creation(TOPIC, "orders"),
        _creation(CLUSTER, "other", operation=ALTER),  # the only cluster name is kafka-cluster
        _creation(TOPIC, ""),
        _creation(ANY_TYPE, "orders"),
        _creation(TOPIC, "orders", MATCH),
        _creation(TOPIC, "orders", operation=ANY_OP),
        _creation(TOPIC, "orders", permission=0),
        _creation(99, "orders"),  # a code Kafka does not know: UNKNOWN
        _creation(TOPIC, "orders", principal="alice"),
        _creation(TOPIC, "a/b"),
        _creation(GROUP, "app-", PREFIXED, principal="User:*", operation=ALL, permission=DENY),
    ]
    results = _create(broker, version, creations)
    assert [code for code, _ in results] == [NONE] + [INVALID_REQUEST] * 9 + [NONE]
    assert results[0][1] is None and results[-1][1] is None
    messages = [message or "" for _, message in results[1:-1]]
    assert messages[:7] == ["The only valid name for the CLUSTER resource is kafka-cluster", "Invalid empty resource name",
                            "Invalid resourceType ANY", "Invalid patternType MATCH", "Invalid operation ANY",
                            "Invalid permissionType UNKNOWN", "Invalid resourceType UNKNOWN"]
    assert "principalType:principalName" in messages[7] and "a/b" in messages[8]
    assert _stored(broker) == sorted([_binding(TOPIC, "orders"),
                                      _binding(GROUP, "app-", PREFIXED, "User:*", operation=ALL, permission=DENY)])
    # Creating what exists already is a success that changes nothing.
    assert _create(broker, version, creations[:1]) == [(NONE, None)]
    assert len(_stored(broker)) == 2


def _describe(b: Broker, version: int, **wanted: Any) -> tuple[int, str | None, list[tuple[int, str, int, list[tuple]]]]:
    answer = b.call(DESCRIBE, version, _filter(**wanted))
    resources = [(r.resource_type, r.resource_name, r.pattern_type,
                  [(a.principal, a.host, a.operation, a.permission_type) for a in r.acls]) for r in answer.resources]
    return answer.error_code, answer.error_message, resources


@pytest.mark.parametrize("version", [1, 2, 3])
def test_describe_filters_grouped_per_resource(broker, version):
    _seed(broker)
    orders = (TOPIC, "orders", LITERAL, [("User:alice", "*", READ, ALLOW), ("User:bob", "*", WRITE, ALLOW)])
    wildcard = (TOPIC, "*", LITERAL, [("User:carol", "*", DESCRIBE_OP, ALLOW)])
    ord_prefix = (TOPIC, "ord", PREFIXED, [("User:dave", "*", READ, DENY)])
    x_prefix = (TOPIC, "x", PREFIXED, [("User:eve", "*", READ, ALLOW)])
    group = (GROUP, "orders", LITERAL, [("User:alice", "*", READ, ALLOW)])
    cluster = (CLUSTER, "kafka-cluster", LITERAL, [("User:admin", "*", ALTER, ALLOW)])
    txn = (TRANSACTIONAL_ID, "tx-1", LITERAL, [("User:alice", "10.0.0.1", WRITE, ALLOW)])

    assert _describe(broker, version, resource_type=TOPIC, name="orders", pattern_type=LITERAL) == (NONE, None, [orders])
    assert _describe(broker, version, resource_type=TOPIC, name="ord", pattern_type=PREFIXED) == (NONE, None, [ord_prefix])
    assert _describe(broker, version, resource_type=TOPIC, name="ord", pattern_type=LITERAL) == (NONE, None, [])
    # MATCH: what applies to a topic called "orders": its literal ACLs, the literal *, every prefix.
    assert _describe(broker, version, resource_type=TOPIC, name="orders", pattern_type=MATCH) == \
           (NONE, None, [wildcard, ord_prefix, orders])
    # ANY: every pattern type, but the name exactly.
    assert _describe(broker, version, resource_type=TOPIC, name="orders", pattern_type=ANY_PATTERN) == \
           (NONE, None, [orders])
    assert _describe(broker, version, name="orders") == (NONE, None, [orders, group])
    assert _describe(broker, version) == (NONE, None, [wildcard, ord_prefix, orders, x_prefix, group, cluster, txn])
    assert _describe(broker, version, resource_type=TOPIC, pattern_type=PREFIXED) == (NONE, None, [ord_prefix, x_prefix])
    # Entry filters.
    assert _describe(broker, version, principal="User:alice") == (NONE, None, [
        (TOPIC, "orders", LITERAL, orders[3][:1]), group, txn])
    assert _describe(broker, version, host="10.0.0.1") == (NONE, None, [txn])
    assert _describe(broker, version, operation=WRITE, permission=ALLOW) == (NONE, None, [
        (TOPIC, "orders", LITERAL, orders[3][1:]), txn])
    assert _describe(broker, version, permission=DENY) == (NONE, None, [ord_prefix])
    assert _describe(broker, version, resource_type=TOPIC, name="absent", pattern_type=LITERAL) == (NONE, None, [])


@pytest.mark.parametrize("version", [1, 3])
def test_describe_refuses_unknown_filters(broker, version):
    _seed(broker)
    for wanted, message in (({"resource_type": 0}, "Unknown patternFilter."),
                            ({"pattern_type": 0}, "Unknown patternFilter."),
                            ({"pattern_type": 77}, "Unknown patternFilter."),
                            ({"operation": 0}, "Unknown entryFilter."),
                            ({"permission": 0}, "Unknown entryFilter.")):
        assert _describe(broker, version, **wanted) == (INVALID_REQUEST, message, [])


def _delete(b: Broker, version: int, filters: list[dict[str, Any]]) -> list[tuple[int, list[tuple]]]:
    answer = b.call(DELETE, version, {"filters": filters})
    return [(r.error_code, [(m.error_code, m.resource_type, m.resource_name, m.pattern_type, m.principal, m.host,
                             m.operation, m.permission_type) for m in r.matching_acls]) for r in answer.filter_results]


def _removed(resource_type: int, name: str, pattern_type: int, principal: str, host: str, operation: int,
             permission: int) -> tuple:
    return (NONE, resource_type, name, pattern_type, principal, host, operation, permission)


@pytest.mark.parametrize("version", [1, 2, 3])
def test_delete_with_overlapping_filters(broker, version):
    _seed(broker)
    results = _delete(broker, version, [
        _filter(TOPIC, "orders", LITERAL),                 # alice and bob on the topic
        _filter(principal="User:alice"),                   # alice everywhere: her topic ACL is the first filter's
        _filter(TOPIC, "orders", 0),                       # refused: UNKNOWN pattern type
        _filter(TOPIC, "orders", MATCH),                   # also matches orders (reported above), * and ord
        _filter(TOPIC, "orders", LITERAL),                 # the first filter again: nothing left for it
    ])
    assert results == [
        (NONE, [_removed(TOPIC, "orders", LITERAL, "User:alice", "*", READ, ALLOW),
                _removed(TOPIC, "orders", LITERAL, "User:bob", "*", WRITE, ALLOW)]),
        (NONE, [_removed(GROUP, "orders", LITERAL, "User:alice", "*", READ, ALLOW),
                _removed(TRANSACTIONAL_ID, "tx-1", LITERAL, "User:alice", "10.0.0.1", WRITE, ALLOW)]),
        (INVALID_REQUEST, []),
        (NONE, [_removed(TOPIC, "*", LITERAL, "User:carol", "*", DESCRIBE_OP, ALLOW),
                _removed(TOPIC, "ord", PREFIXED, "User:dave", "*", READ, DENY)]),
        (NONE, []),
    ]
    assert _stored(broker) == sorted([_binding(TOPIC, "x", PREFIXED, "User:eve"),
                                      _binding(CLUSTER, "kafka-cluster", principal="User:admin", operation=ALTER)])
    # Nothing matches any more: every filter succeeds with no ACL.
    assert _delete(broker, version, [_filter(TOPIC, "orders", MATCH), _filter(GROUP)]) == [(NONE, []), (NONE, [])]
    # A filter of everything removes the rest.
    assert [len(acls) for _, acls in _delete(broker, version, [_filter()])] == [2]
    assert _stored(broker) == []


def test_delete_error_message_of_a_refused_filter(broker):
    answer = broker.call(DELETE, 3, {"filters": [_filter(operation=0), _filter(resource_type=0)]})
    assert [(r.error_code, r.error_message) for r in answer.filter_results] == [
        (INVALID_REQUEST, "Unknown entryFilter."), (INVALID_REQUEST, "Unknown patternFilter.")]


def test_changes_are_seen_by_every_version(broker):
    """Created in version 1, described in 3 and the other way round; deleted in 2."""
    assert _create(broker, 1, [_creation(TOPIC, "a", PREFIXED)]) == [(NONE, None)]
    assert _create(broker, 3, [_creation(GROUP, "g")]) == [(NONE, None)]
    assert [r[:3] for r in _describe(broker, 3)[2]] == [(TOPIC, "a", PREFIXED), (GROUP, "g", LITERAL)]
    assert [r[:3] for r in _describe(broker, 1)[2]] == [(TOPIC, "a", PREFIXED), (GROUP, "g", LITERAL)]
    assert [len(acls) for _, acls in _delete(broker, 2, [_filter(TOPIC, "a", PREFIXED)])] == [1]
    assert [r[:3] for r in _describe(broker, 1)[2]] == [(GROUP, "g", LITERAL)]


# ---------------------------------------------------------------------------- castle acls: what the options mean
def _args(command: str, *argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)

    def leaf(s: Any, name: str, help: str, common: argparse.ArgumentParser, action: str) -> argparse.ArgumentParser:
        p: argparse.ArgumentParser = s.add_parser(name, help=help, parents=[common])
        p.set_defaults(admin_action=action)
        return p

    acl_cli.add_parsers(sub, argparse.ArgumentParser(add_help=False), leaf)
    return parser.parse_args(["acls", command, *argv])


def _plan_add(*argv: str) -> list[AclBinding]:
    args = _args("add", *argv)
    return acl_cli.plan_bindings(acl_cli.resources_of(args), args.resource_pattern_type, acl_cli.entries_of(args))


def _plan_filters(command: str, *argv: str) -> list[AclBindingFilter]:
    args = _args(command, *argv)
    return acl_cli.plan_filters(acl_cli.resources_of(args), args.resource_pattern_type, acl_cli.entries_of(args))


def test_cli_add_makes_every_combination():
    assert _plan_add("--topic", "t", "--allow-principal", "User:a") == [_binding(TOPIC, "t", principal="User:a",
                                                                                 operation=ALL)]
    planned = _plan_add("--topic", "t", "--group", "g", "--resource-pattern-type", "prefixed",
                        "--allow-principal", "User:a", "--allow-principal", "User:b", "--allow-host", "10.0.0.1",
                        "--deny-principal", "User:*", "--operation", "read", "--operation", "Describe")
    assert len(planned) == 2 * (2 * 1 * 2 + 1 * 1 * 2)
    assert _binding(GROUP, "g", PREFIXED, "User:b", "10.0.0.1", DESCRIBE_OP, ALLOW) in planned
    assert _binding(TOPIC, "t", PREFIXED, "User:*", "*", READ, DENY) in planned
    assert _plan_add("--cluster", "--allow-principal", "User:a", "--operation", "idempotent-write") == [
        _binding(CLUSTER, "kafka-cluster", principal="User:a", operation=12)]


@pytest.mark.parametrize("argv", [
    ("--allow-principal", "User:a"),                                                   # no resource
    ("--topic", "t"),                                                                  # no principal
    ("--topic", "t", "--allow-principal", "User:a", "--resource-pattern-type", "match"),
    ("--topic", "t", "--deny-principal", "User:a", "--allow-host", "h"),               # a host without its principal
    ("--group", "g", "--allow-principal", "User:a", "--operation", "Write"),           # groups have no Write
    ("--cluster", "--allow-principal", "User:a", "--resource-pattern-type", "prefixed"),
])
def test_cli_add_refusals(argv):
    with pytest.raises(UsageError):
        _plan_add(*argv)


@pytest.mark.parametrize("argv", [("--topic", "t", "--allow-principal", "alice"), ("--topic", "t", "--operation", "Fly")])
def test_cli_refuses_bad_values(argv, capsys):
    with pytest.raises(SystemExit):
        _args("add", *argv)


def test_cli_filters():
    assert _plan_filters("list") == [AclBindingFilter()]
    assert _plan_filters("list", "--resource-pattern-type", "prefixed") == [
        AclBindingFilter(ResourceType.ANY, None, PatternType.PREFIXED)]
    assert _plan_filters("remove", "--topic", "t") == [AclBindingFilter(ResourceType.TOPIC, "t", PatternType.LITERAL)]
    assert _plan_filters("remove", "--topic", "t", "--resource-pattern-type", "match", "--allow-principal", "User:a",
                         "--operation", "Read", "--operation", "Write") == [
        AclBindingFilter(ResourceType.TOPIC, "t", PatternType.MATCH, "User:a", None, Operation.READ, Permission.ALLOW),
        AclBindingFilter(ResourceType.TOPIC, "t", PatternType.MATCH, "User:a", None, Operation.WRITE, Permission.ALLOW)]
    assert _plan_filters("list", "--group", "g", "--deny-host", "h") == [
        AclBindingFilter(ResourceType.GROUP, "g", PatternType.LITERAL, None, "h", Operation.ANY, Permission.DENY)]
