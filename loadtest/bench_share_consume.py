"""How fast a share group (KIP-932) reads a topic, next to a classic consumer group reading the same
topic, against Castle and, with ``--compare kafka``, Apache Kafka 4.4 on the same machine.

One broker (Castle: one ``castle serve``; Kafka: KafkaPeer, one KRaft node), one topic of
``--partitions`` partitions filled once with ``--records`` records of ``--record-bytes`` bytes
(one producer, before any consumer starts). Each round reads the whole topic twice, each time in
a new group, with ``--consumers`` confluent-kafka consumers, one PROCESS each (no GIL shared;
the same client library for both kinds, so the ratio compares the protocols, not the clients):

* ``share``: ``ShareConsumer`` with ``share.acknowledgement.mode=explicit``; every record
  ACCEPTed by ``acknowledge``, each poll's acknowledgements sent by ``commit_sync``
  (ShareAcknowledge) and counted once the broker answered. The group is first told
  ``share.auto.offset.reset=earliest`` (IncrementalAlterConfigs of the GROUP resource).
* ``classic``: ``Consumer`` in a classic group (``auto.offset.reset=earliest``), each poll's
  offsets committed synchronously (``commit(asynchronous=False)``).

Figures per run: ``records_per_s`` over the span from the first record any consumer got to the
moment the last record was counted (the group's join is left out: a classic group waits
group.initial.rebalance.delay.ms first), ``join_s`` from the consumers' subscribe to that first
record, and per consumer the records it got. Each round's ``share_over_classic`` is the ratio of
the two rates on one broker.

With ``--compare kafka`` both brokers run for the whole invocation and take turns round by round
(one uncounted warm-up round each first); ``--no-castle`` leaves Castle out (Kafka only, while
Castle does not serve share groups). Progress goes to stderr, one JSON line per round and the
summary (medians) to stdout::

    python -m loadtest.bench_share_consume --records 200000
    python -m loadtest.bench_share_consume --records 200000 --compare kafka --out bench-results/share-consume
    python -m loadtest.bench_share_consume --compare kafka --no-castle --records 20000 --rounds 1
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable

from loadtest.brokers import OwnBroker, wait_until
from loadtest.common import info, parse_key_values
from loadtest.kafka_peer import DEFAULT_VERSION as DEFAULT_KAFKA_VERSION
from loadtest.kafka_peer import KafkaPeer
from loadtest.machine import git_state, machine_info

TOPIC = "bench-share-consume"
KINDS = ("share", "classic")
POLL_S = 0.1
now = time.monotonic  # CLOCK_MONOTONIC: one clock for every process of the machine


@dataclass
class Target:
    name: str
    bootstrap: str
    settings: dict[str, str] = field(default_factory=dict)


# ---------------------------------------------------------------------- one consumer, in its own process
def consume(kind: str, bootstrap: str, group: str, name: str, go: Any, stop: Any, counted: Any, total: int,
            results: Any) -> None:
    """Made before ``go`` (its construction is not timed); polls until ``total`` records are
    counted by the group (``counted``, shared) or ``stop``; puts its figures on ``results``."""
    from confluent_kafka import AcknowledgeType, Consumer, ShareConsumer

    subscribed: float | None = None
    first: float | None = None
    got = 0
    done_at: float | None = None
    failure = ""
    consumer: Any
    if kind == "share":
        consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, "client.id": name,
                                  "share.acknowledgement.mode": "explicit"})
    else:
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "client.id": name,
                             "group.protocol": "classic", "auto.offset.reset": "earliest",
                             "enable.auto.commit": False})
    try:
        go.wait()
        subscribed = now()
        consumer.subscribe([TOPIC])
        while not stop.is_set():
            if kind == "share":
                batch = consumer.poll(POLL_S)
            else:
                batch = consumer.consume(500, POLL_S)
            n = 0
            for message in batch:
                if message.error() is not None:
                    failure = str(message.error())
                    continue
                if kind == "share":
                    consumer.acknowledge(message, AcknowledgeType.ACCEPT)
                n += 1
            if not n:
                continue
            if first is None:
                first = now()
            if kind == "share":
                failed = [str(e) for e in consumer.commit_sync(60).values() if e is not None]
                if failed:
                    failure = failed[0]
                    continue  # not counted: the broker did not take them
            else:
                consumer.commit(asynchronous=False)
            got += n
            with counted.get_lock():
                counted.value += n
                if counted.value >= total:
                    done_at = now()
                    stop.set()
    except Exception as exc:  # reported by the parent
        failure = repr(exc)
    finally:
        consumer.close()
        results.put({"name": name, "subscribed": subscribed, "first": first, "done_at": done_at, "records": got,
                     "failure": failure})


# ---------------------------------------------------------------------- one reading of the topic
def run_group(target: Target, kind: str, args: argparse.Namespace, label: str) -> dict[str, Any]:
    group = f"bench-share-{kind}-{uuid.uuid4().hex[:8]}"
    if kind == "share":
        set_earliest(target.bootstrap, group)
    context = multiprocessing.get_context("spawn")
    go, stop = context.Event(), context.Event()
    counted = context.Value("q", 0)
    results = context.Queue()
    workers = [context.Process(target=consume, name=f"{label}-c{i}", daemon=True,
                               args=(kind, target.bootstrap, group, f"{label}-c{i}", go, stop, counted, args.records,
                                     results))
               for i in range(args.consumers)]
    for worker in workers:
        worker.start()
    time.sleep(args.start_s)  # the processes import confluent_kafka and make their consumer
    go.set()
    started = now()
    try:
        wait_until(lambda: stop.is_set() or not any(w.is_alive() for w in workers), args.timeout_s,
                   f"{label}: {args.records} records read")
    except TimeoutError:
        info(f"{label}: only {counted.value} of {args.records} records after {args.timeout_s:.0f} s")
        raise
    finally:
        stop.set()
        each = [results.get(timeout=60) for _ in workers]
        for worker in workers:
            worker.join(30)
    failures = [f"{e['name']}: {e['failure']}" for e in each if e["failure"]]
    if counted.value < args.records:
        raise SystemExit(f"{label}: {counted.value} of {args.records} records; {failures}")
    first = min(e["first"] for e in each if e["first"] is not None)
    end = max(e["done_at"] for e in each if e["done_at"] is not None)
    span = end - first
    return {"target": target.name, "kind": kind, "label": label, "group": group, "records": counted.value,
            "records_per_s": round(counted.value / span, 1), "span_s": round(span, 3),
            "join_s": round(first - started, 3),
            "per_consumer": sorted(e["records"] for e in each), "failures": failures}


def run_round(target: Target, args: argparse.Namespace, label: str) -> dict[str, Any]:
    figures = {kind: run_group(target, kind, args, f"{label}-{kind}") for kind in args.kinds}
    result: dict[str, Any] = {"target": target.name, "label": label, **figures}
    if "share" in figures and "classic" in figures:
        result["share_over_classic"] = round(figures["share"]["records_per_s"] / figures["classic"]["records_per_s"], 3)
    return result


# ---------------------------------------------------------------------- brokers and the topic
def _admin(bootstrap: str) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap})


def set_earliest(bootstrap: str, group: str) -> None:
    """share.auto.offset.reset=earliest for ``group`` (before it has members): the topic was filled
    before the group's share partitions start, and their default start is the end (latest)."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
    admin = _admin(bootstrap)  # kept until the answer: a freed handle fails its futures
    for future in admin.incremental_alter_configs([resource], request_timeout=30).values():
        future.result(30)


def fill_topic(bootstrap: str, args: argparse.Namespace) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import NewTopic

    admin = _admin(bootstrap)
    admin.create_topics([NewTopic(TOPIC, args.partitions, 1)], request_timeout=60)[TOPIC].result(60)

    def led() -> bool:
        topic = admin.list_topics(TOPIC, timeout=5).topics.get(TOPIC)
        return topic is not None and len(topic.partitions) == args.partitions and all(
            p.leader >= 0 for p in topic.partitions.values())

    wait_until(led, 60, f"{args.partitions} partitions of {TOPIC} led on {bootstrap}", interval=0.1)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 10, "acks": "all"})
    value = b"x" * args.record_bytes
    failures: list[str] = []
    for i in range(args.records):
        while True:
            try:
                producer.produce(TOPIC, value, partition=i % args.partitions,
                                 on_delivery=lambda err, _m: failures.append(str(err)) if err else None)
                break
            except BufferError:
                producer.poll(0.05)
    if producer.flush(120) != 0 or failures:
        raise SystemExit(f"the topic was not filled on {bootstrap}: {failures[:3]}")


def described_settings(bootstrap: str) -> dict[str, str]:
    from confluent_kafka.admin import ConfigResource

    admin = _admin(bootstrap)
    (node,) = admin.list_topics(timeout=10).brokers
    resource = ConfigResource(ConfigResource.Type.BROKER, str(node))
    described = admin.describe_configs([resource], request_timeout=10)[resource].result(15)
    return {name: str(entry.value) for name, entry in described.items()
            if name.startswith("group.share.") and "max" not in name and "min" not in name}


def start_castle(args: argparse.Namespace, out_dir: str) -> tuple[OwnBroker, Target]:
    own = OwnBroker(tempfile.mkdtemp(prefix="castle-", dir=out_dir), parse_key_values(args.castle_override,
                                                                                      "--castle-override"))
    try:
        own.wait_ready()
    except BaseException:
        own.stop()
        raise
    info(f"started castle serve (pid {own.pid}) on {own.bootstrap}")
    return own, Target("castle", own.bootstrap, described_settings(own.bootstrap))


def start_kafka(args: argparse.Namespace, out_dir: str) -> tuple[KafkaPeer, Target]:
    log = os.path.join(out_dir, f"kafka-{args.kafka_version}.log")
    info(f"starting Kafka {args.kafka_version}; its log: {log}")
    peer = KafkaPeer(log, args.kafka_version, "kraft", args.partitions,
                     parse_key_values(args.kafka_override, "--kafka-override"), base_dir=out_dir)
    try:
        peer.wait_ready()
    except BaseException:
        peer.stop()
        raise
    info(f"started Kafka {args.kafka_version} (pid {peer.pid}) on {peer.bootstrap}")
    return peer, Target(f"kafka-{args.kafka_version}", peer.bootstrap, described_settings(peer.bootstrap))


# ---------------------------------------------------------------------- the run
def summarize(results: list[dict[str, Any]], kinds: list[str]) -> dict[str, Any]:
    summary: dict[str, Any] = {}
    for result in results:
        if result["warmup"]:
            continue
        entry = summary.setdefault(result["target"], {})
        for kind in kinds:
            entry.setdefault(f"{kind}_records_per_s_each", []).append(result[kind]["records_per_s"])
        if "share_over_classic" in result:
            entry.setdefault("share_over_classic_each", []).append(result["share_over_classic"])
    for entry in summary.values():
        for name in [n for n in entry if n.endswith("_each")]:
            entry[name.removesuffix("_each") + "_median"] = round(statistics.median(entry[name]), 3)
    return summary


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m loadtest.bench_share_consume", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=200_000, help="records in the topic (default 200000)")
    parser.add_argument("--record-bytes", type=int, default=100, help="bytes of each record's value (default 100)")
    parser.add_argument("--partitions", type=int, default=4, help="partitions of the topic (default 4)")
    parser.add_argument("--consumers", type=int, default=4, help="consumers of each group, one process each (default 4)")
    parser.add_argument("--rounds", type=int, default=2, help="counted rounds per broker (default 2)")
    parser.add_argument("--kind", choices=KINDS, action="append", default=None,
                        help="a kind of group to measure (repeatable; default both)")
    parser.add_argument("--compare", choices=("kafka",), default=None, help="also run against Apache Kafka")
    parser.add_argument("--no-castle", action="store_true", help="leave Castle out (with --compare kafka)")
    parser.add_argument("--kafka-version", default=DEFAULT_KAFKA_VERSION)
    parser.add_argument("--warmup-rounds", type=int, default=None,
                        help="uncounted rounds per broker first (default 1 with --compare kafka, else 0)")
    parser.add_argument("--castle-override", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--kafka-override", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--start-s", type=float, default=3.0,
                        help="time the consumer processes get to start before the clock starts (default 3)")
    parser.add_argument("--timeout-s", type=float, default=600.0, help="bound on every wait (default 600)")
    parser.add_argument("--out", default=None, help="folder of the brokers' data and logs and results.json")
    args = parser.parse_args(argv)
    if args.no_castle and args.compare != "kafka":
        parser.error("--no-castle leaves no broker without --compare kafka")
    args.kinds = args.kind or list(KINDS)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    out_dir = args.out or tempfile.mkdtemp(prefix="bench-share-consume-")
    os.makedirs(out_dir, exist_ok=True)
    warmup_rounds = args.warmup_rounds if args.warmup_rounds is not None else (1 if args.compare else 0)
    stops: list[Callable[[], Any]] = []
    targets: list[Target] = []
    results: list[dict[str, Any]] = []
    try:
        if not args.no_castle:
            own, castle = start_castle(args, out_dir)
            stops.append(own.stop)
            targets.append(castle)
        if args.compare == "kafka":
            peer, kafka = start_kafka(args, out_dir)
            stops.append(peer.stop)
            targets.append(kafka)
        for target in targets:
            started = now()
            fill_topic(target.bootstrap, args)
            info(f"{target.name}: {args.records} records of {args.record_bytes} bytes in {now() - started:.1f} s")
        schedule = [(t, f"{t.name}-warmup{n + 1}", True) for n in range(warmup_rounds) for t in targets]
        schedule += [(t, f"{t.name}-r{n + 1}", False) for n in range(args.rounds) for t in targets]
        for target, label, warmup in schedule:
            result = run_round(target, args, label)
            result["warmup"] = warmup
            result["loadavg_after"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
            results.append(result)
            print(json.dumps(result), flush=True)
            info(f"{label}: " + ", ".join(f"{k} {result[k]['records_per_s']:.0f} records/s" for k in args.kinds))
    finally:
        for stop in reversed(stops):
            info(f"a broker exited with {stop()}")
    summary = summarize(results, args.kinds)
    report: dict[str, Any] = {"summary": summary, "settings": {t.name: t.settings for t in targets},
                              "records": args.records, "record_bytes": args.record_bytes,
                              "partitions": args.partitions, "consumers": args.consumers, "rounds": args.rounds,
                              "warmup_rounds": warmup_rounds, "kinds": args.kinds,
                              "machine": machine_info(), "code": git_state(),
                              "command": " ".join(["python -m loadtest.bench_share_consume",
                                                   *(argv if argv is not None else sys.argv[1:])])}
    if len(targets) == 2:
        first, other = (summary.get(t.name, {}) for t in targets)
        report["castle_over_kafka"] = {name.removesuffix("_median"): round(value / other[name], 3)
                                       for name, value in first.items()
                                       if name.endswith("_median") and other.get(name)}
    with open(os.path.join(out_dir, "results.json"), "w") as handle:
        json.dump({**report, "rounds_each": results}, handle, indent=2)
    print(json.dumps(report), flush=True)
    info(f"results in {os.path.join(out_dir, 'results.json')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
