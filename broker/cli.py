"""The ``castle`` command. Subcommands are added as their issues land."""

from __future__ import annotations

import argparse
import sys
from importlib.metadata import PackageNotFoundError, version

from broker.admin.cli import ADMIN_COMMANDS
from broker.admin.cli import add_commands as add_admin_commands
from broker.admin.cli import run as run_admin


def _version() -> str:
    try:
        return version("castle")
    except PackageNotFoundError:
        return "unknown"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="castle", description="Castle: a Kafka-protocol message broker")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("version", help="print the version")
    serve = sub.add_parser("serve", help="run the broker (supervisor + workers)")
    serve.add_argument("config", nargs="?", help="a .properties or .toml file with Kafka's setting names")
    serve.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                       help="set one setting, after the file (repeatable)")
    log_parser = sub.add_parser("log", help="offline tools for log dirs")
    log_sub = log_parser.add_subparsers(dest="log_command", required=True)
    dump = log_sub.add_parser("dump", help="print the batches of a segment and verify CRCs")
    dump.add_argument("path")
    dump.add_argument("--records", action="store_true")
    dump.add_argument("--json", action="store_true")
    add_admin_commands(sub)  # topics, groups, configs (broker/admin/)
    args, rest = parser.parse_known_args(argv)
    if args.command == "version":
        print(f"castle {_version()}")
        return 0
    if args.command == "serve":
        from broker.config import ConfigError, load_config, parse_overrides
        from broker.process.supervisor import serve as run_serve

        if rest:
            parser.error(f"unrecognized arguments: {' '.join(rest)}")
        from broker.security.broker_security import check_tls_files
        from broker.security.inter_broker import inter_broker_security

        try:
            config = load_config(args.config, parse_overrides(args.override))
            check_tls_files(config)
            inter_broker_security(config)
        except (ConfigError, OSError, ValueError) as exc:
            print(f"castle serve: {exc}", file=sys.stderr)
            return 2
        return run_serve(config)
    if args.command in ADMIN_COMMANDS:
        if rest:
            parser.error(f"unrecognized arguments: {' '.join(rest)}")
        return run_admin(args)
    if args.command == "log" and args.log_command == "dump":
        from storage.dump import main as dump_main

        flags = [args.path] + (["--records"] if args.records else []) + (["--json"] if args.json else []) + rest
        return dump_main(flags)
    parser.error(f"unknown command {args.command}")
    return 2


if __name__ == "__main__":
    sys.exit(main())
