"""``castle acls list|add|remove``: Kafka's ACLs, through AdminClient (like kafka-acls.sh).

The options are kafka-acls.sh's: resources (``--topic``, ``--group``, ``--transactional-id``,
each repeatable, and ``--cluster``), ``--resource-pattern-type literal|prefixed|match|any``,
``--allow-principal``/``--deny-principal`` and ``--allow-host``/``--deny-host`` (repeatable),
``--operation`` (repeatable; Kafka's names, any case: ``Read``, ``DescribeConfigs``,
``describe-configs``).

``add`` creates every combination: each resource x (each allowed principal x allowed host x
operation, ALLOW) and (each denied principal x denied host x operation, DENY). As in
kafka-acls.sh, a principal without hosts gets host ``*``, no ``--operation`` means ``All``, the
pattern type is literal unless ``--resource-pattern-type prefixed``, and an operation the
resource type does not support (``Write`` on a group) is refused before anything is sent.

``list`` and ``remove`` take the same options as a filter, where what is not given matches
anything: ``remove --topic orders --allow-principal User:alice`` removes every ALLOW ACL of
User:alice on the literal topic ``orders``, whatever its host and operation (kafka-acls.sh
would remove only the one with host ``*`` and operation ``All``). ``remove`` needs a resource
and asks no question (kafka-acls.sh asks unless ``--force``); ``list`` without a resource lists
every ACL (of every pattern type, unless ``--resource-pattern-type`` says which).
``--resource-pattern-type match`` selects the ACLs that apply to the named resources (their
literal name, the literal ``*`` and every prefix): take care with it in ``remove``.

This module imports confluent-kafka only when a command runs, so building ``castle``'s
parser does not load it.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence

from broker.admin.output import Report, table
from coordination.acls.model import (
    CLUSTER_NAME,
    SUPPORTED_OPERATIONS,
    WILDCARD_HOST,
    AclBinding,
    AclBindingFilter,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)
from coordination.acls.parsing import pascal_case

if TYPE_CHECKING:
    from confluent_kafka.admin import AclBinding as ClientBinding
    from confluent_kafka.admin import AclBindingFilter as ClientFilter

    from broker.admin.session import Session

RESOURCE_KINDS = {"topic": ResourceType.TOPIC, "group": ResourceType.GROUP, "cluster": ResourceType.CLUSTER,
                  "transactional-id": ResourceType.TRANSACTIONAL_ID}
KIND_OF_TYPE = {rt: kind for kind, rt in RESOURCE_KINDS.items()}
PATTERNS = {"literal": PatternType.LITERAL, "prefixed": PatternType.PREFIXED, "match": PatternType.MATCH,
            "any": PatternType.ANY}
# What librdkafka's AclOperation has (it lacks Kafka's CreateTokens and DescribeTokens).
OPERATIONS = tuple(op for op in Operation if Operation.ALL <= op <= Operation.IDEMPOTENT_WRITE)
_OPERATION_KEYS = {op.name.replace("_", ""): op for op in OPERATIONS}
HEADERS = ("RESOURCE-TYPE", "PATTERN", "NAME", "PRINCIPAL", "HOST", "OPERATION", "PERMISSION")


# ---------------------------------------------------------------------------- argument types
def principal(text: str) -> str:
    """``Type:name`` (``User:alice``, ``User:*``), as Kafka's SecurityUtils.parseKafkaPrincipal."""
    kind, sep, name = text.strip().partition(":")
    if not sep or not kind or not name:
        raise argparse.ArgumentTypeError(f"expected a principal as Type:name (e.g. User:alice), got {text!r}")
    return f"{kind}:{name}"


def operation(text: str) -> Operation:
    """Kafka's operation names in any case, with or without ``-``/``_``: Read, DescribeConfigs, describe-configs."""
    found = _OPERATION_KEYS.get(text.strip().replace("-", "").replace("_", "").upper())
    if found is None:
        names = ", ".join(pascal_case(op.name) for op in OPERATIONS)
        raise argparse.ArgumentTypeError(f"unknown operation {text!r} (one of: {names})")
    return found


def host(text: str) -> str:
    if not text.strip():
        raise argparse.ArgumentTypeError("expected a host address or *")
    return text.strip()


# ---------------------------------------------------------------------------- what the options mean
@dataclass(frozen=True)
class Resource:
    kind: str  # a key of RESOURCE_KINDS
    name: str


@dataclass(frozen=True)
class Entries:
    """The access-control-entry options: principals, hosts and operations."""

    allow_principals: Sequence[str] = ()
    deny_principals: Sequence[str] = ()
    allow_hosts: Sequence[str] = ()
    deny_hosts: Sequence[str] = ()
    operations: Sequence[Operation] = field(default_factory=tuple)


def _usage(message: str) -> Exception:
    from broker.admin.session import UsageError

    return UsageError(message)


def _unique(items: Iterable[Any]) -> list[Any]:
    return list(dict.fromkeys(items))


def plan_bindings(resources: Sequence[Resource], pattern: str | None, entries: Entries) -> list[AclBinding]:
    """The ACLs ``add`` creates, in a stable order; UsageError for what kafka-acls.sh refuses."""
    if not resources:
        raise _usage("give at least one resource: --topic, --group, --transactional-id or --cluster")
    pattern_type = PATTERNS[pattern or "literal"]
    if pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise _usage(f"ACLs are added with --resource-pattern-type literal or prefixed, not {pattern}")
    if not entries.allow_principals and not entries.deny_principals:
        raise _usage("give at least one --allow-principal or --deny-principal")
    for side in ("allow", "deny"):
        if getattr(entries, f"{side}_hosts") and not getattr(entries, f"{side}_principals"):
            raise _usage(f"--{side}-host needs --{side}-principal")
    operations = _unique(entries.operations) or [Operation.ALL]
    found: list[AclBinding] = []
    for resource in _unique(resources):
        resource_type = RESOURCE_KINDS[resource.kind]
        if resource_type == ResourceType.CLUSTER and pattern_type != PatternType.LITERAL:
            raise _usage("--cluster takes no --resource-pattern-type but literal")
        supported = SUPPORTED_OPERATIONS[resource_type] | {Operation.ALL}
        refused = [op for op in operations if op not in supported]
        if refused:
            names = ", ".join(pascal_case(op.name) for op in sorted(supported))
            raise _usage(f"{resource.kind} ACLs take the operations {names}, not {pascal_case(refused[0].name)}")
        for permission, principals, hosts in ((Permission.ALLOW, entries.allow_principals, entries.allow_hosts),
                                              (Permission.DENY, entries.deny_principals, entries.deny_hosts)):
            for who in _unique(principals):
                for where in _unique(hosts) or [WILDCARD_HOST]:
                    for op in operations:
                        found.append(AclBinding(resource_type, resource.name, pattern_type, who, where, op, permission))
    return _unique(found)


def plan_filters(resources: Sequence[Resource], pattern: str | None, entries: Entries) -> list[AclBindingFilter]:
    """The filters ``list`` and ``remove`` send: one per resource (or one for every resource when
    none is named) x entry filter; what is not given matches anything."""
    if resources:
        pattern_type = PATTERNS[pattern or "literal"]
        patterns = [(RESOURCE_KINDS[r.kind], r.name, pattern_type) for r in _unique(resources)]
    else:
        patterns = [(ResourceType.ANY, None, PATTERNS[pattern or "any"])]
    operations: list[Operation] = _unique(entries.operations) or [Operation.ANY]
    sides: list[tuple[Permission, list[str | None], list[str | None]]] = []
    for permission, principals, hosts in ((Permission.ALLOW, entries.allow_principals, entries.allow_hosts),
                                          (Permission.DENY, entries.deny_principals, entries.deny_hosts)):
        if principals or hosts:
            sides.append((permission, _unique(principals) or [None], _unique(hosts) or [None]))
    if not sides:
        sides.append((Permission.ANY, [None], [None]))
    found = [AclBindingFilter(rt, name, pt, who, where, op, permission)
             for rt, name, pt in patterns
             for permission, principals, hosts in sides
             for who in principals for where in hosts for op in operations]
    return _unique(found)


# ---------------------------------------------------------------------------- AdminClient
def _client_binding(b: AclBinding) -> "ClientBinding":
    from confluent_kafka.admin import AclBinding as ClientBinding
    from confluent_kafka.admin import AclOperation, AclPermissionType, ResourcePatternType
    from confluent_kafka.admin import ResourceType as ClientResourceType

    return ClientBinding(ClientResourceType(int(b.resource_type)), b.resource_name, ResourcePatternType(int(b.pattern_type)),
                         b.principal, b.host, AclOperation(int(b.operation)), AclPermissionType(int(b.permission)))


def _client_filter(f: AclBindingFilter) -> "ClientFilter":
    from confluent_kafka.admin import AclBindingFilter as ClientFilter
    from confluent_kafka.admin import AclOperation, AclPermissionType, ResourcePatternType
    from confluent_kafka.admin import ResourceType as ClientResourceType

    # AclBindingFilter's __post_init__ turns None into ANY; confluent's stubs want str where None means any.
    assert f.resource_type is not None and f.pattern_type is not None
    assert f.operation is not None and f.permission is not None
    name: Any = f.resource_name
    who: Any = f.principal
    where: Any = f.host
    return ClientFilter(ClientResourceType(int(f.resource_type)), name, ResourcePatternType(int(f.pattern_type)), who,
                        where, AclOperation(int(f.operation)), AclPermissionType(int(f.permission)))


def _from_client(b: Any) -> AclBinding:
    """A binding librdkafka returned (its enums carry Kafka's codes)."""
    return AclBinding(ResourceType.from_code(int(b.restype.value)), b.name,
                      PatternType.from_code(int(b.resource_pattern_type.value)), b.principal, b.host,
                      Operation.from_code(int(b.operation.value)), Permission.from_code(int(b.permission_type.value)))


def _row(b: AclBinding) -> tuple[str, str, str, str, str, str, str]:
    kind = KIND_OF_TYPE.get(b.resource_type, b.resource_type.name.lower().replace("_", "-"))
    return (kind, b.pattern_type.name.lower(), b.resource_name, b.principal, b.host, b.operation.name, b.permission.name)


def _data(b: AclBinding) -> dict[str, str]:
    return dict(zip(("resource_type", "pattern_type", "name", "principal", "host", "operation", "permission"), _row(b)))


def describe_binding(b: AclBinding) -> str:
    """How one ACL is named in messages."""
    kind, pattern, name, who, where, op, permission = _row(b)
    return f"{permission} {who} {op} from {where} on {pattern} {kind} '{name}'"


def list_acls(session: "Session", resources: Sequence[Resource] = (), pattern: str | None = None,
              entries: Entries | None = None) -> Report:
    found: set[AclBinding] = set()
    for f in plan_filters(resources, pattern, entries or Entries()):
        future = session.admin.describe_acls(_client_filter(f), **session.request_options())
        found.update(_from_client(b) for b in session.wait(future, "ACLs"))
    shown = sorted(found)
    text = table(HEADERS, [_row(b) for b in shown]) if shown else "No ACLs."
    return Report([_data(b) for b in shown], text)


def add_acls(session: "Session", resources: Sequence[Resource], pattern: str | None, entries: Entries) -> Report:
    wanted = plan_bindings(resources, pattern, entries)
    by_client = {_client_binding(b): b for b in wanted}
    futures = session.admin.create_acls(list(by_client), **session.request_options())
    futures_by_binding = {by_client[key]: future for key, future in futures.items()}
    done, failed = session.wait_each(futures_by_binding, lambda b: f"ACL {describe_binding(b)}")
    added = [b for b in wanted if b in done]
    data = {"added": [_data(b) for b in added],
            "failed": [dict(_data(b), error=str(failed[b])) for b in wanted if b in failed]}
    text = f"Added {len(added)} ACL{'s' if len(added) != 1 else ''}" + (":\n" + table(HEADERS, map(_row, added)) if added else ".")
    return Report(data, text, failures=[str(failed[b]) for b in wanted if b in failed])


def remove_acls(session: "Session", resources: Sequence[Resource], pattern: str | None, entries: Entries) -> Report:
    if not resources:
        raise _usage("give at least one resource: --topic, --group, --transactional-id or --cluster")
    filters = plan_filters(resources, pattern, entries)
    futures = session.admin.delete_acls([_client_filter(f) for f in filters], **session.request_options())
    removed: set[AclBinding] = set()
    for future in futures.values():
        removed.update(_from_client(b) for b in session.wait(future, "ACLs"))
    shown = sorted(removed)
    text = (f"Removed {len(shown)} ACL{'s' if len(shown) != 1 else ''}:\n" + table(HEADERS, map(_row, shown))
            if shown else "No ACLs matched; nothing removed.")
    return Report({"removed": [_data(b) for b in shown]}, text)


# ---------------------------------------------------------------------------- the command line
def add_parsers(sub: Any, common: argparse.ArgumentParser,
                leaf: Callable[[Any, str, str, argparse.ArgumentParser, str], argparse.ArgumentParser]) -> None:
    """``castle acls list|add|remove`` on ``castle``'s subparsers (``leaf`` as broker/admin/cli.py's ``_leaf``)."""
    acls = sub.add_parser("acls", help="list, add and remove ACLs (with an authorizer)")
    asub = acls.add_subparsers(dest="acls_command", required=True, metavar="COMMAND")
    for name, help, pattern_help in (
            ("list", "the ACLs matching the options (all of them without any)",
             "the pattern type to list: literal (the default with a resource), prefixed, any (the default "
             "without one: every pattern type, the exact name), match (every ACL that applies to the resource)"),
            ("add", "add ACLs: each resource x principal x host x operation",
             "literal (the default) or prefixed (the name is a prefix: --topic orders- covers orders-eu, orders-us)"),
            ("remove", "remove the ACLs of the resources that match the options",
             "literal (the default), prefixed, any (every pattern type, the exact name) or match (every ACL that "
             "applies to the resource: its name, the literal * and every prefix; take care)")):
        p = leaf(asub, name, help, common, f"acls.{name}")
        p.add_argument("--topic", action="append", default=[], metavar="NAME", help="a topic (repeatable)")
        p.add_argument("--group", action="append", default=[], metavar="NAME", help="a consumer group (repeatable)")
        p.add_argument("--transactional-id", action="append", default=[], metavar="ID",
                       help="a transactional id (repeatable)")
        p.add_argument("--cluster", action="store_true", help=f"the cluster ({CLUSTER_NAME})")
        p.add_argument("--resource-pattern-type", choices=tuple(PATTERNS), help=pattern_help)
        p.add_argument("--allow-principal", action="append", type=principal, default=[], metavar="TYPE:NAME",
                       help="a principal to allow, e.g. User:alice or User:* (repeatable)")
        p.add_argument("--deny-principal", action="append", type=principal, default=[], metavar="TYPE:NAME",
                       help="a principal to deny (repeatable)")
        p.add_argument("--allow-host", action="append", type=host, default=[], metavar="HOST",
                       help="an address the allowed principals connect from (repeatable)"
                            + ("; default *" if name == "add" else ""))
        p.add_argument("--deny-host", action="append", type=host, default=[], metavar="HOST",
                       help="an address the denied principals connect from (repeatable)"
                            + ("; default *" if name == "add" else ""))
        p.add_argument("--operation", action="append", type=operation, default=[], metavar="OPERATION",
                       help="Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, "
                            "AlterConfigs, IdempotentWrite or All (repeatable; "
                            + ("default All)" if name == "add" else "default: any)"))


def resources_of(args: argparse.Namespace) -> list[Resource]:
    found = [Resource("topic", n) for n in args.topic] + [Resource("group", n) for n in args.group]
    found += [Resource("transactional-id", n) for n in args.transactional_id]
    if args.cluster:
        found.append(Resource("cluster", CLUSTER_NAME))
    return found


def entries_of(args: argparse.Namespace) -> Entries:
    return Entries(tuple(args.allow_principal), tuple(args.deny_principal), tuple(args.allow_host),
                   tuple(args.deny_host), tuple(args.operation))


def list_from_args(session: "Session", args: argparse.Namespace) -> Report:
    return list_acls(session, resources_of(args), args.resource_pattern_type, entries_of(args))


def add_from_args(session: "Session", args: argparse.Namespace) -> Report:
    return add_acls(session, resources_of(args), args.resource_pattern_type, entries_of(args))


def remove_from_args(session: "Session", args: argparse.Namespace) -> Report:
    return remove_acls(session, resources_of(args), args.resource_pattern_type, entries_of(args))
