"""LeaderEpochCache with a real leader-epoch-checkpoint file (Kafka's LeaderEpochFileCache rules)."""

from __future__ import annotations

import os

import pytest

from storage.leader_epochs import FILE_NAME, UNDEFINED_EPOCH, UNDEFINED_OFFSET, LeaderEpochCache

UNDEFINED = (UNDEFINED_EPOCH, UNDEFINED_OFFSET)


def _cache(tmp_path, entries=()) -> LeaderEpochCache:
    cache = LeaderEpochCache(str(tmp_path))
    for epoch, start in entries:
        cache.assign(epoch, start)
    return cache


def _file_text(tmp_path) -> str:
    with open(os.path.join(str(tmp_path), FILE_NAME), encoding="utf-8") as f:
        return f.read()


# ----------------------------------------------------------------- assign / latest


def test_an_empty_cache_has_no_epoch_and_no_file(tmp_path):
    cache = _cache(tmp_path)
    assert cache.entries == []
    assert cache.latest_epoch == UNDEFINED_EPOCH
    assert not cache.file_existed
    assert not os.path.exists(cache.path)


def test_assign_appends_in_order_and_tracks_the_latest_epoch(tmp_path):
    cache = _cache(tmp_path, [(0, 0), (2, 10), (5, 30)])
    assert cache.entries == [(0, 0), (2, 10), (5, 30)]
    assert cache.latest_epoch == 5


def test_assign_of_the_latest_epoch_at_a_later_offset_changes_nothing(tmp_path):
    cache = _cache(tmp_path, [(0, 0), (2, 10)])
    cache.assign(2, 15)
    cache.assign(2, 10)
    assert cache.entries == [(0, 0), (2, 10)]


def test_assign_of_the_latest_epoch_at_an_earlier_offset_moves_its_start_back(tmp_path):
    cache = _cache(tmp_path, [(0, 0), (2, 10)])
    cache.assign(2, 7)
    assert cache.entries == [(0, 0), (2, 7)]


def test_assign_of_a_negative_epoch_is_ignored(tmp_path):
    cache = _cache(tmp_path, [(1, 0)])
    cache.assign(-1, 5)
    assert cache.entries == [(1, 0)]


def test_assign_of_a_lower_epoch_drops_every_entry_it_contradicts(tmp_path):
    cache = _cache(tmp_path, [(0, 0), (2, 10), (4, 20), (6, 30)])
    # Epoch 3 from offset 25: (4, 20) and (6, 30) are as new; (6, 30) also starts later.
    cache.assign(3, 25)
    assert cache.entries == [(0, 0), (2, 10), (3, 25)]
    assert cache.latest_epoch == 3


def test_assign_with_an_equal_or_earlier_start_drops_entries_starting_there_or_later(tmp_path):
    cache = _cache(tmp_path, [(0, 0), (2, 10), (4, 20)])
    # A higher epoch at the start of an existing one replaces it (start >= new start).
    cache.assign(7, 20)
    assert cache.entries == [(0, 0), (2, 10), (7, 20)]
    # A higher epoch starting before later entries drops them too.
    cache.assign(9, 10)
    assert cache.entries == [(0, 0), (9, 10)]


def test_assign_of_an_equal_epoch_that_is_not_the_latest_replaces_it_and_what_follows(tmp_path):
    cache = _cache(tmp_path, [(0, 0), (2, 10), (4, 20)])
    cache.assign(2, 12)
    assert cache.entries == [(0, 0), (2, 12)]


def test_assign_writes_the_file_each_time(tmp_path):
    cache = _cache(tmp_path, [(0, 0)])
    assert _file_text(tmp_path) == "0\n1\n0 0\n"
    cache.assign(3, 9)
    assert _file_text(tmp_path) == "0\n2\n0 0\n3 9\n"


# ----------------------------------------------------------------- end_offset_for


@pytest.fixture
def known(tmp_path) -> LeaderEpochCache:
    return _cache(tmp_path, [(2, 10), (4, 20), (7, 35)])


def test_end_offset_for_the_undefined_epoch(known):
    assert known.end_offset_for(UNDEFINED_EPOCH, 50) == UNDEFINED


def test_end_offset_for_an_empty_cache_is_undefined(tmp_path):
    assert _cache(tmp_path).end_offset_for(0, 50) == UNDEFINED


def test_end_offset_for_the_latest_epoch_is_the_log_end(known):
    assert known.end_offset_for(7, 50) == (7, 50)


def test_end_offset_for_an_epoch_in_the_middle_is_the_next_epochs_start(known):
    assert known.end_offset_for(2, 50) == (2, 20)
    assert known.end_offset_for(4, 50) == (4, 35)


def test_end_offset_for_an_epoch_between_two_known_ones(known):
    # Epoch 3 is unknown: the floor epoch 2 ends where epoch 4 starts.
    assert known.end_offset_for(3, 50) == (2, 20)
    assert known.end_offset_for(5, 50) == (4, 35)
    assert known.end_offset_for(6, 50) == (4, 35)


def test_end_offset_for_an_epoch_older_than_the_first(known):
    assert known.end_offset_for(0, 50) == (0, 10)
    assert known.end_offset_for(1, 50) == (1, 10)


def test_end_offset_for_a_future_epoch_is_undefined(known):
    assert known.end_offset_for(8, 50) == UNDEFINED
    assert known.end_offset_for(1 << 30, 50) == UNDEFINED


def test_epoch_at(known):
    assert known.epoch_at(0) == UNDEFINED_EPOCH
    assert known.epoch_at(9) == UNDEFINED_EPOCH
    assert known.epoch_at(10) == 2
    assert known.epoch_at(19) == 2
    assert known.epoch_at(20) == 4
    assert known.epoch_at(34) == 4
    assert known.epoch_at(35) == 7
    assert known.epoch_at(10_000) == 7


# ----------------------------------------------------------------- truncation


def test_truncate_from_end_forgets_epochs_starting_at_or_after_the_new_end(tmp_path):
    cache = _cache(tmp_path, [(0, 0), (2, 10), (4, 20), (7, 35)])
    cache.truncate_from_end(40)
    assert cache.entries == [(0, 0), (2, 10), (4, 20), (7, 35)]
    cache.truncate_from_end(35)
    assert cache.entries == [(0, 0), (2, 10), (4, 20)]
    cache.truncate_from_end(15)
    assert cache.entries == [(0, 0), (2, 10)]
    assert LeaderEpochCache(str(tmp_path)).entries == [(0, 0), (2, 10)]
    cache.truncate_from_end(0)
    assert cache.entries == []
    assert cache.latest_epoch == UNDEFINED_EPOCH
    assert _file_text(tmp_path) == "0\n0\n"


def test_truncate_from_start_moves_the_epoch_holding_the_new_start(tmp_path):
    cache = _cache(tmp_path, [(0, 0), (2, 10), (4, 20), (7, 35)])
    cache.truncate_from_start(15)
    assert cache.entries == [(2, 15), (4, 20), (7, 35)]
    assert LeaderEpochCache(str(tmp_path)).entries == [(2, 15), (4, 20), (7, 35)]
    cache.truncate_from_start(20)  # exactly at an epoch's start
    assert cache.entries == [(4, 20), (7, 35)]
    cache.truncate_from_start(20)  # already there: nothing changes
    assert cache.entries == [(4, 20), (7, 35)]
    cache.truncate_from_start(100)  # past every start: the latest epoch starts there
    assert cache.entries == [(7, 100)]
    assert _file_text(tmp_path) == "0\n1\n7 100\n"


def test_truncate_from_start_before_the_first_entry_changes_nothing(tmp_path):
    cache = _cache(tmp_path, [(3, 10), (5, 20)])
    cache.truncate_from_start(4)
    assert cache.entries == [(3, 10), (5, 20)]


def test_rebuild_from_batches_keeps_each_epochs_first_batch(tmp_path):
    cache = _cache(tmp_path, [(9, 0)])
    cache.rebuild([(-1, 0), (0, 1), (0, 3), (2, 5), (2, 8), (1, 9), (5, 12)])
    assert cache.entries == [(0, 1), (2, 5), (5, 12)]
    assert LeaderEpochCache(str(tmp_path)).entries == [(0, 1), (2, 5), (5, 12)]


def test_clear(tmp_path):
    cache = _cache(tmp_path, [(0, 0), (1, 5)])
    cache.clear()
    assert cache.entries == []
    assert _file_text(tmp_path) == "0\n0\n"


# ----------------------------------------------------------------- the file


def test_the_checkpoint_has_kafkas_text_format_and_survives_reopening(tmp_path):
    _cache(tmp_path, [(0, 0), (3, 42), (12, 1_000_000_000_000)])
    assert _file_text(tmp_path) == "0\n3\n0 0\n3 42\n12 1000000000000\n"
    assert not os.path.exists(os.path.join(str(tmp_path), FILE_NAME + ".tmp"))
    reopened = LeaderEpochCache(str(tmp_path))
    assert reopened.file_existed
    assert reopened.entries == [(0, 0), (3, 42), (12, 1_000_000_000_000)]
    assert reopened.latest_epoch == 12
    assert reopened.end_offset_for(3, 2_000_000_000_000) == (3, 1_000_000_000_000)


def test_a_file_written_by_kafka_is_read(tmp_path):
    with open(os.path.join(str(tmp_path), FILE_NAME), "w", encoding="utf-8") as f:
        f.write("0\n2\n0 0\n1 57\n")
    cache = LeaderEpochCache(str(tmp_path))
    assert cache.file_existed
    assert cache.entries == [(0, 0), (1, 57)]


def test_an_empty_file_exists_but_holds_no_epochs(tmp_path):
    open(os.path.join(str(tmp_path), FILE_NAME), "w").close()
    cache = LeaderEpochCache(str(tmp_path))
    assert cache.file_existed
    assert cache.entries == []


@pytest.mark.parametrize(
    "lines, kept",
    [
        (["0 0", "2 10", "1 20", "5 30"], [(0, 0), (2, 10)]),  # epoch goes back
        (["0 0", "2 10", "2 20"], [(0, 0), (2, 10)]),  # epoch repeated
        (["0 0", "2 10", "3 5", "4 30"], [(0, 0), (2, 10)]),  # start offset goes back
        (["4 7", "1 9"], [(4, 7)]),
    ],
)
def test_a_non_monotonic_file_keeps_only_its_monotonic_prefix(tmp_path, lines, kept):
    with open(os.path.join(str(tmp_path), FILE_NAME), "w", encoding="utf-8") as f:
        f.write(f"0\n{len(lines)}\n" + "".join(line + "\n" for line in lines))
    cache = LeaderEpochCache(str(tmp_path))
    assert cache.entries == kept
    assert cache.latest_epoch == kept[-1][0]
