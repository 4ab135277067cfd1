"""Dynamic broker configs on a real broker: Kafka 4.4's kafka-configs.sh (--entity-type brokers,
--entity-default), raw kio requests, both coordination backends (a file; a real ZooKeeper in
Kafka 3.9's /config/brokers layout), and the effect that matters: a cluster default
log.retention.ms set at run time deletes the old segments of a topic without its own
retention, while a topic with its own keeps them, with no restart.
"""

from __future__ import annotations

import glob
import json
import os
import time
import uuid
from typing import Any, Callable

import pytest
from kazoo.client import KazooClient
from kio.schema.describe_configs.v4.request import DescribeConfigsRequest, DescribeConfigsResource
from kio.schema.incremental_alter_configs.v1.request import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)

from tests.integration.clients import Rec, confluent_produce
from tests.integration.conftest import Broker, start_cluster_broker, wait_until
from tests.integration.kio_client import KioClient
from tests.kafka_cli import kafka_configs, missing_tools

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

CLI_VERSION = "4.4.0"
BROKER_TYPE = 4
SET, DELETE = 0, 1
DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG = 2, 3
INVALID_CONFIG, INVALID_REQUEST = 40, 42
FAST_RETENTION = {"log.retention.check.interval.ms": 300}


def segments(broker: Broker, topic: str) -> list[str]:
    return sorted(glob.glob(os.path.join(broker.log_dir, f"{topic}-0", "*.log")))


def produce_in_small_batches(broker: Broker, topic: str, count: int) -> None:
    now = int(time.time() * 1000)
    records = [Rec(0, None, f"{topic}/{i}/".encode() + b"x" * 200, (), now) for i in range(count)]
    confluent_produce(broker.bootstrap, topic, records, **{"linger.ms": 0, "batch.num.messages": 1})


def incremental(client: KioClient, name: str, ops: list[tuple[str, int, str | None]],
                validate_only: bool = False) -> Any:
    request = IncrementalAlterConfigsRequest(resources=(AlterConfigsResource(
        resource_type=BROKER_TYPE, resource_name=name,
        configs=tuple(AlterableConfig(name=n, config_operation=op, value=v) for n, op, v in ops)),),
        validate_only=validate_only)
    [response] = client.call(44, 1, request).responses
    return response


def described(client: KioClient, name: str, keys: tuple[str, ...] | None = None) -> Any:
    request = DescribeConfigsRequest(resources=(DescribeConfigsResource(
        resource_type=BROKER_TYPE, resource_name=name, configuration_keys=keys),),
        include_synonyms=True, include_documentation=False)
    [result] = client.call(32, 4, request).results
    return result


# ---------------------------------------------------------------------- kafka-configs.sh (4.4)
@pytest.mark.kafka_cli
@pytest.mark.parametrize("broker", [{"workers": 2, **FAST_RETENTION}], indirect=True)
def test_a_dynamic_cluster_default_retention_deletes_old_segments_live(broker: Broker) -> None:
    missing = missing_tools(CLI_VERSION)
    if missing:
        pytest.fail(f"Kafka's CLI needs {', '.join(missing)} on PATH")
    plain, own = f"plain-{uuid.uuid4().hex[:6]}", f"own-{uuid.uuid4().hex[:6]}"
    from tests.integration.clients import confluent_create_topic
    confluent_create_topic(broker.bootstrap, plain, 1, {"segment.bytes": "1024"})
    confluent_create_topic(broker.bootstrap, own, 1, {"segment.bytes": "1024", "retention.ms": "86400000"})
    for topic in (plain, own):
        produce_in_small_batches(broker, topic, 40)
    before = {topic: len(segments(broker, topic)) for topic in (plain, own)}
    assert min(before.values()) >= 10, before
    time.sleep(1.5)  # every record now older than the retention about to be set

    done = kafka_configs(broker.bootstrap, "--entity-type", "brokers", "--entity-default", "--alter",
                        "--add-config", "log.retention.ms=1000")
    assert done.returncode == 0, done
    assert "Completed updating default config for brokers in the cluster." in done.stdout, done.stdout

    wait_until(lambda: len(segments(broker, plain)) <= 1, 20, "the old segments of the topic without its own retention deleted")
    assert len(segments(broker, own)) == before[own]

    out = kafka_configs(broker.bootstrap, "--entity-type", "brokers", "--entity-default", "--describe")
    assert out.returncode == 0, out
    assert out.stdout.splitlines()[0] == "Default configs for brokers in the cluster are:", out.stdout
    assert "  log.retention.ms=1000 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=1000}" \
        in out.stdout.splitlines(), out.stdout
    # The broker's own dynamic configs: none (the tool lists DYNAMIC_BROKER_CONFIG ones only) ...
    out = kafka_configs(broker.bootstrap, "--entity-type", "brokers", "--entity-name", "0", "--describe")
    assert out.returncode == 0, out
    assert out.stdout.splitlines() == ["Dynamic configs for broker 0 are:"], out.stdout
    # ... and with --all, every setting, the default's value among them.
    out = kafka_configs(broker.bootstrap, "--entity-type", "brokers", "--entity-name", "0", "--describe", "--all")
    assert out.returncode == 0, out
    assert out.stdout.splitlines()[0] == "All configs for broker 0 are:", out.stdout
    assert "  log.dirs=" + broker.log_dir + " sensitive=false synonyms={STATIC_BROKER_CONFIG:log.dirs=" \
        in out.stdout, out.stdout
    line = [x for x in out.stdout.splitlines() if x.startswith("  log.retention.ms=")]
    assert line == ["  log.retention.ms=1000 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=1000, "
                    "DEFAULT_CONFIG:log.retention.ms=604800000}"], out.stdout

    # This broker's own value wins over the cluster default; deleting it brings the default back.
    done = kafka_configs(broker.bootstrap, "--entity-type", "brokers", "--entity-name", "0", "--alter",
                        "--add-config", "log.retention.ms=3600000")
    assert done.returncode == 0 and "Completed updating config for broker 0." in done.stdout, done
    out = kafka_configs(broker.bootstrap, "--entity-type", "brokers", "--entity-name", "0", "--describe")
    assert "  log.retention.ms=3600000 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:log.retention.ms=3600000, " \
           "DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=1000, DEFAULT_CONFIG:log.retention.ms=604800000}" \
        in out.stdout.splitlines(), out.stdout
    done = kafka_configs(broker.bootstrap, "--entity-type", "brokers", "--entity-name", "0", "--alter",
                        "--delete-config", "log.retention.ms")
    assert done.returncode == 0, done

    # Kafka's refusals, as the tool reports them.
    refused = kafka_configs(broker.bootstrap, "--entity-type", "brokers", "--entity-name", "0", "--alter",
                           "--add-config", "num.partitions=3")
    assert refused.returncode != 0
    assert "Cannot update these configs dynamically: [num.partitions]" in refused.stdout + refused.stderr, refused
    refused = kafka_configs(broker.bootstrap, "--entity-type", "brokers", "--entity-default", "--alter",
                           "--add-config", "log.retention.ms=soon")
    assert refused.returncode != 0
    assert "Invalid value soon for configuration log.retention.ms" in refused.stdout + refused.stderr, refused


# ---------------------------------------------------------------------- raw requests, both backends
def check_raw_requests(broker: Broker, stored: Callable[[], dict[str, Any]]) -> None:
    with KioClient(broker.bootstrap) as client:
        mine = {c.name: c for c in described(client, "0").configs}
        assert not mine["log.retention.ms"].read_only and mine["log.dirs"].read_only
        assert incremental(client, "", [("log.retention.bytes", SET, "1048576")]).error_code == 0
        assert incremental(client, "0", [("message.max.bytes", SET, "2000000")]).error_code == 0
        assert stored() == {"<default>": {"log.retention.bytes": "1048576"}, "0": {"message.max.bytes": "2000000"}}
        # Every worker answers from the store: new connections land on any of them.
        for _ in range(4):
            with KioClient(broker.bootstrap) as other:
                found = {c.name: c for c in described(other, "0", ("log.retention.bytes", "message.max.bytes")).configs}
                assert found["log.retention.bytes"].config_source == DYNAMIC_DEFAULT_BROKER_CONFIG
                assert (found["message.max.bytes"].value, found["message.max.bytes"].config_source) == (
                    "2000000", DYNAMIC_BROKER_CONFIG)
        bad = incremental(client, "0", [("log.retention.ms", SET, "1"), ("no.such.config", SET, "1")])
        assert (bad.error_code, bad.error_message) == (INVALID_CONFIG, "Unknown config name: no.such.config")
        bad = incremental(client, "0", [("log.retention.ms", SET, "1"), ("listeners", SET, "PLAINTEXT://:1")])
        assert (bad.error_code, bad.error_message) == (INVALID_REQUEST, "Cannot update these configs dynamically: [listeners]")
        assert incremental(client, "", [("log.retention.ms", SET, "1")], validate_only=True).error_code == 0
        assert incremental(client, "0", [("message.max.bytes", DELETE, None)]).error_code == 0
        assert stored() == {"<default>": {"log.retention.bytes": "1048576"}, "0": {}} or \
            stored() == {"<default>": {"log.retention.bytes": "1048576"}}
        other = described(client, "5")
        assert other.error_code == INVALID_REQUEST


@pytest.mark.parametrize("broker", [{"workers": 2}], indirect=True)
def test_raw_requests_local_backend(broker: Broker) -> None:
    def stored() -> dict[str, Any]:
        with open(os.path.join(broker.log_dir, "broker-configs.json")) as handle:
            brokers: dict[str, Any] = json.load(handle)["brokers"]
        return brokers

    check_raw_requests(broker, stored)


@pytest.mark.zookeeper
def test_raw_requests_zookeeper_backend(broker_factory: Callable[..., Broker], zk_connect: str) -> None:
    broker = start_cluster_broker(broker_factory, zk_connect, 0, workers=2)
    client = KazooClient(hosts=zk_connect)
    client.start(timeout=10)
    try:
        def stored() -> dict[str, Any]:
            out = {}
            for name in client.get_children("/config/brokers"):
                doc = json.loads(client.get(f"/config/brokers/{name}")[0])
                assert doc["version"] == 1
                if doc["config"]:
                    out[name] = doc["config"]
            return out

        check_raw_requests(broker, stored)
        changes = [json.loads(client.get(f"/config/changes/{c}")[0]) for c in sorted(client.get_children("/config/changes"))]
        assert {"version": 2, "entity_path": "brokers/<default>"} in changes
        assert {"version": 2, "entity_path": "brokers/0"} in changes
    finally:
        client.stop()
        client.close()


# ---------------------------------------------------------------------- broker loggers
@pytest.mark.kafka_cli
@pytest.mark.parametrize("broker", [{"workers": 2}], indirect=True)
def test_kafka_configs_sets_a_logger_level_in_every_worker(broker: Broker) -> None:
    missing = missing_tools(CLI_VERSION)
    if missing:
        pytest.fail(f"Kafka's CLI needs {', '.join(missing)} on PATH")
    logger = "castle.requests"  # the request log: a DEBUG line per request
    entity = ["--entity-type", "broker-loggers", "--entity-name", "0"]
    done = kafka_configs(broker.bootstrap, *entity, "--alter", "--add-config", f"{logger}=DEBUG")
    assert done.returncode == 0, done
    out = kafka_configs(broker.bootstrap, *entity, "--describe")
    assert out.returncode == 0, out
    assert f"  {logger}=DEBUG sensitive=false synonyms={{}}" in out.stdout.splitlines(), out.stdout

    def debug_from_every_worker() -> bool:
        with KioClient(broker.bootstrap) as client:
            described(client, "0", ("log.retention.ms",))
        text = broker.stderr(200_000)
        return all(f"DEBUG worker {i}[" in text for i in range(broker.workers))

    wait_until(debug_from_every_worker, 20, "DEBUG lines from every worker")
    refused = kafka_configs(broker.bootstrap, *entity, "--alter", "--add-config", f"{logger}=LOUD")
    assert refused.returncode != 0
    assert f"Cannot set the log level of {logger} to LOUD as it is not a supported log level" \
        in refused.stdout + refused.stderr, refused
    done = kafka_configs(broker.bootstrap, *entity, "--alter", "--delete-config", logger)
    assert done.returncode == 0, done
    out = kafka_configs(broker.bootstrap, *entity, "--describe")
    assert f"  {logger}=INFO sensitive=false synonyms={{}}" in out.stdout.splitlines(), out.stdout


@pytest.mark.zookeeper
def test_a_cluster_default_set_on_one_broker_is_applied_by_the_other(broker_factory: Callable[..., Broker],
                                                                     zk_connect: str) -> None:
    """The znodes and their change notification are all another broker needs: broker 1 hears of
    the change through its ZooKeeper watch and runs with it; broker 0 ignores broker 1's own."""
    first = start_cluster_broker(broker_factory, zk_connect, 0, workers=1)
    second = start_cluster_broker(broker_factory, zk_connect, 1, workers=1)
    with KioClient(first.bootstrap) as client:
        assert incremental(client, "", [("log.retention.ms", SET, "4321000")]).error_code == 0
        assert incremental(client, "1", [("log.segment.bytes", SET, "2097152")]).error_code == 0
    # Each worker logs what it applied: "worker 0: dynamic broker configs log.retention.ms=..."
    wait_until(lambda: all(key in second.stderr(50_000) for key in ("log.retention.ms=4321000",
                                                                         "log.segment.bytes=2097152")),
               20, "broker 1 to apply the cluster default and its own value")
    wait_until(lambda: "dynamic broker configs log.retention.ms=4321000" in first.stderr(50_000), 20,
               "broker 0 to apply the cluster default")
    assert "log.segment.bytes=2097152" not in first.stderr(50_000)
    with KioClient(second.bootstrap) as client:
        found = {c.name: c for c in described(client, "1", ("log.retention.ms", "log.segment.bytes")).configs}
    assert (found["log.retention.ms"].value, found["log.retention.ms"].config_source) == (
        "4321000", DYNAMIC_DEFAULT_BROKER_CONFIG)
    assert (found["log.segment.bytes"].value, found["log.segment.bytes"].config_source) == (
        "2097152", DYNAMIC_BROKER_CONFIG)


@pytest.mark.zookeeper
def test_a_dynamic_unclean_leader_election_default_reaches_the_controller(broker_factory: Callable[..., Broker],
                                                                         zk_connect: str) -> None:
    """The partition's only in-sync replica dies: it stays offline until
    unclean.leader.election.enable=true is set as a dynamic cluster default, which the
    controller (a coordinator process) takes live and elects a follower."""
    from tests.integration.broker.test_replication import describe, leader_alone_in_the_isr, start_three

    three = start_three(broker_factory, zk_connect)
    topic = "unclean-by-default"
    with leader_alone_in_the_isr(three, topic) as (leader_id, old_leader, followers):
        old_leader.kill()
    wait_until(lambda: describe(followers, topic)[0][0] == -1, 30, "the partition offline")
    time.sleep(2)
    assert describe(followers, topic)[0][0] == -1, "elected while unclean election is off"
    with KioClient(followers[0].bootstrap) as client:
        assert incremental(client, "", [("unclean.leader.election.enable", SET, "true")]).error_code == 0
    wait_until(lambda: describe(followers, topic)[0][0] not in (-1, leader_id), 30, "an unclean leader")
    old_leader.start()  # back, so that every broker of the test stops cleanly


@pytest.mark.parametrize("broker", [{"workers": 2, "log.cleanup.policy": "compact", "log.segment.bytes": 4096,
                                     "log.cleaner.min.cleanable.ratio": 0.01, "log.cleaner.backoff.ms": 3_600_000}],
                         indirect=True)
def test_a_dynamic_cleaner_backoff_wakes_the_cleaner_live(broker: Broker) -> None:
    """log.cleaner.backoff.ms is one of Kafka's LogCleaner reconfigurables: with an hour's
    backoff nothing is compacted; set to 200 ms dynamically, the duplicates go, no restart."""
    from tests.integration.broker.test_compaction_transactions import READ_UNCOMMITTED, values

    topic = "dyn-cleaner"
    now = int(time.time() * 1000)
    records = [Rec(0, f"key-{i % 5}".encode(), b"v" * 300, (), now) for i in range(200)]
    confluent_produce(broker.bootstrap, topic, records, **{"linger.ms": 0, "batch.num.messages": 1})
    with KioClient(broker.bootstrap) as client:
        time.sleep(2)
        assert len(values(client, topic, READ_UNCOMMITTED)) == 200  # an hour's backoff: the cleaner has not run
        answer = incremental(client, "0", [("log.cleaner.backoff.ms", SET, "200")])
        assert answer.error_code == 0, answer.error_message
        entry = {c.name: c for c in described(client, "0", ("log.cleaner.backoff.ms",)).configs}["log.cleaner.backoff.ms"]
        assert (entry.value, entry.read_only, entry.config_source) == ("200", False, DYNAMIC_BROKER_CONFIG)
        wait_until(lambda: len(values(client, topic, READ_UNCOMMITTED)) < 100, 30, "the cleaner compacting the duplicates")
