"""Logging for every Castle process: one line per event, tagged with the process's role.

``log.format=text`` (default) writes ``time level role[pid] logger: message``; ``json``
writes one JSON object per line (orjson) with the same fields, for journald or a log
shipper. The role ("supervisor", "worker 1", "coordinator") is set by each process after
the fork, so lines from the processes of one broker interleaved on one stderr (or in one
journal) say who wrote them. Messages themselves are written key=value where they carry
figures (the request log at DEBUG: broker/network/connection.py).
"""

from __future__ import annotations

import logging
import sys
from typing import Any

import orjson

_role = "supervisor"


class _RoleFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        record.role = _role
        return True


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S") + f".{int(record.msecs):03d}",
            "level": record.levelname,
            "role": getattr(record, "role", _role),
            "pid": record.process,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return orjson.dumps(entry).decode()


TEXT_FORMAT = "%(asctime)s %(levelname)s %(role)s[%(process)d] %(name)s: %(message)s"


def configure_logging(level: str, fmt: str = "text") -> None:
    """Once, in the supervisor (children inherit the handler through the fork)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(_RoleFilter())
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    set_level(level)


def set_role(role: str) -> None:
    global _role
    _role = role


def set_level(level: str) -> None:
    logging.getLogger().setLevel(level.upper())
