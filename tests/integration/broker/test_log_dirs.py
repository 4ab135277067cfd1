"""Log dirs (JBOD) on a real broker: two log.dirs, two workers. Apache Kafka 4.4's
kafka-log-dirs.sh (org.apache.kafka.tools.LogDirsCommand) describes them: both dirs, each
partition in the dir that holds its files, sizes that grow with what was produced, offset
lag 0 on the leader; --topic-list keeps one topic. After a restart every partition is found
again in the dir that held it, with the same size."""

from __future__ import annotations

import json
import os
import uuid
from typing import Any

import pytest

from broker.protocol import codec
from broker.protocol.build import build
from storage.records import Record, encode_batch
from tests.integration.conftest import Broker
from tests.integration.kio_client import KioClient
from tests.kafka_cli import missing_tools, run_tool

pytestmark = [pytest.mark.integration, pytest.mark.kafka_cli, pytest.mark.timeout(300)]

LOG_DIRS_COMMAND = "org.apache.kafka.tools.LogDirsCommand"  # kafka-log-dirs.sh
VERSION = "4.4.0"
PARTITIONS = 6


@pytest.fixture(autouse=True)
def kafka_tools_present() -> None:
    missing = missing_tools(VERSION)
    if missing:
        pytest.fail(f"Kafka's CLI needs {', '.join(missing)} on PATH (apt-get install default-jre-headless maven)")


def _ask(broker: Broker, key: int, version: int, body: dict[str, Any]) -> Any:
    with KioClient(broker.bootstrap) as client:
        return client.call(key, version, build(codec.request_class(key, version), body))


def _create(broker: Broker, name: str) -> None:
    answer = _ask(broker, 19, 7, {"topics": [{"name": name, "num_partitions": PARTITIONS, "replication_factor": -1,
                                              "assignments": [], "configs": []}], "timeout": 10_000})
    assert answer.topics[0].error_code == 0, answer


def _produce(broker: Broker, topic: str, partition: int, count: int) -> int:
    batch = encode_batch([Record(i, 1_700_000_000_000 + i, b"k", b"v" * 200) for i in range(count)])
    answer = _ask(broker, 0, 9, {"transactional_id": None, "acks": -1, "timeout": 10_000, "topic_data": [
        {"name": topic, "partition_data": [{"index": partition, "records": batch}]}]})
    assert answer.responses[0].partition_responses[0].error_code == 0, answer
    return len(batch)


def _tool(broker: Broker, *args: str) -> dict[str, Any]:
    done = run_tool(LOG_DIRS_COMMAND, ["--bootstrap-server", broker.bootstrap, "--describe", *args], version=VERSION)
    assert done.returncode == 0, f"stdout: {done.stdout}\nstderr: {done.stderr}"
    lines = done.stdout.strip().splitlines()
    assert lines[0] == "Querying brokers for log directories information", done.stdout
    assert lines[1] == "Received log directory information from brokers 0", done.stdout
    described: dict[str, Any] = json.loads(lines[2])
    return described


def _placement(described: dict[str, Any]) -> dict[str, tuple[str, int, int, bool]]:
    """partition name -> (log dir, size, offset lag, is future), from the tool's JSON."""
    [only] = described["brokers"]
    assert only["broker"] == 0
    return {p["partition"]: (d["logDir"], p["size"], p["offsetLag"], p["isFuture"])
            for d in only["logDirs"] for p in d["partitions"]}


def test_kafka_log_dirs_describes_both_dirs(broker_factory: Any, tmp_path: Any) -> None:
    dirs = [str(tmp_path / "jbod-a"), str(tmp_path / "jbod-b")]
    broker = broker_factory(workers=2, overrides={"log.dirs": ",".join(dirs)})
    topic, other = f"ld-{uuid.uuid4().hex[:8]}", f"ld-{uuid.uuid4().hex[:8]}"
    _create(broker, topic)
    _create(broker, other)
    sizes = {f"{topic}-{p}": _produce(broker, topic, p, 5 + p) for p in range(PARTITIONS)}

    described = _tool(broker)
    [only] = described["brokers"]
    assert sorted(d["logDir"] for d in only["logDirs"]) == dirs
    assert all(d["error"] is None for d in only["logDirs"])
    everything = _placement(described)
    mine = {f"{t}-{p}" for t in (topic, other) for p in range(PARTITIONS)}
    assert mine <= set(everything)
    placed = {name: where for name, where in everything.items() if name in mine}
    for name, (log_dir, size, lag, future) in everything.items():
        assert os.path.isdir(os.path.join(log_dir, name)), name  # the files are where it says
        assert lag == 0 and future is False
        if name in mine:
            assert size == sizes.get(name, 0), name
    # Each worker spreads its partitions over the dirs: both hold some.
    assert {log_dir for log_dir, *_ in placed.values()} == set(dirs)

    filtered = _placement(_tool(broker, "--topic-list", topic))
    assert filtered == {name: where for name, where in placed.items() if name in sizes}

    # v4 on the wire: each dir's volume bytes.
    answer = _ask(broker, 35, 4, {"topics": None})
    for result in answer.results:
        stats = os.statvfs(result.log_dir)
        assert result.error_code == 0 and result.total_bytes == stats.f_blocks * stats.f_frsize
        assert 0 < result.usable_bytes <= result.total_bytes

    broker.restart()
    again = _placement(_tool(broker))
    assert {name: where for name, where in again.items() if name in mine} == placed
