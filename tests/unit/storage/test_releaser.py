"""The block releaser: ordered background jobs, drain, fork safety, and rolls cut off the
owner's thread (storage/releaser.py says why)."""

from __future__ import annotations

import multiprocessing
import os
import threading

import pytest

from storage import files
from storage.config import LogConfig
from storage.releaser import RELEASER, JobThread
from tests.unit.storage.helpers import batch, open_log, read_all

SMALL = LogConfig(segment_bytes=16 * 1024, index_interval_bytes=512, preallocate_window_bytes=64 * 1024)


def _block(releaser: JobThread) -> threading.Event:
    """Hold ``releaser``'s thread until the returned event is set."""
    gate = threading.Event()
    releaser.submit(gate.wait, 30)
    return gate


def test_jobs_run_in_order_and_drain_waits_for_them():
    releaser = JobThread()
    ran: list[int] = []
    gate = _block(releaser)
    for i in range(5):
        releaser.submit(ran.append, i)
    assert releaser.drain(timeout_s=0.2) is False  # held behind the gate
    assert ran == []
    gate.set()
    assert releaser.drain(timeout_s=10) is True
    assert ran == [0, 1, 2, 3, 4]


def test_a_failing_job_does_not_stop_the_next(caplog):
    releaser = JobThread()
    ran: list[str] = []
    releaser.submit(os.close, -1)  # EBADF
    releaser.submit(ran.append, "after")
    assert releaser.drain(timeout_s=10)
    assert ran == ["after"]
    assert "background file job close failed" in caplog.text


def test_drain_with_nothing_submitted_returns_at_once():
    assert JobThread().drain(timeout_s=0) is True


def _child_submits(releaser: JobThread, marker: str) -> None:
    releaser.submit(open(marker, "w").close)
    os._exit(0 if releaser.drain(timeout_s=10) and os.path.exists(marker) else 1)


def test_a_forked_child_gets_its_own_thread_and_queue(tmp_path):
    """Workers are forked from the supervisor: the child must not wait on the parent's
    thread (not forked) nor run the parent's jobs."""
    releaser = JobThread()
    gate = _block(releaser)
    parent_ran: list[str] = []
    releaser.submit(parent_ran.append, "parent")
    child = multiprocessing.get_context("fork").Process(target=_child_submits, args=(releaser, str(tmp_path / "marker")))
    child.start()
    child.join(30)
    assert child.exitcode == 0
    assert parent_ran == []
    gate.set()
    assert releaser.drain(timeout_s=10)
    assert parent_ran == ["parent"]


def _file_sizes(log, segment) -> tuple[int, int, int]:
    base = segment.base_offset
    return tuple(os.path.getsize(path) for path in (files.log_path(log.directory, base),
                                                    files.index_path(log.directory, base),
                                                    files.time_index_path(log.directory, base)))


def test_a_roll_is_cut_off_the_owner_thread_and_readers_never_notice(tmp_path):
    log = open_log(tmp_path, SMALL)
    gate = _block(RELEASER)
    try:
        for _ in range(60):
            log.append(batch(count=2, value_size=600))
        sealed = list(log.segments)[:-1]
        assert len(sealed) >= 3
        # The cuts wait behind the gate: the files still have their mapped sizes...
        for segment in sealed:
            assert _file_sizes(log, segment)[0] == SMALL.segment_bytes
        # ...and every record reads back through the sealed segments all the same.
        assert [r.offset for r in read_all(log)] == list(range(120))
        assert log.offset_for_timestamp(1_000) == (0, 1_000)
    finally:
        gate.set()
    assert RELEASER.drain(timeout_s=10)
    for segment in sealed:
        log_size, index_size, time_index_size = _file_sizes(log, segment)
        assert log_size == segment.size
        assert index_size == segment.offset_index.entries * 8
        assert time_index_size == segment.time_index.entries * 12
    assert [r.offset for r in read_all(log)] == list(range(120))
    log.close()


def test_truncating_into_a_sealed_segment_waits_for_its_cut(tmp_path):
    log = open_log(tmp_path, SMALL)
    gate = _block(RELEASER)
    try:
        for _ in range(60):
            log.append(batch(count=1, value_size=500))
        assert len(log.segments) >= 3
        target = list(log.segments)[1].base_offset + 1  # inside a sealed segment
        threading.Timer(0.3, gate.set).start()
        log.truncate_to(target)
    finally:
        gate.set()
    assert log.log_end_offset == target
    assert log.append(batch(count=2)).first_offset == target
    assert [r.offset for r in read_all(log)] == list(range(target + 2))
    log.close()
    reopened = open_log(tmp_path, SMALL, clean_shutdown=False)
    assert reopened.log_end_offset == target + 2
    reopened.close()


def test_truncation_refuses_when_the_cut_never_finishes(tmp_path, monkeypatch):
    log = open_log(tmp_path, SMALL)
    gate = _block(RELEASER)
    try:
        for _ in range(60):
            log.append(batch(count=1, value_size=500))
        target = list(log.segments)[1].base_offset + 1
        monkeypatch.setattr(RELEASER, "drain", lambda timeout_s=60.0: JobThread.drain(RELEASER, 0.1))
        from storage.errors import LogDirOfflineError
        with pytest.raises(LogDirOfflineError, match="did not finish"):
            log.truncate_to(target)
    finally:
        gate.set()
        monkeypatch.undo()
    assert RELEASER.drain(timeout_s=10)
    log.close()


def test_deleted_segments_are_unlinked_off_the_owner_thread(tmp_path):
    log = open_log(tmp_path, LogConfig(segment_bytes=8 * 1024, retention_bytes=0, file_delete_delay_ms=0))
    for _ in range(30):
        log.append(batch(count=1, value_size=1000))
    doomed = [files.log_path(log.directory, s.base_offset) for s in list(log.segments)[:-1]]
    gate = _block(RELEASER)
    try:
        assert log.delete_old_segments() >= len(doomed)
        # Out of the log at once, on disk until the releaser gets to them.
        assert log.log_start_offset == log.segments[0].base_offset > 0
        assert all(os.path.exists(path + files.DELETED_SUFFIX) for path in doomed)
    finally:
        gate.set()
    assert RELEASER.drain(timeout_s=10)
    assert not [n for n in os.listdir(log.directory) if n.endswith(files.DELETED_SUFFIX)]
    log.close()


def test_deleting_a_whole_log_removes_its_directory(tmp_path):
    log = open_log(tmp_path, SMALL)
    for _ in range(40):
        log.append(batch(count=1, value_size=800))
    directory = log.directory
    log.delete()  # the active segment too, mapped and untrimmed
    assert not os.path.exists(directory)
