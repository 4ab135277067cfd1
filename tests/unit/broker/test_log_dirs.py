"""DescribeLogDirs on a real WorkerNode (one worker, two log dirs, real files): every dir is
listed with the partition logs it holds, their sizes as on disk, Kafka's offset lag, and the
volume's bytes from v4; the topic filter keeps only what it names (absent, not an error,
for what this broker has no log of); a dir whose volume cannot be read is
KAFKA_STORAGE_ERROR; after a restart each partition is found in the dir that held it."""

from __future__ import annotations

import asyncio
import os
import types
from typing import Any, Iterator

import pytest

import broker.apis.log_dirs  # noqa: F401  (registers DescribeLogDirs)
import broker.apis.topics  # noqa: F401  (registers CreateTopics)
from broker.config import load_config
from broker.dispatch import REGISTRY
from broker.dynamic_configs import ALTER_LOG_DIRS_RATE
from broker.links import log_dir_codec
from broker.links.rings import SharedRings
from broker.partitions.partition_ops import AppendItem, LogDirReplica, LogDirsReport
from broker.process.node import WorkerNode
from broker.protocol import codec
from broker.protocol.build import build
from coordination.file_poller import POLLER
from storage.manager import ManagerConfig, claim_log_dirs, mark_clean_shutdown
from storage.records import Record, encode_batch
from storage.types import TopicPartition

KAFKA_STORAGE_ERROR = 56


class Node:
    def __init__(self, root: str, dirs: list[str]) -> None:
        config = load_config(None, {"log.dirs": ",".join(dirs), "workers": "1", "run.dir": root})
        # As the supervisor does: claim the dirs (lock, meta.properties) before a worker opens them.
        self.claimed = claim_log_dirs(ManagerConfig.from_broker_config(config.storage_settings()))
        self.rings = SharedRings(1)
        self.node = WorkerNode(config, 0, 1, root, self.claimed.cluster_id, self.claimed.clean_shutdown, self.rings)
        self.node.open()
        self.runner = asyncio.Runner()

    def call(self, key: int, version: int, request: dict[str, Any]) -> Any:
        spec = REGISTRY[key]
        connection = types.SimpleNamespace(peer="127.0.0.1:1", listener=self.node.config.listeners.bound[0])
        ctx = types.SimpleNamespace(node=self.node, connection=connection, api_key=key, api_version=version,
                                    correlation_id=1, client_id="test")
        result = spec.handle(ctx, build(codec.request_class(key, version), request))
        if spec.is_async:
            result = self.runner.run(result)
        # What a client reads: encoded, and decoded again.
        body = codec.encode_body(result)
        back, size = codec.reader_for(codec.response_class(key, version))(body, 0)
        assert size == len(body)
        return back

    def close(self) -> None:
        self.runner.close()
        self.node.close()
        self.rings.close()
        mark_clean_shutdown(self.claimed.paths)
        self.claimed.release()


@pytest.fixture
def dirs(tmp_path: Any) -> list[str]:
    return [str(tmp_path / "d1"), str(tmp_path / "d2")]


@pytest.fixture
def node(tmp_path: Any, dirs: list[str]) -> Iterator[Node]:
    made = Node(str(tmp_path), dirs)
    yield made
    made.close()


def _create(node: Node, name: str, partitions: int) -> None:
    answer = node.call(19, 7, {"topics": [{"name": name, "num_partitions": partitions, "replication_factor": -1,
                                           "assignments": [], "configs": []}], "timeout": 1000,
                               "validate_only": False})
    assert answer.topics[0].error_code == 0, answer


def _append(node: Node, tp: TopicPartition, count: int) -> int:
    """The bytes appended: one batch, stored as sent."""
    records = [Record(i, 1_700_000_000_000 + i, b"k", b"v" * 100) for i in range(count)]
    batch = encode_batch(records)
    [result] = node.node.owner.append([AppendItem(tp, batch, 9)])
    assert result.error_code == 0, result
    return len(batch)


def _describe(node: Node, version: int, topics: list[dict[str, Any]] | None = None) -> Any:
    return node.call(35, version, {"topics": topics})


def _partitions(answer: Any) -> dict[tuple[str, int], tuple[str, Any]]:
    return {(topic.name, p.partition_index): (result.log_dir, p)
            for result in answer.results for topic in result.topics for p in topic.partitions}


@pytest.mark.parametrize("version", [1, 2, 3, 4, 5])
def test_every_dir_with_its_partitions(node: Node, dirs: list[str], version: int) -> None:
    _create(node, "spread", 4)
    sizes = {("spread", 0): _append(node, TopicPartition("spread", 0), 10),
             ("spread", 3): _append(node, TopicPartition("spread", 3), 3)}
    answer = _describe(node, version)
    assert [r.log_dir for r in answer.results] == dirs
    assert all(r.error_code == 0 for r in answer.results)
    found = _partitions(answer)
    assert sorted(found) == [("spread", p) for p in range(4)]
    # New partitions go to the dir with the fewest: two in each.
    assert sorted(sum(1 for d, _ in found.values() if d == path) for path in dirs) == [2, 2]
    for (topic, index), (log_dir, entry) in found.items():
        directory = os.path.join(log_dir, f"{topic}-{index}")
        assert os.path.isdir(directory)
        # The segments' bytes (not the preallocated length of the active segment's file).
        assert entry.partition_size == sizes.get((topic, index), 0)
        assert entry.offset_lag == 0 and entry.is_future_key is False
    for result in answer.results:
        if version >= 4:
            stats = os.statvfs(result.log_dir)
            assert result.total_bytes == stats.f_blocks * stats.f_frsize
            assert 0 < result.usable_bytes <= result.total_bytes
        else:
            assert not hasattr(result, "total_bytes")
    if version >= 3:
        assert answer.error_code == 0


def test_topic_filter(node: Node, dirs: list[str]) -> None:
    _create(node, "kept", 2)
    _create(node, "other", 2)
    answer = _describe(node, 4, [{"topic": "kept", "partitions": [1, 7]}, {"topic": "nothing", "partitions": [0]}])
    assert list(_partitions(answer)) == [("kept", 1)]  # no partition 7, no topic "nothing": absent, not errors
    assert [r.log_dir for r in answer.results] == dirs and all(r.error_code == 0 for r in answer.results)
    empty = _describe(node, 4, [])
    assert [r.log_dir for r in empty.results] == dirs and _partitions(empty) == {}
    everything = _describe(node, 4, None)
    assert sorted(_partitions(everything)) == [("kept", 0), ("kept", 1), ("other", 0), ("other", 1)]


def test_unreadable_volume_is_storage_error(node: Node, dirs: list[str]) -> None:
    _create(node, "gone", 2)
    os.rename(dirs[1], dirs[1] + ".moved")  # its volume can no longer be asked about by its path
    try:
        answer = _describe(node, 4)
        by_dir = {r.log_dir: r for r in answer.results}
        assert by_dir[dirs[1]].error_code == KAFKA_STORAGE_ERROR
        assert by_dir[dirs[1]].topics == () and by_dir[dirs[1]].total_bytes == -1
        assert by_dir[dirs[0]].error_code == 0 and len(by_dir[dirs[0]].topics) == 1
    finally:
        os.rename(dirs[1] + ".moved", dirs[1])


def test_restart_finds_each_partition_in_its_dir(tmp_path: Any, dirs: list[str]) -> None:
    first = Node(str(tmp_path), dirs)
    try:
        _create(first, "kept", 4)
        _append(first, TopicPartition("kept", 2), 5)
        before = {k: (d, p.partition_size) for k, (d, p) in _partitions(_describe(first, 4)).items()}
    finally:
        first.close()
    again = Node(str(tmp_path), dirs)
    try:
        after = {k: (d, p.partition_size) for k, (d, p) in _partitions(_describe(again, 4)).items()}
        assert after == before and len(after) == 4
    finally:
        again.close()


def test_reports_cross_the_rings_intact() -> None:
    replicas = (LogDirReplica("/data/d1", TopicPartition("t", 0), 1 << 40, 0, False),
                LogDirReplica("/data/dé2", TopicPartition("ü", 7), 0, 12, True))
    report = LogDirsReport(replicas, ("/data/d3", "/data/d4"))
    assert log_dir_codec.decode_report(memoryview(b"".join(log_dir_codec.encode_report(report)))) == report
    empty = LogDirsReport((), ())
    assert log_dir_codec.decode_report(b"".join(log_dir_codec.encode_report(empty))) == empty
    assert log_dir_codec.decode_failed(b"".join(log_dir_codec.encode_failed("/data/dé2"))) == "/data/dé2"


def test_a_move_shows_its_future_log_until_swapped_in(node: Node, dirs: list[str]) -> None:
    _create(node, "moving", 1)
    tp = TopicPartition("moving", 0)
    _append(node, tp, 10)
    here = node.node.logs.log_dir_of(tp)
    there = dirs[1] if here == dirs[0] else dirs[0]
    answer = node.call(34, 2, {"dirs": [{"path": there, "topics": [{"name": "moving", "partitions": [0]}]}]})
    assert [(t.topic_name, p.partition_index, p.error_code) for t in answer.results for p in t.partitions] == [
        ("moving", 0, 0)]
    # Nothing copied yet (the worker's housekeeping copies): the future log lags by the whole log.
    entries = sorted((r.log_dir, p.is_future_key, p.offset_lag) for r in _describe(node, 4).results
                     for t in r.topics for p in t.partitions)
    assert entries == sorted([(here, False, 0), (there, True, 10)])
    _append(node, tp, 5)  # still serving
    assert node.node.logs.move_future_logs(1 << 20) == [tp]
    entries = [(r.log_dir, p.is_future_key, p.partition_size) for r in _describe(node, 4).results
               for t in r.topics for p in t.partitions]
    assert len(entries) == 1 and entries[0][:2] == (there, False) and entries[0][2] > 0
    assert node.node.owner.log_for(tp).log_end_offset == 15


def test_a_move_starts_under_the_throttle_another_worker_set_just_before(node: Node, dirs: list[str]) -> None:
    """kafka-reassign-partitions sets replica.alter.log.dirs.io.max.bytes.per.second and then
    sends AlterReplicaLogDirs, maybe to another worker than the one that wrote the throttle.
    The owner must hold the copy from its first tick: it reads the configs again before the
    move starts, not when its file watch comes round (suites saw 10 MB copied at once under
    1 MiB/s)."""
    _create(node, "moving", 1)
    tp = TopicPartition("moving", 0)
    _append(node, tp, 10)
    here = node.node.logs.log_dir_of(tp)
    there = dirs[1] if here == dirs[0] else dirs[0]
    store = node.node.dynamic_configs.store
    throttles = node.node.replication_throttles
    assert throttles.alter_log_dirs_bound is None
    with POLLER._round:  # no file watch runs meanwhile: the write below is seen only if read again
        # Another worker's IncrementalAlterConfigs: the store is written, this worker is not told.
        store.update(node.node.dynamic_configs.entity, lambda configs: {**configs, ALTER_LOG_DIRS_RATE: "1048576"})
        answer = node.call(34, 2, {"dirs": [{"path": there, "topics": [{"name": "moving", "partitions": [0]}]}]})
        assert [p.error_code for t in answer.results for p in t.partitions] == [0]
        assert throttles.alter_log_dirs_bound == 1048576
