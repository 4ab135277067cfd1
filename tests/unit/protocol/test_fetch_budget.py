"""Fetch's byte limits over real segment files: max_bytes across the response's partitions
and partition_max_bytes per partition, as Kafka's readFromLog spends them (KIP-74),
with whole batches only."""

from __future__ import annotations

import os
import random

import pytest

from broker.apis.fetch import ResponseBudget
from storage.config import LogConfig
from storage.log import PartitionLog
from storage.types import TopicPartition
from tests.unit.storage.helpers import batch


def _log(tmp_path, index: int, value_sizes: list[int]) -> tuple[PartitionLog, list[int]]:
    """A partition of one-record batches of these value sizes, and its batches' lengths."""
    tp = TopicPartition("big", index)
    log = PartitionLog(os.path.join(str(tmp_path), tp.dir_name), tp, LogConfig())
    for size in value_sizes:
        log.append(batch(count=1, value_size=size))
    return log, [h.size for h in log.iter_batch_headers()]


def _respond(logs: list[PartitionLog], partition_max: list[int], max_bytes: int) -> list[int]:
    """Bytes each partition sends: the owner's read (fetch._resolve caps a partition at the
    response's max_bytes), then the budget in request order, as fetch.respond spends it."""
    budget = ResponseBudget(max_bytes)
    sent = []
    for log, pmax in zip(logs, partition_max):
        item_max = min(pmax, max_bytes)
        fr = log.read(0, item_max, min_one_batch=True, committed=True).file_range
        length = fr.length if fr is not None else 0
        if length and budget.exhausted(item_max):
            length = 0
        if length:
            length = budget.take(fr.fd, fr.position, length, item_max)
        sent.append(length)
    return sent


def _kafka(batches: list[list[int]], partition_max: list[int], max_bytes: int) -> list[int]:
    """Kafka's rule over batch lengths: min(partition max, what is left) of whole batches,
    the first partition with data at least its first batch."""
    left, first, out = max_bytes, True, []
    for lengths, pmax in zip(batches, partition_max):
        limit, taken = min(pmax, left), 0
        for i, length in enumerate(lengths):
            if taken + length > limit and not (i == 0 and first):
                break
            taken += length
        if taken:
            first = False
        left = max(0, left - taken)
        out.append(taken)
    return out


def _close(logs: list[PartitionLog]) -> None:
    for log in logs:
        log.close()


def test_max_bytes_is_spent_across_partitions_in_order(tmp_path):
    made = [_log(tmp_path, i, [3000] * 4) for i in range(4)]
    logs, lengths = [m[0] for m in made], [m[1] for m in made]
    one = lengths[0][0]
    max_bytes = 5 * one + 100  # four batches of the first partition, one of the second
    sent = _respond(logs, [1 << 20] * 4, max_bytes)
    assert sent == [4 * one, one, 0, 0]
    assert sum(sent) <= max_bytes
    _close(logs)


def test_first_partition_over_the_limit_goes_whole_and_the_rest_wait(tmp_path):
    made = [_log(tmp_path, 0, [50_000, 10]), _log(tmp_path, 1, [10]), _log(tmp_path, 2, [10])]
    logs, lengths = [m[0] for m in made], [m[1] for m in made]
    sent = _respond(logs, [1 << 20] * 3, 20_000)
    assert sent == [lengths[0][0], 0, 0]  # its first batch alone, whole; nothing left for the others
    _close(logs)


def test_an_empty_partition_does_not_use_up_the_first_batch_exception(tmp_path):
    made = [_log(tmp_path, 0, []), _log(tmp_path, 1, [50_000]), _log(tmp_path, 2, [50_000])]
    logs, lengths = [m[0] for m in made], [m[1] for m in made]
    assert _respond(logs, [1 << 20] * 3, 20_000) == [0, lengths[1][0], 0]
    _close(logs)


def test_a_later_partition_is_trimmed_to_the_batches_that_fit_what_is_left(tmp_path):
    made = [_log(tmp_path, 0, [6000]), _log(tmp_path, 1, [1000] * 10), _log(tmp_path, 2, [100] * 3)]
    logs, lengths = [m[0] for m in made], [m[1] for m in made]
    small = lengths[1][0]
    max_bytes = lengths[0][0] + 3 * small + small // 2
    sent = _respond(logs, [1 << 20] * 3, max_bytes)
    # Three whole batches of the second; the half batch left over still holds a small one.
    tiny = lengths[2][0]
    assert sent == [lengths[0][0], 3 * small, (small // 2) // tiny * tiny]
    assert sent[2] > 0 and sum(sent) <= max_bytes
    _close(logs)


def test_partition_max_bytes_bounds_each_partition(tmp_path):
    made = [_log(tmp_path, 0, [1000] * 5), _log(tmp_path, 1, [5000, 10]), _log(tmp_path, 2, [1000] * 5)]
    logs, lengths = [m[0] for m in made], [m[1] for m in made]
    one = lengths[0][0]
    pmax = [2 * one + 1, 2 * one + 1, 3 * one]
    sent = _respond(logs, pmax, 1 << 20)
    # The second's first batch is over its partition_max_bytes and it is not the first
    # partition with data: it sends nothing (Kafka's minOneMessage is spent).
    assert sent == [2 * one, 0, 3 * one]
    _close(logs)


def test_the_first_partition_with_data_goes_over_its_partition_max_too(tmp_path):
    made = [_log(tmp_path, 0, [5000, 10]), _log(tmp_path, 1, [10])]
    logs, lengths = [m[0] for m in made], [m[1] for m in made]
    assert _respond(logs, [100, 1 << 20], 1 << 20) == [lengths[0][0], lengths[1][0]]
    _close(logs)


def test_everything_fitting_reads_no_batch_prefix():
    # fd -1: a read would raise EBADF.
    budget = ResponseBudget(10_000)
    assert [budget.take(-1, 0, n, 1 << 20) for n in (4000, 3000, 2000)] == [4000, 3000, 2000]
    assert budget.left == 1000


def test_a_full_response_skips_the_remaining_partitions_without_reading():
    budget = ResponseBudget(100)
    assert budget.take(-1, 0, 100, 1 << 20) == 100  # fits exactly
    assert budget.exhausted(1 << 20)  # nothing left: no file is opened for the next ones
    fresh = ResponseBudget(0)
    assert not fresh.exhausted(0)  # the first partition with data always goes


@pytest.mark.parametrize("seed", range(40))
def test_agrees_with_kafkas_rule(tmp_path, seed):
    rng = random.Random(seed)
    count = rng.randint(1, 6)
    sizes = [[rng.choice((10, 200, 1500, 6000, 30_000)) for _ in range(rng.randint(0, 6))] for _ in range(count)]
    made = [_log(tmp_path, i, s) for i, s in enumerate(sizes)]
    logs, lengths = [m[0] for m in made], [m[1] for m in made]
    partition_max = [rng.choice((0, 100, 5000, 40_000, 1 << 20)) for _ in range(count)]
    max_bytes = rng.choice((0, 100, 3000, 20_000, 60_000, 1 << 20))
    assert _respond(logs, partition_max, max_bytes) == _kafka(lengths, partition_max, max_bytes)
    _close(logs)
