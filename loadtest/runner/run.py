"""One run of one workload against one broker: start the clients, measure, write a result.

The phases of a live run (a workload without backlog_mib):

1. topics: created through the AdminClient with the workload's partition count (the mock
   is started per run with them, since it cannot create topics);
2. idle connections, if any, opened and held by their own process;
3. consumers start, and the run waits until every group holds every partition;
4. producers start; after warmup_s the measured window of duration_s begins;
5. producers stop (flushing), consumers get up to DRAIN_S to read what was acknowledged,
   then everything stops and the run's topics are deleted.

A write-then-read run (backlog_mib > 0, a catch-up; or read_after_write) runs the
producers alone first, for backlog_mib bytes or for warmup_s + duration_s, then starts the
consumers from the earliest offset until every member has reached the end of every
partition it holds; the read rate is timed from its first record to its last.

Rates and latencies count only whole reporting intervals inside the window. Every child
reports once a second (wall clock), so the timeline buckets are one second wide.
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, TypeVar

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from loadtest.brokers import PYTHON, MockBroker, wait_until
from loadtest.children import ChildProcess
from loadtest.common import CLOCK_TICKS, MIB, info, proc_cpu_ticks
from loadtest.runner import loop_lag
from loadtest.runner.histogram import merge_into, new_histogram, summary_ms
from loadtest.runner.idle_connections import IdleConnectionsChild
from loadtest.runner.limits import LimitPlan, limit_of_run
from loadtest.runner.procstats import BrokerProcesses, Sample
from loadtest.runner.producer import CLIENT_STATS_MS
from loadtest.runner.workload import Workload

DRAIN_S = 30.0
ASSIGN_TIMEOUT_S = 120.0
TOPIC_TIMEOUT_S = 120.0
CONNECTIONS_TIMEOUT_S = 300.0
READ_TIMEOUT_MIN_S = 120.0
CLIENT_STATS_S = CLIENT_STATS_MS / 1000


@dataclass
class Target:
    """A broker to run against: an address and how to find its processes, or 'mock'."""

    name: str
    bootstrap: str | None = None  # None for the mock: it gets an address per run
    root_pid: int | None = None  # a tree root (Castle's supervisor) ...
    pids: list[int] = field(default_factory=list)  # ... or fixed PIDs
    metrics: str | None = None  # a Castle's metrics endpoint (host:port): its loops' lag

    @property
    def is_mock(self) -> bool:
        return self.bootstrap is None


def _admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def create_topics(bootstrap: str, topics: list[str], partitions: int) -> None:
    """Create the run's topics and wait until Metadata shows every partition with a leader."""
    admin = _admin(bootstrap)
    futures = admin.create_topics([NewTopic(t, partitions, 1) for t in topics], request_timeout=TOPIC_TIMEOUT_S)
    for topic, future in futures.items():
        try:
            future.result(timeout=TOPIC_TIMEOUT_S + 5)
        except KafkaException as exc:
            raise SystemExit(f"could not create topic {topic!r} on {bootstrap}: {exc.args[0]}") from None

    def ready() -> bool:
        md = admin.list_topics(timeout=10).topics
        return all(t in md and len(md[t].partitions) == partitions and
                   all(p.leader >= 0 for p in md[t].partitions.values()) for t in topics)

    wait_until(ready, TOPIC_TIMEOUT_S, f"{len(topics)} topic(s) with {partitions} partition(s) each", interval=0.2)


def delete_topics(bootstrap: str, topics: list[str]) -> None:
    """Free the disk a run used (a catch-up backlog is GBs); failures only reported."""
    try:
        admin = _admin(bootstrap)  # held: the futures fail if the client is collected first
        for topic, future in admin.delete_topics(topics, request_timeout=60).items():
            try:
                future.result(timeout=65)
            except KafkaException as exc:
                info(f"could not delete topic {topic!r}: {exc.args[0]}")
    except Exception as exc:  # the run's result matters more than its clean-up
        info(f"could not delete the run's topics: {exc}")


class Clients:
    """The run's child processes, by kind."""

    def __init__(self, log_dir: str) -> None:
        self.log_dir = log_dir
        self.producers: list[ChildProcess] = []
        self.consumers: dict[str, list[ChildProcess]] = {}  # group -> members
        self.connections: IdleConnectionsChild | None = None

    def start(self, module: str, cfg: dict[str, Any], name: str) -> ChildProcess:
        return ChildProcess([PYTHON, "-m", module, json.dumps(cfg)], name, self.log_dir)

    def members(self) -> list[ChildProcess]:
        """Every consumer of every group."""
        return [c for group in self.consumers.values() for c in group]

    def all(self) -> list[ChildProcess]:
        return self.producers + self.members()

    def failed(self) -> list[str]:
        """Children that exited on their own with an error, with their stderr's tail."""
        return [f"{c.name} exited with {c.process.returncode}:\n{c.stderr_tail()}"
                for c in self.all() if c.process.poll() not in (None, 0)]

    def check(self) -> None:
        failures = self.failed()
        if self.connections is not None and self.connections.process is not None and self.connections.process.poll() is not None:
            failures.append(f"the idle connections process exited with {self.connections.process.returncode}")
        if failures:
            raise RuntimeError("a client process failed: " + "\n".join(failures))

    def save_events(self) -> None:
        """Every child's lines as <name>.events.jsonl beside its stderr, to look into a run."""
        for child in self.all():
            with open(os.path.join(self.log_dir, f"{child.name}.events.jsonl"), "w") as handle:
                for event in child.snapshot():
                    handle.write(json.dumps({k: v for k, v in event.items() if k != "hist"}) + "\n")

    def stop_all(self) -> None:
        for child in self.all():
            child.stop(timeout=DRAIN_S + 30)
        if self.connections is not None:
            self.connections.kill()


class Sampler(threading.Thread):
    """Samples the broker's processes once a second, with the wall time of each sample;
    beside them, the CPU of the run's client processes and of the whole machine (on a
    small machine the clients and the broker share the CPUs, so a broker's rate is read
    together with what was left for it)."""

    def __init__(self, processes: BrokerProcesses | None, clients: Clients) -> None:
        super().__init__(daemon=True)
        self.processes = processes
        self.clients = clients
        self.samples: list[tuple[float, Sample]] = []
        self.cpu: list[tuple[float, dict[str, float]]] = []  # producers, consumers, machine busy and steal
        self.stopped = threading.Event()

    def run(self) -> None:
        while True:
            self._sample()
            if self.stopped.wait(1.0):
                return

    def _sample(self) -> None:
        now = time.time()
        if self.processes is not None:
            self.samples.append((now, self.processes.sample()))
        busy, steal = machine_cpu_s()
        self.cpu.append((now, {"producers": _children_cpu_s(self.clients.producers),
                               "consumers": _children_cpu_s(self.clients.members()),
                               "machine_busy": busy, "machine_steal": steal}))

    def stop(self) -> None:
        self.stopped.set()
        self.join(10)
        self._sample()


def machine_cpu_s() -> tuple[float, float]:
    """CPU seconds of the whole machine since boot: busy (user, nice, system, irq,
    softirq) and steal (taken by the hypervisor), from /proc/stat."""
    with open("/proc/stat") as handle:
        fields = [int(x) for x in handle.readline().split()[1:]]
    return (fields[0] + fields[1] + fields[2] + fields[5] + fields[6]) / CLOCK_TICKS, fields[7] / CLOCK_TICKS


def _children_cpu_s(children: list[ChildProcess]) -> float:
    total = 0
    for child in children:
        try:
            total += proc_cpu_ticks(child.pid)
        except (OSError, ValueError):  # exited: its CPU is lost, so windows end before clients stop
            pass
    return total / CLOCK_TICKS


T = TypeVar("T")


def _around(samples: list[tuple[float, T]], start: float, end: float) -> tuple[tuple[float, T] | None, list[tuple[float, T]]]:
    """The samples a window [start, end] is measured between: the one to count from (the
    last at or before start, else the first inside) and those inside (start, end]. The
    broker's and the clients' figures use the same rule, so their cores add up."""
    before = [(t, s) for t, s in samples if t <= start]
    inside = [(t, s) for t, s in samples if start < t <= end]
    return (before[-1] if before else (inside[0] if inside else None)), inside


def cpu_figures(samples: list[tuple[float, dict[str, float]]], start: float, end: float) -> dict[str, Any]:
    """Cores used in [start, end] by the producers, the consumers and the whole machine,
    between the last sample at or before start and the last one at or before end (a
    later one may come after the clients stopped, and a stopped client's CPU is gone)."""
    origin, inside = _around(samples, start, end)
    if origin is None or not inside:
        return {}
    (t_first, first), (t_last, last) = origin, inside[-1]
    if t_last <= t_first:
        return {}
    return {f"{key}_cores": round(max(0.0, last[key] - first[key]) / (t_last - t_first), 3) for key in last}


def _intervals(child: ChildProcess) -> list[dict[str, Any]]:
    """A child's interval and done lines, each turned into the increment since the
    child's previous line (children report cumulative counters), with "t_prev": the time
    of that previous line (its "started" line for the first)."""
    out = []
    previous: dict[str, Any] = {}
    t_prev: float | None = None
    for event in child.snapshot():
        if event["event"] == "started":
            t_prev = event["t"]
            continue
        if event["event"] not in ("interval", "done"):
            continue
        delta = {k: v - previous.get(k, 0) for k, v in event.items()
                 if isinstance(v, (int, float)) and not isinstance(v, bool) and k != "t"}
        out.append({"t": event["t"], "t_prev": t_prev if t_prev is not None else event["t"], "hist": event.get("hist"), **delta})
        previous, t_prev = event, event["t"]
    return out


def _all_intervals(children: list[ChildProcess]) -> list[dict[str, Any]]:
    return [i for child in children for i in _intervals(child)]


def _latest(children: list[ChildProcess], key: str) -> int:
    total = 0
    for child in children:
        lines = [e for e in child.snapshot() if e["event"] in ("interval", "done")]
        total += lines[-1][key] if lines else 0
    return total


# Producer counters summed over a window: waits for room in librdkafka's full queue
# (count, seconds; loadtest/runner/producer.py).
PRODUCER_WAITS = ("queue_full", "queue_full_s")
# ... and a transactional producer's: transactions committed, seconds in commit_transaction,
# transactions aborted and their records (which "acked" leaves out).
TRANSACTION_COUNTERS = ("transactions", "commit_s", "aborted_transactions", "aborted_records")


def _producer_sums(w: Workload) -> tuple[str, ...]:
    return PRODUCER_WAITS + (TRANSACTION_COUNTERS if w.transactional else ())


def _publish_totals(w: Workload, producers: list[ChildProcess]) -> dict[str, Any]:
    """What the producers published in all, window or not: acknowledged records, which for
    a transactional workload are the committed ones, and its transactions."""
    totals: dict[str, Any] = {"acked_total": _latest(producers, "acked")}
    if w.transactional:
        totals.update(committed_total=totals["acked_total"], transactions_total=_latest(producers, "transactions"),
                      aborted_records_total=_latest(producers, "aborted_records"))
    return totals


def _commit_ms(publish: dict[str, Any]) -> None:
    """The mean commit_transaction time of a window, beside its sums."""
    if publish.get("transactions"):
        publish["commit_ms_mean"] = round(publish["commit_s"] * 1000 / publish["transactions"], 3)


def window_figures(children: list[ChildProcess], count_key: str, bytes_key: str, start: float, end: float,
                   rate_span: tuple[float, float] | None = None, sums: tuple[str, ...] = ()) -> dict[str, Any]:
    """Records, bytes, rates and the latency summary of the intervals that lie wholly
    inside [start, end].

    Children report on their own one-second clocks, so a window does not fall on interval
    boundaries: only whole intervals count, each child's rate is its count over the time
    they cover, and the children's rates add up. rate_span, when given, replaces that with
    one fixed span (a catch-up read is timed from its first record to its last). ``sums``
    names further counters of the children to add up over the same intervals.
    """
    histogram = new_histogram()
    totals = dict.fromkeys(sums, 0.0)
    records = nbytes = errors = 0
    records_per_s = bytes_per_s = 0.0
    for child in children:
        inside = [i for i in _intervals(child) if i["t_prev"] >= start - 0.05 and i["t"] <= end + 0.05]
        if not inside:
            continue
        span = inside[-1]["t"] - inside[0]["t_prev"]
        n, b = sum(i.get(count_key, 0) for i in inside), sum(i.get(bytes_key, 0) for i in inside)
        records, nbytes = records + n, nbytes + b
        errors += sum(i.get("errors", 0) for i in inside)
        for key in sums:
            totals[key] += sum(i.get(key, 0) for i in inside)
        if span > 0:
            records_per_s, bytes_per_s = records_per_s + n / span, bytes_per_s + b / span
        for i in inside:
            if i.get("hist"):
                merge_into(histogram, i["hist"])
    if rate_span is not None:
        seconds = rate_span[1] - rate_span[0]
        records_per_s, bytes_per_s = (records / seconds, nbytes / seconds) if seconds > 0 else (0.0, 0.0)
    return {"records": records, "bytes": nbytes, "errors": errors,
            "records_per_s": round(records_per_s, 1), "mib_per_s": round(bytes_per_s / MIB, 3),
            "latency_ms": summary_ms(histogram), **{key: round(value, 3) for key, value in totals.items()}}


def _weighted_median(pairs: list[tuple[float, int]]) -> float:
    """The value at half the total weight of (value, weight) pairs."""
    pairs = sorted(pairs)
    half, seen = sum(w for _, w in pairs) / 2, 0
    for value, weight in pairs:
        seen += weight
        if seen >= half:
            return value
    return pairs[-1][0]


def client_split_figures(producers: list[ChildProcess], start: float, end: float) -> dict[str, Any]:
    """librdkafka's split of the publish latency (producer.py, client_stats) over the
    one-second statistics windows that lie inside [start, end], all broker connections
    together: per part, the median second's p50 and p99 (the windows weighted by their
    counts: requests for the round trip and the write wait, records for the queue), the
    worst second's p99, the max, and the count. librdkafka gives only
    percentiles per window, not the histograms, so a p99 over the whole run cannot be
    had from them: where the tail sits in a few bad seconds, the median second's p99 is
    well below the run's and the worst second's above it. out_of_range counts the values
    above librdkafka's histograms (client_split), which no other figure includes. Empty
    when a client gave no statistics (its producer_config turned them off)."""
    windows: dict[str, list[list[int]]] = {}
    for producer in producers:
        for event in producer.snapshot("client_stats"):
            if event["t"] - CLIENT_STATS_S >= start - 0.05 and event["t"] <= end + 0.05:
                for parts in event["brokers"].values():
                    for part, figures in parts.items():
                        windows.setdefault(part, []).append(figures)
    out: dict[str, dict[str, float]] = {}
    for part, rows in windows.items():
        counted = [r for r in rows if r[3]]
        out_of_range = sum(r[4] for r in rows)
        if not counted:
            out[part] = {"count": 0, "out_of_range": out_of_range, "seconds": len(rows)}
            continue
        out[part] = {"p50_ms_median_second": round(_weighted_median([(r[0], r[3]) for r in counted]) / 1000, 3),
                     "p99_ms_median_second": round(_weighted_median([(r[1], r[3]) for r in counted]) / 1000, 3),
                     "p99_ms_worst_second": round(max(r[1] for r in counted) / 1000, 3),
                     "max_ms": round(max(r[2] for r in counted) / 1000, 3),
                     "count": sum(r[3] for r in counted), "out_of_range": out_of_range, "seconds": len(rows)}
    return out


def _broker_figures(samples: list[tuple[float, Sample]], start: float, end: float, records: int) -> dict[str, Any]:
    """CPU and memory of the broker over [start, end] from its once-a-second samples.

    The CPU rate is taken between the last sample at or before start and the last at or
    before end (the first after end if none is inside), and divided by the time those two
    samples are apart, not by the window: dividing CPU seconds of a span up to 2 s longer
    by the window overstated cores and CPU per million records (by ~3% in a 60 s run, and
    by a third in a 3 s catch-up read). CPU per million is that rate over the window."""
    origin, inside = _around(samples, start, end)
    inside = inside or [(t, s) for t, s in samples if t > end][:1]
    if not inside:
        return {}
    (t_first, first), (t_last, last) = origin or inside[0], inside[-1]
    cores = (last.cpu_s - first.cpu_s) / (t_last - t_first) if t_last > t_first else None
    cpu_s = cores * (end - start) if cores is not None else None
    kernel_s = (last.kernel_cpu_s - first.kernel_cpu_s) / (t_last - t_first) * (end - start) if cores is not None else None
    memory = [s for _, s in inside]
    anon = [s.rss_anon_mib for s in memory]
    pss_anon = [s.pss_anon_mib for s in memory if s.pss_anon_mib is not None]
    pss = [s.pss_mib for s in memory if s.pss_mib is not None]
    return {"cpu_s": round(cpu_s, 2) if cpu_s is not None else None,
            "cpu_cores": round(cores, 3) if cores is not None else None,
            "cpu_s_per_m_records": round(cpu_s / records * 1e6, 3) if records and cpu_s is not None else None,
            "kernel_cpu_s_per_m_records": round(kernel_s / records * 1e6, 3) if records and kernel_s is not None else None,
            "rss_anon_mib_max": round(max(anon), 1), "rss_anon_mib_mean": round(sum(anon) / len(anon), 1),
            "pss_anon_mib_max": round(max(pss_anon), 1) if pss_anon else None,
            "pss_mib_max": round(max(pss), 1) if pss else None,
            "processes": max(s.processes for s in memory)}


def _timeline(producer_iv: list[dict[str, Any]], consumer_iv: list[dict[str, Any]],
              samples: list[tuple[float, Sample]], t0: float) -> list[dict[str, Any]]:
    """One row per second since t0: rates, interval p99s, broker CPU cores and memory."""
    rows: dict[int, dict[str, Any]] = {}

    def row(t: float) -> dict[str, Any]:
        second = int(t - t0)
        return rows.setdefault(second, {"t": second, "publish_records": 0, "publish_bytes": 0,
                                        "consume_records": 0, "consume_bytes": 0,
                                        "_pub": new_histogram(), "_e2e": new_histogram()})

    # (intervals, their count and byte keys, the row's columns for them)
    for intervals, count_key, bytes_key, side, hist in ((producer_iv, "acked", "acked_bytes", "publish", "_pub"),
                                                        (consumer_iv, "consumed", "bytes", "consume", "_e2e")):
        for i in intervals:
            r = row(i["t"])
            r[f"{side}_records"] += i.get(count_key, 0)
            r[f"{side}_bytes"] += i.get(bytes_key, 0)
            if i.get("hist"):
                merge_into(r[hist], i["hist"])
    previous: tuple[float, Sample] | None = None
    for t, s in samples:
        if previous is not None and t > previous[0] and t >= t0:
            r = row(t)
            r["broker_cpu_cores"] = round((s.cpu_s - previous[1].cpu_s) / (t - previous[0]), 3)
            r["broker_rss_anon_mib"] = round(s.rss_anon_mib, 1)
        previous = (t, s)
    out = []
    for second in sorted(rows):
        if second < 0:
            continue
        r = rows[second]
        pub, e2e = r.pop("_pub"), r.pop("_e2e")
        r["publish_p99_ms"] = summary_ms(pub)["p99"]
        r["e2e_p99_ms"] = summary_ms(e2e)["p99"]
        out.append(r)
    return out


def producer_cfg(w: Workload, bootstrap: str, topics: list[str], index: int, max_bytes: int = 0) -> dict[str, Any]:
    cfg = {"bootstrap": bootstrap, "topics": topics, "index": index, "record_size": w.record_size,
           "key_distribution": w.key_distribution, "key_count": w.key_count, "acks": w.acks,
           "compression": w.compression, "linger_ms": w.linger_ms, "batch_size": w.batch_size,
           "rate": w.target_records_per_s / w.producers, "max_bytes": max_bytes,
           "producer_config": w.producer_config, "idempotent": w.idempotent}
    if w.transactional:
        # One transactional.id per producer process and run: the run's topic names are unique.
        cfg.update(transactional_id=f"{topics[0]}-producer-{index}",
                   transaction_interval_ms=w.transaction_interval_ms)
    return cfg


def consumer_cfg(w: Workload, bootstrap: str, topics: list[str], group: str) -> dict[str, Any]:
    # A catch-up read is timed to its last record from these lines: report 4 times a second.
    config = {"isolation.level": w.isolation_level} if w.isolation_level else {}
    return {"bootstrap": bootstrap, "topics": topics, "group": group, "consumer_config": {**config, **w.consumer_config},
            "interval_s": 0.25 if w.catch_up else 1.0}


class Progress:
    """A tqdm bar on stderr when it is a terminal or asked for; silent otherwise."""

    def __init__(self, enabled: bool, total: float, label: str, unit: str) -> None:
        self.bar = None
        if enabled:
            from tqdm import tqdm

            self.bar = tqdm(total=round(total, 1), desc=label, unit=unit, leave=True, dynamic_ncols=True,
                            bar_format="{desc}: {percentage:3.0f}%|{bar}| {n:.0f}/{total:.0f} {unit} [{elapsed}<{remaining}] {postfix}")

    def update(self, done: float, postfix: str = "") -> None:
        if self.bar is not None:
            self.bar.n = min(done, self.bar.total)
            self.bar.set_postfix_str(postfix, refresh=False)
            self.bar.refresh()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _wait(condition: Callable[[], bool], clients: Clients, timeout: float, what: str) -> None:
    def ok() -> bool:
        clients.check()
        return condition()

    wait_until(ok, timeout, what, interval=0.1)


def run_workload(w: Workload, target: Target, out_dir: str, label: str, progress: bool = False,
                 limits: LimitPlan | None = None) -> dict[str, Any]:
    """Run w against target once; returns the result (also written to out_dir/label.json).
    With limits, a workload's physical limit is measured after a run against a broker
    that keeps what it is sent (not the mock), before its topics are deleted."""
    os.makedirs(out_dir, exist_ok=True)
    log_dir = tempfile.mkdtemp(prefix=f"{label}-", dir=out_dir)
    prefix = f"{label}-{int(time.time())}"
    topics = w.topic_names(prefix)
    mock: MockBroker | None = None
    clients = Clients(log_dir)
    result: dict[str, Any] = {"workload": w.as_dict(), "target": target.name, "label": label,
                              "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    sampler: Sampler | None = None
    processes: BrokerProcesses | None
    try:
        if target.is_mock:
            mock = MockBroker(topics, w.partitions_per_topic)
            bootstrap, processes = mock.bootstrap, BrokerProcesses(pids=[mock.pid])
        else:
            assert target.bootstrap is not None
            bootstrap = target.bootstrap
            create_topics(bootstrap, topics, w.partitions_per_topic)
            processes = (BrokerProcesses(root=target.root_pid, pids=target.pids)
                         if target.root_pid or target.pids else None)  # fmt: skip
        result["bootstrap"] = bootstrap
        sampler = Sampler(processes, clients)
        sampler.start()
        if w.idle_connections:
            result["idle_connections"] = _open_idle_connections(w, bootstrap, clients, mock=target.is_mock)
        if w.catch_up or w.read_after_write:
            _write_then_read(w, bootstrap, topics, clients, result, progress, label)
        else:
            _live(w, bootstrap, topics, clients, result, progress, label, target.metrics)
        if w.idle_connections:
            result["idle_connections"].update(_close_idle_connections(clients))
        if w.physical_limit and limits and not target.is_mock:
            result["physical_limit"] = _physical_limit(w, limits, result)
    finally:
        clients.stop_all()
        clients.save_events()
        if sampler:
            sampler.stop()
        if mock is not None:
            mock.stop()
        elif target.bootstrap:
            delete_topics(target.bootstrap, topics)
    assert sampler is not None  # had the try failed before setting it, we would not be here
    window = result.get("window") or result.get("write_window")
    if window:
        # Live: the broker's cost of writing and serving the consumers together, per
        # record published. Write then read: the two phases apart.
        if processes is not None:
            result["broker"] = _broker_figures(sampler.samples, window[0], window[1], result["publish"]["records"])
        result["cpu"] = cpu_figures(sampler.cpu, window[0], window[1])
        if "read_window" in result:
            read = result["read_window"]
            if processes is not None:
                result["broker_read"] = _broker_figures(sampler.samples, read[0], read[1], result["consume"]["records"])
            result["cpu_read"] = cpu_figures(sampler.cpu, read[0], read[1])
        result["timeline"] = _timeline(_all_intervals(clients.producers), _all_intervals(clients.members()),
                                       sampler.samples, result["t0"])
    result["client_logs"] = log_dir
    with open(os.path.join(out_dir, f"{label}.json"), "w") as handle:
        json.dump(result, handle, indent=1, sort_keys=True)
    return result


def _physical_limit(w: Workload, limits: LimitPlan, result: dict[str, Any]) -> dict[str, Any]:
    try:
        return limit_of_run(w.physical_limit, w.limit_size_mib, limits.directory, result, limits.settle_s)
    except (OSError, ValueError, RuntimeError, TimeoutError) as exc:  # the run's own figures still count
        info(f"could not measure the {w.physical_limit} limit: {exc}")
        return {"kind": w.physical_limit, "error": str(exc)}


def _start_consumers(w: Workload, bootstrap: str, topics: list[str], clients: Clients, label: str,
                     read_to_end: bool = False) -> None:
    partitions = w.topics * w.partitions_per_topic
    for g in range(w.consumer_groups):
        group = f"{label}-g{g}-{int(time.time())}"
        cfg = {**consumer_cfg(w, bootstrap, topics, group), "read_to_end": read_to_end}
        clients.consumers[group] = [clients.start("loadtest.runner.consumer", cfg,
                                                  f"consumer-g{g}-{i}") for i in range(w.consumers)]

    def assigned() -> bool:
        # Every group holds every partition: the latest assignment of each member, summed.
        for members in clients.consumers.values():
            held = 0
            for member in members:
                events = member.snapshot("assigned")
                held += events[-1]["partitions"] if events else 0
            if held < partitions:
                return False
        return True

    _wait(assigned, clients, ASSIGN_TIMEOUT_S, f"{w.consumer_groups} group(s) of {w.consumers} to hold {partitions} partitions")


def _live(w: Workload, bootstrap: str, topics: list[str], clients: Clients, result: dict[str, Any],
          progress: bool, label: str, metrics: str | None = None) -> None:
    if w.consumers and w.consumer_groups:
        _start_consumers(w, bootstrap, topics, clients, label)
    start, end = _produce_for_the_window(w, bootstrap, topics, clients, result, progress, label, metrics)
    acked = result["publish"]["acked_total"]
    if clients.consumers:
        def drained() -> bool:
            return all(_latest(members, "consumed") >= acked for members in clients.consumers.values())

        try:
            wait_until(drained, DRAIN_S, "the consumers to read every acknowledged record", interval=0.2)
        except TimeoutError:
            info(f"{label}: consumers did not read every acknowledged record within {DRAIN_S:.0f} s")
    members = clients.members()
    if members:
        for member in members:
            member.stop(timeout=DRAIN_S + 30)
        result["consume"] = window_figures(members, "consumed", "bytes", start, end)
        result["consume"].update(_read_totals(clients, acked))


def _read_totals(clients: Clients, acked: int) -> dict[str, Any]:
    """What each group read in all, and how many acknowledged records some group missed."""
    consumed = {g: _latest(members, "consumed") for g, members in clients.consumers.items()}
    return {"consumed_total_per_group": consumed, "missing": sum(max(0, acked - c) for c in consumed.values())}


def _produce_for_the_window(w: Workload, bootstrap: str, topics: list[str], clients: Clients, result: dict[str, Any],
                            progress: bool, label: str, metrics: str | None = None) -> tuple[float, float]:
    """Producers for warmup_s + duration_s, then stopped (flushing); publish figures of
    the window into result, and with a Castle's metrics address how late its workers'
    loops ran in the window (loop_lag.py). Returns the window."""
    t0 = time.time()
    result["t0"] = t0
    clients.producers = [clients.start("loadtest.runner.producer", producer_cfg(w, bootstrap, topics, i), f"producer-{i}")
                         for i in range(w.producers)]
    start, end = t0 + w.warmup_s, t0 + w.warmup_s + w.duration_s
    bar = Progress(progress, w.warmup_s + w.duration_s, label, "s")
    lag_at_start: loop_lag.Buckets | None = None
    try:
        while time.time() < end:
            clients.check()
            time.sleep(0.5)
            bar.update(time.time() - t0, f"{_latest(clients.producers, 'acked'):,} acked")
            if metrics and lag_at_start is None and time.time() >= start:
                lag_at_start = loop_lag.scrape(metrics)
    finally:
        bar.close()
    if metrics:
        lag = loop_lag.window_figures(lag_at_start, loop_lag.scrape(metrics))
        if lag:
            result["broker_loop_lag"] = lag
    for producer in clients.producers:
        producer.stop(timeout=DRAIN_S + 30)
    result["window"] = (start, end)
    result["publish"] = window_figures(clients.producers, "acked", "acked_bytes", start, end, sums=_producer_sums(w))
    result["publish"].update(_publish_totals(w, clients.producers))
    _commit_ms(result["publish"])
    result["publish"]["client_split"] = client_split_figures(clients.producers, start, end)
    return start, end


def _write_then_read(w: Workload, bootstrap: str, topics: list[str], clients: Clients, result: dict[str, Any],
                     progress: bool, label: str) -> None:
    """Producers first, alone; then the consumers read everything back from the earliest
    offset. A catch-up run writes backlog_mib; a read-after-write run writes for
    warmup_s + duration_s and measures publish over the window as a live run does."""
    if w.catch_up:
        share = int(w.backlog_mib * MIB) // w.producers
        write_t0 = time.time()
        clients.producers = [clients.start("loadtest.runner.producer", producer_cfg(w, bootstrap, topics, i, share),
                                           f"producer-{i}") for i in range(w.producers)]
        bar = Progress(progress, w.backlog_mib, f"{label} backlog", "MiB")
        try:
            while not all(p.snapshot("done") for p in clients.producers):
                clients.check()
                time.sleep(0.5)
                bar.update(_latest(clients.producers, "acked_bytes") / MIB)
        finally:
            bar.close()
        write_end = time.time()
        result["publish"] = window_figures(clients.producers, "acked", "acked_bytes", write_t0 - 1e9, write_end + 1e9,
                                           rate_span=(write_t0, write_end), sums=_producer_sums(w))
        result["publish"].update(_publish_totals(w, clients.producers))
        _commit_ms(result["publish"])
        result["publish"]["client_split"] = client_split_figures(clients.producers, write_t0, write_end)
        result["write_window"] = (write_t0, write_end)
        result["t0"] = write_t0  # the timeline starts with the writes
    else:
        _produce_for_the_window(w, bootstrap, topics, clients, result, progress, label)
        result["write_window"] = result.pop("window")
    acked = result["publish"]["acked_total"]
    t0 = time.time()
    _start_consumers(w, bootstrap, topics, clients, label, read_to_end=True)
    bar = Progress(progress, acked, f"{label} read", "records")
    # A bound, not a measure: the group's join alone takes group.initial.rebalance.delay.ms.
    deadline = t0 + max(READ_TIMEOUT_MIN_S, w.duration_s if w.catch_up else 4 * w.duration_s)
    try:
        while not _groups_caught_up(clients):
            clients.check()
            bar.update(min(_latest(members, "consumed") for members in clients.consumers.values()))
            if time.time() > deadline:
                info(f"{label}: the consumers did not reach the end of every partition in time")
                break
            time.sleep(0.1)
    finally:
        bar.close()
    end = time.time()
    members = clients.members()
    caught = [e for m in members for e in m.snapshot("caught_up")]
    for member in members:
        member.stop(timeout=DRAIN_S + 30)
    firsts = [e["t_first"] for e in caught if e.get("t_first")]
    lasts = [e["t_last"] for e in caught if e.get("t_last")]
    read_span = (min(firsts), max(lasts)) if firsts and lasts and max(lasts) > min(firsts) else (t0, end)
    result["read_window"] = (t0, end)
    # Everything the members reported counts, up to their final line after SIGTERM; the
    # rate is over the read itself, from the first record to the last (the group's join
    # is first_record_after_s, reported beside it).
    result["consume"] = window_figures(members, "consumed", "bytes", t0 - 1e9, end + 1e9, rate_span=read_span)
    result["consume"]["first_record_after_s"] = round(read_span[0] - t0, 3)
    result["consume"]["read_s"] = round(read_span[1] - read_span[0], 3)
    result["consume"].update(_read_totals(clients, acked))


def _groups_caught_up(clients: Clients) -> bool:
    """Every member of every group said caught_up after its latest assignment."""
    for members in clients.consumers.values():
        for member in members:
            events = [e for e in member.snapshot() if e["event"] in ("assigned", "caught_up")]
            if not events or events[-1]["event"] != "caught_up":
                return False
    return True


def _open_idle_connections(w: Workload, bootstrap: str, clients: Clients, mock: bool) -> dict[str, Any]:
    # The mock's listen backlog is 5: open its connections 4 at a time (idle_connections.py).
    stderr = open(os.path.join(clients.log_dir, "idle-connections.stderr"), "wb")
    clients.connections = IdleConnectionsChild(bootstrap, w.idle_connections, concurrency=4 if mock else 200,
                                               report_interval_s=5.0, stderr=stderr).start()
    stderr.close()  # the child holds its own descriptor
    established = clients.connections.wait_established(timeout=CONNECTIONS_TIMEOUT_S)
    if established.get("failed"):
        raise RuntimeError(f"{established['failed']} of {w.idle_connections} idle connections failed: {established.get('errors')}")
    return dict(established)


def _close_idle_connections(clients: Clients) -> dict[str, Any]:
    child = clients.connections
    assert child is not None
    held = [e for e in child.events if e.get("event") == "held"]
    summary = child.stop(timeout=60)
    clients.connections = None
    return {"held_last": held[-1] if held else None, "summary": summary}
