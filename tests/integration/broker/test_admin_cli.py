"""The admin CLI (``castle topics|groups|configs``, broker/admin/) as an operator runs it.

Each command runs as a real subprocess against a real broker; what it reports (its
--json output, its text, its exit code) is checked, and every change it makes is checked
again independently through confluent-kafka's AdminClient.
"""

from __future__ import annotations

import subprocess
import time
from typing import Any

import orjson
import pytest

from tests.integration.conftest import castle_command, free_port, shared_broker, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


@pytest.fixture(scope="module")
def broker(request, tmp_path_factory):
    """One broker per distinct setting of the module's tests: each keeps to topics and groups
    of its own, and none changes a broker config (a refused change changes nothing)."""
    yield from shared_broker(request, tmp_path_factory)

CLI_TIMEOUT = 30.0  # the subprocess's own bound; commands use --timeout (10 s default) inside it


# ---------------------------------------------------------------------- helpers
def castle(bootstrap: str, *args: str, timeout: float = CLI_TIMEOUT) -> subprocess.CompletedProcess[str]:
    """Run ``castle ARGS --bootstrap-server BOOTSTRAP``; never a traceback, whatever the outcome."""
    done = subprocess.run(castle_command() + list(args) + ["--bootstrap-server", bootstrap],
                          capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    assert "Traceback" not in done.stderr, done.stderr
    return done


def ok(bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    done = castle(bootstrap, *args)
    assert done.returncode == 0, f"castle {' '.join(args)} exited {done.returncode}: {done.stderr}"
    return done


def as_json(bootstrap: str, *args: str) -> Any:
    return orjson.loads(ok(bootstrap, *args, "--json").stdout)


def fails(bootstrap: str, code: int, *args: str) -> str:
    """Run a command that must fail with ``code``; returns its stderr (one line for Kafka errors)."""
    done = castle(bootstrap, *args)
    assert done.returncode == code, f"castle {' '.join(args)}: exit {done.returncode}, want {code}: {done.stderr}"
    if code == 1:
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    return done.stderr


def admin(bootstrap: str) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap})


def topic_configs(client: Any, topic: str) -> dict[str, Any]:
    from confluent_kafka.admin import ConfigResource, ResourceType

    resource = ConfigResource(ResourceType.TOPIC, topic)
    return dict(client.describe_configs([resource])[resource].result(timeout=10))


def group_offsets(client: Any, group: str) -> dict[int, int]:
    from confluent_kafka import ConsumerGroupTopicPartitions

    answer = client.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(timeout=10)
    return {tp.partition: tp.offset for tp in answer.topic_partitions}


def group_state(client: Any, group: str) -> Any:
    return client.describe_consumer_groups([group])[group].result(timeout=10).state


# ---------------------------------------------------------------------- topics
def test_topics_create_list_describe_alter_delete(broker):
    from confluent_kafka import TopicCollection

    bs = broker.bootstrap
    client = admin(bs)
    topic = "cli-topics"

    assert "Created topic 'cli-topics'" in ok(bs, "topics", "create", topic, "--partitions", "3",
                                                "--config", "retention.ms=3600000").stdout
    assert "already exists" in fails(bs, 1, "topics", "create", topic, "--partitions", "3")
    ok(bs, "topics", "create", topic, "--partitions", "3", "--if-not-exists")

    listed = {t["name"]: t for t in as_json(bs, "topics", "list")["topics"]}
    assert listed[topic] == {"name": topic, "partitions": 3, "internal": False}
    assert listed["__consumer_offsets"]["internal"] is True
    assert "__consumer_offsets" not in {t["name"] for t in as_json(bs, "topics", "list", "--exclude-internal")["topics"]}
    assert topic in ok(bs, "topics", "list").stdout.splitlines()

    # describe: the CLI's leaders/replicas/isr are the AdminClient's, configs only the non-default one
    [described] = as_json(bs, "topics", "describe", topic)["topics"]
    assert described["configs"] == {"retention.ms": "3600000"}
    assert described["partition_count"] == 3 and described["replication_factor"] == 1
    truth = client.describe_topics(TopicCollection([topic]))[topic].result(timeout=10)
    assert [(p["partition"], p["leader"], p["replicas"], p["isr"]) for p in described["partitions"]] == \
        [(p.id, p.leader.id, [n.id for n in p.replicas], [n.id for n in p.isr]) for p in truth.partitions]
    assert {p["leader"] for p in described["partitions"]} == {0}
    assert described["topic_id"] == str(truth.topic_id)
    text = ok(bs, "topics", "describe", topic).stdout
    assert "PartitionCount: 3" in text and "Configs: retention.ms=3600000" in text
    assert text.splitlines()[1].split() == ["TOPIC", "PARTITION", "LEADER", "REPLICAS", "ISR", "OFFLINE"]

    # alter-configs: set two, then delete one; a dry run changes nothing
    ok(bs, "topics", "alter-configs", topic, "--set", "retention.ms=7200000", "--set", "max.message.bytes=2000000")
    configs = topic_configs(client, topic)
    assert (configs["retention.ms"].value, configs["max.message.bytes"].value) == ("7200000", "2000000")
    assert as_json(bs, "topics", "describe", topic)["topics"][0]["configs"] == \
        {"max.message.bytes": "2000000", "retention.ms": "7200000"}
    altered = as_json(bs, "topics", "alter-configs", topic, "--delete", "max.message.bytes")
    assert altered == {"resource": {"type": "topic", "name": topic}, "set": {}, "deleted": ["max.message.bytes"],
                       "applied": True}
    configs = topic_configs(client, topic)
    assert configs["max.message.bytes"].value == "1048588" and configs["max.message.bytes"].is_default
    ok(bs, "topics", "alter-configs", topic, "--set", "retention.ms=1000", "--dry-run")
    assert topic_configs(client, topic)["retention.ms"].value == "7200000"

    # add partitions
    ok(bs, "topics", "add-partitions", topic, "--partitions", "5")
    wait_until(lambda: len(client.list_topics(topic, timeout=5).topics[topic].partitions) == 5, 10, "5 partitions")
    assert as_json(bs, "topics", "describe", topic)["topics"][0]["partition_count"] == 5

    # delete: the topic goes, an unknown one is an error (exit 1) unless --if-exists
    stderr = fails(bs, 1, "topics", "delete", topic, "no-such-topic")
    assert "topic 'no-such-topic' does not exist" in stderr
    wait_until(lambda: topic not in client.list_topics(timeout=5).topics, 10, "the topic to disappear")
    assert as_json(bs, "topics", "delete", "no-such-topic", "--if-exists") == {"deleted": []}


# ---------------------------------------------------------------------- groups
def _consume_and_commit(bootstrap: str, topic: str, group: str, commits: dict[int, int]) -> Any:
    """A live group member that read everything and committed ``commits``; the caller closes it."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "client.id": "cli-admin-test",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    deadline = time.monotonic() + 20
    read = 0
    while read < 16:
        assert time.monotonic() < deadline, f"read {read} of 16 records"
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            read += 1
    consumer.commit(offsets=[TopicPartition(topic, p, o) for p, o in commits.items()], asynchronous=False)
    return consumer


@pytest.mark.parametrize("broker", [{"group.initial.rebalance.delay.ms": 0}], indirect=True)
def test_groups_describe_reset_delete(broker):
    from confluent_kafka import ConsumerGroupState, Producer
    from confluent_kafka.admin import NewTopic

    bs = broker.bootstrap
    client = admin(bs)
    topic, group = "cli-groups", "cli-group"
    client.create_topics([NewTopic(topic, 2, 1)])[topic].result(timeout=10)
    producer = Producer({"bootstrap.servers": bs})
    for i in range(16):
        producer.produce(topic, value=b"r%d" % i, partition=0 if i < 10 else 1)  # 10 on p0, 6 on p1
    assert producer.flush(10) == 0

    consumer = _consume_and_commit(bs, topic, group, {0: 7, 1: 6})
    try:
        [described] = as_json(bs, "groups", "describe", group)["groups"]
        assert described["state"] == "Stable"
        [member] = described["members"]
        assert member["client_id"] == "cli-admin-test"
        assert member["assignment"] == [{"topic": topic, "partition": 0}, {"topic": topic, "partition": 1}]
        assert [(p["partition"], p["committed"], p["log_end"], p["lag"], p["member_id"]) for p in described["partitions"]] \
            == [(0, 7, 10, 3, member["member_id"]), (1, 6, 6, 0, member["member_id"])]
        assert described["total_lag"] == 3
        text = ok(bs, "groups", "describe", group).stdout
        assert "cli-admin-test" in text and "LOG-END" in text
        assert {"group": group, "state": "Stable"}.items() <= \
            next(g for g in as_json(bs, "groups", "list")["groups"] if g["group"] == group).items()

        # a live member: resetting and deleting are refused, and nothing changes
        assert "active member" in fails(bs, 1, "groups", "reset-offsets", group, "--topic", topic, "--to-earliest",
                                        "--execute")
        assert "active members" in fails(bs, 1, "groups", "delete", group)
        assert group_offsets(client, group) == {0: 7, 1: 6}
    finally:
        consumer.close()
    wait_until(lambda: group_state(client, group) == ConsumerGroupState.EMPTY, 10, "the group to be empty")

    # dry run (the default): a plan, nothing changed
    done = ok(bs, "groups", "reset-offsets", group, "--topic", topic, "--to-earliest")
    assert done.stdout.splitlines()[0].split() == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET"]
    assert "--execute" in done.stderr
    plan = as_json(bs, "groups", "reset-offsets", group, "--topic", topic, "--to-datetime", "2000-01-01T00:00:00Z")
    assert plan == {"group": group, "executed": False, "partitions": [
        {"topic": topic, "partition": 0, "current": 7, "new": 0}, {"topic": topic, "partition": 1, "current": 6, "new": 0}]}
    assert group_offsets(client, group) == {0: 7, 1: 6}

    # --execute on the empty group: one partition to an offset, then every partition shifted (clamped to the log end)
    ok(bs, "groups", "reset-offsets", group, "--topic", f"{topic}:0", "--to-offset", "2", "--execute")
    assert group_offsets(client, group) == {0: 2, 1: 6}
    executed = as_json(bs, "groups", "reset-offsets", group, "--all-topics", "--shift-by", "3", "--execute")
    assert executed["executed"] is True and [p["new"] for p in executed["partitions"]] == [5, 6]
    assert group_offsets(client, group) == {0: 5, 1: 6}
    lags = [p["lag"] for p in as_json(bs, "groups", "describe", group)["groups"][0]["partitions"]]
    assert lags == [5, 0]

    # delete: gone for the broker, and for the CLI
    ok(bs, "groups", "delete", group)
    assert group_state(client, group) == ConsumerGroupState.DEAD
    assert group not in {g.group_id for g in client.list_consumer_groups().result(timeout=10).valid}
    assert "does not exist" in fails(bs, 1, "groups", "describe", group)


# ---------------------------------------------------------------------- configs
def test_configs_topic_and_broker(broker):
    from confluent_kafka.admin import ConfigResource, NewTopic, ResourceType

    bs = broker.bootstrap
    client = admin(bs)
    topic = "cli-configs"
    client.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=10)

    described = as_json(bs, "configs", "describe", "--topic", topic)
    assert described["configs"]["cleanup.policy"] == {"value": "delete", "source": "DEFAULT_CONFIG", "default": True,
                                                      "read_only": False, "sensitive": False}
    assert set(described["configs"]) == set(topic_configs(client, topic))
    ok(bs, "configs", "alter", "--topic", topic, "--set", "cleanup.policy=compact,delete", "--set", "retention.ms=60000")
    assert topic_configs(client, topic)["cleanup.policy"].value == "compact,delete"
    overrides = as_json(bs, "configs", "describe", "--topic", topic, "--non-default")["configs"]
    assert {key: (e["value"], e["source"]) for key, e in overrides.items()} == {
        "cleanup.policy": ("compact,delete", "DYNAMIC_TOPIC_CONFIG"), "retention.ms": ("60000", "DYNAMIC_TOPIC_CONFIG")}
    ok(bs, "configs", "alter", "--topic", topic, "--delete", "retention.ms")
    assert topic_configs(client, topic)["retention.ms"].is_default

    # a broker: its settings as the AdminClient sees them; a static one is refused as Kafka refuses it
    resource = ConfigResource(ResourceType.BROKER, "0")
    truth = client.describe_configs([resource])[resource].result(timeout=10)
    broker_configs = as_json(bs, "configs", "describe", "--broker", "0")["configs"]
    assert {k: e["value"] for k, e in broker_configs.items()} == {k: e.value for k, e in truth.items()}
    assert broker_configs["log.dirs"]["value"] == broker.log_dir and broker_configs["log.dirs"]["read_only"] is True
    non_default = as_json(bs, "configs", "describe", "--broker", "0", "--non-default")["configs"]
    assert "log.dirs" in non_default and set(non_default) < set(broker_configs)
    assert not any(e["default"] for e in non_default.values())
    assert "Cannot update these configs dynamically: [num.partitions]" in fails(
        bs, 1, "configs", "alter", "--broker", "0", "--set", "num.partitions=3")
    assert client.describe_configs([resource])[resource].result(timeout=10)["num.partitions"].value == \
        truth["num.partitions"].value
    assert "not in the cluster" in fails(bs, 1, "configs", "describe", "--broker", "4242")


def test_configs_of_a_group(broker):
    """``castle configs --group``: librdkafka's GROUP resource is the GROUP config resource;
    the describe shows every key with its source, alter sets and deletes, and a value Kafka's
    GroupConfig refuses is one line and exit code 1."""
    from confluent_kafka.admin import ConfigResource, ResourceType

    bs = broker.bootstrap
    group = "cli-group-configs"
    described = as_json(bs, "configs", "describe", "--group", group)["configs"]
    assert described["consumer.session.timeout.ms"] == {"value": "45000", "source": "DEFAULT_CONFIG", "default": True,
                                                        "read_only": False, "sensitive": False}
    assert described["share.auto.offset.reset"]["value"] == "latest"
    ok(bs, "configs", "alter", "--group", group, "--set", "consumer.session.timeout.ms=50000",
       "--set", "share.isolation.level=read_committed")
    resource = ConfigResource(ResourceType.GROUP, group)
    client = admin(bs)
    truth = client.describe_configs([resource])[resource].result(timeout=10)
    assert truth["consumer.session.timeout.ms"].value == "50000"
    overrides = as_json(bs, "configs", "describe", "--group", group, "--non-default")["configs"]
    assert {key: (e["value"], e["source"]) for key, e in overrides.items()} == {
        "consumer.session.timeout.ms": ("50000", "GROUP_CONFIG"), "share.isolation.level": ("read_committed", "GROUP_CONFIG")}
    ok(bs, "configs", "alter", "--group", group, "--delete", "share.isolation.level")
    assert set(as_json(bs, "configs", "describe", "--group", group, "--non-default")["configs"]) == {
        "consumer.session.timeout.ms"}
    refused = fails(bs, 1, "configs", "alter", "--group", group, "--set", "consumer.session.timeout.ms=5")
    assert "consumer.session.timeout.ms must be in the range 45000 to 60000 inclusive." in refused


# ---------------------------------------------------------------------- bad input
def test_bad_input_is_one_line_and_an_exit_code(broker):
    from confluent_kafka.admin import NewTopic

    bs = broker.bootstrap
    client = admin(bs)
    client.create_topics([NewTopic("cli-bad", 1, 1)])["cli-bad"].result(timeout=10)

    # Kafka says no: exit 1, one line naming the thing
    assert "topic 'no-such-topic' does not exist" in fails(bs, 1, "topics", "describe", "no-such-topic")
    assert "no-such-topic" not in client.list_topics(timeout=10).topics  # describing did not create it
    assert "topic 'no-such-topic' does not exist" in fails(bs, 1, "configs", "describe", "--topic", "no-such-topic")
    assert "group 'no-such-group' does not exist" in fails(bs, 1, "groups", "describe", "no-such-group")
    assert "INVALID_CONFIG" in fails(bs, 1, "topics", "alter-configs", "cli-bad", "--set", "segment.bytes=0")
    assert "has no partition 7" in fails(bs, 1, "groups", "reset-offsets", "g", "--topic", "cli-bad:7", "--to-latest")
    assert topic_configs(client, "cli-bad")["segment.bytes"].is_default

    # the command line is wrong: exit 2 with a usage message, nothing sent
    assert "expected KEY=VALUE" in fails(bs, 2, "topics", "alter-configs", "cli-bad", "--set", "retention.ms")
    assert "expected KEY=VALUE" in fails(bs, 2, "configs", "alter", "--topic", "cli-bad", "--set", "=1")
    assert "nothing to change" in fails(bs, 2, "configs", "alter", "--topic", "cli-bad")
    assert "both set and deleted" in fails(bs, 2, "topics", "alter-configs", "cli-bad", "--set", "a=1", "--delete", "a")
    assert "ISO 8601" in fails(bs, 2, "groups", "reset-offsets", "g", "--topic", "cli-bad", "--to-datetime", "noon")
    assert "required" in fails(bs, 2, "groups", "reset-offsets", "g", "--topic", "cli-bad")
    assert "No such configuration property" in fails(bs, 2, "topics", "list", "--property", "no.such.setting=1")
    assert topic_configs(client, "cli-bad")["retention.ms"].is_default


def test_unreachable_bootstrap_fails_within_the_timeout():
    nowhere = f"127.0.0.1:{free_port()}"  # nothing listens there
    for command in (["topics", "list"], ["groups", "list"]):
        started = time.monotonic()
        stderr = fails(nowhere, 1, *command, "--timeout", "2")
        elapsed = time.monotonic() - started
        assert f"no answer from {nowhere} within 2 s" in stderr
        assert 1.5 < elapsed < 8, f"castle {' '.join(command)} took {elapsed:.1f} s with --timeout 2"
