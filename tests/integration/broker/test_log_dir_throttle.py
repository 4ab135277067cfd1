"""replica.alter.log.dirs.io.max.bytes.per.second on a real broker with two log dirs and two
workers: Kafka 4.4's kafka-reassign-partitions --replica-alter-log-dirs-throttle sets it, a
replica's move between dirs then copies at about that rate, --verify clears it, and the move
back goes at full speed."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from storage.records import Record, encode_batch
from tests.integration.broker.test_log_dirs import _ask, _reassign
from tests.integration.conftest import Broker, wait_until
from tests.kafka_cli import missing_tools

pytestmark = [pytest.mark.integration, pytest.mark.kafka_cli, pytest.mark.timeout(300)]

VERSION = "4.4.0"
THROTTLE = 1 << 20  # bytes/s
BATCHES = 20  # of 50 records of 10 KiB: about 10 MiB
ALTER_LOG_DIRS_RATE = "replica.alter.log.dirs.io.max.bytes.per.second"


def copies(broker: Broker, topic: str) -> dict[tuple[str, bool], int]:
    """(log dir, is future) -> size of each copy of partition 0, as DescribeLogDirs answers."""
    described = _ask(broker, 35, 4, {"topics": [{"topic": topic, "partitions": [0]}]})
    return {(r.log_dir, p.is_future_key): p.partition_size for r in described.results for t in r.topics
            for p in t.partitions}


def broker_configs(broker: Broker) -> dict[str, str]:
    return {c.name: c.value for c in _described(broker)}


def _described(broker: Broker) -> Any:
    answer = _ask(broker, 32, 4, {"resources": [{"resource_type": 4, "resource_name": "0", "configuration_keys": None}],
                                  "include_synonyms": False, "include_documentation": True})
    return answer.results[0].configs


def move(broker: Broker, tmp_path: Any, topic: str, target: str, *throttle: str) -> tuple[int, float]:
    """Move partition 0 into ``target`` with kafka-reassign-partitions: the bytes the future log
    copied after the tool returned, and the seconds that took."""
    plan_file = tmp_path / f"plan-{time.monotonic_ns()}.json"
    plan_file.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "replicas": [0], "log_dirs": [target]}]}))
    _reassign(broker, "--execute", "--reassignment-json-file", str(plan_file), *throttle)
    started = time.monotonic()
    seen = copies(broker, topic)
    size = next(size for (_dir, future), size in seen.items() if not future)
    copied_before = seen.get((target, True), size if (target, False) in seen else 0)
    wait_until(lambda: set(copies(broker, topic)) == {(target, False)}, 60, f"the replica in {target}", interval=0.1)
    seconds = time.monotonic() - started
    if throttle:
        assert broker_configs(broker)[ALTER_LOG_DIRS_RATE] == str(THROTTLE)
    verified = _reassign(broker, "--verify", "--reassignment-json-file", str(plan_file))
    assert "Clearing broker-level throttles" in verified, verified
    return size - copied_before, seconds


def test_a_move_between_log_dirs_is_held_to_the_alter_log_dirs_throttle(broker_factory: Any, tmp_path: Any) -> None:
    missing = missing_tools(VERSION)
    if missing:
        pytest.fail(f"Kafka's CLI needs {', '.join(missing)} on PATH (apt-get install default-jre-headless maven)")
    dirs = [str(tmp_path / "dir-a"), str(tmp_path / "dir-b")]
    broker = broker_factory(workers=2, overrides={"log.dirs": ",".join(dirs)})
    topic = "moved"
    created = _ask(broker, 19, 7, {"topics": [{"name": topic, "num_partitions": 1, "replication_factor": -1,
                                               "assignments": [], "configs": []}], "timeout": 10_000})
    assert created.topics[0].error_code == 0, created
    size = 0
    for index in range(BATCHES):
        batch = encode_batch([Record(i, 1_700_000_000_000 + i, b"k", bytes([index]) * 10240) for i in range(50)])
        answer = _ask(broker, 0, 9, {"transactional_id": None, "acks": -1, "timeout": 10_000, "topic_data": [
            {"name": topic, "partition_data": [{"index": 0, "records": batch}]}]})
        assert answer.responses[0].partition_responses[0].error_code == 0, answer
        size += len(batch)
    ((home, _future),) = copies(broker, topic)
    other = dirs[1] if home == dirs[0] else dirs[0]

    copied, throttled = move(broker, tmp_path, topic, other, "--replica-alter-log-dirs-throttle", str(THROTTLE))
    assert copied > size / 2, f"{copied} of {size} bytes left to copy when kafka-reassign-partitions returned"
    rate = copied / throttled
    assert THROTTLE / 4 <= rate <= 2 * THROTTLE, f"{copied} bytes moved in {throttled:.1f} s under {THROTTLE} B/s"
    # --verify cleared it: the broker runs with Kafka's default again (unbounded), a dynamic LONG.
    (entry,) = [c for c in _described(broker) if c.name == ALTER_LOG_DIRS_RATE]
    assert (entry.value, entry.config_type, entry.read_only) == (str((1 << 63) - 1), 5, False)
    assert entry.documentation.startswith("A long representing the upper bound (bytes/sec) on disk IO"), entry
    _copied, free = move(broker, tmp_path, topic, home)
    assert free < throttled / 4, f"unthrottled {free:.1f} s, throttled {throttled:.1f} s"
