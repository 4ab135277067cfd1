"""Apache Kafka's own command-line tools (kafka-topics.sh, kafka-configs.sh, ...), run as Java.

The ``kafka-*.sh`` scripts are thin wrappers around a main class; this module fetches the
jars those classes need ONCE with Maven into ``~/.cache/castle-kafka-cli/<version>/lib``
(outside the repository) and runs a main class with ``java -cp '<lib>/*'``.

    from tests.kafka_cli import TOPIC_COMMAND, run_tool
    done = run_tool(TOPIC_COMMAND, ["--bootstrap-server", "127.0.0.1:9092", "--list"])

The version is ``CASTLE_KAFKA_CLI_VERSION`` (default 4.0.0); the main classes below are the
ones of the 4.0 line (``kafka-configs.sh`` still runs the Scala ``kafka.admin.ConfigCommand``).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import time
from pathlib import Path

KAFKA_VERSION = os.environ.get("CASTLE_KAFKA_CLI_VERSION", "4.0.0")
SLF4J_VERSION = "1.7.36"  # the slf4j-api the 4.0 tools depend on; its nop binding silences the "no binder" warning

CONFIG_COMMAND = "kafka.admin.ConfigCommand"  # kafka-configs.sh
TOPIC_COMMAND = "org.apache.kafka.tools.TopicCommand"  # kafka-topics.sh
REASSIGN_COMMAND = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"  # kafka-reassign-partitions.sh
LEADER_ELECTION_COMMAND = "org.apache.kafka.tools.LeaderElectionCommand"  # kafka-leader-election.sh

FETCH_TIMEOUT = 900.0
COMPLETE_MARKER = ".complete"

_POM = """<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.castle</groupId>
  <artifactId>castle-kafka-cli</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.kafka</groupId>
      <artifactId>kafka_2.13</artifactId>
      <version>{kafka}</version>
    </dependency>
    <dependency>
      <groupId>org.apache.kafka</groupId>
      <artifactId>kafka-tools</artifactId>
      <version>{kafka}</version>
    </dependency>
    <dependency>
      <groupId>org.slf4j</groupId>
      <artifactId>slf4j-nop</artifactId>
      <version>{slf4j}</version>
    </dependency>
  </dependencies>
</project>
"""

# Short-lived JVMs: start fast rather than run fast.
_JVM_FLAGS = ["-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xss1m", "-Djava.awt.headless=true"]


def cache_dir(version: str = KAFKA_VERSION) -> Path:
    return Path.home() / ".cache" / "castle-kafka-cli" / version


def missing_tools() -> list[str]:
    """The programs this module needs that are not on PATH (``java`` always, ``mvn`` until fetched)."""
    needed = ["java"] if (cache_dir() / COMPLETE_MARKER).exists() else ["java", "mvn"]
    return [name for name in needed if shutil.which(name) is None]


def ensure_jars(version: str = KAFKA_VERSION) -> Path:
    """The directory holding every jar the tools of ``version`` need; fetched on the first call only.

    A lock file makes concurrent callers (pytest-xdist workers) fetch once; a marker file,
    written last, makes an interrupted fetch start over rather than leave half a classpath.
    """
    root = cache_dir(version)
    lib = root / "lib"
    marker = root / COMPLETE_MARKER
    if marker.exists():
        return lib
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if marker.exists():  # another process fetched while this one waited
            return lib
        if lib.exists():
            shutil.rmtree(lib)
        (root / "pom.xml").write_text(_POM.format(kafka=version, slf4j=SLF4J_VERSION))
        started = time.monotonic()
        done = subprocess.run(
            ["mvn", "-q", "-B", "-f", str(root / "pom.xml"), "dependency:copy-dependencies",
             f"-DoutputDirectory={lib}", "-DincludeScope=runtime"],
            capture_output=True, text=True, timeout=FETCH_TIMEOUT, stdin=subprocess.DEVNULL, cwd=root)
        if done.returncode != 0:
            raise RuntimeError(f"mvn could not fetch the Kafka {version} tools (exit {done.returncode}):\n"
                               f"{done.stdout[-4000:]}\n{done.stderr[-4000:]}")
        jars = sorted(lib.glob("*.jar"))
        if not any(jar.name == f"kafka-tools-{version}.jar" for jar in jars):
            raise RuntimeError(f"mvn finished but {lib} holds no kafka-tools-{version}.jar")
        size = sum(jar.stat().st_size for jar in jars)
        marker.write_text(f"{len(jars)} jars, {size} bytes, fetched in {time.monotonic() - started:.1f} s\n")
    return lib


def run_tool(main_class: str, args: list[str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run ``java -cp '<lib>/*' MAIN_CLASS ARGS``, bounded by ``timeout`` seconds (the fetch is not counted).

    Never raises on a non-zero exit: the caller checks ``returncode``, ``stdout`` and ``stderr``.
    """
    lib = ensure_jars()
    command = ["java", *_JVM_FLAGS, "-cp", f"{lib}/*", main_class, *args]
    env = dict(os.environ)
    env.pop("JAVA_TOOL_OPTIONS", None)  # it makes the JVM print "Picked up ..." on stderr
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL, env=env)
