"""Replication throttles (KIP-73) set and cleared by Kafka 4.4's kafka-reassign-partitions,
unmodified, on three real Castle brokers sharing a real ZooKeeper.

``--execute --throttle`` sets the leader and follower rates on the brokers and the moving
partition's throttled replicas on its topic; the new replica then catches up at about the
throttle, while a partition moved beside it without a throttle goes at full speed;
``--verify`` clears every throttle once the move is done, and a move after that is fast.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any, Callable

import pytest
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

from tests.integration.broker.test_admin_cli import ok
from tests.integration.broker.test_replication import (
    bootstrap,
    broker_with_id,
    describe,
    log_records,
    produce_acked,
    read_all,
    segment_batches,
    start_three,
)
from tests.integration.conftest import Broker, wait_until
from tests.integration.replication_history import History
from tests.kafka_cli import REASSIGN_COMMAND, missing_tools, run_tool

pytestmark = [pytest.mark.integration, pytest.mark.zookeeper, pytest.mark.replication, pytest.mark.kafka_cli]

VERSION = "4.4.0"
THROTTLE = 1 << 20  # bytes/s
VALUE_BYTES = 10 * 1024
THROTTLED_RECORDS = 2048  # 20 MiB
BESIDE_RECORDS = 512  # 5 MiB
RATES = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")


def replica_bytes(broker: Broker, topic: str) -> int:
    """The bytes of whole batches in a broker's copy of partition 0, read from its files."""
    directory = os.path.join(broker.log_dir, f"{topic}-0")
    total = 0
    try:
        names = sorted(n for n in os.listdir(directory) if n.endswith(".log"))
    except FileNotFoundError:
        return 0
    for name in names:
        try:
            total += sum(header.size for header, _read in segment_batches(os.path.join(directory, name)))
        except FileNotFoundError:
            continue  # a segment rolled or deleted under us
    return total


def values(prefix: str, count: int) -> list[str]:
    return [f"{prefix}{i}:".ljust(VALUE_BYTES, "x") for i in range(count)]


def reassign(brokers: list[Broker], *args: str) -> str:
    done = run_tool(REASSIGN_COMMAND, ["--bootstrap-server", brokers[0].bootstrap, *args], version=VERSION)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def plan(tmp_path: Any, name: str, topic: str, replicas: list[int]) -> str:
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": 0, "replicas": replicas}]}))
    return str(path)


def dynamic_configs(brokers: list[Broker], kind: str, name: str) -> dict[str, str]:
    """The configs of a resource that are set (not defaults), as DescribeConfigs answers them."""
    admin = AdminClient({"bootstrap.servers": bootstrap(brokers)})
    resource = ConfigResource(kind, name)
    entries = admin.describe_configs([resource])[resource].result(30)
    return {key: entry.value for key, entry in entries.items() if not entry.is_default and entry.value is not None}


def set_configs(brokers: list[Broker], kind: str, name: str, configs: dict[str, str]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap(brokers)})
    resource = ConfigResource(kind, name, incremental_configs=[
        ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET) for key, value in configs.items()])
    admin.incremental_alter_configs([resource])[resource].result(30)


def rate_from_a_quarter_on(samples: list[tuple[float, int]], total: int) -> float:
    """Bytes/s of a copy from when it held a quarter of ``total`` to its end (before that, the
    first fetches may precede a throttle taking effect, and a throttle lets one window's worth
    through at once)."""
    start = next((t, held) for t, held in samples if held >= total // 4)
    end = samples[-1]
    return (end[1] - start[1]) / max(0.25, end[0] - start[0])


def copied_over_time(broker: Broker, topic: str, total: int, timeout: float) -> list[tuple[float, int]]:
    """(time, bytes) of ``broker``'s copy, sampled until it holds ``total`` bytes."""
    samples: list[tuple[float, int]] = []
    deadline = time.monotonic() + timeout
    while True:
        held = replica_bytes(broker, topic)
        samples.append((time.monotonic(), held))
        if held >= total:
            return samples
        assert time.monotonic() < deadline, f"{held} of {total} bytes copied in {timeout} s"
        time.sleep(0.25)


@pytest.mark.timeout(600)
def test_kafka_reassign_partitions_throttles_a_move_and_verify_clears_it(
        broker_factory: Callable[..., Broker], zk_connect: str, tmp_path: Any) -> None:
    missing = missing_tools(VERSION)
    if missing:
        pytest.fail(f"Kafka's CLI needs {', '.join(missing)} on PATH (apt-get install default-jre-headless maven)")
    three = start_three(broker_factory, zk_connect)
    one, two, third = (broker_with_id(three, n) for n in (1, 2, 3))
    throttled, beside = "throttled", "beside"
    for topic in (throttled, beside):
        ok(bootstrap(three), "topics", "create", topic, "--replica-assignment", "1")
    history = History()
    batching = {"batch.size": VALUE_BYTES * 4, "linger.ms": 0}
    produce_acked(three, throttled, values("t", THROTTLED_RECORDS), history, extra=batching, partitions=1)
    produce_acked(three, beside, values("b", BESIDE_RECORDS), history, extra=batching, partitions=1)
    throttled_total, beside_total = replica_bytes(one, throttled), replica_bytes(one, beside)
    assert throttled_total >= THROTTLED_RECORDS * VALUE_BYTES

    # The throttled move: broker 2 joins partition 0 of "throttled" under 1 MiB/s.
    throttled_plan = plan(tmp_path, "throttled", throttled, [1, 2])
    out = reassign(three, "--execute", "--reassignment-json-file", throttled_plan, "--throttle", str(THROTTLE))
    assert "throttle" in out.lower(), out
    for node_id in (1, 2):
        assert {k: v for k, v in dynamic_configs(three, "broker", str(node_id)).items() if k in RATES} \
            == {rate: str(THROTTLE) for rate in RATES}
    topic_configs = dynamic_configs(three, "topic", throttled)
    assert (topic_configs["leader.replication.throttled.replicas"],
            topic_configs["follower.replication.throttled.replicas"]) == ("0:1", "0:2"), topic_configs
    # Beside it, a move no throttle lists goes at full speed (kafka-reassign-partitions --additional).
    beside_started = time.monotonic()
    reassign(three, "--execute", "--additional", "--reassignment-json-file", plan(tmp_path, "beside", beside, [1, 2]))
    # Records acknowledged while the throttled copy runs (the ISR is still broker 1 alone).
    produce_acked(three, throttled, values("during", 100), history, extra=batching, partitions=1)
    beside_samples = copied_over_time(two, beside, beside_total, 60)
    beside_seconds = beside_samples[-1][0] - beside_started
    throttled_then = replica_bytes(two, throttled)
    assert throttled_then < throttled_total / 2, \
        f"the throttled copy held {throttled_then} of {throttled_total} bytes when the unthrottled one was done"

    samples = copied_over_time(two, throttled, replica_bytes(one, throttled), 120)
    rate = rate_from_a_quarter_on(samples, throttled_total)
    assert rate <= 2 * THROTTLE, f"the throttled copy went at {rate / (1 << 20):.2f} MiB/s"
    assert rate >= THROTTLE / 4, f"the throttled copy crawled at {rate / (1 << 20):.2f} MiB/s"
    assert beside_seconds < (samples[-1][0] - beside_started) / 3, (beside_seconds, samples[-1][0] - beside_started)

    # --verify reports the moves done and clears every throttle.
    def verified() -> bool:
        check = run_tool(REASSIGN_COMMAND, ["--bootstrap-server", one.bootstrap, "--verify", "--reassignment-json-file",
                                            throttled_plan], version=VERSION)
        return check.returncode == 0 and "is still in progress" not in check.stdout and "Clearing" in check.stdout
    wait_until(verified, 60, "kafka-reassign-partitions --verify to report the move done and clear the throttles",
               interval=2)
    for node_id in (1, 2, 3):
        assert not set(RATES) & set(dynamic_configs(three, "broker", str(node_id)))
    assert not {"leader.replication.throttled.replicas", "follower.replication.throttled.replicas"} \
        & set(dynamic_configs(three, "topic", throttled))

    # Unthrottled now: broker 3 copies the same partition far faster than the throttle.
    reassign(three, "--execute", "--reassignment-json-file", plan(tmp_path, "after", throttled, [1, 2, 3]))
    executed = time.monotonic()
    fast = copied_over_time(third, throttled, replica_bytes(one, throttled), 60)
    fast_seconds = fast[-1][0] - executed
    assert fast[-1][1] / fast_seconds > 3 * THROTTLE, f"{fast[-1][1]} bytes in {fast_seconds:.1f} s"

    # No acknowledged record lost, and every copy holds the same records.
    wait_until(lambda: sorted(describe(three, throttled)[0][2]) == [1, 2, 3], 60, "ISR [1, 2, 3]")
    read_all(three, beside, 1, history)
    final = read_all(three, throttled, 1, history)
    report = history.check()
    assert report.ok and report.acked == THROTTLED_RECORDS + BESIDE_RECORDS + 100, report.summary()
    for broker in (two, third):
        wait_until(lambda: log_records(broker, throttled, 1) == final, 30, f"broker {broker.bootstrap}'s copy")


@pytest.mark.timeout(300)
def test_the_follower_throttle_alone_holds_a_catching_up_replica(
        broker_factory: Callable[..., Broker], zk_connect: str) -> None:
    """Only broker 2's follower rate and the topic's follower list are set (no leader rate):
    the follower leaves the partition out of its fetches while its own measure is over."""
    three = start_three(broker_factory, zk_connect)
    one, two = broker_with_id(three, 1), broker_with_id(three, 2)
    topic = "follower-held"
    ok(bootstrap(three), "topics", "create", topic, "--replica-assignment", "1")
    history = History()
    produce_acked(three, topic, values("f", 1024), history, extra={"batch.size": VALUE_BYTES * 4, "linger.ms": 0},
                  partitions=1)
    total = replica_bytes(one, topic)
    set_configs(three, "broker", "2", {"follower.replication.throttled.rate": str(THROTTLE)})
    set_configs(three, "topic", topic, {"follower.replication.throttled.replicas": "0:2"})
    assert not set(RATES) & set(dynamic_configs(three, "broker", "1"))
    ok(bootstrap(three), "topics", "reassign", topic, "--partition", "0", "--replicas", "1,2")
    samples = copied_over_time(two, topic, total, 120)
    rate = rate_from_a_quarter_on(samples, total)
    assert THROTTLE / 4 <= rate <= 2 * THROTTLE, f"the follower copied at {rate / (1 << 20):.2f} MiB/s"
    wait_until(lambda: sorted(describe(three, topic)[0][2]) == [1, 2], 60, "ISR [1, 2]")
    final = read_all(three, topic, 1, history)
    assert history.check().ok and history.check().acked == 1024, history.check().summary()
    wait_until(lambda: log_records(two, topic, 1) == final, 30, "broker 2's copy")
