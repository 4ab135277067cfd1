"""How long a consumer group cannot commit when its coordinator goes away.

Two Castle brokers on one ZooKeeper (``--zookeeper host:port``, a chroot of their own),
a topic of four partitions, one confluent-kafka consumer in a group that consumes and
commits synchronously every 50 ms. Then the elected coordinator is killed with SIGKILL:

* ``in-place``: only its coordinator process; the supervisor starts another, which
  resumes the same ZooKeeper session and wins again with a new epoch;
* ``broker``: the whole broker (supervisor, workers, coordinator); the other broker is
  elected once the dead one's session times out (``zookeeper.session.timeout.ms``).

With ``--members N`` (in-place only), N consumers form the group (session.timeout.ms
``--consumer-session-timeout-ms``, 6000 by default) and each commits its positions every 50
ms; a round reports when every member committed again after the kill (the group commits
again), the first member's commit, librdkafka's session time-outs and any rebalance.

It reports, per round as JSON, the time from the kill to the first commit that succeeds
afterwards (``in-place``), or to the surviving broker's election
(``broker``, read in ZooKeeper: without replication a commit must then wait for the broker holding the
group's ``__consumer_offsets`` partition, which may be the dead one). Run (ZooKeeper must be running; Debian: apt-get install zookeeper)::

    python -m loadtest.bench_groups --zookeeper 127.0.0.1:2181 --mode in-place --rounds 3
    python -m loadtest.bench_groups --zookeeper 127.0.0.1:2181 --mode broker --rounds 1
    python -m loadtest.bench_groups --zookeeper 127.0.0.1:2181 --members 3 --rounds 3
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import tempfile
import threading
import time
import uuid
from typing import Any

from loadtest.brokers import OwnBroker, process_role, wait_until
from loadtest.common import info

TOPIC = "bench-groups"
GROUP = "bench-groups"


def _coordinator_of(brokers: dict[int, OwnBroker]) -> int:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": ",".join(b.bootstrap for b in brokers.values())})
    description = admin.describe_consumer_groups([GROUP], request_timeout=5)[GROUP].result(10)
    return int(description.coordinator.id)


def _kill(broker: OwnBroker, mode: str) -> None:
    if mode == "broker":
        for pid in [broker.pid, *broker.children()]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return
    (coordinator,) = [p for p in broker.children() if process_role(p, broker.pid) == "coordinator"]
    os.kill(coordinator, signal.SIGKILL)


def _round(brokers: dict[int, OwnBroker], consumer: Any, zookeeper: Any, mode: str, timeout: float) -> float:
    """Seconds from the kill to the first successful synchronous commit (in-place), or to
    the other broker's election (broker: read in ZooKeeper)."""
    from confluent_kafka import KafkaException

    elected = _coordinator_of(brokers)
    victim = brokers[elected]
    killed_at = time.monotonic()
    _kill(victim, mode)
    if mode == "broker":
        from kazoo.exceptions import NoNodeError

        while time.monotonic() - killed_at < timeout:
            try:
                if json.loads(zookeeper.get("/consumers/coordinator")[0])["brokerid"] != elected:
                    return time.monotonic() - killed_at
            except NoNodeError:
                pass  # the dead broker's session ended; nobody elected yet
            time.sleep(0.05)
        raise SystemExit(f"no other coordinator within {timeout} s of the kill")
    while time.monotonic() - killed_at < timeout:
        consumer.poll(0.05)
        try:
            consumer.commit(asynchronous=False)
            return time.monotonic() - killed_at
        except KafkaException as exc:
            if exc.args[0].code() == -191:  # _NO_OFFSET: nothing consumed since the last commit
                return time.monotonic() - killed_at
            time.sleep(0.05)
    raise SystemExit(f"no commit succeeded within {timeout} s of the kill")


# ---------------------------------------------------------------------- --members N
class Member(threading.Thread):
    """One consumer of a group of several, in its own thread: polls, and commits its
    assigned partitions' positions synchronously every 50 ms (explicit offsets, so that
    every commit is an OffsetCommit request). Records, after ``watch_from``, each commit's
    outcome, the assignment changes and librdkafka's session time-outs."""

    def __init__(self, name: str, bootstrap: str, session_timeout_ms: int) -> None:
        super().__init__(name=name, daemon=True)
        from confluent_kafka import Consumer

        self.watch_from = float("inf")
        self.first_commit: float | None = None  # after watch_from
        self.errors: dict[str, int] = {}  # commit errors after watch_from, by name
        self.rebalances: list[str] = []  # assignment callbacks after watch_from
        self.session_timeouts = 0
        self.assigned = threading.Event()
        self.stopping = threading.Event()
        self.failure: BaseException | None = None
        log = logging.getLogger(f"rdkafka.{name}")
        log.addHandler(_SessionTimeouts(self))
        log.propagate = False
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False,
                                  "auto.offset.reset": "earliest", "session.timeout.ms": session_timeout_ms,
                                  "client.id": name}, logger=log)
        self.consumer.subscribe([TOPIC], on_assign=self._on_assign, on_revoke=self._on_revoke, on_lost=self._on_lost)

    def _note(self, what: str) -> None:
        if time.monotonic() >= self.watch_from:
            self.rebalances.append(f"{what} at {time.monotonic() - self.watch_from:.2f} s")

    def _on_assign(self, _consumer: Any, partitions: list[Any]) -> None:
        self._note(f"assigned {sorted(p.partition for p in partitions)}")
        if partitions:
            self.assigned.set()

    def _on_revoke(self, _consumer: Any, _partitions: list[Any]) -> None:
        self.assigned.clear()
        self._note("revoked")

    def _on_lost(self, _consumer: Any, _partitions: list[Any]) -> None:
        self.assigned.clear()
        self._note("lost")

    def run(self) -> None:
        from confluent_kafka import KafkaException, TopicPartition

        try:
            while not self.stopping.is_set():
                self.consumer.poll(0.05)
                assignment = self.consumer.assignment()
                if not assignment:
                    continue
                offsets = [TopicPartition(TOPIC, p.partition, max(p.offset, 0)) for p in self.consumer.position(assignment)]
                sent_at = time.monotonic()
                try:
                    self.consumer.commit(offsets=offsets, asynchronous=False)
                except KafkaException as exc:
                    if sent_at >= self.watch_from:
                        name = exc.args[0].name()
                        self.errors[name] = self.errors.get(name, 0) + 1
                    time.sleep(0.05)
                    continue
                if sent_at >= self.watch_from and self.first_commit is None:
                    self.first_commit = time.monotonic() - self.watch_from
                time.sleep(0.05)
        except BaseException as exc:  # reported by the main thread
            self.failure = exc
        finally:
            self.consumer.close()


class _SessionTimeouts(logging.Handler):
    """Counts librdkafka's "Consumer group session timed out" (a member that gives up its
    membership and rejoins) after the kill."""

    def __init__(self, member: Member) -> None:
        super().__init__()
        self.member = member

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if "session timed out" in message and time.monotonic() >= self.member.watch_from:
            self.member.session_timeouts += 1
            info(f"{self.member.name}: {message[:400]}")


def _group_round(brokers: dict[int, OwnBroker], members: list[Member], timeout: float) -> dict[str, Any]:
    """Kill the elected coordinator process; the time until each member commits again."""
    elected = _coordinator_of(brokers)
    killed_at = time.monotonic()
    for member in members:
        member.watch_from = killed_at
    _kill(brokers[elected], "in-place")
    deadline = killed_at + timeout
    while time.monotonic() < deadline and any(m.first_commit is None for m in members):
        time.sleep(0.05)
    waits = [m.first_commit for m in members]
    if any(w is None for w in waits):
        raise SystemExit(f"not every member committed within {timeout} s of the kill: {waits}")
    time.sleep(1)  # assignment changes that follow the first commits
    seconds = [w for w in waits if w is not None]
    return {"coordinator": elected, "group_commits_again_s": round(max(seconds), 3),
            "first_member_commits_s": round(min(seconds), 3), "member_commits_s": [round(s, 3) for s in seconds],
            "session_timeouts": sum(m.session_timeouts for m in members),
            "rebalances": {m.name: m.rebalances for m in members if m.rebalances},
            "commit_errors": {m.name: m.errors for m in members if m.errors}}


def _start_brokers(args: argparse.Namespace, chroot: str, brokers: dict[int, OwnBroker]) -> str:
    """Two brokers on ``chroot`` of the ZooKeeper, put in ``brokers`` as they start (so the
    caller stops whatever started), both registered, and the bench topic: their bootstrap."""
    from confluent_kafka.admin import AdminClient, NewTopic

    base = tempfile.mkdtemp(prefix="castle-bench-groups-")
    for node_id in (1, 2):
        os.makedirs(os.path.join(base, f"b{node_id}"))
        brokers[node_id] = OwnBroker(os.path.join(base, f"b{node_id}"), {
            "node.id": str(node_id), "zookeeper.connect": args.zookeeper + chroot,
            "zookeeper.session.timeout.ms": str(args.session_timeout_ms), "workers": "1",
            "group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "4"})
    for broker in brokers.values():
        broker.wait_ready()
    bootstrap = ",".join(b.bootstrap for b in brokers.values())
    admin = AdminClient({"bootstrap.servers": bootstrap})
    wait_until(lambda: len(admin.list_topics(timeout=5).brokers) == 2, 30, "both brokers registered")
    admin.create_topics([NewTopic(TOPIC, 4, 1)])[TOPIC].result(30)
    return bootstrap


def _members_main(args: argparse.Namespace) -> int:
    from confluent_kafka import Producer

    chroot = f"/bench-groups-{uuid.uuid4().hex[:8]}"
    brokers: dict[int, OwnBroker] = {}
    members: list[Member] = []
    rounds: list[dict[str, Any]] = []
    try:
        bootstrap = _start_brokers(args, chroot, brokers)
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        for i in range(200):
            producer.produce(TOPIC, value=b"x" * 100, partition=i % 4)
        producer.flush(30)
        members = [Member(f"member-{i}", bootstrap, args.consumer_session_timeout_ms) for i in range(args.members)]
        for member in members:
            member.start()
        for number in range(args.rounds):
            wait_until(lambda: all(m.assigned.is_set() for m in members), 90, f"all {args.members} members assigned")
            time.sleep(args.consumer_session_timeout_ms / 1000)  # a few heartbeats in the stable group
            for member in members:
                # Stop watching first: with the last round's kill time still set, a commit made
                # now would count as this round's, timed from the last kill.
                member.watch_from = float("inf")
                member.first_commit, member.errors, member.rebalances, member.session_timeouts = None, {}, [], 0
            result = _group_round(brokers, members, timeout=args.consumer_session_timeout_ms / 1000 * 4 + 30)
            info(f"round {number + 1}: the group of {args.members} commits again {result['group_commits_again_s']} s "
                 f"after the kill (first member {result['first_member_commits_s']} s); "
                 f"session time-outs {result['session_timeouts']}, rebalances {result['rebalances'] or 'none'}")
            rounds.append(result)
            failed = [m for m in members if m.failure is not None]
            if failed:
                raise SystemExit(f"{failed[0].name} failed: {failed[0].failure!r}")
    finally:
        for member in members:
            member.stopping.set()
        for member in members:
            member.join(30)
        for broker in brokers.values():
            broker.stop()
    json.dump({"mode": "in-place", "members": args.members, "session_timeout_ms": args.session_timeout_ms,
               "consumer_session_timeout_ms": args.consumer_session_timeout_ms, "rounds": rounds}, sys.stdout)
    print()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--zookeeper", required=True, help="host:port of a running ZooKeeper")
    parser.add_argument("--mode", choices=("in-place", "broker"), default="in-place")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--session-timeout-ms", type=int, default=18_000,
                        help="the brokers' ZooKeeper session (Kafka's default: 18000)")
    parser.add_argument("--members", type=int, default=1,
                        help="consumers in the group; more than 1: in-place mode, every member commits")
    parser.add_argument("--consumer-session-timeout-ms", type=int, default=6_000,
                        help="the members' session.timeout.ms with --members (the group minimum, 6000)")
    args = parser.parse_args(argv)
    if args.members > 1:
        if args.mode != "in-place":
            parser.error("--members is for the in-place mode")
        return _members_main(args)
    from confluent_kafka import Consumer, Producer
    from kazoo.client import KazooClient

    chroot = f"/bench-groups-{uuid.uuid4().hex[:8]}"
    zookeeper = KazooClient(hosts=args.zookeeper + chroot)
    brokers: dict[int, OwnBroker] = {}
    results: list[float] = []
    try:
        bootstrap = _start_brokers(args, chroot, brokers)
        zookeeper.start(timeout=30)
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False,
                             "auto.offset.reset": "earliest", "session.timeout.ms": 45_000})
        consumer.subscribe([TOPIC])
        rounds = 1 if args.mode == "broker" else args.rounds
        for number in range(rounds):
            for i in range(200):
                producer.produce(TOPIC, value=b"x" * 100, partition=i % 4)
            producer.flush(30)
            wait_until(lambda: consumer.poll(0.1) is not None and consumer.assignment(), 60, "the group assigned")
            consumer.commit(asynchronous=False)
            seconds = _round(brokers, consumer, zookeeper, args.mode, timeout=args.session_timeout_ms / 1000 * 4 + 30)
            what = "first commit" if args.mode == "in-place" else "the other broker elected"
            info(f"round {number + 1}: {what} {seconds:.2f} s after the kill ({args.mode})")
            results.append(seconds)
            if args.mode == "in-place":
                time.sleep(2)  # the restarted coordinator settles before the next kill
        consumer.close()
    finally:
        for broker in brokers.values():
            broker.stop()
        zookeeper.stop()
        zookeeper.close()
    json.dump({"mode": args.mode, "session_timeout_ms": args.session_timeout_ms, "seconds_after_kill": results},
              sys.stdout)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
