"""Offset JSON, range splitting (minPartitions) and micro-batch bounds
(maxOffsetsPerTrigger), as Spark's Kafka source defines them."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipeline.offsets import (
    OffsetRange,
    OffsetsError,
    from_json_dict,
    parse_offsets_json,
    rate_limit,
    split_ranges,
    to_json_dict,
)


def test_offsets_json_round_trips_sorted() -> None:
    parsed = parse_offsets_json('{"b":{"1":5,"0":-2},"a":{"10":7,"2":-1}}', "startingOffsets")
    assert parsed == {("b", 1): 5, ("b", 0): -2, ("a", 10): 7, ("a", 2): -1}
    nested = to_json_dict(parsed)
    # Sorted by topic, then by partition number (not text): the engine compares JSON text.
    assert json.dumps(nested) == '{"a": {"2": -1, "10": 7}, "b": {"0": -2, "1": 5}}'
    assert from_json_dict(nested) == parsed
    assert from_json_dict(json.dumps(nested)) == parsed


@pytest.mark.parametrize("text, message", [
    ("[1]", "must be a JSON object of topics"),
    ('{"t": 3}', "must map to an object of partitions"),
    ('{"t": {"x": 1}}', "partition 'x' of topic 't' is not a number"),
    ('{"t": {"0": -3}}', "must be an integer >= 0, or -2 (earliest) or -1 (latest)"),
    ('{"t": {"0": true}}', "must be an integer"),
    ('{"t": {"0": 1.5}}', "must be an integer"),
    ("{", "is not valid JSON"),
])
def test_bad_offsets_json_names_the_problem(text: str, message: str) -> None:
    with pytest.raises(OffsetsError, match="startingOffsets") as caught:
        parse_offsets_json(text, "startingOffsets")
    assert message in str(caught.value)


def test_split_gives_pieces_in_proportion_to_size() -> None:
    ranges = [OffsetRange("t", 0, 0, 1000), OffsetRange("t", 1, 0, 10), OffsetRange("t", 2, 5, 5)]
    pieces = split_ranges(ranges, 10)
    by_partition: dict[int, list[OffsetRange]] = {}
    for piece in pieces:
        by_partition.setdefault(piece.partition, []).append(piece)
    assert len(by_partition[0]) == 10 and len(by_partition[1]) == 1
    assert 2 not in by_partition  # the empty range is dropped
    assert [p.size for p in by_partition[0]] == [100] * 10


def test_no_split_when_there_are_enough_ranges() -> None:
    ranges = [OffsetRange("t", p, 0, 100) for p in range(4)]
    assert split_ranges(ranges, 3) == ranges
    assert split_ranges(ranges, None) == ranges


@given(sizes=st.lists(st.integers(min_value=0, max_value=10_000), min_size=1, max_size=8),
       starts=st.lists(st.integers(min_value=0, max_value=10**9), min_size=8, max_size=8),
       wanted=st.integers(min_value=1, max_value=64))
def test_split_covers_every_offset_exactly_once(sizes: list[int], starts: list[int], wanted: int) -> None:
    ranges = [OffsetRange("t", p, starts[p], starts[p] + size) for p, size in enumerate(sizes)]
    pieces = split_ranges(ranges, wanted)
    for whole in ranges:
        mine = sorted((p for p in pieces if p.partition == whole.partition), key=lambda p: p.start)
        covered = [o for p in mine for o in range(p.start, p.until)] if whole.size < 50_000 else []
        assert covered == list(range(whole.start, whole.until))
        assert all(p.size > 0 for p in mine)


def test_rate_limit_shares_in_proportion_and_never_passes_latest() -> None:
    start = {("t", 0): 0, ("t", 1): 0, ("t", 2): 100}
    latest = {("t", 0): 900, ("t", 1): 100, ("t", 2): 100}
    assert rate_limit(start, latest, 100) == {("t", 0): 90, ("t", 1): 10, ("t", 2): 100}
    # A share below one record rounds up, so a small partition still moves.
    assert rate_limit({("a", 0): 0, ("b", 0): 0}, {("a", 0): 10_000, ("b", 0): 1}, 100) == {("a", 0): 99, ("b", 0): 1}
    # Nothing waiting: the latest offsets as they are.
    assert rate_limit(latest, latest, 10) == latest
    # A limit larger than what waits: everything.
    assert rate_limit(start, latest, 10_000) == latest


@given(sizes=st.lists(st.integers(min_value=0, max_value=100_000), min_size=1, max_size=6),
       limit=st.integers(min_value=1, max_value=50_000))
def test_rate_limit_bounds(sizes: list[int], limit: int) -> None:
    start = {("t", p): 0 for p in range(len(sizes))}
    latest = {("t", p): size for p, size in enumerate(sizes)}
    end = rate_limit(start, latest, limit)
    taken = sum(end[tp] - start[tp] for tp in start)
    assert all(start[tp] <= end[tp] <= latest[tp] for tp in start)
    # At most the limit, plus one per partition for the rounded-up small shares.
    assert taken <= limit + len(sizes)
    assert taken >= min(limit, sum(sizes)) - len(sizes) or taken == sum(sizes)
