"""producer.id.expiration.ms: the log manager's periodic task forgets idle producers in
every partition (a broker setting: every topic alike), never one with an open
transaction; a forgotten producer writes again at any sequence, and a restart does not
bring it back."""

from __future__ import annotations

import pytest

from storage.config import LogConfig
from storage.log import now_ms
from storage.manager import LogManager, ManagerConfig
from storage.producer_state import NO_TXN
from storage.records import Record, encode_batch
from storage.releaser import RELEASER
from storage.types import TopicPartition

pytestmark = pytest.mark.transactions

EXPIRY = 600_000
CHECK = 1_000
PLAIN, COMPACTED = TopicPartition("plain", 0), TopicPartition("compacted", 0)


def producer_batch(pid: int, seq: int, ts: int, *, txn: bool = False) -> bytes:
    return encode_batch([Record(0, ts, b"k", b"v")], producer_id=pid, producer_epoch=0, base_sequence=seq,
                        is_transactional=txn)


def manager(tmp_path) -> LogManager:
    config = ManagerConfig(log_dirs=(str(tmp_path / "d"),), node_id=1, producer_id_expiration_ms=EXPIRY,
                           producer_id_expiration_check_interval_ms=CHECK)
    return LogManager(config, LogConfig(segment_bytes=16 * 1024)).open()


def test_idle_producers_expire_in_every_topic_but_not_with_an_open_transaction(tmp_path) -> None:
    logs = manager(tmp_path)
    plain = logs.create_log(PLAIN)
    compacted = logs.create_log(COMPACTED, {"cleanup.policy": "compact"})
    now = now_ms()  # the task reads the clock: the producers' timestamps are set around it
    for log in (plain, compacted):
        log.append(producer_batch(1, 0, now - 2 * EXPIRY))  # idle for twice the expiry
        log.append(producer_batch(2, 0, now - 2 * EXPIRY, txn=True))  # as idle, but its transaction is open
        log.append(producer_batch(3, 0, now - EXPIRY // 2))  # younger
    assert logs.run_due_tasks(now=now, include_flush=False) == []  # starts the clocks
    ran = logs.run_due_tasks(now=now + CHECK, include_flush=False)
    assert "PeriodicProducerExpirationCheck" in ran
    for log in (plain, compacted):
        assert sorted(log.producer_state.entries) == [2, 3]
        assert log.producer_state.entries[2].current_txn_first_offset != NO_TXN
        assert log.last_stable_offset == 1  # the open transaction still holds the LSO
        # Forgotten: its next batch is taken at any sequence, as a new producer's.
        log.append(producer_batch(1, 7, now))
        assert log.producer_state.entries[1].last_sequence == 7
    assert logs.expire_producers(now + 2 * EXPIRY) == 4  # 1 and 3 in both; 2 still open
    logs.close()
    RELEASER.drain(timeout_s=10)
    reopened = manager(tmp_path)
    for tp in (PLAIN, COMPACTED):
        reopened_log = reopened.get_log(tp)
        assert reopened_log is not None and sorted(reopened_log.producer_state.entries) == [2]
    reopened.close()
