"""python -m loadtest.runner: run workload files against a broker, optionally beside another.

    # a Castle started for the run, against librdkafka's mock cluster, 3 alternating rounds
    .venv/bin/python -m loadtest.runner loadtest/workloads/max-throughput-100b.toml \\
        --start-castle --compare mock --repeat 3

    # against Apache Kafka 4.4 itself (KRaft, one node; jars fetched once with Maven:
    # loadtest/kafka_peer.py), started for the run and stopped at its end; one uncounted
    # warm-up round of each workload against both brokers first (a JVM compiles its hot paths
    # in its first minutes), then 3 counted rounds
    .venv/bin/python -m loadtest.runner loadtest/workloads/max-throughput-100b.toml \\
        --start-castle --compare kafka --repeat 3

    # transactions: each workload with its yardstick in one invocation (a goal of the first
    # is judged against the second's figures: goals.py, against_workload)
    .venv/bin/python -m loadtest.runner loadtest/workloads/txn-produce-100b.toml \\
        loadtest/workloads/idempotent-produce-100b.toml loadtest/workloads/read-committed-1kb.toml \\
        loadtest/workloads/read-uncommitted-1kb.toml --start-castle --compare kafka --repeat 2

    # a broker already running (its supervisor PID gives CPU and memory of all its processes)
    .venv/bin/python -m loadtest.runner loadtest/workloads/*.toml --bootstrap 127.0.0.1:9092 --broker-pid PID

Warm-up: every run produces for the workload's warmup_s before its window counts; with
--warmup-rounds N (default 1 with --compare kafka, else 0) every workload also runs N whole
rounds against every broker started once for the whole run (not the mock, started per run)
before the counted rounds, and those rounds count nowhere.

Results go to --out (default bench-results/runner-<UTC time>/): one JSON per run,
summary.json (medians, ratios and the verdicts on the workloads' goals: goals.py),
report.md and the charts (report.py).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import tomllib
from typing import Any

import orjson

from loadtest.brokers import OwnBroker
from loadtest.common import info, parse_key_values
from loadtest.kafka_peer import DEFAULT_VERSION as DEFAULT_KAFKA_VERSION
from loadtest.kafka_peer import MODES as KAFKA_MODES
from loadtest.kafka_peer import KafkaPeer
from loadtest.machine import git_state, machine_info
from loadtest.runner.figures import medians, ratios
from loadtest.runner.goals import evaluate_goals, goal_lines, parse_goals, workloads_named
from loadtest.runner.limits import SETTLE_S, LimitPlan
from loadtest.runner.report import write_report
from loadtest.runner.run import Target, run_workload
from loadtest.runner.workload import Workload, WorkloadError, load_workload, workload_from_dict


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m loadtest.runner", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("workloads", nargs="+", help="workload files (TOML; see loadtest/runner/workload.py)")
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--bootstrap", help="the broker under test (any Kafka-protocol broker)")
    where.add_argument("--start-castle", action="store_true", help="start a Castle on a free port for the run")
    parser.add_argument("--name", default=None, help="the name of the broker under test in the report (default castle)")
    parser.add_argument("--broker-pid", type=int, help="the broker's root PID: CPU and memory of it and its descendants")
    parser.add_argument("--broker-metrics", metavar="HOST:PORT",
                        help="a Castle's metrics.listener: report how late its workers' loops ran in each window")
    parser.add_argument("--castle-override", action="append", default=[], metavar="KEY=VALUE",
                        help="a setting for --start-castle (repeatable)")
    parser.add_argument("--compare", metavar="ADDRESS|mock|kafka",
                        help="also run every workload against this broker, alternating; 'mock' starts librdkafka's mock "
                             "cluster per run; 'kafka' starts Apache Kafka (one node) for the whole run (loadtest/kafka_peer.py)")
    parser.add_argument("--compare-name", default=None,
                        help="its name in the report (default mock, kafka-<version> or the address)")
    parser.add_argument("--compare-pid", type=int, help="the compared broker's root PID (not needed for mock or kafka)")
    parser.add_argument("--kafka-version", default=DEFAULT_KAFKA_VERSION,
                        help=f"the Apache Kafka of --compare kafka (default {DEFAULT_KAFKA_VERSION}; from Maven Central)")
    parser.add_argument("--kafka-mode", choices=KAFKA_MODES, default="kraft",
                        help="kraft (default), or zookeeper for a 3.x version (e.g. --kafka-version 3.9.1)")
    parser.add_argument("--kafka-override", action="append", default=[], metavar="KEY=VALUE",
                        help="a server.properties setting for --compare kafka (repeatable)")
    parser.add_argument("--warmup-rounds", type=int, default=None,
                        help="uncounted rounds of each workload against every broker before the counted ones "
                             "(default 1 with --compare kafka, else 0)")
    parser.add_argument("--repeat", type=int, default=1, help="rounds per workload; the report shows medians")
    parser.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                        help="override a workload field for every workload, e.g. --set duration_s=20 (repeatable)")
    parser.add_argument("--out", default=None, help="results folder (default bench-results/runner-<UTC time>)")
    parser.add_argument("--no-limits", action="store_true",
                        help="skip measuring the workloads' physical limits after their runs")
    parser.add_argument("--limit-dir", default=None,
                        help="where to measure them: a directory on the broker's data filesystem "
                             "(default: the started Castle's data dir, else /var/tmp)")
    parser.add_argument("--limit-settle-s", type=float, default=SETTLE_S,
                        help="quiet before each page-ingest measurement, so memory freed just before has gone "
                             f"back to the host as it would have for the run (default {SETTLE_S:g})")
    parser.add_argument("--progress", dest="progress", action="store_true", default=None, help="progress bars (default: when stderr is a terminal)")
    parser.add_argument("--no-progress", dest="progress", action="store_false")
    return parser.parse_args(argv)


def workload_overrides(pairs: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise SystemExit(f"--set wants FIELD=VALUE, got {pair!r}")
        try:
            out[key.strip()] = tomllib.loads(f"v = {value}")["v"]  # numbers, booleans, quoted strings
        except tomllib.TOMLDecodeError:
            out[key.strip()] = value
    return out


def load_workloads(paths: list[str], overrides: dict[str, Any]) -> list[Workload]:
    out = []
    for path in paths:
        try:
            w = load_workload(path)
            out.append(workload_from_dict({**w.as_dict(), **overrides}) if overrides else w)
        except WorkloadError as exc:
            raise SystemExit(f"workload {exc}") from None
        except OSError as exc:
            raise SystemExit(f"workload {path}: {exc.strerror}") from None
    return out


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    workloads = load_workloads(args.workloads, workload_overrides(args.set))
    for line in missing_workloads(workloads):
        info(line)
    out_dir = args.out or os.path.join("bench-results", "runner-" + time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()))
    os.makedirs(out_dir, exist_ok=True)
    progress = sys.stderr.isatty() if args.progress is None else args.progress
    own: OwnBroker | None = None
    kafka: KafkaPeer | None = None
    warmup_rounds = args.warmup_rounds if args.warmup_rounds is not None else (1 if args.compare == "kafka" else 0)
    try:
        if args.start_castle:
            overrides = parse_key_values(args.castle_override, "--castle-override")
            own = OwnBroker(tempfile.mkdtemp(prefix="castle-", dir=out_dir), overrides)
            own.wait_ready()
            primary = Target(args.name or "castle", own.bootstrap, root_pid=own.pid,
                             metrics=own.settings["metrics.listener"])
            info(f"started castle serve (pid {own.pid}) on {own.bootstrap}")
        else:
            primary = Target(args.name or "castle", args.bootstrap, root_pid=args.broker_pid,
                             metrics=args.broker_metrics)
        targets = [primary]
        if args.compare == "mock":
            targets.append(Target(args.compare_name or "mock"))
        elif args.compare == "kafka":
            kafka = start_kafka(args, workloads, out_dir)
            targets.append(kafka_target(kafka, args.compare_name))
        elif args.compare:
            targets.append(Target(args.compare_name or args.compare, args.compare, root_pid=args.compare_pid))
        limits = None if args.no_limits else LimitPlan(args.limit_dir or (own.log_dir if own else "/var/tmp"),
                                                       args.limit_settle_s)
        summary = run_all(workloads, targets, args.repeat, out_dir, progress, limits, warmup_rounds)
    finally:
        if kafka is not None:
            code = kafka.stop()
            info(f"Kafka {kafka.version} exited with {code}")
        if own is not None:
            code = own.stop()
            info(f"castle serve exited with {code}")
    summary["machine"] = machine_info()
    summary["code"] = git_state()
    summary["command"] = " ".join(["python -m loadtest.runner", *(argv if argv is not None else sys.argv[1:])])
    with open(os.path.join(out_dir, "summary.json"), "wb") as handle:
        handle.write(orjson.dumps(summary, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS))
    report = write_report(summary, out_dir)
    for line in goal_lines(summary):
        info(line)
    info(f"results in {out_dir} (summary.json, {os.path.basename(report)})")
    return 0 if not summary["failures"] else 1


def start_kafka(args: argparse.Namespace, workloads: list[Workload], out_dir: str) -> KafkaPeer:
    """Apache Kafka for the whole run: its data beside the started Castle's (the same
    filesystem), its log in the results folder."""
    log = os.path.join(out_dir, f"kafka-{args.kafka_version}.log")
    info(f"starting Kafka {args.kafka_version} ({args.kafka_mode}); its log: {log}")
    peer = KafkaPeer(log, args.kafka_version, args.kafka_mode, max(w.partitions_per_topic for w in workloads),
                     parse_key_values(args.kafka_override, "--kafka-override"), base_dir=out_dir)
    try:
        peer.wait_ready()
    except BaseException:
        peer.stop()
        raise
    info(f"started Kafka {args.kafka_version} (pid {', '.join(map(str, peer.pids))}) on {peer.bootstrap}")
    return peer


def kafka_target(peer: KafkaPeer, name: str | None) -> Target:
    """One JVM is a tree root as Castle's supervisor is; with ZooKeeper, the two JVMs by PID."""
    name = name or f"kafka-{peer.version}"
    if len(peer.pids) == 1:
        return Target(name, peer.bootstrap, root_pid=peer.pid)
    return Target(name, peer.bootstrap, pids=peer.pids)


def run_all(workloads: list[Workload], targets: list[Target], repeat: int, out_dir: str, progress: bool,
            limits: LimitPlan | None = None, warmup_rounds: int = 0) -> dict[str, Any]:
    """Every workload against every target, repeat rounds; the targets take turns going
    first from one round to the next, so neither always runs on a warmer machine. Before
    them, warmup_rounds rounds of the workload against every target but the mock, counted
    nowhere (their results are written, labelled -warmupN)."""
    summary: dict[str, Any] = {"workloads": {}, "failures": [], "warmup_failures": [],
                               "targets": [t.name for t in targets], "warmup_rounds": warmup_rounds}
    for w in workloads:
        runs: dict[str, list[dict[str, Any]]] = {t.name: [] for t in targets}
        skipped = [t.name for t in targets[1:] if t.is_mock and not w.compare]
        warm_up(w, [t for t in targets if not t.is_mock], warmup_rounds, out_dir, progress, summary)
        for rnd in range(repeat):
            order = targets if rnd % 2 == 0 else targets[::-1]
            for target in order:
                if target.name in skipped:
                    continue
                label = f"{w.name}-{target.name.replace(':', '_')}-r{rnd + 1}"
                info(f"== {label}")
                try:
                    result = run_workload(w, target, out_dir, label, progress=progress, limits=limits)
                except Exception as exc:  # one failed run must not lose the others
                    info(f"{label} FAILED: {exc}")
                    summary["failures"].append({"label": label, "error": str(exc)})
                    continue
                runs[target.name].append(result)
                info(_one_line(result))
        entry: dict[str, Any] = {"workload": w.as_dict(), "skipped": skipped,
                                 "medians": {name: medians(rs) for name, rs in runs.items() if rs},
                                 "runs": {name: [r["label"] for r in rs] for name, rs in runs.items()}}
        if len(entry["medians"]) == 2:
            ours, theirs = (entry["medians"][t.name] for t in targets)
            entry["ratios"] = ratios(ours, theirs)
        summary["workloads"][w.name] = entry
    # Once every workload ran: a goal may be judged against another workload's figures.
    for entry in summary["workloads"].values():
        entry["goals"] = evaluate_goals(entry, targets[0].name, summary["workloads"])
    return summary


def missing_workloads(workloads: list[Workload]) -> list[str]:
    """A line per goal judged against a workload this run does not include (its verdict
    will be "no figure")."""
    names = {w.name for w in workloads}
    return [f"workload {w.name}: a goal is judged against workload {other!r}, which this run does not include"
            for w in workloads for other in sorted(workloads_named(parse_goals(w.goals)) - names)]


def warm_up(w: Workload, targets: list[Target], rounds: int, out_dir: str, progress: bool,
            summary: dict[str, Any]) -> None:
    """Whole runs of w that count nowhere: a JVM broker compiles its hot paths in its
    first minutes, and every broker gets the same rounds (no limits measured)."""
    for rnd in range(rounds):
        for target in targets:
            label = f"{w.name}-{target.name.replace(':', '_')}-warmup{rnd + 1}"
            info(f"== {label} (warm-up, not counted)")
            try:
                result = run_workload(w, target, out_dir, label, progress=progress)
            except Exception as exc:  # the counted rounds say whether the broker works
                info(f"{label} FAILED: {exc}")
                summary["warmup_failures"].append({"label": label, "error": str(exc)})
                continue
            info(_one_line(result))


def _one_line(result: dict[str, Any]) -> str:
    pub, con, broker = result.get("publish", {}), result.get("consume", {}), result.get("broker", {})
    parts = [f"publish {pub.get('records_per_s', 0):,.0f} rec/s {pub.get('mib_per_s') or 0:.1f} MiB/s"]
    if pub.get("latency_ms", {}).get("p99") is not None:
        parts.append(f"p99 {pub['latency_ms']['p99']} ms")
    rtt = pub.get("client_split", {}).get("rtt")
    if rtt:
        parts.append(f"round trip p99 {rtt['p99_ms_median_second']} ms in the median second, "
                     f"{rtt['p99_ms_worst_second']} in the worst")
    if pub.get("queue_full"):
        parts.append(f"producer queue full {pub['queue_full']:,.0f} times, {pub['queue_full_s']:.1f} s waited")
    if con:
        parts.append(f"consume {con.get('records_per_s', 0):,.0f} rec/s {con.get('mib_per_s') or 0:.1f} MiB/s, "
                     f"e2e p99 {con.get('latency_ms', {}).get('p99')} ms, missing {con.get('missing')}")
    if broker:
        parts.append(f"broker {broker.get('cpu_s_per_m_records')} CPU-s/M ({broker.get('kernel_cpu_s_per_m_records')} in the "
                     f"kernel), anon max {broker.get('rss_anon_mib_max')} MiB")
    lag = result.get("broker_loop_lag")
    if lag:
        parts.append(f"worker loops over {lag['late_ms']:g} ms late in {lag['late_share']:.1%} of {lag['samples']} samples "
                     f"(p99 at most {lag['p99_ms_at_most']} ms)")
    if result.get("cpu"):
        cpu = result["cpu"]
        parts.append(f"cores: producers {cpu.get('producers_cores')}, consumers {cpu.get('consumers_cores')}, "
                     f"machine busy {cpu.get('machine_busy_cores')}")
    if result.get("broker_read"):
        read = result["broker_read"]
        parts.append(f"read: broker {read.get('cpu_s_per_m_records')} CPU-s/M ({read.get('kernel_cpu_s_per_m_records')} in "
                     f"the kernel), anon max {read.get('rss_anon_mib_max')} MiB")
    return "   " + "; ".join(parts)


if __name__ == "__main__":
    sys.exit(main())
