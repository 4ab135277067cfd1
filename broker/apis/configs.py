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
  Each type plugs into the three APIs as a ConfigResourceType (broker/apis/config_resources.py:
  the authorization, describing and altering every type shares the shape of).

Version notes: DescribeConfigs v0 is not in kio's schemas (Kafka 4 dropped it); v1 adds
synonyms and config_source; v2 is v1; v3 adds documentation and config_type; v4 is
flexible. AlterConfigs v1 is v0; v2 is flexible. IncrementalAlterConfigs v1 is flexible.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Awaitable, Callable, Iterable

from broker.apis import config_resources
from broker.apis.broker_configs import BROKER
from broker.apis.broker_loggers import BROKER_LOGGER
from broker.apis.client_metrics_configs import CLIENT_METRICS
from broker.apis.config_resources import (
    LIST_KEYS,
    OP_APPEND,
    OP_DELETE,
    OP_SUBTRACT,
    OPERATIONS,
    ConfigResourceType,
    config_type,
    entry,
)
from broker.apis.group_configs import GROUP
from broker.authorization import topic_allowed
from broker.config import BY_NAME
from broker.context import RequestContext, Response, WorkerServices
from broker.dispatch import api
from broker.protocol import codec
from broker.protocol.build import build
from broker.protocol.errors import ErrorCode, KafkaError
from coordination.acls.model import Operation
from coordination.topics import TopicRegistryError
from storage.config import TOPIC_KEYS, LogConfig

if TYPE_CHECKING:  # ~200 kio classes, for mypy only: none is imported at run time (requests.py)
    from broker.protocol.requests import AlterConfigsRequest, DescribeConfigsRequest, IncrementalAlterConfigsRequest

DESCRIBE_KEY = 32
ALTER_KEY = 33
INCREMENTAL_KEY = 44

RESOURCE_TOPIC = 2  # ConfigResource.Type

# DescribeConfigsResponse ConfigSource
DYNAMIC_TOPIC_CONFIG = 1
STATIC_BROKER_CONFIG = 4
DEFAULT_CONFIG = 5

_PRISTINE = LogConfig()


# ---------------------------------------------------------------------------- TOPIC resources
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
        chain: list[dict[str, Any]] = []
        if key in overrides:
            chain.append({"name": key, "value": value, "source": DYNAMIC_TOPIC_CONFIG})
        dynamic_source = node.dynamic_configs.source(broker_key) if broker_key else None
        if dynamic_source is not None:
            chain.append({"name": broker_key, "value": broker_values[key], "source": dynamic_source})
        elif broker_key and _broker_setting_is_set(node, broker_key):
            chain.append({"name": broker_key, "value": broker_values[key], "source": STATIC_BROKER_CONFIG})
        # Kafka names the default after the broker synonym, or the topic key when it has none.
        chain.append({"name": broker_key or key, "value": pristine[key], "source": DEFAULT_CONFIG})
        entries.append(entry(key, value, chain[0]["source"], chain if synonyms else [],
                             config_type(key, getattr(_PRISTINE, spec.field)),
                             _topic_doc(key, broker_key) if documentation else None))
    return entries


def _topic_doc(key: str, broker_key: str) -> str:
    default = f"the broker-wide default is {broker_key}" if broker_key else "Kafka has no broker-wide default for it"
    return f"The topic's {key}; {default}."


async def _describe_topic(node: WorkerServices, name: str, keys: Iterable[str] | None, synonyms: bool,
                          documentation: bool) -> list[dict[str, Any]]:
    info = node.topic(name)
    if info is None:
        raise KafkaError(ErrorCode.unknown_topic_or_partition, f"topic '{name}' does not exist")
    return topic_config_entries(node, dict(info.configs), keys, synonyms, documentation)


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


async def _alter_topic(node: WorkerServices, name: str, change: Callable[[dict[str, str]], dict[str, str]],
                       validate_only: bool) -> None:
    """Apply ``change`` to the topic's overrides, unless ``validate_only``.

    ``change`` runs once against the current overrides to validate, and again inside
    the registry's locked read-modify-write so a concurrent change is not lost.
    """
    info = node.topic(name)
    if info is None:
        raise KafkaError(ErrorCode.unknown_topic_or_partition, f"topic '{name}' does not exist")
    check_overrides(node, change(dict(info.configs)))
    if validate_only:
        return
    try:
        await node.run_admin(lambda: node.registry.set_configs(name, lambda current: check_overrides(node, change(current))))
    except TopicRegistryError as exc:
        raise KafkaError(ErrorCode(exc.code), str(exc)) from None


def _check_topic_operation(op: Any) -> None:
    if op.name not in TOPIC_KEYS:
        raise KafkaError(ErrorCode.invalid_config, f"Unknown topic config name: {op.name}")
    if op.config_operation not in OPERATIONS:
        raise KafkaError(ErrorCode.invalid_request, f"unknown config operation {op.config_operation} for {op.name}")
    if op.config_operation != OP_DELETE and op.value is None:
        raise config_resources.null_values([op.name])
    if op.config_operation in (OP_APPEND, OP_SUBTRACT) and op.name not in LIST_KEYS:
        raise KafkaError(ErrorCode.invalid_config,
                         f"{op.name} is not a list: APPEND and SUBTRACT apply to list configs only")


def _incremental_topic(node: WorkerServices, resource: Any) -> Callable[[dict[str, str]], dict[str, str]]:
    # A list the topic does not override starts from the broker's value.
    return config_resources.incremental(resource, _check_topic_operation,
                                        lambda name: node.logs.default_log_config.topic_values()[name])


TOPIC = ConfigResourceType(
    RESOURCE_TOPIC, topic_allowed, ErrorCode.topic_authorization_failed, _describe_topic,
    alter_configs=config_resources.altering(lambda _node, resource: config_resources.replace_all(resource), _alter_topic),
    incremental_alter_configs=config_resources.altering(_incremental_topic, _alter_topic),
    settle=lambda node: node.registry_changed())

_TYPES: dict[int, ConfigResourceType] = {kind.code: kind for kind in (TOPIC, BROKER, BROKER_LOGGER, GROUP, CLIENT_METRICS)}


# ---------------------------------------------------------------------------- every resource type
def _authorized(ctx: Any, operation: Operation, resource: Any) -> ConfigResourceType | None:
    """The resource's type once ``operation`` on it is allowed (Kafka's check: on the topic, the group, or the
    cluster for the others); None for a type no config API serves."""
    kind = _TYPES.get(resource.resource_type)
    if kind is not None and not kind.allowed(ctx, operation, resource.resource_name):
        raise KafkaError(kind.denied, "Authorization failed.")
    return kind


def _unsupported(resource: Any) -> KafkaError:
    return KafkaError(ErrorCode.invalid_request, f"unsupported resource type {resource.resource_type}")


def _duplicates(resources: Iterable[Any]) -> set[tuple[int, str]]:
    seen: set[tuple[int, str]] = set()
    dupes: set[tuple[int, str]] = set()
    for resource in resources:
        key = (resource.resource_type, resource.resource_name)
        (dupes if key in seen else seen).add(key)
    return dupes


# ---------------------------------------------------------------------------- DescribeConfigs
async def _describe_one(ctx: Any, resource: Any, synonyms: bool, documentation: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"error_code": 0, "error_message": None, "resource_type": resource.resource_type,
                           "resource_name": resource.resource_name, "configs": []}
    try:
        kind = _authorized(ctx, Operation.DESCRIBE_CONFIGS, resource)
        if kind is None:
            raise _unsupported(resource)
        out["configs"] = await kind.describe(ctx.node, resource.resource_name, resource.configuration_keys, synonyms,
                                             documentation)
    except KafkaError as exc:
        out.update(error_code=exc.code, error_message=str(exc), configs=[])
    return out


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
    results = [await _describe_one(ctx, resource, synonyms, documentation) for resource in request.resources]
    return build(codec.response_class(DESCRIBE_KEY, ctx.api_version), {"throttle_time": 0, "results": results})


# ---------------------------------------------------------------------------- AlterConfigs, IncrementalAlterConfigs
async def _alter(ctx: Any, key: int, request: Any) -> Any:
    node = ctx.node
    validate_only = bool(request.validate_only)
    dupes = _duplicates(request.resources)
    responses = []
    answered: set[tuple[int, str]] = set()
    settles: dict[int, Callable[[WorkerServices], Awaitable[None]]] = {}
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
            kind = _authorized(ctx, Operation.ALTER_CONFIGS, resource)
            alter = None if kind is None else \
                kind.incremental_alter_configs if key == INCREMENTAL_KEY else kind.alter_configs
            if kind is None or alter is None:
                raise _unsupported(resource)
            await alter(node, resource, validate_only)
            if kind.settle is not None and not validate_only:
                settles[kind.code] = kind.settle
        except KafkaError as exc:
            out.update(error_code=exc.code, error_message=str(exc))
        responses.append(out)
    for settle in settles.values():
        await settle(node)
    return build(codec.response_class(key, ctx.api_version), {"throttle_time": 0, "responses": responses})


def _alter_error_for(key: int) -> Callable[[Any, int, int], Any]:
    def error(request: Any, version: int, code: int) -> Any:
        return build(codec.response_class(key, version), {
            "throttle_time": 0,
            "responses": [{"error_code": code, "error_message": None, "resource_type": r.resource_type,
                           "resource_name": r.resource_name} for r in request.resources],
        })
    return error


@api(ALTER_KEY, "AlterConfigs", 0, 2, error_response=_alter_error_for(ALTER_KEY))
async def handle_alter_configs(ctx: RequestContext, request: AlterConfigsRequest) -> Response:
    return await _alter(ctx, ALTER_KEY, request)


@api(INCREMENTAL_KEY, "IncrementalAlterConfigs", 0, 1, error_response=_alter_error_for(INCREMENTAL_KEY))
async def handle_incremental_alter_configs(ctx: RequestContext, request: IncrementalAlterConfigsRequest) -> Response:
    return await _alter(ctx, INCREMENTAL_KEY, request)
