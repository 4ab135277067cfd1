"""Landings (storage/landing.py): a record set received straight into the active
segment's map past the log end, committed in place by append, revoked by anything else
that changes the log."""

from __future__ import annotations

import os
import struct

from storage.config import LogConfig
from storage.log import PartitionLog, now_ms
from storage.releaser import RELEASER
from tests.unit.storage.helpers import batch, open_log, read_all


def _land(log: PartitionLog, data: bytes, revoked: list | None = None):
    landing = log.open_landing(len(data), (revoked.append if revoked is not None else lambda _landing: None))
    assert landing is not None
    landing.records[:] = data  # what recv_into does, from the kernel
    return landing


def test_a_landed_record_set_is_committed_where_it_lies(tmp_path):
    log = open_log(tmp_path)
    log.append(batch(count=2))
    raw = batch(count=3, value_size=500)
    landing = _land(log, raw)
    info = log.append(landing.records, leader_epoch=4)
    assert landing.committed and log.landing is None
    landing.close()
    assert (info.first_offset, info.last_offset) == (2, 4)
    stored = log.read_bytes(2, 1 << 20)
    assert stored[:8] == struct.pack(">q", 2)  # offsets and epoch rewritten in place
    assert stored[12:16] == struct.pack(">i", 4)
    assert stored[16:] == raw[16:]
    assert [r.offset for r in read_all(log)] == [0, 1, 2, 3, 4]
    log.close()
    reopened = open_log(tmp_path)
    assert [r.value for r in read_all(reopened)][2:] == [bytes([65 + i]) * 500 for i in range(3)]
    reopened.close()


def test_landed_bytes_are_not_in_the_log_until_committed(tmp_path):
    log = open_log(tmp_path)
    log.append(batch(count=1))
    landing = _land(log, batch(count=2))
    assert log.log_end_offset == 1
    assert [r.offset for r in read_all(log)] == [0]
    landing.close()  # never committed: a refused request, a closed connection
    assert log.landing is None
    log.append(batch(count=1, value_size=7))  # overwrites the abandoned bytes
    assert [(r.offset, len(r.value)) for r in read_all(log)] == [(0, 100), (1, 7)]
    log.close()


def test_another_append_revokes_the_landing_first(tmp_path):
    log = open_log(tmp_path)
    revoked: list = []
    landing = _land(log, batch(count=2, value_size=50), revoked)
    moved = bytes(landing.records)  # the receiver's copy, as its revoke callback makes
    log.append(batch(count=1, value_size=9))
    assert revoked == [landing] and log.landing is None
    log.append(moved)  # the receiver's buffer, appended the ordinary way
    assert [(r.offset, len(r.value)) for r in read_all(log)] == [(0, 9), (1, 50), (2, 50)]
    log.close()


def test_the_same_bytes_from_another_view_are_copied_not_committed_in_place(tmp_path):
    log = open_log(tmp_path)
    revoked: list = []
    landing = _land(log, batch(count=1), revoked)
    log.append(bytes(landing.records))  # equal bytes, but not the landing's view
    assert revoked == [landing]
    assert log.log_end_offset == 1
    log.close()


def test_one_landing_at_a_time_and_only_what_fits_the_segment(tmp_path):
    log = open_log(tmp_path, LogConfig(segment_bytes=64 * 1024))
    first = log.open_landing(1000, lambda _landing: None)
    assert first is not None
    assert log.open_landing(1000, lambda _landing: None) is None
    first.close()
    assert log.open_landing(64 * 1024 + 1, lambda _landing: None) is None
    assert log.open_landing(0, lambda _landing: None) is None
    log.append(batch(count=1, value_size=40 * 1024))
    assert log.open_landing(30 * 1024, lambda _landing: None) is None  # would pass segment.bytes
    log.close()


def test_roll_truncate_and_close_revoke_an_open_landing(tmp_path):
    log = open_log(tmp_path)
    for _ in range(3):  # timestamps of now: a segment reopened by truncation is not due to roll for time
        log.append(batch(count=1, timestamp=now_ms()))
    for change in (log.roll, lambda: log.truncate_to(2), log.close):
        revoked: list = []
        landing = _land(log, batch(count=1), revoked)
        change()
        assert revoked == [landing], change
        assert log.landing is None


def test_a_refused_landed_set_leaves_the_log_as_it_was(tmp_path):
    log = open_log(tmp_path)
    log.append(batch(count=1))
    raw = bytearray(batch(count=2))
    raw[-1] ^= 0xFF  # the CRC no longer matches
    landing = _land(log, bytes(raw))
    try:
        log.append(landing.records)
    except Exception as exc:  # CorruptRecordError
        assert "CRC" in str(exc) or "crc" in str(exc)
    else:
        raise AssertionError("a corrupt landed set was appended")
    landing.close()
    assert log.log_end_offset == 1 and log.landing is None
    log.append(batch(count=1))
    assert [r.offset for r in read_all(log)] == [0, 1]
    log.close()


def test_recovery_cuts_a_whole_batch_landed_but_never_committed(tmp_path):
    """A crash after the bytes landed but before the append: the batch is CRC-valid, but
    it carries the client's base offset (0), not the log's, so recovery cuts it."""
    log = open_log(tmp_path)
    log.append(batch(count=5))
    _land(log, batch(count=2))  # and then the process dies: no close
    recovered = open_log(tmp_path, clean_shutdown=False)
    assert recovered.log_end_offset == 5
    assert [r.offset for r in read_all(recovered)] == [0, 1, 2, 3, 4]
    recovered.close()


def test_a_roll_after_a_landing_closes_the_map_and_cuts_the_file(tmp_path):
    """A view of the map left behind would make the roll's munmap fail (BufferError on the
    releaser's thread) and leave the file at its mapped size."""
    log = open_log(tmp_path)
    raw = batch(count=2, value_size=300)
    landing = _land(log, raw)
    log.append(landing.records)
    landing.close()
    revoked: list = []
    _land(log, batch(count=1), revoked)  # open, never committed: the roll revokes it
    path = log.segments[0].path
    log.roll()
    assert revoked
    assert RELEASER.drain()
    assert os.path.getsize(path) == len(raw)
    log.close()
