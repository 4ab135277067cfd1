"""docs/ARCHITECTURE.md is a map a newcomer can trust: every path it names exists, every
API version range it states is the registry's, and it holds today's design, not a diary."""

from __future__ import annotations

import os
import re

from broker import apis, dispatch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
DOC = os.path.join(ROOT, "docs", "ARCHITECTURE.md")

TOP_FOLDERS = ("broker", "storage", "coordination", "pipeline", "loadtest", "tests", "deploy", "docs")
# A repository path: a top folder, then names; a trailing slash or an extension is kept.
PATH = re.compile(r"(?<![\w./-])((?:%s)/[\w./-]*[\w/])" % "|".join(TOP_FOLDERS))
# The served versions are stated in the API table, a cell group an API: "| Produce | 0 | 0-10 | ...";
# prose may name one version or a part of a range with a "v" ("Produce v0-2 are converted").
TABLE_ROW = re.compile(r"\|\s*([A-Z][A-Za-z]+)\s*\|\s*(\d+)\s*\|\s*(\d+)(?:-(\d+))?\s*\|")
# And a bare "Name a-b" in prose is a claim of the whole served range.
PROSE_RANGE = re.compile(r"\b([A-Z][A-Za-z]+) (\d+)-(\d+)\b")


def _doc() -> str:
    with open(DOC, encoding="utf-8") as handle:
        return handle.read()


def test_every_path_the_map_names_exists():
    missing = sorted({p for p in PATH.findall(_doc()) if not os.path.exists(os.path.join(ROOT, p))})
    assert not missing, f"docs/ARCHITECTURE.md names paths that do not exist: {missing}"


def test_every_module_of_the_product_is_on_the_map():
    """Each package of broker/, storage/ and coordination/ is named on the map (a newcomer
    must find where a module lives from the map alone)."""
    text = _doc()
    unnamed = []
    for top in ("broker", "storage", "coordination"):
        for directory, dirs, names in os.walk(os.path.join(ROOT, top)):
            dirs[:] = [d for d in dirs if not d.startswith(("_", "."))]
            relative = os.path.relpath(directory, ROOT)
            if any(n.endswith(".py") for n in names) and f"{relative}/" not in text and relative != top:
                unnamed.append(relative + "/")
    assert not unnamed, f"packages missing from docs/ARCHITECTURE.md: {unnamed}"


def test_every_api_version_range_it_states_is_the_registry():
    apis.load_all()
    ranges = {spec.name: (spec.api_key, spec.min_version, spec.max_version) for spec in dispatch.REGISTRY.values()}
    text = _doc()
    table = "\n".join(line for line in text.splitlines() if line.startswith("|"))
    rows = {name: (int(key), int(low), int(high or low)) for name, key, low, high in TABLE_ROW.findall(table)}
    assert set(rows) == set(ranges), f"the API table lacks {sorted(set(ranges) - set(rows))}, has extra {sorted(set(rows) - set(ranges))}"
    wrong = [f"{name}: table {rows[name]}, registry {ranges[name]}" for name in rows if rows[name] != ranges[name]]
    for name, low, high in PROSE_RANGE.findall(text):
        if name in ranges and (int(low), int(high)) != ranges[name][1:]:
            wrong.append(f"prose {name} {low}-{high}, registry {ranges[name][1]}-{ranges[name][2]}")
    assert not wrong, wrong


def test_it_is_a_map_not_a_diary():
    text = _doc()
    diary = [m.group(0) for m in re.finditer(r"(?i)\bissue \d+|\bremoved in\b|\b(?:first|second|third|\w+th) round\b", text)]
    assert not diary, f"history belongs in git, not in the map: {diary}"
