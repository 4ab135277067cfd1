"""Fixtures that start Castle as a real process (``castle serve``) on a free port.

``broker_factory(workers=2, **overrides)`` starts one broker and returns a ``Broker``;
``broker`` is one broker with the defaults (parametrize it indirectly with a dict of
overrides, ``workers`` included). Every broker is stopped by its own PID in a finalizer,
even when the test failed, and its stderr is attached to the report of a failed test.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable, Iterable, Iterator

import pytest

from broker.partitions.placement import owner_index
from storage.types import TopicPartition
from tests.integration.kio_client import read_frame
from tests.zookeeper_server import free_port  # noqa: F401  (below the ephemeral range; re-exported to the tests)

START_TIMEOUT = 20.0
STOP_TIMEOUT = 45.0


def castle_command() -> list[str]:
    script = os.path.join(os.path.dirname(sys.executable), "castle")
    if os.path.exists(script):
        return [script]
    return [sys.executable, "-m", "broker"]


def wait_until(condition: Callable[[], Any], timeout: float, what: str, interval: float = 0.05) -> Any:
    """Poll ``condition`` until it returns something truthy; fail after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


def partition_owned_by(topic: str, worker: int, workers: int, partitions: int) -> int:
    """The first partition of ``topic`` that worker ``worker`` of ``workers`` owns."""
    return next(p for p in range(partitions) if owner_index(TopicPartition(topic, p), workers) == worker)


# ---------------------------------------------------------------------- /proc
def proc_ppid(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except OSError:
        return None
    # "pid (comm) state ppid ...": comm may hold spaces and parentheses.
    fields = stat[stat.rindex(b")") + 2:].split()
    if fields[0] == b"Z":
        return None  # a zombie is not a live worker
    return int(fields[1])


def children_of(pid: int) -> list[int]:
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit() and proc_ppid(int(name)) == pid:
            found.append(int(name))
    return sorted(found)


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return proc_ppid(pid) is not None


# ---------------------------------------------------------------------- raw protocol
def _request(api_key: int, version: int, correlation_id: int, body: bytes) -> bytes:
    client = b"castle-tests"
    header = struct.pack(">hhih", api_key, version, correlation_id, len(client)) + client
    frame = header + body
    return struct.pack(">i", len(frame)) + frame


def round_trip(host: str, port: int, timeout: float = 2.0) -> bool:
    """ApiVersions v0 then Metadata v1 (all topics) on one connection; True if both answer."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.settimeout(timeout)
            sock.sendall(_request(18, 0, 1, b""))
            answer = read_frame(sock)
            correlation_id, error_code = struct.unpack(">ih", answer[:6])
            if correlation_id != 1 or error_code != 0:
                return False
            sock.sendall(_request(3, 1, 2, struct.pack(">i", -1)))
            answer = read_frame(sock)
            correlation_id, brokers = struct.unpack(">ii", answer[:8])
            return correlation_id == 2 and brokers >= 1
    except OSError:
        return False


def serve_until_exit(tmp_path: Any, *overrides: str, workers: int = 1) -> "subprocess.CompletedProcess[str]":
    """``castle serve`` expected to refuse its start: run it to its exit (bounded) on a free
    port, metrics off unless overridden; the result carries its exit code and stderr."""
    settings = {"log.dirs": f"{tmp_path}/data", "listeners": f"PLAINTEXT://127.0.0.1:{free_port()}",
                "workers": str(workers), "metrics.listener": ""}
    for item in overrides:
        key, _, value = item.partition("=")
        settings[key] = value
    args = castle_command() + ["serve"]
    for key, value in settings.items():
        args += ["--override", f"{key}={value}"]
    return subprocess.run(args, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)


@contextlib.contextmanager
def port_in_use() -> Iterator[int]:
    """A port something else listens on, for as long as the block runs."""
    holder = socket.socket()
    try:
        holder.bind(("127.0.0.1", 0))
        holder.listen(1)
        yield holder.getsockname()[1]
    finally:
        holder.close()


# ---------------------------------------------------------------------- the broker
class Broker:
    def __init__(self, base_dir: str, workers: int, overrides: dict[str, Any]) -> None:
        self.workers = workers
        # A new group's first join waits group.initial.rebalance.delay.ms (3 s by default) for
        # more members: Kafka's own test harness and shipped server.properties set it to 0, and
        # so do these brokers unless a test sets it (tests of the delay itself do).
        self.overrides = {"group.initial.rebalance.delay.ms": "0", **{str(k): str(v) for k, v in overrides.items()}}
        self.log_dir = os.path.join(base_dir, "data")
        self.stderr_path = os.path.join(base_dir, "broker.stderr")
        # IPC socket paths must stay short (sun_path is 108 bytes): not under tmp_path.
        self.run_dir = tempfile.mkdtemp(prefix="c", dir="/tmp")
        self.port = free_port()
        self.metrics_port = free_port()
        self.config_file: str | None = None  # a .properties file given before the overrides
        self.host = "127.0.0.1"
        self.process: subprocess.Popen[bytes] | None = None
        self.known_pids: set[int] = set()
        self.starts = 0

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int:
        assert self.process is not None, "broker not started"
        return self.process.pid

    def command(self) -> list[str]:
        settings = {"log.dirs": self.log_dir, "listeners": f"PLAINTEXT://{self.bootstrap}",
                    "workers": str(self.workers), "run.dir": self.run_dir,
                    # Brokers run side by side in tests: each its own metrics port.
                    "metrics.listener": f"127.0.0.1:{self.metrics_port}"}
        settings.update(self.overrides)
        args = castle_command() + ["serve"] + ([self.config_file] if self.config_file else [])
        for key, value in settings.items():
            args += ["--override", f"{key}={value}"]
        return args

    # ------------------------------------------------------------------ lifecycle
    def start(self, timeout: float = START_TIMEOUT) -> "Broker":
        self.launch()
        self.wait_ready(timeout)
        return self

    def launch(self) -> None:
        """Start the process without waiting for it to serve."""
        assert self.process is None or self.process.poll() is not None, "already running"
        self.starts += 1
        with open(self.stderr_path, "ab") as err:
            err.write(f"----- start #{self.starts}: {' '.join(self.command())}\n".encode())
            err.flush()
            self.process = subprocess.Popen(self.command(), stdin=subprocess.DEVNULL, stdout=err, stderr=err,
                                            start_new_session=True)

    def wait_ready(self, timeout: float = START_TIMEOUT) -> None:
        """Every worker slot serves (its stats file names a live child) and a client round trip works."""
        def ready() -> bool:
            if self.process is not None and self.process.poll() is not None:
                raise AssertionError(f"castle serve exited with {self.process.returncode} while starting:\n{self.stderr()}")
            pids = self.worker_pids()
            if len(pids) != self.workers:
                return False
            self.known_pids.update(pids)
            coordinator = self.coordinator_pid()
            if coordinator is None:
                return False
            self.known_pids.add(coordinator)
            served = {s.get("pid") for s in self.stats()}
            return set(pids) <= served and round_trip(self.host, self.port)

        wait_until(ready, timeout, f"broker {self.bootstrap} to serve")

    def stop(self, timeout: float = STOP_TIMEOUT, expect_code: int | None = 0) -> int | None:
        """SIGTERM, wait, then SIGKILL; asserts the exit code when ``expect_code`` is not None."""
        if self.process is None or self.process.poll() is not None:
            return None if self.process is None else self.process.returncode
        self.known_pids.update(children_of(self.process.pid))
        self.process.send_signal(signal.SIGTERM)
        try:
            code: int | None = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)
            code = None
        self._reap_workers(timeout=10)
        if expect_code is not None:
            assert code == expect_code, f"castle serve exited with {code} on SIGTERM (expected {expect_code}):\n{self.stderr()}"
        return code

    def kill(self) -> None:
        """kill -9 the supervisor and every worker we ever saw (finalizer, crash tests)."""
        if self.process is not None and self.process.poll() is None:
            self.known_pids.update(children_of(self.process.pid))
            self.process.kill()
            self.process.wait(10)
        self._reap_workers(timeout=0)

    def _reap_workers(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        for pid in sorted(self.known_pids):
            while pid_alive(pid) and time.monotonic() < deadline:
                time.sleep(0.05)
            if pid_alive(pid) and _is_castle(pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        self.known_pids.clear()

    def restart(self, timeout: float = START_TIMEOUT) -> "Broker":
        self.stop()
        return self.start(timeout)

    # ------------------------------------------------------------------ inspection
    def worker_pids(self) -> list[int]:
        if self.process is None or self.process.poll() is not None:
            return []
        return [pid for pid in children_of(self.process.pid) if not _is_coordinator(pid)]

    def coordinator_pid(self) -> int | None:
        """The coordinator process (found by its process title, "castle[N]: coordinator")."""
        if self.process is None or self.process.poll() is not None:
            return None
        found = [pid for pid in children_of(self.process.pid) if _is_coordinator(pid)]
        return found[0] if found else None

    def stats(self) -> list[dict[str, Any]]:
        """The per-worker stats files, by worker index (written every 0.5 s by each worker)."""
        out = []
        for index in range(self.workers):
            path = os.path.join(self.run_dir, f"worker-{index}.stats.json")
            try:
                with open(path, "rb") as handle:
                    out.append(json.loads(handle.read()))
            except (OSError, ValueError):
                continue
        return out

    def stderr(self, tail: int = 2000) -> str:
        try:
            with open(self.stderr_path, "rb") as handle:
                lines = handle.read().decode(errors="replace").splitlines()
        except OSError:
            return "(no stderr file)"
        return "\n".join(lines[-tail:])

    def cleanup(self) -> None:
        self.kill()
        shutil.rmtree(self.run_dir, ignore_errors=True)


def _is_coordinator(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return b": coordinator" in handle.read()
    except OSError:
        return False


def _is_castle(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            cmdline = handle.read()
    except OSError:
        return False
    return b"castle" in cmdline


# ---------------------------------------------------------------------- fixtures
@pytest.fixture(autouse=True)
def collect_clients_on_the_main_thread() -> Iterator[None]:
    """Destroy the test's leftover client objects here, between tests, on the main thread.

    librdkafka handles (confluent-kafka Producer/Consumer/AdminClient) freed by a garbage
    collection that happens to run on another thread can crash the interpreter
    (confluentinc/confluent-kafka-python#1761: rd_kafka_destroy from Producer_dealloc in
    a GC pass). Tests here start client threads; collecting after each test, once those
    threads are joined, keeps such deallocations out of the next test's threads."""
    yield
    gc.collect()


def stop_all(brokers: Iterable[Broker]) -> list[str]:
    """Every broker still running stops gracefully (SIGTERM) and must exit 0; whatever
    happens, each is then killed by PID and its run dir removed. The ones that did not
    exit 0, described for a test failure."""
    unclean = []
    for broker in brokers:
        try:
            if broker.process is not None:
                code = broker.stop(expect_code=None)  # None: did not exit in time, killed
                if code != 0:
                    unclean.append(f"{broker.bootstrap}: exit code {code}\n{broker.stderr(tail=40)}")
        except Exception as exc:
            unclean.append(f"{broker.bootstrap}: {exc!r}")
        finally:
            broker.cleanup()
    return unclean


def start_cluster_broker(broker_factory: Callable[..., Broker], zk_connect: str, node_id: int, workers: int = 1,
                         settings: dict[str, Any] | None = None) -> Broker:
    """A broker of the ZooKeeper cluster at ``zk_connect`` (``settings`` on top), returned once
    its coordinator process registered it: it does so a moment after the workers serve, and
    until then CreateTopics counts no live broker for it."""
    from kazoo.client import KazooClient

    broker = broker_factory(workers=workers, overrides={
        "zookeeper.connect": zk_connect, "node.id": node_id, "zookeeper.session.timeout.ms": 4000, **(settings or {})})
    client = KazooClient(hosts=zk_connect)
    client.start(timeout=10)
    try:
        wait_until(lambda: client.exists(f"/brokers/ids/{node_id}"), 20, f"broker {node_id} registered")
    finally:
        client.stop()
        client.close()
    return broker


@pytest.fixture
def broker_factory(request: pytest.FixtureRequest, tmp_path: Any) -> Iterator[Callable[..., Broker]]:
    brokers: list[Broker] = []
    request.node._castle_brokers = brokers

    def make(workers: int = 2, overrides: dict[str, Any] | None = None, start: bool = True) -> Broker:
        base = os.path.join(str(tmp_path), f"broker{len(brokers)}")
        os.makedirs(base)
        broker = Broker(base, workers, overrides or {})
        brokers.append(broker)
        if start:
            broker.start()
        return broker

    yield make
    unclean = stop_all(brokers)
    if unclean:
        pytest.fail("broker did not stop cleanly on SIGTERM: " + "\n".join(unclean))


@pytest.fixture
def broker(request: pytest.FixtureRequest, broker_factory: Callable[..., Broker]) -> Broker:
    """One broker; ``@pytest.mark.parametrize("broker", [{"workers": 4, "num.partitions": 6}], indirect=True)``."""
    params = dict(getattr(request, "param", None) or {})
    workers = int(params.pop("workers", 2))
    return broker_factory(workers=workers, overrides=params)


def shared_broker(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    """The body of a module's own ``broker`` fixture of scope "module": one broker for every
    test of a module whose tests each keep to topics (and groups) of their own and leave it
    serving, so that a test pays for its requests, not for starting a broker. Parametrized as
    ``broker`` is (one broker per distinct parameter); stopped as broker_factory stops its own.

        @pytest.fixture(scope="module")
        def broker(request, tmp_path_factory):
            yield from shared_broker(request, tmp_path_factory)
    """
    params = dict(getattr(request, "param", None) or {})
    workers = int(params.pop("workers", 2))
    broker = Broker(str(tmp_path_factory.mktemp("broker")), workers, params)
    try:
        broker.start()
        yield broker
    finally:
        unclean = stop_all([broker])
    if unclean:
        pytest.fail("broker did not stop cleanly on SIGTERM: " + "\n".join(unclean))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    if report.failed:
        brokers = list(getattr(item, "_castle_brokers", []))
        shared = getattr(item, "funcargs", {}).get("broker")  # a module's shared_broker
        if isinstance(shared, Broker) and shared not in brokers:
            brokers.append(shared)
        for broker in brokers:
            report.sections.append((f"castle broker {broker.bootstrap} stderr ({broker.stderr_path})", broker.stderr()))
        for member in getattr(item, "_castle_members", []):  # test_groups.py's member processes
            report.sections.append((f"group member pid {member.pid} stderr ({member.stderr_path})", member.stderr_tail(60)))
