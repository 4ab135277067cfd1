"""Kafka 4.4's operator tools against a real Castle broker (run as their Java main classes,
tests/kafka_cli.py): kafka-topics.sh --describe (the Java AdminClient's describeTopics, which
pages through DescribeTopicPartitions), kafka-get-offsets.sh, kafka-delete-records.sh and
kafka-leader-election.sh. Each assertion reads what the tool prints, as an operator would,
before and after a change."""

from __future__ import annotations

import json
import re
import subprocess
import urllib.request
import uuid
from pathlib import Path
from typing import Any, Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.integration.conftest import Broker, shared_broker, wait_until
from tests.kafka_cli import LEADER_ELECTION_COMMAND, TOPIC_COMMAND, missing_tools, run_tool

pytestmark = [pytest.mark.integration, pytest.mark.kafka_cli, pytest.mark.timeout(600)]

VERSION = "4.4.0"
GET_OFFSETS_COMMAND = "org.apache.kafka.tools.GetOffsetShell"  # kafka-get-offsets.sh
DELETE_RECORDS_COMMAND = "org.apache.kafka.tools.DeleteRecordsCommand"  # kafka-delete-records.sh


@pytest.fixture(autouse=True)
def kafka_tools_present() -> None:
    """CI installs java and Maven (.ci/run): their absence is a failure, not a skip."""
    missing = missing_tools(VERSION)
    if missing:
        pytest.fail(f"Kafka's CLI needs {', '.join(missing)} on PATH (apt-get install default-jre-headless maven)")


@pytest.fixture(scope="module")
def broker(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    yield from shared_broker(request, tmp_path_factory)


def ok(broker: Broker, main_class: str, *args: str) -> str:
    done = run_tool(main_class, ["--bootstrap-server", broker.bootstrap, *args], version=VERSION)
    assert done.returncode == 0, (f"{main_class} {' '.join(args)} exited {done.returncode}\n"
                                  f"stdout: {done.stdout}\nstderr: {done.stderr}")
    return done.stdout


def new_topic(broker: Broker, partitions: int) -> str:
    name = f"tools-{uuid.uuid4().hex[:10]}"
    out = ok(broker, TOPIC_COMMAND, "--create", "--topic", name, "--partitions", str(partitions),
             "--replication-factor", "1")
    assert out.strip() == f"Created topic {name}.", out
    return name


def produce(broker: Broker, topic: str, partition: int, timestamps: list[int]) -> None:
    """One record per timestamp, in order, acknowledged."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 0})
    errors: list[Any] = []
    for i, timestamp in enumerate(timestamps):
        producer.produce(topic, value=b"v%d" % i, partition=partition, timestamp=timestamp,
                         on_delivery=lambda err, _msg: errors.append(err))
        producer.flush(30)  # one batch per record, so that each has its own offset and timestamp
    assert errors == [None] * len(timestamps), errors


def offsets(broker: Broker, topic: str, *args: str) -> dict[int, int]:
    """kafka-get-offsets.sh: partition -> offset, from its "topic:partition:offset" lines."""
    out = ok(broker, GET_OFFSETS_COMMAND, "--topic", topic, *args)
    found: dict[int, int] = {}
    for line in out.splitlines():
        name, partition, offset = line.rsplit(":", 2)
        assert name == topic, out
        found[int(partition)] = int(offset)
    return found


def requests_answered(broker: Broker, api: str) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{broker.metrics_port}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    return sum(sample.value for family in text_string_to_metric_families(text) for sample in family.samples
               if sample.name == "castle_requests_total" and sample.labels.get("api") == api)


# ---------------------------------------------------------------------- kafka-topics --describe
def test_kafka_topics_describe_pages_through_describe_topic_partitions(broker: Broker) -> None:
    """The 4.4 AdminClient describes topics with DescribeTopicPartitions; a partition limit
    below the topic's partition count (--partition-size-limit-per-response) makes it follow
    NextCursor, and every partition is still listed once."""
    topic = new_topic(broker, 5)
    before = requests_answered(broker, "DescribeTopicPartitions")
    out = ok(broker, TOPIC_COMMAND, "--describe", "--topic", topic, "--partition-size-limit-per-response", "2")
    lines = [line for line in out.splitlines() if line.strip()]
    header = [line for line in lines if line.startswith(f"Topic: {topic}\tTopicId:")]
    assert len(header) == 1 and "\tPartitionCount: 5\tReplicationFactor: 1\t" in header[0], out
    partitions = [re.search(r"Partition: (\d+)\tLeader: (\d+)\tReplicas: (\d+)\tIsr: (\d+)\tElr: \tLastKnownElr: ", line)
                  for line in lines if line.strip().startswith(f"Topic: {topic}\tPartition:")]
    assert all(partitions), out
    assert [int(m.group(1)) for m in partitions if m] == [0, 1, 2, 3, 4], out
    assert {(m.group(2), m.group(3), m.group(4)) for m in partitions if m} == {("0", "0", "0")}, out
    # 5 partitions, 2 a page: three requests (a worker moves its counts to the scrape once a second).
    wait_until(lambda: requests_answered(broker, "DescribeTopicPartitions") - before >= 3, 15,
               "three DescribeTopicPartitions requests counted")


def test_kafka_topics_describe_of_an_unknown_topic(broker: Broker) -> None:
    missing = f"tools-missing-{uuid.uuid4().hex[:8]}"
    done = run_tool(TOPIC_COMMAND, ["--bootstrap-server", broker.bootstrap, "--describe", "--topic", missing],
                    version=VERSION)
    assert done.returncode != 0
    assert f"Topic '{missing}' does not exist as expected" in done.stdout + done.stderr, done


# ---------------------------------------------------------------------- kafka-get-offsets
def test_kafka_get_offsets_latest_earliest_and_max_timestamp(broker: Broker) -> None:
    topic = new_topic(broker, 2)
    assert offsets(broker, topic, "--time", "-1") == {0: 0, 1: 0}
    produce(broker, topic, 0, [1_000_000, 3_000_000, 2_000_000, 1_500_000])
    produce(broker, topic, 1, [5_000_000])
    assert offsets(broker, topic, "--time", "-1") == {0: 4, 1: 1}
    assert offsets(broker, topic, "--time", "latest") == {0: 4, 1: 1}
    assert offsets(broker, topic, "--time", "-2") == {0: 0, 1: 0}
    assert offsets(broker, topic, "--time", "-3") == {0: 1, 1: 0}  # the record with the largest timestamp
    assert offsets(broker, topic, "--time", "-1", "--partitions", "1") == {1: 1}
    assert offsets(broker, topic, "--time", "2500000") == {0: 1, 1: 0}  # the first record at or after it


# ---------------------------------------------------------------------- kafka-delete-records
def test_kafka_delete_records_moves_the_log_start(broker: Broker, tmp_path: Path) -> None:
    topic = new_topic(broker, 2)
    produce(broker, topic, 0, [1_000, 2_000, 3_000, 4_000, 5_000])
    produce(broker, topic, 1, [1_000, 2_000])
    assert offsets(broker, topic, "--time", "-2") == {0: 0, 1: 0}
    plan = tmp_path / "offsets.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": 0, "offset": 3},
                                                             {"topic": topic, "partition": 1, "offset": -1}]}))
    out = ok(broker, DELETE_RECORDS_COMMAND, "--offset-json-file", str(plan))
    assert "Records delete operation completed:" in out, out
    assert f"partition: {topic}-0\tlow_watermark: 3" in out, out
    assert f"partition: {topic}-1\tlow_watermark: 2" in out, out  # -1: up to the high watermark
    assert offsets(broker, topic, "--time", "-2") == {0: 3, 1: 2}
    assert offsets(broker, topic, "--time", "-1") == {0: 5, 1: 2}

    # Past the high watermark: Kafka's OFFSET_OUT_OF_RANGE, nothing deleted.
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": 0, "offset": 99}]}))
    out = ok(broker, DELETE_RECORDS_COMMAND, "--offset-json-file", str(plan))
    assert f"partition: {topic}-0\terror: org.apache.kafka.common.errors.OffsetOutOfRangeException" in out, out
    assert offsets(broker, topic, "--time", "-2") == {0: 3, 1: 2}


def test_kafka_delete_records_refuses_a_partition_named_twice(broker: Broker, tmp_path: Path) -> None:
    topic = new_topic(broker, 1)
    plan = tmp_path / "offsets.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": 0, "offset": 0},
                                                             {"topic": topic, "partition": 0, "offset": 1}]}))
    done = run_tool(DELETE_RECORDS_COMMAND, ["--bootstrap-server", broker.bootstrap, "--offset-json-file", str(plan)],
                    version=VERSION)
    assert done.returncode != 0
    assert "Offset json file contains duplicate topic partitions" in done.stdout + done.stderr, done


# ---------------------------------------------------------------------- kafka-leader-election
@pytest.mark.parametrize("election", ["preferred", "unclean"])
def test_kafka_leader_election_on_one_broker_needs_no_election(broker: Broker, election: str) -> None:
    """On one broker every partition is led by its only (and preferred) replica: Kafka answers
    ELECTION_NOT_NEEDED, which the tool reports as a valid replica already elected; asked for
    every partition, Kafka's controller leaves out those that need no election, and the tool
    prints nothing."""
    topic = new_topic(broker, 2)
    out = ok(broker, LEADER_ELECTION_COMMAND, "--election-type", election, "--topic", topic, "--partition", "1")
    assert out.strip() == f"Valid replica already elected for partitions {topic}-1", out
    assert ok(broker, LEADER_ELECTION_COMMAND, "--election-type", election, "--all-topic-partitions") == ""


def test_kafka_leader_election_of_an_unknown_topic(broker: Broker) -> None:
    missing = f"tools-missing-{uuid.uuid4().hex[:8]}"
    done: subprocess.CompletedProcess[str] = run_tool(
        LEADER_ELECTION_COMMAND, ["--bootstrap-server", broker.bootstrap, "--election-type", "preferred",
                                  "--topic", missing, "--partition", "0"], version=VERSION)
    assert done.returncode != 0
    assert f"Error completing leader election (PREFERRED) for partition: {missing}-0" in done.stdout + done.stderr, done
    assert "UnknownTopicOrPartitionException" in done.stdout + done.stderr, done
