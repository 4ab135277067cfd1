"""Moving a partition's log to another log dir while it serves (AlterReplicaLogDirs): a
future log in the destination is copied a budget of bytes at a time while appends go on,
then swapped in; the records, their offsets and the producers' state are the same after;
the old dir's copy is removed; a move stopped by a close resumes at the next open; a stop
between the swap's two renames is completed at the next open."""

from __future__ import annotations

import os

from storage import checkpoint
from storage.config import LogConfig
from storage.future_log import parse_future_dir_name
from storage.manager import LogManager, ManagerConfig
from storage.releaser import RELEASER
from storage.types import TopicPartition
from tests.unit.storage.helpers import batch, read_all

TP = TopicPartition("moving", 0)
PRODUCER = 4242


def _manager(tmp_path) -> LogManager:
    dirs = (str(tmp_path / "d1"), str(tmp_path / "d2"))
    return LogManager(ManagerConfig(log_dirs=dirs, node_id=1), LogConfig(segment_bytes=8 * 1024)).open()


def _dirs(tmp_path) -> tuple[str, str]:
    return str(tmp_path / "d1"), str(tmp_path / "d2")


def _fill(manager: LogManager, batches: int, first_sequence: int = 0) -> None:
    log = manager.get_log(TP)
    for i in range(batches):
        log.append(batch(count=5, producer_id=PRODUCER, base_sequence=first_sequence + 5 * i))


def test_a_log_moves_while_appends_go_on(tmp_path):
    d1, d2 = _dirs(tmp_path)
    manager = _manager(tmp_path)
    manager.create_log(TP)
    assert manager.log_dir_of(TP) == d1
    _fill(manager, 40)  # several segments
    before = read_all(manager.get_log(TP))
    manager.start_move(TP, d2)
    future = manager.futures[TP]
    assert future.dest == d2 and parse_future_dir_name(os.path.basename(future.log.directory)) == TP
    steps = 0
    sequence = 200
    while TP in manager.futures:
        assert manager.move_future_logs(budget=4096) in ([], [TP])
        manager.get_log(TP).append(batch(count=5, producer_id=PRODUCER, base_sequence=sequence))  # it keeps serving
        sequence += 5
        steps += 1
        assert steps < 500
    assert steps > 3  # it took several rounds: the copy was caught up under appends
    moved = manager.get_log(TP)
    assert manager.log_dir_of(TP) == d2 and moved.directory == os.path.join(d2, TP.dir_name)
    records = read_all(moved)
    assert [(r.offset, r.value) for r in records[:len(before)]] == [(r.offset, r.value) for r in before]
    assert len(records) == len(before) + 5 * steps  # one append after each round, the last one after the swap
    # The producer's state came along: its next sequence is accepted, a gap would not be.
    moved.append(batch(count=5, producer_id=PRODUCER, base_sequence=sequence))
    assert moved.producer_state.entries[PRODUCER].last_sequence == sequence + 4
    RELEASER.drain()
    assert [n for n in os.listdir(d1) if n.startswith(TP.topic)] == []  # the old copy is gone
    assert TP in checkpoint.read_offset_checkpoint(os.path.join(d2, checkpoint.RECOVERY_POINT_CHECKPOINT))
    assert TP not in checkpoint.read_offset_checkpoint(os.path.join(d1, checkpoint.RECOVERY_POINT_CHECKPOINT))
    end = moved.log_end_offset
    manager.close()
    reopened = _manager(tmp_path)
    assert reopened.log_dir_of(TP) == d2 and reopened.get_log(TP).log_end_offset == end
    reopened.close()


def test_moving_to_its_own_dir_or_back_cancels(tmp_path):
    d1, d2 = _dirs(tmp_path)
    manager = _manager(tmp_path)
    manager.create_log(TP)
    _fill(manager, 10)
    manager.start_move(TP, d1)  # already there
    assert manager.futures == {}
    manager.start_move(TP, d2)
    directory = manager.futures[TP].log.directory
    manager.start_move(TP, d1)  # back where it is: the move is cancelled
    assert manager.futures == {}
    RELEASER.drain()
    assert not os.path.exists(directory)
    manager.close()


def test_a_move_stopped_by_a_close_resumes(tmp_path):
    d1, d2 = _dirs(tmp_path)
    manager = _manager(tmp_path)
    manager.create_log(TP)
    _fill(manager, 40)
    before = read_all(manager.get_log(TP))
    manager.start_move(TP, d2)
    manager.move_future_logs(budget=4096)
    manager.close()
    reopened = _manager(tmp_path)
    assert reopened.log_dir_of(TP) == d1 and reopened.futures[TP].dest == d2
    while reopened.futures:
        reopened.move_future_logs(budget=1 << 20)
    assert reopened.log_dir_of(TP) == d2
    assert [(r.offset, r.value) for r in read_all(reopened.get_log(TP))] == [(r.offset, r.value) for r in before]
    reopened.close()


def test_a_stop_between_the_renames_is_completed_at_open(tmp_path):
    d1, d2 = _dirs(tmp_path)
    manager = _manager(tmp_path)
    manager.create_log(TP)
    _fill(manager, 20)
    before = read_all(manager.get_log(TP))
    manager.start_move(TP, d2)
    manager.move_future_logs(budget=0)  # nothing copied yet
    while not manager.futures[TP].catch_up(manager.get_log(TP), 1 << 20):
        pass
    future_dir = manager.futures[TP].log.directory
    current_dir = manager.get_log(TP).directory
    manager.close()
    # The swap's first rename happened, then the process stopped.
    os.rename(current_dir, current_dir + ".0123456789abcdef0123456789abcdef-delete")
    reopened = _manager(tmp_path)
    assert reopened.log_dir_of(TP) == d2 and reopened.futures == {}
    assert not os.path.exists(future_dir) and os.path.isdir(os.path.join(d2, TP.dir_name))
    assert [(r.offset, r.value) for r in read_all(reopened.get_log(TP))] == [(r.offset, r.value) for r in before]
    reopened.close()


def test_a_log_whose_start_is_inside_a_batch_moves(tmp_path):
    d1, d2 = _dirs(tmp_path)
    manager = _manager(tmp_path)
    manager.create_log(TP)
    _fill(manager, 10)
    current = manager.get_log(TP)
    current.delete_records_before(17)  # DeleteRecords: the start falls inside the batch at 15
    before = read_all(current)
    manager.start_move(TP, d2)
    while manager.futures:
        manager.move_future_logs(budget=1 << 20)
    moved = manager.get_log(TP)
    assert manager.log_dir_of(TP) == d2 and moved.log_start_offset == 17
    assert [(r.offset, r.value) for r in read_all(moved)] == [(r.offset, r.value) for r in before]
    manager.close()
