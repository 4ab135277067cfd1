"""What a benchmark result records about where and on what it ran: the machine and the
code (git commit and modified files)."""

from __future__ import annotations

import os
import platform
import socket
import subprocess
from typing import Any

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def machine_info() -> dict[str, Any]:
    try:
        with open("/proc/cpuinfo") as handle:
            cpuinfo = handle.read()
    except OSError:
        cpuinfo = ""

    def field(name: str) -> str | None:
        return next((line.split(":", 1)[1].strip() for line in cpuinfo.splitlines() if line.startswith(name)), None)

    mem = None
    try:
        with open("/proc/meminfo") as handle:
            mem = int(handle.readline().split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        import confluent_kafka

        clients = {"confluent_kafka": confluent_kafka.__version__, "librdkafka": confluent_kafka.libversion()[0]}
    except ImportError:
        clients = {}
    return {
        "nproc": len(os.sched_getaffinity(0)),
        "cpu_count": os.cpu_count(),
        "cpu_model": field("model name"),
        "cpu_family": field("cpu family"),
        "cpu_model_number": field("model\t"),
        "cpu_mhz": field("cpu MHz"),
        "mem_total_bytes": mem,
        "kernel": platform.release(),
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "hostname": socket.gethostname(),
        **clients,
    }


def git_state() -> dict[str, Any]:
    def git(*cmd: str) -> str | None:
        try:
            return subprocess.run(["git", *cmd], cwd=REPO_ROOT, capture_output=True, text=True, timeout=10).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return None

    status = git("status", "--porcelain", "--untracked-files=no")
    return {"source_dir": REPO_ROOT, "commit": git("rev-parse", "HEAD") or None,
            "subject": git("log", "-1", "--format=%s") or None,
            "modified_files": status.splitlines() if status else []}  # fmt: skip
