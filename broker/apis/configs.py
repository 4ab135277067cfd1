"""DescribeConfigs (key 32) v1-4, AlterConfigs (key 33) v0-2, IncrementalAlterConfigs (key 44) v0-1.

Behaviour:

* TOPIC resources (type 2) show every topic-level key of the topic's effective config
  (storage.config.TOPIC_KEYS): a topic override has source DYNAMIC_TOPIC_CONFIG (1); a
  key without one shows the broker's value, with source STATIC_BROKER_CONFIG (4) when
  the broker setting differs from its declared default, else DEFAULT_CONFIG (5) (a
  setting set to exactly its default counts as not set: BrokerConfig keeps no record of
  where a value came from). An unknown topic is UNKNOWN_TOPIC_OR_PARTITION on its resource.
* BROKER resources (type 4), dynamic broker configs: broker/apis/broker_configs.py.
  Any other resource type is INVALID_REQUEST.
* Nothing is sensitive (no passwords exist). Synonyms, when asked for, list the values
  in precedence order: the topic override, the broker setting, the declared default.
  ``config_type`` is a best effort from the Python type of the value (Kafka's own
  INT/LONG split is followed for the keys it defines). Documentation comes from the
  Setting declarations.
* AlterConfigs replaces a topic's whole override set; IncrementalAlterConfigs applies
  SET/DELETE/APPEND/SUBTRACT to it (APPEND/SUBTRACT only for list-typed keys:
  cleanup.policy). Both validate the result with LogConfig.with_overrides (unknown keys
  and bad values: INVALID_CONFIG with the reason), honour validate_only, persist in the
  topic registry and wait until every worker has applied the change before answering.
  Unlike Kafka, deleting an unknown key is INVALID_CONFIG too (unknown keys are always
  an error here).
  A resource named twice in one request is INVALID_REQUEST ("Duplicate resource."),
  answered once.
* GROUP resources (type 32): broker/apis/group_configs.py.
* CLIENT_METRICS resources (type 16): broker/apis/client_metrics_configs.py.
* BROKER_LOGGER resources (type 8): broker/apis/broker_loggers.py (IncrementalAlterConfigs only).

Version notes: DescribeConfigs v0 is not in kio's schemas (Kafka 4 dropped it); v1 adds
synonyms and config_source; v2 is v1; v3 adds documentation and config_type; v4 is
flexible. AlterConfigs v1 is v0; v2 is flexible. IncrementalAlterConfigs v1 is flexible.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

from broker.apis import broker_configs, broker_loggers, client_metrics_configs, group_configs
from broker.authorization import cluster_allowed, group_allowed, topic_allowed
from broker.config import BY_NAME
from broker.context import RequestContext, Response, WorkerServices
from broker.dispatch import api
from broker.protocol import codec
from broker.protocol.build import build
from broker.protocol.errors import ErrorCode, KafkaError
from broker.protocol.requests import AlterConfigsRequest, DescribeConfigsRequest, IncrementalAlterConfigsRequest
from coordination.acls.model import Operation
from coordination.topics import TopicRegistryError
from storage.config import TOPIC_KEYS, LogConfig

DESCRIBE_KEY = 32
ALTER_KEY = 33
INCREMENTAL_KEY = 44

# ConfigResource.Type
RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
RESOURCE_GROUP = 32
RESOURCE_CLIENT_METRICS = client_metrics_configs.RESOURCE_CLIENT_METRICS
RESOURCE_BROKER_LOGGER = 8

# DescribeConfigsResponse ConfigSource
DYNAMIC_TOPIC_CONFIG = 1
STATIC_BROKER_CONFIG = 4
DEFAULT_CONFIG = 5

# DescribeConfigsResponse ConfigType
TYPE_BOOLEAN = 1
TYPE_STRING = 2
TYPE_INT = 3
TYPE_LONG = 5
TYPE_DOUBLE = 6
TYPE_LIST = 7

# IncrementalAlterConfigs OpType
OP_SET = 0
OP_DELETE = 1
OP_APPEND = 2
OP_SUBTRACT = 3

_TYPES = {"boolean": TYPE_BOOLEAN, "string": TYPE_STRING, "int": TYPE_INT, "long": TYPE_LONG, "double": TYPE_DOUBLE,
          "list": TYPE_LIST}
# Every topic key and its broker-level synonym: the type Kafka's ConfigDef declares.
_KAFKA_TYPES = {name: _TYPES[spec.kafka_type] for key, spec in TOPIC_KEYS.items()
                for name in (key, spec.broker_key) if name}
_LIST_KEYS = frozenset({name for name, kind in _KAFKA_TYPES.items() if kind == TYPE_LIST}
                       | {"log.dirs", "listeners", "advertised.listeners"})
_PRISTINE = LogConfig()


# ---------------------------------------------------------------------------- shared helpers
def _text(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _config_type(name: str, value: Any) -> int:
    if name in _KAFKA_TYPES:
        return _KAFKA_TYPES[name]
    if isinstance(value, bool):
        return TYPE_BOOLEAN
    if isinstance(value, float):
        return TYPE_DOUBLE
    if isinstance(value, int):
        if name.endswith(".ms") or not -(1 << 31) <= value < (1 << 31):
            return TYPE_LONG
        return TYPE_INT
    return TYPE_LIST if name in _LIST_KEYS else TYPE_STRING


def _broker_setting_is_set(node: Any, name: str) -> bool:
    setting = BY_NAME.get(name)
    return setting is not None and node.config.value(name) != setting.default


def topic_config_entries(node: Any, overrides: dict[str, str], keys: Iterable[str] | None = None,
                         synonyms: bool = False, documentation: bool = False) -> list[dict[str, Any]]:
    """A topic's effective config as DescribeConfigs (and CreateTopics v5+) show it."""
    wanted = None if keys is None else set(keys)
    broker_defaults: LogConfig = node.logs.default_log_config
    effective = broker_defaults.with_overrides(overrides).topic_values()
    broker_values = broker_defaults.topic_values()
    pristine = _PRISTINE.topic_values()
    entries = []
    for key, value in effective.items():
        if wanted is not None and key not in wanted:
            continue
        spec = TOPIC_KEYS[key]
        broker_key = spec.broker_key
        chain = []
        if key in overrides:
            chain.append({"name": key, "value": value, "source": DYNAMIC_TOPIC_CONFIG})
        dynamic_source = node.dynamic_configs.source(broker_key) if broker_key else None
        if dynamic_source is not None:
            chain.append({"name": broker_key, "value": broker_values[key], "source": dynamic_source})
        elif broker_key and _broker_setting_is_set(node, broker_key):
            chain.append({"name": broker_key, "value": broker_values[key], "source": STATIC_BROKER_CONFIG})
        # Kafka names the default after the broker synonym, or the topic key when it has none.
        chain.append({"name": broker_key or key, "value": pristine[key], "source": DEFAULT_CONFIG})
        entries.append({
            "name": key,
            "value": value,
            "read_only": False,
            "config_source": chain[0]["source"],
            "is_sensitive": False,
            "synonyms": chain if synonyms else [],
            "config_type": _config_type(key, getattr(_PRISTINE, spec.field)),
            "documentation": _topic_doc(key, broker_key) if documentation else None,
        })
    return entries


def _topic_doc(key: str, broker_key: str) -> str:
    default = f"the broker-wide default is {broker_key}" if broker_key else "Kafka has no broker-wide default for it"
    return f"The topic's {key}; {default}."


def _duplicates(resources: Iterable[Any]) -> set[tuple[int, str]]:
    seen: set[tuple[int, str]] = set()
    dupes: set[tuple[int, str]] = set()
    for resource in resources:
        key = (resource.resource_type, resource.resource_name)
        (dupes if key in seen else seen).add(key)
    return dupes


# ---------------------------------------------------------------------------- DescribeConfigs
async def _describe_one(node: Any, resource: Any, synonyms: bool, documentation: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"error_code": 0, "error_message": None, "resource_type": resource.resource_type,
                           "resource_name": resource.resource_name, "configs": []}
    keys = resource.configuration_keys
    try:
        if resource.resource_type == RESOURCE_TOPIC:
            info = node.topic(resource.resource_name)
            if info is None:
                raise KafkaError(ErrorCode.unknown_topic_or_partition, f"topic '{resource.resource_name}' does not exist")
            out["configs"] = topic_config_entries(node, dict(info.configs), keys, synonyms, documentation)
        elif resource.resource_type == RESOURCE_BROKER:
            out["configs"] = await broker_configs.describe_broker(node, resource.resource_name, keys, synonyms,
                                                                  documentation, _config_type)
        elif resource.resource_type == RESOURCE_BROKER_LOGGER:
            out["configs"] = await broker_loggers.describe_loggers(node, resource.resource_name, keys)
        elif resource.resource_type == RESOURCE_GROUP:
            out["configs"] = await group_configs.describe_group(node, resource.resource_name, keys, synonyms,
                                                                documentation)
        elif resource.resource_type == RESOURCE_CLIENT_METRICS:
            out["configs"] = await client_metrics_configs.describe(node, resource.resource_name, keys, synonyms,
                                                                   documentation)
        else:
            raise KafkaError(ErrorCode.invalid_request, f"unsupported resource type {resource.resource_type}")
    except KafkaError as exc:
        out.update(error_code=exc.code, error_message=str(exc), configs=[])
    return out


def _authorize_resource(ctx: Any, operation: Operation, resource: Any) -> None:
    """Kafka's checks: ``operation`` on the topic or the group, or on the cluster for a broker's configs."""
    if resource.resource_type == RESOURCE_TOPIC and not topic_allowed(ctx, operation, resource.resource_name):
        raise KafkaError(ErrorCode.topic_authorization_failed, "Authorization failed.")
    if resource.resource_type == RESOURCE_GROUP and not group_allowed(ctx, operation, resource.resource_name):
        raise KafkaError(ErrorCode.group_authorization_failed, "Authorization failed.")
    if resource.resource_type in (RESOURCE_BROKER, RESOURCE_BROKER_LOGGER, RESOURCE_CLIENT_METRICS) \
            and not cluster_allowed(ctx, operation):
        raise KafkaError(ErrorCode.cluster_authorization_failed, "Authorization failed.")


def _describe_error(request: Any, version: int, code: int) -> Any:
    return build(codec.response_class(DESCRIBE_KEY, version), {
        "throttle_time": 0,
        "results": [{"error_code": code, "error_message": None, "resource_type": r.resource_type,
                     "resource_name": r.resource_name, "configs": []} for r in request.resources],
    })


@api(DESCRIBE_KEY, "DescribeConfigs", 1, 4, error_response=_describe_error)
async def handle_describe_configs(ctx: RequestContext, request: DescribeConfigsRequest) -> Response:
    synonyms = bool(request.include_synonyms)
    documentation = bool(getattr(request, "include_documentation", False))  # the field exists from v3
    results = []
    for resource in request.resources:
        try:
            _authorize_resource(ctx, Operation.DESCRIBE_CONFIGS, resource)
        except KafkaError as exc:
            results.append({"error_code": exc.code, "error_message": str(exc), "resource_type": resource.resource_type,
                            "resource_name": resource.resource_name, "configs": []})
            continue
        results.append(await _describe_one(ctx.node, resource, synonyms, documentation))
    return build(codec.response_class(DESCRIBE_KEY, ctx.api_version), {"throttle_time": 0, "results": results})


# ---------------------------------------------------------------------------- altering topic configs
def check_overrides(node: Any, overrides: dict[str, str]) -> dict[str, str]:
    """``overrides`` if LogConfig accepts them, else KafkaError(INVALID_CONFIG) naming the key."""
    defaults: LogConfig = node.logs.default_log_config
    for key, value in overrides.items():
        try:
            defaults.with_overrides({key: value})
        except (TypeError, ValueError) as exc:
            if key not in TOPIC_KEYS:
                raise KafkaError(ErrorCode.invalid_config, f"Unknown topic config name: {key}") from None
            raise KafkaError(ErrorCode.invalid_config, f"Invalid value {value} for configuration {key}: {exc}") from None
    return overrides


async def _alter_topic(node: WorkerServices, name: str, change: Callable[[dict[str, str]], dict[str, str]], validate_only: bool) -> bool:
    """Apply ``change`` to the topic's overrides; True when the registry was changed.

    ``change`` runs once against the current overrides to validate, and again inside
    the registry's locked read-modify-write so a concurrent change is not lost.
    """
    info = node.topic(name)
    if info is None:
        raise KafkaError(ErrorCode.unknown_topic_or_partition, f"topic '{name}' does not exist")
    check_overrides(node, change(dict(info.configs)))
    if validate_only:
        return False
    try:
        await node.run_admin(lambda: node.registry.set_configs(name, lambda current: check_overrides(node, change(current))))
    except TopicRegistryError as exc:
        raise KafkaError(ErrorCode(exc.code), str(exc)) from None
    return True


ChangeFor = Callable[[Any], Callable[[dict[str, str]], dict[str, str]]]


async def _alter(ctx: Any, key: int, request: Any, change_for: ChangeFor, group_change_for: ChangeFor,
                 client_metrics_change_for: ChangeFor, broker_change_for: ChangeFor) -> Any:
    node = ctx.node
    dupes = _duplicates(request.resources)
    responses = []
    answered: set[tuple[int, str]] = set()
    changed = False
    for resource in request.resources:
        ident = (resource.resource_type, resource.resource_name)
        out = {"error_code": 0, "error_message": None, "resource_type": resource.resource_type,
               "resource_name": resource.resource_name}
        try:
            if ident in dupes:
                if ident in answered:
                    continue
                answered.add(ident)
                raise KafkaError(ErrorCode.invalid_request, "Duplicate resource.")
            _authorize_resource(ctx, Operation.ALTER_CONFIGS, resource)
            if resource.resource_type == RESOURCE_BROKER:
                await broker_configs.alter_broker(node, resource.resource_name, broker_change_for(resource),
                                                  bool(request.validate_only))
                responses.append(out)
                continue
            if resource.resource_type == RESOURCE_BROKER_LOGGER and key == INCREMENTAL_KEY:
                await broker_loggers.alter_loggers(node, resource, bool(request.validate_only))
                responses.append(out)
                continue
            if resource.resource_type == RESOURCE_GROUP:
                await group_configs.alter_group(node, resource.resource_name, group_change_for(resource),
                                                bool(request.validate_only))
                responses.append(out)
                continue
            if resource.resource_type == RESOURCE_CLIENT_METRICS:
                await client_metrics_configs.alter(node, resource.resource_name, client_metrics_change_for(resource),
                                                   bool(request.validate_only))
                responses.append(out)
                continue
            if resource.resource_type != RESOURCE_TOPIC:
                raise KafkaError(ErrorCode.invalid_request, f"unsupported resource type {resource.resource_type}")
            changed |= await _alter_topic(node, resource.resource_name, change_for(resource), bool(request.validate_only))
        except KafkaError as exc:
            out.update(error_code=exc.code, error_message=str(exc))
        responses.append(out)
    if changed:
        await node.registry_changed()
    return build(codec.response_class(key, ctx.api_version), {"throttle_time": 0, "responses": responses})


def _alter_error_for(key: int) -> Callable[[Any, int, int], Any]:
    def error(request: Any, version: int, code: int) -> Any:
        return build(codec.response_class(key, version), {
            "throttle_time": 0,
            "responses": [{"error_code": code, "error_message": None, "resource_type": r.resource_type,
                           "resource_name": r.resource_name} for r in request.resources],
        })
    return error


# ---------------------------------------------------------------------------- AlterConfigs
def _replace_all(resource: Any) -> Callable[[dict[str, str]], dict[str, str]]:
    nulls = [c.name for c in resource.configs if c.value is None]
    if nulls:
        raise KafkaError(ErrorCode.invalid_request, f"Null value not supported for : {','.join(nulls)}")
    new = {c.name: c.value for c in resource.configs}
    return lambda _current: dict(new)


@api(ALTER_KEY, "AlterConfigs", 0, 2, error_response=_alter_error_for(ALTER_KEY))
async def handle_alter_configs(ctx: RequestContext, request: AlterConfigsRequest) -> Response:
    return await _alter(ctx, ALTER_KEY, request, _replace_all, group_configs.replace_all,
                        client_metrics_configs.replace_all, broker_configs.replace_all)


# ---------------------------------------------------------------------------- IncrementalAlterConfigs
def _list_items(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


def _incremental(node: Any) -> Callable[[Any], Callable[[dict[str, str]], dict[str, str]]]:
    def change_for(resource: Any) -> Callable[[dict[str, str]], dict[str, str]]:
        names = [c.name for c in resource.configs]
        if len(set(names)) != len(names):
            raise KafkaError(ErrorCode.invalid_request, "Error due to duplicate config keys")
        for op in resource.configs:
            if op.name not in TOPIC_KEYS:
                raise KafkaError(ErrorCode.invalid_config, f"Unknown topic config name: {op.name}")
            if op.config_operation not in (OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT):
                raise KafkaError(ErrorCode.invalid_request, f"unknown config operation {op.config_operation} for {op.name}")
            if op.config_operation != OP_DELETE and op.value is None:
                raise KafkaError(ErrorCode.invalid_request, f"Null value not supported for : {op.name}")
            if op.config_operation in (OP_APPEND, OP_SUBTRACT) and op.name not in _LIST_KEYS:
                raise KafkaError(ErrorCode.invalid_config,
                                 f"{op.name} is not a list: APPEND and SUBTRACT apply to list configs only")

        def apply(current: dict[str, str]) -> dict[str, str]:
            new = dict(current)
            effective = node.logs.default_log_config.topic_values()
            for op in resource.configs:
                if op.config_operation == OP_SET:
                    new[op.name] = op.value
                elif op.config_operation == OP_DELETE:
                    new.pop(op.name, None)
                else:
                    present = _list_items(new.get(op.name, effective[op.name]))
                    given = _list_items(op.value)
                    if op.config_operation == OP_APPEND:
                        result = present + [item for item in given if item not in present]
                    else:
                        result = [item for item in present if item not in given]
                    new[op.name] = ",".join(result)
            return new

        return apply

    return change_for


@api(INCREMENTAL_KEY, "IncrementalAlterConfigs", 0, 1, error_response=_alter_error_for(INCREMENTAL_KEY))
async def handle_incremental_alter_configs(ctx: RequestContext, request: IncrementalAlterConfigsRequest) -> Response:
    return await _alter(ctx, INCREMENTAL_KEY, request, _incremental(ctx.node), group_configs.incremental,
                        client_metrics_configs.incremental, broker_configs.incremental(ctx.node))
