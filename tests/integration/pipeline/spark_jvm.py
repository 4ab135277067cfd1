"""How the tests start Spark's JVMs: fast, for JVMs that live seconds and do little.

Every PySpark session starts two JVMs (spark-submit's launcher, then the driver) and a
local-cluster master one per executor; loading Spark's classes is most of a driver's
start-up. So, as tests/java_clients.py runs its JVMs, C1 alone and the serial collector;
and the driver maps a class-data archive (AppCDS) of the classes a small job loads: made
once per machine by a throwaway session (~/.cache/castle-spark-cds, one per PySpark
version and java), then shared read-only by every driver. A JVM that cannot use the
archive (another JDK build) starts without it; its warnings go to stderr, never to the
stdout the tests read a job's results from.
"""

from __future__ import annotations

import fcntl
import os
import shlex
import shutil
import signal
import subprocess
import sys
from pathlib import Path

JVM_FLAGS = ["-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xlog:disable", "-Xlog:all=warning:stderr"]
ARCHIVE_TIMEOUT = 120.0  # made within a test's time (pytest-timeout): past this, the JVMs start without it

# What the archiving session runs: a batch job with a shuffle, and the castle source registered.
# The driver writes the archive as it exits, once its stdin closes; the job waits for that.
ARCHIVE_JOB = """
from pyspark import SparkContext
from pyspark.sql import SparkSession
from pipeline import register
spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
         .config("spark.sql.shuffle.partitions", "2").getOrCreate())
register(spark)
spark.range(1000).selectExpr("id % 7 AS k").groupBy("k").count().collect()
driver = SparkContext._gateway.proc
spark.stop()
driver.stdin.close()
raise SystemExit(driver.wait())
"""


def archive_path() -> Path:
    import pyspark

    java = os.path.realpath(shutil.which("java") or "java")
    name = f"spark-{pyspark.__version__}-{java.strip('/').replace('/', '_')}.jsa"
    return Path.home() / ".cache" / "castle-spark-cds" / name


def spark_jvm_env(archive: Path | None) -> dict[str, str]:
    """The environment that gives JVM_FLAGS to every JVM a PySpark session starts (the launcher,
    the driver, the executors of a local-cluster master) and ``archive`` to the driver."""
    driver = JVM_FLAGS + ([f"-XX:SharedArchiveFile={archive}"] if archive is not None else [])
    flags = " ".join(JVM_FLAGS)
    return {"SPARK_LAUNCHER_OPTS": flags,
            "PYSPARK_SUBMIT_ARGS": shlex.join(["--driver-java-options", " ".join(driver),
                                               "--conf", f"spark.executor.extraJavaOptions={flags}", "pyspark-shell"])}


def ensure_archive() -> Path | None:
    """The archive, made first if missing (one process makes it, others wait on a lock); None
    if it could not be made: the JVMs then start without one."""
    path = archive_path()
    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if path.exists():
            return path
        partial = path.with_name(f"{path.name}.{os.getpid()}.partial")
        env = {**os.environ, "PYSPARK_PYTHON": sys.executable, **spark_jvm_env(None)}
        env["PYSPARK_SUBMIT_ARGS"] = shlex.join(["--driver-java-options",
                                                 " ".join(JVM_FLAGS + [f"-XX:ArchiveClassesAtExit={partial}"]),
                                                 "pyspark-shell"])
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
        # A group of its own: the session's JVMs go with it if it outlives its timeout.
        process = subprocess.Popen([sys.executable, "-c", ARCHIVE_JOB], cwd=root, env=env, stdin=subprocess.DEVNULL,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            code = process.wait(ARCHIVE_TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            code = process.wait(30)
        if code == 0 and partial.exists():
            os.replace(partial, path)
            return path
        partial.unlink(missing_ok=True)
        return None
