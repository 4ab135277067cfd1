"""The consumer group protocol (KIP-848) when the group coordinator's broker is partitioned away.

ZooKeeper, three brokers and the clients each in a network namespace of their own
(tests/integration/netns.py, netns_cluster.py); __consumer_offsets and the topic replicated
three times, min.insync.replicas 2. In the client namespace: three librdkafka members with
``group.protocol=consumer`` (tests/integration/group_member.py, committing after every
poll), a producer of numbered records (acks=all) and a watcher (netns_client.py group-watch)
that reads ConsumerGroupDescribe and OffsetFetch from whichever broker FindCoordinator names.

The fault, once the group is stable and reading: the broker hosting the elected coordinator is
cut off for longer than its ZooKeeper session, so another broker's coordinator is elected and
loads the group from the replicated __consumer_offsets; then the cut is healed. The group id is
picked so that the cut-off broker also leads the group's __consumer_offsets partition: the new
coordinator loads from a partition whose leader is elected in the same moment.

- cut off from ZooKeeper and the other brokers only (nftables in its namespace): the clients
  still reach it, and whatever it answers meanwhile is judged too;
- fully partitioned (its bridge port down): clients, brokers and ZooKeeper alike.

Judged over everything the watcher saw and the members read: every acknowledged record read
by the group; committed offsets never moving backwards from one observation to the next; no
partition held by two members in any describe; and after healing, the group Stable with its
three members holding the six partitions.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from typing import Any, Callable

import pytest

from coordination.groups import offsets_schema
from tests.integration.conftest import wait_until
from tests.integration.netns import Network, network  # noqa: F401  (fixture)
from tests.integration.netns_cluster import ROOT, NetnsBroker, NetnsCluster, client_env, netns_cluster  # noqa: F401

pytestmark = [pytest.mark.integration, pytest.mark.zookeeper, pytest.mark.replication, pytest.mark.timeout(240)]

TOPIC, PARTITIONS, MEMBERS = "cgp-cut", 6, 3
OFFSETS_PARTITIONS = 4
SESSION_MS = 4000  # zookeeper.session.timeout.ms: a cut-off broker's session expires after this
SETTINGS = {"zookeeper.session.timeout.ms": SESSION_MS, "replica.lag.time.max.ms": 3000,
            "offsets.topic.num.partitions": OFFSETS_PARTITIONS, "offsets.topic.replication.factor": 3, "min.insync.replicas": 2,
            "group.consumer.heartbeat.interval.ms": 500, "group.consumer.session.timeout.ms": 6000}


def read_lines(path: str) -> list[dict[str, Any]]:
    """The complete JSON lines of a client's output so far (a line cut short by a kill is not one)."""
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.endswith("\n")]


class GroupRun:
    """The producer, the members and the watcher in the client namespace until the block ends;
    each then stopped by SIGTERM (the producer flushes, the members leave), bounded, by PID."""

    def __init__(self, cluster: NetnsCluster, base_dir: str, group: str) -> None:
        self.cluster, self.base_dir, self.group = cluster, base_dir, group
        self.bootstrap = cluster.bootstrap(cluster.brokers)
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self.codes: dict[str, int | None] = {}

    def path(self, name: str) -> str:
        return os.path.join(self.base_dir, f"{name}.jsonl")

    def _start(self, name: str, command: list[str]) -> None:
        with open(self.path(name), "wb") as out, open(self.path(name) + ".stderr", "wb") as err:
            self.processes[name] = self.cluster.net.popen(self.cluster.client, command, stdout=out, stderr=err,
                                                          cwd=ROOT, env=client_env())

    def __enter__(self) -> "GroupRun":
        client = [sys.executable, "-m", "tests.integration.netns_client"]
        self._start("producer", client + ["produce", "--bootstrap", self.bootstrap, "--topic", TOPIC, "--partitions",
                                          str(PARTITIONS), "--seconds", "180", "--interval", "0.02",
                                          "--message-timeout-ms", "20000"])
        for index in range(MEMBERS):
            self._start(f"member{index}", [sys.executable, "-m", "tests.integration.group_member", "confluent-consumer",
                                           self.bootstrap, self.group, TOPIC, "180"])
        self._start("watcher", client + ["group-watch", "--bootstrap", self.bootstrap, "--group", self.group, "--topic",
                                         TOPIC, "--partitions", str(PARTITIONS), "--seconds", "180",
                                         "--interval", "0.25"])
        return self

    def stop(self, name: str, timeout: float = 40) -> int | None:
        process = self.processes[name]
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        try:
            self.codes[name] = process.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)
            self.codes[name] = None
        return self.codes[name]

    def __exit__(self, *exc: Any) -> None:
        for name in self.processes:
            if name not in self.codes:
                self.stop(name)

    def stderr(self, name: str, tail: int = 2000) -> str:
        with open(self.path(name) + ".stderr", errors="replace") as handle:
            return handle.read()[-tail:]

    # ------------------------------------------------------------------ what the clients saw
    def acked(self) -> set[str]:
        return {e["value"] for e in read_lines(self.path("producer")) if e["type"] == "ack"}

    def member_events(self) -> list[dict[str, Any]]:
        return [e for index in range(MEMBERS) for e in read_lines(self.path(f"member{index}"))]

    def read(self) -> set[str]:
        return {e["value"] for e in self.member_events() if e["event"] == "record"}

    def observations(self) -> list[dict[str, Any]]:
        return read_lines(self.path("watcher"))

    def describes(self) -> list[dict[str, Any]]:
        return [e for e in self.observations() if e["type"] == "describe" and e["error"] == 0]

    def stable_and_whole(self, after: float = 0.0) -> dict[str, Any] | None:
        """The latest describe (taken after ``after``) if it shows the group Stable, its three
        members holding the six partitions between them."""
        described = [d for d in self.describes() if d["at"] >= after]
        if not described:
            return None
        last = described[-1]
        held = sorted(p for m in last["members"] for p in m["partitions"])
        whole = last["state"] == "Stable" and len(last["members"]) == MEMBERS and held == list(range(PARTITIONS))
        return last if whole else None


# ---------------------------------------------------------------------- the checker
def partitions_held_twice(described: dict[str, Any]) -> dict[int, list[str]]:
    holders: dict[int, list[str]] = {}
    for member in described["members"]:
        for partition in member["partitions"]:
            holders.setdefault(partition, []).append(f"{member['member_id']}@{member['member_epoch']}")
    return {p: who for p, who in holders.items() if len(who) > 1}


def offsets_moving_back(observations: list[dict[str, Any]]) -> list[str]:
    """Every observation of a partition's committed offset below one seen before it."""
    highest: dict[str, tuple[int, int]] = {}  # partition -> (offset, node that answered it)
    back = []
    for seen in observations:
        if seen["type"] != "committed":
            continue
        for partition, offset in seen["offsets"].items():
            before = highest.get(partition)
            if before is not None and offset < before[0]:
                back.append(f"partition {partition}: {offset} from node {seen['node']} at {seen['at']:.2f} "
                            f"after {before[0]} from node {before[1]}")
            if before is None or offset > before[0]:
                highest[partition] = (offset, seen["node"])
    return back


def check(run: GroupRun) -> None:
    """(2) and (3) over every observation so far."""
    observations = run.observations()
    back = offsets_moving_back(observations)
    assert not back, "committed offsets moved backwards:\n" + "\n".join(back[:20])
    for described in run.describes():
        twice = partitions_held_twice(described)
        assert not twice, f"partitions held by two members at once (node {described['node']}): {twice}\n{described}"


def judged(run: GroupRun, condition: Callable[[], Any]) -> Callable[[], Any]:
    """``condition`` for wait_until, the checker run on everything seen so far before each try."""
    def checked() -> Any:
        check(run)
        return condition()
    return checked


def summary(run: GroupRun) -> str:
    described = run.describes()
    by_node: dict[int, int] = {}
    for d in described:
        by_node[d["node"]] = by_node.get(d["node"], 0) + 1
    events = run.member_events()
    counts: dict[str, int] = {}
    for e in events:
        counts[e["event"]] = counts.get(e["event"], 0) + 1
    epochs = [d["group_epoch"] for d in described]
    # What the watcher got instead of a describe, by node and error code (the fault's bite).
    refused: dict[str, int] = {}
    for seen in run.observations():
        if seen["type"] == "no-coordinator" or (seen["type"] == "describe" and seen["error"] != 0):
            key = "none" if seen["type"] == "no-coordinator" else f"node {seen['node']} error {seen['error']}"
            refused[key] = refused.get(key, 0) + 1
    return (f"acked {len(run.acked())}, read {len(run.read())} distinct; member events {counts}; "
            f"describes by node {by_node}, refused {refused}; group epochs {min(epochs, default=0)}..{max(epochs, default=0)}; "
            f"commit observations {sum(o['type'] == 'committed' for o in run.observations())}")


# ---------------------------------------------------------------------- the cluster
def full_isrs(cluster: NetnsCluster, topic: str, partitions: int) -> bool:
    layout = cluster.describe(cluster.brokers, topic)
    return len(layout) == partitions and all(leader > 0 and len(isr) == 3 for leader, _r, isr in layout.values())


def all_in_sync(cluster: NetnsCluster) -> bool:
    return full_isrs(cluster, TOPIC, PARTITIONS) and full_isrs(cluster, "__consumer_offsets", OFFSETS_PARTITIONS)


def offsets_leader(cluster: NetnsCluster, group: str) -> int:
    """The broker leading the __consumer_offsets partition that holds ``group``'s records."""
    layout = cluster.describe(cluster.brokers, "__consumer_offsets")
    return layout.get(offsets_schema.partition_for(group, OFFSETS_PARTITIONS), (-1,))[0]


def group_stored_on(cluster: NetnsCluster, node: int) -> str:
    """A group id whose records go to a __consumer_offsets partition ``node`` leads, so that
    cutting ``node`` off takes away both the coordinator and the leader of the group's state:
    the new coordinator loads the group from a partition whose leader is elected meanwhile."""
    layout = cluster.describe(cluster.brokers, "__consumer_offsets")
    for index in range(200):
        group = f"cgp-cut-{index}"
        if layout.get(offsets_schema.partition_for(group, OFFSETS_PARTITIONS), (-1,))[0] == node:
            return group
    raise AssertionError(f"broker {node} leads no partition of __consumer_offsets: {layout}")


def coordinator_node(cluster: NetnsCluster, brokers: list[NetnsBroker], group: str) -> int:
    """The broker FindCoordinator, asked of ``brokers``, names for ``group``."""
    done = cluster.run(["group-coordinator", "--bootstrap", cluster.bootstrap(brokers), "--group", group,
                        "--seconds", "10"], timeout=30)
    assert done.returncode == 0, f"no group coordinator found: {done.stderr[-2000:]}"
    return int(json.loads(done.stdout.splitlines()[-1])["node_id"])


def start(cluster: NetnsCluster) -> list[NetnsBroker]:
    brokers = cluster.start_brokers(3, SETTINGS)
    cluster.create(TOPIC, PARTITIONS, 3, {"min.insync.replicas": "2"})
    coordinator_node(cluster, brokers, "any")  # the first elected coordinator creates __consumer_offsets
    wait_until(lambda: all_in_sync(cluster), 60, "every partition with three in-sync replicas", interval=0.5)
    return brokers


def run_with_cut(cluster: NetnsCluster, tmp_path: Any,
                 cut: Callable[[NetnsBroker, list[NetnsBroker]], None], heal: Callable[[NetnsBroker], None],
                 what: str) -> None:
    brokers = start(cluster)
    # One coordinator process serves every group: the broker hosting it is the one to cut off.
    node = coordinator_node(cluster, brokers, "any")
    group = group_stored_on(cluster, node)
    with GroupRun(cluster, str(tmp_path), group) as run:
        try:
            wait_until(judged(run, lambda: run.stable_and_whole() and len(run.read()) >= 100), 60,
                       "the three members stable, holding the six partitions, and reading", interval=0.5)
            assert coordinator_node(cluster, brokers, group) == node
            stored_on = offsets_leader(cluster, group)
            victim = brokers[node - 1]
            others = [b for b in brokers if b is not victim]
            cut(victim, others)
            began = time.time()
            try:
                # Its ZooKeeper session expires; the others elect a coordinator, which loads the group.
                wait_until(lambda: coordinator_node(cluster, others, group) != node, SESSION_MS / 1000 + 20,
                           f"a coordinator elected away from broker {node}", interval=0.5)
                elected = time.time()
                # The clients find it (a zombie they still reach must send them on), and the group
                # carries on with it for a while before the old one comes back.
                wait_until(judged(run, lambda: {d["node"] for d in run.describes() if d["at"] >= began} - {node}), 40,
                           f"the new coordinator answering the watcher while broker {node} is cut off", interval=0.5)
                answered = min(d["at"] for d in run.describes() if d["at"] >= began and d["node"] != node)
                time.sleep(2)
            finally:
                heal(victim)
            healed = time.time()
            assert victim.process is not None and victim.process.poll() is None, victim.stderr()
            wait_until(lambda: all_in_sync(cluster), 60, f"broker {node} back in every ISR", interval=0.5)
            assert run.stop("producer") == 0, f"producer: {run.stderr('producer')}"
            acked = run.acked()
            wait_until(judged(run, lambda: acked <= run.read()), 60, "every acknowledged record read by the group", interval=0.5)
            final = wait_until(judged(run, lambda: run.stable_and_whole(after=healed)), 60,
                               "the group stable again, its three members holding the six partitions", interval=0.5)
            check(run)
        except BaseException:
            print(summary(run))
            for index in range(MEMBERS):
                print(f"member{index} stderr:\n{run.stderr(f'member{index}')}")
            raise
    moved = {d["node"] for d in run.describes() if began <= d["at"] <= healed}
    # Shown with -rP: how much the run exercised.
    print(f"{what} of broker {node} for {healed - began:.1f} s (another coordinator elected after "
          f"{elected - began:.1f} s, answering the watcher after {answered - began:.1f} s; the group's __consumer_offsets partition led by "
          f"broker {stored_on} before, by {offsets_leader(cluster, group)} after); {summary(run)}")
    check(run)
    assert len(acked) > 300, summary(run)
    assert moved - {node}, f"no other coordinator answered a describe while broker {node} was cut off: {summary(run)}"
    print(f"last describe from node {final['node']}: {final}")
    for index in range(MEMBERS):
        assert run.codes[f"member{index}"] == 0, f"member{index}: {run.stderr(f'member{index}')}"


# ---------------------------------------------------------------------- the tests
def test_the_coordinators_broker_cut_off_from_zookeeper_and_brokers_but_not_clients(
        netns_cluster: NetnsCluster, network: Network, tmp_path: Any) -> None:  # noqa: F811
    run_with_cut(netns_cluster, tmp_path,
                 lambda victim, others: network.drop(victim.member, ["zk"] + [b.member for b in others]),
                 lambda victim: network.undrop(victim.member), "cut off from ZooKeeper and brokers")


def test_the_coordinators_broker_fully_partitioned_away(netns_cluster: NetnsCluster, network: Network,  # noqa: F811
                                                        tmp_path: Any) -> None:
    run_with_cut(netns_cluster, tmp_path, lambda victim, _others: network.isolate(victim.member),
                 lambda victim: network.heal(victim.member), "full network partition")
