"""An idle broker's cost: CPU, wake-ups and memory of a broker that serves nothing.

An operator sees it on every broker of a quiet cluster, and a test suite pays it for every
broker it keeps up while it waits. Castle's defaults (one worker per core, the coordinator,
the supervisor) start on a free port with fresh data; ``--compare kafka`` then starts Apache
Kafka (4.4 KRaft, one node: loadtest/kafka_peer.py) the same way. Each broker is left alone
``--settle-s`` seconds after it answers (startup work, the internal topics' creation), then
measured for ``--seconds``:

* CPU: utime+stime of every process of the broker (/proc), as a share of one core.
* Wake-ups: voluntary context switches of every thread, per second (what a quiet process
  pays for its timers and polls).
* RssAnon, summed over the processes (loadtest/runner/procstats.py says why not RSS).

    python -m loadtest.bench_idle --seconds 30 --settle-s 10 --compare kafka
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from typing import Any

from loadtest.brokers import OwnBroker
from loadtest.common import CLOCK_TICKS, info, proc_cpu_ticks, process_tree
from loadtest.runner.procstats import BrokerProcesses


def voluntary_switches(pids: list[int]) -> int:
    """Voluntary context switches of every thread of ``pids`` (gone ones count nothing)."""
    total = 0
    for pid in pids:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/status", "rb") as handle:
                    for line in handle:
                        if line.startswith(b"voluntary_ctxt_switches:"):
                            total += int(line.split()[1])
                            break
            except (OSError, ValueError):
                continue
    return total


def _process_name(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            title = handle.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return "gone"
    return title.rsplit(": ", 1)[-1] if ": " in title else os.path.basename(title.split(" ")[0])


def measure(pids: list[int], seconds: float) -> dict[str, Any]:
    """CPU, wake-ups and RssAnon of ``pids`` over ``seconds``."""
    def ticks() -> dict[int, int]:
        found = {}
        for pid in pids:
            try:
                found[pid] = proc_cpu_ticks(pid)
            except (OSError, ValueError):
                continue
        return found

    before, switches = ticks(), voluntary_switches(pids)
    started = time.monotonic()
    time.sleep(seconds)
    after, switched = ticks(), voluntary_switches(pids)
    elapsed = time.monotonic() - started
    per_process = {f"{_process_name(pid)} ({pid})": round((after[pid] - before[pid]) / CLOCK_TICKS / elapsed, 4)
                   for pid in pids if pid in before and pid in after}
    return {
        "seconds": round(elapsed, 1),
        "cpu_cores": round(sum(per_process.values()), 4),
        "cpu_cores_by_process": per_process,
        "wakeups_per_s": round((switched - switches) / elapsed, 1),
        "rss_anon_mib": round(BrokerProcesses(pids=pids).sample().rss_anon_mib, 1),
    }


def measure_castle(base: str, settle_s: float, seconds: float) -> dict[str, Any]:
    os.makedirs(os.path.join(base, "castle"))
    broker = OwnBroker(os.path.join(base, "castle"), {})
    try:
        broker.wait_ready()
        time.sleep(settle_s)
        return {"broker": "castle", **measure(process_tree(broker.pid), seconds)}
    finally:
        broker.stop()


def measure_kafka(base: str, settle_s: float, seconds: float) -> dict[str, Any]:
    from loadtest.kafka_peer import KafkaPeer

    peer = KafkaPeer(os.path.join(base, "kafka", "kafka.log"), base_dir=base)
    try:
        peer.wait_ready()
        time.sleep(settle_s)
        return {"broker": f"kafka {peer.version}", **measure([peer.pid], seconds)}
    finally:
        peer.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=30.0, help="how long each broker is measured")
    parser.add_argument("--settle-s", type=float, default=10.0, help="left alone after it answers, first")
    parser.add_argument("--compare", choices=["kafka"], help="measure Apache Kafka 4.4 (one node, KRaft) too")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args(argv)
    base = tempfile.mkdtemp(prefix="castle-bench-idle-")
    try:
        results = [measure_castle(base, args.settle_s, args.seconds)]
        info(f"castle idle: {results[0]['cpu_cores']} cores, {results[0]['wakeups_per_s']} wake-ups/s")
        if args.compare == "kafka":
            results.append(measure_kafka(base, args.settle_s, args.seconds))
    finally:
        shutil.rmtree(base, ignore_errors=True)
    if args.json:
        json.dump(results, sys.stdout, indent=1)
        print()
        return 0
    print(f"{'broker':<14} {'CPU, cores':>10} {'wake-ups/s':>11} {'RssAnon MiB':>12}  by process")
    for r in results:
        parts = ", ".join(f"{name} {cores}" for name, cores in r["cpu_cores_by_process"].items())
        print(f"{r['broker']:<14} {r['cpu_cores']:>10.4f} {r['wakeups_per_s']:>11.1f} {r['rss_anon_mib']:>12.1f}  {parts}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
