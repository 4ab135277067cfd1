"""Spark jobs run as child processes: each has its own session and JVM, and is bounded.

The child leads a new process group (the job, its JVM, the JVM's Python workers), and the
whole group is killed if the job outlives its timeout or the test is interrupted."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from tests.integration.pipeline.spark_jvm import ensure_archive, spark_jvm_env

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def job_env(**extra: str) -> dict[str, str]:
    return {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
            **spark_jvm_env(ensure_archive()), **extra}


def run_job(command: list[str], timeout: float, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run to the end (or kill the group at ``timeout`` and fail); stdout and stderr as text."""
    process = subprocess.Popen(command, cwd=REPO, env=env if env is not None else job_env(), stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        _, err = process.communicate(timeout=30)
        raise AssertionError(f"{' '.join(command[:4])} did not finish in {timeout:g} s; stderr:\n{err[-3000:]}") from None
    except BaseException:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(30)
        raise
    return subprocess.CompletedProcess(command, process.returncode, out, err)
