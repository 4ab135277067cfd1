"""Apache Kafka itself, one node, as a peer the load runner compares Castle with.

    # the runner starts it, runs every workload against both brokers, and stops it
    .venv/bin/python -m loadtest.runner loadtest/workloads/max-throughput-100b.toml \\
        --start-castle --compare kafka --repeat 3

    # or alone, to point any tool at it (prints PID= and BOOTSTRAP=, stops on SIGTERM or Ctrl-C)
    .venv/bin/python -m loadtest.kafka_peer --kafka-version 4.4.0 --partitions 4

The broker's jars come from Maven Central, ONCE, into
``~/.cache/castle-kafka-broker/<version>/lib`` (loadtest/maven_jars.py): ``kafka_2.13`` with its
runtime dependencies, plus the slf4j binding the release's own distribution ships (its POM
declares none, and without one the broker logs nothing at all). Java 17 or newer is needed
for the 4.x line.

What runs is what ``kafka-server-start.sh server.properties`` runs: ``java -cp '<lib>/*'
kafka.Kafka server.properties`` with the start script's heap (1 GiB, fixed) and its G1
settings, as a child in its own session, stopped by its PID (SIGTERM, which makes the broker
shut down in order, then SIGKILL after a timeout). Its log4j output and the JVM's go to one
file named by the caller (the runner puts it in the run's output folder), the GC log beside
it; the data, the config and the formatted storage live in a temporary folder removed on stop.

Modes:

* ``kraft`` (the only mode of 4.x): one process with ``process.roles=broker,controller``,
  a PLAINTEXT listener and a CONTROLLER listener on free 127.0.0.1 ports, its storage
  formatted first by ``kafka.tools.StorageTool format --standalone`` (``kafka-storage.sh``),
  which makes the node the single voter of a dynamic quorum.
* ``zookeeper`` (3.x only, e.g. ``--kafka-version 3.9.1``): a ZooKeeper server from the
  ``zookeeper`` jar Kafka 3.x depends on, then the broker; the broker's figures are
  those of the two processes together, as a deployment of it needs both.

Everything else is Kafka's default, but what one node needs (replication factor 1 for the
internal topics) and ``num.partitions``. ``overrides`` add or replace settings.
"""

from __future__ import annotations

import argparse
import base64
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import IO, Any

from loadtest import maven_jars
from loadtest.brokers import free_port, wait_until
from loadtest.common import file_tail, info, parse_key_values

DEFAULT_VERSION = "4.4.0"
MODES = ("kraft", "zookeeper")
HEAP = "1g"
START_TIMEOUT_S = 180.0  # a cold JVM on a busy small machine: class loading, the quorum, the first metadata
FORMAT_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 60.0  # a controlled shutdown flushes and checkpoints every partition

# kafka-run-class.sh's KAFKA_JVM_PERFORMANCE_OPTS, which kafka-server-start.sh leaves as they are.
JVM_PERFORMANCE_FLAGS = ["-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-XX:InitiatingHeapOccupancyPercent=35",
                         "-XX:+ExplicitGCInvokesConcurrent", "-XX:MaxInlineLevel=15", "-Djava.awt.headless=true"]

KAFKA_MAIN = "kafka.Kafka"  # kafka-server-start.sh
STORAGE_TOOL = "kafka.tools.StorageTool"  # kafka-storage.sh
ZOOKEEPER_MAIN = "org.apache.zookeeper.server.quorum.QuorumPeerMain"  # zookeeper-server-start.sh

# Kafka's own console layout (config/log4j2.yaml of 4.x, config/log4j.properties of 3.x),
# to stdout, which the launcher sends to the log file.
_LOG4J2 = """status = warn
shutdownHook = disable
appender.out.type = Console
appender.out.name = STDOUT
appender.out.target = SYSTEM_OUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.out.ref = STDOUT
logger.request.name = kafka.request.logger
logger.request.level = WARN
"""

_LOG4J1 = """log4j.rootLogger=INFO, stdout
log4j.appender.stdout=org.apache.log4j.ConsoleAppender
log4j.appender.stdout.layout=org.apache.log4j.PatternLayout
log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.request.logger=WARN
"""


def major(version: str) -> int:
    head = version.split(".", 1)[0]
    if not head.isdigit():
        raise ValueError(f"not a Kafka version: {version!r}")
    return int(head)


def cache_dir(version: str) -> Path:
    return Path.home() / ".cache" / "castle-kafka-broker" / version


def coordinates(version: str) -> list[str]:
    """kafka_2.13 first (its dependencies' versions win), then the logging binding of the
    release's distribution: log4j 2 from 4.0 on, reload4j before."""
    if major(version) >= 4:
        binding = "org.apache.logging.log4j:log4j-slf4j-impl:2.25.5"
    else:
        binding = "org.slf4j:slf4j-reload4j:1.7.36"
    return [f"org.apache.kafka:kafka_2.13:{version}", binding]


def broker_jars(version: str) -> Path:
    """The folder of every jar the broker of ``version`` runs with; fetched on the first call."""
    return maven_jars.fetch_jars(cache_dir(version), coordinates(version), expect=f"kafka_2.13-{version}.jar")


def missing_tools(version: str = DEFAULT_VERSION) -> list[str]:
    return maven_jars.missing_tools(cache_dir(version))


def cluster_id() -> str:
    """A random id as ``kafka-storage.sh random-uuid`` prints it: 16 bytes in URL-safe
    base64 without padding, never starting with '-' (Kafka rejects that: it reads as an option)."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def write_properties(path: Path, settings: dict[str, str]) -> None:
    path.write_text("".join(f"{key}={value}\n" for key, value in settings.items()))


def server_settings(mode: str, port: int, data_dir: Path, partitions: int, controller_port: int | None = None,
                    zookeeper: str | None = None) -> dict[str, str]:
    """server.properties of a one-node broker: Kafka's defaults but for what one node needs."""
    address = f"127.0.0.1:{port}"
    settings = {"node.id" if mode == "kraft" else "broker.id": "1", "log.dirs": str(data_dir),
                "num.partitions": str(partitions),
                # The internal topics' defaults (3 replicas) cannot be met by one node.
                "offsets.topic.replication.factor": "1", "transaction.state.log.replication.factor": "1",
                "transaction.state.log.min.isr": "1"}
    if mode == "kraft":
        assert controller_port is not None
        controller = f"127.0.0.1:{controller_port}"
        settings.update({"process.roles": "broker,controller",
                         "listeners": f"PLAINTEXT://{address},CONTROLLER://{controller}",
                         "advertised.listeners": f"PLAINTEXT://{address},CONTROLLER://{controller}",
                         "controller.listener.names": "CONTROLLER", "inter.broker.listener.name": "PLAINTEXT",
                         "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
                         "controller.quorum.bootstrap.servers": controller,
                         "share.coordinator.state.topic.replication.factor": "1",
                         "share.coordinator.state.topic.min.isr": "1"})
    else:
        assert zookeeper is not None
        settings.update({"listeners": f"PLAINTEXT://{address}", "advertised.listeners": f"PLAINTEXT://{address}",
                         "zookeeper.connect": zookeeper})
    return settings


class JavaChild:
    """One JVM as a child in its own session, its stdout and stderr appended to a log file."""

    def __init__(self, name: str, command: list[str], log: IO[bytes]) -> None:
        self.name = name
        env = dict(os.environ)
        env.pop("JAVA_TOOL_OPTIONS", None)  # it makes the JVM print "Picked up ..."
        self.process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                        env=env, start_new_session=True)

    @property
    def pid(self) -> int:
        return self.process.pid

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> int | None:
        """SIGTERM, then SIGKILL if it has not exited after ``timeout`` s; the exit code (None: killed)."""
        if self.process.poll() is not None:
            return self.process.returncode
        os.kill(self.pid, signal.SIGTERM)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            info(f"WARNING: {self.name} (pid {self.pid}) did not exit {timeout:.0f} s after SIGTERM; SIGKILL")
            os.kill(self.pid, signal.SIGKILL)
            self.process.wait(10)
            return None


class KafkaPeer:
    """A one-node Apache Kafka broker started for a run: ``bootstrap``, ``pid`` (the
    broker's JVM) and ``pids`` (every process of it, ZooKeeper's too), ``stop()``.

    ``log_path`` receives the broker's log (and the storage format's output); the GC log
    and, in zookeeper mode, ZooKeeper's log go beside it. ``base_dir`` is where the
    temporary folder of data and config is made (default: the system's temporary folder).
    """

    def __init__(self, log_path: str, version: str = DEFAULT_VERSION, mode: str = "kraft", partitions: int = 1,
                 overrides: dict[str, str] | None = None, base_dir: str | None = None, heap: str = HEAP,
                 zookeeper: str | None = None) -> None:
        if mode not in MODES:
            raise ValueError(f"mode: one of {MODES}, not {mode!r}")
        if mode == "zookeeper" and major(version) >= 4:
            raise ValueError(f"Kafka {version} has no ZooKeeper mode (removed in 4.0); use 3.x, e.g. 3.9.1")
        self.version, self.mode = version, mode
        # zookeeper mode: an ensemble already running (host:port[/chroot]), shared by the
        # brokers of a cluster (their broker.id in ``overrides``); else one is started here.
        self.zookeeper = zookeeper
        self.log_path = Path(log_path)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self.lib = broker_jars(version)  # before any port is taken: the first fetch takes minutes
        self.dir = Path(tempfile.mkdtemp(prefix=f"kafka-{version}-", dir=base_dir))
        self.port = free_port()
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.children: list[JavaChild] = []
        self.broker_id = 1
        self._logs: list[IO[bytes]] = []
        try:
            self._start(partitions, overrides or {}, heap)
        except BaseException:
            self.stop()
            raise

    @property
    def pid(self) -> int:
        return self.children[-1].pid  # the broker is started last

    @property
    def pids(self) -> list[int]:
        return [child.pid for child in self.children]

    def _java(self, flags: list[str], main_class: str, *args: str) -> list[str]:
        return ["java", *flags, "-cp", f"{self.lib}/*", main_class, *args]

    def _log_flags(self) -> list[str]:
        if major(self.version) >= 4:
            config = self.dir / "log4j2.properties"
            config.write_text(_LOG4J2)
            return [f"-Dlog4j2.configurationFile={config}"]
        config = self.dir / "log4j.properties"
        config.write_text(_LOG4J1)
        return [f"-Dlog4j.configuration=file:{config}"]

    def _open_log(self, path: Path) -> IO[bytes]:
        handle = open(path, "ab")
        self._logs.append(handle)
        return handle

    def _start(self, partitions: int, overrides: dict[str, str], heap: str) -> None:
        data = self.dir / "data"
        log = self._open_log(self.log_path)
        log.write(f"== Kafka {self.version} ({self.mode}) from {self.lib}\n".encode())
        log.flush()
        if self.mode == "kraft":
            settings = server_settings("kraft", self.port, data, partitions, controller_port=free_port())
        else:
            settings = server_settings("zookeeper", self.port, data, partitions,
                                       zookeeper=self.zookeeper or f"127.0.0.1:{self._start_zookeeper()}")
        settings.update(overrides)
        self.broker_id = int(settings.get("broker.id", settings.get("node.id", "1")))
        properties = self.dir / "server.properties"
        write_properties(properties, settings)
        log_flags = self._log_flags()
        if self.mode == "kraft":
            done = subprocess.run(self._java(log_flags, STORAGE_TOOL, "format", "-t", cluster_id(), "-c", str(properties),
                                             "--standalone"),
                                  stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, timeout=FORMAT_TIMEOUT_S)
            if done.returncode != 0:
                raise RuntimeError(f"kafka-storage format exited with {done.returncode}:\n{self.log_tail()}")
        gc_log = self.log_path.with_name(self.log_path.stem + "-gc.log")
        flags = [f"-Xms{heap}", f"-Xmx{heap}", *JVM_PERFORMANCE_FLAGS,
                 f"-Xlog:gc*:file={gc_log}:time,tags:filecount=10,filesize=100M", *log_flags]
        self.children.append(JavaChild("kafka", self._java(flags, KAFKA_MAIN, str(properties)), log))

    def _start_zookeeper(self) -> int:
        """ZooKeeper as zookeeper-server-start.sh runs it, on a free port; returns the port."""
        port = free_port()
        config = self.dir / "zookeeper.properties"
        write_properties(config, {"dataDir": str(self.dir / "zookeeper"), "clientPort": str(port),
                                  "clientPortAddress": "127.0.0.1", "maxClientCnxns": "0",
                                  "admin.enableServer": "false"})
        log_path = self.log_path.with_name(self.log_path.stem + "-zookeeper.log")
        # zookeeper-server-start.sh's heap
        flags = ["-Xms512m", "-Xmx512m", *JVM_PERFORMANCE_FLAGS, *self._log_flags()]
        child = JavaChild("zookeeper", self._java(flags, ZOOKEEPER_MAIN, str(config)), self._open_log(log_path))
        self.children.append(child)

        def accepting() -> bool:
            if child.process.poll() is not None:
                raise RuntimeError(f"ZooKeeper exited with {child.process.returncode}:\n{file_tail(str(log_path), 30)}")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    return True
            except OSError:
                return False

        wait_until(accepting, START_TIMEOUT_S, f"ZooKeeper on 127.0.0.1:{port}", interval=0.2)
        return port

    def wait_ready(self, timeout: float = START_TIMEOUT_S) -> None:
        """Until the broker answers a Metadata request naming itself (bounded by ``timeout`` s).

        The port is polled first: librdkafka logs every refused connection on stderr.
        """
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import AdminClient

        broker = self.children[-1]

        def alive() -> None:
            if broker.process.poll() is not None:
                raise RuntimeError(f"Kafka exited with {broker.process.returncode} while starting:\n{self.log_tail()}")

        def accepting() -> bool:
            alive()
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return True
            except OSError:
                return False

        started = time.monotonic()
        wait_until(accepting, timeout, f"Kafka's listener on {self.bootstrap}", interval=0.2)
        admin = AdminClient({"bootstrap.servers": self.bootstrap})

        def answers() -> bool:
            alive()
            try:
                metadata = admin.list_topics(timeout=5)
            except KafkaException:
                return False
            return self.broker_id in metadata.brokers

        wait_until(answers, max(1.0, timeout - (time.monotonic() - started)), f"Kafka's metadata on {self.bootstrap}",
                   interval=0.5)

    def log_tail(self, lines: int = 40) -> str:
        for log in self._logs:
            log.flush()
        return file_tail(str(self.log_path), lines)

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> int | None:
        """Stops the broker, then ZooKeeper (the reverse of the start), each by its PID;
        removes the temporary folder. The broker's exit code (None: killed or never started)."""
        codes = [child.stop(timeout) for child in reversed(self.children)]
        for log in self._logs:
            log.close()
        self._logs = []
        shutil.rmtree(self.dir, ignore_errors=True)
        return codes[0] if codes else None

    def __enter__(self) -> KafkaPeer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m loadtest.kafka_peer", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kafka-version", default=DEFAULT_VERSION, help=f"default {DEFAULT_VERSION}")
    parser.add_argument("--kafka-mode", choices=MODES, default="kraft", help="zookeeper needs a 3.x version")
    parser.add_argument("--partitions", type=int, default=1, help="num.partitions (default 1)")
    parser.add_argument("--kafka-override", action="append", default=[], metavar="KEY=VALUE",
                        help="a server.properties setting (repeatable)")
    parser.add_argument("--log", default=None, help="the broker's log file (default kafka-<version>.log here)")
    args = parser.parse_args(argv)
    stopping = threading.Event()
    # Handlers, not a blocked mask and sigwait: the JVMs would inherit the mask and ignore SIGTERM.
    for number in (signal.SIGTERM, signal.SIGINT):
        signal.signal(number, lambda received, _frame: stopping.set())
    peer = KafkaPeer(args.log or f"kafka-{args.kafka_version}.log", args.kafka_version, args.kafka_mode, args.partitions,
                     parse_key_values(args.kafka_override, "--kafka-override"))
    try:
        peer.wait_ready()
        print(f"PID={peer.pid}", flush=True)
        print(f"BOOTSTRAP={peer.bootstrap}", flush=True)
        while not stopping.wait(1.0):
            if peer.children[-1].process.poll() is not None:
                print("kafka_peer: Kafka exited on its own", file=sys.stderr, flush=True)
                break
    finally:
        code = peer.stop()
    print(f"kafka_peer: Kafka exited with {code}", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
