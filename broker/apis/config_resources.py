"""What every config resource type shares in DescribeConfigs, AlterConfigs and
IncrementalAlterConfigs (broker/apis/configs.py answers the three).

A resource type (TOPIC, BROKER, BROKER_LOGGER, GROUP, CLIENT_METRICS) plugs in as one
ConfigResourceType: who may see or change it, how it is described, and how each of the two
alter APIs changes it. The type's own rules (its names, its validation, Kafka's messages for it)
stay in its module; this module holds the shape they have in common: the described entry,
AlterConfigs' replacement of the whole set, and IncrementalAlterConfigs' SET / DELETE / APPEND /
SUBTRACT applied to a set of string values.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Iterable

from broker.authorization import cluster_allowed
from broker.context import WorkerServices
from broker.protocol.errors import ErrorCode, KafkaError
from coordination.acls.model import Operation
from storage.config import TOPIC_KEYS

# DescribeConfigsResponse ConfigType
TYPE_BOOLEAN = 1
TYPE_STRING = 2
TYPE_INT = 3
TYPE_LONG = 5
TYPE_DOUBLE = 6
TYPE_LIST = 7
TYPE_PASSWORD = 9

# IncrementalAlterConfigs OpType
OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT = 0, 1, 2, 3
OPERATIONS = (OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT)

Configs = dict[str, str]
Change = Callable[[Configs], Configs]
ChangeFor = Callable[[WorkerServices, Any], Change]
Entry = dict[str, Any]
Describe = Callable[[WorkerServices, str, "Iterable[str] | None", bool, bool], Awaitable[list[Entry]]]
Alter = Callable[[WorkerServices, Any, bool], Awaitable[None]]
Write = Callable[[WorkerServices, str, Change, bool], Awaitable[None]]


@dataclass(frozen=True)
class ConfigResourceType:
    """One ConfigResource.Type as the config APIs serve it.

    ``describe`` answers DescribeConfigs for one resource name (keys, synonyms, documentation);
    ``alter_configs`` and ``incremental_alter_configs`` take one request resource and
    validate_only, and are None where the API does not take the type (its resources are
    INVALID_REQUEST). ``settle`` runs once after a request that changed any resource of the
    type, for what must follow the change on every worker before the answer.
    """

    code: int
    allowed: Callable[[Any, Operation, str], bool]
    denied: ErrorCode
    describe: Describe
    alter_configs: Alter | None = None
    incremental_alter_configs: Alter | None = None
    settle: Callable[[WorkerServices], Awaitable[None]] | None = None


def on_cluster(ctx: Any, operation: Operation, _name: str) -> bool:
    """The right a cluster-wide resource asks for: ``operation`` on the cluster, whatever the name."""
    return cluster_allowed(ctx, operation)


def altering(change_for: ChangeFor, write: Write) -> Alter:
    """An alter that builds the request's change first (so its errors come before the name's), then writes it."""
    async def alter(node: WorkerServices, resource: Any, validate_only: bool) -> None:
        change = change_for(node, resource)
        await write(node, resource.resource_name, change, validate_only)
    return alter


# ---------------------------------------------------------------------------- DescribeConfigs
def entry(name: str, value: str | None, source: int, synonyms: list[dict[str, Any]], config_type: int,
          documentation: str | None, read_only: bool = False, sensitive: bool = False) -> Entry:
    """One DescribeConfigsResourceResult."""
    return {
        "name": name,
        "value": value,
        "read_only": read_only,
        "config_source": source,
        "is_sensitive": sensitive,
        "synonyms": synonyms,
        "config_type": config_type,
        "documentation": documentation,
    }


def kafka_text(value: Any) -> str:
    """A setting's value as Kafka writes it (booleans in lower case)."""
    return str(value).lower() if isinstance(value, bool) else str(value)


_TYPES = {"boolean": TYPE_BOOLEAN, "string": TYPE_STRING, "int": TYPE_INT, "long": TYPE_LONG, "double": TYPE_DOUBLE,
          "list": TYPE_LIST}
# Every topic key and its broker-level synonym: the type Kafka's ConfigDef declares.
_KAFKA_TYPES = {name: _TYPES[spec.kafka_type] for key, spec in TOPIC_KEYS.items()
                for name in (key, spec.broker_key) if name}
LIST_KEYS = frozenset({name for name, kind in _KAFKA_TYPES.items() if kind == TYPE_LIST}
                      | {"log.dirs", "listeners", "advertised.listeners"})


def config_type(name: str, value: Any) -> int:
    """A topic or broker key's ConfigType: Kafka's for the keys it defines, else a best effort from the value."""
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
    return TYPE_LIST if name in LIST_KEYS else TYPE_STRING


# ---------------------------------------------------------------------------- altering
def null_values(names: list[str]) -> KafkaError:
    """Kafka's refusal of a null value to set (most resource types word it so)."""
    return KafkaError(ErrorCode.invalid_request, f"Null value not supported for : {','.join(names)}")


def replace_all(resource: Any, refuse_nulls: Callable[[list[str]], KafkaError] = null_values) -> Change:
    """AlterConfigs: the resource's configs become the request's."""
    nulls = [c.name for c in resource.configs if c.value is None]
    if nulls:
        raise refuse_nulls(nulls)
    new = {c.name: c.value for c in resource.configs}
    return lambda _current: dict(new)


def list_items(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


def incremental(resource: Any, check: Callable[[Any], None], base: Callable[[str], str],
                items: Callable[[str], list[str]] = list_items) -> Change:
    """IncrementalAlterConfigs: the request's operations, each passed by ``check`` first, as a change.

    APPEND and SUBTRACT work on the list the resource sets, or else on ``base(name)``.
    """
    names = [c.name for c in resource.configs]
    if len(set(names)) != len(names):
        raise KafkaError(ErrorCode.invalid_request, "Error due to duplicate config keys")
    for op in resource.configs:
        check(op)

    def apply(current: Configs) -> Configs:
        new = dict(current)
        for op in resource.configs:
            if op.config_operation == OP_SET:
                new[op.name] = op.value
            elif op.config_operation == OP_DELETE:
                new.pop(op.name, None)
            else:
                present = items(new[op.name] if op.name in new else base(op.name))
                given = items(op.value)
                if op.config_operation == OP_APPEND:
                    result = present + [item for item in given if item not in present]
                else:
                    result = [item for item in present if item not in given]
                new[op.name] = ",".join(result)
        return new

    return apply
