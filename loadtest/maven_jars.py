"""Jars from Maven Central, fetched ONCE into a cache directory outside the repository.

Apache Kafka is not packaged for Debian; its jars are on Maven Central. A generated POM
lists the artifacts wanted and ``mvn dependency:copy-dependencies`` copies them, with
every runtime dependency, into ``<cache>/lib``; a JVM then runs with ``-cp '<cache>/lib/*'``.

    lib = fetch_jars(Path.home() / ".cache" / "castle-kafka-broker" / "4.4.0",
                     ["org.apache.kafka:kafka_2.13:4.4.0"], expect="kafka_2.13-4.4.0.jar")

Users: loadtest/kafka_peer.py (the Kafka broker the load runner compares with) and
tests/kafka_cli.py (Kafka's command-line tools). Each keeps a cache of its own: the two
classpaths differ in their logging binding, and one classpath may hold only one.
"""

from __future__ import annotations

import fcntl
import shutil
import subprocess
import time
from pathlib import Path

FETCH_TIMEOUT = 900.0
COMPLETE_MARKER = ".complete"

_POM = """<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.castle</groupId>
  <artifactId>{name}</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
{dependencies}
  </dependencies>
</project>
"""

_DEPENDENCY = """    <dependency>
      <groupId>{group}</groupId>
      <artifactId>{artifact}</artifactId>
      <version>{version}</version>
    </dependency>"""


def pom(name: str, coordinates: list[str]) -> str:
    """A POM that depends on each ``group:artifact:version``. Maven settles a version
    conflict by the shortest path, then by the order of declaration: list first the
    artifact whose dependencies' versions must win."""
    entries = []
    for coordinate in coordinates:
        parts = coordinate.split(":")
        if len(parts) != 3 or not all(parts):
            raise ValueError(f"not group:artifact:version: {coordinate!r}")
        group, artifact, version = parts
        entries.append(_DEPENDENCY.format(group=group, artifact=artifact, version=version))
    return _POM.format(name=name, dependencies="\n".join(entries))


def is_fetched(cache: Path) -> bool:
    return (cache / COMPLETE_MARKER).exists()


def missing_tools(cache: Path) -> list[str]:
    """The programs needed that are not on PATH: ``java`` always, ``mvn`` until fetched."""
    needed = ["java"] if is_fetched(cache) else ["java", "mvn"]
    return [name for name in needed if shutil.which(name) is None]


def fetch_jars(cache: Path, coordinates: list[str], expect: str, timeout: float = FETCH_TIMEOUT) -> Path:
    """``<cache>/lib``, holding the jars of ``coordinates`` and all their runtime
    dependencies; fetched on the first call only.

    A lock file makes concurrent callers (pytest-xdist workers, two runners) fetch once; a
    marker file, written last, makes an interrupted fetch start over rather than leave half
    a classpath. ``expect`` names a jar that must be there afterwards.
    """
    lib = cache / "lib"
    if is_fetched(cache):
        return lib
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if is_fetched(cache):  # another process fetched while this one waited
            return lib
        if lib.exists():
            shutil.rmtree(lib)
        (cache / "pom.xml").write_text(pom(cache.parent.name, coordinates))
        started = time.monotonic()
        done = subprocess.run(
            ["mvn", "-q", "-B", "-f", str(cache / "pom.xml"), "dependency:copy-dependencies",
             f"-DoutputDirectory={lib}", "-DincludeScope=runtime"],
            capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL, cwd=cache)
        if done.returncode != 0:
            raise RuntimeError(f"mvn could not fetch {', '.join(coordinates)} (exit {done.returncode}):\n"
                               f"{done.stdout[-4000:]}\n{done.stderr[-4000:]}")
        jars = sorted(lib.glob("*.jar"))
        if not any(jar.name == expect for jar in jars):
            raise RuntimeError(f"mvn finished but {lib} holds no {expect}")
        size = sum(jar.stat().st_size for jar in jars)
        (cache / COMPLETE_MARKER).write_text(f"{len(jars)} jars, {size} bytes, "
                                             f"fetched in {time.monotonic() - started:.1f} s\n")
    return lib
