"""Kafka 4.4's Java AdminClient, every operator call the operations APIs serve, against one
real broker (tests/java/castle/AdminCalls.java makes the calls in turn and prints each
answer): broker, cluster-default, logger, group and client-metrics configs; client quotas;
log dirs; features; DescribeTopicPartitions (describeTopics); ListConfigResources; offsets,
record deletion and leader election. Each answer is judged against what Kafka answers."""

from __future__ import annotations

import re

import pytest

from tests.integration.conftest import Broker
from tests.java_clients import java_present, run_java

pytestmark = [pytest.mark.integration, pytest.mark.java_clients, pytest.mark.timeout(240)]

__all__ = ["java_present"]  # the autouse fixture: Java must be on PATH

EXPECTED = {
    "describeCluster": "1",
    "createTopics": "admin-calls",
    "describeTopics": "2 true",
    "describeConfigs.broker": "604800000/DEFAULT_CONFIG",
    "incrementalAlterConfigs.broker": "2000000/DYNAMIC_BROKER_CONFIG",
    "incrementalAlterConfigs.clusterDefault": "20000000/DYNAMIC_DEFAULT_BROKER_CONFIG",
    "brokerLoggers": "INFO/DYNAMIC_BROKER_LOGGER_CONFIG",
    "groupConfigs": "50000/DYNAMIC_GROUP_CONFIG",
    "clientMetrics": "60000/DYNAMIC_CLIENT_METRICS_CONFIG",
    "listConfigResources": "true true true",
    "alterClientQuotas": "set",
    "describeClientQuotas": "{producer_byte_rate=1048576.0, request_percentage=200.0}",
    "describeLogDirs": "1 [admin-calls-0, admin-calls-1]",
    "describeReplicaLogDirs": "true",
    "updateFeatures": "validated",
    "listOffsets": "0",
    "deleteRecords": "0",
    "electLeaders": "ElectionNotNeededException",
}


def test_every_operator_call_of_the_java_admin_client(broker: Broker) -> None:
    done = run_java("castle.AdminCalls", [f"bootstrap={broker.bootstrap}", "topic=admin-calls"], timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert lines[-1:] == ["DONE"], done.stdout
    answers = dict(re.match(r"(OK|FAIL) (\S+) ?(.*)", line).group(2, 3) for line in lines[:-1])  # type: ignore[union-attr]
    failed = [line for line in lines if line.startswith("FAIL")]
    # A read-only config is refused with Kafka's InvalidRequestException, nothing applied.
    assert failed == ["FAIL incrementalAlterConfigs.readOnly InvalidRequestException: "
                      "Cannot update these configs dynamically: [log.dirs]"], done.stdout
    assert {name: answers.get(name) for name in EXPECTED} == EXPECTED, done.stdout
    features = set(answers["describeFeatures"].strip("[]").split(", "))
    assert {"group.version", "transaction.version"} <= features, answers["describeFeatures"]
