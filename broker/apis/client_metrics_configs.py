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

from broker.apis import config_resources
from broker.apis.config_resources import (
    OP_APPEND,
    OP_DELETE,
    OP_SUBTRACT,
    OPERATIONS,
    TYPE_INT,
    TYPE_LIST,
    ConfigResourceType,
    entry,
)
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
_TYPES = {METRICS: TYPE_LIST, INTERVAL_MS: TYPE_INT, MATCH: TYPE_LIST}
_DEFAULTS = {METRICS: "", INTERVAL_MS: str(DEFAULT_INTERVAL_MS), MATCH: ""}
_DOCS = {METRICS: "Telemetry metric name prefix list", INTERVAL_MS: "Metrics push interval in milliseconds",
         MATCH: "Client match criteria"}
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
        entries.append(entry(key, value, source, chain if synonyms else [], _TYPES[key],
                             _DOCS[key] if documentation else None))
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


def replace_all(_node: WorkerServices, resource: Any) -> Callable[[Config], Config]:
    """AlterConfigs: the subscription's keys become the request's."""
    return config_resources.replace_all(resource)


def _check_operation(op: Any) -> None:
    if op.config_operation not in OPERATIONS:
        raise KafkaError(ErrorCode.invalid_request, f"Unknown operation type {op.config_operation}")
    if op.config_operation != OP_DELETE and op.value is None:
        raise config_resources.null_values([op.name])
    if op.config_operation in _OP_NAMES and _TYPES.get(op.name) != TYPE_LIST:
        raise KafkaError(ErrorCode.invalid_config,
                         f"Can't {_OP_NAMES[op.config_operation]} to key {op.name} because its type is not LIST.")


def incremental(_node: WorkerServices, resource: Any) -> Callable[[Config], Config]:
    """IncrementalAlterConfigs: the request's operations on the subscription's keys."""
    return config_resources.incremental(resource, _check_operation, lambda _name: "", parse_list)


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


CLIENT_METRICS = ConfigResourceType(
    RESOURCE_CLIENT_METRICS, config_resources.on_cluster, ErrorCode.cluster_authorization_failed, describe,
    alter_configs=config_resources.altering(replace_all, alter),
    incremental_alter_configs=config_resources.altering(incremental, alter))
