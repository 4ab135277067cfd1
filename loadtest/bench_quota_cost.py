"""What client quota accounting costs: one broker's produce throughput with quotas configured
but not reached, beside the same broker without quotas, in one run.

    # Castle alone: 3 rounds, each one run with quotas and one without
    .venv/bin/python -m loadtest.bench_quota_cost --rounds 3

    # and Apache Kafka 4.4 (loadtest/kafka_peer.py) the same way, for its own quota cost
    .venv/bin/python -m loadtest.bench_quota_cost --rounds 3 --compare kafka

    # another workload, shorter runs
    .venv/bin/python -m loadtest.bench_quota_cost loadtest/workloads/max-throughput-1kb.toml \\
        --set duration_s=20 --rounds 4

Each broker is started ONCE for the whole run (Castle with ``--castle-override``; Kafka with
``--kafka-override``). A run is one run of the workload by the load runner
(loadtest/runner/run.py: the same client processes, windows and figures), its clients
named by the client id ``castle-bench-quota``. Before a run with quotas, AlterClientQuotas
sets, on the broker under test, Kafka's usual pair of a cluster-wide default and a named
client: ``/config/users/<default>`` and ``/config/clients/castle-bench-quota``, each with
``producer_byte_rate`` and ``consumer_byte_rate`` (``--byte-rate``, default 1 TiB/s) and
``request_percentage`` (``--request-percentage``, default 10,000: a hundred threads' time),
so every Produce and Fetch is resolved to a quota and measured, and none is throttled
(the default user's quota is the one that holds: Kafka's precedence). DescribeClientQuotas
then checks they are there. Before a run without, they are removed, and checked gone.
``--settle-s`` passes between the change and the run (the workers reload the quota table
on the store's notice), and the workload's warmup_s comes before its window as always.

Rounds alternate which mode goes first (off, on; then on, off; ...) and, with
``--compare kafka``, which broker, so a shared machine's drift favours neither. Per broker
the summary gives the medians of each mode (loadtest/runner/figures.py), every figure's
ratio with quotas to without, the ratio of each round's pair, and the cost: 1 minus the
ratio of the median publish rates. The issue's goal: Castle's cost at most 3%.

That no quota was reached is checked twice: on Castle by the workers' counts of throttled
Produce and Fetch requests (quota_throttled_produce and quota_throttled_fetch in their
stats files), and on any broker by the producers' librdkafka statistics (the longest
throttle_time_ms answered; loadtest/runner/producer.py). A run with quotas that was
throttled measured the quota, not its cost: it is reported, and the exit code is 1.

Results go to --out (default bench-results/quota-cost-<UTC time>/): each run's JSON (the
runner's), the brokers' logs and summary.json. stdout carries a table, or with --json the
summary itself.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import statistics
import sys
import tempfile
import time
from typing import Any

from loadtest.brokers import OwnBroker
from loadtest.client_quotas import Entity, QuotaClient, entity_key, entity_text
from loadtest.common import info, parse_key_values
from loadtest.kafka_peer import DEFAULT_VERSION as DEFAULT_KAFKA_VERSION
from loadtest.kafka_peer import MODES as KAFKA_MODES
from loadtest.kafka_peer import KafkaPeer
from loadtest.machine import git_state, machine_info
from loadtest.runner.__main__ import kafka_target, load_workloads, start_kafka, workload_overrides
from loadtest.runner.figures import medians, ratios
from loadtest.runner.run import Target, run_workload
from loadtest.runner.workload import Workload, workload_from_dict

DEFAULT_WORKLOAD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "workloads", "max-throughput-100b.toml")
CLIENT_ID = "castle-bench-quota"
ENTITIES: tuple[Entity, ...] = ({"user": None}, {"client-id": CLIENT_ID})
DEFAULT_BYTE_RATE = float(1 << 40)
DEFAULT_REQUEST_PERCENTAGE = 10_000.0
QUOTA_KEYS = ("producer_byte_rate", "consumer_byte_rate", "request_percentage")
MODES = ("off", "on")
GOAL_COST = 0.03  # the issue: quota accounting costs <= 3% of produce throughput
# Castle's workers count the requests they throttled (broker/process/node.py).
THROTTLE_STATS = ("quota_throttled_produce", "quota_throttled_fetch")


# --------------------------------------------------------------------------- quotas


DESCRIBE_WAIT_S = 10.0


def quota_values(args: argparse.Namespace) -> dict[str, float]:
    return dict(zip(QUOTA_KEYS, (args.byte_rate, args.byte_rate, args.request_percentage)))


def set_quotas(bootstrap: str, values: dict[str, float] | None) -> dict[str, dict[str, float]]:
    """Configure (values) or remove (None) the bench's quotas; what DescribeClientQuotas then
    answers for the bench's entities, which must be exactly that."""
    wanted = {entity_text(entity): dict(values) if values else {} for entity in ENTITIES}
    with QuotaClient(bootstrap) as client:
        for entity in ENTITIES:
            client.alter(entity, dict(values) if values else dict.fromkeys(QUOTA_KEYS))
        # Kafka (KRaft) answers from its metadata image, which takes the change a moment later.
        deadline = time.monotonic() + DESCRIBE_WAIT_S
        while True:
            described = client.describe()
            found = {entity_text(entity): described.get(entity_key(entity), {}) for entity in ENTITIES}
            if found == wanted or time.monotonic() > deadline:
                break
            time.sleep(0.2)
    if found != wanted:
        raise RuntimeError(f"DescribeClientQuotas on {bootstrap} answered {found}, expected {wanted}")
    return found


# --------------------------------------------------------------------------- throttles


def castle_throttles(run_dir: str) -> dict[str, int]:
    """Throttled requests so far, per worker stats file (each worker rewrites its own every 0.5 s)."""
    out: dict[str, int] = {}
    for path in sorted(glob.glob(os.path.join(run_dir, "worker-*.stats.json"))):
        try:
            with open(path, "rb") as handle:
                stats = json.loads(handle.read())
        except (OSError, ValueError):
            continue  # being replaced right now
        for key in THROTTLE_STATS:
            out[f"{os.path.basename(path)}:{key}"] = int(stats.get(key, 0))
    return out


def throttled_between(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    """Per counter, the requests throttled between two readings (a restarted worker counts from 0)."""
    totals = dict.fromkeys(THROTTLE_STATS, 0)
    for name, count in after.items():
        delta = count - before.get(name, 0)
        totals[name.rpartition(":")[2]] += delta if delta >= 0 else count
    return totals


def producer_throttle_ms_max(client_logs: str) -> int:
    """The longest throttle time any producer of a run was answered (its librdkafka statistics)."""
    longest = 0
    for path in glob.glob(os.path.join(client_logs, "producer-*.events.jsonl")):
        with open(path) as handle:
            for line in handle:
                event = json.loads(line)
                if event.get("event") == "client_stats":
                    longest = max(longest, int(event.get("throttle_ms_max", 0)))
    return longest


# --------------------------------------------------------------------------- runs


class Broker:
    """A broker of the run: its target for the runner, and how to read its throttle counts."""

    def __init__(self, target: Target, run_dir: str | None = None) -> None:
        self.target = target
        self.run_dir = run_dir  # a started Castle's: its workers' stats files
        self.described: dict[str, dict[str, float]] = {}
        self.runs: dict[str, list[dict[str, Any]]] = {mode: [] for mode in MODES}

    @property
    def name(self) -> str:
        return self.target.name

    @property
    def bootstrap(self) -> str:
        assert self.target.bootstrap is not None
        return self.target.bootstrap

    def throttle_counts(self) -> dict[str, int] | None:
        return castle_throttles(self.run_dir) if self.run_dir else None


def bench_workload(w: Workload) -> Workload:
    """The workload with its clients named by the bench's client id, no physical limit measured."""
    return workload_from_dict({**w.as_dict(), "physical_limit": "",
                               "producer_config": {**w.producer_config, "client.id": CLIENT_ID},
                               "consumer_config": {**w.consumer_config, "client.id": CLIENT_ID}})


def one_run(w: Workload, broker: Broker, mode: str, label: str, out_dir: str, values: dict[str, float],
            settle_s: float, progress: bool) -> dict[str, Any]:
    """Quotas on or off, then one run of w; the runner's result with what the run was throttled."""
    described = set_quotas(broker.bootstrap, values if mode == "on" else None)
    if mode == "on":
        broker.described = described
    time.sleep(settle_s)
    before = broker.throttle_counts()
    result = run_workload(w, broker.target, out_dir, label, progress=progress)
    time.sleep(0.6)  # the workers' stats files are rewritten every 0.5 s
    after = broker.throttle_counts()
    throttled: dict[str, int] = {"producer_throttle_ms_max": producer_throttle_ms_max(result["client_logs"])}
    if before is not None and after is not None:
        throttled.update(throttled_between(before, after))
    result["quota_mode"] = mode
    result["throttled"] = throttled
    with open(os.path.join(out_dir, f"{label}.json"), "w") as handle:
        json.dump(result, handle, indent=1, sort_keys=True)
    return result


def was_throttled(throttled: dict[str, int]) -> bool:
    return any(count > 0 for count in throttled.values())


def run_rounds(w: Workload, brokers: list[Broker], rounds: int, warmup_rounds: int, out_dir: str,
               values: dict[str, float], settle_s: float, progress: bool) -> dict[str, Any]:
    """Warm-up rounds (counted nowhere), then ``rounds`` rounds; in each, every broker runs the
    workload once without quotas and once with, the order of modes and of brokers turned
    round from one round to the next."""
    order: list[str] = []
    failures: list[dict[str, str]] = []
    for rnd in range(warmup_rounds):
        for broker in brokers:
            for mode in MODES:
                label = f"{w.name}-{broker.name}-{mode}-warmup{rnd + 1}"
                info(f"== {label} (warm-up, not counted)")
                try:
                    one_run(w, broker, mode, label, out_dir, values, settle_s, progress)
                except Exception as exc:  # the counted rounds say whether the broker works
                    info(f"{label} FAILED: {exc}")
    for rnd in range(rounds):
        modes = MODES if rnd % 2 == 0 else MODES[::-1]
        for broker in (brokers if rnd % 2 == 0 else brokers[::-1]):
            for mode in modes:
                label = f"{w.name}-{broker.name}-{mode}-r{rnd + 1}"
                info(f"== {label}")
                try:
                    result = one_run(w, broker, mode, label, out_dir, values, settle_s, progress)
                except Exception as exc:  # one failed run must not lose the others
                    info(f"{label} FAILED: {exc}")
                    failures.append({"label": label, "error": str(exc)})
                    continue
                result["round"] = rnd + 1
                broker.runs[mode].append(result)
                order.append(label)
                publish = result.get("publish", {})
                info(f"   publish {publish.get('records_per_s', 0):,.0f} rec/s {publish.get('mib_per_s') or 0:.2f} MiB/s; "
                     f"broker {result.get('broker', {}).get('cpu_s_per_m_records')} CPU-s/M; throttled {result['throttled']}")
    return {"order": order, "failures": failures}


# --------------------------------------------------------------------------- summary


def paired_ratios(on: list[dict[str, Any]], off: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each round's publish rate with quotas over its rate without (the same round: the
    machine's state nearest)."""
    without = {r["round"]: r["publish"]["records_per_s"] for r in off if r.get("publish", {}).get("records_per_s")}
    out = []
    for r in on:
        rate = r.get("publish", {}).get("records_per_s")
        if rate and r["round"] in without:
            out.append({"round": r["round"], "on": rate, "off": without[r["round"]],
                        "ratio": round(rate / without[r["round"]], 4)})
    return out


def broker_summary(broker: Broker) -> dict[str, Any]:
    on, off = broker.runs["on"], broker.runs["off"]
    entry: dict[str, Any] = {
        "quotas": broker.described,
        "on": {"runs": [r["label"] for r in on], "medians": medians(on) if on else {}},
        "off": {"runs": [r["label"] for r in off], "medians": medians(off) if off else {}},
        "throttled": {mode: {r["label"]: r["throttled"] for r in runs} for mode, runs in broker.runs.items()},
        "quota_reached": any(was_throttled(r["throttled"]) for r in on),
        "rounds": paired_ratios(on, off),
    }
    if on and off:
        entry["ratios"] = ratios(entry["on"]["medians"], entry["off"]["medians"])
        ratio = entry["ratios"].get("publish_records_per_s")
        entry["publish_ratio"] = ratio
        entry["cost"] = round(1 - ratio, 4) if ratio is not None else None
        paired = [p["ratio"] for p in entry["rounds"]]
        entry["paired_ratio_median"] = round(statistics.median(paired), 4) if paired else None
    return entry


def goal(castle: dict[str, Any]) -> dict[str, Any]:
    cost = castle.get("cost")
    return {"figure": "castle quota cost: 1 - publish records/s with quotas / without (medians)",
            "goal": f"<= {GOAL_COST:g}", "value": cost,
            "met": None if cost is None or castle["quota_reached"] else cost <= GOAL_COST,
            "why": "quota accounting costs <= 3% of produce throughput with quotas configured but not reached (issue 40)"}


def print_table(summary: dict[str, Any]) -> None:
    print(f"{'broker':16s} {'off rec/s':>12s} {'on rec/s':>12s} {'ratio':>7s} {'cost':>7s} "
          f"{'CPU-s/M off':>11s} {'on':>7s} {'reached':>8s}")
    for name, entry in summary["brokers"].items():
        off, on = entry["off"]["medians"], entry["on"]["medians"]

        def cell(value: Any, width: int, fmt: str) -> str:
            return f"{value:{width}{fmt}}" if isinstance(value, (int, float)) else f"{'-':>{width}s}"

        print(f"{name:16s} {cell(off.get('publish_records_per_s'), 12, ',.0f')} {cell(on.get('publish_records_per_s'), 12, ',.0f')} "
              f"{cell(entry.get('publish_ratio'), 7, '.3f')} {cell(entry.get('cost'), 7, '.1%')} "
              f"{cell(off.get('broker_cpu_s_per_m_records'), 11, '.3f')} {cell(on.get('broker_cpu_s_per_m_records'), 7, '.3f')} "
              f"{'YES' if entry['quota_reached'] else 'no':>8s}")
    g = summary["goal"]
    verdict = {True: "met", False: "NOT met", None: "no verdict"}[g["met"]]
    print(f"goal: {g['figure']} {g['goal']}: {g['value']} ({verdict})")
    for failure in summary["failures"]:
        print(f"FAILED {failure['label']}: {failure['error']}")


# --------------------------------------------------------------------------- main


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m loadtest.bench_quota_cost", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("workload", nargs="?", default=DEFAULT_WORKLOAD,
                        help="a workload file (default loadtest/workloads/max-throughput-100b.toml)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds; each runs every broker once with quotas, once without")
    parser.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                        help="override a workload field, e.g. --set duration_s=20 (repeatable)")
    parser.add_argument("--castle-override", action="append", default=[], metavar="KEY=VALUE",
                        help="a setting of the Castle started for the run (repeatable)")
    parser.add_argument("--compare", choices=("kafka",), help="also measure Apache Kafka's own quota cost (loadtest/kafka_peer.py)")
    parser.add_argument("--kafka-version", default=DEFAULT_KAFKA_VERSION, help=f"default {DEFAULT_KAFKA_VERSION}")
    parser.add_argument("--kafka-mode", choices=KAFKA_MODES, default="kraft")
    parser.add_argument("--kafka-override", action="append", default=[], metavar="KEY=VALUE",
                        help="a server.properties setting of the Kafka started for the run (repeatable)")
    parser.add_argument("--warmup-rounds", type=int, default=None,
                        help="uncounted rounds first (default 1 with --compare kafka: a JVM compiles its hot paths; else 0)")
    parser.add_argument("--byte-rate", type=float, default=DEFAULT_BYTE_RATE,
                        help="producer_byte_rate and consumer_byte_rate set (bytes/s; default 1 TiB/s, never reached)")
    parser.add_argument("--request-percentage", type=float, default=DEFAULT_REQUEST_PERCENTAGE,
                        help=f"request_percentage set (default {DEFAULT_REQUEST_PERCENTAGE:g})")
    parser.add_argument("--settle-s", type=float, default=1.0, help="pause after changing the quotas (default 1 s)")
    parser.add_argument("--out", default=None, help="results folder (default bench-results/quota-cost-<UTC time>)")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON instead of a table")
    parser.add_argument("--progress", action="store_true", help="progress bars on stderr")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    w = bench_workload(load_workloads([args.workload], workload_overrides(args.set))[0])
    out_dir = args.out or os.path.join("bench-results", "quota-cost-" + time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()))
    os.makedirs(out_dir, exist_ok=True)
    warmup_rounds = args.warmup_rounds if args.warmup_rounds is not None else (1 if args.compare == "kafka" else 0)
    values = quota_values(args)
    own: OwnBroker | None = None
    kafka: KafkaPeer | None = None
    try:
        own = OwnBroker(tempfile.mkdtemp(prefix="castle-", dir=out_dir),
                        parse_key_values(args.castle_override, "--castle-override"))
        own.wait_ready()
        info(f"started castle serve (pid {own.pid}) on {own.bootstrap}")
        brokers = [Broker(Target("castle", own.bootstrap, root_pid=own.pid, metrics=own.settings["metrics.listener"]),
                          run_dir=own.run_dir)]
        if args.compare == "kafka":
            kafka = start_kafka(args, [w], out_dir)
            brokers.append(Broker(kafka_target(kafka, None)))
        ran = run_rounds(w, brokers, args.rounds, warmup_rounds, out_dir, values, args.settle_s, args.progress)
        for broker in brokers:  # leave them as found
            try:
                set_quotas(broker.bootstrap, None)
            except (OSError, RuntimeError) as exc:
                info(f"could not remove the quotas from {broker.name}: {exc}")
    finally:
        if kafka is not None:
            info(f"Kafka {kafka.version} exited with {kafka.stop()}")
        if own is not None:
            info(f"castle serve exited with {own.stop()}")
    summary: dict[str, Any] = {
        "workload": w.as_dict(), "client_id": CLIENT_ID, "rounds": args.rounds, "warmup_rounds": warmup_rounds,
        "quotas": {entity_text(entity): values for entity in ENTITIES}, "settle_s": args.settle_s,
        "brokers": {broker.name: broker_summary(broker) for broker in brokers},
        "order": ran["order"], "failures": ran["failures"],
        "machine": machine_info(), "code": git_state(), "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "command": ["python -m loadtest.bench_quota_cost", *(argv if argv is not None else sys.argv[1:])],
    }
    summary["goal"] = goal(summary["brokers"]["castle"])
    summary["quota_reached"] = any(entry["quota_reached"] for entry in summary["brokers"].values())
    with open(os.path.join(out_dir, "summary.json"), "w") as handle:
        json.dump(summary, handle, indent=1, sort_keys=True)
    if args.json:
        print(json.dumps(summary, indent=1, sort_keys=True))
    else:
        print_table(summary)
    info(f"results in {out_dir} (summary.json)")
    if summary["quota_reached"]:
        info("a run with quotas was throttled: it measured the quota, not its cost (raise --byte-rate)")
    return 1 if summary["failures"] or summary["quota_reached"] else 0


if __name__ == "__main__":
    sys.exit(main())
