"""SIGHUP: read the configuration again and apply what can change while serving.

Dynamic settings: ``log.level``, ``producer.id.expiration.ms`` (dynamic in Kafka too) and
the broker-level defaults of every topic setting (retention, flush policy, segment size,
cleanup…: storage.config.TOPIC_KEYS), which the logs take without a restart
(PartitionLog.update_config; topics' own overrides still win).
Anything else that changed is named in a warning and waits for a restart. Connections
are untouched: no listener, socket or process is replaced.

How it travels: the supervisor re-reads the file and overrides it started from
(BrokerConfig.source), refuses a file that no longer loads (the old settings stay),
updates its own config (so a worker it forks later starts with the new values), writes the
dynamic values to ``<run.dir>/reload.json`` and sends SIGHUP to every child; each child
applies that file on its own loop. A file rather than a message: the children already
share the run dir, and a child that restarts meanwhile forks with the new values anyway.
"""

from __future__ import annotations

import logging
import os
from typing import Any

import orjson

from broker.config import BrokerConfig, ConfigError, load_config
from broker.process.logs import set_level
from storage import files
from storage.config import TOPIC_KEYS

log = logging.getLogger(__name__)

# log.retention.hours/minutes only feed log.retention.ms (broker/config.py load_config).
DYNAMIC = frozenset({"log.level", "log.retention.hours", "log.retention.minutes", "producer.id.expiration.ms"}
                    | {spec.broker_key for spec in TOPIC_KEYS.values() if spec.broker_key})


def reload_path(run_dir: str) -> str:
    return os.path.join(run_dir, "reload.json")


def reload_in_supervisor(config: BrokerConfig, run_dir: str) -> dict[str, Any] | None:
    """Re-read the configuration; apply and publish its dynamic changes. Returns the
    changed dynamic settings, or None when the new configuration does not load."""
    path, overrides = config.source
    try:
        fresh = load_config(path, overrides)
    except (ConfigError, OSError) as exc:
        log.error("SIGHUP: %s; keeping the current settings", exc)
        return None
    old, new = config.as_dict(), fresh.as_dict()
    changed = {key: new[key] for key in new if new[key] != old.get(key)}
    dynamic = {key: value for key, value in changed.items() if key in DYNAMIC}
    static = sorted(set(changed) - DYNAMIC)
    if static:
        log.warning("SIGHUP: %s changed; that takes a restart", ", ".join(static))
    config.update(dynamic)
    set_level(config.get_str("log.level"))
    files.replace_file(reload_path(run_dir), orjson.dumps({key: config.value(key) for key in DYNAMIC}))
    log.info("SIGHUP: reloaded%s", "".join(f" {k}={v}" for k, v in sorted(dynamic.items())) or " (no dynamic change)")
    return dynamic


def apply_in_child(config: BrokerConfig, run_dir: str) -> dict[str, Any]:
    """In a worker or the coordinator, on SIGHUP: take the values the supervisor wrote.
    Returns the ones that changed here."""
    try:
        with open(reload_path(run_dir), "rb") as handle:
            values = orjson.loads(handle.read())
    except (OSError, ValueError) as exc:
        log.error("SIGHUP: cannot read %s: %s", reload_path(run_dir), exc)
        return {}
    values = {key: value for key, value in values.items() if key in DYNAMIC}
    changed = {key: value for key, value in values.items() if config.value(key) != value}
    config.update(values)
    set_level(config.get_str("log.level"))
    return changed
