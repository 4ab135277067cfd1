"""How long a consumer group takes to give every member a stable assignment, under the
classic protocol (JoinGroup/SyncGroup) and the consumer protocol (KIP-848:
ConsumerGroupHeartbeat), against Castle and, with ``--compare kafka``, Apache Kafka 4.4 on
the same machine.

One broker (Castle: one ``castle serve``, local coordination; Kafka: KafkaPeer, one KRaft
node), a topic of ``--partitions`` partitions. Each round, for each protocol, in a new group:

* ``join_all_s``: ``--members`` confluent-kafka consumers (one thread each, in this process,
  only polling) subscribe at once; the time from the first subscribe until the group is
  stable as the members see it (their ``assignment()``): every partition held by exactly one
  member, every member holding some, no member holding more than one partition more than
  another (what every assignor of both brokers gives one topic);
* ``join_one_s``: once stable (and quiet for ``--settle-s``), one more member subscribes;
  the time until the group is stable again, the newcomer holding some partitions;
* ``empty_s``: every member closes (each sends its leave); the time until the broker
  describes the group with no member (the admin API: DescribeGroups or
  ConsumerGroupDescribe).

Per-member timings say where the time goes: when each member first held partitions, when the
first old member gave some up after the newcomer came. The brokers run with their own
defaults for the group settings unless an option sets them on both: ``--heartbeat-interval-ms``
(group.consumer.heartbeat.interval.ms; Kafka also gets group.consumer.min.heartbeat.interval.ms
no higher), ``--initial-rebalance-delay-ms`` (group.initial.rebalance.delay.ms); the JSON
reports the values each broker ran with, as it describes them (DescribeConfigs).

With ``--compare kafka`` both brokers run for the whole invocation; one uncounted warm-up
round per broker (both protocols) comes first, then the brokers alternate round by round.
Progress goes to stderr, one JSON line per round and the summary (medians) to stdout::

    python -m loadtest.bench_group_join --rounds 2
    python -m loadtest.bench_group_join --rounds 2 --compare kafka --out bench-results/group-join
    python -m loadtest.bench_group_join --members 5 --partitions 10 --heartbeat-interval-ms 500
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from loadtest.brokers import OwnBroker, wait_until
from loadtest.common import info, parse_key_values
from loadtest.kafka_peer import DEFAULT_VERSION as DEFAULT_KAFKA_VERSION
from loadtest.kafka_peer import KafkaPeer
from loadtest.machine import git_state, machine_info

TOPIC = "bench-group-join"
PROTOCOLS = ("classic", "consumer")
# The group settings reported per broker, as it describes them (DescribeConfigs); a broker
# reports those it has (Castle has no minimum heartbeat interval, no assignment interval).
GROUP_SETTINGS = ("group.initial.rebalance.delay.ms", "group.consumer.heartbeat.interval.ms",
                  "group.consumer.min.heartbeat.interval.ms", "group.consumer.session.timeout.ms",
                  "group.consumer.assignors", "group.consumer.assignment.interval.ms",
                  "group.min.session.timeout.ms", "offsets.topic.num.partitions")
now = time.monotonic


# ---------------------------------------------------------------------- members
class Member(threading.Thread):
    """One consumer in its own thread: subscribes when started, then only polls (the topic
    is empty), recording every change of its assignment as (seconds since ``t0``, partitions)."""

    def __init__(self, name: str, bootstrap: str, group: str, protocol: str, t0_box: list[float],
                 poll_s: float, extra: dict[str, str]) -> None:
        super().__init__(name=name, daemon=True)
        from confluent_kafka import Consumer

        config: dict[str, Any] = {"bootstrap.servers": bootstrap, "group.id": group, "client.id": name,
                                  "enable.auto.commit": False, "auto.offset.reset": "earliest",
                                  "group.protocol": protocol}
        config.update(extra)
        self.consumer = Consumer(config)
        self.t0_box = t0_box  # [t0]: the round's clock, set before any member subscribes
        self.poll_s = poll_s
        self.subscribed_at: float | None = None
        self.changes: list[tuple[float, frozenset[int]]] = []
        self.held: frozenset[int] = frozenset()
        self.stopping = threading.Event()
        self.closed_at: float | None = None
        self.failure: BaseException | None = None
        self.lock = threading.Lock()

    def run(self) -> None:
        try:
            self.subscribed_at = now() - self.t0_box[0]
            self.consumer.subscribe([TOPIC])
            while not self.stopping.is_set():
                self.consumer.poll(self.poll_s)
                held = frozenset(p.partition for p in self.consumer.assignment())
                if held != self.held:
                    with self.lock:
                        self.held = held
                        self.changes.append((now() - self.t0_box[0], held))
        except BaseException as exc:  # reported by the main thread
            self.failure = exc
        finally:
            self.consumer.close()  # the leave: LeaveGroup, or a heartbeat with epoch -1
            self.closed_at = now() - self.t0_box[0]

    def snapshot(self) -> frozenset[int]:
        with self.lock:
            return self.held

    def first_held_s(self, after: float = 0.0) -> float | None:
        with self.lock:
            return next((at for at, held in self.changes if at >= after and held), None)

    def first_change_s(self, after: float) -> float | None:
        with self.lock:
            return next((at for at, _ in self.changes if at >= after), None)


def stable(held: list[frozenset[int]], partitions: int) -> bool:
    """Every partition held by exactly one member, every member holding some, balanced."""
    counts = [len(h) for h in held]
    if min(counts) == 0 or max(counts) - min(counts) > 1 or sum(counts) != partitions:
        return False
    union: set[int] = set().union(*held)
    return union == set(range(partitions))  # with the sum, also: no partition held twice


def _wait_stable(members: list[Member], partitions: int, timeout: float, what: str) -> float:
    """Seconds (on the round's clock) when the members' assignments were last changed
    before the group became stable: the moment the last member saw its final assignment."""
    def check() -> bool:
        failed = [m for m in members if m.failure is not None]
        if failed:
            raise SystemExit(f"{failed[0].name} failed: {failed[0].failure!r}")
        return stable([m.snapshot() for m in members], partitions)

    wait_until(check, timeout, what, interval=0.02)
    return max(m.changes[-1][0] for m in members)


def _quiet(members: list[Member], since: float) -> bool:
    return all(m.changes[-1][0] <= since for m in members)


# ---------------------------------------------------------------------- one round
@dataclass
class Target:
    name: str
    bootstrap: str
    settings: dict[str, str] = field(default_factory=dict)


def _admin(bootstrap: str) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap})


def _group_members(admin: Any, group: str) -> int | None:
    """Members the broker describes in the group (None: it could not say)."""
    from confluent_kafka import KafkaException

    try:
        description = admin.describe_consumer_groups([group], request_timeout=5)[group].result(10)
    except KafkaException:
        return None
    return len(description.members)


def run_round(target: Target, protocol: str, args: argparse.Namespace, label: str) -> dict[str, Any]:
    group = f"bench-join-{protocol}-{uuid.uuid4().hex[:8]}"
    extra: dict[str, str] = {}
    if protocol == "classic" and args.client_heartbeat_interval_ms:
        extra["heartbeat.interval.ms"] = str(args.client_heartbeat_interval_ms)
    clock = [0.0]
    poll_s = args.poll_ms / 1000

    def member(number: int) -> Member:
        return Member(f"{label}-m{number}", target.bootstrap, group, protocol, clock, poll_s, extra)

    # Made before the clock starts: a client's construction is not the group's join.
    members = [member(i) for i in range(args.members)]
    newcomer = member(args.members)
    everyone = [*members, newcomer]
    admin = _admin(target.bootstrap)
    try:
        clock[0] = now()
        for m in members:
            m.start()
        join_all = _wait_stable(members, args.partitions, args.timeout_s, f"{label}: {args.members} members stable")
        first_held = [m.first_held_s() for m in members]
        # Quiet for --settle-s: a group still moving would blur the newcomer's figure.
        wait_until(lambda: now() - clock[0] - max(m.changes[-1][0] for m in members) >= args.settle_s,
                   args.timeout_s, f"{label}: the group quiet for {args.settle_s} s", interval=0.05)
        changed_after_stable = not _quiet(members, join_all)
        joined_at = now() - clock[0]
        newcomer.start()
        stable_again = _wait_stable(everyone, args.partitions, args.timeout_s,
                                    f"{label}: {args.members + 1} members stable with the newcomer")
        join_one = stable_again - joined_at
        old_moved = [at - joined_at for m in members if (at := m.first_change_s(joined_at)) is not None]
        newcomer_first = newcomer.first_held_s(joined_at)
        newcomer_held = sorted(newcomer.snapshot())
        close_from = now() - clock[0]
    finally:
        for m in everyone:
            m.stopping.set()
        for m in everyone:
            if m.ident is not None:
                m.join(args.timeout_s)
            else:
                m.consumer.close()  # never started
    closed = max(m.closed_at or 0.0 for m in everyone) - close_from
    try:
        wait_until(lambda: _group_members(admin, group) == 0, args.timeout_s, f"{label}: the group empty",
                   interval=0.05)
    except TimeoutError:
        info(f"{label}: the group still has members {args.timeout_s} s after the close")
        raise
    empty = now() - clock[0] - close_from
    result = {"target": target.name, "protocol": protocol, "label": label, "group": group,
              "members": args.members, "partitions": args.partitions,
              "join_all_s": round(join_all, 3), "join_one_s": round(join_one, 3), "empty_s": round(empty, 3),
              "close_s": round(closed, 3),
              "first_held_s": _spread([s for s in first_held if s is not None]),
              "assignment_changes": sum(len(m.changes) for m in members),
              "changed_after_stable": changed_after_stable,
              "newcomer_first_held_s": round(newcomer_first - joined_at, 3) if newcomer_first is not None else None,
              "first_old_member_moved_s": round(min(old_moved), 3) if old_moved else None,
              "old_members_moved": len(old_moved), "newcomer_partitions": newcomer_held,
              "partitions_held": sorted(p for m in everyone for p in (m.changes[-1][1] if m.changes else ())),
              # Per member: (seconds on the round's clock, partitions held) at each change; results.json only.
              "timeline": {m.name: [[round(at, 3), len(held)] for at, held in m.changes] for m in everyone}}
    return result


def _spread(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    return {"min": round(min(values), 3), "median": round(statistics.median(values), 3), "max": round(max(values), 3)}


# ---------------------------------------------------------------------- brokers
def _heartbeat_overrides(args: argparse.Namespace, kafka: bool) -> dict[str, str]:
    overrides: dict[str, str] = {}
    if args.heartbeat_interval_ms is not None:
        overrides["group.consumer.heartbeat.interval.ms"] = str(args.heartbeat_interval_ms)
        if kafka and args.heartbeat_interval_ms < 5000:  # Kafka refuses an interval below its minimum
            overrides["group.consumer.min.heartbeat.interval.ms"] = str(args.heartbeat_interval_ms)
    if args.initial_rebalance_delay_ms is not None:
        overrides["group.initial.rebalance.delay.ms"] = str(args.initial_rebalance_delay_ms)
    return overrides


def start_castle(args: argparse.Namespace, out_dir: str) -> tuple[OwnBroker, Target]:
    overrides = _heartbeat_overrides(args, kafka=False)
    overrides.update(parse_key_values(args.castle_override, "--castle-override"))
    own = OwnBroker(tempfile.mkdtemp(prefix="castle-", dir=out_dir), overrides)
    try:
        own.wait_ready()
    except BaseException:
        own.stop()
        raise
    settings = described_settings(own.bootstrap, GROUP_SETTINGS)
    info(f"started castle serve (pid {own.pid}) on {own.bootstrap}; {settings}")
    return own, Target("castle", own.bootstrap, settings)


def start_kafka(args: argparse.Namespace, out_dir: str) -> tuple[KafkaPeer, Target]:
    overrides = _heartbeat_overrides(args, kafka=True)
    overrides.update(parse_key_values(args.kafka_override, "--kafka-override"))
    log = os.path.join(out_dir, f"kafka-{args.kafka_version}.log")
    info(f"starting Kafka {args.kafka_version}; its log: {log}")
    peer = KafkaPeer(log, args.kafka_version, "kraft", args.partitions, overrides, base_dir=out_dir)
    try:
        peer.wait_ready()
    except BaseException:
        peer.stop()
        raise
    settings = described_settings(peer.bootstrap, GROUP_SETTINGS)
    info(f"started Kafka {args.kafka_version} (pid {peer.pid}) on {peer.bootstrap}; {settings}")
    return peer, Target(f"kafka-{args.kafka_version}", peer.bootstrap, settings)


def described_settings(bootstrap: str, names: tuple[str, ...]) -> dict[str, str]:
    """The values the broker says it runs with (DescribeConfigs of the broker), of those it has."""
    from confluent_kafka.admin import ConfigResource

    admin = _admin(bootstrap)
    (node,) = admin.list_topics(timeout=10).brokers  # one broker
    resource = ConfigResource(ConfigResource.Type.BROKER, str(node))
    described = admin.describe_configs([resource], request_timeout=10)[resource].result(15)
    return {name: str(described[name].value) for name in names if name in described}


def create_topic(bootstrap: str, partitions: int) -> None:
    from confluent_kafka.admin import NewTopic

    admin = _admin(bootstrap)
    admin.create_topics([NewTopic(TOPIC, partitions, 1)], request_timeout=60)[TOPIC].result(60)

    def led() -> bool:
        topic = admin.list_topics(TOPIC, timeout=5).topics.get(TOPIC)
        return topic is not None and len(topic.partitions) == partitions and all(
            p.leader >= 0 for p in topic.partitions.values())

    wait_until(led, 60, f"{partitions} partitions of {TOPIC} led on {bootstrap}", interval=0.1)


# ---------------------------------------------------------------------- the run
def schedule(targets: list[Target], rounds: int, warmup_rounds: int, protocols: list[str]
             ) -> Iterator[tuple[Target, str, str, bool]]:
    """Warm-up rounds first (every broker, every protocol), then the counted rounds, the
    brokers taking turns within each round."""
    for number in range(warmup_rounds):
        for target in targets:
            for protocol in protocols:
                yield target, protocol, f"{target.name}-{protocol}-warmup{number + 1}", True
    for number in range(rounds):
        for protocol in protocols:
            for target in targets:
                yield target, protocol, f"{target.name}-{protocol}-r{number + 1}", False


def summarize(results: list[dict[str, Any]], figures: tuple[str, ...] = ("join_all_s", "join_one_s", "empty_s")
              ) -> dict[str, Any]:
    summary: dict[str, Any] = {}
    for result in results:
        if result["warmup"]:
            continue
        entry = summary.setdefault(result["target"], {}).setdefault(result["protocol"], {"rounds": 0})
        entry["rounds"] += 1
        for figure in figures:
            entry.setdefault(f"{figure}_each", []).append(result[figure])
    for by_protocol in summary.values():
        for entry in by_protocol.values():
            for figure in figures:
                entry[f"{figure}_median"] = round(statistics.median(entry[f"{figure}_each"]), 3)
    return summary


def ratios(summary: dict[str, Any], first: str, other: str) -> dict[str, dict[str, float]]:
    """first's median over other's, per protocol and figure (below 1: first is faster)."""
    out: dict[str, dict[str, float]] = {}
    for protocol, entry in summary.get(first, {}).items():
        theirs = summary.get(other, {}).get(protocol)
        if not theirs:
            continue
        out[protocol] = {name.removesuffix("_median"): round(value / theirs[name], 3)
                         for name, value in entry.items() if name.endswith("_median") and theirs[name] > 0}
    return out


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m loadtest.bench_group_join", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--members", type=int, default=50, help="members that join at once (default 50)")
    parser.add_argument("--partitions", type=int, default=100, help="partitions of the topic (default 100)")
    parser.add_argument("--rounds", type=int, default=2, help="counted rounds per broker and protocol (default 2)")
    parser.add_argument("--protocol", choices=PROTOCOLS, action="append", default=None,
                        help="a group protocol to measure (repeatable; default both)")
    parser.add_argument("--compare", choices=("kafka",), default=None, help="also run against Apache Kafka")
    parser.add_argument("--kafka-version", default=DEFAULT_KAFKA_VERSION)
    parser.add_argument("--warmup-rounds", type=int, default=None,
                        help="uncounted rounds per broker first (default 1 with --compare kafka, else 0)")
    parser.add_argument("--heartbeat-interval-ms", type=int, default=None,
                        help="group.consumer.heartbeat.interval.ms on both brokers (default: their own, 5000)")
    parser.add_argument("--initial-rebalance-delay-ms", type=int, default=None,
                        help="group.initial.rebalance.delay.ms on both brokers (default: their own, 3000)")
    parser.add_argument("--client-heartbeat-interval-ms", type=int, default=None,
                        help="the classic members' heartbeat.interval.ms (default: librdkafka's, 3000)")
    parser.add_argument("--castle-override", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--kafka-override", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--poll-ms", type=int, default=100, help="each member's poll timeout (default 100)")
    parser.add_argument("--settle-s", type=float, default=None,
                        help="quiet time before the newcomer joins (default: one heartbeat interval + 1 s)")
    parser.add_argument("--timeout-s", type=float, default=180.0, help="bound on every wait (default 180)")
    parser.add_argument("--out", default=None, help="folder of the brokers' data and logs and results.json")
    args = parser.parse_args(argv)
    if args.partitions < args.members + 1:
        parser.error("--partitions must be at least --members + 1: every member, the newcomer too, holds some")
    args.protocols = args.protocol or list(PROTOCOLS)
    if args.settle_s is None:
        args.settle_s = (args.heartbeat_interval_ms or 5000) / 1000 + 1
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    out_dir = args.out or tempfile.mkdtemp(prefix="bench-group-join-")
    os.makedirs(out_dir, exist_ok=True)
    warmup_rounds = args.warmup_rounds if args.warmup_rounds is not None else (1 if args.compare else 0)
    stops: list[Callable[[], Any]] = []
    targets: list[Target] = []
    results: list[dict[str, Any]] = []
    load: list[str] = []
    try:
        own, castle = start_castle(args, out_dir)
        stops.append(own.stop)
        targets.append(castle)
        if args.compare == "kafka":
            peer, kafka = start_kafka(args, out_dir)
            stops.append(peer.stop)
            targets.append(kafka)
        for target in targets:
            create_topic(target.bootstrap, args.partitions)
        for target, protocol, label, warmup in schedule(targets, args.rounds, warmup_rounds, args.protocols):
            load.append(" ".join(f"{x:.2f}" for x in os.getloadavg()))
            result = run_round(target, protocol, args, label)
            result["warmup"] = warmup
            result["loadavg_before"] = load[-1]
            results.append(result)
            print(json.dumps({k: v for k, v in result.items() if k != "timeline"}), flush=True)
            info(f"{label}: {args.members} members stable {result['join_all_s']} s after the first subscribe; "
                 f"one more {result['join_one_s']} s; empty {result['empty_s']} s after the close")
    finally:
        for stop in reversed(stops):
            code = stop()
            info(f"a broker exited with {code}")
    summary = summarize(results)
    report = {"summary": summary, "settings": {t.name: t.settings for t in targets},
              "members": args.members, "partitions": args.partitions, "rounds": args.rounds,
              "warmup_rounds": warmup_rounds, "protocols": args.protocols,
              "heartbeat_interval_ms": args.heartbeat_interval_ms,
              "initial_rebalance_delay_ms": args.initial_rebalance_delay_ms,
              "client_heartbeat_interval_ms": args.client_heartbeat_interval_ms,
              "machine": machine_info(), "code": git_state(),
              "command": " ".join(["python -m loadtest.bench_group_join", *(argv if argv is not None else sys.argv[1:])])}
    if len(targets) == 2:
        report["ratios"] = ratios(summary, targets[0].name, targets[1].name)
    with open(os.path.join(out_dir, "results.json"), "w") as handle:
        json.dump({**report, "rounds_each": results}, handle, indent=2)
    print(json.dumps(report), flush=True)
    info(f"results in {os.path.join(out_dir, 'results.json')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
