"""Apache Kafka 4.4's kafka-consumer-groups.sh (its Java main class, tests/kafka_cli.py) lists,
describes, resets and deletes a consumer group of the new protocol (KIP-848) on a real Castle
broker, read from the tool's own output as an operator would."""

from __future__ import annotations

import time
from typing import Any

import pytest
from confluent_kafka import Consumer

from tests.integration.clients import confluent_create_topic, confluent_produce, make_records
from tests.integration.conftest import Broker, wait_until
from tests.kafka_cli import missing_tools, run_tool

CONSUMER_BROKER = {"group.consumer.heartbeat.interval.ms": 300, "offsets.topic.num.partitions": 3}
pytestmark = [pytest.mark.integration, pytest.mark.kafka_cli, pytest.mark.timeout(600),
              pytest.mark.parametrize("broker", [CONSUMER_BROKER], indirect=True)]

GROUPS_COMMAND = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"  # kafka-consumer-groups.sh
VERSION = "4.4.0"  # a 4.x tool describes consumer groups with ConsumerGroupDescribe


@pytest.fixture(autouse=True)
def kafka_tools_present() -> None:
    missing = missing_tools(VERSION)
    if missing:
        pytest.fail(f"Kafka's CLI needs {', '.join(missing)} on PATH (apt-get install default-jre-headless maven)")


def ok(broker: Broker, *args: str) -> str:
    done = run_tool(GROUPS_COMMAND, ["--bootstrap-server", broker.bootstrap, *args], version=VERSION)
    assert done.returncode == 0, f"{' '.join(args)} exited {done.returncode}\nstdout: {done.stdout}\nstderr: {done.stderr}"
    return done.stdout


def table(out: str) -> list[dict[str, str]]:
    """The rows of the tool's whitespace-aligned table, by its header names."""
    lines = [line for line in out.splitlines() if line.strip()]
    header_at = next(i for i, line in enumerate(lines) if line.startswith("GROUP"))
    names = lines[header_at].split()
    return [dict(zip(names, line.split())) for line in lines[header_at + 1:] if not line.startswith("GROUP")]


def test_kafka_consumer_groups_lists_describes_resets_and_deletes_a_consumer_group(broker: Broker) -> None:
    topic, group = "cli-cg", "cli-consumer-group"
    confluent_create_topic(broker.bootstrap, topic, 4)
    confluent_produce(broker.bootstrap, topic, make_records(200, 4, "a"))
    members = [Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "group.protocol": "consumer",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False, "client.id": f"cli-{i}"})
               for i in range(2)]
    try:
        for member in members:
            member.subscribe([topic])
        read = 0
        deadline = time.monotonic() + 60
        while read < 200 and time.monotonic() < deadline:
            for member in members:
                batch = member.consume(100, 0.1)
                read += len(batch)
                if batch:
                    member.commit(asynchronous=False)
        assert read == 200

        def described() -> list[dict[str, Any]] | None:
            for member in members:
                member.consume(10, 0.05)
            rows = table(ok(broker, "--describe", "--group", group, "--members", "--verbose"))
            return rows if len(rows) == 2 and all(r["#PARTITIONS"] == "2" for r in rows) else None

        rows = wait_until(described, 30, "two members with two partitions each")
        assert {r["CLIENT-ID"] for r in rows} == {"cli-0", "cli-1"}
        assert all(r["CURRENT-EPOCH"] == r["TARGET-EPOCH"] for r in rows), rows

        state = table(ok(broker, "--describe", "--group", group, "--state"))
        assert (state[0]["ASSIGNMENT-STRATEGY"], state[0]["STATE"], state[0]["#MEMBERS"]) == ("uniform", "Stable", "2")
        offsets = table(ok(broker, "--describe", "--group", group))
        assert sorted((r["PARTITION"], r["CURRENT-OFFSET"], r["LOG-END-OFFSET"], r["LAG"]) for r in offsets) == \
            [(str(p), "50", "50", "0") for p in range(4)]
        listed = table(ok(broker, "--list", "--type"))
        assert {"GROUP": group, "TYPE": "Consumer"} in listed, listed
    finally:
        for member in members:
            member.close()

    wait_until(lambda: table(ok(broker, "--describe", "--group", group, "--state"))[0]["STATE"] == "Empty", 30,
               "the group empty once its members closed")
    ok(broker, "--reset-offsets", "--group", group, "--topic", topic, "--to-earliest", "--execute")
    offsets = table(ok(broker, "--describe", "--group", group))
    assert sorted((r["PARTITION"], r["CURRENT-OFFSET"]) for r in offsets) == [(str(p), "0") for p in range(4)]
    assert "Deletion of requested consumer groups ('cli-consumer-group') was successful." in \
        ok(broker, "--delete", "--group", group)
    assert group not in ok(broker, "--list")
