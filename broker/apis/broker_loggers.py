"""BROKER_LOGGER config resources (ConfigResource type 8) in DescribeConfigs and
IncrementalAlterConfigs (broker/apis/configs.py dispatches here), as Kafka 4.4 answers them
(ConfigHelper for describing, RuntimeLoggerManager for altering).

* The resource name is this broker's id. Describing: an empty name is INVALID_REQUEST "Broker id
  must not be empty", another id "Unexpected broker id, expected 0 but received 1". Altering:
  "Node id must be an integer, but it is: x", "Unexpected node id. Expected 0, but received 1".
* DescribeConfigs lists every logger of the answering process (broker/logger_levels.py) with its
  level, source DYNAMIC_BROKER_LOGGER_CONFIG (6), no synonyms, not read-only.
* IncrementalAlterConfigs: SET a level (INVALID_CONFIG "Cannot set the log level of x to y as it
  is not a supported log level. Valid log levels are FATAL, ERROR, WARN, INFO, DEBUG, TRACE"),
  DELETE a logger's own level (INVALID_REQUEST "Removing the log level of the root logger is not
  allowed"); an unknown logger is INVALID_CONFIG "Logger x does not exist!"; APPEND / SUBTRACT
  are INVALID_REQUEST "APPEND operation is not allowed for the BROKER_LOGGER resource". Every
  operation is checked before any is applied; validate_only applies none. Applied in every
  process of the broker. AlterConfigs does not take this resource (Kafka's neither).
"""

from __future__ import annotations

from typing import Any, Iterable

from broker.apis import config_resources
from broker.apis.config_resources import OP_APPEND, OP_DELETE, OP_SET, OP_SUBTRACT, ConfigResourceType, entry
from broker.context import WorkerServices
from broker.logger_levels import KAFKA_LEVELS, ROOT, Levels, current_levels, logger_exists
from broker.protocol.errors import ErrorCode, KafkaError

RESOURCE_BROKER_LOGGER = 8
DYNAMIC_BROKER_LOGGER_CONFIG = 6
_OP_NAMES = {OP_SET: "SET", OP_DELETE: "DELETE", OP_APPEND: "APPEND", OP_SUBTRACT: "SUBTRACT"}


async def describe_loggers(node: WorkerServices, name: str, keys: Iterable[str] | None, _synonyms: bool,
                           _documentation: bool) -> list[dict[str, Any]]:
    """Every logger with its level: a logger has no synonyms and no documentation."""
    if not name:
        raise KafkaError(ErrorCode.invalid_request, "Broker id must not be empty")
    try:
        broker_id = int(name)
    except ValueError:
        raise KafkaError(ErrorCode.invalid_request, f"Node id must be an integer, but it is: {name}") from None
    if broker_id != node.node_id:
        raise KafkaError(ErrorCode.invalid_request, f"Unexpected broker id, expected {node.node_id} but received {name}")
    await node.run_admin(node.loggers.refresh)  # what another worker was just asked for
    wanted = None if keys is None else set(keys)
    return [entry(logger, level, DYNAMIC_BROKER_LOGGER_CONFIG, [], 0, None)
            for logger, level in current_levels().items() if wanted is None or logger in wanted]


def _checked(node: WorkerServices, resource: Any) -> Levels:
    try:
        broker_id = int(resource.resource_name)
    except ValueError:
        raise KafkaError(ErrorCode.invalid_request,
                         f"Node id must be an integer, but it is: {resource.resource_name}") from None
    if broker_id != node.node_id:
        raise KafkaError(ErrorCode.invalid_request,
                         f"Unexpected node id. Expected {node.node_id}, but received {resource.resource_name}")
    changes: Levels = {}
    for op in resource.configs:
        if op.config_operation not in _OP_NAMES:
            raise KafkaError(ErrorCode.invalid_request,
                             f"Unknown operation type {op.config_operation} is not allowed for the BROKER_LOGGER resource")
        if op.config_operation in (OP_APPEND, OP_SUBTRACT):
            raise KafkaError(ErrorCode.invalid_request,
                             f"{_OP_NAMES[op.config_operation]} operation is not allowed for the BROKER_LOGGER resource")
        if not logger_exists(op.name):
            raise KafkaError(ErrorCode.invalid_config, f"Logger {op.name} does not exist!")
        if op.config_operation == OP_SET:
            if op.value not in KAFKA_LEVELS:
                raise KafkaError(ErrorCode.invalid_config,
                                 f"Cannot set the log level of {op.name} to {op.value} as it is not a supported log "
                                 f"level. Valid log levels are {', '.join(KAFKA_LEVELS)}")
            changes[op.name] = op.value
        else:
            if op.name == ROOT:
                raise KafkaError(ErrorCode.invalid_request, "Removing the log level of the root logger is not allowed")
            changes[op.name] = None
    return changes


async def alter_loggers(node: WorkerServices, resource: Any, validate_only: bool) -> None:
    changes = _checked(node, resource)
    if not validate_only:
        await node.run_admin(lambda: node.loggers.update(changes))


BROKER_LOGGER = ConfigResourceType(RESOURCE_BROKER_LOGGER, config_resources.on_cluster,
                                   ErrorCode.cluster_authorization_failed, describe_loggers,
                                   incremental_alter_configs=alter_loggers)
