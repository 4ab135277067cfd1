"""Helpers shared by the client benchmarks (producer_perf, consumer_perf, compare).

* Broker CPU from /proc: the broker runs as one or more processes that we did not start,
  so the only honest measure of its cost is the kernel's own account of CPU time
  (utime + stime in /proc/<pid>/stat), read before and after a run.
* Exact percentiles from a sorted list of samples (no bucketing error to explain).
* Topic creation through the AdminClient, tolerant of brokers without CreateTopics
  (librdkafka's mock cluster has none; it auto-creates topics instead).
"""

from __future__ import annotations

import json
import math
import os
import sys
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

# Kafka's perf tools divide bytes by 1024*1024 and call it "MB"; we follow them so the
# figures can be put next to theirs, but print "MiB" to say what it is.
MIB = 1024 * 1024
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


# --------------------------------------------------------------------------- CPU


def proc_cpu_ticks(pid: int) -> int:
    """CPU ticks of a process (all its threads): utime + stime + cutime + cstime.

    cutime/cstime hold the CPU of children the process has already waited for; a
    supervisor that restarts or reaps workers would otherwise lose their CPU from the
    count once they exit. Children still alive are counted on their own, and their
    time is not yet in the parent's cutime, so nothing is counted twice.
    """
    with open(f"/proc/{pid}/stat", "rb") as f:
        raw = f.read()
    # The command name (field 2) is in parentheses and may itself hold spaces or ')';
    # everything after the LAST ')' is space-separated, starting with field 3 (state).
    fields = raw[raw.rindex(b")") + 2 :].split()
    utime, stime, cutime, cstime = (int(x) for x in fields[11:15])  # fields 14..17
    return utime + stime + cutime + cstime


def _parent_of(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
    except OSError:  # exited between listdir and open
        return None
    return int(raw[raw.rindex(b")") + 2 :].split()[1])  # field 4: ppid


def process_tree(root: int) -> list[int]:
    """root and all its descendants, found by walking the ppid links of /proc/*/stat."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            ppid = _parent_of(int(name))
            if ppid is not None:
                children.setdefault(ppid, []).append(int(name))
    tree, todo = [], [root]
    while todo:
        pid = todo.pop()
        tree.append(pid)
        todo.extend(children.get(pid, ()))
    return tree


@dataclass
class BrokerCpu:
    """Measures the CPU a set of broker processes uses between start() and stop().

    The result is (sum of ticks at stop) - (sum of ticks at start), over the processes
    found each time. With a tree root, the tree is listed again at stop(), so workers
    forked during the run count from zero. A worker that exits during the run and is
    reaped by its parent in the tree is exact too: its whole CPU moves into the parent's
    cutime/cstime, and its start figure is still subtracted. Only a process that exits
    without being reaped by a process of the tree is undercounted; the number of
    processes that vanished is reported ("exited during the run") so a reader can tell.
    """

    pids: Sequence[int] = ()
    tree_root: int | None = None
    _start: dict[int, int] = field(default_factory=dict)
    seconds: float = 0.0
    processes: int = 0
    lost: int = 0

    @property
    def enabled(self) -> bool:
        return bool(self.pids) or self.tree_root is not None

    def _current_pids(self) -> list[int]:
        return process_tree(self.tree_root) if self.tree_root is not None else list(self.pids)

    def _snapshot(self) -> dict[int, int]:
        ticks = {}
        for pid in self._current_pids():
            try:
                ticks[pid] = proc_cpu_ticks(pid)
            except OSError:
                pass  # gone already
        return ticks

    def start(self) -> None:
        if self.enabled:
            self._start = self._snapshot()
            if not self._start:
                raise SystemExit(f"no broker process found (pids={list(self.pids)}, tree={self.tree_root})")

    def stop(self) -> None:
        if not self.enabled:
            return
        end = self._snapshot()
        self.seconds = (sum(end.values()) - sum(self._start.values())) / CLOCK_TICKS
        self.processes = len(end)
        self.lost = len(set(self._start) - set(end))

    def as_dict(self, records: int) -> dict[str, Any]:
        if not self.enabled:
            return {}
        return {
            "broker_cpu_s": round(self.seconds, 3),
            "broker_cpu_s_per_m_records": round(self.seconds / records * 1e6, 3) if records else None,
            "broker_processes": self.processes,
            "broker_processes_lost": self.lost,
        }


def format_broker_cpu(result: dict[str, Any]) -> str:
    """The broker-CPU line of a tool's text output ('' when not measured)."""
    if "broker_cpu_s" not in result:
        return ""
    per_m = result["broker_cpu_s_per_m_records"]
    per_m_text = f"{per_m:.2f} s per million records" if per_m is not None else "no records"
    return (
        f"broker CPU {result['broker_cpu_s']:.2f} s = {per_m_text} "
        f"({result['broker_processes']} process(es), {result['broker_processes_lost']} exited during the run)"
    )


def client_cpu_seconds() -> float:
    """CPU of this process (the benchmark client): shows when the client is the limit."""
    t = os.times()
    return t.user + t.system


def add_broker_cpu_args(parser: Any) -> None:
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--broker-pids", default="", help="comma-separated broker PIDs whose CPU to report")
    group.add_argument("--broker-pid-tree", type=int, help="a supervisor PID: report the CPU of it and all its descendants")


def broker_cpu_from_args(args: Any) -> BrokerCpu:
    pids = [int(p) for p in args.broker_pids.split(",") if p.strip()]
    return BrokerCpu(pids=pids, tree_root=args.broker_pid_tree)


# ------------------------------------------------------------------- percentiles


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of an ascending sequence: a real sample."""
    if not sorted_values:
        return float("nan")
    rank = min(max(1, math.ceil(len(sorted_values) * q / 100)), len(sorted_values))
    return sorted_values[rank - 1]


# ----------------------------------------------------------------------- topics


def ensure_topic(bootstrap: str, topic: str, partitions: int, timeout_s: float = 15.0) -> str:
    """Create topic with that many partitions unless it exists; returns what happened.

    A broker without CreateTopics (the librdkafka mock) gets no topic here: the
    producer's metadata request auto-creates it with the broker's default partition
    count. We say so instead of failing, since the run is still meaningful.
    """
    admin = AdminClient({"bootstrap.servers": bootstrap})
    existing = admin.list_topics(timeout=timeout_s).topics
    if topic in existing:
        have = len(existing[topic].partitions)
        return f"topic {topic!r} exists with {have} partition(s)"
    future = admin.create_topics([NewTopic(topic, partitions, 1)], request_timeout=timeout_s)[topic]
    try:
        # librdkafka's own request timeout fires first; the margin is only a backstop.
        future.result(timeout=timeout_s + 5)
    except KafkaException as exc:
        err: KafkaError = exc.args[0]
        if err.code() == KafkaError.TOPIC_ALREADY_EXISTS:
            return f"topic {topic!r} exists (created concurrently)"
        if err.code() == KafkaError._UNSUPPORTED_FEATURE:
            return f"broker has no CreateTopics; topic {topic!r} left to auto-creation"
        if err.code() == KafkaError._TIMED_OUT:
            # Typically no controller in the metadata, so the AdminClient has nowhere to
            # send the request. The metadata lookup that follows fails loudly if
            # auto-creation does not make the topic either.
            return f"CreateTopics timed out ({err.str()}); topic {topic!r} left to auto-creation"
        raise
    return f"created topic {topic!r} with {partitions} partition(s)"


def topic_partitions(client: Any, topic: str, timeout_s: float = 15.0) -> list[int]:
    """Partition ids of topic as the broker reports them (auto-creating it if allowed)."""
    md = client.list_topics(topic=topic, timeout=timeout_s).topics.get(topic)
    if md is None or md.error is not None or not md.partitions:
        raise SystemExit(f"topic {topic!r} has no partitions: {md.error if md else 'not in metadata'}")
    return sorted(md.partitions)


# ---------------------------------------------------------------------- output


def key_values(pairs: Iterable[str]) -> dict[str, str]:
    """Settings given as key=value strings (librdkafka's, a broker's); ValueError names a bad one."""
    config = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise ValueError(f"setting {pair!r} is not key=value")
        config[key.strip()] = value.strip()
    return config


def parse_key_values(pairs: Iterable[str], option: str) -> dict[str, str]:
    """A repeatable KEY=VALUE command-line option; a bad one stops the tool, naming it."""
    try:
        return key_values(pairs)
    except ValueError as exc:
        raise SystemExit(f"{option}: {exc}") from None


def parse_client_config(pairs: Iterable[str]) -> dict[str, str]:
    """--client-config key=value (repeatable) into a librdkafka config dict."""
    return parse_key_values(pairs, "--client-config")


def file_tail(path: str, lines: int) -> str:
    """The last lines of a log file ('' if it cannot be read): a child's stderr in an error."""
    try:
        with open(path, "rb") as handle:
            return "\n".join(handle.read().decode(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def info(message: str) -> None:
    """Progress goes to stderr so stdout carries only the result (text or JSON)."""
    print(message, file=sys.stderr, flush=True)


def print_json(result: dict[str, Any]) -> None:
    print(json.dumps(result, sort_keys=True), flush=True)
