"""Consumer-group benchmark: recovery after a member's death, join+sync of a large group.

Run by hand, never by the test suite (tests/integration/test_bench_groups.py only checks
that a tiny configuration runs)::

    .venv/bin/python -m loadtest.bench_groups                      # defaults, ~40 s
    .venv/bin/python -m loadtest.bench_groups --bootstrap 127.0.0.1:9092 --broker-pid PID
    .venv/bin/python -m loadtest.bench_groups --phases join --join-consumers 100 --join-processes 5

Without --bootstrap it starts its own broker (``castle serve``) on a free port of
127.0.0.1 with a temporary log dir and run dir, and the overrides
``group.initial.rebalance.delay.ms=0`` and ``group.min.session.timeout.ms=1000``
(``--broker-override KEY=VALUE`` adds or replaces any setting), and stops it at the end.
Figures and analysis: docs/BENCHMARKS.md, "Consumer groups (issue 4)".

1. **Recovery after a member's death** (phase ``recovery``). A topic of --partitions
   partitions; one producer process writes --rate records/s, spread evenly over every
   partition, each record's value being the producer's CLOCK_MONOTONIC time (the clock
   is system-wide, so every process here reads the same one). For each of --runs runs,
   a fresh group of --members member processes (confluent-kafka, range assignor,
   session.timeout.ms=--session-timeout-ms, heartbeat.interval.ms=--heartbeat-interval-ms,
   auto commit every second, auto.offset.reset=latest) subscribes; once every partition
   is assigned to exactly one member and every member has consumed from each of its
   partitions, and that lasted --settle-s plus a random 0..--kill-jitter-s (default:
   one heartbeat interval, so that the kill falls at a random point of the heartbeat
   cycle: the members of one generation heartbeat in step, and a fixed wait would kill
   at the same point every time), the member with the most partitions is SIGKILLed.
   The figure of the run is the time from the kill until each of the victim's
   partitions has been consumed again by a survivor (the first record a survivor
   consumed from it), max over the victim's partitions. Also reported: when the broker
   expired the victim (its log line "MEMBER missed the session timeout", with a broker
   started here; ms resolution, wall clock), when the first survivor was told to
   rebalance (its on_revoke: its next heartbeat after the expiry brought the news), and
   when the last survivor got its new assignment (on_assign). The goal is
   session.timeout.ms + 1 s.

2. **Join+sync of a large group** (phase ``join``). --join-consumers consumers of one
   group on a topic with as many partitions, run as threads of --join-processes
   processes (a librdkafka consumer is a handful of C threads; each Python thread here
   polls one consumer). Every process builds its consumers, says it is ready, and on
   "go" (sent to all processes at once) every consumer calls subscribe(). Per consumer:
   the time from its subscribe() to its first on_assign callback (one join+sync round
   for it, however many rebalances the group went through meanwhile). For the group:
   the time from the first subscribe() until every consumer had an assignment, and
   until the group was stable (every consumer holding exactly its final partitions:
   the assignments disjoint and covering every partition); how many on_assign calls
   each consumer saw (rebalances); and the broker's CPU seconds from "go" to stable:
   utime+stime (+ reaped children's) of the ``castle serve`` process and its children
   (workers, coordinator) from /proc/<pid>/stat, per role. The consumer processes' own
   CPU over the same interval is reported too: on a 2-core machine they compete with
   the broker. Repeated --join-runs times (default 3), each with a fresh group on the
   same topic; with a broker started here, the generations the coordinator formed (its
   log's "generation N with K members") are reported too.

Every time is CLOCK_MONOTONIC (time.monotonic()), taken in the process where the event
happened. The result (--out, default bench-results/bench_groups-<UTC time>.json) holds
the machine, the command line, the code (git commit, modified files), the settings, the
machine's load (load average, busy share of all CPUs over the run: other processes
count too), every run and every per-consumer figure; a short table goes to stdout,
progress to stderr. The work dir (broker log, children's stderr) is removed at the end
unless --keep-work-dir or something failed.

Internal roles (started by the benchmark itself, one JSON config argument each)::

    python -m loadtest.bench_groups _member   CONFIG_JSON   # one group member
    python -m loadtest.bench_groups _producer CONFIG_JSON   # the steady producer
    python -m loadtest.bench_groups _joiners  CONFIG_JSON   # N consumers as threads
"""

from __future__ import annotations

import argparse
import datetime
import gc
import json
import os
import random
import shlex
import shutil
import signal
import statistics
import sys
import tempfile
import threading
import time
from typing import Any, Callable, Iterable

from loadtest.brokers import OwnBroker, process_role, wait_until
from loadtest.children import ChildProcess, emit
from loadtest.common import CLOCK_TICKS, ensure_topic, info, parse_key_values, percentile, proc_cpu_ticks, process_tree
from loadtest.machine import git_state, load_average, machine_info, system_cpu

PYTHON = sys.executable
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_BROKER_OVERRIDES = {"group.initial.rebalance.delay.ms": "0", "group.min.session.timeout.ms": "1000"}
now = time.monotonic

# =============================================================================== child roles
# Each child prints one JSON object per line on stdout, flushed at once, so a child
# killed with SIGKILL has told everything up to its death.

def _stop_on_sigterm() -> threading.Event:
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda _signum, _frame: stop.set())
    return stop


def consumer_config(cfg: dict[str, Any]) -> dict[str, Any]:
    config = {
        "bootstrap.servers": cfg["bootstrap"],
        "group.id": cfg["group"],
        "session.timeout.ms": cfg["session_timeout_ms"],
        "heartbeat.interval.ms": cfg["heartbeat_interval_ms"],
        "partition.assignment.strategy": cfg["assignor"],
        "auto.offset.reset": "latest",
        "enable.auto.commit": True,
        "auto.commit.interval.ms": 1000,
    }
    config.update(cfg.get("client_config", {}))
    return config


def role_member(cfg: dict[str, Any]) -> None:
    """One group member. Events: subscribing, assigned, revoked, first (the first record
    of each partition since the latest assignment), closed."""
    from confluent_kafka import Consumer

    stop = _stop_on_sigterm()
    seen: set[int | None] = set()

    def on_assign(_consumer: Any, partitions: list[Any]) -> None:
        seen.clear()
        emit(event="assigned", t=now(), partitions=sorted(p.partition for p in partitions))

    def on_revoke(_consumer: Any, partitions: list[Any]) -> None:
        emit(event="revoked", t=now(), partitions=sorted(p.partition for p in partitions))

    consumer = Consumer(consumer_config(cfg))
    emit(event="subscribing", t=now())
    consumer.subscribe([cfg["topic"]], on_assign=on_assign, on_revoke=on_revoke)
    records = errors = 0
    # poll() (one message) rather than consume(n, timeout): consume waits for a full
    # batch or the timeout, which would delay the first record by up to the timeout.
    while not stop.is_set():
        message = consumer.poll(0.1)
        if message is None:
            continue
        if message.error():
            errors += 1
            continue
        records += 1
        partition = message.partition()
        if partition not in seen:
            t = now()
            seen.add(partition)
            value = message.value()
            try:
                produced: float | None = float(value) if value is not None else None
            except ValueError:
                produced = None
            emit(event="first", t=t, partition=partition, offset=message.offset(), produced=produced)
    consumer.close()
    emit(event="closed", t=now(), records=records, errors=errors)


def role_producer(cfg: dict[str, Any]) -> None:
    """Writes cfg['rate'] records/s round-robin over every partition until SIGTERM."""
    from confluent_kafka import Producer

    stop = _stop_on_sigterm()
    counts = {"acked": 0, "errors": 0}
    first_error: list[str] = []

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is None:
            counts["acked"] += 1
        else:
            counts["errors"] += 1
            if not first_error:
                first_error.append(str(err))

    producer = Producer({"bootstrap.servers": cfg["bootstrap"], "acks": "1", "linger.ms": 5})
    topic, partitions, rate = cfg["topic"], cfg["partitions"], float(cfg["rate"])
    produce, poll = producer.produce, producer.poll
    start, sent, started = now(), 0, False
    while not stop.is_set():
        due = int((now() - start) * rate)
        while sent < due:
            try:
                produce(topic, value=b"%.6f" % now(), partition=sent % partitions, on_delivery=on_delivery)
            except BufferError:
                break
            sent += 1
        if not started and counts["acked"]:
            started = True
            emit(event="started", t=now())
        poll(0.005)
    elapsed = now() - start
    left = producer.flush(10)
    emit(event="done", t=now(), sent=sent, acked=counts["acked"], errors=counts["errors"], unflushed=left,
         elapsed_s=elapsed, first_error=first_error[0] if first_error else None)


def role_joiners(cfg: dict[str, Any]) -> None:
    """cfg['count'] consumers of one group, each polled by its own thread. Builds them,
    prints 'ready', waits for a line on stdin, then every thread subscribes at once.
    Events carry the consumer's global index c. Stops on SIGTERM, closing every consumer."""
    from confluent_kafka import Consumer

    stop = _stop_on_sigterm()
    base = cfg["first_index"]
    consumers = [Consumer(consumer_config(cfg)) for _ in range(cfg["count"])]
    emit(event="ready", t=now())
    sys.stdin.readline()
    go = threading.Event()

    def run(index: int, consumer: Any) -> None:
        def on_assign(_consumer: Any, partitions: list[Any]) -> None:
            emit(event="assigned", c=index, t=now(), partitions=sorted(p.partition for p in partitions))

        def on_revoke(_consumer: Any, partitions: list[Any]) -> None:
            emit(event="revoked", c=index, t=now(), partitions=sorted(p.partition for p in partitions))

        go.wait()
        t = now()
        consumer.subscribe([cfg["topic"]], on_assign=on_assign, on_revoke=on_revoke)
        emit(event="subscribed", c=index, t=t)
        while not stop.is_set():
            consumer.poll(0.1)
        consumer.close()
        emit(event="closed", c=index, t=now())

    threads = [threading.Thread(target=run, args=(base + i, c), daemon=True) for i, c in enumerate(consumers)]
    for thread in threads:
        thread.start()
    go.set()  # the threads are parked on go: they subscribe within a few ms of each other
    while not stop.wait(0.2):
        pass
    for thread in threads:
        thread.join(60)
    # Free the librdkafka handles here, on the main thread (a GC pass on another thread
    # can crash the interpreter: confluentinc/confluent-kafka-python#1761).
    del consumers
    gc.collect()
    emit(event="done", t=now(), unfinished=sum(t.is_alive() for t in threads))


ROLES: dict[str, Callable[[dict[str, Any]], None]] = {
    "_member": role_member,
    "_producer": role_producer,
    "_joiners": role_joiners,
}

# =============================================================================== the parent


def Child(role: str, cfg: dict[str, Any], name: str, log_dir: str, stdin: bool = False) -> ChildProcess:
    """A role of this module (member, producer, joiners) as a child process."""
    return ChildProcess([PYTHON, "-m", "loadtest.bench_groups", role, json.dumps(cfg)], name, log_dir, stdin=stdin)


class TreeCpu:
    """CPU of a process tree between start() and stop(), per role (supervisor, worker,
    coordinator). Ticks are utime+stime+cutime+cstime (loadtest.common.proc_cpu_ticks):
    a child reaped during the interval stays counted through its parent."""

    def __init__(self, root: int | None = None, pids: Iterable[int] = ()) -> None:
        self.root, self.pids = root, list(pids)
        self._start: dict[int, int] = {}
        self.result: dict[str, Any] = {}

    def _snapshot(self) -> dict[int, int]:
        pids = process_tree(self.root) if self.root is not None else self.pids
        ticks = {}
        for pid in pids:
            try:
                ticks[pid] = proc_cpu_ticks(pid)
            except OSError:
                pass
        return ticks

    def start(self) -> None:
        self._start = self._snapshot()

    def stop(self) -> dict[str, Any]:
        end = self._snapshot()
        by_role: dict[str, float] = {}
        for pid, ticks in end.items():
            role = process_role(pid, self.root) if self.root is not None else "process"
            by_role[role] = by_role.get(role, 0.0) + (ticks - self._start.get(pid, 0)) / CLOCK_TICKS
        lost = set(self._start) - set(end)
        self.result = {
            "cpu_s": round(sum(by_role.values()) - sum(self._start[p] for p in lost) / CLOCK_TICKS, 2),
            "by_role_s": {k: round(v, 2) for k, v in sorted(by_role.items())},
            "processes": len(end),
            "exited_during": len(lost),
        }
        return self.result


# ------------------------------------------------------------------------------ helpers


def member_cfg(args: argparse.Namespace, bootstrap: str, group: str, topic: str) -> dict[str, Any]:
    return {"bootstrap": bootstrap, "group": group, "topic": topic, "assignor": args.assignor,
            "session_timeout_ms": args.session_timeout_ms, "heartbeat_interval_ms": args.heartbeat_interval_ms,
            "client_config": dict(args.client_config)}  # fmt: skip


def current_assignment(events: list[dict[str, Any]]) -> tuple[list[int] | None, set[int]]:
    """(partitions held now or None if never assigned, partitions consumed since then)."""
    held: list[int] | None = None
    consumed: set[int] = set()
    for event in events:
        if event["event"] == "assigned":
            held, consumed = list(event["partitions"]), set()
        elif event["event"] == "revoked":
            held, consumed = [], set()
        elif event["event"] == "first":
            consumed.add(event["partition"])
    return held, consumed


def summary(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"n": 0, "min": None, "median": None, "max": None}
    return {"n": len(values), "min": round(min(values), 3), "median": round(statistics.median(values), 3),
            "max": round(max(values), 3)}  # fmt: skip


def distribution(values: list[float]) -> dict[str, float | None]:
    ordered = sorted(values)
    if not ordered:
        return {"n": 0}
    return {"n": len(ordered), "min": round(ordered[0], 3), "p50": round(percentile(ordered, 50), 3),
            "p99": round(percentile(ordered, 99), 3), "max": round(ordered[-1], 3),
            "mean": round(statistics.fmean(ordered), 3)}  # fmt: skip


# =============================================================================== phase 1


def recovery_phase(args: argparse.Namespace, bootstrap: str, prefix: str, log_dir: str, broker_log: str | None) -> dict[str, Any]:
    topic = f"{prefix}-recovery"
    info(ensure_topic(bootstrap, topic, args.partitions))
    producer = Child("_producer", {"bootstrap": bootstrap, "topic": topic, "partitions": args.partitions,
                                   "rate": args.rate}, "producer", log_dir)  # fmt: skip
    runs: list[dict[str, Any]] = []
    rng = random.Random(args.seed)
    try:
        wait_until(lambda: producer.snapshot("started") or producer.process.poll() is not None, 30, "the producer")
        if producer.process.poll() is not None:
            raise SystemExit(f"the producer exited with {producer.process.returncode}:\n{producer.stderr_tail()}")
        for run in range(1, args.runs + 1):
            runs.append(recovery_run(args, bootstrap, topic, f"{prefix}-recovery-r{run}", run, log_dir, rng, broker_log))
    finally:
        producer.stop()
    done = producer.snapshot("done")
    producer_result: dict[str, Any] = done[-1] if done else {"error": f"no result (exit code {producer.process.returncode})"}
    if done and producer_result["elapsed_s"]:
        producer_result["records_per_s"] = round(producer_result["acked"] / producer_result["elapsed_s"], 1)
    goal = args.session_timeout_ms / 1000 + 1.0
    recovered = [r["recovered_s"] for r in runs if r.get("recovered_s") is not None]
    return {
        "topic": topic,
        "producer": producer_result,
        "runs": runs,
        "recovered_s": summary(recovered),
        "broker_expired_s": summary([r["broker_expired_s"] for r in runs if r.get("broker_expired_s") is not None]),
        "detected_s": summary([r["detected_s"] for r in runs if r.get("detected_s") is not None]),
        "reassigned_s": summary([r["reassigned_s"] for r in runs if r.get("reassigned_s") is not None]),
        "goal_s": goal,
        "runs_within_goal": sum(1 for v in recovered if v <= goal),
        "runs_failed": sum(1 for r in runs if r.get("error")),
    }


def recovery_run(args: argparse.Namespace, bootstrap: str, topic: str, group: str, run: int, log_dir: str,
                 rng: random.Random, broker_log: str | None) -> dict[str, Any]:  # fmt: skip
    info(f"== recovery run {run}: group {group}, {args.members} members, {args.partitions} partitions")
    cfg = member_cfg(args, bootstrap, group, topic)
    members = [Child("_member", cfg, f"r{run}-member{i}", log_dir) for i in range(args.members)]
    result: dict[str, Any] = {"run": run, "group": group}
    try:
        started = now()

        def stable() -> list[list[int]] | None:
            states = [current_assignment(m.snapshot()) for m in members]
            held = [h for h, _ in states]
            if any(h is None for h in held):
                return None
            if sorted(p for h in held for p in h or ()) != list(range(args.partitions)):
                return None
            if any(set(h or ()) - consumed for h, consumed in states):
                return None  # not consuming every partition yet
            return [list(h or ()) for h in held]

        # Stable and consuming, without a rebalance for --settle-s (+ the jitter).
        deadline = now() + args.stable_timeout_s
        while True:
            first = wait_until(stable, max(0.1, deadline - now()), "the group to be stable and consuming")
            stable_at = now()
            counts = [len(m.snapshot("assigned")) + len(m.snapshot("revoked")) for m in members]
            time.sleep(args.settle_s + rng.uniform(0.0, args.kill_jitter_s))
            if stable() == first and counts == [len(m.snapshot("assigned")) + len(m.snapshot("revoked")) for m in members]:
                break
        result["stable_after_start_s"] = round(stable_at - started, 3)
        last_assign = max(e["t"] for m in members for e in m.snapshot("assigned"))
        victim_index = max(range(len(members)), key=lambda i: (len(first[i]), -i))
        victim, survivors = members[victim_index], [m for i, m in enumerate(members) if i != victim_index]
        victim_partitions = first[victim_index]
        result.update(assignment_before={m.name: a for m, a in zip(members, first)}, victim=victim.name,
                      victim_partitions=victim_partitions)  # fmt: skip

        killed_at, killed_wall = now(), time.time()
        victim.kill()  # SIGKILL, then reaps it
        result["kill_after_assignment_s"] = round(killed_at - last_assign, 3)

        def recovered() -> dict[int, dict[str, Any]] | None:
            found: dict[int, dict[str, Any]] = {}
            for partition in victim_partitions:
                firsts = [(e, s.name) for s in survivors for e in s.snapshot("first")
                          if e["partition"] == partition and e["t"] > killed_at]  # fmt: skip
                if not firsts:
                    return None
                event, name = min(firsts, key=lambda x: x[0]["t"])
                found[partition] = {"by": name, "after_s": round(event["t"] - killed_at, 3), "offset": event["offset"],
                                    "record_age_s": round(event["t"] - event["produced"], 3) if event["produced"] else None}
            return found

        timeout = args.session_timeout_ms / 1000 + args.recovery_timeout_s
        try:
            per_partition = wait_until(recovered, timeout, "the survivors to consume the victim's partitions", interval=0.005)
        except TimeoutError as exc:
            per_partition = None
            result["error"] = str(exc)
            info(f"   {exc}")
        revokes = [e["t"] for s in survivors for e in s.snapshot("revoked") if e["t"] > killed_at]
        assigns = []
        for s in survivors:
            after = [e["t"] for e in s.snapshot("assigned") if e["t"] > killed_at]
            if after:
                assigns.append(min(after))
        result["detected_s"] = round(min(revokes) - killed_at, 3) if revokes else None
        result["reassigned_s"] = round(max(assigns) - killed_at, 3) if len(assigns) == len(survivors) else None
        result["assignment_after"] = {s.name: current_assignment(s.snapshot())[0] for s in survivors}
        expired = broker_log_time(broker_log, f"group {group}: ", "missed the session timeout") if broker_log else None
        result["broker_expired_s"] = round(expired - killed_wall, 3) if expired is not None else None
        if per_partition is not None:
            result["per_partition"] = {str(p): v for p, v in per_partition.items()}
            result["recovered_s"] = max(v["after_s"] for v in per_partition.values())
        info(f"   victim {victim.name} {victim_partitions}: told to rebalance after {result['detected_s']} s, "
             f"reassigned after {result['reassigned_s']} s, consumed again after {result.get('recovered_s')} s")
    except TimeoutError as exc:
        result["error"] = str(exc)
        info(f"   {exc}")
    finally:
        codes = [m.stop(timeout=20) for m in members]
        result["member_exit_codes"] = {m.name: c for m, c in zip(members, codes)}
    if result.get("error"):
        for m in members:
            info(f"   --- {m.name} stderr tail:\n{m.stderr_tail(10)}")
    return result


def broker_log_lines(path: str, needle: str) -> list[str]:
    try:
        with open(path, errors="replace") as handle:
            return [line for line in handle if needle in line]
    except OSError:
        return []


def broker_log_time(path: str, *needles: str) -> float | None:
    """Wall time (epoch s, ms resolution) of the first line of the broker's log holding
    every needle: the coordinator logs "group G: MEMBER missed the session timeout".
    The broker's log timestamps are local time, as logging's asctime writes them."""
    try:
        with open(path, errors="replace") as handle:
            for line in handle:
                if all(n in line for n in needles):
                    stamp = datetime.datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f")
                    return time.mktime(stamp.timetuple()) + stamp.microsecond / 1e6
    except (OSError, ValueError):
        return None
    return None


# =============================================================================== phase 2


def join_phase(args: argparse.Namespace, bootstrap: str, prefix: str, log_dir: str, broker_root: int | None,
               broker_pids: list[int], broker_log: str | None) -> dict[str, Any]:  # fmt: skip
    topic, m = f"{prefix}-join", args.join_consumers
    info(ensure_topic(bootstrap, topic, m))
    k = max(1, min(args.join_processes, m))
    sizes = [m // k + (1 if i < m % k else 0) for i in range(k)]
    runs = [join_run(args, bootstrap, topic, f"{prefix}-join-r{run}", run, sizes, log_dir, broker_root, broker_pids, broker_log)
            for run in range(1, args.join_runs + 1)]  # fmt: skip

    def over_runs(get: Callable[[dict[str, Any]], Any]) -> dict[str, float | None]:
        return summary([v for v in (get(r) for r in runs) if v is not None])

    pooled = [c["subscribe_to_first_assign_s"] for r in runs for c in r["per_consumer"] if c["subscribe_to_first_assign_s"] is not None]
    return {
        "topic": topic, "consumers": m, "processes": k, "per_process": sizes, "runs": runs,
        "all_assigned_s": over_runs(lambda r: r.get("all_assigned_s")),
        "stable_s": over_runs(lambda r: r.get("stable_s")),
        "subscribe_to_first_assign_p50_s": over_runs(lambda r: r["subscribe_to_first_assign_s"].get("p50")),
        "subscribe_to_first_assign_p99_s": over_runs(lambda r: r["subscribe_to_first_assign_s"].get("p99")),
        "subscribe_to_first_assign_max_s": over_runs(lambda r: r["subscribe_to_first_assign_s"].get("max")),
        "subscribe_to_first_assign_pooled_s": distribution(pooled),
        "broker_cpu_s": over_runs(lambda r: (r.get("broker_cpu") or {}).get("cpu_s")),
        "runs_failed": sum(1 for r in runs if r.get("error") or r["assigned_consumers"] != m),
    }  # fmt: skip


def join_run(args: argparse.Namespace, bootstrap: str, topic: str, group: str, run: int, sizes: list[int], log_dir: str,
             broker_root: int | None, broker_pids: list[int], broker_log: str | None) -> dict[str, Any]:  # fmt: skip
    m = args.join_consumers
    info(f"== join run {run}: {m} consumers in {len(sizes)} processes, group {group}")
    cfg = member_cfg(args, bootstrap, group, topic)
    children, first_index = [], 0
    result: dict[str, Any] = {"run": run, "group": group}
    try:
        for i, size in enumerate(sizes):
            children.append(Child("_joiners", {**cfg, "count": size, "first_index": first_index}, f"j{run}-joiners{i}",
                                  log_dir, stdin=True))  # fmt: skip
            first_index += size
        wait_until(lambda: all(c.snapshot("ready") or c.process.poll() is not None for c in children), 60,
                   "the consumer processes to build their consumers")  # fmt: skip
        dead = [c for c in children if c.process.poll() is not None]
        if dead:
            raise SystemExit(f"{dead[0].name} exited with {dead[0].process.returncode}:\n{dead[0].stderr_tail()}")

        broker_cpu = TreeCpu(root=broker_root, pids=broker_pids) if broker_root is not None or broker_pids else None
        client_cpu = TreeCpu(pids=[c.pid for c in children])
        if broker_cpu:
            broker_cpu.start()
        client_cpu.start()
        go_at = now()
        for c in children:
            c.send("go\n")

        def events() -> list[dict[str, Any]]:
            return sorted((e for c in children for e in c.snapshot()), key=lambda e: e["t"])

        def stable() -> bool:
            held: dict[int, list[int]] = {}
            for e in events():
                if e["event"] == "assigned":
                    held[e["c"]] = e["partitions"]
                elif e["event"] == "revoked":
                    held[e["c"]] = []
            return len(held) == m and sorted(p for h in held.values() for p in h) == list(range(m))

        try:
            wait_until(stable, args.join_timeout_s, f"{m} consumers to hold every partition", interval=0.02)
        except TimeoutError as exc:
            result["error"] = str(exc)
            info(f"   {exc}")
        seen_stable_at = now()
        result["broker_cpu"] = broker_cpu.stop() if broker_cpu else None
        result["client_cpu"] = client_cpu.stop()
        result["wall_go_to_stable_seen_s"] = round(seen_stable_at - go_at, 3)
        time.sleep(args.quiet_s)  # a rebalance after "stable" would show here
        all_events = events()
        quiet_events = [e for e in all_events if e["event"] in ("assigned", "revoked") and e["t"] > seen_stable_at]
        result["rebalance_events_after_stable"] = len(quiet_events)
        result.update(join_figures(all_events, m))
        result["go_to_first_subscribe_s"] = round(result.pop("_first_subscribe") - go_at, 3) if result.get("_first_subscribe") else None
        result.pop("_first_subscribe", None)
        if broker_log:
            # The coordinator logs "group G: generation N with K members (range)" per generation.
            result["broker_generations_members"] = [
                int(line.split(" with ")[1].split()[0]) for line in broker_log_lines(broker_log, f"group {group}: generation ")]
        info(f"   first on_assign p50 {result['subscribe_to_first_assign_s'].get('p50')} s, all assigned after "
             f"{result.get('all_assigned_s')} s, generations (members) {result.get('broker_generations_members')}")
    finally:
        codes = [c.stop(timeout=60) for c in children]
        result["process_exit_codes"] = codes
        result["unfinished_threads"] = [d["unfinished"] for c in children for d in c.snapshot("done")]
    return result


def join_figures(all_events: list[dict[str, Any]], m: int) -> dict[str, Any]:
    subscribed = {e["c"]: e["t"] for e in all_events if e["event"] == "subscribed"}
    first_assign: dict[int, dict[str, Any]] = {}
    assign_calls: dict[int, int] = {c: 0 for c in range(m)}
    last_assign: dict[int, dict[str, Any]] = {}
    for e in all_events:
        if e["event"] == "assigned":
            first_assign.setdefault(e["c"], e)
            assign_calls[e["c"]] = assign_calls.get(e["c"], 0) + 1
            last_assign[e["c"]] = e
    joins = [first_assign[c]["t"] - subscribed[c] for c in sorted(first_assign) if c in subscribed]
    out: dict[str, Any] = {
        "assigned_consumers": len(first_assign),
        "subscribed_consumers": len(subscribed),
        "subscribe_to_first_assign_s": distribution(joins),
        "per_consumer": [
            {"c": c, "subscribe_to_first_assign_s": round(first_assign[c]["t"] - subscribed[c], 4) if c in first_assign and c in subscribed else None,
             "first_partitions": first_assign[c]["partitions"] if c in first_assign else None,
             "final_partitions": last_assign[c]["partitions"] if c in last_assign else None,
             "on_assign_calls": assign_calls.get(c, 0)}
            for c in range(m)
        ],  # fmt: skip
        "on_assign_calls": summary([float(v) for v in assign_calls.values()]),
        "final_partitions_per_consumer": summary([float(len(last_assign[c]["partitions"])) for c in last_assign]),
    }
    if subscribed:
        t0 = min(subscribed.values())
        out["_first_subscribe"] = t0
        out["subscribe_spread_s"] = round(max(subscribed.values()) - t0, 3)
        if len(first_assign) == m:
            out["all_assigned_s"] = round(max(e["t"] for e in first_assign.values()) - t0, 3)
        if len(last_assign) == m:
            # The last on_assign/on_revoke before the stable state ended the last rebalance.
            out["stable_s"] = round(max(e["t"] for e in last_assign.values()) - t0, 3)
    return out


# =============================================================================== main


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m loadtest.bench_groups", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    b = p.add_argument_group("broker")
    b.add_argument("--bootstrap", metavar="HOST:PORT", help="use this running broker instead of starting one")
    b.add_argument("--broker-pid", type=int, help="with --bootstrap: the broker's (supervisor) PID, for its CPU")
    b.add_argument("--broker-override", action="append", default=[], metavar="KEY=VALUE",
                   help="a setting for the broker this tool starts (repeatable; replaces the defaults "
                        "group.initial.rebalance.delay.ms=0, group.min.session.timeout.ms=1000)")  # fmt: skip
    b.add_argument("--work-dir", help="where the started broker's log dir and the children's stderr go "
                                      "(default: a new directory under /tmp, removed at the end)")  # fmt: skip
    b.add_argument("--keep-work-dir", action="store_true", help="do not remove the work dir at the end")
    g = p.add_argument_group("both phases")
    g.add_argument("--phases", default="recovery,join", help="comma-separated: recovery, join (default both)")
    g.add_argument("--session-timeout-ms", type=int, default=6000)
    g.add_argument("--heartbeat-interval-ms", type=int, default=500)
    g.add_argument("--assignor", default="range", help="partition.assignment.strategy (default range)")
    g.add_argument("--client-config", action="append", default=[], metavar="KEY=VALUE",
                   help="extra librdkafka setting for every consumer (repeatable)")
    g.add_argument("--topic-prefix", default=f"bench-groups-{int(time.time())}", help="topic and group names start with it")
    r = p.add_argument_group("recovery phase")
    r.add_argument("--partitions", type=int, default=6)
    r.add_argument("--members", type=int, default=3)
    r.add_argument("--runs", type=int, default=3, help="kills, each with a fresh group")
    r.add_argument("--rate", type=float, default=2000.0, help="records/s the producer writes over all partitions")
    r.add_argument("--settle-s", type=float, default=1.0, help="how long the group must consume stably before the kill")
    r.add_argument("--kill-jitter-s", type=float, help="a random extra wait before the kill, 0..this "
                                                       "(default: the heartbeat interval)")
    r.add_argument("--seed", type=int, default=int(time.time()), help="seeds the kill jitter (default: the time)")
    r.add_argument("--stable-timeout-s", type=float, default=60.0)
    r.add_argument("--recovery-timeout-s", type=float, default=30.0, help="added to the session timeout")
    j = p.add_argument_group("join phase")
    j.add_argument("--join-consumers", type=int, default=50)
    j.add_argument("--join-processes", type=int, default=5)
    j.add_argument("--join-runs", type=int, default=3, help="each with a fresh group (same topic)")
    j.add_argument("--join-timeout-s", type=float, default=120.0)
    j.add_argument("--quiet-s", type=float, default=2.0, help="watch this long after 'stable' for a further rebalance")
    p.add_argument("--out", help="the JSON result (default bench-results/bench_groups-<UTC time>.json)")
    args = p.parse_args(argv)
    args.phases = [x.strip() for x in args.phases.split(",") if x.strip()]
    if set(args.phases) - {"recovery", "join"} or not args.phases:
        p.error("--phases takes recovery and/or join")
    if args.members < 2:
        p.error("--members must be at least 2 (someone must survive)")
    if args.partitions < args.members:
        p.error("--partitions must be at least --members (the victim must hold a partition)")
    if args.broker_pid is not None and not args.bootstrap:
        p.error("--broker-pid goes with --bootstrap (the started broker's PID is known)")
    if args.kill_jitter_s is None:
        args.kill_jitter_s = args.heartbeat_interval_ms / 1000
    args.client_config = parse_key_values(args.client_config, "--client-config")
    args.broker_overrides = {**DEFAULT_BROKER_OVERRIDES, **parse_key_values(args.broker_override, "--broker-override")}
    return args


def print_table(result: dict[str, Any]) -> None:
    s = result["settings"]
    rec = result.get("recovery")
    if rec:
        print(f"Recovery after SIGKILL of 1 of {s['members']} members: {s['partitions']} partitions, "
              f"session.timeout.ms={s['session_timeout_ms']}, heartbeat.interval.ms={s['heartbeat_interval_ms']}, "
              f"producer {rec['producer'].get('records_per_s', '?')} rec/s")  # fmt: skip
        print(f"{'run':>3}  {'victim partitions':<18} {'broker expired s':>16} {'rebalance seen s':>16} {'reassigned s':>12} "
              f"{'consumed again s':>16}  goal {rec['goal_s']:.1f} s")
        for r in rec["runs"]:
            ok = "FAILED" if r.get("error") else ("met" if r["recovered_s"] <= rec["goal_s"] else "missed")
            print(f"{r['run']:>3}  {str(r.get('victim_partitions')):<18} {_f(r.get('broker_expired_s')):>16} {_f(r.get('detected_s')):>16} "
                  f"{_f(r.get('reassigned_s')):>12} {_f(r.get('recovered_s')):>16}  {ok}")  # fmt: skip
        t = rec["recovered_s"]
        print(f"consumed again: min {_f(t['min'])} / median {_f(t['median'])} / max {_f(t['max'])} s; "
              f"{rec['runs_within_goal']} of {len(rec['runs'])} runs within the goal")
        print()
    join = result.get("join")
    if join:
        print(f"Join+sync: {join['consumers']} consumers in {join['processes']} processes, {join['consumers']} partitions "
              f"(seconds from the first subscribe(); per consumer: from its own subscribe() to its first on_assign)")
        print(f"{'run':>3}  {'per consumer p50':>16} {'p99':>6} {'max':>6} {'all assigned':>12} {'stable':>6} "
              f"{'on_assign calls':>15} {'generations':>11} {'broker CPU s':>12} {'clients CPU s':>13}")
        for r in join["runs"]:
            d, calls, cpu = r["subscribe_to_first_assign_s"], r["on_assign_calls"], r.get("broker_cpu") or {}
            gens = r.get("broker_generations_members")
            print(f"{r['run']:>3}  {_f(d.get('p50')):>16} {_f(d.get('p99')):>6} {_f(d.get('max')):>6} {_f(r.get('all_assigned_s')):>12} "
                  f"{_f(r.get('stable_s')):>6} {_f(calls.get('min'), 0) + '-' + _f(calls.get('max'), 0):>15} "
                  f"{'-' if gens is None else '+'.join(map(str, gens)):>11} {_f(cpu.get('cpu_s')):>12} "
                  f"{_f(r['client_cpu']['cpu_s']):>13}{'  FAILED: ' + r['error'] if r.get('error') else ''}")  # fmt: skip
        t = join["all_assigned_s"]
        print(f"all assigned: min {_f(t['min'])} / median {_f(t['median'])} / max {_f(t['max'])} s; "
              f"{join['runs_failed']} failed run(s)")
    sys.stdout.flush()


def _f(value: Any, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in ROLES:
        ROLES[argv[0]](json.loads(argv[1]))
        return 0
    args = parse_args(argv)
    started_wall, started = datetime.datetime.now(datetime.timezone.utc), now()
    out_path = args.out or os.path.join(REPO_ROOT, "bench-results", f"bench_groups-{started_wall:%Y%m%dT%H%M%SZ}.json")
    work_dir = args.work_dir or tempfile.mkdtemp(prefix="cbg", dir="/tmp")
    os.makedirs(work_dir, exist_ok=True)
    result: dict[str, Any] = {
        "tool": "loadtest.bench_groups",
        "date_utc": started_wall.isoformat(timespec="seconds"),
        "command": shlex.join([os.path.relpath(PYTHON, REPO_ROOT) if PYTHON.startswith(REPO_ROOT) else PYTHON,
                               "-m", "loadtest.bench_groups", *argv]),  # fmt: skip
        "cwd": os.getcwd(),
        "machine": machine_info(),
        "code": git_state(),
        "settings": {k: v for k, v in vars(args).items() if k not in ("broker_override",)},
    }
    result["load_average_at_start"] = load_average()
    cpu_at_start = system_cpu()
    broker: OwnBroker | None = None
    failed = False
    pids: list[int] = []
    try:
        if args.bootstrap:
            bootstrap = args.bootstrap
            root = args.broker_pid  # None: no broker CPU
            result["broker"] = {"started_here": False, "bootstrap": bootstrap, "pid": args.broker_pid}
        else:
            broker = OwnBroker(work_dir, args.broker_overrides)
            result["broker"] = {"started_here": True, "log": broker.stderr_path}
            info(f"castle serve (pid {broker.pid}) on {broker.bootstrap}, log dir {broker.log_dir}")
            broker.wait_ready()
            bootstrap, root = broker.bootstrap, broker.pid
            result["broker"] = {"started_here": True, "log": broker.stderr_path, "bootstrap": bootstrap, "pid": broker.pid,
                                "command": shlex.join(broker.command), "overrides": args.broker_overrides,
                                "processes": {str(p): process_role(p, broker.pid) for p in process_tree(broker.pid)}}  # fmt: skip
        if "recovery" in args.phases:
            result["recovery"] = recovery_phase(args, bootstrap, args.topic_prefix, work_dir,
                                                broker.stderr_path if broker else None)
            failed |= bool(result["recovery"]["runs_failed"])
        if "join" in args.phases:
            result["join"] = join_phase(args, bootstrap, args.topic_prefix, work_dir, root, pids,
                                        broker.stderr_path if broker else None)
            failed |= bool(result["join"]["runs_failed"])
    finally:
        if broker is not None:
            code = broker.stop()
            result["broker"]["exit_code"] = code
            if code != 0:
                info(f"WARNING: castle serve exited with {code}; stderr tail:\n{broker.stderr_tail()}")
        result["wall_s"] = round(now() - started, 1)
        result["load_average_at_end"] = load_average()
        cpu_at_end = system_cpu()
        if cpu_at_start and cpu_at_end and cpu_at_end[1] > cpu_at_start[1]:
            # Busy share of all CPUs over the whole run (this tool's processes included).
            result["machine_busy_fraction"] = round((cpu_at_end[0] - cpu_at_start[0]) / (cpu_at_end[1] - cpu_at_start[1]), 3)
        os.makedirs(os.path.dirname(os.path.abspath(out_path)), exist_ok=True)
        with open(out_path, "w") as handle:
            json.dump(result, handle, indent=1, sort_keys=False)
        info(f"result written to {out_path} ({result['wall_s']} s)")
        # A failed run keeps the broker's log and the children's stderr for a post-mortem.
        failed |= sys.exc_info()[0] is not None
        if not args.keep_work_dir and not args.work_dir and not failed:
            shutil.rmtree(work_dir, ignore_errors=True)
        elif not args.work_dir:
            info(f"work dir kept: {work_dir}")
    print_table(result)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
