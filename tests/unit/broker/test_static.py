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


# broker/'s packages by role, lowest first: a package imports at run time only from packages
# below it (imports under TYPE_CHECKING name types and are free). The top-level modules are
# split in two: the settings (config, listeners) sit low, the request-handling contract
# (context, dispatch, authorization) sits between the links and the handlers.
BROKER_LAYERS = [
    {"broker.protocol"},
    {"broker.config", "broker.listeners"},
    {"broker.logger_levels"},
    {"broker.security"},
    {"broker.dynamic_configs", "broker.listener_configs"},  # dynamic TLS and passwords need security
    {"broker.quotas"},
    {"broker.partitions"},
    {"broker.links"},
    {"broker.telemetry"},
    {"broker.context", "broker.dispatch", "broker.authorization"},
    {"broker.apis", "broker.coordinator"},
    {"broker.network"},
    {"broker.process"},
    {"broker.admin", "broker.cli", "broker.__main__"},
]


def _broker_unit(module: str) -> str | None:
    """The layer unit of a dotted broker module name: its package, or the top-level module."""
    parts = module.split(".")
    if parts[0] != "broker" or len(parts) == 1:
        return None
    return ".".join(parts[:2])


def _runtime_imports(tree: ast.Module) -> list[str]:
    """Absolute module names imported outside ``if TYPE_CHECKING:`` blocks."""
    found: list[str] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.extend(f"{node.module}.{alias.name}" if node.module == "broker" else node.module for alias in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def test_broker_packages_import_only_downward():
    rank = {unit: level for level, units in enumerate(BROKER_LAYERS) for unit in units}
    violations, unplaced = [], set()
    for directory, _dirs, names in os.walk(os.path.join(ROOT, "broker")):
        for name in names:
            if not name.endswith(".py"):
                continue
            path = os.path.join(directory, name)
            relative = os.path.relpath(path, ROOT)
            module = relative[:-3].replace(os.sep, ".").removesuffix(".__init__")
            source = _broker_unit(module)
            if source is None:
                continue
            if source not in rank:
                unplaced.add(source)
                continue
            with open(path, encoding="utf-8") as handle:
                tree = ast.parse(handle.read(), path)
            for imported in _runtime_imports(tree):
                target = _broker_unit(imported)
                if target is None or target == source:
                    continue
                if target not in rank:
                    unplaced.add(target)
                elif rank[target] > rank[source]:
                    violations.append(f"{relative} imports {imported} (a higher layer)")
    assert not unplaced, f"broker units in no layer of BROKER_LAYERS: {sorted(unplaced)}"
    assert not violations, violations


def test_only_loadtest_micro_imports_the_broker_storage_or_coordination():
    assert os.path.isdir(os.path.join(ROOT, LOADTEST_MICRO))
    violations = _import_violations("loadtest", LOADTEST_FORBIDDEN, exempt=LOADTEST_MICRO)
    assert not violations, violations


def _private_uses(source: str, path: str, packages: set[str]) -> list[str]:
    """Underscore names of ``packages`` that ``source`` imports (``from broker.x import _y``,
    ``from broker._x import y``) or reaches through an imported module or name (``codec._y``,
    ``broker.protocol.codec._y``). Dunders (``__doc__``) are public."""
    tree = ast.parse(source, path)

    def private(name: str) -> bool:
        return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))

    found = []
    bound: set[str] = set()  # local names that stand for something of ``packages``
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 \
                and node.module.split(".")[0] in packages:
            if any(private(part) for part in node.module.split(".")):
                found.append(f"{path}:{node.lineno} imports from {node.module}")
            for alias in node.names:
                if private(alias.name):
                    found.append(f"{path}:{node.lineno} imports {node.module}.{alias.name}")
                bound.add(alias.asname or alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in packages:
                    if any(private(part) for part in alias.name.split(".")):
                        found.append(f"{path}:{node.lineno} imports {alias.name}")
                    bound.add(alias.asname or alias.name.split(".")[0])
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and private(node.attr):
            root: ast.expr = node.value
            while isinstance(root, ast.Attribute):
                root = root.value
            if isinstance(root, ast.Name) and root.id in bound:
                found.append(f"{path}:{node.lineno} uses {ast.unparse(node)}")
    return found


def test_the_private_names_check_finds_each_kind_of_use():
    source = ("from broker.protocol.codec import _reader, encode_body\n"
              "from broker.apis import fetch\n"
              "import broker.protocol.codec\n"
              "from storage._hidden import thing\n"
              "fetch._resolve(1)\n"
              "broker.protocol.codec._writer\n"
              "fetch.__doc__, encode_body, self._mine\n")
    found = _private_uses(source, "x.py", LOADTEST_FORBIDDEN)
    assert sorted(found) == ["x.py:1 imports broker.protocol.codec._reader", "x.py:4 imports from storage._hidden",
                     "x.py:5 uses fetch._resolve", "x.py:6 uses broker.protocol.codec._writer"], found


PROJECT_PACKAGES = {"broker", "storage", "coordination", "pipeline", "loadtest"}


def test_no_module_uses_another_modules_private_names():
    """A module's underscore names are its own: no other module of the project imports them
    or reaches for them (the micro-benchmarks included: a benchmark that reaches into a
    private name measures a detail that may change under it, not the API)."""
    violations = []
    for package in sorted(PROJECT_PACKAGES):
        for directory, _dirs, names in os.walk(os.path.join(ROOT, package)):
            for name in names:
                if name.endswith(".py"):
                    path = os.path.join(directory, name)
                    with open(path, encoding="utf-8") as handle:
                        violations += _private_uses(handle.read(), os.path.relpath(path, ROOT), PROJECT_PACKAGES)
    assert not violations, violations


# The load tools are typed: all of loadtest/ but micro/, which imports the broker (not typed as a whole).
TYPED_LOADTEST = ["loadtest/runner", "loadtest/brokers.py", "loadtest/children.py", "loadtest/common.py",
                  "loadtest/ingest_limit.py", "loadtest/locustfile.py", "loadtest/loopback_limit.py", "loadtest/machine.py",
                  "loadtest/mock_broker.py", "loadtest/kafka_peer.py", "loadtest/maven_jars.py", "loadtest/bench_groups.py",
                  "loadtest/bench_replication.py",
                  "loadtest/bench_security.py"]


def _mypy(cache: str, *arguments: str) -> subprocess.CompletedProcess[str]:
    # A cache of its own per set of flags: mypy's cache records the flags each module was
    # checked with, so two runs with different flags sharing one cache re-check everything
    # every time, where a run over an unchanged tree takes a second.
    cache_dir = os.path.join(ROOT, ".mypy_cache", cache)
    return subprocess.run([sys.executable, "-m", "mypy", "--cache-dir", cache_dir, *arguments], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)


def test_mypy_passes_on_broker_storage_coordination_and_pipeline_with_every_def_typed():
    """All of the product's packages, no exclusions: every function annotated."""
    result = _mypy("every-def-typed", "--disallow-untyped-defs", "broker", "storage", "coordination", "pipeline")
    assert result.returncode == 0, result.stdout + result.stderr


def test_handlers_take_a_typed_context_and_request():
    """No Any in an API handler's signature (broker/context.py, broker/protocol/requests.py)."""
    import inspect

    from broker import apis, dispatch
    from broker.coordinator import api as coordinator_apis

    apis.load_all()
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
    result = _mypy("load-tools", "pipeline", *TYPED_LOADTEST)
    assert result.returncode == 0, result.stdout + result.stderr


# docs/ARCHITECTURE.md is a newcomer's map, read in one sitting; docs/BENCHMARKS.md is today's
# table first (the rounds' history is in git).
DOC_LIMITS = {"docs/ARCHITECTURE.md": 500, "docs/BENCHMARKS.md": 340}


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

