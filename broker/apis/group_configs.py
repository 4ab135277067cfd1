"""GROUP config resources (ConfigResource type 32) in DescribeConfigs, AlterConfigs and
IncrementalAlterConfigs (broker/apis/configs.py dispatches here), as Kafka 4.4 answers them.

* DescribeConfigs lists every non-internal key of Kafka's GroupConfig
  (coordination/group_config_keys.py), plus the internal ones the group sets. A key the group sets has
  source GROUP_CONFIG (8); otherwise it shows the broker's value under its broker synonym
  (``group.consumer.session.timeout.ms``), STATIC_BROKER_CONFIG (4) when the broker was given a
  value other than the default, else DEFAULT_CONFIG (5); a key without a synonym
  (``share.auto.offset.reset``) shows GroupConfig's default, DEFAULT_CONFIG, under its own name
  (Kafka's ConfigHelper.createGroupConfigEntry). A group need not exist to have configs. The
  overrides are read from the store, not the process's cache, so a describe right after an
  alter on another connection (another worker) sees it. The empty name is INVALID_REQUEST
  "Group name must not be empty".
* AlterConfigs replaces the group's overrides; IncrementalAlterConfigs applies SET / DELETE /
  APPEND / SUBTRACT (the last two only to LIST keys: "Can't APPEND to key ... because its type
  is not LIST."). The result is validated whole, as Kafka's controller does
  (GroupConfig.validate: INVALID_CONFIG with Kafka's message); validate_only writes nothing.
  The empty name is INVALID_REQUEST "Default group resources are not allowed.". A null value
  to set is INVALID_CONFIG.
* Authorization (checked by configs.py): DESCRIBE_CONFIGS / ALTER_CONFIGS on the GROUP
  resource, else GROUP_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

from broker.context import WorkerServices
from broker.protocol.errors import ErrorCode, KafkaError
from coordination.group_config_keys import (
    KAFKA_BROKER_DEFAULTS,
    KEYS,
    TYPE_LIST,
    BrokerValues,
    InvalidGroupConfig,
    parse,
    text_of,
    validate,
)
from coordination.group_configs import GroupConfigs

# DescribeConfigsResponse ConfigSource
STATIC_BROKER_CONFIG = 4
DEFAULT_CONFIG = 5
GROUP_CONFIG = 8

# IncrementalAlterConfigs OpType
OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT = 0, 1, 2, 3
_OP_NAMES = {OP_APPEND: "APPEND", OP_SUBTRACT: "SUBTRACT"}

Overrides = dict[str, str]


# ---------------------------------------------------------------------------- DescribeConfigs
def _shown(name: str, overrides: Overrides) -> str:
    try:
        return text_of(parse(name, overrides[name]))
    except InvalidGroupConfig:
        return overrides[name]  # stored by hand: shown as it is


def _broker_text(broker: BrokerValues, name: str) -> str:
    return text_of(broker.value(name))


def group_config_entries(configs: GroupConfigs, overrides: Overrides, keys: Iterable[str] | None = None,
                         synonyms: bool = False, documentation: bool = False) -> list[dict[str, Any]]:
    """A group's configs as DescribeConfigs shows them."""
    wanted = None if keys is None else set(keys)
    broker = configs.broker
    entries = []
    for name, key in KEYS.items():
        if (key.internal and name not in overrides) or (wanted is not None and name not in wanted):
            continue
        chain: list[dict[str, Any]] = []
        if name in overrides:
            chain.append({"name": name, "value": _shown(name, overrides), "source": GROUP_CONFIG})
        if key.broker_key is not None:
            broker_key = key.broker_key
            if broker.is_set(broker_key):
                chain.append({"name": broker_key, "value": _broker_text(broker, broker_key), "source": STATIC_BROKER_CONFIG})
                default = KAFKA_BROKER_DEFAULTS[broker_key]
                chain.append({"name": broker_key, "value": text_of(default), "source": DEFAULT_CONFIG})
            else:
                chain.append({"name": broker_key, "value": _broker_text(broker, broker_key), "source": DEFAULT_CONFIG})
        elif key.default is not None:
            chain.append({"name": name, "value": key.default, "source": DEFAULT_CONFIG})
        if name in overrides:
            value: str | None = chain[0]["value"]
        else:
            fallback = configs.broker_value(name)
            value = None if fallback is None else text_of(fallback)
        entries.append({
            "name": name,
            "value": value,
            "read_only": False,
            "config_source": chain[0]["source"] if chain else DEFAULT_CONFIG,
            "is_sensitive": False,
            "synonyms": chain if synonyms else [],
            "config_type": key.config_type,
            "documentation": key.doc if documentation else None,
        })
    return entries


async def describe_group(node: WorkerServices, name: str, keys: Iterable[str] | None, synonyms: bool,
                         documentation: bool) -> list[dict[str, Any]]:
    if not name:
        raise KafkaError(ErrorCode.invalid_request, "Group name must not be empty")
    configs = node.group_configs
    overrides = await node.run_admin(lambda: configs.read_fresh(name))
    return group_config_entries(configs, overrides, keys, synonyms, documentation)


# ---------------------------------------------------------------------------- altering
def _checked(broker: BrokerValues, overrides: Overrides) -> Overrides:
    try:
        validate(overrides, broker)
    except InvalidGroupConfig as exc:
        raise KafkaError(ErrorCode.invalid_config, str(exc)) from None
    return overrides


def replace_all(resource: Any) -> Callable[[Overrides], Overrides]:
    """AlterConfigs: the group's overrides become the request's."""
    nulls = [c.name for c in resource.configs if c.value is None]
    if nulls:
        raise KafkaError(ErrorCode.invalid_config, f"Null value not supported for group configs: {', '.join(nulls)}")
    new = {c.name: c.value for c in resource.configs}
    return lambda _current: dict(new)


def _items(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


def incremental(resource: Any) -> Callable[[Overrides], Overrides]:
    """IncrementalAlterConfigs: the request's operations applied to the group's overrides."""
    names = [c.name for c in resource.configs]
    if len(set(names)) != len(names):
        raise KafkaError(ErrorCode.invalid_request, "Error due to duplicate config keys")
    for op in resource.configs:
        if op.config_operation not in (OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT):
            raise KafkaError(ErrorCode.invalid_request, f"Unknown operation type {op.config_operation}")
        if op.config_operation != OP_DELETE and op.value is None:
            raise KafkaError(ErrorCode.invalid_config, f"Null value not supported for group configs: {op.name}")
        key = KEYS.get(op.name)
        if op.config_operation in _OP_NAMES and (key is None or key.config_type != TYPE_LIST):
            raise KafkaError(ErrorCode.invalid_config,
                             f"Can't {_OP_NAMES[op.config_operation]} to key {op.name} because its type is not LIST.")

    def apply(current: Overrides) -> Overrides:
        new = dict(current)
        for op in resource.configs:
            if op.config_operation == OP_SET:
                new[op.name] = op.value
            elif op.config_operation == OP_DELETE:
                new.pop(op.name, None)
            else:
                present = _items(new.get(op.name, ""))
                given = _items(op.value)
                if op.config_operation == OP_APPEND:
                    result = present + [item for item in given if item not in present]
                else:
                    result = [item for item in present if item not in given]
                new[op.name] = ",".join(result)
        return new

    return apply


async def alter_group(node: WorkerServices, name: str, change: Callable[[Overrides], Overrides],
                      validate_only: bool) -> None:
    """Apply ``change`` to the group's overrides (validated whole), unless ``validate_only``."""
    if not name:
        raise KafkaError(ErrorCode.invalid_request, "Default group resources are not allowed.")
    configs = node.group_configs
    broker = configs.broker
    if validate_only:
        current = await node.run_admin(lambda: configs.read_fresh(name))
        _checked(broker, change(current))
        return
    await node.run_admin(lambda: configs.update(name, lambda current: _checked(broker, change(current))))
