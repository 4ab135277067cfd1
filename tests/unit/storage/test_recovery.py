"""Recovery with real files: killed writers, torn tails, garbage, zeros, broken indexes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from storage import files
from storage.config import LogConfig
from tests.unit.storage.helpers import TP, batch, open_log, read_all

CONFIG = LogConfig(segment_bytes=64 * 1024, index_interval_bytes=512, preallocate_window_bytes=64 * 1024)
# The subprocesses below import storage and the test helpers from the checkout.
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

WRITER = textwrap.dedent(
    """
    import sys
    from storage.config import LogConfig
    from storage.log import PartitionLog
    from storage.types import TopicPartition
    from tests.unit.storage.helpers import batch
    directory, segment_bytes = sys.argv[1], int(sys.argv[2])
    log = PartitionLog(directory, TopicPartition("events", 0),
                       LogConfig(segment_bytes=segment_bytes, index_interval_bytes=512, preallocate_window_bytes=65536))
    i = 0
    while True:
        info = log.append(batch(count=3, value_size=200 + i % 50, timestamp=1000 + i))
        print(info.last_offset, flush=True)   # acknowledged
        i += 1
    """
)


def _run_writer_and_kill(tmp_path, acks_before_kill: int, segment_bytes: int) -> int:
    """Start a real writer process, read its acks, SIGKILL it; return the last acked offset."""
    directory = os.path.join(str(tmp_path), TP.dir_name)
    proc = subprocess.Popen([sys.executable, "-c", WRITER, directory, str(segment_bytes)], cwd=REPO,
                            stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": REPO})
    last_acked = -1
    try:
        for _ in range(acks_before_kill):
            line = proc.stdout.readline()
            assert line, f"writer died early with {proc.wait(timeout=10)}"
            last_acked = int(line)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        proc.stdout.close()
    assert proc.returncode == -signal.SIGKILL
    return last_acked


def test_kill_9_loses_no_acknowledged_record(tmp_path):
    last_acked = _run_writer_and_kill(tmp_path, acks_before_kill=400, segment_bytes=64 * 1024)
    log = open_log(tmp_path, CONFIG, clean_shutdown=False)
    # The killed process may have appended (not acked) a little more; never less.
    assert log.log_end_offset >= last_acked + 1
    offsets = [r.offset for r in read_all(log)]
    assert offsets == list(range(log.log_end_offset))
    assert len(log.segments) > 1
    # The untrimmed, zero-filled tail of the active map was cut by recovery.
    active = log.segments.active
    assert active.size == sum(h.size for _p, h in active.batches_from(0))
    log.append(batch())
    log.close()


def test_kill_9_then_torn_tail_serves_everything_before_the_damage(tmp_path):
    _run_writer_and_kill(tmp_path, acks_before_kill=50, segment_bytes=1 << 20)
    directory = os.path.join(str(tmp_path), TP.dir_name)
    path = files.log_path(directory, 0)
    # Find the real end of the data (the file is still its preallocated size).
    probe = open_log(tmp_path, CONFIG.__class__(segment_bytes=1 << 20), clean_shutdown=False)
    batches = [(p, h) for p, h in probe.segments.active.batches_from(0)]
    probe.segments.active.close()
    # Damage: the last batch loses its last 7 bytes; then garbage after it.
    last_position, last_header = batches[-1]
    with open(path, "r+b") as handle:
        handle.truncate(last_position + last_header.size - 7)
        handle.seek(0, os.SEEK_END)
        handle.write(b"\xde\xad\xbe\xef" * 100)
    log = open_log(tmp_path, LogConfig(segment_bytes=1 << 20), clean_shutdown=False)
    assert log.log_end_offset == last_header.base_offset
    assert [r.offset for r in read_all(log)] == list(range(last_header.base_offset))
    quarantined = [n for n in os.listdir(directory) if n.endswith(files.CORRUPT_SUFFIX)]
    assert quarantined, "the cut bytes are kept for a post-mortem"
    log.close()


def _log_with_batches(tmp_path, n: int = 20) -> tuple[str, list[int]]:
    log = open_log(tmp_path, CONFIG)
    ends = []
    for i in range(n):
        log.append(batch(count=2, value_size=100 + i))
        ends.append(log.segments.active.size)
    directory = log.directory
    log.close()
    return files.log_path(directory, 0), ends


def test_cut_at_every_byte_of_the_last_batch(tmp_path):
    path, ends = _log_with_batches(tmp_path, 5)
    with open(path, "rb") as handle:
        original = handle.read()
    for cut in range(ends[-2], ends[-1]):
        with open(path, "wb") as handle:
            handle.write(original[:cut])
        log = open_log(tmp_path, CONFIG, clean_shutdown=False)
        expected_end = 10 if cut == ends[-1] else 8
        assert log.log_end_offset == expected_end, f"cut at {cut}"
        assert [r.offset for r in read_all(log)] == list(range(expected_end))
        log.close()
        assert os.path.getsize(path) == ends[-2]


def test_zeros_after_the_last_batch_are_cut_without_quarantine(tmp_path):
    path, ends = _log_with_batches(tmp_path, 10)
    with open(path, "r+b") as handle:
        handle.truncate(ends[-1] + 10 * 1024 * 1024)  # what a crashed preallocated file looks like
    log = open_log(tmp_path, CONFIG, clean_shutdown=False)
    assert log.log_end_offset == 20
    assert os.path.getsize(path) <= CONFIG.segment_bytes
    assert not [n for n in os.listdir(log.directory) if n.endswith(files.CORRUPT_SUFFIX)]
    log.close()
    assert os.path.getsize(path) == ends[-1]


def test_corruption_in_an_old_segment_truncates_there_and_drops_later_segments(tmp_path):
    log = open_log(tmp_path, CONFIG)
    for _ in range(300):
        log.append(batch(count=1, value_size=500))
    second = log.segments[1]
    third_base = log.segments[2].base_offset
    damaged_position = 0
    for position, header in second.batches_from(0):
        if header.base_offset >= second.base_offset + 5:
            damaged_position = position + 70
            damaged_base = header.base_offset
            break
    directory, second_path = log.directory, second.path
    log.close()
    with open(second_path, "r+b") as handle:
        handle.seek(damaged_position)
        handle.write(b"\xff" * 16)
    # Recovery point 0: every segment is checked.
    reopened = open_log(tmp_path, CONFIG, clean_shutdown=False, recovery_point=0)
    assert reopened.log_end_offset == damaged_base
    assert [r.offset for r in read_all(reopened)] == list(range(damaged_base))
    assert not os.path.exists(files.log_path(directory, third_base))
    reopened.append(batch())
    assert reopened.log_end_offset == damaged_base + 1
    reopened.close()


REOPEN_WHILE_THE_RELEASER_IS_HELD = textwrap.dedent(
    """
    import sys, threading
    from storage.config import LogConfig
    from storage.releaser import RELEASER
    from tests.unit.storage.helpers import batch, open_log, read_all
    config = LogConfig(segment_bytes=64 * 1024, index_interval_bytes=512, preallocate_window_bytes=64 * 1024)
    directory = sys.argv[1]
    log = open_log(directory, config)
    for _ in range(300):
        log.append(batch(count=1, value_size=500))
    second = log.segments[1]
    damaged_base, damaged_position = next((h.base_offset, p + 70) for p, h in second.batches_from(0)
                                          if h.base_offset >= second.base_offset + 5)
    log.close()
    with open(second.path, "r+b") as handle:
        handle.seek(damaged_position)
        handle.write(b"\\xff" * 16)
    gate = threading.Event()
    RELEASER.submit(gate.wait)  # the releaser is busy with something slow
    opened = []
    opener = threading.Thread(target=lambda: opened.append(
        open_log(directory, config, clean_shutdown=False, recovery_point=0)))
    opener.start()
    opener.join(1.0)
    opened_while_held = not opener.is_alive()
    gate.set()  # the queued cuts of the damaged segment's files run now
    opener.join(30)
    assert RELEASER.drain(30)
    reopened = opened[0]
    assert [r.offset for r in read_all(reopened)] == list(range(damaged_base))  # reads the reopened maps
    reopened.append(batch())
    assert reopened.log_end_offset == damaged_base + 1
    reopened.close()
    print("reopened before the cuts ran" if opened_while_held else "ok")
    """
)


def test_a_segment_reopened_by_recovery_waits_for_the_cuts_its_close_queued(tmp_path):
    """Recovery closes a damaged sealed segment and opens its files again. The close queues
    cuts of the files to their lengths on the block releaser; the reopen must wait for them,
    or a cut that runs later takes pages from under the new maps (SIGBUS). Here the releaser
    is held by a slow job while recovery runs, in a process of its own (a SIGBUS kills it)."""
    done = subprocess.run([sys.executable, "-c", REOPEN_WHILE_THE_RELEASER_IS_HELD, str(tmp_path)], cwd=REPO,
                          capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": REPO})
    assert done.returncode == 0 and done.stdout.strip() == "ok", (done.returncode, done.stdout, done.stderr[-2000:])


def test_segments_before_the_recovery_point_are_not_rescanned(tmp_path):
    log = open_log(tmp_path, CONFIG)
    for _ in range(300):
        log.append(batch(count=1, value_size=500))
    first_path = log.segments[0].path
    directory = log.directory
    log.close()
    with open(first_path, "r+b") as handle:  # damage inside a checkpointed segment
        handle.seek(100)
        handle.write(b"\xff" * 4)
    reopened = open_log(tmp_path, CONFIG, clean_shutdown=False, recovery_point=250)
    assert reopened.log_end_offset == 300  # trusted: flushed before the recovery point
    reopened.close()
    assert os.path.exists(files.log_path(directory, 0))


@pytest.mark.parametrize("damage", ["zeros", "garbage", "truncated", "missing"])
def test_damaged_indexes_are_rebuilt(tmp_path, damage):
    log = open_log(tmp_path, CONFIG)
    for _ in range(200):
        log.append(batch(count=1, value_size=300))
    sealed = log.segments[0]
    entries = sealed.offset_index.entries
    index_path, time_path = sealed.offset_index.path, sealed.time_index.path
    log.close()
    for path in (index_path, time_path):
        if damage == "missing":
            os.unlink(path)
            continue
        with open(path, "r+b") as handle:
            if damage == "zeros":
                handle.seek(0, os.SEEK_END)
                handle.write(bytes(8 * 12 * 4))
            elif damage == "garbage":
                handle.seek(-8, os.SEEK_END)
                handle.write(b"\xff" * 8)
            else:
                handle.truncate(os.path.getsize(path) - 3)
    reopened = open_log(tmp_path, CONFIG)
    segment = reopened.segments[0]
    assert segment.offset_index.entries == entries
    for n in range(segment.offset_index.entries):
        offset, position = segment.offset_index.entry(n)
        assert segment.read_header(position).last_offset == offset
    assert [r.offset for r in read_all(reopened)] == list(range(200))
    assert reopened.offset_for_timestamp(1_000) == (0, 1_000)
    reopened.close()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_nonsense_written_anywhere_truncates_at_the_first_bad_batch(tmp_path_factory, data):
    tmp_path = tmp_path_factory.mktemp("garbage")
    path, ends = _log_with_batches(tmp_path, 12)
    position = data.draw(st.integers(0, ends[-1] - 1), label="position")
    garbage = data.draw(st.binary(min_size=1, max_size=64), label="garbage")
    with open(path, "r+b") as handle:
        handle.seek(position)
        original = handle.read(len(garbage))
        handle.seek(position)
        handle.write(garbage)
    changed_at = [position + i for i in range(len(garbage)) if i >= len(original) or original[i] != garbage[i]]
    # partitionLeaderEpoch (bytes 12-15 of a batch) is outside the CRC and carries no
    # record data: damage confined to it is invisible, as in Kafka.
    epoch_bytes = {s + k for s in [0] + ends[:-1] for k in range(12, 16)}
    changed = any(p not in epoch_bytes for p in changed_at)
    log = open_log(tmp_path, CONFIG, clean_shutdown=False)
    starts = [0] + ends[:-1]
    first_changed = min((p for p in changed_at if p not in epoch_bytes), default=None)
    # Batches before the damaged one are intact; the damaged one and all after are gone.
    if not changed or first_changed >= ends[-1]:
        expected_batches = 12
    else:
        expected_batches = next(i for i, (s, e) in enumerate(zip(starts, ends)) if e > first_changed)
    assert log.log_end_offset == 2 * expected_batches
    assert [r.offset for r in read_all(log)] == list(range(2 * expected_batches))
    log.close()
