"""The ``.txnindex`` files of a partition log: written on ABORT markers, read back by
aborted_transactions, kept through clean and unclean restarts, cut by truncation, gone
with their segments (retention, DeleteRecords), carried over by the cleaner."""

from __future__ import annotations

import os
import struct

from storage import files
from storage.cleaner import clean_log
from storage.config import LogConfig
from storage.log import PartitionLog
from storage.records import Record, encode_batch
from storage.releaser import RELEASER
from storage.txn_index import ENTRY_SIZE, AbortedTxn, TxnIndex, decode_entries
from tests.unit.storage.helpers import batch, open_log
from tests.unit.storage.test_transactions import txn_batch


def txn_files(log: PartitionLog) -> dict[str, bytes]:
    """Every .txnindex file of the log's directory, name -> bytes."""
    out = {}
    for name in sorted(os.listdir(log.directory)):
        if name.endswith(files.TXN_INDEX_SUFFIX):
            with open(os.path.join(log.directory, name), "rb") as handle:
                out[name] = handle.read()
    return out


def entries_of(log: PartitionLog) -> list[AbortedTxn]:
    return [txn for segment in log.segments for txn in segment.txn_index.entries]


def kill(log: PartitionLog) -> None:
    """Let go of the log's files as a killed process would: no flush, no snapshot, no trim."""
    RELEASER.drain()
    log.close_for_deletion()
    RELEASER.drain()


def abort_heavy_log(tmp_path, config: LogConfig | None = None) -> PartitionLog:
    """Three producers, aborts and commits, over several segments when segments are small."""
    log = open_log(tmp_path, config)
    for round_ in range(4):
        log.append(txn_batch(1, 2 * round_, 2, value=b"x" * 200), leader_epoch=0)
        log.append(txn_batch(2, round_, 1, value=b"y" * 200), leader_epoch=0)
        log.append(batch(count=1, value_size=200), leader_epoch=0)
        log.append_marker(1, 0, False, 0, leader_epoch=0)
        log.append(txn_batch(3, round_, 1, value=b"z" * 200), leader_epoch=0)
        log.append_marker(2, 0, round_ % 2 == 0, 0, leader_epoch=0)
        log.append_marker(3, 0, False, 0, leader_epoch=0)
    return log


# ----------------------------------------------------------------- the file


def test_an_abort_writes_kafkas_34_byte_entry_in_the_segments_txnindex(tmp_path):
    log = open_log(tmp_path)
    log.append(txn_batch(7, 0, 3), leader_epoch=0)  # 0-2
    log.append(txn_batch(8, 0, 1), leader_epoch=0)  # 3
    log.append_marker(7, 0, True, 0, leader_epoch=0)  # 4: a commit writes nothing
    assert txn_files(log) == {}
    log.append(txn_batch(7, 3, 1), leader_epoch=0)  # 5
    log.append_marker(7, 0, False, 2, leader_epoch=0)  # 6
    # Producer 8's transaction (first offset 3) is the next open one: the entry's LSO.
    expected = struct.pack(">hqqqq", 0, 7, 5, 6, 3)
    assert len(expected) == ENTRY_SIZE
    assert txn_files(log) == {"00000000000000000000.txnindex": expected}
    log.append_marker(8, 0, False, 2, leader_epoch=0)  # 7: nothing else open: LSO = 8
    assert txn_files(log)["00000000000000000000.txnindex"] == expected + struct.pack(">hqqqq", 0, 8, 3, 7, 8)
    # A marker for an empty transaction adds nothing (Kafka's rule).
    log.append_marker(8, 0, False, 2, leader_epoch=0)
    assert len(entries_of(log)) == 2


def test_aborted_transactions_follows_kafkas_overlap_rule(tmp_path):
    log = open_log(tmp_path)
    log.append(txn_batch(1, 0, 2), leader_epoch=0)  # 0-1
    log.append_marker(1, 0, False, 0, leader_epoch=0)  # 2
    log.append(batch(count=2), leader_epoch=0)  # 3-4
    log.append(txn_batch(2, 0, 1), leader_epoch=0)  # 5
    log.append(txn_batch(3, 0, 1), leader_epoch=0)  # 6
    log.append_marker(2, 0, False, 0, leader_epoch=0)  # 7
    log.append_marker(3, 0, False, 0, leader_epoch=0)  # 8
    end = log.log_end_offset
    assert log.aborted_transactions(0, end) == [(1, 0), (2, 5), (3, 6)]
    assert log.aborted_transactions(3, end) == [(2, 5), (3, 6)]  # producer 1's marker is before 3
    assert log.aborted_transactions(0, 5) == [(1, 0)]  # the others start at or after the bound
    assert log.aborted_transactions(8, end) == [(3, 6)]
    assert log.aborted_transactions(9, end) == []


def test_aborted_transactions_spans_segments_from_the_one_holding_the_start(tmp_path):
    log = abort_heavy_log(tmp_path, LogConfig(segment_bytes=1024))
    assert len(log.segments) > 3
    every = entries_of(log)
    assert [t.producer_id for t in every].count(1) == 4
    end = log.log_end_offset
    assert log.aborted_transactions(0, end) == [(t.producer_id, t.first_offset) for t in every]
    middle = log.segments[2].base_offset
    assert log.aborted_transactions(middle, end) == [
        (t.producer_id, t.first_offset) for t in every if t.last_offset >= middle]


def test_a_torn_last_entry_is_dropped_on_open(tmp_path):
    path = str(tmp_path / "00000000000000000000.txnindex")
    whole = struct.pack(">hqqqq", 0, 1, 0, 4, 5)
    with open(path, "wb") as handle:
        handle.write(whole + whole[:20])
    index = TxnIndex(path, 0)
    assert index.entries == [AbortedTxn(1, 0, 4, 5)]
    assert os.path.getsize(path) == ENTRY_SIZE
    assert decode_entries(whole * 2) == [AbortedTxn(1, 0, 4, 5)] * 2


# ----------------------------------------------------------------- restarts


def test_the_index_survives_a_clean_close(tmp_path):
    log = abort_heavy_log(tmp_path, LogConfig(segment_bytes=1024))
    before, entries, end = txn_files(log), entries_of(log), log.log_end_offset
    aborted = log.aborted_transactions(0, end)
    log.close()
    reopened = open_log(tmp_path, LogConfig(segment_bytes=1024))
    assert txn_files(reopened) == before
    assert entries_of(reopened) == entries
    assert reopened.aborted_transactions(0, end) == aborted
    reopened.close()


def test_the_index_is_rebuilt_after_an_unclean_stop(tmp_path):
    config = LogConfig(segment_bytes=1024)
    log = abort_heavy_log(tmp_path, config)
    before, end, lso = txn_files(log), log.log_end_offset, log.last_stable_offset
    directory = log.directory
    kill(log)
    # The process died before the last entries reached the disk; one file is damaged.
    names = sorted(before)
    os.unlink(os.path.join(directory, names[-1]))
    with open(os.path.join(directory, names[0]), "r+b") as handle:
        handle.truncate(ENTRY_SIZE + 5)
    reopened = open_log(tmp_path, config, clean_shutdown=False, recovery_point=0)
    assert reopened.log_end_offset == end
    assert txn_files(reopened) == before
    assert reopened.last_stable_offset == lso
    reopened.close()


def test_an_unclean_stop_with_an_open_transaction_keeps_the_lso(tmp_path):
    config = LogConfig(segment_bytes=1024)
    log = abort_heavy_log(tmp_path, config)
    first = log.log_end_offset
    log.append(txn_batch(9, 0, 1), leader_epoch=0)
    for _ in range(5):
        log.append(batch(count=1, value_size=300), leader_epoch=0)  # rolls past the txn's segment
    assert log.last_stable_offset == first
    kill(log)
    reopened = open_log(tmp_path, config, clean_shutdown=False, recovery_point=first + 2)
    assert reopened.last_stable_offset == first
    reopened.append_marker(9, 0, False, 0, leader_epoch=0)
    assert reopened.aborted_transactions(first, reopened.log_end_offset) == [(9, first)]
    reopened.close()


# ----------------------------------------------------------------- truncation, retention, cleaning


def test_truncation_removes_the_entries_above(tmp_path):
    log = abort_heavy_log(tmp_path)
    entries = entries_of(log)
    cut = entries[3].last_offset  # the marker of the fourth abort goes, and all after it
    log.truncate_to(cut)
    assert entries_of(log) == entries[:3]
    assert txn_files(log) == {"00000000000000000000.txnindex": b"".join(
        struct.pack(">hqqqq", 0, *t) for t in entries[:3])}
    # The truncated transaction is open again: its data is still in the log.
    assert log.last_stable_offset == entries[3].first_offset
    log.close()
    reopened = open_log(tmp_path)
    assert entries_of(reopened) == entries[:3]
    reopened.close()


def test_truncation_into_an_earlier_segment_drops_the_later_txnindex_files(tmp_path):
    config = LogConfig(segment_bytes=1024, file_delete_delay_ms=0)
    log = abort_heavy_log(tmp_path, config)
    assert len(txn_files(log)) > 2
    entries = entries_of(log)
    cut = log.segments[1].base_offset
    log.truncate_to(cut)
    RELEASER.drain()
    assert entries_of(log) == [t for t in entries if t.last_offset < cut]
    # The segment at the cut stays (emptied), the later ones go with their files.
    remaining = txn_files(log)
    assert all(files.offset_from_filename(name) <= cut for name in remaining)
    assert remaining.get(files.filename_prefix(cut) + files.TXN_INDEX_SUFFIX, b"") == b""


def test_retention_and_delete_records_remove_the_file_with_its_segment(tmp_path):
    config = LogConfig(segment_bytes=1024, file_delete_delay_ms=0, retention_ms=1_000)
    log = abort_heavy_log(tmp_path, config)
    names = sorted(txn_files(log))
    log.delete_records_before(log.segments[2].base_offset)
    RELEASER.drain()
    assert sorted(txn_files(log)) == [n for n in names if files.offset_from_filename(n) >= log.segments[0].base_offset]
    assert not [n for n in os.listdir(log.directory) if n.endswith(files.DELETED_SUFFIX)]
    log.roll()
    log.delete_old_segments(now=10**13)
    RELEASER.drain()
    assert txn_files(log) == {}
    assert log.aborted_transactions(log.log_start_offset, log.log_end_offset) == []


def test_the_cleaner_keeps_each_segments_aborted_transactions(tmp_path):
    config = LogConfig(segment_bytes=1024, cleanup_policy="compact", min_compaction_lag_ms=0,
                       file_delete_delay_ms=0)
    log = abort_heavy_log(tmp_path, config)
    log.roll()
    before, end = txn_files(log), log.log_end_offset
    aborted = log.aborted_transactions(0, end)
    result = clean_log(log, now_ms=10**13)
    assert result.sources  # segments were rewritten
    RELEASER.drain()
    assert txn_files(log) == before
    assert log.aborted_transactions(0, end) == aborted
    assert not [n for n in os.listdir(log.directory) if n.endswith((files.SWAP_SUFFIX, files.DELETED_SUFFIX))]
    log.close()
    reopened = open_log(tmp_path, config)
    assert txn_files(reopened) == before
    reopened.close()


def test_a_crash_inside_the_cleaner_swap_keeps_the_txnindex(tmp_path):
    """A .log.swap and a .txnindex.swap left by a crash replace the live files; a
    .txnindex.swap alone is garbage."""
    config = LogConfig(segment_bytes=1024)
    log = abort_heavy_log(tmp_path, config)
    name = sorted(txn_files(log))[0]
    log.close()
    directory = log.directory
    base = files.offset_from_filename(name)
    live = files.txn_index_path(directory, base)
    with open(live, "rb") as handle:
        original = handle.read()
    # Crash after step b: the cleaned copy and its index are .swap, the source was deleted.
    os.replace(files.log_path(directory, base), files.log_path(directory, base) + files.SWAP_SUFFIX)
    os.replace(live, live + files.SWAP_SUFFIX)
    reopened = open_log(tmp_path, config)
    assert txn_files(reopened)[name] == original
    reopened.close()
    # A stray .txnindex.swap with no .log.swap: the live index stays.
    with open(live + files.SWAP_SUFFIX, "wb") as handle:
        handle.write(b"\x00" * ENTRY_SIZE)
    again = open_log(tmp_path, config)
    assert txn_files(again)[name] == original
    assert not os.path.exists(live + files.SWAP_SUFFIX)
    again.close()


def test_a_kafka_shaped_marker_from_a_client_batch_writes_the_same_entry(tmp_path):
    """append() of a control batch (not append_marker) is applied the same way."""
    from storage.records import CONTROL_TYPE_ABORT, encode_control_batch

    log = open_log(tmp_path)
    log.append(encode_batch([Record(0, 1, b"k", b"v")], producer_id=4, producer_epoch=0, base_sequence=0,
                            is_transactional=True), leader_epoch=0)
    log.append(encode_control_batch(CONTROL_TYPE_ABORT, 3, producer_id=4, producer_epoch=0, timestamp=5),
               leader_epoch=0)
    assert entries_of(log) == [AbortedTxn(4, 0, 1, 2)]
