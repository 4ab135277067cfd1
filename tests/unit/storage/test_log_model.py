"""Hypothesis state machine: PartitionLog against a plain list of records.

Rules: append, roll, flush, truncate, delete records, clean reopen, and a simulated
crash (the maps and fds are dropped without trimming, as a killed process leaves them)
followed by recovery. After every step the log must read back exactly the model.
"""

from __future__ import annotations

import os
import shutil
import tempfile

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from storage.config import LogConfig
from storage.log import PartitionLog
from storage.records import Record, encode_batch
from storage.releaser import RELEASER
from tests.unit.storage.helpers import TP, read_all

CONFIG = LogConfig(segment_bytes=4096, index_interval_bytes=256, segment_index_bytes=8 * 16,
                   preallocate_window_bytes=4096, retention_ms=-1, file_delete_delay_ms=0)


def _abandon(log: PartitionLog) -> None:
    """What kill -9 leaves: files untrimmed at their mapped size; only the fds go away.

    Work already queued on the block releaser (cuts of sealed segments, snapshots) is let
    finish first: in one process it cannot be lost as a killed process loses it, and it
    must not land on the files the reopened log owns. (A lost cut is
    test_log_edge_cases.test_crash_during_roll_leaves_an_untrimmed_sealed_segment.)"""
    assert RELEASER.drain(timeout_s=30)
    for segment in log.segments:
        for index in (segment.offset_index, segment.time_index):
            if index._file is not None:
                index._file.map.close()
                os.close(index._file.fd)
                index._file = None
            index.close()
        if segment._log is not None:
            segment._log.map.close()
            segment._log = None
        os.close(segment.fd)
        segment._fd = -1


class LogMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.root = tempfile.mkdtemp(prefix="castle-model-")
        self.directory = os.path.join(self.root, TP.dir_name)
        self.log = PartitionLog(self.directory, TP, CONFIG)
        self.model: list[tuple[int, bytes]] = []  # (offset, value) of every live record
        self.batch_starts: list[int] = [0]
        self.log_start = 0
        self.end = 0

    def teardown(self) -> None:
        self.log.close()
        shutil.rmtree(self.root, ignore_errors=True)

    @rule(values=st.lists(st.binary(min_size=0, max_size=300), min_size=1, max_size=5), ts=st.integers(0, 10**12))
    def append(self, values, ts):
        records = [Record(i, ts + i, b"k%d" % i, v) for i, v in enumerate(values)]
        info = self.log.append(encode_batch(records))
        assert info.first_offset == self.end
        self.model.extend((self.end + i, v) for i, v in enumerate(values))
        self.end += len(values)
        self.batch_starts.append(self.end)

    @rule()
    def roll(self):
        self.log.roll()

    @rule()
    def flush(self):
        self.log.flush()
        assert self.log.recovery_point == self.end

    @precondition(lambda self: len(self.batch_starts) > 1)
    @rule(data=st.data())
    def truncate(self, data):
        candidates = [b for b in self.batch_starts if b >= self.log_start]
        target = data.draw(st.sampled_from(candidates))
        self.log.truncate_to(target)
        self.model = [(o, v) for o, v in self.model if o < target]
        self.batch_starts = [b for b in self.batch_starts if b <= target]
        self.end = target

    @rule(data=st.data())
    def delete_records(self, data):
        target = data.draw(st.integers(self.log_start, self.end))
        self.log.delete_records_before(target)
        self.log_start = max(self.log_start, target)
        self.model = [(o, v) for o, v in self.model if o >= self.log_start]

    @rule()
    def reopen_clean(self):
        self.log.close()
        self.log = PartitionLog(self.directory, TP, CONFIG, log_start_offset=self.log_start, clean_shutdown=True)

    @rule()
    def crash_and_recover(self):
        _abandon(self.log)
        self.log = PartitionLog(self.directory, TP, CONFIG, log_start_offset=self.log_start, clean_shutdown=False)

    @invariant()
    def reads_match_the_model(self):
        assert self.log.log_end_offset == self.end
        assert self.log.log_start_offset == self.log_start or (self.log_start < self.log.log_start_offset <= self.end and not self.model)
        got = [(r.offset, r.value) for r in read_all(self.log)]
        assert got == self.model


TestLogModel = LogMachine.TestCase
TestLogModel.settings = settings(max_examples=60, stateful_step_count=30, deadline=None)
