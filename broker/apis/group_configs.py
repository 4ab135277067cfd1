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

from broker.apis import config_resources
from broker.apis.config_resources import OP_APPEND, OP_DELETE, OP_SUBTRACT, OPERATIONS, ConfigResourceType, entry
from broker.authorization import group_allowed
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

RESOURCE_GROUP = 32

# DescribeConfigsResponse ConfigSource
STATIC_BROKER_CONFIG = 4
DEFAULT_CONFIG = 5
GROUP_CONFIG = 8

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
        entries.append(entry(name, value, chain[0]["source"] if chain else DEFAULT_CONFIG, chain if synonyms else [],
                             key.config_type, key.doc if documentation else None))
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


def _null_values(names: list[str]) -> KafkaError:
    return KafkaError(ErrorCode.invalid_config, f"Null value not supported for group configs: {', '.join(names)}")


def replace_all(_node: WorkerServices, resource: Any) -> Callable[[Overrides], Overrides]:
    """AlterConfigs: the group's overrides become the request's."""
    return config_resources.replace_all(resource, _null_values)


def _check_operation(op: Any) -> None:
    if op.config_operation not in OPERATIONS:
        raise KafkaError(ErrorCode.invalid_request, f"Unknown operation type {op.config_operation}")
    if op.config_operation != OP_DELETE and op.value is None:
        raise _null_values([op.name])
    key = KEYS.get(op.name)
    if op.config_operation in _OP_NAMES and (key is None or key.config_type != TYPE_LIST):
        raise KafkaError(ErrorCode.invalid_config,
                         f"Can't {_OP_NAMES[op.config_operation]} to key {op.name} because its type is not LIST.")


def incremental(_node: WorkerServices, resource: Any) -> Callable[[Overrides], Overrides]:
    """IncrementalAlterConfigs: the request's operations applied to the group's overrides."""
    return config_resources.incremental(resource, _check_operation, lambda _name: "")


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


GROUP = ConfigResourceType(RESOURCE_GROUP, group_allowed, ErrorCode.group_authorization_failed, describe_group,
                           alter_configs=config_resources.altering(replace_all, alter_group),
                           incremental_alter_configs=config_resources.altering(incremental, alter_group))
