"""LogManager with real dirs: open/close, checkpoints, clean shutdown, locks, topics."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

from storage import checkpoint, files
from storage.config import LogConfig
from storage.errors import LogDirLockedError, StorageError
from storage.manager import LogManager, ManagerConfig
from storage.releaser import RELEASER
from storage.types import TopicPartition
from tests.unit.storage.helpers import batch, read_all

A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b-with-dash", 0)


def _manager(tmp_path, **kwargs) -> LogManager:
    dirs = (str(tmp_path / "d1"), str(tmp_path / "d2"))
    return LogManager(ManagerConfig(log_dirs=dirs, node_id=1), LogConfig(segment_bytes=16 * 1024, **kwargs)).open()


def test_logs_spread_over_dirs_and_reopen_after_a_clean_close(tmp_path):
    manager = _manager(tmp_path)
    for tp in (A0, A1, B0):
        manager.create_log(tp).append(batch(count=3))
    assert {os.path.basename(os.path.dirname(lg.directory)) for lg in manager.logs.values()} == {"d1", "d2"}
    manager.close()
    for d in ("d1", "d2"):
        assert os.path.exists(tmp_path / d / files.CLEAN_SHUTDOWN_FILE)
        assert checkpoint.read_meta_properties(tmp_path / d)["node.id"] == "1"
    points = {}
    for d in ("d1", "d2"):
        points.update(checkpoint.read_offset_checkpoint(tmp_path / d / checkpoint.RECOVERY_POINT_CHECKPOINT))
    assert points == {A0: 3, A1: 3, B0: 3}
    reopened = _manager(tmp_path)
    assert set(reopened.logs) == {A0, A1, B0}
    assert all(lg.log_end_offset == 3 for lg in reopened.logs.values())
    assert not os.path.exists(tmp_path / "d1" / files.CLEAN_SHUTDOWN_FILE)  # a crash now is unclean
    reopened.close()


def test_a_second_process_cannot_open_the_same_dirs(tmp_path):
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    holder = textwrap.dedent(
        f"""
        from storage.manager import LogManager, ManagerConfig
        m = LogManager(ManagerConfig(log_dirs=({str(tmp_path / 'd1')!r},))).open()
        print("open", flush=True)
        input()
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", holder], cwd=root, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True, env={**os.environ, "PYTHONPATH": root})
    try:
        assert proc.stdout.readline().strip() == "open"
        with pytest.raises(LogDirLockedError, match=str(proc.pid)):
            LogManager(ManagerConfig(log_dirs=(str(tmp_path / "d1"),))).open()
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        proc.stdin.close()
        proc.stdout.close()
    manager = LogManager(ManagerConfig(log_dirs=(str(tmp_path / "d1"),))).open()
    manager.close()


def test_a_dir_of_another_node_is_refused(tmp_path):
    _manager(tmp_path).close()
    with pytest.raises(StorageError, match="node.id"):
        LogManager(ManagerConfig(log_dirs=(str(tmp_path / "d1"),), node_id=2)).open()


def test_kill_9_of_a_manager_process_recovers_every_acknowledged_record(tmp_path):
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    writer = textwrap.dedent(
        f"""
        from storage.config import LogConfig
        from storage.manager import LogManager, ManagerConfig
        from storage.types import TopicPartition
        from tests.unit.storage.helpers import batch
        m = LogManager(ManagerConfig(log_dirs=({str(tmp_path / 'd1')!r},)), LogConfig(segment_bytes=32768)).open()
        logs = [m.create_log(TopicPartition("t", p)) for p in range(3)]
        i = 0
        while True:
            info = logs[i % 3].append(batch(count=2, value_size=300))
            print(i % 3, info.last_offset, flush=True)
            i += 1
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", writer], cwd=root, stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": root})
    acked = {}
    try:
        for _ in range(600):
            partition, offset = map(int, proc.stdout.readline().split())
            acked[partition] = offset
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        proc.stdout.close()
    manager = LogManager(ManagerConfig(log_dirs=(str(tmp_path / "d1"),)), LogConfig(segment_bytes=32768)).open()
    for partition, offset in acked.items():
        log = manager.get_log(TopicPartition("t", partition))
        assert log.log_end_offset >= offset + 1
        assert [r.offset for r in read_all(log)] == list(range(log.log_end_offset))
    manager.close()


def test_delete_log_removes_the_partition(tmp_path):
    manager = _manager(tmp_path)
    log = manager.create_log(A0)
    log.append(batch())
    directory = log.directory
    manager.delete_log(A0)
    assert RELEASER.drain(timeout_s=10)  # checkpoints and deletions run on the releaser thread
    assert manager.get_log(A0) is None
    assert not os.path.exists(directory)
    assert not [n for n in os.listdir(os.path.dirname(directory)) if n.endswith(files.DELETE_DIR_SUFFIX)]
    manager.close()


def test_delete_logs_removes_many_partitions_and_their_checkpoint_entries(tmp_path):
    manager = _manager(tmp_path)
    for tp in (A0, A1, B0):
        manager.create_log(tp).append(batch(count=2))
    manager.checkpoint_recovery_points()
    directories = [manager.get_log(tp).directory for tp in (A0, A1)]
    manager.delete_logs([A0, A1, TopicPartition("never", 0)])  # an unknown partition is skipped
    assert RELEASER.drain(timeout_s=10)  # checkpoints and deletions run on the releaser thread
    assert set(manager.logs) == {B0}
    assert not any(os.path.exists(d) for d in directories)
    for name in (checkpoint.RECOVERY_POINT_CHECKPOINT, checkpoint.LOG_START_OFFSET_CHECKPOINT):
        entries = {}
        for d in ("d1", "d2"):
            entries.update(checkpoint.read_offset_checkpoint(tmp_path / d / name))
        assert set(entries) == {B0}, name
    manager.close()
    reopened = _manager(tmp_path)
    assert set(reopened.logs) == {B0}
    reopened.close()


def test_a_late_periodic_checkpoint_does_not_bring_back_a_deleted_partition(tmp_path):
    """Periodic checkpoints are written on the releaser thread, maybe after a topic was
    deleted: they take their values when they write, not when they were asked for."""
    import threading

    manager = _manager(tmp_path)
    for tp in (A0, B0):
        manager.create_log(tp).append(batch(count=2))
    gate = threading.Event()
    RELEASER.submit(gate.wait, 30)
    try:
        manager.checkpoint_recovery_points(in_background=True)  # queued behind the gate
        manager.delete_logs([A0])  # writes its checkpoints at once
        entries = {}
        for d in ("d1", "d2"):
            entries.update(checkpoint.read_offset_checkpoint(tmp_path / d / checkpoint.RECOVERY_POINT_CHECKPOINT))
        assert set(entries) == {B0}
    finally:
        gate.set()
    assert RELEASER.drain(timeout_s=10)
    entries = {}
    for d in ("d1", "d2"):
        entries.update(checkpoint.read_offset_checkpoint(tmp_path / d / checkpoint.RECOVERY_POINT_CHECKPOINT))
    assert set(entries) == {B0}
    manager.close()


def test_a_partition_recreated_at_once_keeps_its_files(tmp_path):
    """A deleted partition's files are let go on the releaser thread; nothing queued
    there may touch the files of the partition re-created under the same name."""
    import threading

    manager = _manager(tmp_path)
    old = manager.create_log(A0)
    for _ in range(30):
        old.append(batch(count=1, value_size=1000))
    gate = threading.Event()
    RELEASER.submit(gate.wait, 30)
    try:
        manager.delete_logs([A0])
        fresh = manager.create_log(A0)
        for _ in range(12):
            fresh.append(batch(count=1, value_size=1000))
    finally:
        gate.set()
    assert RELEASER.drain(timeout_s=10)
    assert [r.offset for r in read_all(fresh)] == list(range(12))
    manager.close()
    reopened = _manager(tmp_path)
    assert [r.offset for r in read_all(reopened.get_log(A0))] == list(range(12))
    reopened.close()


def test_an_interrupted_delete_is_finished_on_open(tmp_path):
    manager = _manager(tmp_path)
    log = manager.create_log(A0)
    parent = os.path.dirname(log.directory)
    manager.close()
    os.rename(os.path.join(parent, "a-0"), os.path.join(parent, f"a-0.abc{files.DELETE_DIR_SUFFIX}"))
    reopened = _manager(tmp_path)
    assert A0 not in reopened.logs
    assert os.listdir(parent) == [n for n in os.listdir(parent) if not n.endswith(files.DELETE_DIR_SUFFIX)]
    reopened.close()


def test_topic_config_overrides_apply_and_unknown_keys_are_refused(tmp_path):
    manager = _manager(tmp_path)
    log = manager.create_log(A0, {"retention.ms": "1000", "cleanup.policy": "compact,delete"})
    assert log.config.retention_ms == 1000 and log.config.compact and log.config.delete
    manager.set_topic_config("a", {"flush.messages": "1"})
    assert log.config.flush_messages == 1 and log.config.retention_ms == LogConfig().retention_ms
    log.append(batch(key=b"k"))
    assert log.recovery_point == 1  # flush.messages=1 took effect
    with pytest.raises(ValueError, match="unknown topic config"):
        manager.set_topic_config("a", {"retention.msec": "1"})
    with pytest.raises(ValueError):
        manager.set_topic_config("a", {"cleanup.policy": "shred"})
    manager.close()


def test_periodic_tasks_run_retention_and_checkpoints(tmp_path):
    manager = _manager(tmp_path, retention_bytes=0, retention_ms=-1, file_delete_delay_ms=0)
    log = manager.create_log(A0)
    for _ in range(40):
        log.append(batch(count=1, value_size=1000))
    names = {task.name for task in manager.tasks()}
    assert {"kafka-log-retention", "kafka-log-flusher", "kafka-recovery-point-checkpoint"} <= names
    assert manager.run_retention() > 0
    assert RELEASER.drain(timeout_s=10)  # checkpoints and deletions run on the releaser thread
    starts = checkpoint.read_offset_checkpoint(os.path.join(os.path.dirname(log.directory), checkpoint.LOG_START_OFFSET_CHECKPOINT))
    assert starts[A0] == log.log_start_offset > 0
    manager.close()


def test_background_flusher_honours_flush_ms(tmp_path):
    manager = _manager(tmp_path, flush_ms=5)
    log = manager.create_log(A0)
    manager.start_flusher()
    try:
        log.append(batch(count=4))
        deadline = 200
        while log.recovery_point < 4 and deadline:
            manager._stop_flusher.wait(0.01)  # bounded wait for an observable condition
            deadline -= 1
        assert log.recovery_point == 4
    finally:
        manager.stop_flusher()
    manager.close()


def test_run_due_tasks_runs_each_job_on_its_interval(tmp_path):
    manager = _manager(tmp_path, retention_ms=-1, retention_bytes=0, file_delete_delay_ms=0)
    log = manager.create_log(A0)
    for _ in range(40):
        log.append(batch(count=1, value_size=1000))
    assert manager.run_due_tasks(now=1_000_000) == []  # first call starts the clocks
    ran = manager.run_due_tasks(now=1_000_000 + manager.config.retention_check_interval_ms)
    assert "kafka-log-retention" in ran
    assert log.log_start_offset > 0
    manager.close()


def test_run_cleaner_compacts_dirty_logs_and_checkpoints(tmp_path):
    from storage.records import Record, encode_batch

    manager = _manager(tmp_path)
    log = manager.create_log(A0, {"cleanup.policy": "compact", "segment.bytes": "4096"})
    for i in range(60):
        log.append(encode_batch([Record(0, 10_000 + i, b"key-%d" % (i % 3), b"value-%d" % i + b"x" * 200)]))
    assert manager.run_cleaner(now=20_000) == 1
    assert RELEASER.drain(timeout_s=10)  # checkpoints and deletions run on the releaser thread
    latest = {}
    for record in read_all(log):
        latest.setdefault(record.key, []).append(record.value[:8])
    assert latest[b"key-0"][-1] == b"value-57"
    sealed_keys = [r.key for r in read_all(log) if r.offset < log.segments.active.base_offset]
    assert len(sealed_keys) == len(set(sealed_keys))  # one record per key below the active segment
    saved = checkpoint.read_offset_checkpoint(os.path.join(os.path.dirname(log.directory), checkpoint.CLEANER_OFFSET_CHECKPOINT))
    assert saved[A0] == log.segments.active.base_offset
    manager.close()
