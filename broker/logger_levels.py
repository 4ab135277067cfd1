"""Broker loggers (Kafka's BROKER_LOGGER config resource, type 8): every process of a broker
(its workers, its coordinator process, its supervisor) changes a logger's level at run time.

Kafka's RuntimeLoggerManager, with Python's logging for Log4j: a logger is a name in
``logging.root.manager.loggerDict`` (or ``root``); its level shows as Kafka names levels:
TRACE (below DEBUG), DEBUG, INFO, WARN (WARNING), ERROR, FATAL (CRITICAL). A logger with no
level of its own shows its effective one, as Log4j does. SET gives a level; DELETE unsets it
(the logger follows its parent again); the root logger's level cannot be removed.

How a change reaches every process: a request lands on one worker, which writes the wanted
levels to ``<run.dir>/broker-loggers.json`` (coordination/private_file.py: locked, atomic,
polled every 250 ms) and applies them itself at once; every other process watches that
file and applies what it holds. The run dir belongs to one run of the broker (the supervisor
clears the file when it starts), so levels last until a restart, as in Kafka, where they
are not persisted either.
"""

from __future__ import annotations

import logging
import os
from typing import Any

import orjson

from coordination.private_file import PrivateJsonFile

log = logging.getLogger(__name__)

FILE_NAME = "broker-loggers.json"
ROOT = "root"
TRACE = 5  # Python has no TRACE: the level below DEBUG stands for it
# Kafka's LogLevelConfig, in its order (the order of its "Valid log levels are ..." message).
KAFKA_LEVELS = {"FATAL": logging.CRITICAL, "ERROR": logging.ERROR, "WARN": logging.WARNING, "INFO": logging.INFO,
                "DEBUG": logging.DEBUG, "TRACE": TRACE}

Levels = dict[str, "str | None"]  # logger -> its Kafka level, or None: unset


def kafka_level(level: int) -> str:
    """A Python level as Kafka names it (the nearest named one at or below it)."""
    for name, value in KAFKA_LEVELS.items():
        if level >= value:
            return name
    return "TRACE"


def logger_exists(name: str) -> bool:
    return name == ROOT or isinstance(logging.root.manager.loggerDict.get(name), logging.Logger)


def _logger(name: str) -> logging.Logger:
    return logging.getLogger() if name == ROOT else logging.getLogger(name)


def current_levels() -> dict[str, str]:
    """Every logger of this process with its effective level, Kafka's names; root first."""
    out = {ROOT: kafka_level(logging.getLogger().getEffectiveLevel())}
    for name in sorted(logging.root.manager.loggerDict):
        logger = logging.root.manager.loggerDict[name]
        if isinstance(logger, logging.Logger):
            out[name] = kafka_level(logger.getEffectiveLevel())
    return out


def apply(levels: Levels) -> None:
    for name, level in levels.items():
        if level is None:
            if name != ROOT:
                _logger(name).setLevel(logging.NOTSET)
        elif level in KAFKA_LEVELS:
            _logger(name).setLevel(KAFKA_LEVELS[level])


def _decode(path: str, doc: Any, data: bytes) -> Levels:
    loggers = doc.get("loggers") if isinstance(doc, dict) else None
    if not isinstance(loggers, dict):
        raise ValueError(f"{path}: expected {{\"version\":1,\"loggers\":{{...}}}}, got {data[:200]!r}")
    return {str(name): (level if isinstance(level, str) else None) for name, level in loggers.items()}


def _encode(levels: Levels) -> bytes:
    return orjson.dumps({"version": 1, "loggers": levels}, option=orjson.OPT_SORT_KEYS)


def clear(run_dir: str) -> None:
    """A new run of the broker starts with the configured levels (the supervisor, at start)."""
    try:
        os.unlink(os.path.join(run_dir, FILE_NAME))
    except FileNotFoundError:
        pass


class BrokerLoggers:
    """This process's side of the broker's logger levels: ``start()`` follows the shared file."""

    def __init__(self, run_dir: str) -> None:
        self._file: PrivateJsonFile[Levels] = PrivateJsonFile(
            run_dir, FILE_NAME, decode=_decode, encode=_encode, empty=dict, what="broker logger", log=log)

    def start(self) -> None:
        self._file.watch(self.refresh)

    def refresh(self) -> None:
        """Apply the levels the broker's processes were asked for (blocking: a file read)."""
        try:
            apply(self._file.read())
        except (OSError, ValueError) as exc:
            log.warning("cannot read the broker logger levels: %s", exc)

    def update(self, changes: Levels) -> None:
        """Record ``changes`` for every process of the broker and apply them here at once."""
        def merge(levels: Levels) -> bool:
            levels.update(changes)
            return True

        self._file.update(merge)
        apply(changes)

    def close(self) -> None:
        self._file.close()
