"""The finalized-features store: Kafka's FeatureZNode format (versions 1 and 2), and the
local file's read-modify-write with its growing epoch (real files in a tmp dir)."""

from __future__ import annotations

import threading
from pathlib import Path

import orjson
import pytest

from coordination.feature_store import NO_EPOCH, LocalFeatures, decode, encode
from coordination.finalized_features import FinalizedFeatures, default_levels


def test_kafkas_feature_znodes_of_either_version_are_read() -> None:
    v1 = {"version": 1, "status": 1, "features": {"transaction.version": {"min_version_level": 1, "max_version_level": 2},
                                                  "group.version": {"min_version_level": 0, "max_version_level": 0}}}
    assert decode("/feature", v1) == {"transaction.version": 2}  # a level of 0 is no finalized feature
    v2 = orjson.loads(encode({"transaction.version": 1, "share.version": 0}, 7))
    assert v2 == {"version": 2, "status": 1, "epoch": 7, "features": {"transaction.version": {"max_version_level": 1}}}
    assert decode("/feature", v2) == {"transaction.version": 1}
    for bad in ({"version": 3, "features": {}}, {"version": 2}, {"version": 2, "features": {"x": {"level": 1}}}):
        with pytest.raises(ValueError):
            decode("/feature", bad)


def test_the_local_file_keeps_levels_and_a_growing_epoch(tmp_path: Path) -> None:
    store = LocalFeatures(str(tmp_path))
    assert store.read() == ({}, NO_EPOCH)
    seen: list[object] = []
    levels, first = store.update(lambda current: seen.append(current) or {"transaction.version": 1, "group.version": 1})
    assert seen == [None] and levels == {"transaction.version": 1, "group.version": 1} and first > 0
    levels, second = store.update(lambda current: {**(current or {}), "transaction.version": 0})
    assert levels == {"group.version": 1} and second > first
    assert LocalFeatures(str(tmp_path)).read() == ({"group.version": 1}, second)  # another process reads the same


def test_a_reader_starts_at_the_defaults_and_follows_the_file(tmp_path: Path) -> None:
    reader = FinalizedFeatures(LocalFeatures(str(tmp_path)), default_levels(2))
    changed = threading.Event()
    reader.on_change(lambda levels, epoch: changed.set())
    reader.start()
    try:
        levels, _epoch = reader.snapshot()
        assert levels == {"transaction.version": 2, "group.version": 1, "share.version": 1}
        writer = FinalizedFeatures(LocalFeatures(str(tmp_path)), default_levels(2))
        _levels, epoch = writer.update(lambda current: {**current, "transaction.version": 1})
        assert changed.wait(5)
        assert reader.snapshot() == ({"transaction.version": 1, "group.version": 1, "share.version": 1}, epoch)
        assert reader.level("transaction.version") == 1 and reader.level("no.such.feature") == 0
    finally:
        reader.close()
