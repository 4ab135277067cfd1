"""What a command prints: aligned text tables for people, one JSON document for scripts.

Each command returns a ``Report`` holding both renderings of the same facts, so the
text and the JSON never disagree about what happened, and the exit code is derived in
one place (``failures``: items that went wrong while others went right, as ``ls a b``
lists ``a`` and still fails for a missing ``b``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

import orjson

MISSING = "-"


@dataclass
class Report:
    """A command's outcome: ``data`` for --json, ``text`` for people, ``notes`` for stderr."""

    data: Any
    text: str
    failures: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def cell(value: Any) -> str:
    """How a value looks in a table: None is "-", lists are comma-separated."""
    if value is None:
        return MISSING
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(cell(v) for v in value) if value else MISSING
    return str(value)


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """Left-aligned columns two spaces apart, headers first (kafka-consumer-groups style)."""
    lines = [list(headers)] + [[cell(v) for v in row] for row in rows]
    widths = [max(len(line[i]) for line in lines) for i in range(len(headers))]
    out = []
    for line in lines:
        out.append("  ".join(text.ljust(width) for text, width in zip(line, widths)).rstrip())
    return "\n".join(out)


def to_json(data: Any) -> bytes:
    """One indented JSON document with a trailing newline."""
    return orjson.dumps(data, option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE | orjson.OPT_NON_STR_KEYS)
