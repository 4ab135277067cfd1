"""Compiling and running the Java programs of tests/java_coordinator against Kafka's broker jars
(those of the Kafka peer, loadtest/kafka_peer.py): Kafka's own record serializers, for the
kafka_serde tests of Castle's record encoders."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from loadtest.kafka_peer import DEFAULT_VERSION, broker_jars, missing_tools

SOURCES = Path(__file__).resolve().parents[2] / "java_coordinator" / "castle"
COMPILE_TIMEOUT = 180.0
RUN_TIMEOUT = 60.0


def compile_program(name: str, classes: Path) -> str:
    """Compile castle/<name>.java into ``classes``; the classpath to run it with."""
    missing = missing_tools(DEFAULT_VERSION) + [tool for tool in ("javac",) if shutil.which(tool) is None]
    if missing:
        pytest.fail(f"Kafka's serializer needs {', '.join(missing)} on PATH (apt-get install default-jdk-headless maven)")
    lib = broker_jars(DEFAULT_VERSION)
    done = subprocess.run(["javac", "-nowarn", "-encoding", "UTF-8", "--release", "17", "-cp", f"{lib}/*",
                           "-d", str(classes), str(SOURCES / f"{name}.java")],
                          capture_output=True, text=True, timeout=COMPILE_TIMEOUT, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, f"javac failed:\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    return f"{classes}:{lib}/*"


def run_program(classpath: str, name: str, stdin: str) -> list[list[str]]:
    """Run castle.<name> with ``stdin``; its output lines, split into words."""
    done = subprocess.run(["java", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xmx128m", "-cp", classpath,
                           f"castle.{name}"],
                          input=stdin, capture_output=True, text=True, timeout=RUN_TIMEOUT)
    assert done.returncode == 0, done.stderr[-4000:]
    return [line.split(" ") for line in done.stdout.splitlines()]
