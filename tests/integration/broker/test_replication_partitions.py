"""Replication under real network partitions (Jepsen's Kafka tests), with network namespaces.

ZooKeeper, three brokers and the clients each run in a network namespace of their own, on
one bridge (tests/integration/netns.py, netns_cluster.py). The faults are cuts of the
network, not of processes: every process keeps running and keeps its ZooKeeper session
until the session times out on the other side.

- a full partition of a partition's leader (its bridge port down): the others elect a new
  leader; healed, the old leader truncates what only it had and rejoins the ISR;
- the leader cut off from ZooKeeper and from its followers, but not from the clients (an
  nftables table in its namespace): Jepsen's Kafka 0.8 scenario, where the old leader kept
  acknowledging writes alone and lost them. With min.insync.replicas=2 and acks=all, no
  acknowledged write may be lost, and after the cut is lifted the three copies agree.

A producer (idempotent, acks=all) and a consumer (assigned, from offset 0) run throughout;
their events feed a History, checked against a final read of every partition.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from typing import Any

import pytest

from tests.integration.broker.test_replication import log_records
from tests.integration.conftest import wait_until
from tests.integration.netns import Network, network  # noqa: F401  (fixture)
from tests.integration.netns_cluster import NetnsBroker, NetnsCluster, feed, netns_cluster  # noqa: F401  (fixture)
from tests.integration.replication_history import History

pytestmark = [pytest.mark.integration, pytest.mark.zookeeper, pytest.mark.replication]

PARTITIONS = 3
SESSION_MS = 4000  # zookeeper.session.timeout.ms: a cut-off broker's session expires after this
SETTINGS = {"zookeeper.session.timeout.ms": SESSION_MS, "replica.lag.time.max.ms": 3000,
            "group.initial.rebalance.delay.ms": 0, "offsets.topic.num.partitions": 4,
            "offsets.topic.replication.factor": 3}


class Workload:
    """The producer and the consumer, in the client namespace, until the block ends; then
    stopped by SIGTERM (the producer flushes, bounded) and their events fed to ``history``."""

    def __init__(self, cluster: NetnsCluster, topic: str, history: History, base_dir: str) -> None:
        self.cluster, self.topic, self.history = cluster, topic, history
        self.out = {role: os.path.join(base_dir, f"{role}.jsonl") for role in ("produce", "consume")}
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self.codes: dict[str, int | None] = {}
        self.counts: dict[str, int] = {}

    def __enter__(self) -> "Workload":
        common = ["--bootstrap", self.cluster.bootstrap(self.cluster.brokers), "--topic", self.topic,
                  "--partitions", str(PARTITIONS), "--seconds", "180"]
        self.processes["produce"] = self.cluster.popen(["produce", *common, "--message-timeout-ms", "20000"],
                                                       self.out["produce"])
        self.processes["consume"] = self.cluster.popen(["consume", *common], self.out["consume"])
        return self

    def __exit__(self, *exc: Any) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for role, process in self.processes.items():
            try:
                self.codes[role] = process.wait(60)  # the producer's flush: message.timeout.ms + 15 s at most
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(10)
                self.codes[role] = None
        for role, path in self.out.items():
            for kind, count in feed(self.history, self.topic, path).items():
                self.counts[kind] = self.counts.get(kind, 0) + count

    def stderr(self, role: str) -> str:
        with open(self.out[role] + ".stderr", errors="replace") as handle:
            return handle.read()[-2000:]


def full_isrs(cluster: NetnsCluster, brokers: list[NetnsBroker], topic: str) -> bool:
    layout = cluster.describe(brokers, topic)
    return len(layout) == PARTITIONS and all(leader > 0 and len(isr) == 3 for leader, _r, isr in layout.values())


def new_leader(cluster: NetnsCluster, others: list[NetnsBroker], topic: str, partition: int, old: int) -> int | None:
    leader = cluster.describe(others, topic).get(partition, (-1, [], []))[0]
    return leader if leader not in (-1, old) else None


def start(cluster: NetnsCluster, topic: str) -> list[NetnsBroker]:
    brokers = cluster.start_brokers(3, SETTINGS)
    cluster.create(topic, PARTITIONS, 3, {"min.insync.replicas": "2"})
    wait_until(lambda: full_isrs(cluster, brokers, topic), 30, "every partition with three in-sync replicas", interval=0.5)
    return brokers


def check_and_converge(cluster: NetnsCluster, topic: str, history: History, load: Workload) -> None:
    """Jepsen's check on the whole history, then every broker's own files hold the same log."""
    assert load.codes["produce"] == 0, f"producer exit {load.codes['produce']}: {load.stderr('produce')}"
    cluster.read_all(topic, PARTITIONS, history)
    report = history.check()
    print(report.summary(), load.counts)  # shown with -rP: how much the run exercised
    assert report.ok, report.summary()
    assert report.acked > 300, report.summary()
    assert load.counts.get("read", 0) > 0, load.counts
    final = cluster.read_all(topic, PARTITIONS)
    for broker in cluster.brokers:
        wait_until(lambda: log_records(broker, topic, PARTITIONS) == final, 30, f"broker {broker.bootstrap}'s copy",
                   interval=0.5)


def test_a_leader_partitioned_away_then_a_leader_cut_off_from_zookeeper_and_followers_lose_no_acked_write(
        netns_cluster: NetnsCluster, network: Network, tmp_path: Any) -> None:  # noqa: F811
    """One run, two faults, Jepsen's checker over the whole history. First the leader of
    partition 0 is fully partitioned away (its namespace's bridge port down): a new leader
    is elected, and after healing the old one truncates and rejoins. Then Jepsen's Kafka
    0.8 case: the leader of partition 1 still reaches its clients but no longer ZooKeeper
    or its followers, and the others elect a new leader meanwhile; acks=all with
    min.insync.replicas=2 must not let it acknowledge a write alone."""
    topic = "partitioned"
    brokers = start(netns_cluster, topic)
    history = History()
    with Workload(netns_cluster, topic, history, str(tmp_path)) as load:
        time.sleep(3)
        for partition, fault in ((0, "isolate"), (1, "cut off")):
            victim_id = netns_cluster.describe(brokers, topic)[partition][0]
            victim = brokers[victim_id - 1]
            others = [b for b in brokers if b is not victim]
            if fault == "isolate":
                network.isolate(victim.member)
            else:
                network.drop(victim.member, ["zk"] + [b.member for b in others])
            try:
                # Its session expires (SESSION_MS), the controller elects a new leader from the ISR.
                wait_until(lambda: new_leader(netns_cluster, others, topic, partition, victim_id), SESSION_MS / 1000 + 30,
                           f"a new leader of {topic}-{partition} while broker {victim_id} is {fault}", interval=0.5)
                time.sleep(3)  # writes go on; clients may still reach a cut-off leader: nothing it acks alone counts
            finally:
                if fault == "isolate":
                    network.heal(victim.member)
                else:
                    network.undrop(victim.member)
            wait_until(lambda: full_isrs(netns_cluster, brokers, topic), 60, f"broker {victim_id} back in every ISR",
                       interval=0.5)
            assert victim.process is not None and victim.process.poll() is None, victim.stderr()
        time.sleep(1)
    check_and_converge(netns_cluster, topic, history, load)
