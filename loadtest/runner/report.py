"""The report of a runner invocation: a Markdown table and charts (matplotlib PNG).

    .venv/bin/python -m loadtest.runner.report bench-results/runner-XXXX   # (re)write it

For every workload: a table with one row per broker (medians over the rounds) and a row
of ratios when two brokers ran; the verdict on each of the workload's goals (goals.py);
a chart of throughput over time (publish and consume, every round, one colour per
broker) and a chart of latency percentiles (publish and end-to-end, p50/p99/p99.9/max,
median over rounds, log scale).
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import matplotlib

matplotlib.use("Agg")  # no display: files only

import matplotlib.pyplot as plt  # noqa: E402

COLUMNS = [  # (summary figure, header, digits)
    ("publish_records_per_s", "publish rec/s", 0),
    ("publish_mib_per_s", "publish MiB/s", 1),
    ("publish_p50_ms", "pub p50 ms", 2),
    ("publish_p99_ms", "pub p99 ms", 2),
    ("publish_p99_9_ms", "pub p99.9 ms", 2),
    ("publish_max_ms", "pub max ms", 1),
    ("publish_rtt_p99_ms", "pub round trip p99 ms (median second)", 2),
    ("publish_commit_ms_mean", "commit ms mean", 2),
    ("consume_records_per_s", "consume rec/s", 0),
    ("consume_mib_per_s", "consume MiB/s", 1),
    ("e2e_p50_ms", "e2e p50 ms", 2),
    ("e2e_p99_ms", "e2e p99 ms", 2),
    ("e2e_p99_9_ms", "e2e p99.9 ms", 2),
    ("e2e_max_ms", "e2e max ms", 1),
    ("broker_cpu_s_per_m_records", "broker CPU-s / M rec", 3),
    ("broker_rss_anon_mib_max", "broker RssAnon max MiB", 1),
    ("broker_loop_late_share", "worker loops > 10 ms late, share", 3),
    ("producers_cores", "producer cores", 2),
    ("machine_busy_cores", "machine busy cores", 2),
    ("physical_limit_mib_per_s", "physical limit MiB/s", 1),
    ("of_physical_limit", "of the limit", 2),
]


def _fmt(value: float | None, digits: int) -> str:
    if value is None:
        return "–"
    return f"{value:,.{digits}f}"


# Columns shown only when some broker has them: most workloads name no physical limit,
# only a Castle reports its loops' lag, only a transactional producer commits.
OPTIONAL_COLUMNS = {"physical_limit_mib_per_s", "of_physical_limit", "broker_loop_late_share", "publish_commit_ms_mean"}


def table(entry: dict[str, Any]) -> str:
    names = list(entry["medians"])
    columns = [c for c in COLUMNS if c[0] not in OPTIONAL_COLUMNS
               or any(m.get(c[0]) is not None for m in entry["medians"].values())]
    lines = ["| broker | " + " | ".join(h for _, h, _ in columns) + " |", "|---" * (len(columns) + 1) + "|"]
    for name in names:
        m = entry["medians"][name]
        lines.append(f"| {name} | " + " | ".join(_fmt(m.get(k), d) for k, _, d in columns) + " |")
    if entry.get("ratios"):
        r = entry["ratios"]
        lines.append(f"| {names[0]} / {names[1]} | " + " | ".join(_fmt(r.get(k), 2) + ("x" if r.get(k) else "")
                                                               for k, _, _ in columns) + " |")
    return "\n".join(lines)


def goals_table(verdicts: list[dict[str, Any]], primary: str) -> str:
    """The workload's goals (loadtest/runner/goals.py) and the verdict on each."""
    lines = [f"Goals for {primary} (median over rounds):", "",
             "| goal | value | verdict | why |", "|---|---:|---|---|"]
    for v in verdicts:
        value = "–" if v["value"] is None else f"{v['value']:,.3f}".rstrip("0").rstrip(".")
        verdict = f"**{v['verdict']}**" if v["verdict"] != "met" else v["verdict"]
        lines.append(f"| {v['goal']} | {value} | {verdict} | {v['why']} |")
    return "\n".join(lines)


def _load_runs(out_dir: str, labels: list[str]) -> list[dict[str, Any]]:
    runs = []
    for label in labels:
        try:
            with open(os.path.join(out_dir, f"{label}.json")) as handle:
                runs.append(json.load(handle))
        except OSError:
            pass
    return runs


def throughput_chart(name: str, runs_by_target: dict[str, list[dict[str, Any]]], path: str) -> None:
    fig, (pub, con) = plt.subplots(2, 1, figsize=(9, 6), sharex=True)
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for colour, (target, runs) in zip(colours, runs_by_target.items()):
        for i, run in enumerate(runs):
            rows = run.get("timeline", [])
            t = [r["t"] for r in rows]
            kw = {"color": colour, "alpha": 0.9 if i == 0 else 0.45, "label": target if i == 0 else None}
            pub.plot(t, [r["publish_bytes"] / 2**20 for r in rows], **kw)
            con.plot(t, [r["consume_bytes"] / 2**20 for r in rows], **kw)
    pub.set_ylabel("publish MiB/s")
    con.set_ylabel("consume MiB/s")
    con.set_xlabel("seconds since the producers started (catch-up: since the consumers started)")
    pub.set_title(f"{name}: throughput per second (every round)")
    for ax in (pub, con):
        ax.grid(alpha=0.3)
        ax.legend(loc="best")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def latency_chart(name: str, entry: dict[str, Any], path: str) -> None:
    keys = [("publish_p50_ms", "pub p50"), ("publish_p99_ms", "pub p99"), ("publish_p99_9_ms", "pub p99.9"),
            ("publish_max_ms", "pub max"), ("e2e_p50_ms", "e2e p50"), ("e2e_p99_ms", "e2e p99"),
            ("e2e_p99_9_ms", "e2e p99.9"), ("e2e_max_ms", "e2e max")]
    targets = list(entry["medians"])
    fig, ax = plt.subplots(figsize=(9, 4))
    width = 0.8 / max(1, len(targets))
    for i, target in enumerate(targets):
        values = [entry["medians"][target].get(k) or 0 for k, _ in keys]
        ax.bar([x + i * width for x in range(len(keys))], values, width, label=target)
    ax.set_xticks([x + width * (len(targets) - 1) / 2 for x in range(len(keys))], [label for _, label in keys])
    ax.set_yscale("log")
    ax.set_ylabel("ms (log scale)")
    ax.set_title(f"{name}: latency percentiles (median over rounds)")
    ax.grid(alpha=0.3, axis="y")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def write_report(summary: dict[str, Any], out_dir: str) -> str:
    parts = ["# Benchmark report", ""]
    if summary.get("command"):
        parts += [f"Command: `{summary['command']}`", ""]
    machine = summary.get("machine") or {}
    if machine:
        parts += [f"Machine: {machine.get('nproc')} CPUs ({machine.get('cpu_model')}), "
                  f"{(machine.get('mem_total_bytes') or 0) / 2**30:.0f} GiB, kernel {machine.get('kernel')}, "
                  f"{machine.get('python')}, librdkafka {machine.get('librdkafka')}", ""]
    if summary.get("warmup_rounds"):
        parts += [f"Warm-up: {summary['warmup_rounds']} uncounted round(s) of each workload against every broker "
                  "started for the whole run, before the counted rounds (their results: *-warmupN.json).", ""]
    for name, entry in summary["workloads"].items():
        w = entry["workload"]
        parts += [f"## {name}", "", w.get("description") or "", ""]
        if not entry["medians"]:
            parts += ["No run succeeded.", ""]
            continue
        parts += [table(entry), ""]
        if entry.get("goals"):
            parts += [goals_table(entry["goals"], summary.get("targets", ["the broker under test"])[0]), ""]
        if w.get("physical_limit"):
            parts += [f"Physical limit: {w['physical_limit']}, measured with {w.get('limit_size_mib'):,.0f} MiB right "
                      "after each run against a broker that keeps its data (loadtest/runner/limits.py); "
                      "\"of the limit\" is the run's rate over it, median over rounds.", ""]
        if entry.get("skipped"):
            parts += [f"Not run against {', '.join(entry['skipped'])} (the workload needs more than it retains).", ""]
        runs = {t: _load_runs(out_dir, labels) for t, labels in entry["runs"].items()}
        throughput_png, latency_png = f"{name}-throughput.png", f"{name}-latency.png"
        throughput_chart(name, runs, os.path.join(out_dir, throughput_png))
        latency_chart(name, entry, os.path.join(out_dir, latency_png))
        parts += [f"![throughput]({throughput_png})", "", f"![latency]({latency_png})", ""]
    if summary.get("failures"):
        parts += ["## Failed runs", ""] + [f"* {f['label']}: {f['error']}" for f in summary["failures"]] + [""]
    path = os.path.join(out_dir, "report.md")
    with open(path, "w") as handle:
        handle.write("\n".join(parts))
    return path


def main(argv: list[str] | None = None) -> int:
    args = argv if argv is not None else sys.argv[1:]
    if len(args) != 1:
        print("usage: python -m loadtest.runner.report RESULTS_DIR", file=sys.stderr)
        return 2
    with open(os.path.join(args[0], "summary.json")) as handle:
        summary = json.load(handle)
    print(write_report(summary, args[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
