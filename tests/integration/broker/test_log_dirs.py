"""Log dirs (JBOD) on a real broker: two log.dirs, two workers. Apache Kafka 4.4's
kafka-log-dirs.sh (org.apache.kafka.tools.LogDirsCommand) describes them: both dirs, each
partition in the dir that holds its files, sizes that grow with what was produced, offset
lag 0 on the leader; --topic-list keeps one topic. After a restart every partition is found
again in the dir that held it, with the same size."""

from __future__ import annotations

import json
import os
import time
import uuid
from typing import Any

import pytest

from broker.protocol import codec
from broker.protocol.build import build
from storage.records import Record, encode_batch
from tests.integration.conftest import Broker, start_cluster_broker, stop_all, wait_until
from tests.integration.kio_client import KioClient
from tests.kafka_cli import missing_tools, run_tool

pytestmark = [pytest.mark.integration, pytest.mark.kafka_cli, pytest.mark.timeout(300)]

LOG_DIRS_COMMAND = "org.apache.kafka.tools.LogDirsCommand"  # kafka-log-dirs.sh
VERSION = "4.4.0"
PARTITIONS = 6
KAFKA_STORAGE_ERROR = 56


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


# ---------------------------------------------------------------------- a failed log dir
class TinyDirBroker(Broker):
    """A broker whose second log dir is a 4 MiB tmpfs of its own mount namespace: the first
    append there cannot reserve its segment's space (ENOSPC), a real I/O error."""

    def __init__(self, base_dir: str, workers: int, overrides: dict[str, Any], tiny: str) -> None:
        super().__init__(base_dir, workers, overrides)
        self.tiny = tiny

    def command(self) -> list[str]:
        mount = 'mount -t tmpfs -o size=4m tmpfs "$0" && exec "$@"'
        return ["unshare", "--mount", "--propagation", "private", "sh", "-c", mount, self.tiny, *super().command()]


def _produce_code(broker: Broker, topic: str, partition: int) -> int:
    batch = encode_batch([Record(0, 1_700_000_000_000, b"k", b"v" * 200)])
    answer = _ask(broker, 0, 9, {"transactional_id": None, "acks": 1, "timeout": 10_000, "topic_data": [
        {"name": topic, "partition_data": [{"index": partition, "records": batch}]}]})
    return int(answer.responses[0].partition_responses[0].error_code)


def _fetch_code(broker: Broker, topic: str, partition: int) -> int:
    answer = _ask(broker, 1, 4, {"max_wait": 0, "min_bytes": 0, "topics": [
        {"topic": topic, "partitions": [{"partition": partition, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}]})
    return int(answer.responses[0].partitions[0].error_code)


def test_a_failed_dir_takes_only_its_partitions_offline(tmp_path: Any) -> None:
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs in a mount namespace needs root")
    big, tiny = str(tmp_path / "big"), str(tmp_path / "tiny")
    os.makedirs(big)
    os.makedirs(tiny)
    base = str(tmp_path / "broker")
    os.makedirs(base)
    broker = TinyDirBroker(base, 2, {"log.dirs": f"{big},{tiny}", "offsets.topic.num.partitions": 2,
                                     "transaction.state.log.num.partitions": 2,
                                     "share.coordinator.state.topic.num.partitions": 2}, tiny)
    try:
        broker.start()
        topic = f"ld-{uuid.uuid4().hex[:8]}"
        _create(broker, topic)
        before = _ask(broker, 35, 4, {"topics": [{"topic": topic, "partitions": list(range(PARTITIONS))}]})
        by_dir = {r.log_dir: r for r in before.results}
        assert by_dir[tiny].total_bytes == 4 << 20  # the namespace's tmpfs, not the host's disk
        placed = {p.partition_index: r.log_dir for r in before.results for t in r.topics for p in t.partitions}
        on_tiny = sorted(p for p, d in placed.items() if d == tiny)
        on_big = sorted(p for p, d in placed.items() if d == big)
        # Partition p is written by worker p % 2; each worker spreads its own over both dirs.
        assert {p % 2 for p in on_tiny} == {0, 1} and {p % 2 for p in on_big} == {0, 1}, placed

        first, *others = on_tiny
        assert _produce_code(broker, topic, first) == KAFKA_STORAGE_ERROR
        # The whole dir is offline, in both workers (the other is told over the rings) ...
        for partition in others:
            wait_until(lambda: _produce_code(broker, topic, partition) == KAFKA_STORAGE_ERROR, 10,
                       f"partition {partition} on the failed dir refused")
            assert _fetch_code(broker, topic, partition) == KAFKA_STORAGE_ERROR
        # ... and only it: the other dir's partitions keep taking and serving records.
        for partition in on_big:
            assert _produce_code(broker, topic, partition) == 0
            assert _fetch_code(broker, topic, partition) == 0

        after = _ask(broker, 35, 4, {"topics": None})
        by_dir = {r.log_dir: r for r in after.results}
        assert by_dir[tiny].error_code == KAFKA_STORAGE_ERROR and by_dir[tiny].topics == ()
        assert by_dir[tiny].total_bytes == -1 and by_dir[tiny].usable_bytes == -1
        assert by_dir[big].error_code == 0
        assert {p.partition_index for t in by_dir[big].topics if t.name == topic for p in t.partitions} == set(on_big)

        described = _tool(broker, "--topic-list", topic)
        dirs = {d["logDir"]: d for d in described["brokers"][0]["logDirs"]}
        assert dirs[tiny]["error"] is not None and "KafkaStorageException" in dirs[tiny]["error"], dirs[tiny]
        assert dirs[big]["error"] is None
    finally:
        unclean = stop_all([broker])
    assert not unclean, unclean


# ---------------------------------------------------------------------- moving replicas between dirs
REASSIGN_COMMAND = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"  # kafka-reassign-partitions.sh
LOG_DIR_NOT_FOUND, UNKNOWN_TOPIC_OR_PARTITION = 57, 3


def _reassign(broker: Broker, *args: str) -> str:
    done = run_tool(REASSIGN_COMMAND, ["--bootstrap-server", broker.bootstrap, *args], version=VERSION)
    assert done.returncode == 0, f"stdout: {done.stdout}\nstderr: {done.stderr}"
    return done.stdout


def _records(broker: Broker, topic: str, partition: int) -> int:
    """How many records a consumer reads from the start of the partition (Fetch v4, raw)."""
    from storage.records import iter_batches
    count, offset = 0, 0
    while True:
        answer = _ask(broker, 1, 4, {"max_wait": 0, "min_bytes": 0, "topics": [
            {"topic": topic, "partitions": [{"partition": partition, "fetch_offset": offset,
                                             "partition_max_bytes": 1 << 20}]}]})
        data = answer.responses[0].partitions[0]
        assert data.error_code == 0, data
        if not data.records:
            return count
        for header, records in iter_batches(bytes(data.records)):
            count += len(records)
            offset = header.next_offset


def test_kafka_reassign_partitions_moves_replicas_between_dirs(broker_factory: Any, tmp_path: Any) -> None:
    dirs = [str(tmp_path / "move-a"), str(tmp_path / "move-b")]
    broker = broker_factory(workers=2, overrides={"log.dirs": ",".join(dirs)})
    topic = f"mv-{uuid.uuid4().hex[:8]}"
    _create(broker, topic)
    for partition in range(PARTITIONS):
        for _ in range(20):
            _produce(broker, topic, partition, 50)
    where = {p.partition_index: r.log_dir for r in _ask(broker, 35, 4, {"topics": None}).results
             for t in r.topics if t.name == topic for p in t.partitions}
    target = {p: dirs[1] if where[p] == dirs[0] else dirs[0] for p in range(PARTITIONS)}  # each to the other dir
    plan = {"version": 1, "partitions": [{"topic": topic, "partition": p, "replicas": [0], "log_dirs": [target[p]]}
                                         for p in range(PARTITIONS)]}
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps(plan))
    out = _reassign(broker, "--execute", "--reassignment-json-file", str(plan_file))
    for partition in range(PARTITIONS):
        assert (f"Successfully started moving log directory to {target[partition]} for replica {topic}-{partition} "
                "with broker 0") in out, out

    # It keeps taking and serving records meanwhile.
    for partition in range(PARTITIONS):
        _produce(broker, topic, partition, 10)

    def moved() -> bool:
        described = _ask(broker, 35, 4, {"topics": [{"topic": topic, "partitions": list(range(PARTITIONS))}]})
        seen = {(p.partition_index, r.log_dir, p.is_future_key) for r in described.results for t in r.topics
                for p in t.partitions}
        return seen == {(p, target[p], False) for p in range(PARTITIONS)}

    wait_until(moved, 30, "every partition in its new dir, no future logs left")
    verified = _reassign(broker, "--verify", "--reassignment-json-file", str(plan_file))
    for partition in range(PARTITIONS):
        assert f"Reassignment of replica {topic}-{partition}-0 completed successfully." in verified, verified
    for partition in range(PARTITIONS):
        assert not os.path.exists(os.path.join(where[partition], f"{topic}-{partition}"))
        assert os.path.isdir(os.path.join(target[partition], f"{topic}-{partition}"))
        assert _records(broker, topic, partition) == 20 * 50 + 10
    broker.restart()
    assert moved()
    assert all(_records(broker, topic, p) == 20 * 50 + 10 for p in range(PARTITIONS))


def test_alter_replica_log_dirs_bad_input(broker_factory: Any, tmp_path: Any) -> None:
    dirs = [str(tmp_path / "bad-a"), str(tmp_path / "bad-b")]
    broker = broker_factory(workers=2, overrides={"log.dirs": ",".join(dirs)})
    topic = f"bad-{uuid.uuid4().hex[:8]}"
    _create(broker, topic)
    where = {p.partition_index: r.log_dir for r in _ask(broker, 35, 4, {"topics": None}).results
             for t in r.topics if t.name == topic for p in t.partitions}
    other = dirs[1] if where[0] == dirs[0] else dirs[0]
    answer = _ask(broker, 34, 2, {"dirs": [
        {"path": str(tmp_path / "nowhere"), "topics": [{"name": topic, "partitions": [1]}]},
        {"path": other, "topics": [{"name": topic, "partitions": [0, 99]}, {"name": "no-such-topic", "partitions": [0]}]},
    ]})
    codes = {(t.topic_name, p.partition_index): p.error_code for t in answer.results for p in t.partitions}
    assert codes == {(topic, 1): LOG_DIR_NOT_FOUND, (topic, 0): 0, (topic, 99): UNKNOWN_TOPIC_OR_PARTITION,
                     ("no-such-topic", 0): UNKNOWN_TOPIC_OR_PARTITION}
    wait_until(lambda: os.path.isdir(os.path.join(other, f"{topic}-0")), 10, "partition 0 moved")
    # Nothing else moved: partition 1 stayed where it was.
    assert os.path.isdir(os.path.join(where[1], f"{topic}-1"))


# ---------------------------------------------------------------------- a failed dir in a cluster
def _metadata_leaders(broker: Broker, topic: str) -> dict[int, tuple[int, list[int]]]:
    answer = _ask(broker, 3, 12, {"topics": [{"name": topic, "topic_id": None}], "allow_auto_topic_creation": False,
                                  "include_topic_authorized_operations": False})
    [found] = answer.topics
    return {p.partition_index: (int(p.leader_id), [int(b) for b in p.isr_nodes]) for p in found.partitions}


@pytest.mark.zookeeper
def test_a_failed_dir_hands_its_leaderships_to_the_other_broker(broker_factory: Any, zk_connect: str,
                                                                tmp_path: Any, request: Any) -> None:
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs in a mount namespace needs root")
    settings = {"zookeeper.connect": zk_connect, "zookeeper.session.timeout.ms": 4000,
                "offsets.topic.num.partitions": 2, "transaction.state.log.num.partitions": 2,
                "share.coordinator.state.topic.num.partitions": 2}
    steady = start_cluster_broker(broker_factory, zk_connect, 0, workers=2, settings=settings)
    big, tiny = str(tmp_path / "n1-big"), str(tmp_path / "n1-tiny")
    os.makedirs(big)
    os.makedirs(tiny)
    base = str(tmp_path / "n1")
    os.makedirs(base)
    failing = TinyDirBroker(base, 2, {**settings, "node.id": 1, "log.dirs": f"{tiny},{big}"}, tiny)
    request.node._castle_brokers.append(failing)  # its stderr goes into a failed test's report
    try:
        failing.start()
        wait_until(lambda: len(_ask(steady, 3, 12, {"topics": None, "allow_auto_topic_creation": False,
                                                     "include_topic_authorized_operations": False}).brokers) == 2,
                   20, "both brokers registered")
        chosen = None
        for _attempt in range(5):
            topic = f"ldc-{uuid.uuid4().hex[:8]}"
            answer = _ask(steady, 19, 7, {"topics": [{"name": topic, "num_partitions": 8, "replication_factor": 2,
                                                       "assignments": [], "configs": []}], "timeout": 10_000})
            assert answer.topics[0].error_code == 0, answer
            wait_until(lambda: all(len(isr) == 2
                                   for _leader, isr in _metadata_leaders(steady, topic).values()), 20, "ISRs full")
            leaders = _metadata_leaders(failing, topic)
            described = _ask(failing, 35, 4, {"topics": [{"topic": topic, "partitions": list(range(8))}]})
            on_tiny = {p.partition_index for r in described.results if r.log_dir == tiny for t in r.topics
                       for p in t.partitions}
            candidates = sorted(p for p in on_tiny if leaders[p][0] == 1)
            if candidates:
                chosen = (topic, candidates, leaders)
                break
        assert chosen is not None, "no partition led by broker 1 had its log in the tiny dir"
        topic, candidates, leaders = chosen
        partition = candidates[0]
        assert _produce_code(failing, topic, partition) == KAFKA_STORAGE_ERROR
        # Broker 1's replicas in the failed dir leave their ISRs; their leaderships go to broker 0.
        wait_until(lambda: all(_metadata_leaders(steady, topic)[p] == (0, [0]) for p in candidates), 20,
                   f"partitions {candidates} led by broker 0 alone")
        # Broker 1's offline replicas fetch no more (Kafka drops them from its fetchers): one
        # fetching at its old log end, level with the new leader's, would look caught up and
        # rejoin the ISR within a fetch round or two (replica.fetch.wait.max.ms, 500 ms).
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            now = _metadata_leaders(steady, topic)
            assert all(now[p] == (0, [0]) for p in candidates), now
            time.sleep(0.1)
        for p in candidates:
            wait_until(lambda p=p: _produce_code(steady, topic, p) == 0, 10, f"broker 0 takes records for {p}")
        # The partitions broker 1 leads from its healthy dir stay with it.
        described = _ask(failing, 35, 4, {"topics": [{"topic": topic, "partitions": list(range(8))}]})
        by_dir = {r.log_dir: r for r in described.results}
        assert by_dir[tiny].error_code == KAFKA_STORAGE_ERROR and by_dir[big].error_code == 0
        for p in (p for t in by_dir[big].topics for p in (q.partition_index for q in t.partitions)):
            if leaders[p][0] == 1:
                assert _metadata_leaders(steady, topic)[p][0] == 1
                assert _produce_code(failing, topic, p) == 0
    finally:
        unclean = stop_all([failing])
    assert not unclean, unclean
