"""Transactions under faults, judged as Jepsen judges Kafka-compatible systems: what the
tests of test_transactions_faults.py and test_transactions_faults_zombie.py share (two files,
so that the two workers of ``pytest -n 2 --dist loadfile`` run them side by side).

ZooKeeper, three brokers and the clients each in a network namespace of their own
(tests/integration/netns.py, netns_cluster.py). The workload (tests/integration/txn_workload.py,
a client process) runs three transactional producers, each writing one unique value to each of
the three partitions of a replicated topic in every transaction (one in five aborted on
purpose), and a consume-transform-produce stage whose consumer's offsets go in its
transactions. One fault per test (``run_with_fault``), while transactions are in flight; each
fault below does its fault and its undoing, and says what it did.

Then every partition is read back to its end (read_committed and read_uncommitted) once no
transaction is open, and tests/integration/txn_checker.py judges the whole history: no aborted
value read, no committed value missing, no duplicate, every transaction all-or-nothing across
its partitions, and the group's committed offsets consistent with the outputs.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from typing import Any, Callable

from coordination.groups import offsets_schema
from coordination.transactions import schema as txn_schema
from tests.integration.conftest import wait_until
from tests.integration.netns import Network
from tests.integration.netns_cluster import ROOT, NetnsBroker, NetnsCluster, client_env
from tests.integration.txn_checker import TxnHistory

TOPIC, OUT, GROUP, PARTITIONS = "txn", "ctp-out", "ctp", 3
SESSION_MS = 4000  # zookeeper.session.timeout.ms: a stopped or cut-off broker's session expires after this
SETTINGS = {"zookeeper.session.timeout.ms": SESSION_MS, "replica.lag.time.max.ms": 3000,
            "group.initial.rebalance.delay.ms": 0, "offsets.topic.num.partitions": 4,
            "offsets.topic.replication.factor": 3, "transaction.state.log.num.partitions": 4,
            "transaction.state.log.replication.factor": 3, "transaction.state.log.min.isr": 2,
            "transaction.abort.timed.out.transaction.cleanup.interval.ms": 1000}
TXN_TIMEOUT_MS = 10000  # the producers' transaction.timeout.ms: an orphaned transaction is aborted after it


def workload_command(args: list[str]) -> list[str]:
    return [sys.executable, "-m", "tests.integration.txn_workload"] + args


class Workload:
    """txn_workload.py run in the client namespace until the block ends (SIGTERM: the producers
    stop, the stage drains); its JSON lines in a file."""

    def __init__(self, cluster: NetnsCluster, base_dir: str, seed: int) -> None:
        self.cluster, self.seed = cluster, seed
        self.out = os.path.join(base_dir, "workload.jsonl")
        self.process: subprocess.Popen[bytes] | None = None
        self.code: int | None = None

    def __enter__(self) -> "Workload":
        args = ["run", "--bootstrap", self.cluster.bootstrap(self.cluster.brokers), "--topic", TOPIC, "--out", OUT,
                "--group", GROUP, "--partitions", str(PARTITIONS), "--producers", "3", "--seconds", "150",
                "--txn-timeout-ms", str(TXN_TIMEOUT_MS), "--call-timeout", "10", "--seed", str(self.seed)]
        with open(self.out, "wb") as out, open(self.out + ".stderr", "wb") as err:
            self.process = self.cluster.net.popen(self.cluster.client, workload_command(args), stdout=out, stderr=err,
                                                  cwd=ROOT, env=client_env())
        return self

    def __exit__(self, *exc: Any) -> None:
        assert self.process is not None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            self.code = self.process.wait(90)  # producers end their transaction, the stage drains (bounded)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(10)

    def stderr(self, tail: int = 3000) -> str:
        with open(self.out + ".stderr", errors="replace") as handle:
            return handle.read()[-tail:]

    def committed_so_far(self) -> int:
        return len(self.ends("committed"))

    def ends(self, outcome: str) -> list[float]:
        """When each transaction with this outcome ended (wall clock, as the workload saw it)."""
        with open(self.out, encoding="utf-8") as handle:
            return [json.loads(line)["at"] for line in handle
                    if line.endswith("\n") and f'"outcome": "{outcome}"' in line]

    def during(self, start: float, end: float) -> str:
        """What the clients went through in [start, end]: ends by outcome, and the longest time
        without any commit around it (the fault's bite)."""
        counts = {o: sum(start <= at <= end for at in self.ends(o)) for o in ("committed", "aborted", "indeterminate")}
        commits = sorted(self.ends("committed"))
        gaps = [b - a for a, b in zip(commits, commits[1:]) if b >= start and a <= end + 30]
        return f"ends during the fault {counts}, longest time without a commit {max(gaps, default=0):.1f} s"


def parse_key(text: str) -> tuple[str, int]:
    topic, _, partition = text.rpartition("/")
    return topic, int(partition)


def history_of(path: str) -> TxnHistory:
    history = TxnHistory()
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            if not line.endswith("\n"):
                break  # cut short by a kill: not an event
            event = json.loads(line)
            if event["type"] == "begin":
                history.begin(event["txn"], {parse_key(k): v for k, v in event["writes"].items()},
                              {o: (parse_key(k), offset, value) for o, (k, offset, value)
                               in event.get("sources", {}).items()})
            elif event["type"] == "end":
                history.end(event["txn"], event["outcome"], event["error"])
    return history


def read_back(cluster: NetnsCluster, history: TxnHistory) -> None:
    """The final logs and the group's offsets, once every transaction has ended (an orphan is
    aborted by the coordinator after TXN_TIMEOUT_MS)."""
    done = cluster.net.run(cluster.client, workload_command([
        "read-back", "--bootstrap", cluster.bootstrap(cluster.brokers), "--topics", TOPIC, OUT, "--group", GROUP,
        "--partitions", str(PARTITIONS), "--seconds", "60"]), timeout=100, cwd=ROOT, env=client_env())
    assert done.returncode == 0, f"read-back: {done.stderr[-3000:]}"
    for event in map(json.loads, done.stdout.splitlines()):
        if event["type"] == "final":
            key = (event["topic"], event["partition"])
            history.final(key, [tuple(r) for r in event["committed"]], [tuple(r) for r in event["uncommitted"]])
        elif event["type"] == "offsets":
            history.offsets({parse_key(k): v for k, v in event["offsets"].items()})
    history.input_keys |= {(TOPIC, p) for p in range(PARTITIONS)}


def full_isrs(cluster: NetnsCluster, topic: str, partitions: int) -> bool:
    layout = cluster.describe(cluster.brokers, topic)
    return len(layout) == partitions and all(leader > 0 and len(isr) == 3 for leader, _r, isr in layout.values())


def all_in_sync(cluster: NetnsCluster) -> bool:
    return all(full_isrs(cluster, topic, count) for topic, count in
               ((TOPIC, PARTITIONS), (OUT, PARTITIONS), ("__transaction_state", 4), ("__consumer_offsets", 4)))


def coordinator_node(cluster: NetnsCluster, brokers: list[NetnsBroker] | None = None) -> int:
    """The broker FindCoordinator (key type 1), asked of ``brokers``, names for a transactional
    id of the workload."""
    done = cluster.net.run(cluster.client, workload_command([
        "coordinator", "--bootstrap", cluster.bootstrap(brokers or cluster.brokers), "--transactional-id",
        "jepsen-p0", "--seconds", "20"]), timeout=40, cwd=ROOT, env=client_env())
    assert done.returncode == 0, f"no transaction coordinator found: {done.stderr[-2000:]}"
    return int(json.loads(done.stdout.splitlines()[-1])["node_id"])


def coordinator_moved(cluster: NetnsCluster, brokers: list[NetnsBroker], away_from: int) -> None:
    """Wait until the other brokers name another broker's coordinator (the cut-off one's
    ZooKeeper session expired and another was elected)."""
    others = [b for i, b in enumerate(brokers, start=1) if i != away_from]
    wait_until(lambda: coordinator_node(cluster, others) != away_from, SESSION_MS / 1000 + 20,
               f"a coordinator elected away from broker {away_from}", interval=0.5)


def start(cluster: NetnsCluster) -> list[NetnsBroker]:
    brokers = cluster.start_brokers(3, SETTINGS)
    for topic in (TOPIC, OUT):
        cluster.create(topic, PARTITIONS, 3, {"min.insync.replicas": "2"})
    # __transaction_state is created by the first elected coordinator, with the brokers alive then,
    # and widened as the others join: the faults start once every replica of everything is in sync.
    coordinator_node(cluster)
    wait_until(lambda: all_in_sync(cluster), 60, "every partition with three in-sync replicas", interval=0.5)
    return brokers


def run_with_fault(cluster: NetnsCluster, tmp_path: Any, fault: Callable[[list[NetnsBroker]], str],
                   seed: int | None = None) -> None:
    """The workload, the fault in its middle, then the read-back and the checker's judgement."""
    brokers = start(cluster)
    seed = seed if seed is not None else int(os.environ.get("CASTLE_NEMESIS_SEED", time.time_ns() % 1_000_000))
    with Workload(cluster, str(tmp_path), seed) as load:
        wait_until(lambda: load.committed_so_far() >= 20, 60, "twenty committed transactions before the fault",
                   interval=0.5)
        began = time.time()
        what = fault(brokers)
        ended = time.time()
        wait_until(lambda: all_in_sync(cluster), 60, "every replica back in sync after the fault", interval=0.5)
        before = load.committed_so_far()
        wait_until(lambda: load.committed_so_far() >= before + 20, 60, "twenty more committed after the fault",
                   interval=0.5)
    what += f"; {load.during(began, ended)}"
    print(f"seed {seed}; fault: {what}")
    assert load.code == 0, f"workload exit {load.code}: {load.stderr()}"
    history = history_of(load.out)
    read_back(cluster, history)
    report = history.check()
    print(report.summary())  # shown with -rP: how much the run exercised
    print(load.stderr())
    assert report.ok, f"seed {seed}, fault: {what}\n{report.summary()}\nworkload stderr:\n{load.stderr()}"
    counts = report.counts
    assert counts.get("committed", 0) >= 40 and counts.get("aborted", 0) > 0, report.summary()
    # Aborted data did reach the logs (read_uncommitted has it): read_committed had to skip it.
    assert counts.get("aborted_in_log", 0) > 0, report.summary()
    outputs = sum(len(records) for (topic, _p), records in history.committed_log.items() if topic == OUT)
    assert outputs > 0 and history.group_offsets, f"the transform stage committed nothing: {report.summary()}"


# ---------------------------------------------------------------------- the faults
# Each does its fault and its undoing, and says what it did; run_with_fault then waits for
# every replica to be back in sync.
def kill_a_leader(cluster: NetnsCluster, net: Network, brokers: list[NetnsBroker], partition: int = 0) -> str:
    """kill -9 of every process of the broker leading a partition of the topic, then its restart."""
    return kill_a_leader_of(cluster, brokers, TOPIC, partition)


def kill_a_leader_of(cluster: NetnsCluster, brokers: list[NetnsBroker], topic: str, partition: int) -> str:
    """kill -9 of every process of the broker leading ``topic``-``partition``, a new leader
    elected, then its restart and every replica back in sync."""
    victim_id = cluster.describe(brokers, topic)[partition][0]
    victim = brokers[victim_id - 1]
    victim.kill()
    others = [b for b in brokers if b is not victim]
    wait_until(lambda: cluster.describe(others, topic).get(partition, (-1,))[0] not in (-1, victim_id),
               SESSION_MS / 1000 + 30, f"a new leader of {topic}-{partition}", interval=0.5)
    time.sleep(2)
    victim.launch()
    victim.wait_ready()
    wait_until(lambda: all_in_sync(cluster), 60, f"every replica in sync after broker {victim_id}'s restart",
               interval=0.5)
    return f"kill -9 of broker {victim_id} (leader of {topic}-{partition}), restarted"


def kill_the_leaders_of_the_coordinators_partitions(cluster: NetnsCluster, net: Network,
                                                    brokers: list[NetnsBroker]) -> str:
    """The coordinator writes its state and the stage's offsets to partitions other brokers may
    lead (as a Kafka client): kill -9 of the leader of the __transaction_state partition of a
    producer's transactional id, then of the leader of the group's __consumer_offsets partition."""
    state = txn_schema.partition_for("jepsen-p0", 4)
    offsets = offsets_schema.partition_for(GROUP, 4)
    return ", then ".join([kill_a_leader_of(cluster, brokers, "__transaction_state", state),
                           kill_a_leader_of(cluster, brokers, "__consumer_offsets", offsets)])


def kill_the_coordinators_broker(cluster: NetnsCluster, net: Network, brokers: list[NetnsBroker]) -> str:
    """kill -9 of every process of the coordinator's broker (so of the leaders it has too), then
    its restart: the others elect a coordinator once its ZooKeeper session expires."""
    node = coordinator_node(cluster)
    broker = brokers[node - 1]
    broker.kill()
    coordinator_moved(cluster, brokers, node)
    broker.launch()
    broker.wait_ready()
    return f"kill -9 of broker {node} (the coordinator's), restarted"


def kill_the_coordinator(cluster: NetnsCluster, net: Network, brokers: list[NetnsBroker]) -> str:
    """kill -9 of the elected coordinator process; its supervisor starts another, which is
    elected again and finishes what the dead one had prepared."""
    node = coordinator_node(cluster)
    broker = brokers[node - 1]
    pid = broker.coordinator_pid()
    assert pid is not None, f"broker {node} has no coordinator process"
    os.kill(pid, signal.SIGKILL)
    wait_until(lambda: broker.coordinator_pid() not in (None, pid), 30, "a new coordinator process")
    time.sleep(3)
    return f"kill -9 of broker {node}'s coordinator process (pid {pid})"


def stop_the_coordinators_broker(cluster: NetnsCluster, net: Network, brokers: list[NetnsBroker]) -> str:
    """SIGSTOP of every process of the coordinator's broker until another coordinator is
    elected (its session expired), a few seconds more, then SIGCONT: it wakes up a zombie."""
    node = coordinator_node(cluster)
    broker = brokers[node - 1]
    os.killpg(broker.pid, signal.SIGSTOP)
    stopped = time.monotonic()
    try:
        coordinator_moved(cluster, brokers, node)
        time.sleep(3)  # transactions go on with the new coordinator while the old one is frozen
    finally:
        os.killpg(broker.pid, signal.SIGCONT)
    return f"SIGSTOP of broker {node} (the coordinator's) for {time.monotonic() - stopped:.1f} s, then SIGCONT"


def isolate_the_coordinators_broker(cluster: NetnsCluster, net: Network, brokers: list[NetnsBroker]) -> str:
    """A full network partition of the coordinator's broker (its bridge port down) past its
    session, then healed."""
    node = coordinator_node(cluster)
    broker = brokers[node - 1]
    net.isolate(broker.member)
    cut = time.monotonic()
    try:
        coordinator_moved(cluster, brokers, node)
        time.sleep(3)
    finally:
        net.heal(broker.member)
    assert broker.process is not None and broker.process.poll() is None, broker.stderr()
    return f"network partition of broker {node} (the coordinator's) for {time.monotonic() - cut:.1f} s, then healed"


def cut_the_coordinator_from_the_cluster(cluster: NetnsCluster, net: Network, brokers: list[NetnsBroker]) -> str:
    """The coordinator's broker cut off from ZooKeeper and the other brokers (nftables in its
    namespace), the clients still reaching it, until another coordinator is elected and a few
    seconds more: whatever the old one still answers must not commit, abort or hide anything
    the new one decides otherwise (Jepsen's zombie)."""
    node = coordinator_node(cluster)
    broker = brokers[node - 1]
    others = [b for b in brokers if b is not broker]
    net.drop(broker.member, ["zk"] + [b.member for b in others])
    cut = time.monotonic()
    try:
        coordinator_moved(cluster, brokers, node)
        time.sleep(4)
    finally:
        net.undrop(broker.member)
    assert broker.process is not None and broker.process.poll() is None, broker.stderr()
    return (f"broker {node} (the coordinator's) cut off from ZooKeeper and brokers {[b.member for b in others]} "
            f"for {time.monotonic() - cut:.1f} s, clients still reaching it")


FAULTS = {"kill-leader": kill_a_leader, "kill-coordinator": kill_the_coordinator,
          "kill-coordinator-broker": kill_the_coordinators_broker,
          "kill-internal-leaders": kill_the_leaders_of_the_coordinators_partitions,
          "stop-coordinator-broker": stop_the_coordinators_broker,
          "isolate-coordinator-broker": isolate_the_coordinators_broker,
          "cut-coordinator-off": cut_the_coordinator_from_the_cluster}
