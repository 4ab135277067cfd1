"""CLIENT_METRICS config resources (ConfigResource type 16, KIP-714's subscriptions) in
DescribeConfigs, AlterConfigs and IncrementalAlterConfigs (broker/apis/configs.py dispatches
here), as Kafka 4.4 answers them (ListConfigResources, which lists them:
broker/apis/list_config_resources.py).

* DescribeConfigs shows every key (Kafka 4.4's ConfigHelper): one the subscription sets with
  source CLIENT_METRICS_CONFIG (7) and itself as its synonym, the others with their default
  (interval.ms 300000, the lists empty) and source DEFAULT_CONFIG (5), no synonym; a
  subscription that does not exist shows the defaults (no error). The empty name is
  INVALID_REQUEST.
* AlterConfigs replaces the subscription's keys; IncrementalAlterConfigs applies SET / DELETE /
  APPEND / SUBTRACT (the last two to the LIST keys ``metrics`` and ``match``). The result is
  validated whole (broker/telemetry/subscriptions.py: Kafka's ClientMetricsConfigs.validate,
  INVALID_REQUEST or INVALID_CONFIG with its message) before anything is written, so nothing
  is applied half; deleting every key deletes the subscription. ``validate_only`` writes
  nothing. Stored in /config/client-metrics/<name> with a change notification (ZooKeeper) or
  a local file (coordination/client_metrics_store.py); every worker follows the store.
* Authorization (configs.py and here): DESCRIBE_CONFIGS / ALTER_CONFIGS on the cluster, else
  CLUSTER_AUTHORIZATION_FAILED, as Kafka.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

from broker.context import WorkerServices
from broker.protocol.errors import ErrorCode, KafkaError
from broker.telemetry.subscriptions import (
    DEFAULT_INTERVAL_MS,
    INTERVAL_MS,
    KEYS,
    MATCH,
    METRICS,
    InvalidSubscription,
    parse_list,
    validate,
)

RESOURCE_CLIENT_METRICS = 16
CLIENT_METRICS_CONFIG = 7  # DescribeConfigsResponse ConfigSource
DEFAULT_CONFIG = 5
TYPE_INT, TYPE_LIST = 3, 7
_TYPES = {METRICS: TYPE_LIST, INTERVAL_MS: TYPE_INT, MATCH: TYPE_LIST}
_DEFAULTS = {METRICS: "", INTERVAL_MS: str(DEFAULT_INTERVAL_MS), MATCH: ""}
_DOCS = {METRICS: "Telemetry metric name prefix list", INTERVAL_MS: "Metrics push interval in milliseconds",
         MATCH: "Client match criteria"}
OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT = 0, 1, 2, 3
_OP_NAMES = {OP_APPEND: "APPEND", OP_SUBTRACT: "SUBTRACT"}

Config = dict[str, str]


# ---------------------------------------------------------------------------- DescribeConfigs
async def describe(node: WorkerServices, name: str, keys: Iterable[str] | None, synonyms: bool,
                   documentation: bool) -> list[dict[str, Any]]:
    if not name:
        raise KafkaError(ErrorCode.invalid_request, "Client metrics subscription name must not be empty")
    subscriptions = node.telemetry.subscriptions
    config = await node.run_admin(lambda: subscriptions.read_fresh(name))
    wanted = None if keys is None else set(keys)
    entries = []
    for key in KEYS:
        if wanted is not None and key not in wanted:
            continue
        if key in config:
            value, source = config[key], CLIENT_METRICS_CONFIG
            chain = [{"name": key, "value": value, "source": source}]
        else:
            value, source, chain = _DEFAULTS[key], DEFAULT_CONFIG, []
        entries.append({"name": key, "value": value, "read_only": False, "config_source": source,
                        "is_sensitive": False, "synonyms": chain if synonyms else [], "config_type": _TYPES[key],
                        "documentation": _DOCS[key] if documentation else None})
    return entries


# ---------------------------------------------------------------------------- altering
def _checked(name: str, config: Config) -> Config:
    if not config:
        return config  # every key deleted: the subscription goes
    try:
        validate(name, config)
    except InvalidSubscription as exc:
        raise KafkaError(ErrorCode.invalid_request if exc.invalid_request else ErrorCode.invalid_config,
                         str(exc)) from None
    return config


def replace_all(resource: Any) -> Callable[[Config], Config]:
    """AlterConfigs: the subscription's keys become the request's."""
    nulls = [c.name for c in resource.configs if c.value is None]
    if nulls:
        raise KafkaError(ErrorCode.invalid_request, f"Null value not supported for : {','.join(nulls)}")
    new = {c.name: c.value for c in resource.configs}
    return lambda _current: dict(new)


def incremental(resource: Any) -> Callable[[Config], Config]:
    """IncrementalAlterConfigs: the request's operations on the subscription's keys."""
    names = [c.name for c in resource.configs]
    if len(set(names)) != len(names):
        raise KafkaError(ErrorCode.invalid_request, "Error due to duplicate config keys")
    for op in resource.configs:
        if op.config_operation not in (OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT):
            raise KafkaError(ErrorCode.invalid_request, f"Unknown operation type {op.config_operation}")
        if op.config_operation != OP_DELETE and op.value is None:
            raise KafkaError(ErrorCode.invalid_request, f"Null value not supported for : {op.name}")
        if op.config_operation in _OP_NAMES and _TYPES.get(op.name) != TYPE_LIST:
            raise KafkaError(ErrorCode.invalid_config,
                             f"Can't {_OP_NAMES[op.config_operation]} to key {op.name} because its type is not LIST.")

    def apply(current: Config) -> Config:
        new = dict(current)
        for op in resource.configs:
            if op.config_operation == OP_SET:
                new[op.name] = op.value
            elif op.config_operation == OP_DELETE:
                new.pop(op.name, None)
            else:
                present = parse_list(new.get(op.name, ""))
                given = parse_list(op.value)
                if op.config_operation == OP_APPEND:
                    result = present + [item for item in given if item not in present]
                else:
                    result = [item for item in present if item not in given]
                new[op.name] = ",".join(result)
        return new

    return apply


async def alter(node: WorkerServices, name: str, change: Callable[[Config], Config], validate_only: bool) -> None:
    """Apply ``change`` to the subscription (validated whole first), unless ``validate_only``."""
    if not name:
        raise KafkaError(ErrorCode.invalid_request, "Subscription name can't be empty")
    subscriptions = node.telemetry.subscriptions
    current = await node.run_admin(lambda: subscriptions.read_fresh(name))
    _checked(name, change(current))
    if validate_only:
        return
    await node.run_admin(lambda: subscriptions.update(name, lambda config: _checked(name, change(config))))


