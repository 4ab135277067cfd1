"""``GroupConfigs``: the per-process reader (and writer) of groups' configs, Kafka's GROUP
config resource (ConfigResource type 32).

Three modules: coordination/group_config_keys.py (Kafka 4.4's keys, defaults, validation),
coordination/group_config_store.py (where overrides live: /config/groups in ZooKeeper, a file
locally; behind the backend's ``group_configs()``), and this reader.

Every process of a broker (the workers, the coordinator process) keeps one. Reading is
``group_config(group_id, name)``: the group's override, else the broker's value
(group_config_keys.broker_default), typed (int for INT/LONG keys, bool for BOOLEAN, str
otherwise). It is a dict lookup on a parsed copy of every group's overrides, so the
coordinator can call it on every heartbeat and a worker on every fetch.

Why a watch-refreshed cache (and not a timer): the store already tells of every change (a
ZooKeeper watch on /config/changes and /config/groups, fired within a round trip; the local
file's 250 ms poll, one stat), so a copy refreshed on those events is
as fresh as polling could make it, and costs nothing while nothing changes. The reload runs on
a daemon thread (never on an event loop) and swaps the whole table in one assignment, so
readers take no lock. A process that writes (``update``) puts the result in its own table at
once, so it reads its own writes before the watch comes round.

Values are what the group runs with, Kafka's GroupConfig.evaluate: an override the broker's
current bounds no longer admit (they changed since it was set) is capped to them, with a
warning; one that cannot be parsed at all (written by hand) is logged and ignored. ``overrides``
and DescribeConfigs give the stored text.
"""

from __future__ import annotations

import logging
import threading

from coordination.group_config_keys import KEYS, BrokerValues, InvalidGroupConfig, Value, broker_default, evaluate, parse
from coordination.group_config_store import Change, GroupConfigStore, Overrides
from coordination.store_follower import StoreFollower

log = logging.getLogger(__name__)


Parsed = dict[str, Value]


def _parse_all(group_id: str, overrides: Overrides, broker: BrokerValues) -> Parsed:
    parsed: Parsed = {}
    for name, text in overrides.items():
        try:
            parsed[name] = parse(name, text)
        except InvalidGroupConfig as exc:
            log.warning("group %s: ignoring the config %s=%r: %s", group_id, name, text, exc)
    return evaluate(group_id, parsed, broker)


class GroupConfigs:
    """The groups' configs as this process sees them. ``start()`` loads them and follows the
    store; ``close()`` stops following (the store itself belongs to the backend)."""

    def __init__(self, store: GroupConfigStore, broker: BrokerValues) -> None:
        self.store = store
        self.broker = broker
        self._overrides: dict[str, Overrides] = {}
        self._parsed: dict[str, Parsed] = {}
        self._defaults: dict[str, Value | None] = {name: broker_default(name, broker) for name in KEYS}
        self._follower = StoreFollower(self._reload, "castle-group-configs", "group configs")
        self._mutex = threading.Lock()  # orders a reload's swap against a write's
        self._generation = 0            # bumped by every write: a reload read before it must not undo it

    # ------------------------------------------------------------------ reading (any thread, no I/O)
    def group_config(self, group_id: str, name: str) -> Value:
        """The group's value of ``name`` (a key of keys.KEYS; KeyError otherwise): its override,
        else the broker's. ``streams.assignor.name`` with no assignor at all is ""."""
        parsed = self._parsed.get(group_id)
        if parsed is not None and name in parsed:
            return parsed[name]
        if name not in self._defaults:
            raise KeyError(f"unknown group config {name!r}")
        value = self._defaults[name]
        return "" if value is None else value

    def overrides(self, group_id: str) -> Overrides:
        """The group's overrides as stored (text), as this process last saw them."""
        return dict(self._overrides.get(group_id, {}))

    def broker_value(self, name: str) -> Value | None:
        """The value of ``name`` for a group without an override (None: Kafka has none)."""
        return self._defaults[name]

    # ------------------------------------------------------------------ writing (blocking: an executor)
    def update(self, group_id: str, change: Change) -> Overrides:
        """Change the group's overrides in the store (``change`` must validate: it runs inside
        the store's read-modify-write and may run more than once); this process sees the result
        at once."""
        new = self.store.update(group_id, change)
        with self._mutex:
            self._generation += 1
            overrides, parsed = dict(self._overrides), dict(self._parsed)
            if new:
                overrides[group_id], parsed[group_id] = dict(new), _parse_all(group_id, new, self.broker)
            else:
                overrides.pop(group_id, None)
                parsed.pop(group_id, None)
            self._overrides, self._parsed = overrides, parsed
        return new

    def read_fresh(self, group_id: str) -> Overrides:
        """The group's overrides read from the store now (blocking), for answers that must not
        lag another process's write (DescribeConfigs)."""
        return self.store.get(group_id)

    # ------------------------------------------------------------------ following the store
    def start(self) -> None:
        """Load now (blocking), then reload on every change the store reports."""
        self._reload()
        self._follower.start(self.store.watch)

    def _reload(self) -> None:
        with self._mutex:
            generation = self._generation
        groups = self.store.all()
        with self._mutex:
            if generation == self._generation:  # no write of ours landed meanwhile
                self._install(groups)
            else:
                self._follower.wake()  # read again: ours is in the store by now

    def _install(self, groups: dict[str, Overrides]) -> None:
        groups = {group_id: config for group_id, config in groups.items() if config}
        parsed = {group_id: _parse_all(group_id, config, self.broker) for group_id, config in groups.items()}
        self._overrides, self._parsed = groups, parsed  # readers see one table or the other

    def close(self) -> None:
        self._follower.close()
