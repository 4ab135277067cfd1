"""``castle topics``' replication options: --replica-assignment parsing, and what describe
makes of replicas, ISR and offline brokers (pure functions; no broker needed)."""

from __future__ import annotations

import argparse

import pytest
from confluent_kafka import Node, TopicPartitionInfo

from broker.admin import cli, topics


# ---------------------------------------------------------------------- --replica-assignment
@pytest.mark.parametrize("text, expected", [
    ("1:2:3,2:3:1", [[1, 2, 3], [2, 3, 1]]),
    ("0", [[0]]),
    ("4,5,6", [[4], [5], [6]]),
    (" 1 : 2 , 2 : 1 ", [[1, 2], [2, 1]]),
])
def test_replica_assignment_parses_kafka_topics_format(text, expected):
    assert cli.replica_assignment(text) == expected


@pytest.mark.parametrize("text, message", [
    ("", "expected broker ids"),
    ("1:2,", "expected broker ids"),
    ("1::2", "expected broker ids"),
    ("a:b", "expected broker ids"),
    ("1:-2", "0 or more"),
    ("1:2:1", "partition 0 names a broker twice"),
    ("1:2,3:3", "partition 1 names a broker twice"),
    ("1:2,3", "partition 1 has a different replication factor (1) than partition 0 (2)"),
])
def test_replica_assignment_rejects(text, message):
    with pytest.raises(argparse.ArgumentTypeError) as caught:
        cli.replica_assignment(text)
    assert message in str(caught.value)


def _parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="castle")
    cli.add_commands(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(argv)


def test_create_options_reach_the_parser():
    args = _parse("topics", "create", "t", "--replica-assignment", "1:2,2:1")
    assert (args.replica_assignment, args.partitions, args.replication_factor) == ([[1, 2], [2, 1]], None, None)
    args = _parse("topics", "create", "t", "--partitions", "3", "--replication-factor", "2")
    assert (args.replica_assignment, args.partitions, args.replication_factor) == (None, 3, 2)
    args = _parse("topics", "describe", "--under-replicated-partitions", "--unavailable-partitions")
    assert args.under_replicated_partitions and args.unavailable_partitions


def test_bad_replica_assignment_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exited:
        _parse("topics", "create", "t", "--replica-assignment", "1:1")
    assert exited.value.code == 2
    assert "names a broker twice" in capsys.readouterr().err


@pytest.mark.parametrize("other", [["--partitions", "2"], ["--replication-factor", "2"]])
def test_replica_assignment_excludes_partitions_and_replication_factor(other, capsys):
    # nothing is sent: the check comes before any request (127.0.0.1:1 has no broker)
    code = cli.main(["topics", "create", "t", "--replica-assignment", "1:2,2:1", *other,
                     "--bootstrap-server", "127.0.0.1:1", "--timeout", "1"])
    assert code == 2
    assert "--replica-assignment cannot be used with --partitions or --replication-factor" in capsys.readouterr().err


# ---------------------------------------------------------------------- describe
def _info(partition: int, leader: int, replicas: list[int], isr: list[int]) -> TopicPartitionInfo:
    def node(i: int) -> Node:
        return Node(i, "host", 9092)
    return TopicPartitionInfo(partition, node(leader), [node(r) for r in replicas], [node(r) for r in isr])


LIVE = {1, 2}
PARTITIONS = topics.partition_data([
    _info(2, -1, [3], []),              # its only replica's broker is gone: no leader
    _info(0, 1, [1, 2], [1, 2]),        # healthy
    _info(1, 2, [2, 3], [2]),           # broker 3 is offline: under-replicated
], LIVE)


def test_partition_data_orders_by_id_and_finds_offline_replicas():
    assert PARTITIONS == [
        {"partition": 0, "leader": 1, "replicas": [1, 2], "isr": [1, 2], "offline_replicas": []},
        {"partition": 1, "leader": 2, "replicas": [2, 3], "isr": [2], "offline_replicas": [3]},
        {"partition": 2, "leader": None, "replicas": [3], "isr": [], "offline_replicas": [3]},
    ]


def test_filters_are_kafka_topics_ones_and_or_together():
    def ids(under: bool, unavailable: bool) -> list[int]:
        return [p["partition"] for p in topics.select(PARTITIONS, under, unavailable)]
    assert ids(False, False) == [0, 1, 2]
    assert ids(True, False) == [1, 2]
    assert ids(False, True) == [2]
    assert ids(True, True) == [1, 2]


def test_unavailable_includes_a_leader_on_an_offline_broker():
    [partition] = topics.partition_data([_info(0, 3, [3, 1], [3, 1])], LIVE)
    assert topics.is_unavailable(partition) and not topics.is_under_replicated(partition)


def test_render_shows_topic_line_then_partitions():
    topic = {"name": "orders", "topic_id": "abc", "internal": False, "partition_count": 3, "replication_factor": 2,
             "configs": {"retention.ms": "1000"}, "partitions": PARTITIONS}
    lines = topics.render(topic).splitlines()
    assert lines[0] == "Topic: orders  TopicId: abc  PartitionCount: 3  ReplicationFactor: 2  Configs: retention.ms=1000"
    assert [line.split() for line in lines[1:]] == [
        ["TOPIC", "PARTITION", "LEADER", "REPLICAS", "ISR", "OFFLINE"],
        ["orders", "0", "1", "1,2", "1,2", "-"],
        ["orders", "1", "2", "2,3", "2", "3"],
        ["orders", "2", "-", "3", "-", "3"],
    ]
    assert "Configs: -" in topics.render({**topic, "configs": {}})
