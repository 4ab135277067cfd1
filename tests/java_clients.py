"""Kafka's Java clients and Kafka Streams as child processes, for tests against Castle.

The programs are the Java sources in tests/java/castle/ (TxnProducer, TxnConsumer, TxnCopier,
WordCount: each file says what it prints). Their jars (kafka-clients, kafka-streams and their
runtime dependencies) are fetched ONCE with Maven (loadtest/maven_jars.py) into
``~/.cache/castle-kafka-java/<version>/lib``, outside the repository; the sources are compiled
with ``javac`` into ``<that cache>/classes-<hash of the sources>``, so once per change of the
sources, not once per test.

    from tests.java_clients import run_java, start_java
    done = run_java("castle.TxnProducer", ["bootstrap=127.0.0.1:9092", "topic=t", "txn-id=p",
                                           "pattern=CAC", "records=10"], timeout=60)
    streams = start_java("castle.WordCount", [...], log_dir=tmp_path)  # a JavaProcess
    streams.wait_for_line("STATE RUNNING", timeout=60); streams.kill()  # SIGKILL, by PID

Every program takes ``name=value`` words: its own options (no dot in the name) and Kafka client
configs (a dotted name), passed to the client as they are. Each prints one event a line on
stdout; a test judges by those lines. The version is ``CASTLE_KAFKA_JAVA_VERSION`` (default
4.4.0, the newest 4.x).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from loadtest import maven_jars
from tests.client_process import ClientProcess, lines_with  # noqa: F401  (lines_with: re-exported to the tests)

KAFKA_VERSION = os.environ.get("CASTLE_KAFKA_JAVA_VERSION", "4.4.0")
# kafka-clients depends on slf4j-api 1.7; declaring 2.x first makes it the one copied, the one the
# simple binding (warnings on stderr, where a failed test shows them) needs.
SLF4J_VERSION = "2.0.20"
SOURCES = Path(__file__).resolve().parent / "java"
COMPILE_TIMEOUT = 180.0

# Short-lived JVMs on a small machine: start fast, keep the heap small.
_JVM_FLAGS = ["-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xss1m", "-Xmx256m", "-Djava.awt.headless=true",
              "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-Dorg.slf4j.simpleLogger.showDateTime=true"]


def cache_dir(version: str = KAFKA_VERSION) -> Path:
    return Path.home() / ".cache" / "castle-kafka-java" / version


def missing_tools() -> list[str]:
    """The programs needed that are not on PATH: ``java`` and ``javac`` always, ``mvn`` until fetched."""
    missing = maven_jars.missing_tools(cache_dir())
    if shutil.which("javac") is None:
        missing.append("javac")
    return missing


def ensure_jars(version: str = KAFKA_VERSION) -> Path:
    """The directory holding kafka-clients, kafka-streams and their dependencies; fetched on the first call only."""
    coordinates = [f"org.slf4j:slf4j-api:{SLF4J_VERSION}", f"org.slf4j:slf4j-simple:{SLF4J_VERSION}",
                   f"org.apache.kafka:kafka-clients:{version}", f"org.apache.kafka:kafka-streams:{version}"]
    return maven_jars.fetch_jars(cache_dir(version), coordinates, expect=f"kafka-streams-{version}.jar")


def _sources() -> list[Path]:
    return sorted(SOURCES.rglob("*.java"))


def ensure_classes(version: str = KAFKA_VERSION) -> Path:
    """The directory of the compiled programs; compiled when the sources changed (a hash names it).

    A lock makes concurrent callers (pytest-xdist workers) compile once; the directory is filled
    under a temporary name and renamed, so a half-compiled one is never used.
    """
    lib = ensure_jars(version)
    digest = hashlib.sha256()
    for source in _sources():
        digest.update(source.relative_to(SOURCES).as_posix().encode() + b"\0" + source.read_bytes() + b"\0")
    classes = cache_dir(version) / f"classes-{digest.hexdigest()[:16]}"
    if classes.exists():
        return classes
    with open(cache_dir(version) / ".compile-lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if classes.exists():  # another process compiled while this one waited
            return classes
        building = classes.with_name(classes.name + ".building")
        shutil.rmtree(building, ignore_errors=True)
        building.mkdir()
        done = subprocess.run(["javac", "-nowarn", "-encoding", "UTF-8", "--release", "17", "-cp", f"{lib}/*",
                               "-d", str(building), *map(str, _sources())],
                              capture_output=True, text=True, timeout=COMPILE_TIMEOUT, stdin=subprocess.DEVNULL)
        if done.returncode != 0:
            raise RuntimeError(f"javac failed (exit {done.returncode}):\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}")
        building.rename(classes)
    return classes


def java_command(main_class: str, args: list[str], jvm_flags: list[str] | None = None) -> list[str]:
    """``java ... -cp <classes>:<lib>/* MAIN_CLASS ARGS``; fetches and compiles first if needed."""
    classes = ensure_classes()
    classpath = f"{classes}:{cache_dir() / 'lib'}/*"
    return ["java", *_JVM_FLAGS, *(jvm_flags or []), "-cp", classpath, main_class, *args]


def _environment() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("JAVA_TOOL_OPTIONS", None)  # it makes the JVM print "Picked up ..." on stderr
    return env


def run_java(main_class: str, args: list[str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run a program to its end, bounded by ``timeout`` seconds (the fetch and compile are not counted).

    Never raises on a non-zero exit: the caller checks ``returncode``, ``stdout`` and ``stderr``.
    """
    command = java_command(main_class, args)
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL,
                          env=_environment())


class JavaProcess(ClientProcess):
    """A program running in the background (tests/client_process.py), stopped by its own PID."""

    def __init__(self, main_class: str, args: list[str], log_dir: Path, name: str,
                 jvm_flags: list[str] | None = None) -> None:
        super().__init__(java_command(main_class, args, jvm_flags), log_dir, name, env=_environment())


def start_java(main_class: str, args: list[str], log_dir: Path, name: str | None = None,
               jvm_flags: list[str] | None = None) -> JavaProcess:
    """``jvm_flags`` e.g. ``["-Dorg.slf4j.simpleLogger.log.org.apache.kafka.clients.consumer=info"]``: the
    clients log at WARN on stderr unless told otherwise."""
    return JavaProcess(main_class, args, log_dir, name or main_class.rsplit(".", 1)[-1], jvm_flags)


@pytest.fixture(autouse=True)
def java_present() -> None:
    """Autouse in every module that imports it. CI installs a JDK and Maven (.ci/run): their
    absence is a failure, not a skip."""
    missing = missing_tools()
    if missing:
        pytest.fail(f"Kafka's Java clients and Kafka Streams need {', '.join(missing)} on PATH "
                    "(apt-get install default-jdk-headless maven)")
    ensure_classes()  # fetched and compiled once, here rather than inside a test's own waits
