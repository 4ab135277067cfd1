"""Static checks that keep the tree honest: layering, types, lint."""

from __future__ import annotations

import ast
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# broker -> coordination -> storage; pipeline and loadtest are clients over the wire.
FORBIDDEN = {
    "storage": {"broker", "coordination", "pipeline", "loadtest"},
    "coordination": {"broker", "pipeline", "loadtest"},
}

# loadtest/ drives a broker over the wire; its micro-benchmarks of internals live in
# loadtest/micro/, the one place under loadtest/ that imports broker, storage or coordination.
LOADTEST_FORBIDDEN = {"broker", "storage", "coordination"}
LOADTEST_MICRO = os.path.join("loadtest", "micro")


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


def _import_violations(package: str, forbidden: set[str], exempt: str | None = None) -> list[str]:
    """Modules under ``package`` (but not under ``exempt``) that import a ``forbidden`` package."""
    violations = []
    for directory, _dirs, names in os.walk(os.path.join(ROOT, package)):
        relative = os.path.relpath(directory, ROOT)
        if exempt is not None and (relative == exempt or relative.startswith(exempt + os.sep)):
            continue
        for name in names:
            if name.endswith(".py"):
                path = os.path.join(directory, name)
                bad = _imported_packages(path) & forbidden
                if bad:
                    violations.append(f"{os.path.relpath(path, ROOT)} imports {sorted(bad)}")
    return violations


def test_import_direction_is_broker_coordination_storage():
    violations = [v for package, forbidden in FORBIDDEN.items() for v in _import_violations(package, forbidden)]
    assert not violations, violations


def test_only_loadtest_micro_imports_the_broker_storage_or_coordination():
    assert os.path.isdir(os.path.join(ROOT, LOADTEST_MICRO))
    violations = _import_violations("loadtest", LOADTEST_FORBIDDEN, exempt=LOADTEST_MICRO)
    assert not violations, violations


# The load tools are typed: all of loadtest/ but micro/, which imports the broker (not typed as a whole).
TYPED_LOADTEST = ["loadtest/runner", "loadtest/brokers.py", "loadtest/children.py", "loadtest/common.py",
                  "loadtest/ingest_limit.py", "loadtest/locustfile.py", "loadtest/loopback_limit.py", "loadtest/machine.py",
                  "loadtest/mock_broker.py"]


# The broker's operational modules (issue 6) and worker routing, typed from the start.
TYPED_BROKER = ["broker/admin", "broker/metrics.py", "broker/logs.py", "broker/reload.py", "broker/sd_notify.py",
                "broker/placement.py", "broker/tcp_bind.py", "broker/loop_lag.py"]


def test_mypy_passes_on_storage_coordination_and_the_load_tools():
    result = subprocess.run([sys.executable, "-m", "mypy", "storage", "coordination", "pipeline", *TYPED_LOADTEST, *TYPED_BROKER],
                            cwd=ROOT,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_passes():
    result = subprocess.run([sys.executable, "-m", "ruff", "check", "storage", "broker", "coordination", "loadtest", "tests"], cwd=ROOT,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
