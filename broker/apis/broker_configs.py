"""BROKER config resources (ConfigResource type 4) in DescribeConfigs, AlterConfigs and
IncrementalAlterConfigs (broker/apis/configs.py dispatches here), as Kafka 4.4 answers them.

* The resource name is a broker id, or "" for the cluster-wide default (kafka-configs
  --entity-default). A name that is not an integer is INVALID_REQUEST.
* DescribeConfigs of this broker's id lists every setting: its value, its source (Kafka's
  precedence: DYNAMIC_BROKER_CONFIG 2, DYNAMIC_DEFAULT_BROKER_CONFIG 3, STATIC_BROKER_CONFIG 4,
  DEFAULT_CONFIG 5) and, when asked, the synonyms in that order; ``read_only`` is false only for
  the dynamic settings (broker/dynamic_configs.py DYNAMIC). Another broker's id is INVALID_REQUEST
  (Kafka answers only for itself). The default resource lists the cluster defaults set, each
  DYNAMIC_DEFAULT_BROKER_CONFIG. The stored configs are read from the store, not the cache, so a
  describe right after an alter on another connection sees it.
* AlterConfigs replaces the entity's dynamic configs; IncrementalAlterConfigs applies SET /
  DELETE / APPEND / SUBTRACT (APPEND / SUBTRACT only to list configs: INVALID_CONFIG "Config value
  append is not allowed for config key: x", Kafka's). The result is validated whole, as Kafka's
  ConfigAdminManager does, so nothing is applied half: a static setting is INVALID_REQUEST "Cannot
  update these configs dynamically: [a, b]", a bad value INVALID_REQUEST "Invalid value v for
  configuration x: why". Unlike Kafka, which stores a name it does not know, an unknown name is
  INVALID_CONFIG "Unknown config name: x" (Castle never silently ignores a setting). Deleting a name
  that is not set succeeds (kafka-reassign-partitions clears throttles that way). Another
  broker's id is stored for that broker (ZooKeeper: it applies it), as Kafka's controller does.
  validate_only writes nothing.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

from broker.apis import config_resources
from broker.apis.config_resources import (
    OP_APPEND,
    OP_DELETE,
    OP_SUBTRACT,
    OPERATIONS,
    TYPE_PASSWORD,
    TYPE_STRING,
    ConfigResourceType,
    config_type,
    entry,
    kafka_text,
)
from broker.config import BY_NAME, LISTENER_PREFIX, SENSITIVE_SETTINGS
from broker.context import WorkerServices
from broker.dynamic_configs import (
    DEFAULT_CONFIG,
    DYNAMIC,
    DYNAMIC_BROKER_CONFIG,
    DYNAMIC_DEFAULT_BROKER_CONFIG,
    STATIC_BROKER_CONFIG,
    InvalidBrokerConfig,
    listener_setting,
    parse_value,
    validate,
)
from broker.listener_configs import PASSWORDS, RECONFIGURABLE_TLS, ListenerConfigError, is_sensitive, prepare, split
from broker.protocol.errors import ErrorCode, KafkaError
from coordination.broker_config_store import Overrides

RESOURCE_BROKER = 4
_OP_WORDS = {OP_APPEND: "append", OP_SUBTRACT: "subtract"}
LIST_CONFIGS = frozenset({"log.cleanup.policy"})


def _shown(name: str, text: str) -> str:
    try:
        return kafka_text(parse_value(name, text))
    except (InvalidBrokerConfig, KeyError):
        return text  # stored by hand: shown as it is


def entity_of(node: WorkerServices, name: str) -> str:
    """The store's entity for a resource name: "" (the default) or a broker id."""
    if name == "":
        return ""
    try:
        broker_id = int(name)
    except ValueError:
        raise KafkaError(ErrorCode.invalid_request, f"Node id must be an integer, but it is: {name}") from None
    if broker_id < 0:
        raise KafkaError(ErrorCode.invalid_request, f"Illegal negative broker ID in {name}")
    return str(broker_id)


def _entry(name: str, chain: list[dict[str, Any]], read_only: bool, synonyms: bool, documentation: bool,
           kind: int, doc: str | None) -> dict[str, Any]:
    sensitive = is_sensitive(name)
    if sensitive:  # Kafka's PASSWORD configs: never shown, in the entry or its synonyms
        chain = [{**synonym, "value": None} for synonym in chain]
    return entry(name, chain[0]["value"], chain[0]["source"], chain if synonyms else [], kind,
                 doc if documentation else None, read_only, sensitive)


async def describe_broker(node: WorkerServices, name: str, keys: Iterable[str] | None, synonyms: bool,
                          documentation: bool) -> list[dict[str, Any]]:
    entity = entity_of(node, name)
    store = node.dynamic_configs.store
    if entity == "":
        default = await node.run_admin(lambda: store.get(""))
        wanted = None if keys is None else set(keys)
        declared = {key: BY_NAME.get(listener_setting(key) or key) for key in default}
        return [_entry(key, [{"name": key, "value": _shown(key, text), "source": DYNAMIC_DEFAULT_BROKER_CONFIG}],
                       False, synonyms, documentation,
                       config_type(key, setting.default if (setting := declared[key]) is not None else text),
                       setting.doc if setting is not None else None)
                for key, text in sorted(default.items()) if wanted is None or key in wanted]
    if entity != str(node.node_id):
        raise KafkaError(ErrorCode.invalid_request,
                         f"Unexpected broker id, expected {node.node_id} or empty string, but received {name}")
    own, default = await node.run_admin(lambda: (store.get(entity), store.get("")))
    static = node.dynamic_configs.static
    wanted = None if keys is None else set(keys)
    entries = []
    base_chains: dict[str, list[dict[str, Any]]] = {}
    for key, current in node.config.as_dict().items():
        if wanted is not None and key not in wanted:
            continue
        setting = BY_NAME.get(key)
        chain: list[dict[str, Any]] = []
        if key in DYNAMIC and key in own:
            chain.append({"name": key, "value": _shown(key, own[key]), "source": DYNAMIC_BROKER_CONFIG})
        if key in DYNAMIC and key in default:
            chain.append({"name": key, "value": _shown(key, default[key]), "source": DYNAMIC_DEFAULT_BROKER_CONFIG})
        static_value = static.get(key, current)
        if setting is None or static_value != setting.default:
            chain.append({"name": key, "value": kafka_text(static_value), "source": STATIC_BROKER_CONFIG})
        if setting is not None:
            chain.append({"name": key, "value": kafka_text(setting.default), "source": DEFAULT_CONFIG})
        base_chains[key] = chain  # a listener's own value of it lists these after its own
        entries.append(_entry(key, chain, key not in DYNAMIC and key not in RECONFIGURABLE_TLS, synonyms, documentation,
                              TYPE_PASSWORD if key in SENSITIVE_SETTINGS else
                              config_type(key, setting.default if setting is not None else current),
                              setting.doc if setting is not None else None))
    for key, chain in _listener_chains(node, own, default):
        if wanted is None or key in wanted:
            setting = BY_NAME[listener_setting(key) or key]
            entries.append(_entry(key, chain + base_chains.get(setting.name, []), False, synonyms, documentation,
                                  config_type(setting.name, setting.default), setting.doc))
    return entries + _listener_tls_entries(node, own, wanted, synonyms, documentation)


def _listener_tls_entries(node: WorkerServices, own: Overrides, wanted: set[str] | None, synonyms: bool,
                          documentation: bool) -> list[dict[str, Any]]:
    """This broker's dynamic per-listener TLS configs, each with the setting it overrides
    (from the file, else its default) as synonyms, as Kafka lists listener overrides."""
    entries = []
    for name, text in sorted(own.items()):
        parts = split(name)
        if parts is None or (wanted is not None and name not in wanted):
            continue
        listener, key = parts
        setting = BY_NAME[key]
        chain = [{"name": name, "value": text, "source": DYNAMIC_BROKER_CONFIG}]
        static = node.config.tls_settings(listener)[key]
        if static != str(setting.default):
            chain.append({"name": key, "value": static, "source": STATIC_BROKER_CONFIG})
        chain.append({"name": key, "value": str(setting.default), "source": DEFAULT_CONFIG})
        entries.append(_entry(name, chain, False, synonyms, documentation,
                              TYPE_PASSWORD if key in PASSWORDS else TYPE_STRING, setting.doc))
    return entries


def _listener_chains(node: WorkerServices, own: Overrides, default: Overrides) -> list[tuple[str, list[dict[str, Any]]]]:
    """The ``listener.name.<listener>.<setting>`` configs this broker has (run time or file), each
    with its own sources; Kafka lists the base setting's after them as synonyms."""
    static = {f"{LISTENER_PREFIX}{listener.lower()}.{name}": text
              for listener, names in node.config.per_listener.items() for name, text in names.items()}
    out = []
    for key in sorted((own.keys() | default.keys() | static.keys()) - BY_NAME.keys()):
        if listener_setting(key) is None:
            continue
        chain = [{"name": key, "value": _shown(key, texts[key]), "source": source}
                 for texts, source in ((own, DYNAMIC_BROKER_CONFIG), (default, DYNAMIC_DEFAULT_BROKER_CONFIG),
                                       (static, STATIC_BROKER_CONFIG)) if key in texts]
        out.append((key, chain))
    return out


# ---------------------------------------------------------------------------- altering
def _check_operation(op: Any) -> None:
    if op.config_operation not in OPERATIONS:
        raise KafkaError(ErrorCode.invalid_request, f"Unknown operations type {op.config_operation}")
    if op.config_operation != OP_DELETE and op.value is None:
        raise config_resources.null_values([op.name])
    if op.config_operation in _OP_WORDS:
        if op.name not in BY_NAME:
            raise KafkaError(ErrorCode.invalid_config, f"Unknown config name: {op.name}")
        if op.name not in LIST_CONFIGS:
            raise KafkaError(ErrorCode.invalid_config, f"Config value {_OP_WORDS[op.config_operation]} is not "
                                                       f"allowed for config key: {op.name}")


def incremental(node: WorkerServices, resource: Any) -> Callable[[Overrides], Overrides]:
    """IncrementalAlterConfigs: the request's operations applied to the entity's dynamic configs."""
    return config_resources.incremental(resource, _check_operation, lambda name: kafka_text(node.config.value(name)))


def _checked(node: WorkerServices, entity: str, current: Overrides, configs: Overrides) -> Overrides:
    """``configs`` (replacing ``current``) validated whole, as they are to be stored."""
    try:
        validate(configs, per_broker=entity != "")
    except InvalidBrokerConfig as exc:
        raise KafkaError(ErrorCode.invalid_config if exc.unknown else ErrorCode.invalid_request, str(exc)) from None
    security = node.security
    serving = security.tls_settings if entity == str(node.node_id) else None  # another broker's files are not here
    try:
        return prepare(current, configs, node.dynamic_configs.encoder, serving, node.config.tls_settings,
                       security.tls_listeners())
    except ListenerConfigError as exc:
        raise KafkaError(ErrorCode.invalid_request, str(exc)) from None


async def alter_broker(node: WorkerServices, name: str, change: Callable[[Overrides], Overrides],
                       validate_only: bool) -> None:
    """Apply ``change`` to the entity's dynamic configs (validated whole), unless ``validate_only``."""
    entity = entity_of(node, name)
    dynamic = node.dynamic_configs
    store = dynamic.store
    if validate_only:
        current = await node.run_admin(lambda: store.get(entity))
        _checked(node, entity, current, change(current))
        return
    new = await node.run_admin(lambda: store.update(entity, lambda current: _checked(node, entity, current,
                                                                                     change(current))))
    dynamic.wrote(entity, new)


BROKER = ConfigResourceType(
    RESOURCE_BROKER, config_resources.on_cluster, ErrorCode.cluster_authorization_failed, describe_broker,
    alter_configs=config_resources.altering(lambda _node, resource: config_resources.replace_all(resource), alter_broker),
    incremental_alter_configs=config_resources.altering(incremental, alter_broker))
