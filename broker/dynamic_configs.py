"""Dynamic broker configs (Kafka's DynamicBrokerConfig): which settings change at run time,
and the per-process reader that follows the store and says what this broker runs with.

Which settings: the broker-level defaults of the topic configs (``log.retention.ms``,
``log.segment.bytes``, ``log.cleanup.policy``, ``message.max.bytes``, ``min.insync.replicas``,
``unclean.leader.election.enable``, ...: every synonym in storage.config.TOPIC_KEYS; Kafka's
DynamicLogConfig), ``producer.id.expiration.ms`` (Kafka's DynamicProducerStateManagerConfig)
and the replication throttles' rates (Kafka's DynamicConfig.Broker: ``leader.replication.throttled.rate``,
``follower.replication.throttled.rate``, ``replica.alter.log.dirs.io.max.bytes.per.second``; per
broker or as the cluster default, as Kafka's BrokerConfigHandler reads them; applied by
broker/partitions/replication_throttle.py), ``log.cleaner.backoff.ms`` (LogCleaner's), and
the connection limits (``max.connections``, ``max.connections.per.ip(.overrides)``,
``max.connection.creation.rate``: Kafka's SocketServer reconfigurables, applied by each worker's
broker/network/connection_quotas.py; the two per-listener ones also as
``listener.name.<listener>.max.connections`` / ``.max.connection.creation.rate``).
Each is live: the workers' LogManager takes new broker-level defaults at once (the path a
SIGHUP reload uses), so a topic without its own value runs with the new one; the coordinator
process's controller elects with the new ``unclean.leader.election.enable``. Every other
setting Castle declares is read-only, as in Kafka ("Cannot update these configs
dynamically"). Unlike Kafka, ``log.retention.hours`` / ``minutes`` are not dynamic here (they
only feed ``log.retention.ms`` when the file is read), and settings Kafka makes dynamic but
Castle does not have (``num.io.threads``, ``log.cleaner.threads``, ...)
are unknown names.

Per-listener TLS keystores and truststores (``listener.name.<l>.ssl.keystore.location``...)
are dynamic per broker: broker/listener_configs.py.

Precedence, Kafka's: the broker's own dynamic value (DYNAMIC_BROKER_CONFIG), the cluster
default (DYNAMIC_DEFAULT_BROKER_CONFIG), the config file or --override (STATIC_BROKER_CONFIG),
the declared default (DEFAULT_CONFIG).

The reader (``DynamicBrokerConfigs``) keeps the static values it started from, follows the
store's watch on a daemon thread (never an event loop) and hands each new effective set to
``on_change``; whoever owns the state it feeds applies it on its own thread.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Callable

from broker.config import BY_NAME, ZERO_PER_IP, BrokerConfig, listener_prefixed
from broker.listener_configs import (
    KAFKA_RECONFIGURABLE_TLS,
    ListenerConfigError,
    ListenerValues,
    check_names,
    listener_values,
    split,
)
from broker.security.password_encoder import PasswordEncoder
from coordination.broker_config_store import BrokerConfigStore, Overrides
from coordination.store_follower import StoreFollower
from storage.config import TOPIC_KEYS

log = logging.getLogger(__name__)


LEADER_REPLICATION_RATE = "leader.replication.throttled.rate"
FOLLOWER_REPLICATION_RATE = "follower.replication.throttled.rate"
ALTER_LOG_DIRS_RATE = "replica.alter.log.dirs.io.max.bytes.per.second"
REPLICATION_RATES = frozenset({LEADER_REPLICATION_RATE, FOLLOWER_REPLICATION_RATE, ALTER_LOG_DIRS_RATE})
LOG_DEFAULTS = frozenset(spec.broker_key for spec in TOPIC_KEYS.values() if spec.broker_key and spec.broker_key in BY_NAME)
# Kafka's SocketServer.ReconfigurableConfigs: taken by each worker's connection quotas.
CONNECTION_LIMITS = frozenset({"max.connections", "max.connections.per.ip", "max.connections.per.ip.overrides",
                               "max.connection.creation.rate"})
# Kafka's LogCleaner.ReconfigurableConfigs that Castle has.
CLEANER = frozenset({"log.cleaner.backoff.ms"})
DYNAMIC = LOG_DEFAULTS | {"producer.id.expiration.ms"} | REPLICATION_RATES | CLEANER | CONNECTION_LIMITS
# Kafka's SocketServer.ListenerReconfigurableConfigs: dynamic per listener too, as
# ``listener.name.<listener>.<setting>`` (cluster-wide or per broker, as Kafka allows).
PER_LISTENER = frozenset({"max.connections", "max.connection.creation.rate"})


def listener_setting(name: str) -> str | None:
    """The setting a ``listener.name.<listener>.<setting>`` name sets, when it changes at run time."""
    listener, setting = listener_prefixed(name) or ("", "")
    return setting if listener and setting in PER_LISTENER else None


def is_dynamic(name: str) -> bool:
    return name in DYNAMIC or listener_setting(name) is not None

# DescribeConfigsResponse ConfigSource
DYNAMIC_BROKER_CONFIG = 2
DYNAMIC_DEFAULT_BROKER_CONFIG = 3
STATIC_BROKER_CONFIG = 4
DEFAULT_CONFIG = 5


class InvalidBrokerConfig(ValueError):
    """A dynamic config the broker cannot take; ``unknown`` when Castle has no such setting."""

    def __init__(self, message: str, unknown: bool = False) -> None:
        super().__init__(message)
        self.unknown = unknown


def parse_value(name: str, text: str) -> Any:
    setting = BY_NAME[listener_setting(name) or name]
    try:
        return setting.parse(text)
    except (TypeError, ValueError) as exc:
        raise InvalidBrokerConfig(f"Invalid value {text} for configuration {name}: {exc}") from None


def validate(configs: Overrides, per_broker: bool = True) -> Overrides:
    """``configs`` if every name is a dynamic setting with a good value (Kafka's order: static
    names first, then where security names are set, then values); InvalidBrokerConfig
    otherwise. The per-listener TLS names are checked further by listener_configs.prepare."""
    unknown = sorted(name for name in configs if name not in BY_NAME and name not in KAFKA_RECONFIGURABLE_TLS
                     and split(name) is None and listener_setting(name) is None)
    if unknown:
        raise InvalidBrokerConfig(f"Unknown config name: {', '.join(unknown)}", unknown=True)
    try:
        check_names(list(configs), per_broker)
    except ListenerConfigError as exc:
        raise InvalidBrokerConfig(str(exc)) from None
    static = sorted(name for name in configs if name in BY_NAME and not is_dynamic(name))
    if static:
        raise InvalidBrokerConfig(f"Cannot update these configs dynamically: [{', '.join(static)}]")
    for name, text in configs.items():
        if is_dynamic(name):
            parse_value(name, text)
    # Kafka's KafkaConfig check, here on the entity's own configs: a zero would refuse every
    # address (the tool that could undo it included) unless some have an override.
    if parse_value("max.connections.per.ip", configs.get("max.connections.per.ip", "1")) == 0 \
            and not configs.get("max.connections.per.ip.overrides", "").strip():
        raise InvalidBrokerConfig(ZERO_PER_IP)
    return configs


def _parsed(entity: str, configs: Overrides) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, text in configs.items():
        if split(name) is not None:
            continue  # per-listener TLS: listener_values
        if not is_dynamic(name):
            log.warning("broker %s: ignoring the dynamic config %s: Castle cannot change it at run time",
                        entity or "<default>", name)
            continue
        try:
            out[name] = parse_value(name, text)
        except InvalidBrokerConfig as exc:
            log.warning("broker %s: ignoring a dynamic config: %s", entity or "<default>", exc)
    return out


class DynamicBrokerConfigs:
    """This broker's dynamic configs as this process sees them. ``start()`` loads them (blocking)
    and follows the store; ``on_change(values)`` gets every dynamic setting's effective value
    after each change (from the following thread)."""

    def __init__(self, store: BrokerConfigStore, config: BrokerConfig,
                 on_change: Callable[[dict[str, Any]], object] | None = None) -> None:
        self.store = store
        self.entity = str(config.node_id)
        self.static: dict[str, Any] = {name: config.value(name) for name in DYNAMIC}
        self.on_change = on_change
        self._default: dict[str, Any] = {}
        self._own: dict[str, Any] = {}
        self._listeners: ListenerValues = {}
        secret = config.get_str("password.encoder.secret")
        self.encoder = PasswordEncoder(secret) if secret else None
        self._follower = StoreFollower(self._reload, "castle-broker-configs", "dynamic broker configs")
        self._mutex = threading.Lock()

    # ------------------------------------------------------------------ reading
    def effective(self) -> dict[str, Any]:
        """Every dynamic setting's value: this broker's, else the cluster default's, else static."""
        own, default = self._own, self._default
        return {name: own.get(name, default.get(name, self.static[name])) for name in DYNAMIC}

    def listener_tls(self) -> ListenerValues:
        """This broker's dynamic per-listener TLS values (passwords decoded)."""
        return self._listeners

    def per_listener(self) -> dict[str, Any]:
        """The ``listener.name.<listener>.<setting>`` values set at run time: this broker's, else
        the cluster default's (the file's per-listener values are the config's)."""
        own, default = self._own, self._default
        return {name: own.get(name, default.get(name)) for name in default.keys() | own.keys() if name not in DYNAMIC}

    def source(self, name: str) -> int | None:
        """DYNAMIC_BROKER_CONFIG or DYNAMIC_DEFAULT_BROKER_CONFIG when ``name`` has a dynamic value here."""
        if name in self._own:
            return DYNAMIC_BROKER_CONFIG
        if name in self._default:
            return DYNAMIC_DEFAULT_BROKER_CONFIG
        return None

    def set_static(self, values: dict[str, Any]) -> None:
        """New static values (a SIGHUP reload): they count only where nothing dynamic is set."""
        with self._mutex:
            self.static.update({name: value for name, value in values.items() if name in DYNAMIC})

    # ------------------------------------------------------------------ following the store
    def start(self) -> None:
        self._reload()
        self._follower.start(self.store.watch)

    def refresh(self) -> None:
        """Read the store now (blocking): for a caller that must see a change made just before."""
        self._reload()

    def wrote(self, entity: str, configs: Overrides) -> None:
        """This process wrote ``configs`` for ``entity``: take them now, before the watch comes round."""
        with self._mutex:
            self._install(entity, configs)
        self._notify()

    def _install(self, entity: str, configs: Overrides) -> None:
        if entity == "":
            self._default = _parsed(entity, configs)
            ignored = sorted(name for name in configs if split(name) is not None)
            if ignored:
                log.error("per-broker configs defined at default cluster level will be ignored: %s", ignored)
        elif entity == self.entity:
            self._own = _parsed(entity, configs)
            self._listeners = listener_values(configs, self.encoder)

    def _reload(self) -> None:
        entities = self.store.all()
        with self._mutex:
            self._install("", entities.get("", {}))
            self._install(self.entity, entities.get(self.entity, {}))
        self._notify()

    def _notify(self) -> None:
        if self.on_change is not None:
            self.on_change(self.effective())

    def close(self) -> None:
        self._follower.close()
