"""Castle against librdkafka's mock broker: the same workloads, a Markdown table.

    .venv/bin/python -m loadtest.compare --castle 127.0.0.1:9092 --castle-pid 4242 --mock
    .venv/bin/python -m loadtest.compare --mock --num-records-scale 0.1      # mock only

For each workload (100-byte and 1 KiB records, acks=1 and acks=all, linger.ms=5, one
producer, no compression) it runs producer_perf and then consumer_perf on a fresh topic
of --partitions partitions (pre-created on the mock, which has no CreateTopics), against
Castle (--castle; CPU of --castle-pid and its descendants) and against a mock started
here as a subprocess (python -m loadtest.mock_broker; CPU of that process; stopped by
its PID at the end). The two brokers alternate: which goes first
flips from one workload (and repetition) to the next, so neither always gets the
warmer machine. Each tool runs in its own process and reports JSON; with --repeat R the
table shows medians.

The table gives, per workload: produce records/s, MiB/s, latency p50/p99/p99.9 (ms),
broker CPU-s per million records produced, consume records/s, MiB/s and broker CPU-s
per million records consumed; then the castle/mock ratio of each.

Read the mock's figures with care: its CPU is the whole mock_broker process, which also
holds an idle client handle (its idle rate is measured and printed), and it keeps only
5 MiB per partition, so its consumer re-reads the same records from memory
(consumer_perf --rewind, on the mock only: Castle must return every record produced).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator, NamedTuple

from loadtest.brokers import MockBroker
from loadtest.common import CLOCK_TICKS, BrokerCpu, info

PYTHON = sys.executable
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Workload(NamedTuple):
    name: str
    record_size: int
    acks: str
    records: int


def workloads(scale: float) -> list[Workload]:
    def n(base: int) -> int:
        return max(1000, int(base * scale))

    return [
        Workload("100B-acks1", 100, "1", n(1_000_000)),
        Workload("100B-acksall", 100, "all", n(1_000_000)),
        Workload("1KiB-acks1", 1024, "1", n(300_000)),
        Workload("1KiB-acksall", 1024, "all", n(300_000)),
    ]


@dataclass
class Target:
    name: str
    bootstrap: str
    cpu_args: list[str]  # how producer_perf/consumer_perf find the broker's processes


# ----------------------------------------------------------------- the mock


def idle_cpu_rate(pid: int, seconds: float) -> float:
    """CPU-s per second a process uses while nobody talks to it."""
    cpu = BrokerCpu(pids=[pid])
    cpu.start()
    time.sleep(seconds)
    cpu.stop()
    return cpu.seconds / seconds


# ----------------------------------------------------------------- one run


def run_tool(module: str, args: list[str], label: str) -> dict[str, Any]:
    """Runs loadtest.<module> with --json in its own process; returns its result."""
    cmd = [PYTHON, "-m", f"loadtest.{module}", *args, "--json"]
    done = subprocess.run(cmd, cwd=REPO_ROOT, stdout=subprocess.PIPE, text=True)
    lines = done.stdout.strip().splitlines()
    if not lines:
        raise SystemExit(f"{module} printed no result (exit code {done.returncode}): {' '.join(cmd)}")
    result: dict[str, Any] = json.loads(lines[-1])
    result["exit_code"] = done.returncode
    if done.returncode:
        info(f"WARNING: {module} exited with {done.returncode} ({label})")
    return result


def run_workload(target: Target, w: Workload, rep: int, args: argparse.Namespace) -> dict[str, Any]:
    topic = topic_name(args.topic_prefix, w, rep)
    label = f"{w.name} on {target.name} ({target.bootstrap}), topic {topic}"
    info(f"== {label}")
    common = ["--bootstrap", target.bootstrap, "--topic", topic, "--num-records", str(w.records), *target.cpu_args]
    populated_before = castle_page_populate_s(args.castle_run_dir) if target.name == "castle" else None
    produce = run_tool(
        "producer_perf",
        [*common, "--record-size", str(w.record_size), "--acks", w.acks, "--linger-ms", str(args.linger_ms),
         "--compression", "none", "--partitions", str(args.partitions), "--report-interval-s", "0"],
        label,
    )  # fmt: skip
    if populated_before is not None:
        populated = castle_page_populate_s(args.castle_run_dir)
        if populated is not None:
            produce["page_populate_s_per_m_records"] = (populated - populated_before) / w.records * 1e6
    # Only the mock needs to re-read (it keeps 5 MiB per partition); Castle must hand
    # back every record produced, and a shortfall is a failed run, not a rewind.
    consume = run_tool("consumer_perf", [*common, *(["--rewind"] if target.name == "mock" else [])], label)
    return {"workload": w.name, "target": target.name, "rep": rep, "topic": topic, "produce": produce, "consume": consume}


def castle_page_populate_s(run_dir: str | None) -> float | None:
    """Seconds Castle's workers have spent pre-faulting log pages (madvise), summed from
    their stats files in ``run.dir``; None without --castle-run-dir. The files are
    rewritten every 0.5 s, so this waits 0.6 s first to read a fresh figure."""
    if not run_dir:
        return None
    time.sleep(0.6)
    total = 0.0
    for name in os.listdir(run_dir):
        if name.startswith("worker-") and name.endswith(".stats.json"):
            with open(os.path.join(run_dir, name), "rb") as handle:
                total += float(json.loads(handle.read()).get("page_populate_seconds", 0.0))
    return total


def topic_name(prefix: str, w: Workload, rep: int) -> str:
    return f"{prefix}-{w.name}-r{rep}"


def schedule(targets: list[Target], loads: list[Workload], repeat: int) -> Iterator[tuple[int, Workload, Target]]:
    """Every (repetition, workload, target), the target order flipping each time."""
    turn = 0
    for rep in range(repeat):
        for w in loads:
            order = targets if turn % 2 == 0 else targets[::-1]
            for target in order:
                yield rep, w, target
            turn += 1


# ----------------------------------------------------------------- the table

COLUMNS: list[tuple[str, Callable[[dict[str, Any]], float | None]]] = [
    ("produce rec/s", lambda r: r["produce"]["records_per_s"]),
    ("produce MiB/s", lambda r: r["produce"]["mib_per_s"]),
    ("p50 ms", lambda r: r["produce"]["latency_ms"].get("p50")),
    ("p99 ms", lambda r: r["produce"]["latency_ms"].get("p99")),
    ("p99.9 ms", lambda r: r["produce"]["latency_ms"].get("p99_9")),
    ("produce broker CPU-s/M", lambda r: r["produce"].get("broker_cpu_s_per_m_records")),
    ("of which page population s/M", lambda r: r["produce"].get("page_populate_s_per_m_records")),
    ("consume rec/s", lambda r: r["consume"]["records_per_s"]),
    ("consume MiB/s", lambda r: r["consume"]["mib_per_s"]),
    ("consume broker CPU-s/M", lambda r: r["consume"].get("broker_cpu_s_per_m_records")),
]


def median_row(runs: list[dict[str, Any]]) -> list[float | None]:
    row: list[float | None] = []
    for _, get in COLUMNS:
        values = [v for v in (get(r) for r in runs) if v is not None]
        row.append(statistics.median(values) if values else None)
    return row


def fmt(value: float | None) -> str:
    if value is None:
        return "–"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.3g}" if abs(value) < 10 else f"{value:.1f}"


def failed(run: dict[str, Any]) -> bool:
    """A tool exited non-zero: delivery errors, or fewer records than asked for."""
    return bool(run["produce"]["exit_code"] or run["consume"]["exit_code"])


def markdown_table(results: list[dict[str, Any]], loads: list[Workload], target_names: list[str]) -> str:
    header = ["workload", "broker", *(name for name, _ in COLUMNS)]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for w in loads:
        medians = {}
        for name in target_names:
            runs = [r for r in results if r["workload"] == w.name and r["target"] == name]
            medians[name] = median_row(runs)
            label = f"{name} FAILED" if any(failed(r) for r in runs) else name
            lines.append(f"| {w.name} | {label} | " + " | ".join(fmt(v) for v in medians[name]) + " |")
        if len(target_names) == 2:
            castle, mock = medians["castle"], medians["mock"]
            ratios = [c / m if c is not None and m else None for c, m in zip(castle, mock)]
            lines.append(
                f"| {w.name} | castle/mock | " + " | ".join(f"{r:.2f}x" if r is not None else "–" for r in ratios) + " |"
            )
    return "\n".join(lines)


def notes(results: list[dict[str, Any]], loads: list[Workload], mock_idle: float | None, args: argparse.Namespace) -> str:
    out = [
        f"{args.repeat} run(s) per cell, medians; {args.partitions} partition(s), linger.ms={args.linger_ms}, "
        "no compression, 1 producer. MiB = 2**20 bytes. Latency: produce() to acknowledgement.",
        f"Broker CPU comes from /proc in 1/{CLOCK_TICKS} s ticks: each run's figure is exact to "
        f"+-1 tick ({1 / CLOCK_TICKS:.2f} s) per process, i.e. +-{1e6 / CLOCK_TICKS / min(w.records for w in loads):.3f} "
        "CPU-s per million records for the smallest run here.",
    ]
    if args.castle_run_dir:
        out.append("Page population: wall time Castle's workers spent in madvise(MADV_POPULATE_WRITE) pre-faulting "
                   "new log pages (their stats files); it is part of the broker CPU column, not added to it.")
    if mock_idle is not None:
        out.append(mock_note(results, mock_idle))
    out += client_bound_notes(results) + problem_notes(results, args.partitions)
    return "\n".join(f"* {line}" for line in out)


def mock_note(results: list[dict[str, Any]], mock_idle: float) -> str:
    rewinds = [r["consume"]["rewinds"] for r in results if r["target"] == "mock"]
    return (
        f"Mock CPU is the whole mock_broker process, including its holding client handle; "
        f"measured idle: {mock_idle:.4f} CPU-s per second. The mock keeps 5 MiB per partition, so its "
        f"consumer re-read the retained records ({min(rewinds, default=0)}–{max(rewinds, default=0)} rewinds per run)."
    )


def client_bound_notes(results: list[dict[str, Any]]) -> list[str]:
    # The Python thread of a client process is one core at most: a client near 100%
    # of a core is likely what limits the rate, whatever the broker could do.
    out = []
    for phase in ("produce", "consume"):
        bound = [r for r in results if r[phase]["client_cpu_s"] >= 0.9 * r[phase]["elapsed_s"]]
        if bound:
            out.append(
                f"{phase}: in {len(bound)} of {len(results)} runs the client used >= 90% of a core, "
                "so the client may have set the rate (per-run client_cpu_s in --json)."
            )
    return out


def problem_notes(results: list[dict[str, Any]], partitions: int) -> list[str]:
    out = []
    odd = [
        f"{r['target']}/{r['workload']}: {r['produce']['partitions']}"
        for r in results
        if r["produce"]["partitions"] != partitions
    ]
    if odd:
        out.append(f"Topics whose partition count is not --partitions {partitions} (broker auto-created?): {', '.join(odd)}")
    bad = [f"{r['target']}/{r['workload']}/r{r['rep']}" for r in results if failed(r)]
    if bad:
        out.append(f"FAILED (a tool exited non-zero; see its warnings above; figures still in the medians): {', '.join(bad)}")
    return out


# ----------------------------------------------------------------- main


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--castle", metavar="HOST:PORT", help="a running Castle broker")
    p.add_argument("--castle-pid", type=int, help="Castle's (supervisor) PID; its descendants are counted too")
    p.add_argument("--castle-run-dir", metavar="DIR",
                   help="Castle's run.dir: also report the workers' page pre-fault time (from their stats files)")
    p.add_argument("--mock", action="store_true", help="also run against a fresh librdkafka mock broker")
    p.add_argument("--num-records-scale", type=float, default=1.0, help="multiplies 1,000,000 (100 B) and 300,000 (1 KiB)")
    p.add_argument("--partitions", type=int, default=1, help="partitions of each benchmark topic (default 1)")
    p.add_argument("--linger-ms", type=float, default=5.0)
    p.add_argument("--repeat", type=int, default=1, help="runs per (workload, broker); the table shows medians")
    p.add_argument("--workloads", help="comma-separated subset of: " + ",".join(w.name for w in workloads(1)))
    p.add_argument("--topic-prefix", default=f"perf-{int(time.time())}", help="topic names: PREFIX-WORKLOAD-rN")
    p.add_argument("--idle-sample-s", type=float, default=2.0, help="how long to measure the idle mock's CPU")
    p.add_argument("--json", metavar="PATH", help="also write every run's raw results here")
    args = p.parse_args(argv)
    if not args.castle and not args.mock:
        p.error("nothing to measure: give --castle HOST:PORT, --mock, or both")
    if args.castle and args.castle_pid is None:
        p.error("--castle needs --castle-pid (for its CPU)")
    return args


def selected_workloads(args: argparse.Namespace) -> list[Workload]:
    loads = workloads(args.num_records_scale)
    if not args.workloads:
        return loads
    wanted = set(args.workloads.split(","))
    unknown = wanted - {w.name for w in loads}
    if unknown:
        raise SystemExit(f"unknown workload(s): {', '.join(sorted(unknown))}")
    return [w for w in loads if w.name in wanted]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    loads = selected_workloads(args)
    topics = [topic_name(args.topic_prefix, w, rep) for rep in range(args.repeat) for w in loads]
    targets: list[Target] = []
    if args.castle:
        targets.append(Target("castle", args.castle, ["--broker-pid-tree", str(args.castle_pid)]))
    mock: MockBroker | None = None
    mock_idle: float | None = None
    try:
        if args.mock:
            mock = MockBroker(topics, args.partitions)
            info(f"mock broker PID {mock.pid} at {mock.bootstrap}")
            mock_idle = idle_cpu_rate(mock.pid, args.idle_sample_s)
            targets.append(Target("mock", mock.bootstrap, ["--broker-pids", str(mock.pid)]))
        results = [run_workload(target, w, rep, args) for rep, w, target in schedule(targets, loads, args.repeat)]
    finally:
        if mock is not None:
            mock.stop()
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "mock_idle_cpu_per_s": mock_idle, "runs": results}, f, indent=1)
    print(markdown_table(results, loads, [t.name for t in targets]))
    print()
    print(notes(results, loads, mock_idle, args), flush=True)
    return 1 if any(failed(r) for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
