"""Apache Kafka's own kafka-topics.sh and kafka-configs.sh (run as their Java main classes,
tests/kafka_cli.py) administer a real Castle broker's topic configs and SCRAM users.

What the tools print on stdout (or, when they fail, on stderr) is what is checked: each
assertion reads the tool's own output, the way an operator would.
"""

from __future__ import annotations

import json
import re
import subprocess
import uuid
from typing import Iterator

import pytest

from tests.integration.conftest import Broker, castle_command, shared_broker
from tests.kafka_cli import CONFIG_COMMAND, KAFKA_VERSION, TOPIC_COMMAND, missing_tools, run_tool
from tests.kafka_facts import KAFKA_4_0_TOPIC_CONFIGS

pytestmark = [pytest.mark.integration, pytest.mark.kafka_cli, pytest.mark.timeout(600)]


@pytest.fixture(autouse=True)
def kafka_tools_present() -> None:
    """CI installs java and Maven (.ci/run): their absence is a failure, not a skip."""
    missing = missing_tools()
    if missing:
        pytest.fail(f"Kafka's CLI needs {', '.join(missing)} on PATH (apt-get install default-jre-headless maven)")


@pytest.fixture(scope="module")
def broker(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    """One broker for the module: each test keeps to a topic, user, group or subscription of its own."""
    yield from shared_broker(request, tmp_path_factory)


CREATE_CONFIGS = {"compression.type": "lz4", "max.compaction.lag.ms": "86400000", "min.insync.replicas": "1"}
ALTER_CONFIGS = {"retention.ms": "3600000", "segment.jitter.ms": "1000", "message.timestamp.after.max.ms": "7200000"}


# ---------------------------------------------------------------------- helpers
def tool(broker: Broker, main_class: str, *args: str) -> subprocess.CompletedProcess[str]:
    return run_tool(main_class, ["--bootstrap-server", broker.bootstrap, *args])


def ok(broker: Broker, main_class: str, *args: str) -> str:
    """Run a tool that must succeed; its stdout."""
    done = tool(broker, main_class, *args)
    assert done.returncode == 0, (f"{main_class} {' '.join(args)} exited {done.returncode}\n"
                                  f"stdout: {done.stdout}\nstderr: {done.stderr}")
    return done.stdout


def new_topic(broker: Broker, configs: dict[str, str] | None = None) -> str:
    name = f"kcli-{uuid.uuid4().hex[:10]}"
    args = ["--create", "--topic", name, "--partitions", "2", "--replication-factor", "1"]
    for key, value in (configs or {}).items():
        args += ["--config", f"{key}={value}"]
    out = ok(broker, TOPIC_COMMAND, *args)
    assert out.strip() == f"Created topic {name}.", out
    return name


def described_topic(broker: Broker, topic: str) -> tuple[dict[str, str], list[str]]:
    """kafka-topics --describe: the topic line's ``Configs:`` and its partition lines."""
    out = ok(broker, TOPIC_COMMAND, "--describe", "--topic", topic)
    lines = [line for line in out.splitlines() if line.strip()]
    header = [line for line in lines if line.startswith(f"Topic: {topic}\tTopicId:")]
    assert len(header) == 1, out
    match = re.search(r"\tPartitionCount: (\d+)\tReplicationFactor: (\d+)\tConfigs: ?(.*)$", header[0])
    assert match, header[0]
    assert (match.group(1), match.group(2)) == ("2", "1"), header[0]
    configs = dict(item.split("=", 1) for item in match.group(3).split(",") if item)
    partitions = [line for line in lines if line.strip().startswith(f"Topic: {topic}\tPartition:")]
    return configs, partitions


CONFIG_LINE = re.compile(r"^  (?P<key>[a-z0-9.]+)=(?P<value>.*) sensitive=(?P<sensitive>true|false) synonyms=\{(?P<synonyms>.*)\}$")


def described_configs(broker: Broker, topic: str, *extra: str) -> dict[str, tuple[str, str]]:
    """kafka-configs --describe for one topic: name -> (value, synonyms) from each config line."""
    out = ok(broker, CONFIG_COMMAND, "--entity-type", "topics", "--entity-name", topic, "--describe", *extra)
    lines = out.splitlines()
    heading = "All configs" if "--all" in extra else "Dynamic configs"
    assert lines and lines[0] == f"{heading} for topic {topic} are:", out
    found: dict[str, tuple[str, str]] = {}
    for line in lines[1:]:
        if not line.strip():
            continue
        match = CONFIG_LINE.match(line)
        assert match, f"unexpected line from kafka-configs --describe: {line!r}\n{out}"
        assert match["key"] not in found, f"{match['key']} listed twice:\n{out}"
        assert match["sensitive"] == "false", line
        found[match["key"]] = (match["value"], match["synonyms"])
    return found


def alter(broker: Broker, topic: str, *args: str) -> subprocess.CompletedProcess[str]:
    return tool(broker, CONFIG_COMMAND, "--entity-type", "topics", "--entity-name", topic, "--alter", *args)


# ---------------------------------------------------------------------- tests
def test_kafka_topics_creates_a_topic_with_configs_and_describes_them(broker: Broker) -> None:
    topic = new_topic(broker, CREATE_CONFIGS)
    configs, partitions = described_topic(broker, topic)
    assert configs == CREATE_CONFIGS
    assert len(partitions) == 2, partitions
    for number, line in enumerate(sorted(partitions)):
        assert f"\tPartition: {number}\tLeader: " in line, line
    # --list names it, and a second --create of the same name is refused.
    assert topic in ok(broker, TOPIC_COMMAND, "--list").split()
    again = tool(broker, TOPIC_COMMAND, "--create", "--topic", topic, "--partitions", "1", "--replication-factor", "1")
    assert again.returncode != 0
    assert f"topic '{topic}' already exists" in again.stdout + again.stderr, again


def test_kafka_configs_alters_describes_and_deletes_topic_configs(broker: Broker) -> None:
    topic = new_topic(broker, CREATE_CONFIGS)

    done = alter(broker, topic, "--add-config", ",".join(f"{k}={v}" for k, v in ALTER_CONFIGS.items()))
    assert done.returncode == 0, done
    assert f"Completed updating config for topic {topic}." in done.stdout, done
    dynamic = described_configs(broker, topic)
    assert {key: value for key, (value, _) in dynamic.items()} == {**CREATE_CONFIGS, **ALTER_CONFIGS}
    for key, (value, synonyms) in dynamic.items():
        assert synonyms.startswith(f"DYNAMIC_TOPIC_CONFIG:{key}={value}"), (key, synonyms)
    # kafka-topics sees the same overrides.
    assert described_topic(broker, topic)[0] == {**CREATE_CONFIGS, **ALTER_CONFIGS}

    done = alter(broker, topic, "--delete-config", "retention.ms")
    assert done.returncode == 0, done
    assert f"Completed updating config for topic {topic}." in done.stdout, done
    dynamic = described_configs(broker, topic)
    assert "retention.ms" not in dynamic
    assert {key: value for key, (value, _) in dynamic.items()} == {**CREATE_CONFIGS, "segment.jitter.ms": "1000",
                                                                   "message.timestamp.after.max.ms": "7200000"}
    # Back to the default (Kafka's 7 days), and no longer a topic override.
    value, synonyms = described_configs(broker, topic, "--all")["retention.ms"]
    assert value == "604800000", (value, synonyms)
    assert "DYNAMIC_TOPIC_CONFIG" not in synonyms, synonyms


def test_kafka_configs_reports_a_refused_value(broker: Broker) -> None:
    topic = new_topic(broker)
    done = alter(broker, topic, "--add-config", "remote.storage.enable=true")
    output = done.stdout + done.stderr
    assert done.returncode != 0, done
    assert "InvalidConfigurationException" in output, output
    assert "remote.storage.enable" in output, output
    # Nothing was set.
    assert "remote.storage.enable" not in described_configs(broker, topic)
    assert described_configs(broker, topic, "--all")["remote.storage.enable"][0] == "false"


def test_kafka_configs_describe_all_lists_every_kafka_topic_config(broker: Broker) -> None:
    assert KAFKA_VERSION.startswith("4."), f"the expected list is Kafka 4's; the tools are {KAFKA_VERSION}"
    topic = new_topic(broker, CREATE_CONFIGS)
    assert alter(broker, topic, "--add-config", "segment.jitter.ms=1000").returncode == 0
    everything = described_configs(broker, topic, "--all")
    missing = KAFKA_4_0_TOPIC_CONFIGS - set(everything)
    assert not missing, f"kafka-configs --describe --all lacks {sorted(missing)}"
    values = {key: value for key, (value, _) in everything.items()}
    assert {key: values[key] for key in CREATE_CONFIGS} == CREATE_CONFIGS
    assert values["segment.jitter.ms"] == "1000"
    # Kafka's defaults for what this topic leaves alone.
    assert values["preallocate"] == "false"
    assert values["unclean.leader.election.enable"] == "false"
    assert values["message.timestamp.before.max.ms"] == "9223372036854775807"
    assert values["local.retention.ms"] == "-2"
    assert values["cleanup.policy"] == "delete"
    # Overrides carry the topic-level source first; the rest only defaults.
    for key, (_, synonyms) in everything.items():
        topic_level = synonyms.startswith("DYNAMIC_TOPIC_CONFIG:")
        assert topic_level == (key in {*CREATE_CONFIGS, "segment.jitter.ms"}), (key, synonyms)


def test_kafka_configs_adds_and_deletes_scram_credentials(broker: Broker) -> None:
    """kafka-configs --alter --entity-type users (AlterUserScramCredentials, the client salting
    the password): the credentials land in the broker's store, castle users lists them, and
    --delete-config removes one mechanism. (Quotas beside the credentials, and --describe of
    users: tests/integration/broker/test_client_quotas_cli.py.)"""
    user = f"u{uuid.uuid4().hex[:8]}"
    out = ok(broker, CONFIG_COMMAND, "--alter", "--entity-type", "users", "--entity-name", user, "--add-config",
             "SCRAM-SHA-256=[iterations=8192,password=secret-1],SCRAM-SHA-512=[password=secret-1]")
    assert f"Completed updating config for user {user}." in out, out

    def listed() -> set[tuple[str, str]]:
        done = subprocess.run(castle_command() + ["users", "list", user, "--bootstrap-server", broker.bootstrap, "--json"],
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        return {(entry["mechanism"], str(entry["iterations"])) for entry in json.loads(done.stdout)}

    assert listed() == {("SCRAM-SHA-256", "8192"), ("SCRAM-SHA-512", "4096")}
    ok(broker, CONFIG_COMMAND, "--alter", "--entity-type", "users", "--entity-name", user, "--delete-config", "SCRAM-SHA-512")
    assert listed() == {("SCRAM-SHA-256", "8192")}


def test_kafka_configs_4_4_alters_and_describes_a_groups_configs(broker: Broker) -> None:
    """kafka-configs.sh of Kafka 4.4 --entity-type groups: --add-config, --describe (the
    group's own values), --describe --all (every key with its source), --delete-config, and a
    value Kafka's GroupConfig refuses."""
    from tests.kafka_cli import GROUP_CONFIG_COMMAND, GROUP_CONFIGS_VERSION

    missing = missing_tools(GROUP_CONFIGS_VERSION)
    if missing:
        pytest.fail(f"Kafka's CLI needs {', '.join(missing)} on PATH")
    group = f"kcli-group-{uuid.uuid4().hex[:8]}"

    def configs(*args: str) -> subprocess.CompletedProcess[str]:
        return run_tool(GROUP_CONFIG_COMMAND, ["--bootstrap-server", broker.bootstrap, "--entity-type", "groups",
                                               "--entity-name", group, *args], version=GROUP_CONFIGS_VERSION)

    def described(*extra: str) -> dict[str, tuple[str, str]]:
        done = configs("--describe", *extra)
        assert done.returncode == 0, done
        lines = done.stdout.splitlines()
        heading = "All configs" if extra else "Dynamic configs"
        assert lines and lines[0] == f"{heading} for group {group} are:", done.stdout
        found = {}
        for line in lines[1:]:
            if line.strip():
                match = CONFIG_LINE.match(line)
                assert match, f"unexpected line from kafka-configs --describe: {line!r}"
                found[match["key"]] = (match["value"], match["synonyms"])
        return found

    done = configs("--alter", "--add-config", "consumer.session.timeout.ms=50000,share.auto.offset.reset=earliest")
    assert done.returncode == 0 and f"Completed updating config for group {group}." in done.stdout, done
    assert described() == {
        "consumer.session.timeout.ms": ("50000", "DYNAMIC_GROUP_CONFIG:consumer.session.timeout.ms=50000, "
                                                 "DEFAULT_CONFIG:group.consumer.session.timeout.ms=45000"),
        "share.auto.offset.reset": ("earliest", "DYNAMIC_GROUP_CONFIG:share.auto.offset.reset=earliest, "
                                                "DEFAULT_CONFIG:share.auto.offset.reset=latest")}
    everything = described("--all")
    assert len(everything) == 21 and everything["share.record.lock.duration.ms"] == (
        "30000", "DEFAULT_CONFIG:group.share.record.lock.duration.ms=30000")
    assert everything["consumer.session.timeout.ms"][0] == "50000"

    refused = configs("--alter", "--add-config", "consumer.session.timeout.ms=1")
    assert refused.returncode != 0
    assert ("InvalidConfigurationException: consumer.session.timeout.ms must be in the range 45000 to 60000 inclusive."
            in refused.stdout + refused.stderr), refused
    done = configs("--alter", "--delete-config", "share.auto.offset.reset")
    assert done.returncode == 0, done
    assert set(described()) == {"consumer.session.timeout.ms"}


def test_kafka_client_metrics_4_4_alters_describes_lists_and_deletes(broker: Broker) -> None:
    """kafka-client-metrics.sh of Kafka 4.4 (KIP-714's subscriptions, ConfigResource
    CLIENT_METRICS): --alter, --describe, --list, --delete, and values Kafka refuses, with
    Kafka's messages and nothing applied of them."""
    from tests.kafka_cli import CLIENT_METRICS_COMMAND, CLIENT_METRICS_VERSION

    missing = missing_tools(CLIENT_METRICS_VERSION)
    if missing:
        pytest.fail(f"Kafka's CLI needs {', '.join(missing)} on PATH")
    name = f"kcli-metrics-{uuid.uuid4().hex[:8]}"

    def tool(*args: str) -> subprocess.CompletedProcess[str]:
        return run_tool(CLIENT_METRICS_COMMAND, ["--bootstrap-server", broker.bootstrap, *args],
                        version=CLIENT_METRICS_VERSION)

    done = tool("--alter", "--name", name, "--metrics", "org.apache.kafka.producer.,org.apache.kafka.consumer.",
                "--interval", "1000", "--match", "client_id=app-.*")
    assert (done.returncode, done.stdout.strip()) == (0, f"Altered client metrics config for {name}."), done
    expected = [f"Client metrics configs for {name} are:", "  interval.ms=1000", "  match=client_id=app-.*",
                "  metrics=org.apache.kafka.producer.,org.apache.kafka.consumer."]
    described = tool("--describe", "--name", name)
    assert described.returncode == 0 and described.stdout.splitlines() == expected, described
    listed = tool("--list")
    assert listed.returncode == 0 and name in listed.stdout.split(), listed
    for args, message in [(("--interval", "-5"), "interval must be between 100 and 3600000 (1 hour)"),
                          (("--match", "client_id=(x"), "Illegal client matching pattern: client_id=(x")]:
        refused = tool("--alter", "--name", name, *args)
        assert refused.returncode != 0 and message in refused.stdout + refused.stderr, refused
    assert tool("--describe", "--name", name).stdout.splitlines() == expected  # nothing of them applied
    deleted = tool("--delete", "--name", name)
    assert (deleted.returncode, deleted.stdout.strip()) == (0, f"Deleted client metrics config for {name}."), deleted
    assert name not in tool("--list").stdout.split()
