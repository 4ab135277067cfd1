"""Replication throttles: the shared rates across real forked processes, which partitions a
throttled-replicas list names for a broker, and the dynamic rate configs' validation."""

from __future__ import annotations

import os

import pytest

from broker.config import load_config
from broker.dynamic_configs import DYNAMIC, InvalidBrokerConfig, validate
from broker.partitions.replication_throttle import (
    ALL,
    FOLLOWER_REPLICAS,
    LEADER_REPLICAS,
    ReplicationThrottles,
    throttled_partitions,
)
from broker.quotas.replication_rates import ALTER_LOG_DIRS, FOLLOWER, LEADER, ReplicationRates, windows_of
from storage.config import LONG_MAX, LogConfig
from storage.manager import LogManager, ManagerConfig
from storage.records import Record, encode_batch
from storage.types import TopicPartition

WINDOWS = ((11, 1000), (11, 1000), (11, 1000))


def test_every_workers_bytes_count_towards_one_broker_rate() -> None:
    """Two forked workers record into their own tables; either reads the sum."""
    rates = ReplicationRates(2, WINDOWS)
    try:
        now = 1_000_000_000
        pid = os.fork()
        if pid == 0:  # worker 1
            rates.bind(1)
            rates.record(LEADER, 3_000_000, now)
            os._exit(0)
        _pid, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        rates.bind(0)
        rates.record(LEADER, 1_000_000, now)
        # SimpleRate: one window at least, so 4 MB recorded within one second is 4 MB/s.
        assert rates.rate(LEADER, now + 500) == pytest.approx(4_000_000)
        assert rates.rate(FOLLOWER, now + 500) == 0.0  # the measures are apart
        # Over more time the same bytes are a lower rate; after the samples' span, none.
        assert rates.rate(LEADER, now + 4000) == pytest.approx(1_000_000)
        assert rates.rate(LEADER, now + 12_000) == 0.0
    finally:
        rates.close()


def test_a_stale_sample_is_restarted_by_its_writer() -> None:
    rates = ReplicationRates(1, WINDOWS)
    try:
        rates.record(FOLLOWER, 5_000, 0 + 11_000 * 1000)
        # Eleven windows later the same slot holds a new sample: the old bytes are gone.
        rates.record(FOLLOWER, 1_000, 11_000 * 1000 + 11_000)
        assert rates.rate(FOLLOWER, 11_000 * 1000 + 11_000) == pytest.approx(1_000)
    finally:
        rates.close()


def test_a_throttled_replicas_list_names_the_partitions_of_this_broker() -> None:
    # Kafka's parseThrottledPartitions: the entries whose broker is this one.
    assert throttled_partitions("0:101,1:102,2:101", 101) == {0, 2}
    assert throttled_partitions("0:101,1:102", 103) == frozenset()
    assert throttled_partitions(" * ", 103) is ALL
    assert throttled_partitions("", 1) == frozenset()


def test_a_side_is_throttled_only_with_a_rate_and_listed_partitions() -> None:
    configs = {"moving": {LEADER_REPLICAS: "0:1,1:2", FOLLOWER_REPLICAS: "0:3"}, "all": {LEADER_REPLICAS: "*"},
               "plain": {}}
    rates = ReplicationRates(1, WINDOWS)
    try:
        settings = {"leader.replication.throttled.rate": LONG_MAX, "follower.replication.throttled.rate": LONG_MAX,
                    "replica.alter.log.dirs.io.max.bytes.per.second": LONG_MAX}
        throttles = ReplicationThrottles(1, rates, configs.get)
        changes = []
        throttles.on_change = lambda: changes.append(1)
        throttles.set_rates(settings.__getitem__)
        assert (throttles.leader, throttles.follower, throttles.alter_log_dirs_bound) == (None, None, None)
        settings["leader.replication.throttled.rate"] = 1000
        throttles.set_rates(settings.__getitem__)
        assert throttles.follower is None and changes == [1, 1]
        leader = throttles.leader
        assert leader is not None
        assert leader.throttled(TopicPartition("moving", 0))
        assert not leader.throttled(TopicPartition("moving", 1))  # listed for broker 2
        assert leader.throttled(TopicPartition("all", 7))
        assert not leader.throttled(TopicPartition("plain", 0))
        assert not leader.throttled(TopicPartition("unknown", 0))
        assert not leader.exceeded()
        leader.record(5_000)
        assert leader.exceeded()  # 5,000 bytes in the first window: 5,000 B/s > 1,000
    finally:
        rates.close()


def test_the_log_dir_copy_is_held_to_its_rate(tmp_path) -> None:
    """A real future log (AlterReplicaLogDirs) copied tick by tick: unthrottled, all at once;
    throttled, about the bound's worth a tick, then nothing while the measured rate is over."""
    dirs = (str(tmp_path / "d1"), str(tmp_path / "d2"))
    logs = LogManager(ManagerConfig(log_dirs=dirs, node_id=1), LogConfig(segment_bytes=64 * 1024)).open()
    rates = ReplicationRates(1, WINDOWS)
    try:
        tp = TopicPartition("moving", 0)
        logs.create_log(tp)
        for index in range(40):  # 40 batches of about 10 KiB
            logs.get_log(tp).append(encode_batch([Record(0, 1_000, b"k", bytes([index]) * 10_000)]))
        size = logs.get_log(tp).size_in_bytes
        throttles = ReplicationThrottles(1, rates, lambda _topic: None)
        settings = {"leader.replication.throttled.rate": LONG_MAX, "follower.replication.throttled.rate": LONG_MAX,
                    "replica.alter.log.dirs.io.max.bytes.per.second": 40_000}
        throttles.set_rates(settings.__getitem__)
        logs.start_move(tp, dirs[1])
        copied = []
        for _tick in range(4):
            throttles.copy_future_logs(logs, 16 << 20, 0.5)
            copied.append(logs.futures[tp].log.size_in_bytes)
        # Two ticks of 20,000 bytes (two whole batches each) reach the bound; over it, nothing more.
        assert 35_000 < copied[1] < 45_000 and copied[1] == copied[2] == copied[3], copied
        assert rates.rate(ALTER_LOG_DIRS) == pytest.approx(copied[1], rel=0.01)
        # Unthrottled (the bound deleted): the rest in one tick, and the future log swapped in.
        settings["replica.alter.log.dirs.io.max.bytes.per.second"] = LONG_MAX
        throttles.set_rates(settings.__getitem__)
        throttles.copy_future_logs(logs, 16 << 20, 0.5)
        assert tp not in logs.futures and logs.log_dir_of(tp) == dirs[1] and logs.get_log(tp).size_in_bytes == size
    finally:
        rates.close()
        logs.close()


def test_the_rates_are_dynamic_broker_configs_with_kafkas_bounds() -> None:
    names = ("leader.replication.throttled.rate", "follower.replication.throttled.rate",
             "replica.alter.log.dirs.io.max.bytes.per.second")
    assert set(names) <= DYNAMIC
    assert validate({name: "1048576" for name in names})
    with pytest.raises(InvalidBrokerConfig, match="Invalid value -1"):
        validate({"leader.replication.throttled.rate": "-1"})
    with pytest.raises(InvalidBrokerConfig, match="Invalid value fast"):
        validate({"follower.replication.throttled.rate": "fast"})
    # Unbounded unless set, as Kafka's Long.MAX_VALUE default; the windows are Kafka's.
    config = load_config(None, {})
    assert all(config.value(name) == LONG_MAX for name in names)
    assert windows_of(config.get_int) == ((11, 1000), (11, 1000), (11, 1000))
