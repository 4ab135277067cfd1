"""How long a consumer group cannot commit when its coordinator goes away.

Two Castle brokers on one ZooKeeper (``--zookeeper host:port``, a chroot of their own),
a topic of four partitions, one confluent-kafka consumer in a group that consumes and
commits synchronously every 50 ms. Then the elected coordinator is killed with SIGKILL:

* ``in-place``: only its coordinator process; the supervisor starts another, which
  resumes the same ZooKeeper session and wins again with a new epoch;
* ``broker``: the whole broker (supervisor, workers, coordinator); the other broker is
  elected once the dead one's session times out (``zookeeper.session.timeout.ms``).

It reports, per round as JSON, the time from the kill to the first commit that succeeds
afterwards (``in-place``), or to the surviving broker's election
(``broker``, read in ZooKeeper: without replication a commit must then wait for the broker holding the
group's ``__consumer_offsets`` partition, which may be the dead one). Run (ZooKeeper must be running; Debian: apt-get install zookeeper)::

    python -m loadtest.bench_groups --zookeeper 127.0.0.1:2181 --mode in-place --rounds 3
    python -m loadtest.bench_groups --zookeeper 127.0.0.1:2181 --mode broker --rounds 1
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tempfile
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--zookeeper", required=True, help="host:port of a running ZooKeeper")
    parser.add_argument("--mode", choices=("in-place", "broker"), default="in-place")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--session-timeout-ms", type=int, default=18_000, help="Kafka's default: 18000")
    args = parser.parse_args(argv)
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic
    from kazoo.client import KazooClient

    chroot = f"/bench-groups-{uuid.uuid4().hex[:8]}"
    zookeeper = KazooClient(hosts=args.zookeeper + chroot)
    base = tempfile.mkdtemp(prefix="castle-bench-groups-")
    brokers: dict[int, OwnBroker] = {}
    results: list[float] = []
    try:
        for node_id in (1, 2):
            os.makedirs(os.path.join(base, f"b{node_id}"))
            brokers[node_id] = OwnBroker(os.path.join(base, f"b{node_id}"), {
                "node.id": str(node_id), "zookeeper.connect": args.zookeeper + chroot,
                "zookeeper.session.timeout.ms": str(args.session_timeout_ms), "workers": "1",
                "group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "4"})
        for broker in brokers.values():
            broker.wait_ready()
        zookeeper.start(timeout=30)
        bootstrap = ",".join(b.bootstrap for b in brokers.values())
        admin = AdminClient({"bootstrap.servers": bootstrap})
        wait_until(lambda: len(admin.list_topics(timeout=5).brokers) == 2, 30, "both brokers registered")
        admin.create_topics([NewTopic(TOPIC, 4, 1)])[TOPIC].result(30)
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
