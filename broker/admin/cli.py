"""argparse wiring for ``castle topics|groups|configs|users|acls|transactions``, dispatch, and exit codes.

``broker/cli.py`` (the ``castle`` entry point) calls ``add_commands`` to hang these
subcommands on its parser and ``run`` to execute one. This module imports no Kafka
client code at import time, so ``castle serve`` does not pay for confluent-kafka.

Exit codes: 0 done; 1 Kafka said no, or nobody answered within ``--timeout`` (one line
on stderr each); 2 the command line is wrong (argparse's usage line, or ours for
checks argparse cannot express). Expected failures never print a traceback.
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys
from typing import TYPE_CHECKING, Any, Callable, Sequence

if TYPE_CHECKING:
    from broker.admin.output import Report
    from broker.admin.reset import Target, TopicSpec
    from broker.admin.session import Session

ADMIN_COMMANDS = ("topics", "groups", "configs", "users", "acls", "transactions")
DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
DEFAULT_TIMEOUT = 10.0


# ---------------------------------------------------------------------------- argument types
def key_value(text: str) -> tuple[str, str]:
    """``KEY=VALUE`` (the value may hold ``=`` and commas: ``cleanup.policy=compact,delete``)."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key.strip(), value


def config_key(text: str) -> str:
    if not text.strip() or "=" in text:
        raise argparse.ArgumentTypeError(f"expected a config name (no '='), got {text!r}")
    return text.strip()


def _int_at_least(minimum: int, what: str) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be {what}, got {value}")
        return value
    return parse


positive_int = _int_at_least(1, "at least 1")
non_negative_int = _int_at_least(0, "0 or more")


def seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be more than 0, got {text}")
    return value


def topic_spec(text: str) -> "TopicSpec":
    """``TOPIC`` or ``TOPIC:P,P,...`` (Kafka topic names never hold ':')."""
    from broker.admin.reset import TopicSpec

    topic, sep, rest = text.partition(":")
    if not topic:
        raise argparse.ArgumentTypeError(f"expected TOPIC or TOPIC:PARTITION,..., got {text!r}")
    if not sep:
        return TopicSpec(topic)
    try:
        partitions = tuple(sorted({int(p) for p in rest.split(",")}))
    except ValueError:
        raise argparse.ArgumentTypeError(f"partitions must be integers: {text!r}") from None
    if any(p < 0 for p in partitions):
        raise argparse.ArgumentTypeError(f"partitions must be 0 or more: {text!r}")
    return TopicSpec(topic, partitions)


def replica_assignment(text: str) -> list[list[int]]:
    """kafka-topics.sh's ``--replica-assignment``: ``1:2:3,2:3:1`` puts partition 0 on brokers
    1, 2, 3 (1 preferred leader) and partition 1 on 2, 3, 1. Every partition gets the same
    number of replicas, each on a different broker."""
    assignment: list[list[int]] = []
    for partition, part in enumerate(text.split(",")):
        try:
            brokers = [int(b) for b in part.split(":")]
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected broker ids like 1:2:3,2:3:1 (partitions split by ',', replicas by ':'), got {text!r}") from None
        if any(b < 0 for b in brokers):
            raise argparse.ArgumentTypeError(f"broker ids must be 0 or more: {text!r}")
        if len(set(brokers)) != len(brokers):
            raise argparse.ArgumentTypeError(f"partition {partition} names a broker twice: {part.strip()!r}")
        if assignment and len(brokers) != len(assignment[0]):
            raise argparse.ArgumentTypeError(f"partition {partition} has a different replication factor "
                                             f"({len(brokers)}) than partition 0 ({len(assignment[0])}): {text!r}")
        assignment.append(brokers)
    return assignment


def broker_list(text: str) -> list[int]:
    """``2,3,4``: distinct broker ids."""
    try:
        ids = [int(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: broker ids separated by commas, e.g. 2,3,4") from None
    if any(i < 0 for i in ids) or len(set(ids)) != len(ids):
        raise argparse.ArgumentTypeError(f"{text!r}: distinct, non-negative broker ids")
    return ids


def timestamp_ms(text: str) -> int:
    """An ISO 8601 instant (``2024-05-01T12:00:00Z``, ``...+02:00``; no offset: local time) in ms."""
    try:
        when = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an ISO 8601 date-time such as 2024-05-01T12:00:00Z, got {text!r}") from None
    return int(when.timestamp() * 1000)


# ---------------------------------------------------------------------------- parsers
def _common() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--bootstrap-server", metavar="HOST:PORT",
                        help=f"broker(s) to talk to, comma-separated (default: {DEFAULT_BOOTSTRAP})")
    common.add_argument("--json", action="store_true", help="print one JSON document instead of tables")
    common.add_argument("--timeout", type=seconds, default=DEFAULT_TIMEOUT, metavar="SECONDS",
                        help=f"give up after this long, for the whole command (default: {DEFAULT_TIMEOUT:g})")
    common.add_argument("--property", action="append", type=key_value, default=[], metavar="KEY=VALUE",
                        help="a librdkafka client setting, e.g. security.protocol=SSL (repeatable)")
    common.add_argument("--command-config", metavar="FILE",
                        help="a .properties file of client settings (--property wins over it)")
    common.add_argument("--verbose", "-v", action="store_true", help="show librdkafka's log lines on stderr")
    return common


def _leaf(sub: Any, name: str, help: str, common: argparse.ArgumentParser, action: str) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = sub.add_parser(name, help=help, description=help, parents=[common])
    parser.set_defaults(admin_action=action, admin_prog=parser.prog)
    return parser


def _alter_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--set", action="append", type=key_value, default=[], metavar="KEY=VALUE",
                        help="set a config (repeatable)")
    parser.add_argument("--delete", action="append", type=config_key, default=[], metavar="KEY",
                        help="remove a config override, back to its default (repeatable)")
    parser.add_argument("--dry-run", action="store_true", help="let the broker validate the change, apply nothing")


def _resource_options(parser: argparse.ArgumentParser) -> None:
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--topic", metavar="NAME")
    which.add_argument("--broker", type=non_negative_int, metavar="ID")
    which.add_argument("--group", metavar="NAME", help="a group's configs (consumer.session.timeout.ms, share.*, ...)")


def add_commands(sub: Any) -> None:
    """Add the ``topics``, ``groups``, ``configs`` and ``users`` subcommands to ``castle``'s subparsers."""
    common = _common()
    _add_users(sub, common)
    _add_acls(sub, common)
    _add_transactions(sub, common)

    topics = sub.add_parser("topics", help="list, describe, create, delete and configure topics")
    tsub = topics.add_subparsers(dest="topics_command", required=True, metavar="COMMAND")
    p = _leaf(tsub, "list", "list topic names", common, "topics.list")
    p.add_argument("--exclude-internal", action="store_true", help="leave out __consumer_offsets and the like")
    p = _leaf(tsub, "describe", "partitions (leader, replicas, isr) and non-default configs", common, "topics.describe")
    p.add_argument("topics", nargs="*", metavar="TOPIC", help="topics to describe (default: all)")
    p.add_argument("--exclude-internal", action="store_true", help="leave out internal topics")
    p.add_argument("--under-replicated-partitions", action="store_true",
                   help="only partitions whose ISR is smaller than their replica list")
    p.add_argument("--unavailable-partitions", action="store_true",
                   help="only partitions without a leader, or whose leader's broker is offline")
    p = _leaf(tsub, "create", "create a topic", common, "topics.create")
    p.add_argument("topic", metavar="TOPIC")
    p.add_argument("--partitions", type=positive_int, help="partition count (default: the broker's num.partitions)")
    p.add_argument("--replication-factor", type=positive_int,
                   help="replicas per partition (default: the broker's default.replication.factor)")
    p.add_argument("--replica-assignment", type=replica_assignment, metavar="B:B,B:B,...",
                   help="the brokers of each partition, e.g. 1:2:3,2:3:1 (partition 0 on 1,2,3, partition 1 on "
                        "2,3,1; the first is the preferred leader); not with --partitions or --replication-factor")
    p.add_argument("--config", action="append", type=key_value, default=[], metavar="KEY=VALUE",
                   help="a topic config (repeatable)")
    p.add_argument("--if-not-exists", action="store_true", help="succeed when the topic already exists")
    p.add_argument("--dry-run", action="store_true", help="let the broker validate the request, create nothing")
    p = _leaf(tsub, "delete", "delete topics", common, "topics.delete")
    p.add_argument("topics", nargs="+", metavar="TOPIC")
    p.add_argument("--if-exists", action="store_true", help="succeed for topics that do not exist")
    p = _leaf(tsub, "alter-configs", "change a topic's configs (incrementally)", common, "topics.alter-configs")
    p.add_argument("topic", metavar="TOPIC")
    _alter_options(p)
    p = _leaf(tsub, "add-partitions", "raise a topic's partition count", common, "topics.add-partitions")
    p.add_argument("topic", metavar="TOPIC")
    p.add_argument("--partitions", type=positive_int, required=True, help="the new total partition count")
    p.add_argument("--dry-run", action="store_true", help="let the broker validate the request, change nothing")

    p = _leaf(tsub, "reassign", "move partitions' replicas to other brokers (or cancel a move)", common, "topics.reassign")
    p.add_argument("topic", metavar="TOPIC")
    p.add_argument("--partition", type=non_negative_int, action="append", required=True, metavar="N",
                   help="a partition to move (repeatable)")
    move = p.add_mutually_exclusive_group(required=True)
    move.add_argument("--replicas", type=broker_list, metavar="B,B,...",
                      help="the new replicas, the preferred leader first (e.g. 2,3,4)")
    move.add_argument("--cancel", action="store_true", help="cancel the reassignment in progress")
    p = _leaf(tsub, "reassignments", "the replica moves still in progress", common, "topics.reassignments")
    p.add_argument("topics", nargs="*", metavar="TOPIC", help="topics to show (default: all)")

    groups = sub.add_parser("groups", help="list, describe, reset and delete consumer groups")
    gsub = groups.add_subparsers(dest="groups_command", required=True, metavar="COMMAND")
    _leaf(gsub, "list", "list consumer groups with their state", common, "groups.list")
    p = _leaf(gsub, "describe", "state, members, committed offsets, log end offsets and lag", common, "groups.describe")
    p.add_argument("groups", nargs="+", metavar="GROUP")
    p = _leaf(gsub, "reset-offsets", "move an inactive group's committed offsets (dry run unless --execute)",
              common, "groups.reset-offsets")
    p.add_argument("group", metavar="GROUP")
    scope = p.add_mutually_exclusive_group(required=True)
    scope.add_argument("--topic", action="append", type=topic_spec, metavar="TOPIC[:P,...]",
                       help="a topic, or some of its partitions (repeatable)")
    scope.add_argument("--all-topics", action="store_true", help="every partition the group has an offset for")
    to = p.add_mutually_exclusive_group(required=True)
    to.add_argument("--to-earliest", action="store_true", help="the log start of each partition")
    to.add_argument("--to-latest", action="store_true", help="the log end of each partition")
    to.add_argument("--to-offset", type=non_negative_int, metavar="N", help="offset N (kept within the log)")
    to.add_argument("--to-datetime", type=timestamp_ms, metavar="ISO8601",
                    help="the first offset at or after this instant (e.g. 2024-05-01T12:00:00Z)")
    to.add_argument("--shift-by", type=int, metavar="N", help="the committed offset plus N (N may be negative)")
    run_mode = p.add_mutually_exclusive_group()
    run_mode.add_argument("--execute", action="store_true", help="commit the new offsets")
    run_mode.add_argument("--dry-run", action="store_true", help="only print the plan (the default)")
    p = _leaf(gsub, "delete", "delete inactive consumer groups and their offsets", common, "groups.delete")
    p.add_argument("groups", nargs="+", metavar="GROUP")

    configs = sub.add_parser("configs", help="describe and alter topic, broker or group configs")
    csub = configs.add_subparsers(dest="configs_command", required=True, metavar="COMMAND")
    p = _leaf(csub, "describe", "every config of a topic, broker or group, with its source", common, "configs.describe")
    _resource_options(p)
    p.add_argument("--non-default", action="store_true", help="only configs that are not at their default")
    p = _leaf(csub, "alter", "change configs of a topic, broker or group (incrementally)", common, "configs.alter")
    _resource_options(p)
    _alter_options(p)


# ---------------------------------------------------------------------------- running
def _changes(args: argparse.Namespace) -> tuple[dict[str, str], list[str]]:
    """--set/--delete as a dict and a list; the usage errors argparse cannot see."""
    from broker.admin.session import UsageError

    if not args.set and not args.delete:
        raise UsageError("nothing to change: give --set KEY=VALUE and/or --delete KEY")
    settings: dict[str, str] = {}
    for key, value in args.set:
        if key in settings:
            raise UsageError(f"--set {key} given twice")
        settings[key] = value
    both = sorted(set(settings) & set(args.delete))
    if both:
        raise UsageError(f"both set and deleted: {', '.join(both)}")
    return settings, list(dict.fromkeys(args.delete))


def _target(args: argparse.Namespace) -> "Target":
    from broker.admin.reset import Target

    if args.to_earliest:
        return Target("earliest")
    if args.to_latest:
        return Target("latest")
    if args.to_offset is not None:
        return Target("offset", args.to_offset)
    if args.to_datetime is not None:
        return Target("datetime", args.to_datetime)
    return Target("shift", args.shift_by)


def _resource(args: argparse.Namespace) -> tuple[str, str]:
    if args.topic is not None:
        return "topic", args.topic
    if getattr(args, "group", None) is not None:
        return "group", args.group
    return "broker", str(args.broker)


def _unique(names: Sequence[str]) -> list[str]:
    """Names in the order given, each once (librdkafka refuses a request naming one twice)."""
    return list(dict.fromkeys(names))


def _add_users(sub: Any, common: argparse.ArgumentParser) -> None:
    from broker.admin.users import DEFAULT_ITERATIONS, MECHANISMS

    users = sub.add_parser("users", help="list, set and delete SCRAM credentials")
    usub = users.add_subparsers(dest="users_command", required=True, metavar="COMMAND")
    p = _leaf(usub, "list", "users and their SCRAM mechanisms (never salts or keys)", common, "users.list")
    p.add_argument("user", nargs="*", help="only these users")
    for name, help in (("set", "create or change a user's SCRAM credentials"),
                       ("delete", "remove a user's SCRAM credentials")):
        p = _leaf(usub, name, help, common, f"users.{name}")
        p.add_argument("user")
        p.add_argument("--mechanism", action="append", choices=MECHANISMS, default=[],
                       help="SCRAM-SHA-256 or SCRAM-SHA-512 (repeatable; default: both)")
        p.add_argument("--broker-config", metavar="FILE",
                       help="offline: write to the store this broker config names (ZooKeeper or the log dir), "
                            "no broker needed (the first user, before the first start)")
        p.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                       help="with --broker-config: a broker setting after the file (repeatable)")
        if name == "set":
            p.add_argument("--password-stdin", action="store_true", help="read the password from stdin (one line)")
            p.add_argument("--iterations", type=int, default=DEFAULT_ITERATIONS,
                           help=f"PBKDF2 iterations, 4096-16384 (default {DEFAULT_ITERATIONS})")


def _add_transactions(sub: Any, common: argparse.ArgumentParser) -> None:
    """kafka-transactions.sh's commands and options (Castle's own client: broker/admin/wire.py)."""
    txns = sub.add_parser("transactions", help="list and describe transactions, find and abort hanging ones")
    xsub = txns.add_subparsers(dest="transactions_command", required=True, metavar="COMMAND")
    p = _leaf(xsub, "list", "transactions of every coordinator, with their state", common, "transactions.list")
    p.add_argument("--duration-filter", type=non_negative_int, metavar="MS",
                   help="only transactions running longer than this (ms)")
    p.add_argument("--transactional-id-pattern", metavar="REGEX",
                   help="only transactional ids this regular expression matches whole")
    p.add_argument("--state", action="append", default=[], metavar="STATE",
                   help="only transactions in this state, e.g. Ongoing (repeatable)")
    p.add_argument("--producer-id", action="append", type=non_negative_int, default=[], metavar="ID",
                   help="only this producer id (repeatable)")
    p = _leaf(xsub, "describe", "the state of a transactional id, from its coordinator", common,
              "transactions.describe")
    p.add_argument("--transactional-id", required=True, metavar="ID")
    p = _leaf(xsub, "describe-producers", "the producers a partition keeps state for", common,
              "transactions.describe-producers")
    p.add_argument("--topic", required=True, metavar="NAME")
    p.add_argument("--partition", type=non_negative_int, required=True, metavar="N")
    p.add_argument("--broker-id", type=non_negative_int, metavar="ID",
                   help="ask this replica (default: the partition's leader)")
    p = _leaf(xsub, "abort", "abort a hanging transaction on one partition (needs CLUSTER_ACTION)", common,
              "transactions.abort")
    p.add_argument("--topic", required=True, metavar="NAME")
    p.add_argument("--partition", type=non_negative_int, required=True, metavar="N")
    p.add_argument("--start-offset", type=non_negative_int, metavar="OFFSET",
                   help="the first offset of the transaction to abort (as find-hanging shows it)")
    p.add_argument("--producer-id", type=non_negative_int, metavar="ID", help="instead of --start-offset: the producer")
    p.add_argument("--producer-epoch", type=non_negative_int, metavar="EPOCH", help="with --producer-id")
    p.add_argument("--coordinator-epoch", type=int, metavar="EPOCH", help="with --producer-id")
    p = _leaf(xsub, "find-hanging", "open transactions no coordinator will end", common, "transactions.find-hanging")
    p.add_argument("--broker-id", type=non_negative_int, metavar="ID", help="search the partitions this broker holds")
    p.add_argument("--topic", metavar="NAME", help="search this topic (needed with --partition)")
    p.add_argument("--partition", type=non_negative_int, metavar="N")
    p.add_argument("--max-transaction-timeout", type=non_negative_int, default=15, metavar="MINUTES",
                   help="only transactions whose last write is older than this (default: 15, "
                        "transaction.max.timeout.ms's default)")


def _add_acls(sub: Any, common: argparse.ArgumentParser) -> None:
    from broker.admin.acls import add_parsers

    add_parsers(sub, common, _leaf)


def _run_offline(args: argparse.Namespace) -> "Report":
    from broker.admin.users import MECHANISMS, change_offline, read_password

    password = read_password(args.password_stdin) if args.users_command == "set" else None
    return change_offline(args.broker_config, args.override, args.user, args.mechanism or list(MECHANISMS), password,
                          getattr(args, "iterations", 0))


def _handlers() -> dict[str, Callable[["Session", argparse.Namespace], "Report"]]:
    from broker.admin import acls, configs, groups, reassign, reset, topics, transactions, users
    from broker.admin.session import UsageError

    def alter_topic(s: "Session", a: argparse.Namespace) -> "Report":
        settings, deleted = _changes(a)
        return configs.alter(s, "topic", a.topic, settings, deleted, a.dry_run)

    def create_topic(s: "Session", a: argparse.Namespace) -> "Report":
        if a.replica_assignment is not None and (a.partitions is not None or a.replication_factor is not None):
            raise UsageError("--replica-assignment cannot be used with --partitions or --replication-factor")
        return topics.create(s, a.topic, a.partitions, a.replication_factor, dict(a.config), a.if_not_exists,
                             a.dry_run, a.replica_assignment)

    def alter_config(s: "Session", a: argparse.Namespace) -> "Report":
        settings, deleted = _changes(a)
        kind, name = _resource(a)
        return configs.alter(s, kind, name, settings, deleted, a.dry_run)

    return {
        "acls.list": acls.list_from_args,
        "acls.add": acls.add_from_args,
        "acls.remove": acls.remove_from_args,
        "users.list": lambda s, a: users.list_users(s, a.user),
        "users.set": lambda s, a: users.set_user(s, a.user, users.read_password(a.password_stdin),
                                                 a.mechanism or list(users.MECHANISMS), a.iterations),
        "users.delete": lambda s, a: users.delete_user(s, a.user, a.mechanism or list(users.MECHANISMS)),
        "topics.list": lambda s, a: topics.list_topics(s, a.exclude_internal),
        "topics.describe": lambda s, a: topics.describe(s, _unique(a.topics), a.exclude_internal,
                                                        a.under_replicated_partitions, a.unavailable_partitions),
        "topics.create": create_topic,
        "topics.delete": lambda s, a: topics.delete(s, _unique(a.topics), a.if_exists),
        "topics.alter-configs": alter_topic,
        "topics.add-partitions": lambda s, a: topics.add_partitions(s, a.topic, a.partitions, a.dry_run),
        "topics.reassign": lambda s, a: reassign.reassign(s, a.topic, list(dict.fromkeys(a.partition)),
                                                          None if a.cancel else a.replicas),
        "topics.reassignments": lambda s, a: reassign.reassignments(s, _unique(a.topics)),
        "groups.list": lambda s, a: groups.list_groups(s),
        "groups.describe": lambda s, a: groups.describe(s, _unique(a.groups)),
        "groups.reset-offsets": lambda s, a: reset.reset(s, a.group, None if a.all_topics else a.topic, _target(a),
                                                         a.execute),
        "groups.delete": lambda s, a: groups.delete(s, _unique(a.groups)),
        "configs.describe": lambda s, a: configs.describe(s, *_resource(a), a.non_default),
        "configs.alter": alter_config,
        "transactions.list": lambda s, a: transactions.list_transactions(
            s, a.duration_filter, a.transactional_id_pattern, a.state, a.producer_id),
        "transactions.describe": lambda s, a: transactions.describe(s, a.transactional_id),
        "transactions.describe-producers": lambda s, a: transactions.describe_producers(s, a.topic, a.partition,
                                                                                       a.broker_id),
        "transactions.abort": lambda s, a: transactions.abort(s, a.topic, a.partition, a.start_offset, a.producer_id,
                                                              a.producer_epoch, a.coordinator_epoch),
        "transactions.find-hanging": lambda s, a: transactions.find_hanging(s, a.broker_id, a.topic, a.partition,
                                                                            a.max_transaction_timeout),
    }


def read_properties(path: str) -> dict[str, str]:
    """A Java-style .properties file: KEY=VALUE or KEY: VALUE lines, # and ! comments."""
    from broker.admin.session import UsageError

    try:
        with open(path, encoding="utf-8") as handle:
            lines = handle.read().splitlines()
    except OSError as exc:
        raise UsageError(f"--command-config {path}: {exc.strerror or exc}") from None
    out: dict[str, str] = {}
    for number, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        cut = min((i for i in (line.find("="), line.find(":")) if i > 0), default=-1)
        if cut < 0:
            raise UsageError(f"--command-config {path} line {number}: expected KEY=VALUE")
        out[line[:cut].strip()] = line[cut + 1:].strip()
    return out


def _client_settings(args: argparse.Namespace) -> tuple[str, dict[str, str]]:
    settings = read_properties(args.command_config) if args.command_config else {}
    settings.update(dict(args.property))
    bootstrap = args.bootstrap_server or settings.pop("bootstrap.servers", None) or DEFAULT_BOOTSTRAP
    settings.pop("bootstrap.servers", None)
    return bootstrap, settings


def _write(text: str | bytes, stream: Any) -> None:
    if isinstance(text, bytes):
        stream.buffer.write(text)
    else:
        stream.write(text)
    stream.flush()


def run(args: argparse.Namespace) -> int:
    """Run one admin command from parsed arguments; returns the exit code."""
    from broker.admin.output import to_json
    from broker.admin.session import AdminError, Session, UsageError

    prog = args.admin_prog
    try:
        if getattr(args, "broker_config", None):
            report = _run_offline(args)
        else:
            bootstrap, settings = _client_settings(args)
            session = Session(bootstrap, args.timeout, settings, verbose=args.verbose)
            report = _handlers()[args.admin_action](session, args)
    except UsageError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return exc.code
    except AdminError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:
        return 130
    try:
        if args.json:
            _write(to_json(report.data), sys.stdout)
        elif report.text:
            _write(report.text + "\n", sys.stdout)
        for note in report.notes:
            print(note, file=sys.stderr)
    except BrokenPipeError:  # `castle topics list | head`: the reader left, which is fine
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # so the flush at exit does not raise again
        return 1 if report.failures else 0
    for failure in report.failures:
        print(f"{prog}: {failure}", file=sys.stderr)
    return 1 if report.failures else 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m broker.admin.cli topics list`` works too (the same as ``castle topics list``)."""
    parser = argparse.ArgumentParser(prog="castle", description="Castle's admin commands")
    sub = parser.add_subparsers(dest="command", required=True)
    add_commands(sub)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
