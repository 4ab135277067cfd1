"""Static checks that keep the tree honest: layering, types, lint."""

from __future__ import annotations

import ast
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# broker -> coordination -> storage; pipeline and loadtest are clients over the wire
# (loadtest's storage benchmark is the one allowed library user of storage).
FORBIDDEN = {
    "storage": {"broker", "coordination", "pipeline", "loadtest"},
    "coordination": {"broker", "pipeline", "loadtest"},
}


def _imported_packages(path: str) -> set[str]:
    with open(path, encoding="utf-8") as handle:
        tree = ast.parse(handle.read(), path)
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found


def test_import_direction_is_broker_coordination_storage():
    violations = []
    for package, forbidden in FORBIDDEN.items():
        for directory, _dirs, names in os.walk(os.path.join(ROOT, package)):
            for name in names:
                if name.endswith(".py"):
                    path = os.path.join(directory, name)
                    bad = _imported_packages(path) & forbidden
                    if bad:
                        violations.append(f"{os.path.relpath(path, ROOT)} imports {sorted(bad)}")
    assert not violations, violations


# The load tools written for issue 5 are typed too; the older loadtest modules are not checked yet.
TYPED_LOADTEST = ["loadtest/runner", "loadtest/children.py", "loadtest/brokers.py", "loadtest/machine.py",
                  "loadtest/pyspy_summary.py", "loadtest/locustfile.py", "loadtest/loopback_limit.py", "loadtest/ingest_limit.py",
                  "loadtest/spark_read.py"]


# The broker's operational modules (issue 6) and worker routing, typed from the start.
TYPED_BROKER = ["broker/admin", "broker/metrics.py", "broker/logs.py", "broker/reload.py", "broker/sd_notify.py",
                "broker/placement.py", "broker/worker_listeners.py", "broker/tcp_bind.py", "broker/loop_lag.py"]


def test_mypy_passes_on_storage_coordination_and_the_load_tools():
    result = subprocess.run([sys.executable, "-m", "mypy", "storage", "coordination", "pipeline", *TYPED_LOADTEST, *TYPED_BROKER],
                            cwd=ROOT,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_passes():
    result = subprocess.run([sys.executable, "-m", "ruff", "check", "storage", "broker", "coordination", "loadtest", "tests"], cwd=ROOT,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
