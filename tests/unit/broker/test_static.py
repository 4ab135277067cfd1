"""Static checks that keep the tree honest: layering, types, lint."""

from __future__ import annotations

import ast
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

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
                  "loadtest/mock_broker.py", "loadtest/bench_groups.py", "loadtest/bench_replication.py",
                  "loadtest/bench_security.py"]


def _mypy(*arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mypy", *arguments], cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_mypy_passes_on_broker_storage_and_coordination_with_every_def_typed():
    """All of the product's three packages, no exclusions: every function annotated."""
    result = _mypy("--disallow-untyped-defs", "broker", "storage", "coordination")
    assert result.returncode == 0, result.stdout + result.stderr


def test_handlers_take_a_typed_context_and_request():
    """No Any in an API handler's signature (broker/context.py, broker/protocol/requests.py)."""
    import inspect

    from broker import dispatch
    from broker.coordinator import api as coordinator_apis

    dispatch.load_all()
    untyped = []
    assert dispatch.REGISTRY and coordinator_apis.SERVED
    assert set(coordinator_apis.SERVED) <= set(dispatch.REGISTRY)  # advertised = implemented
    handlers = [spec.handle for spec in dispatch.REGISTRY.values()]
    # The coordinator process's handlers (broker/coordinator/): every function of those modules
    # that takes a request or builds an answer from one.
    for module in _coordinator_modules():
        handlers += [f for name, f in inspect.getmembers(module, inspect.isfunction)
                     if f.__module__ == module.__name__ and "request" in inspect.signature(f).parameters]
    assert any(h.__name__ == "serve_join_group" for h in handlers)
    for handler in handlers:
        signature = inspect.signature(handler)
        annotations = [(name, p.annotation) for name, p in signature.parameters.items()]
        annotations.append(("return", signature.return_annotation))
        for name, annotation in annotations:
            if annotation is inspect.Parameter.empty or "Any" in str(annotation):
                untyped.append(f"{handler.__module__}.{handler.__name__}({name})")
    assert not untyped, untyped


def _coordinator_modules() -> list[object]:
    import importlib
    import pkgutil

    import broker.coordinator

    return [importlib.import_module(f"broker.coordinator.{m.name}") for m in pkgutil.iter_modules(broker.coordinator.__path__)]


def test_mypy_passes_on_the_pipeline_and_the_load_tools():
    result = _mypy("pipeline", *TYPED_LOADTEST)
    assert result.returncode == 0, result.stdout + result.stderr


# docs/ARCHITECTURE.md is a newcomer's map, read in one sitting; docs/BENCHMARKS.md is today's
# table first (the rounds' history is in git).
DOC_LIMITS = {"docs/ARCHITECTURE.md": 420, "docs/BENCHMARKS.md": 340}


def test_the_docs_stay_short():
    for path, limit in DOC_LIMITS.items():
        with open(os.path.join(ROOT, path), encoding="utf-8") as handle:
            lines = sum(1 for _ in handle)
        assert lines <= limit, f"{path} has {lines} lines (at most {limit})"


def test_tests_are_laid_out_by_layer():
    """tests/unit/<layer>/ and tests/integration/<layer>/; only shared helpers at the top."""
    layers = {"storage", "protocol", "broker", "coordination", "pipeline", "loadtest"}
    for kind in ("unit", "integration"):
        base = os.path.join(ROOT, "tests", kind)
        stray = [n for n in os.listdir(base) if n.startswith("test_") and n.endswith(".py")]
        assert not stray, f"tests/{kind}/ holds test files outside a layer: {stray}"
        folders = {n for n in os.listdir(base) if os.path.isdir(os.path.join(base, n)) and not n.startswith((".", "__"))}
        assert folders <= layers, f"tests/{kind}/ has folders that are not layers: {sorted(folders - layers)}"


def test_ruff_passes():
    result = subprocess.run([sys.executable, "-m", "ruff", "check", "storage", "broker", "coordination", "loadtest", "tests"], cwd=ROOT,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
