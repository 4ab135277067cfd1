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
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import IO

import pytest

from loadtest import maven_jars

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


def lines_with(stdout: str, first_word: str) -> list[list[str]]:
    """The words of every line of ``stdout`` whose first word is ``first_word`` (that word left out)."""
    found = []
    for line in stdout.splitlines():
        words = line.split()
        if words and words[0] == first_word:
            found.append(words[1:])
    return found


class JavaProcess:
    """A program running in the background; stdout and stderr go to files in ``log_dir`` (read
    while it runs, kept for the failure report). Stopped by its own PID."""

    def __init__(self, main_class: str, args: list[str], log_dir: Path, name: str,
                 jvm_flags: list[str] | None = None) -> None:
        command = java_command(main_class, args, jvm_flags)
        log_dir.mkdir(parents=True, exist_ok=True)
        self.stdout_path = log_dir / f"{name}.out"
        self.stderr_path = log_dir / f"{name}.err"
        self._stdout: IO[bytes] = open(self.stdout_path, "wb")
        self._stderr: IO[bytes] = open(self.stderr_path, "wb")
        self.process = subprocess.Popen(command, stdout=self._stdout, stderr=self._stderr, stdin=subprocess.DEVNULL,
                                        env=_environment())
        self.pid = self.process.pid
        self.name = name

    def stdout(self) -> str:
        return self.stdout_path.read_text(errors="replace")

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def wait_for_line(self, pattern: str, timeout: float) -> re.Match[str]:
        """The first stdout line matching the regular expression ``pattern``; fails after ``timeout``
        seconds, or at once when the process exits without printing one."""
        regex = re.compile(pattern)
        deadline = time.monotonic() + timeout
        while True:
            exited = self.process.poll() is not None
            for line in self.stdout().splitlines():
                match = regex.search(line)
                if match:
                    return match
            if exited:
                raise AssertionError(f"{self.name} exited {self.process.returncode} before printing /{pattern}/:\n"
                                     f"{self.report()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.name}: no line /{pattern}/ in {timeout} s:\n{self.report()}")
            time.sleep(0.1)

    def wait(self, timeout: float) -> int:
        """The exit code; fails (and kills the process) after ``timeout`` seconds."""
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"{self.name} still running after {timeout} s:\n{self.report()}") from None

    def kill(self) -> None:
        """SIGKILL (an unclean stop: no close, no flush, no transaction ended) and reap."""
        if self.process.poll() is None:
            os.kill(self.pid, signal.SIGKILL)
        self.process.wait(30)
        self._close_files()

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM (the program's shutdown hook closes its clients), SIGKILL after ``timeout`` s."""
        if self.process.poll() is None:
            os.kill(self.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                os.kill(self.pid, signal.SIGKILL)
                self.process.wait(30)
        self._close_files()
        return self.process.returncode

    def _close_files(self) -> None:
        self._stdout.close()
        self._stderr.close()

    def report(self, tail: int = 6000) -> str:
        return f"--- stdout\n{self.stdout()[-tail:]}\n--- stderr\n{self.stderr()[-tail:]}"


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
