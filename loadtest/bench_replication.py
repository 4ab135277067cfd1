"""What replication costs: three Castle brokers, replicated against unreplicated, in one run.

Three brokers (node ids 1, 2, 3) on one ZooKeeper (``--zookeeper host:port``, a chroot
of their own), each on a free port with its own log dir under a temporary directory and
``--workers`` workers. In one run, side by side:

1. **Publish throughput** (MiB/s, records/s) of one confluent-kafka producer sending as
   fast as it can (linger.ms=5, batch.size=1,000,000, as loadtest/runner/producer.py
   and the max-throughput workloads), 100 B and 1 KiB records, to a fresh topic of
   ``--partitions`` per case: *replicated* (replication factor 3, min.insync.replicas=2,
   acks=all, idempotence on) and *unreplicated* (replication factor 1, acks=1). The rate
   counts the acknowledgements after a warm-up until the last one (the queue drained);
   goal: replicated / unreplicated >= 0.5 per size.
2. **Publish latency** at a fixed 5 MiB/s of 1 KiB records (linger.ms=0, as the
   fixed-rate-latency workload), paced in small bursts: per record, time.perf_counter()
   from produce() to its delivery callback (served by poll() at least every 1 ms). acks=all
   on replication factor 3 against acks=1 on replication factor 1; goal: p99 ratio <= 2.
3. **Follower catch-up**: a topic of replication factor 3 (``--catchup-partitions``, the
   same leader for each, placed explicitly), one follower stopped with SIGSTOP to its
   whole process group (neither the leader nor the controller), a backlog of
   ``--backlog-mib`` written with acks=1 (16 KiB records, as the catch-up workload),
   then, once the leader has dropped the follower from the ISR
   (``--replica-lag-ms``, the brokers' replica.lag.time.max.ms), SIGCONT: the time until
   the follower is back in the ISR of every partition (Metadata through the leader,
   polled every 0.1 s). A follower rejoins when it has fetched up to the high watermark,
   which, with nothing written meanwhile, is the leader's log end. The rate is the
   backlog / that time, and the loopback sendfile limit (loadtest/loopback_limit.py,
   sendfile mode, a file of the backlog's size) is measured right after, the brokers
   stopped; goal: catch-up / limit >= 0.5. The stopped broker may lose its ZooKeeper
   session meanwhile (zookeeper.session.timeout.ms, 18 s by default); the result says
   for how long it was stopped.

``--compare kafka`` then runs the same parts against three Apache Kafka 3.x brokers
(``--kafka-version``, ZooKeeper mode, on the same ZooKeeper under a chroot of their own;
jars from Maven Central, loadtest/kafka_peer.py), one cluster at a time, and reports
Castle / Kafka per figure. ``--warm-up-s`` gives each cluster that many seconds of
replicated publish before anything counts (Kafka's JIT needs minutes). ``--only`` picks
parts; ``--profile DIR`` runs py-spy on every broker process during each throughput case,
the latency and the catch-up (loadtest/profiling.py). After the catch-up the page-ingest limit
(loadtest/ingest_limit.py, one writer through a map) is measured beside the loopback one:
a follower must also store what it reads, and new pages are what this VM charges for.

Progress goes to stderr; stdout carries a table, or with ``--json`` one JSON object.
Every broker is stopped by its PID at the end (SIGCONT first if stopped, then SIGTERM,
SIGKILL after a timeout) and the temporary directory removed. Run (ZooKeeper must be
running; Debian: apt-get install zookeeper)::

    python -m loadtest.bench_replication --zookeeper 127.0.0.1:2181 --seconds 20 --workers 1
    python -m loadtest.bench_replication --zookeeper 127.0.0.1:2181 --seconds 2 --backlog-mib 8 --json
    python -m loadtest.bench_replication --zookeeper 127.0.0.1:2181 --compare kafka --warm-up-s 120 --seconds 20
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import random
import shutil
import signal
import statistics
import sys
import tempfile
import time
import uuid
from typing import Any

from loadtest import profiling
from loadtest.brokers import OwnBroker, wait_until
from loadtest.common import MIB, info
from loadtest.profiling import Profiles
from loadtest.runner.procstats import BrokerProcesses

NODE_IDS = (1, 2, 3)
SIZES = (100, 1024)
PARTS = ("throughput", "latency", "catch-up")
BURST = 64  # records produced between two polls, as loadtest/runner/producer.py
LATENCY_RATE_MIB_S = 5.0
LATENCY_RECORD = 1024
CATCHUP_RECORD = 16 * 1024  # as loadtest/workloads/catch-up.toml
FLUSH_TIMEOUT_S = 60.0
MIN_WAIT_S = 0.001  # librdkafka's poll timeout is whole milliseconds
GOALS = {"throughput_ratio_min": 0.5, "latency_p99_ratio_max": 2.0, "catch_up_over_loopback_min": 0.5}
CASES: dict[str, tuple[int, dict[str, str], dict[str, Any]]] = {  # name -> (factor, topic configs, producer settings)
    "unreplicated": (1, {}, {"acks": "1"}),
    "replicated": (3, {"min.insync.replicas": "2"}, {"acks": "all", "enable.idempotence": True}),
}


class Deliveries:
    """Delivery reports of one producer: counts, the last acknowledgement's time, the first error."""

    def __init__(self) -> None:
        self.acked = 0
        self.errors = 0
        self.first_error: str | None = None
        self.last_ack = 0.0
        self.latencies: list[float] = []  # seconds, records sent inside the measured window
        self.window_start = float("inf")

    def on_delivery(self, err: Any, _msg: Any) -> None:
        if err is not None:
            self.errors += 1
            self.first_error = self.first_error or str(err)
            return
        self.acked += 1
        self.last_ack = time.perf_counter()

    def timed(self, sent_at: float, err: Any, msg: Any) -> None:
        """The delivery callback of a timed record (functools.partial binds sent_at)."""
        self.on_delivery(err, msg)
        if err is None and sent_at >= self.window_start:
            self.latencies.append(self.last_ack - sent_at)


def producer_settings(bootstrap: str, extra: dict[str, Any], linger_ms: float) -> dict[str, Any]:
    settings: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "compression.type": "none",
        "linger.ms": linger_ms,
        "batch.size": 1_000_000,  # librdkafka's default, as the runner's workloads
        "queue.buffering.max.messages": 1_000_000,
    }
    settings.update(extra)
    return settings


def body(size: int) -> bytes:
    """Random capital letters, compressible about as much as text (as the runner's producer)."""
    return bytes(random.Random(size).choices(range(65, 91), k=size))


# --------------------------------------------------------------------------- topics


def create_topic(admin: Any, name: str, partitions: int, factor: int, configs: dict[str, str],
                 assignment: list[list[int]] | None = None) -> None:
    """Create it and wait (bounded) until every partition has a leader and a full ISR."""
    from confluent_kafka.admin import NewTopic

    if assignment is not None:
        # librdkafka wants the partition count with an assignment (-1 would be "the broker's default").
        topic = NewTopic(name, len(assignment), replica_assignment=assignment, config=configs)
    else:
        topic = NewTopic(name, partitions, factor, config=configs)
    admin.create_topics([topic], operation_timeout=30)[name].result(60)
    wanted = len(assignment[0]) if assignment is not None else factor

    def ready() -> bool:
        partitions_meta = partition_metadata(admin, name)
        return bool(partitions_meta) and len(partitions_meta) == partitions and all(
            p.leader >= 0 and len(p.isrs) == wanted for p in partitions_meta.values())

    wait_until(ready, 60, f"topic {name}: every partition led, ISR of {wanted}", interval=0.2)


def partition_metadata(admin: Any, name: str, timeout: float = 5.0) -> dict[int, Any]:
    """Partition id -> confluent PartitionMetadata ({} while unknown or on a request error)."""
    from confluent_kafka import KafkaException

    try:
        topic = admin.list_topics(name, timeout=timeout).topics.get(name)
    except KafkaException:
        return {}
    if topic is None or topic.error is not None:
        return {}
    return dict(topic.partitions)


def delete_topic(admin: Any, name: str) -> None:
    """Delete a finished case's topic (frees its disk); a failure is only reported."""
    try:
        admin.delete_topics([name], operation_timeout=30)[name].result(60)
    except Exception as exc:  # noqa: BLE001 - the figures are taken; the temp dir goes anyway
        info(f"WARNING: could not delete topic {name}: {exc}")


# --------------------------------------------------------------------------- 1. throughput


def throughput(bootstrap: str, topic: str, size: int, extra: dict[str, Any], warmup_s: float,
               seconds: float) -> dict[str, Any]:
    """As fast as one producer can: acknowledgements after the warm-up until the last one."""
    from confluent_kafka import Producer

    deliveries = Deliveries()
    producer = Producer(producer_settings(bootstrap, {**extra, "on_delivery": deliveries.on_delivery}, linger_ms=5))
    producer.list_topics(topic, timeout=30)
    value = body(size)
    produce, poll, clock = producer.produce, producer.poll, time.perf_counter
    sent = 0
    started = clock()
    window_start, end = started + warmup_s, started + warmup_s + seconds
    acked_at_start: int | None = None
    while True:
        now = clock()
        if acked_at_start is None and now >= window_start:
            acked_at_start, window_start = deliveries.acked, now
        if now >= end:
            break
        for _ in range(BURST):
            try:
                produce(topic, value)
            except BufferError:  # librdkafka's queue is full: let deliveries drain it
                poll(0.01)
                break
            sent += 1
        poll(0)
    unflushed = producer.flush(FLUSH_TIMEOUT_S)
    assert acked_at_start is not None
    counted = deliveries.acked - acked_at_start
    elapsed = max(deliveries.last_ack - window_start, 1e-9)
    return {
        "record_bytes": size,
        "mib_per_s": round(counted * size / MIB / elapsed, 2) if counted > 0 else 0.0,
        "records_per_s": round(counted / elapsed) if counted > 0 else 0,
        "seconds": round(elapsed, 2),
        "sent": sent,
        "acked": deliveries.acked,
        "errors": deliveries.errors,
        "first_error": deliveries.first_error,
        "unflushed": unflushed,
    }


def brokers_cpu_s(brokers: dict[int, Any]) -> float:
    """CPU seconds of every broker's processes (Castle: its process tree; Kafka: the JVM)."""
    return sum(BrokerProcesses(root=broker.pid).sample().cpu_s for broker in brokers.values())


# --------------------------------------------------------------------------- 2. latency


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, int(round(fraction * len(ordered))) - 1))]


def latency(bootstrap: str, topic: str, extra: dict[str, Any], rate_mib_s: float, warmup_s: float,
            seconds: float, linger_ms: float = 0) -> dict[str, Any]:
    """1 KiB records at a fixed rate, paced in bursts; produce() to delivery callback per record.

    Also the CPU time this client process used over the case (all its threads: librdkafka's
    included), as a share of one core: with linger.ms 0, once a broker's acknowledgements take
    longer than its five in-flight requests cover, librdkafka's broker threads poll with a
    zero timeout and take a core between them (perf, 2026-11-29), from the brokers' two."""
    from confluent_kafka import Producer

    deliveries = Deliveries()
    producer = Producer(producer_settings(bootstrap, extra, linger_ms=linger_ms))
    producer.list_topics(topic, timeout=30)
    value = body(LATENCY_RECORD)
    rate = rate_mib_s * MIB / LATENCY_RECORD  # records/s
    produce, poll, clock = producer.produce, producer.poll, time.perf_counter
    timed = deliveries.timed
    sent = sent_in_window = 0
    started = clock()
    cpu_started = time.process_time()
    deliveries.window_start = started + warmup_s
    end = deliveries.window_start + seconds
    while True:
        now = clock()
        if now >= end:
            break
        elapsed = now - started
        due = int(elapsed * rate) - sent
        if due <= 0:
            poll(max(MIN_WAIT_S, (sent + 1) / rate - elapsed))
            continue
        for _ in range(min(due, BURST)):
            sent_at = clock()
            try:
                produce(topic, value, on_delivery=functools.partial(timed, sent_at))
            except BufferError:
                poll(0.01)
                break
            sent += 1
            if sent_at >= deliveries.window_start:
                sent_in_window += 1
        poll(0)
    unflushed = producer.flush(FLUSH_TIMEOUT_S)
    client_cpu = (time.process_time() - cpu_started) / max(1e-9, clock() - started)
    found = deliveries.latencies
    out: dict[str, Any] = {
        "target_mib_per_s": rate_mib_s,
        "linger_ms": linger_ms,
        "client_cpu_cores": round(client_cpu, 2),
        "achieved_mib_per_s": round(sent_in_window * LATENCY_RECORD / MIB / seconds, 2),
        "acked_mib_per_s": round(len(found) * LATENCY_RECORD / MIB / seconds, 2),
        "records": len(found),
        "errors": deliveries.errors,
        "first_error": deliveries.first_error,
        "unflushed": unflushed,
    }
    if found:
        out.update(p50_ms=round(percentile(found, 0.50) * 1000, 2), p99_ms=round(percentile(found, 0.99) * 1000, 2),
                   p999_ms=round(percentile(found, 0.999) * 1000, 2), max_ms=round(max(found) * 1000, 2), mean_ms=round(statistics.fmean(found) * 1000, 2))
    return out


# --------------------------------------------------------------------------- 3. catch-up


def controller_id(zookeeper: Any, flavor: str = "castle") -> int | None:
    """The controller: Castle's elected coordinator (coordination/controller.py), Kafka's /controller."""
    from kazoo.exceptions import NoNodeError

    path = "/controller" if flavor == "kafka" else "/consumers/coordinator"
    try:
        return int(json.loads(zookeeper.get(path)[0])["brokerid"])
    except (NoNodeError, ValueError, KeyError):
        return None


def stop_group(broker: Any) -> list[int]:
    """SIGSTOP the broker's process group (it runs in a session of its own) and any of its
    processes that left that group; returns what to SIGCONT: the group id first."""
    os.killpg(broker.pid, signal.SIGSTOP)
    stopped = [broker.pid]
    for pid in broker.children():
        try:
            if os.getpgid(pid) != broker.pid:
                os.kill(pid, signal.SIGSTOP)
                stopped.append(pid)
        except ProcessLookupError:
            pass
    return stopped


def resume_group(broker: Any, stopped: list[int]) -> None:
    for index, pid in enumerate(stopped):
        try:
            if index == 0:
                os.killpg(pid, signal.SIGCONT)
            else:
                os.kill(pid, signal.SIGCONT)
        except ProcessLookupError:
            pass


def write_backlog(bootstrap: str, topic: str, backlog_bytes: int) -> dict[str, Any]:
    """acks=1, 16 KiB records, until backlog_bytes are acknowledged."""
    from confluent_kafka import Producer

    deliveries = Deliveries()
    producer = Producer(producer_settings(bootstrap, {"acks": "1", "on_delivery": deliveries.on_delivery}, linger_ms=5))
    producer.list_topics(topic, timeout=30)
    value = body(CATCHUP_RECORD)
    records = -(-backlog_bytes // CATCHUP_RECORD)
    started = time.perf_counter()
    sent = 0
    while sent < records:
        for _ in range(min(BURST, records - sent)):
            try:
                producer.produce(topic, value)
            except BufferError:
                producer.poll(0.01)
                break
            sent += 1
        producer.poll(0)
    unflushed = producer.flush(FLUSH_TIMEOUT_S + backlog_bytes / (10 * MIB))
    seconds = max(deliveries.last_ack - started, 1e-9)
    if deliveries.errors or unflushed:
        raise SystemExit(f"the backlog was not all written: {deliveries.errors} errors ({deliveries.first_error}), "
                         f"{unflushed} unflushed")
    return {"records": deliveries.acked, "bytes": deliveries.acked * CATCHUP_RECORD, "write_seconds": round(seconds, 2),
            "write_mib_per_s": round(deliveries.acked * CATCHUP_RECORD / MIB / seconds, 1)}


def catch_up(flavor: str, brokers: dict[int, Any], admin: Any, zookeeper: Any, topic: str, partitions: int,
             backlog_mib: float, lag_ms: int, stopped_groups: dict[int, list[int]],
             profiles: Profiles | None = None) -> dict[str, Any]:
    from confluent_kafka.admin import AdminClient

    controller = controller_id(zookeeper, flavor)
    others = [n for n in NODE_IDS if n != controller] if controller in NODE_IDS else list(NODE_IDS)
    leader, follower = others[0], others[-1]  # the follower stopped is neither leader nor controller
    middle = next(n for n in NODE_IDS if n not in (leader, follower))
    create_topic(admin, topic, partitions, 3, {}, assignment=[[leader, middle, follower]] * partitions)
    # The leader alone: a client bootstrapped to it connects to no other broker for Metadata
    # (sparse connections), so no request waits on the stopped one.
    at_leader = AdminClient({"bootstrap.servers": brokers[leader].bootstrap})
    meta = partition_metadata(at_leader, topic)
    leaders = {p.leader for p in meta.values()}
    if leaders != {leader}:
        raise SystemExit(f"catch-up topic: leaders {sorted(leaders)}, expected {leader} (the first replica) for every partition")
    info(f"catch-up: controller {controller}, leader {leader}, stopping follower {follower} (SIGSTOP to its process group)")
    stopped_groups[follower] = stop_group(brokers[follower])
    stopped_at = time.monotonic()
    written = write_backlog(brokers[leader].bootstrap, topic, int(backlog_mib * MIB))
    info(f"catch-up: wrote {written['bytes'] / MIB:.0f} MiB at {written['write_mib_per_s']} MiB/s (acks=1); "
         f"waiting for the leader to drop {follower} from the ISR (replica.lag.time.max.ms={lag_ms})")

    def follower_out() -> bool:
        found = partition_metadata(at_leader, topic, timeout=2)
        return len(found) == partitions and all(follower not in p.isrs for p in found.values())

    waited = time.monotonic()
    wait_until(follower_out, lag_ms / 1000 + 60, f"broker {follower} out of the ISR", interval=0.2)
    shrink_wait = time.monotonic() - waited
    if profiles is not None:  # the follower's processes (stopped: none is missed) and the leader's
        profiles.start(f"{flavor}-catch-up-follower", [brokers[follower].pid, *brokers[follower].children()])
        profiles.start(f"{flavor}-catch-up-leader", [brokers[leader].pid, *brokers[leader].children()])
    resume_group(brokers[follower], stopped_groups.pop(follower))
    resumed = time.perf_counter()
    stopped_s = time.monotonic() - stopped_at
    info(f"catch-up: SIGCONT to broker {follower} after {stopped_s:.1f} s stopped; timing until it is back in the ISR")

    def follower_in() -> bool:
        found = partition_metadata(at_leader, topic, timeout=2)
        return len(found) == partitions and all(follower in p.isrs for p in found.values())

    wait_until(follower_in, 60 + backlog_mib / 2, f"broker {follower} back in the ISR of every partition", interval=0.1)
    seconds = time.perf_counter() - resumed
    if profiles is not None:
        profiles.stop()
    mib = written["bytes"] / MIB
    return {"leader": leader, "stopped_follower": follower, "controller": controller, "partitions": partitions,
            "record_bytes": CATCHUP_RECORD, "backlog_mib": round(mib, 1), **written,
            "isr_shrink_wait_s": round(shrink_wait, 2), "stopped_s": round(stopped_s, 1),
            "seconds": round(seconds, 2), "mib_per_s": round(mib / seconds, 1)}


# --------------------------------------------------------------------------- output


def verdicts(result: dict[str, Any]) -> dict[str, Any]:
    goals: dict[str, Any] = {}
    for size, row in result["throughput"].items():
        if row.get("ratio") is not None:
            goals[f"throughput_{size}b"] = {"value": row["ratio"], "goal": f">= {GOALS['throughput_ratio_min']}",
                                            "met": row["ratio"] >= GOALS["throughput_ratio_min"]}
    ratio = result["latency"].get("p99_ratio")
    if ratio is not None:
        goals["latency_p99"] = {"value": ratio, "goal": f"<= {GOALS['latency_p99_ratio_max']}",
                                "met": ratio <= GOALS["latency_p99_ratio_max"]}
    ratio = (result.get("catch_up") or {}).get("over_loopback")
    if ratio is not None:
        goals["catch_up"] = {"value": ratio, "goal": f">= {GOALS['catch_up_over_loopback_min']}",
                             "met": ratio >= GOALS["catch_up_over_loopback_min"]}
    return goals


def print_table(result: dict[str, Any], title: str = "Castle") -> None:
    print(f"{title} replication: 3 brokers, {result['workers']} worker(s) each, {result['partitions']} partitions, "
          f"{result['seconds']} s per case (after {result['warmup_s']} s of warm-up)")
    print()
    print(f"{'publish':<22} {'replicated (RF 3, acks=all)':>42} {'unreplicated (RF 1, acks=1)':>42} {'ratio':>7}")
    for size, row in result["throughput"].items():
        cells = []
        for case in ("replicated", "unreplicated"):
            c = row[case]
            cells.append(f"{c['mib_per_s']:.1f} MiB/s {c['records_per_s']:,} rec/s"
                         f" {c.get('broker_cpu_s_per_million', float('nan')):.2f} CPU-s/M")
        print(f"{size + ' B records':<22} {cells[0]:>42} {cells[1]:>42} {row['ratio']:>6.2f}x")
    lat = result["latency"]
    if "replicated" in lat:
        print_latency(lat)
    print_catch_up(result.get("catch_up"))
    print()
    for name, goal in result["goals"].items():
        print(f"goal {name}: {goal['value']} ({goal['goal']}): {'met' if goal['met'] else 'NOT MET'}")


def print_latency(lat: dict[str, Any]) -> None:
    print()
    print(f"{'latency, 1 KiB records':<22} {'replicated (RF 3, acks=all)':>30} {'unreplicated (RF 1, acks=1)':>30} {'ratio':>7}")
    cells = []
    for case in ("replicated", "unreplicated"):
        c = lat[case]
        cells.append(f"p50 {c.get('p50_ms', float('nan')):.1f} p99 {c.get('p99_ms', float('nan')):.1f} "
                     f"p99.9 {c.get('p999_ms', float('nan')):.0f} ms")
    ratio = lat.get("p99_ratio")
    print(f"{'at ' + str(lat['rate_mib_s']) + ' MiB/s':<22} {cells[0]:>30} {cells[1]:>30} "
          f"{(f'{ratio:.2f}x' if ratio is not None else 'n/a'):>7}")
    achieved = [f"{lat[c]['achieved_mib_per_s']:.2f} MiB/s sent" for c in ("replicated", "unreplicated")]
    print(f"{'achieved':<22} {achieved[0]:>30} {achieved[1]:>30}")
    cpu = [f"{lat[c].get('client_cpu_cores', float('nan')):.2f} cores" for c in ("replicated", "unreplicated")]
    print(f"{'client CPU':<22} {cpu[0]:>30} {cpu[1]:>30}")


def print_catch_up(cu: dict[str, Any] | None) -> None:
    if cu:
        print()
        limit, over = cu.get("loopback_sendfile_mib_per_s"), cu.get("over_loopback")
        print(f"catch-up: {cu['backlog_mib']:.0f} MiB backlog on {cu['partitions']} partition(s) (written at "
              f"{cu['write_mib_per_s']} MiB/s, acks=1), follower {cu['stopped_follower']} stopped {cu['stopped_s']} s")
        print(f"  back in the ISR {cu['seconds']:.2f} s after SIGCONT: {cu['mib_per_s']:.1f} MiB/s; loopback sendfile limit "
              f"{limit if limit is not None else 'n/a'} MiB/s; ratio {f'{over:.2f}x' if over is not None else 'n/a'}")
        if cu.get("page_ingest_mib_per_s"):
            print(f"  page-ingest limit (mmap, one writer) {cu['page_ingest_mib_per_s']} MiB/s; ratio {cu['over_page_ingest']:.2f}x")


# --------------------------------------------------------------------------- main


class KafkaNode:
    """One broker of a three-node Apache Kafka 3.x cluster in ZooKeeper mode (on the shared
    ZooKeeper, under a chroot of its own), with the surface of OwnBroker this benchmark uses.
    Kafka's defaults but for the node id, the lag time and the internal topics' sizes."""

    def __init__(self, base_dir: str, node_id: int, zookeeper: str, version: str, lag_ms: int, fetchers: int) -> None:
        from loadtest.kafka_peer import KafkaPeer

        self.peer = KafkaPeer(os.path.join(base_dir, f"kafka-{node_id}.log"), version=version, mode="zookeeper",
                              zookeeper=zookeeper, base_dir=base_dir,
                              overrides={"broker.id": str(node_id), "replica.lag.time.max.ms": str(lag_ms),
                                         "num.replica.fetchers": str(fetchers),
                                         "offsets.topic.replication.factor": "3",
                                         "transaction.state.log.replication.factor": "3",
                                         "transaction.state.log.min.isr": "2"})
        self.bootstrap = self.peer.bootstrap

    @property
    def pid(self) -> int:
        return self.peer.pid

    def children(self) -> list[int]:
        return []  # one JVM

    def wait_ready(self, timeout: float) -> None:
        self.peer.wait_ready(max(timeout, 180.0))

    def stop(self, timeout: float) -> int | None:
        return self.peer.stop(timeout)

    def stderr_tail(self, lines: int) -> str:
        return self.peer.log_tail(lines)


def start_cluster(flavor: str, base: str, zookeeper: str, args: argparse.Namespace) -> dict[int, Any]:
    brokers: dict[int, Any] = {}
    for node_id in NODE_IDS:
        path = os.path.join(base, f"{flavor}-b{node_id}")
        os.makedirs(path)
        if flavor == "kafka":
            brokers[node_id] = KafkaNode(path, node_id, zookeeper, args.kafka_version, args.replica_lag_ms,
                                         args.replica_fetchers)
        else:
            brokers[node_id] = OwnBroker(path, {"node.id": str(node_id), "zookeeper.connect": zookeeper,
                                                "workers": str(args.workers),
                                                "replica.lag.time.max.ms": str(args.replica_lag_ms),
                                                "num.replica.fetchers": str(args.replica_fetchers)})
    return brokers


def window_warmup(args: argparse.Namespace) -> float:
    """Seconds before each measured window: --warmup, else a quarter of --seconds, at most 2."""
    return args.warmup if args.warmup is not None else min(2.0, args.seconds / 4)


def measure_cluster(flavor: str, brokers: dict[int, Any], zookeeper: Any, args: argparse.Namespace, parts: set[str],
                    profiles: Profiles | None, stopped_groups: dict[int, list[int]]) -> dict[str, Any]:
    """Every part asked for, against one cluster that is up: throughput, latency, catch-up."""
    from confluent_kafka.admin import AdminClient

    warmup = window_warmup(args)
    result: dict[str, Any] = {"throughput": {}, "latency": {}, "catch_up": None}
    run = uuid.uuid4().hex[:6]
    bootstrap = ",".join(b.bootstrap for b in brokers.values())
    admin = AdminClient({"bootstrap.servers": bootstrap})
    wait_until(lambda: len(admin.list_topics(timeout=5).brokers) == len(NODE_IDS), 120, "all three brokers registered")
    info(f"{flavor} brokers up: {bootstrap} (pids {', '.join(str(b.pid) for b in brokers.values())})")
    if args.warm_up_s > 0:
        # Kafka's JIT compiles for minutes; both clusters get the same replicated load first.
        factor, configs, extra = CASES["replicated"]
        topic = f"repl-warm-{run}"
        create_topic(admin, topic, args.partitions, factor, configs)
        warm = throughput(bootstrap, topic, LATENCY_RECORD, extra, 0.0, args.warm_up_s)
        info(f"{flavor} warm-up: {args.warm_up_s:.0f} s of replicated 1 KiB publish, {warm['mib_per_s']} MiB/s")
        delete_topic(admin, topic)

    for size in SIZES if "throughput" in parts else ():
        row: dict[str, Any] = {}
        for case in ("unreplicated", "replicated"):
            factor, configs, extra = CASES[case]
            topic = f"repl-tp-{size}-{case}-{run}"
            create_topic(admin, topic, args.partitions, factor, configs)
            if profiles is not None:
                for node_id, broker in brokers.items():
                    profiles.start(f"{flavor}-throughput-{size}-{case}-b{node_id}", [broker.pid, *broker.children()])
            cpu_before = brokers_cpu_s(brokers)
            row[case] = throughput(bootstrap, topic, size, extra, warmup, args.seconds)
            # Over the whole case (its warm-up included): every acknowledged record counts.
            cpu_s = brokers_cpu_s(brokers) - cpu_before
            row[case]["broker_cpu_s_per_million"] = round(cpu_s / max(1, row[case]["acked"]) * 1e6, 3)
            if profiles is not None:
                profiles.stop()
            info(f"{flavor} throughput {size} B {case}: {row[case]['mib_per_s']} MiB/s, "
                 f"{row[case]['records_per_s']:,} rec/s, brokers {row[case]['broker_cpu_s_per_million']} CPU-s per "
                 f"million ({row[case]['errors']} errors"
                 f"{', first: ' + row[case]['first_error'] if row[case]['first_error'] else ''})")
            delete_topic(admin, topic)
        base_rate = row["unreplicated"]["mib_per_s"]
        row["ratio"] = round(row["replicated"]["mib_per_s"] / base_rate, 3) if base_rate else None
        result["throughput"][str(size)] = row

    lat: dict[str, Any] = {"rate_mib_s": args.latency_rate_mib, "record_bytes": LATENCY_RECORD}
    for case in ("unreplicated", "replicated") if "latency" in parts else ():
        factor, configs, extra = CASES[case]
        topic = f"repl-lat-{case}-{run}"
        create_topic(admin, topic, args.partitions, factor, configs)
        if profiles is not None:
            for node_id, broker in brokers.items():
                profiles.start(f"{flavor}-latency-{case}-b{node_id}", [broker.pid, *broker.children()])
        lat[case] = latency(bootstrap, topic, extra, args.latency_rate_mib, warmup, args.seconds,
                            args.latency_linger_ms)
        if profiles is not None:
            profiles.stop()
        info(f"{flavor} latency {case}: p50 {lat[case].get('p50_ms')} ms, p99 {lat[case].get('p99_ms')} ms, "
             f"{lat[case]['achieved_mib_per_s']} MiB/s sent ({lat[case]['errors']} errors), "
             f"client CPU {lat[case]['client_cpu_cores']} cores")
        delete_topic(admin, topic)
    p99s = (lat.get("replicated", {}).get("p99_ms"), lat.get("unreplicated", {}).get("p99_ms"))
    lat["p99_ratio"] = round(p99s[0] / p99s[1], 3) if p99s[0] is not None and p99s[1] else None
    result["latency"] = lat

    if args.backlog_mib > 0 and "catch-up" in parts:
        result["catch_up"] = catch_up(flavor, brokers, admin, zookeeper, f"repl-catchup-{run}", args.catchup_partitions,
                                      args.backlog_mib, args.replica_lag_ms, stopped_groups, profiles)
        info(f"{flavor} catch-up: {result['catch_up']['backlog_mib']} MiB in {result['catch_up']['seconds']} s, "
             f"{result['catch_up']['mib_per_s']} MiB/s")
    return result


def run_cluster(flavor: str, args: argparse.Namespace, parts: set[str], profiles: Profiles | None) -> dict[str, Any]:
    """Start a three-broker cluster of ``flavor`` (castle, kafka) on a fresh chroot, measure it,
    stop every broker by its PID and remove its files."""
    from kazoo.client import KazooClient

    chroot = f"/bench-replication-{flavor}-{uuid.uuid4().hex[:8]}"
    zookeeper = KazooClient(hosts=args.zookeeper + chroot)
    base = tempfile.mkdtemp(prefix=f"{flavor}-bench-repl-")
    stopped_groups: dict[int, list[int]] = {}
    brokers: dict[int, Any] = {}
    try:
        if flavor == "kafka":  # Kafka makes its chroot only when it is the first thing it writes
            root = KazooClient(hosts=args.zookeeper)
            root.start(timeout=30)
            try:
                root.ensure_path(chroot)
            finally:
                root.stop()
                root.close()
        brokers = start_cluster(flavor, base, args.zookeeper + chroot, args)
        for broker in brokers.values():
            broker.wait_ready(60)
        zookeeper.start(timeout=30)
        result = measure_cluster(flavor, brokers, zookeeper, args, parts, profiles, stopped_groups)
        result["zookeeper_chroot"] = chroot
        return result
    finally:
        for node_id, stopped in stopped_groups.items():
            resume_group(brokers[node_id], stopped)
        for broker in brokers.values():
            code = broker.stop(timeout=30)
            if code not in (0, None, -signal.SIGTERM, 143):
                info(f"broker pid {broker.pid} exited with {code}; its log ends:\n{broker.stderr_tail(10)}")
        try:
            zookeeper.stop()
            zookeeper.close()
        finally:
            shutil.rmtree(base, ignore_errors=True)


def measure_limits(catch_ups: list[dict[str, Any]], args: argparse.Namespace) -> None:
    """Right after, with every broker stopped: the loopback sendfile limit (the fastest a
    follower could read) and the page-ingest limit (the fastest it could store: on this VM new
    page-cache pages are the dearer part, docs/BENCHMARKS.md "Memory state"; one writer through
    a map, as one worker's follower); each catch-up's ratios to both."""
    from loadtest import ingest_limit, loopback_limit

    size = max(max(c["backlog_mib"] for c in catch_ups), 1)
    info("loopback sendfile limit ...")
    limit = loopback_limit.measure(size, repeat=args.loopback_repeat, directory=args.limit_dir, modes=("sendfile",),
                                   progress=lambda m: info(f"  {m}"))
    median = limit["sendfile"]["median_mib_per_s"]
    info("page-ingest limit (mmap, one writer) ...")
    ingest = ingest_limit.measure(size, ("mmap",), (1,), 1, args.limit_dir, progress=lambda m: info(f"  {m}"))
    rate = ingest["summary"]["mmapx1"]["median_mib_per_s"]
    for cu in catch_ups:
        cu.update(loopback_sendfile_mib_per_s=median, loopback_sendfile_max_mib_per_s=limit["sendfile"]["max_mib_per_s"],
                  over_loopback=round(cu["mib_per_s"] / median, 3),
                  page_ingest_mib_per_s=rate, over_page_ingest=round(cu["mib_per_s"] / rate, 3))


def versus(castle: dict[str, Any], kafka: dict[str, Any]) -> dict[str, Any]:
    """Castle / Kafka for each figure both runs have: rates (higher is better), p99s (lower)."""
    ratios: dict[str, Any] = {}
    for size, row in castle["throughput"].items():
        theirs = kafka["throughput"].get(size)
        for case in ("replicated", "unreplicated"):
            if theirs and theirs[case]["records_per_s"]:
                ratios[f"throughput_{size}b_{case}"] = round(row[case]["records_per_s"] / theirs[case]["records_per_s"], 3)
    for case in ("replicated", "unreplicated"):
        ours, theirs = castle["latency"].get(case, {}), kafka["latency"].get(case, {})
        for mark in ("p99_ms", "p999_ms"):
            if ours.get(mark) and theirs.get(mark):
                ratios[f"latency_{case}_{mark}"] = round(ours[mark] / theirs[mark], 3)
    if castle.get("catch_up") and kafka.get("catch_up"):
        ratios["catch_up"] = round(castle["catch_up"]["mib_per_s"] / kafka["catch_up"]["mib_per_s"], 3)
    return ratios


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--zookeeper", required=True, help="host:port of a running ZooKeeper")
    parser.add_argument("--seconds", type=float, default=20.0, help="measured seconds per throughput and latency case")
    parser.add_argument("--warmup", type=float, default=None, help="seconds before each measured window (default: "
                                                                     "a quarter of --seconds, at most 2)")
    parser.add_argument("--warm-up-s", type=float, default=0.0, help="seconds of replicated publish before anything "
                        "is measured, per cluster (Kafka's JIT: give it minutes)")
    parser.add_argument("--workers", type=int, default=1, help="workers per broker (default 1)")
    parser.add_argument("--partitions", type=int, default=6, help="partitions of the throughput and latency topics")
    parser.add_argument("--latency-rate-mib", type=float, default=LATENCY_RATE_MIB_S, help="the fixed rate (MiB/s)")
    parser.add_argument("--latency-linger-ms", type=float, default=0.0,
                        help="the latency producer's linger.ms (0, as the fixed-rate-latency workload)")
    parser.add_argument("--backlog-mib", type=float, default=1024, help="the follower's backlog (default 1024; "
                                                                          "0 skips the catch-up)")
    parser.add_argument("--catchup-partitions", type=int, default=3, help="partitions of the catch-up topic")
    parser.add_argument("--replica-lag-ms", type=int, default=10_000, help="the brokers' replica.lag.time.max.ms")
    parser.add_argument("--replica-fetchers", type=int, default=1,
                        help="the brokers' num.replica.fetchers (default 1, Kafka's): fetch loops per leader")
    parser.add_argument("--loopback-repeat", type=int, default=3, help="sendfile runs of the loopback limit")
    parser.add_argument("--limit-dir", default="/var/tmp", help="where the loopback limit's file goes")
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout instead of the table")
    parser.add_argument("--profile", metavar="DIR", help="py-spy every broker process during each throughput case, "
                        "the latency and the catch-up; collapsed stacks and a summary under DIR")
    parser.add_argument("--only", choices=PARTS, action="append", help="run only this part (repeatable; default: all)")
    parser.add_argument("--compare", choices=("kafka",), help="the same parts against three Apache Kafka brokers "
                        "(ZooKeeper mode) after Castle's")
    parser.add_argument("--kafka-version", default="3.9.1", help="Kafka 3.x for --compare (default 3.9.1)")
    parser.add_argument("--kafka-only", action="store_true", help="with --compare: measure Kafka's cluster alone")
    args = parser.parse_args(argv)
    parts = set(args.only or PARTS)
    if args.profile:
        os.makedirs(args.profile, exist_ok=True)
    profiles = Profiles(args.profile) if args.profile else None
    warmup = window_warmup(args)
    result: dict[str, Any] = {"brokers": len(NODE_IDS), "workers": args.workers, "partitions": args.partitions,
                              "seconds": args.seconds, "warmup_s": warmup, "warm_up_s": args.warm_up_s,
                              "replica_lag_time_max_ms": args.replica_lag_ms, "replica_fetchers": args.replica_fetchers}
    if args.kafka_only and not args.compare:
        parser.error("--kafka-only needs --compare kafka")
    result.update({"throughput": {}, "latency": {}, "catch_up": None} if args.kafka_only
                  else run_cluster("castle", args, parts, profiles))
    if args.compare:
        result["kafka"] = run_cluster("kafka", args, parts, profiles)
        result["kafka"]["version"] = args.kafka_version
    catch_ups = [c for c in (result.get("catch_up"), result.get("kafka", {}).get("catch_up")) if c]
    if catch_ups:
        measure_limits(catch_ups, args)
    result["goals"] = verdicts(result)
    if args.compare and not args.kafka_only:
        result["castle_over_kafka"] = versus(result, result["kafka"])
    if profiles is not None:
        result["profiles"] = {name: profiling.summary(os.path.join(args.profile, name))
                              for name in sorted(os.listdir(args.profile)) if name.endswith(".txt")}
        with open(os.path.join(args.profile, "summary.json"), "w") as out:
            json.dump(result["profiles"], out, indent=1)
    if args.json:
        json.dump(result, sys.stdout)
        print()
    else:
        print_table(result)
        if args.compare:
            print()
            print_table({**result["kafka"], "workers": "-", "partitions": args.partitions, "seconds": args.seconds,
                         "warmup_s": warmup, "goals": verdicts(result["kafka"])}, f"Apache Kafka {args.kafka_version}")
            print()
            for name, ratio in result.get("castle_over_kafka", {}).items():
                print(f"Castle / Kafka {name}: {ratio}x")
    return 0

if __name__ == "__main__":
    sys.exit(main())
