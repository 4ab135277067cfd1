"""Client-metrics subscriptions: Kafka's CLIENT_METRICS config resource, validated and matched.

A subscription is a named set of three keys (Kafka's ClientMetricsConfigs):

* ``metrics``: a list of metric name prefixes ("*" or an empty prefix: every metric);
* ``interval.ms``: the push interval, 100 ms to 1 hour (default 5 minutes);
* ``match``: a list of ``<attribute>=<regex>``, every one of which the client must match
  (whole-string match) for the subscription to apply; no pattern matches every client.
  The attributes are client_id, client_instance_id, client_software_name,
  client_software_version, client_source_address and client_source_port.

Validation gives Kafka's errors: an empty name, an unknown key or an interval out of range is
INVALID_REQUEST; a value that does not parse or a bad match pattern is INVALID_CONFIG.

``Subscriptions`` is each worker's copy of them all, loaded from the store
(coordination/client_metrics_store.py) and reloaded on every change it reports, as
coordination/group_configs.py does for groups: a daemon thread rebuilds the table and swaps
it in one assignment, and ``version`` counts the swaps, so a client instance knows when its
subscription must be worked out again.
"""

from __future__ import annotations

import logging
import re
import threading
from dataclasses import dataclass
from typing import Callable, Mapping

from coordination.client_metrics_store import ClientMetricsStore
from coordination.store_follower import StoreFollower

log = logging.getLogger(__name__)

METRICS = "metrics"
INTERVAL_MS = "interval.ms"
MATCH = "match"
KEYS = (METRICS, INTERVAL_MS, MATCH)
ALL_METRICS = "*"
DEFAULT_INTERVAL_MS = 5 * 60 * 1000
MIN_INTERVAL_MS = 100
MAX_INTERVAL_MS = 3_600_000
MATCH_ATTRIBUTES = frozenset({"client_instance_id", "client_id", "client_software_name", "client_software_version",
                              "client_source_address", "client_source_port"})

Config = dict[str, str]


class InvalidSubscription(ValueError):
    """``invalid_request``: Kafka answers INVALID_REQUEST, else INVALID_CONFIG."""

    def __init__(self, message: str, invalid_request: bool) -> None:
        super().__init__(message)
        self.invalid_request = invalid_request


@dataclass(frozen=True, slots=True)
class Subscription:
    name: str
    metrics: tuple[str, ...]
    interval_ms: int
    patterns: tuple[tuple[str, re.Pattern[str]], ...]

    def matches(self, attributes: Mapping[str, str | None]) -> bool:
        for attribute, pattern in self.patterns:
            value = attributes.get(attribute)
            if value is None or pattern.fullmatch(value) is None:
                return False
        return True


def parse_list(text: str) -> list[str]:
    """ConfigDef's LIST: comma separated, items trimmed, the empty text the empty list."""
    text = text.strip()
    return [] if not text else [item.strip() for item in text.split(",")]


def parse_patterns(items: list[str]) -> tuple[tuple[str, re.Pattern[str]], ...]:
    out: dict[str, re.Pattern[str]] = {}
    for item in items:
        parts = item.split("=")
        while len(parts) > 1 and parts[-1] == "":
            parts.pop()  # Java's String.split drops trailing empty strings
        if len(parts) != 2 or parts[0].strip() not in MATCH_ATTRIBUTES:
            raise InvalidSubscription(f"Illegal client matching pattern: {item}", invalid_request=False)
        try:
            out[parts[0].strip()] = re.compile(parts[1].strip())
        except re.error:
            raise InvalidSubscription(f"Illegal client matching pattern: {item}", invalid_request=False) from None
    return tuple(out.items())


def _interval(text: str) -> int:
    try:
        value = int(text.strip())
    except ValueError:
        raise InvalidSubscription(f"Invalid value {text} for configuration {INTERVAL_MS}: Not a number of type INT",
                                  invalid_request=False) from None
    if not -(1 << 31) <= value < (1 << 31):
        raise InvalidSubscription(f"Invalid value {text} for configuration {INTERVAL_MS}: Not a number of type INT",
                                  invalid_request=False)
    return value


def validate(name: str, config: Mapping[str, str]) -> Subscription:
    """The subscription ``config`` describes, or InvalidSubscription (Kafka's checks and messages)."""
    if not name:
        raise InvalidSubscription("Subscription name can't be empty", invalid_request=True)
    for key in config:
        if key not in KEYS:
            raise InvalidSubscription(f"Unknown client metrics configuration: {key}", invalid_request=True)
    interval = DEFAULT_INTERVAL_MS
    if INTERVAL_MS in config:
        interval = _interval(config[INTERVAL_MS])
        if not MIN_INTERVAL_MS <= interval <= MAX_INTERVAL_MS:
            raise InvalidSubscription(f"Invalid value {interval} for {INTERVAL_MS}, interval must be between 100 and "
                                      "3600000 (1 hour)", invalid_request=True)
    metrics = tuple(parse_list(config.get(METRICS, "")))
    patterns = parse_patterns(parse_list(config.get(MATCH, "")))
    return Subscription(name, metrics, interval, patterns)


def _build(configs: Mapping[str, Config]) -> dict[str, Subscription]:
    table = {}
    for name, config in configs.items():
        if not config:
            continue
        try:
            table[name] = validate(name, config)
        except InvalidSubscription as exc:  # written by hand into the store
            log.warning("ignoring the client metrics subscription %s: %s", name, exc)
    return table


class Subscriptions:
    """Every subscription, as this process last read them. ``start()`` loads and follows the
    store; readers take ``table`` (a dict swapped whole) and ``version``."""

    def __init__(self, store: ClientMetricsStore) -> None:
        self.store = store
        self.table: dict[str, Subscription] = {}
        self.configs: dict[str, Config] = {}
        self.version = 0
        self._follower = StoreFollower(self._reload, "castle-client-metrics", "client metrics subscriptions")
        self._mutex = threading.Lock()
        self._generation = 0

    def start(self) -> None:
        self._reload()
        self._follower.start(self.store.watch)

    def update(self, name: str, change: Callable[[Config], Config]) -> Config:
        """Change a subscription in the store (``change`` validates; it may run more than once)."""
        new = self.store.update(name, change)
        with self._mutex:
            self._generation += 1
            configs = dict(self.configs)
            if new:
                configs[name] = dict(new)
            else:
                configs.pop(name, None)
            self._install(configs)
        return new

    def read_fresh(self, name: str) -> Config:
        return self.store.get(name)

    def list_fresh(self) -> list[str]:
        return sorted(name for name, config in self.store.all().items() if config)

    def _install(self, configs: dict[str, Config]) -> None:
        if configs != self.configs:
            self.configs, self.table = configs, _build(configs)
            self.version += 1

    def _reload(self) -> None:
        with self._mutex:
            generation = self._generation
        configs = {name: config for name, config in self.store.all().items() if config}
        with self._mutex:
            if generation == self._generation:
                self._install(configs)
            else:
                self._follower.wake()

    def close(self) -> None:
        self._follower.close()
