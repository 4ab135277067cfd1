"""Dynamic broker configs through the handlers of a real WorkerNode (real files, the local
store): DescribeConfigs / AlterConfigs / IncrementalAlterConfigs on BROKER resources (type 4),
Kafka's sources and precedence, Kafka's refusals, and the values the logs run with."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from tests.unit.protocol.test_admin_apis import INVALID_CONFIG, INVALID_REQUEST, NONE, Broker, _describe

pytestmark = pytest.mark.timeout(60)

DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 2, 3, 4, 5
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


@pytest.fixture
def make_node(tmp_path: Path) -> Iterator[Callable[..., Broker]]:
    started: list[Broker] = []

    def make(**overrides: str) -> Broker:
        started.append(Broker(str(tmp_path / f"broker-{len(started)}"), overrides))
        return started[-1]

    yield make
    for b in started:
        b.close()


@pytest.fixture
def node(make_node: Callable[..., Broker]) -> Broker:
    return make_node()


def incremental(b: Broker, name: str, ops: list[tuple[str, int, str | None]], validate_only: bool = False) -> Any:
    answer = b.call(44, 1, {"resources": [{"resource_type": 4, "resource_name": name, "configs": [
        {"name": n, "config_operation": op, "value": v} for n, op, v in ops]}], "validate_only": validate_only})
    [response] = answer.responses
    return response


def stored(b: Broker) -> dict[str, Any]:
    path = os.path.join(b.node.config.log_dirs[0], "broker-configs.json")
    if not os.path.exists(path):
        return {}
    with open(path) as handle:
        doc: dict[str, Any] = json.load(handle)["brokers"]
    return doc


def broker_entries(b: Broker, name: str = "0") -> dict[str, Any]:
    [result] = _describe(b, 4, [(4, name, None)], synonyms=True, documentation=True).results
    assert result.error_code == NONE, result.error_message
    return {c.name: c for c in result.configs}


def test_describe_says_which_settings_are_dynamic(node: Broker) -> None:
    configs = broker_entries(node)
    assert not configs["log.retention.ms"].read_only and not configs["message.max.bytes"].read_only
    assert not configs["min.insync.replicas"].read_only and not configs["log.cleanup.policy"].read_only
    assert configs["log.dirs"].read_only and configs["num.partitions"].read_only
    assert configs["log.retention.ms"].config_type == 5 and configs["log.retention.ms"].documentation


def test_per_broker_then_cluster_default_then_static_then_default(make_node: Callable[..., Broker]) -> None:
    b = make_node(**{"log.retention.ms": "7200000"})
    assert incremental(b, "", [("log.retention.ms", SET, "60000"), ("log.segment.bytes", SET, "1048576")]).error_code == NONE
    assert incremental(b, "0", [("log.retention.ms", SET, "30000")]).error_code == NONE
    assert stored(b) == {"<default>": {"log.retention.ms": "60000", "log.segment.bytes": "1048576"},
                         "0": {"log.retention.ms": "30000"}}
    retention = broker_entries(b)["log.retention.ms"]
    assert (retention.value, retention.config_source) == ("30000", DYNAMIC_BROKER_CONFIG)
    assert [(s.value, s.source) for s in retention.synonyms] == [
        ("30000", DYNAMIC_BROKER_CONFIG), ("60000", DYNAMIC_DEFAULT_BROKER_CONFIG),
        ("7200000", STATIC_BROKER_CONFIG), ("604800000", DEFAULT_CONFIG)]
    segment = broker_entries(b)["log.segment.bytes"]
    assert (segment.value, segment.config_source) == ("1048576", DYNAMIC_DEFAULT_BROKER_CONFIG)
    defaults = broker_entries(b, "")
    assert set(defaults) == {"log.retention.ms", "log.segment.bytes"}
    assert defaults["log.retention.ms"].config_source == DYNAMIC_DEFAULT_BROKER_CONFIG
    # What the logs run with: applied on the worker's loop (housekeeping does this every tick).
    b.node.apply_dynamic()
    assert b.node.logs.default_log_config.retention_ms == 30000
    assert b.node.logs.default_log_config.segment_bytes == 1048576
    assert incremental(b, "0", [("log.retention.ms", DELETE, None)]).error_code == NONE
    b.node.apply_dynamic()
    assert b.node.logs.default_log_config.retention_ms == 60000
    assert incremental(b, "", [("log.retention.ms", DELETE, None), ("log.segment.bytes", DELETE, None)]).error_code == NONE
    b.node.apply_dynamic()
    assert b.node.logs.default_log_config.retention_ms == 7200000
    assert broker_entries(b)["log.retention.ms"].config_source == STATIC_BROKER_CONFIG
    assert broker_entries(b, "") == {}


def test_topics_without_their_own_value_take_the_new_default(node: Broker) -> None:
    node.create("plain")
    node.create("own", configs={"retention.ms": "86400000"})
    assert incremental(node, "", [("log.retention.ms", SET, "5000"), ("min.insync.replicas", SET, "2"),
                                    ("message.max.bytes", SET, "2000000")]).error_code == NONE
    node.node.apply_dynamic()
    assert node.node.logs.log_config_for("plain").retention_ms == 5000
    assert node.node.logs.log_config_for("plain").min_insync_replicas == 2
    assert node.node.logs.log_config_for("plain").max_message_bytes == 2000000
    assert node.node.logs.log_config_for("own").retention_ms == 86400000
    assert incremental(node, "0", [("producer.id.expiration.ms", SET, "60000")]).error_code == NONE
    node.node.apply_dynamic()
    assert node.node.logs.config.producer_id_expiration_ms == 60000
    [result] = _describe(node, 4, [(2, "plain", ["retention.ms"])], synonyms=True).results
    [entry] = result.configs
    assert (entry.value, entry.config_source) == ("5000", DYNAMIC_DEFAULT_BROKER_CONFIG)
    assert [(s.name, s.source) for s in entry.synonyms] == [("log.retention.ms", DYNAMIC_DEFAULT_BROKER_CONFIG),
                                                            ("log.retention.ms", DEFAULT_CONFIG)]


def test_kafkas_refusals_and_nothing_applied_half(node: Broker) -> None:
    read_only = incremental(node, "0", [("log.retention.ms", SET, "1000"), ("num.partitions", SET, "3"),
                                          ("log.dirs", SET, "/tmp/x")])
    assert (read_only.error_code, read_only.error_message) == (
        INVALID_REQUEST, "Cannot update these configs dynamically: [log.dirs, num.partitions]")
    bad_type = incremental(node, "0", [("log.retention.ms", SET, "soon")])
    assert bad_type.error_code == INVALID_REQUEST
    assert bad_type.error_message.startswith("Invalid value soon for configuration log.retention.ms")
    unknown = incremental(node, "", [("log.retention.ms", SET, "1000"), ("no.such.config", SET, "1")])
    assert (unknown.error_code, unknown.error_message) == (INVALID_CONFIG, "Unknown config name: no.such.config")
    append = incremental(node, "0", [("log.retention.ms", APPEND, "1")])
    assert (append.error_code, append.error_message) == (
        INVALID_CONFIG, "Config value append is not allowed for config key: log.retention.ms")
    assert incremental(node, "zero", [("log.retention.ms", SET, "1000")]).error_code == INVALID_REQUEST
    assert incremental(node, "0", [("log.retention.ms", SET, "1000")], validate_only=True).error_code == NONE
    assert stored(node) == {}
    # Deleting what is not set changes nothing and succeeds (kafka-reassign-partitions clears throttles so).
    assert incremental(node, "0", [("leader.replication.throttled.rate", DELETE, None)]).error_code == NONE
    # A list config takes APPEND / SUBTRACT.
    assert incremental(node, "0", [("log.cleanup.policy", APPEND, "compact")]).error_code == NONE
    assert stored(node) == {"0": {"log.cleanup.policy": "delete,compact"}}
    assert incremental(node, "0", [("log.cleanup.policy", SUBTRACT, "delete")]).error_code == NONE
    assert stored(node) == {"0": {"log.cleanup.policy": "compact"}}


def test_another_brokers_id_is_stored_for_it_and_not_applied_here(node: Broker) -> None:
    assert incremental(node, "7", [("log.retention.ms", SET, "1000")]).error_code == NONE
    assert stored(node) == {"7": {"log.retention.ms": "1000"}}
    node.node.apply_dynamic()
    assert node.node.logs.default_log_config.retention_ms == 604800000
    [other] = _describe(node, 4, [(4, "7", None)]).results
    assert (other.error_code, other.error_message) == (
        INVALID_REQUEST, "Unexpected broker id, expected 0 or empty string, but received 7")


def test_alter_configs_replaces_the_entitys_set(node: Broker) -> None:
    def alter(configs: dict[str, str]) -> Any:
        answer = node.call(33, 2, {"resources": [{"resource_type": 4, "resource_name": "", "configs": [
            {"name": k, "value": v} for k, v in configs.items()]}], "validate_only": False})
        return answer.responses[0]

    assert alter({"log.retention.ms": "1000", "log.retention.bytes": "4096"}).error_code == NONE
    assert alter({"log.retention.bytes": "8192"}).error_code == NONE
    assert stored(node) == {"<default>": {"log.retention.bytes": "8192"}}
    refused = alter({"log.retention.bytes": "1", "auto.create.topics.enable": "false"})
    assert (refused.error_code, refused.error_message) == (
        INVALID_REQUEST, "Cannot update these configs dynamically: [auto.create.topics.enable]")
    assert stored(node) == {"<default>": {"log.retention.bytes": "8192"}}


# ---------------------------------------------------------------------------- BROKER_LOGGER
@pytest.fixture
def saved_levels() -> Iterator[None]:
    import logging

    names = ["", "broker.apis.configs", "broker.process.node"]
    before = {name: logging.getLogger(name).level for name in names}
    yield
    for name, level in before.items():
        logging.getLogger(name).setLevel(level)


def logger_ops(b: Broker, name: str, ops: list[tuple[str, int, str | None]], validate_only: bool = False) -> Any:
    answer = b.call(44, 1, {"resources": [{"resource_type": 8, "resource_name": name, "configs": [
        {"name": n, "config_operation": op, "value": v} for n, op, v in ops]}], "validate_only": validate_only})
    return answer.responses[0]


def loggers(b: Broker) -> dict[str, Any]:
    [result] = _describe(b, 4, [(8, "0", None)], synonyms=True).results
    assert result.error_code == NONE, result.error_message
    return {c.name: c for c in result.configs}


def test_broker_loggers_listed_set_and_unset(node: Broker, saved_levels: None) -> None:
    import logging

    before = loggers(node)
    assert before["root"].value == {30: "WARN", 20: "INFO", 10: "DEBUG"}[logging.getLogger().getEffectiveLevel()]
    assert before["root"].config_source == 6
    assert "broker.apis.configs" in before and not before["broker.apis.configs"].read_only
    assert logger_ops(node, "0", [("broker.apis.configs", SET, "DEBUG"), ("root", SET, "WARN")]).error_code == NONE
    assert logging.getLogger("broker.apis.configs").level == logging.DEBUG
    assert logging.getLogger().level == logging.WARNING
    after = loggers(node)
    assert (after["broker.apis.configs"].value, after["root"].value) == ("DEBUG", "WARN")
    assert after["broker.process.node"].value == "WARN"  # no level of its own: the root's
    with open(os.path.join(node.node.run_dir, "broker-loggers.json")) as handle:
        assert json.load(handle)["loggers"] == {"broker.apis.configs": "DEBUG", "root": "WARN"}
    assert logger_ops(node, "0", [("broker.apis.configs", DELETE, None)]).error_code == NONE
    assert logging.getLogger("broker.apis.configs").level == logging.NOTSET
    assert loggers(node)["broker.apis.configs"].value == "WARN"


def test_broker_logger_refusals_are_kafkas(node: Broker, saved_levels: None) -> None:
    import logging

    def refused(name: str, ops: list[tuple[str, int, str | None]]) -> tuple[int, str]:
        response = logger_ops(node, name, ops)
        return response.error_code, response.error_message

    assert refused("0", [("broker.apis.configs", SET, "DEBUG"), ("no.such.logger", SET, "DEBUG")]) == (
        INVALID_CONFIG, "Logger no.such.logger does not exist!")
    assert refused("0", [("broker.apis.configs", SET, "LOUD")]) == (
        INVALID_CONFIG, "Cannot set the log level of broker.apis.configs to LOUD as it is not a supported log level. "
                        "Valid log levels are FATAL, ERROR, WARN, INFO, DEBUG, TRACE")
    assert refused("0", [("root", DELETE, None)]) == (
        INVALID_REQUEST, "Removing the log level of the root logger is not allowed")
    assert refused("0", [("root", APPEND, "DEBUG")]) == (
        INVALID_REQUEST, "APPEND operation is not allowed for the BROKER_LOGGER resource")
    assert refused("1", [("root", SET, "DEBUG")]) == (INVALID_REQUEST, "Unexpected node id. Expected 0, but received 1")
    assert refused("x", [("root", SET, "DEBUG")]) == (INVALID_REQUEST, "Node id must be an integer, but it is: x")
    assert logger_ops(node, "0", [("broker.apis.configs", SET, "DEBUG")], validate_only=True).error_code == NONE
    assert logging.getLogger("broker.apis.configs").level == logging.NOTSET  # nothing applied, not even half
    [other] = _describe(node, 4, [(8, "1", None)]).results
    assert (other.error_code, other.error_message) == (INVALID_REQUEST, "Unexpected broker id, expected 0 but received 1")


def test_a_sighup_reload_changes_the_static_value_under_a_dynamic_one(node: Broker) -> None:
    from broker.process.reload import DYNAMIC, reload_path

    assert incremental(node, "0", [("log.retention.ms", SET, "30000")]).error_code == NONE
    node.node.apply_dynamic()
    # What the supervisor writes on SIGHUP: every reloadable setting, one of them changed in the file.
    values = {name: node.node.config.value(name) for name in DYNAMIC}
    values["log.retention.ms"] = 900000
    with open(reload_path(node.node.run_dir), "w") as handle:
        json.dump(values, handle)
    node.node.reload_settings()
    assert node.node.logs.default_log_config.retention_ms == 30000  # the dynamic value still wins
    assert incremental(node, "0", [("log.retention.ms", DELETE, None)]).error_code == NONE
    node.node.apply_dynamic()
    assert node.node.logs.default_log_config.retention_ms == 900000  # the reloaded static value
    [entry] = _describe(node, 4, [(4, "0", ["log.retention.ms"])]).results[0].configs
    assert (entry.value, entry.config_source) == ("900000", STATIC_BROKER_CONFIG)
