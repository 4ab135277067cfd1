"""A ZooKeeper, Castle brokers and clients, each in a network namespace of its own (netns.py).

``netns_cluster`` (fixture) gives a NetnsCluster on a fresh Network with members "zk" and
"client"; ``cluster.start_brokers(3, overrides)`` adds "b1".."b3", each a ``castle serve``
listening and advertising on its own address, port 9092 (every namespace has its own ports),
metrics off. The test process stays in the root namespace, where none of these addresses
exist: it reaches the cluster only through netns_client.py processes run in "client", and
it watches the brokers' processes and files (stats, logs) directly, by PID and path.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Any, Iterator

import pytest

from tests.integration.conftest import START_TIMEOUT, Broker, stop_all, wait_until
from tests.integration.netns import Network, network  # noqa: F401  (the fixture, re-exported to the tests)
from tests.integration.replication_history import History
from tests.zookeeper_server import MAIN_CLASS, ZooKeeperServer, classpath, unavailable_reason

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KAFKA_PORT = 9092
ZK_PORT = 2181


def client_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}


class NetnsZooKeeper(ZooKeeperServer):
    """tests/zookeeper_server.py's server, run in ``member``'s namespace on its address. The
    zoo.cfg is the same; the launch and the readiness probe (from the client's namespace)
    differ, since the parent's are fixed to the root namespace."""

    def __init__(self, net: Network, member: str, client: str) -> None:
        super().__init__()
        self.net, self.member, self.client = net, member, client
        self.host, self.port = net.address(member), ZK_PORT

    def start(self, timeout: float = 30.0) -> None:
        cp = classpath()
        if cp is None:
            raise RuntimeError(unavailable_reason() or "ZooKeeper is not installed")
        self.dir = tempfile.mkdtemp(prefix="castle-zk-")
        self._launch(cp)
        if not self._wait_ready(time.monotonic() + timeout):
            tail = self.log_tail()
            self.stop()
            raise RuntimeError(f"ZooKeeper did not start in {self.member} within {timeout} s; its log ends with:\n{tail}")

    def _launch(self, cp: str) -> None:
        assert self.dir is not None
        data_dir = os.path.join(self.dir, "data")
        os.makedirs(data_dir, exist_ok=True)
        config = os.path.join(self.dir, "zoo.cfg")
        with open(config, "w", encoding="ascii") as handle:  # as ZooKeeperServer._launch writes it
            handle.write(f"tickTime={self.tick_ms}\ndataDir={data_dir}\nclientPort={self.port}\n"
                         f"clientPortAddress={self.host}\nadmin.enableServer=false\nmaxSessionTimeout=60000\n"
                         "maxClientCnxns=0\nforceSync=no\npreAllocSize=1024\n4lw.commands.whitelist=srvr,ruok\n")
        with open(os.path.join(self.dir, "zookeeper.log"), "ab") as log:
            self.proc = self.net.popen(self.member, [
                "java", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp", cp, MAIN_CLASS, config],
                stdout=log, stderr=subprocess.STDOUT, cwd=self.dir)

    def _wait_ready(self, deadline: float) -> bool:
        assert self.proc is not None
        while time.monotonic() < deadline and self.proc.poll() is None:
            probe = client_run(self.net, self.client, ["zk-ready", "--zk", self.address, "--seconds", "3"], timeout=20)
            if probe.returncode == 0:
                return True
        return False


class NetnsBroker(Broker):
    """conftest.Broker whose ``castle serve`` runs under ``ip netns exec`` (which execs: the
    PID is castle's own, so stop/kill by PID and the worker bookkeeping work unchanged)."""

    def __init__(self, base_dir: str, workers: int, overrides: dict[str, Any], net: Network, member: str,
                 client: str) -> None:
        # Metrics off: the endpoint would only be reachable inside the namespace anyway.
        super().__init__(base_dir, workers, {"metrics.listener": "", **overrides})
        self.net, self.member, self.client = net, member, client
        self.host, self.port = net.address(member), KAFKA_PORT

    def command(self) -> list[str]:
        return self.net.wrap(self.member, super().command())

    def wait_ready(self, timeout: float = START_TIMEOUT) -> None:
        """As Broker.wait_ready (every worker serving by its stats file), with the client round
        trip made from the client's namespace."""
        deadline = time.monotonic() + timeout

        def serving() -> bool:
            if self.process is not None and self.process.poll() is not None:
                raise AssertionError(f"castle serve exited with {self.process.returncode} while starting:\n{self.stderr()}")
            pids, coordinator = self.worker_pids(), self.coordinator_pid()
            self.known_pids.update(pids + ([coordinator] if coordinator else []))
            return len(pids) == self.workers and coordinator is not None and set(pids) <= {s.get("pid") for s in self.stats()}

        wait_until(serving, timeout, f"broker {self.bootstrap} to serve")
        left = max(1.0, deadline - time.monotonic())
        probe = client_run(self.net, self.client, ["ping", "--bootstrap", self.bootstrap, "--seconds", str(left)],
                           timeout=left + 15)
        assert probe.returncode == 0, f"no round trip to {self.bootstrap} from {self.client}: {probe.stderr[-2000:]}"


def client_command(args: list[str]) -> list[str]:
    return [sys.executable, "-m", "tests.integration.netns_client"] + args


def client_run(net: Network, member: str, args: list[str], timeout: float) -> "subprocess.CompletedProcess[str]":
    return net.run(member, client_command(args), timeout=timeout, cwd=ROOT, env=client_env())


class NetnsCluster:
    def __init__(self, net: Network, base_dir: str, request: pytest.FixtureRequest) -> None:
        self.net, self.base_dir = net, base_dir
        self.client = "client"
        net.add("client")
        net.add("zk")
        self.zookeeper = NetnsZooKeeper(net, "zk", self.client)
        self.zk_connect = f"{self.zookeeper.address}/castle"
        self.brokers: list[NetnsBroker] = []
        # conftest's report hook attaches every broker's stderr to a failed test's report.
        self._reported: list[Broker] = request.node.__dict__.setdefault("_castle_brokers", [])

    def start_brokers(self, count: int, overrides: dict[str, Any], workers: tuple[int, ...] = (2, 1, 1)) -> list[NetnsBroker]:
        """Brokers b1..b<count> (node ids 1..count), started side by side, each serving and
        registered in ZooKeeper before this returns."""
        for node_id in range(1, count + 1):
            member = f"b{node_id}"
            self.net.add(member)
            base = os.path.join(self.base_dir, member)
            os.makedirs(base)
            broker = NetnsBroker(base, workers[(node_id - 1) % len(workers)],
                                 {"zookeeper.connect": self.zk_connect, "node.id": node_id, **overrides},
                                 self.net, member, self.client)
            self.brokers.append(broker)
            self._reported.append(broker)
            broker.launch()
        for broker in self.brokers:
            broker.wait_ready(START_TIMEOUT + 10)  # three pythons starting at once on two cores
        probe = self.run(["zk-wait", "--zk", self.zk_connect, "--path", "/brokers/ids", "--count", str(count),
                          "--seconds", "30"], timeout=45)
        assert probe.returncode == 0, f"{count} brokers not registered in ZooKeeper: {probe.stderr[-2000:]}"
        return self.brokers

    # ------------------------------------------------------------------ clients (in the client namespace)
    def run(self, args: list[str], timeout: float = 60) -> "subprocess.CompletedProcess[str]":
        return client_run(self.net, self.client, args, timeout)

    def popen(self, args: list[str], stdout_path: str) -> "subprocess.Popen[bytes]":
        """A long-running client, its JSON lines to ``stdout_path`` (a file: no pipe to drain)."""
        with open(stdout_path, "wb") as out, open(stdout_path + ".stderr", "wb") as err:
            return self.net.popen(self.client, client_command(args), stdout=out, stderr=err, cwd=ROOT, env=client_env())

    @staticmethod
    def bootstrap(brokers: list[NetnsBroker]) -> str:
        return ",".join(b.bootstrap for b in brokers)

    def create(self, topic: str, partitions: int, factor: int, configs: dict[str, str]) -> None:
        args = ["create", "--bootstrap", self.bootstrap(self.brokers), "--topic", topic, "--partitions", str(partitions),
                "--replication-factor", str(factor)]
        for key, value in configs.items():
            args += ["--config", f"{key}={value}"]
        done = self.run(args + ["--seconds", "30"], timeout=60)
        assert done.returncode == 0, f"create {topic}: {done.stderr[-2000:]}"

    def describe(self, brokers: list[NetnsBroker], topic: str) -> dict[int, tuple[int, list[int], list[int]]]:
        """partition -> (leader, replicas, isr) as Metadata from ``brokers`` says; {} if none answered."""
        try:
            done = self.run(["describe", "--bootstrap", self.bootstrap(brokers), "--topic", topic, "--seconds", "5"],
                            timeout=20)
        except subprocess.TimeoutExpired:
            return {}
        if done.returncode != 0 or not done.stdout.strip():
            return {}
        return {int(p): (leader, replicas, isr) for p, (leader, replicas, isr) in json.loads(done.stdout).items()}

    def read_all(self, topic: str, partitions: int, history: History | None = None) -> dict[int, list[tuple[int, str]]]:
        """Every record of every partition from offset 0 to its high watermark (recorded as the
        history's final log when given)."""
        done = self.run(["read-all", "--bootstrap", self.bootstrap(self.brokers), "--topic", topic,
                         "--partitions", str(partitions), "--seconds", "60"], timeout=90)
        assert done.returncode == 0, f"read-all {topic}: {done.stderr[-2000:]}"
        out = {}
        for event in map(json.loads, done.stdout.splitlines()):
            out[event["partition"]] = [(offset, value) for offset, value in event["records"]]
            if history is not None:
                history.final((topic, event["partition"]), out[event["partition"]])
        return out

    # ------------------------------------------------------------------ teardown
    def close(self) -> list[str]:
        """Stop every broker (SIGTERM, then SIGKILL, by PID), then ZooKeeper; the brokers that
        did not exit 0 on SIGTERM, for the fixture to report."""
        unclean = stop_all(self.brokers)
        self.zookeeper.stop()
        return unclean


def feed(history: History, topic: str, path: str, reader: str = "reader") -> dict[str, int]:
    """Record a client's JSON lines (netns_client.py) in ``history``; counts by event type."""
    counts: dict[str, int] = {}
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            if not line.endswith("\n"):
                break  # a line cut short by a kill: not an event
            event = json.loads(line)
            kind = event["type"]
            counts[kind] = counts.get(kind, 0) + 1
            key = (topic, event["partition"])
            if kind == "ack":
                history.ack(key, event["value"], event["offset"])
            elif kind == "fail":
                history.fail(key, event["value"])
            elif kind == "info":
                history.info(key, event["value"])
            elif kind == "read":
                history.read(reader, key, event["offset"], event["value"])
    return counts


@pytest.fixture
def netns_cluster(request: pytest.FixtureRequest, network: Network, tmp_path: Any) -> Iterator[NetnsCluster]:  # noqa: F811
    """ZooKeeper started in "zk", a "client" namespace; brokers by ``start_brokers``. Torn down
    before the network (this fixture depends on it): brokers, then ZooKeeper, then namespaces."""
    reason = unavailable_reason()
    if reason:
        pytest.fail(f"ZooKeeper cannot run here: {reason} (apt-get install zookeeper)")
    cluster = NetnsCluster(network, str(tmp_path), request)
    unclean: list[str] = []
    try:
        cluster.zookeeper.start()
        yield cluster
    finally:
        unclean = cluster.close()
    if unclean:
        pytest.fail("broker did not stop cleanly on SIGTERM: " + "\n".join(unclean))
