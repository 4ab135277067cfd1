"""whole_batches_within over a real segment file: cuts at batch boundaries only."""

from __future__ import annotations

import os

from storage.batch_cut import whole_batches_within
from tests.unit.storage.helpers import batch, open_log

SIZES = (300, 1000, 50, 2000)  # value sizes: batches of different lengths


def _log_with_batches(tmp_path):
    log = open_log(tmp_path)
    for size in SIZES:
        log.append(batch(count=1, value_size=size))
    file_range = log.read(0, 1 << 20).file_range
    assert file_range is not None
    lengths = [h.size for h in log.iter_batch_headers()]
    assert sum(lengths) == file_range.length and len(lengths) == len(SIZES)
    return log, file_range, lengths


def test_a_range_that_fits_is_not_read(tmp_path):
    # fd -1: any read would raise EBADF, so a fitting range costs no syscall.
    assert whole_batches_within(-1, 0, 500, 500, at_least_one=False) == 500
    assert whole_batches_within(-1, 0, 500, 10_000, at_least_one=True) == 500


def test_cut_lands_on_the_last_boundary_within_the_limit(tmp_path):
    log, fr, lengths = _log_with_batches(tmp_path)
    first_two = lengths[0] + lengths[1]
    for limit, want in [(first_two, first_two), (first_two + 1, first_two), (first_two - 1, lengths[0]),
                        (first_two + lengths[2], first_two + lengths[2]), (fr.length - 1, fr.length - lengths[3])]:
        got = whole_batches_within(fr.fd, fr.position, fr.length, limit, at_least_one=False)
        assert got == want, (limit, got, want)
        assert got <= limit
    log.close()


def test_first_batch_over_the_limit_goes_whole_only_when_asked(tmp_path):
    log, fr, lengths = _log_with_batches(tmp_path)
    for limit in (0, 1, lengths[0] - 1):
        assert whole_batches_within(fr.fd, fr.position, fr.length, limit, at_least_one=True) == lengths[0]
        assert whole_batches_within(fr.fd, fr.position, fr.length, limit, at_least_one=False) == 0
    log.close()


def test_a_range_starting_mid_file_is_cut_from_its_own_start(tmp_path):
    log, fr, lengths = _log_with_batches(tmp_path)
    later = log.read(2, 1 << 20).file_range  # from the third batch
    assert later is not None and later.position == fr.position + lengths[0] + lengths[1]
    assert whole_batches_within(later.fd, later.position, later.length, lengths[2] + 10, at_least_one=False) == lengths[2]
    log.close()


def test_a_torn_tail_ends_the_walk_at_the_last_whole_batch(tmp_path):
    path = os.path.join(str(tmp_path), "torn.log")
    whole = batch(count=1, value_size=100)
    with open(path, "wb") as f:
        f.write(whole + batch(count=1, value_size=400)[:200])
    fd = os.open(path, os.O_RDONLY)
    try:
        total = os.fstat(fd).st_size
        assert whole_batches_within(fd, 0, total, total - 1, at_least_one=False) == len(whole)
        # Past the file's end the prefix read comes back short: nothing more is counted.
        assert whole_batches_within(fd, total - 5, 10_000, 5_000, at_least_one=True) == 0
    finally:
        os.close(fd)


def test_a_malformed_length_prefix_ends_the_walk(tmp_path):
    path = os.path.join(str(tmp_path), "bad.log")
    whole = batch(count=1, value_size=100)
    with open(path, "wb") as f:
        f.write(whole + bytes(12) + bytes(100))  # batchLength 0: no batch is that short
    fd = os.open(path, os.O_RDONLY)
    try:
        total = os.fstat(fd).st_size
        assert whole_batches_within(fd, 0, total, total - 1, at_least_one=True) == len(whole)
        assert whole_batches_within(fd, len(whole), total - len(whole), 10, at_least_one=True) == 0
    finally:
        os.close(fd)
