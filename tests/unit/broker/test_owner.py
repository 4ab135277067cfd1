"""Owner (broker/partitions/owner.py) over a real LogManager and a real topic registry in
temporary directories: appends and reads land in and come from real segment files, a
producer's retry is answered with its first offsets, and every expected failure (unknown
partition, not the leader, a fenced coordinator, a corrupt or refused batch) is an error
code in that item's result, never an exception."""

from __future__ import annotations

import os

import pytest

from broker.partitions.partition_ops import (
    LOG_END,
    AppendItem,
    AppendResult,
    DeleteItem,
    EpochEndResult,
    EpochItem,
    OffsetItem,
    OffsetResult,
    PartitionState,
    ReadItem,
)
from broker.protocol.errors import ErrorCode
from storage.batch import COMPRESSION_ZSTD
from storage.types import TopicPartition
from tests.unit.broker.partition_world import NODE, World, batch, values_at

EARLIEST, LATEST = -2, -1


@pytest.fixture
def world(tmp_path):
    built = World(str(tmp_path))
    yield built
    built.close()


def read(world: World, tp: TopicPartition, offset: int, refuse_zstd: bool = False, watcher: int | None = None):
    (result,) = world.owner.read([ReadItem(tp, offset, 1 << 20, refuse_zstd)], watcher)
    return result


def test_appends_land_in_the_segment_and_reads_point_at_them(world):
    (tp,) = world.topic("events")
    first, second = world.owner.append([AppendItem(tp, batch(3, b"a"), 9), AppendItem(tp, batch(2, b"b"), 9)])
    assert (first.error_code, first.base_offset, first.record_count, first.high_watermark) == (0, 0, 3, 3)
    assert (second.error_code, second.base_offset, second.record_count, second.high_watermark) == (0, 3, 2, 5)
    assert [(t, info.first_offset) for t, info in world.appends] == [(tp, 0), (tp, 3)]

    result = read(world, tp, 1)
    assert result.error_code == 0
    assert (result.high_watermark, result.log_start_offset, result.log_end_offset) == (5, 0, 5)
    # The range starts at the batch holding offset 1; the inode names the file read.
    assert os.stat(result.path).st_ino == result.inode
    assert values_at(result.path, result.position, result.length) == [
        (0, b"a0"), (1, b"a1"), (2, b"a2"), (3, b"b0"), (4, b"b1")]

    caught_up = read(world, tp, 5)
    assert (caught_up.error_code, caught_up.length, caught_up.high_watermark) == (0, 0, 5)
    assert read(world, tp, 6).error_code == ErrorCode.offset_out_of_range


def test_unknown_topics_and_partitions_are_codes_for_their_items_only(world):
    (tp,) = world.topic("known")
    unknown_topic, unknown_partition = TopicPartition("nope", 0), TopicPartition("known", 1)
    results = world.owner.append([AppendItem(unknown_topic, batch(), 9), AppendItem(tp, batch(), 9),
                                  AppendItem(unknown_partition, batch(), 9)])
    assert [r.error_code for r in results] == [ErrorCode.unknown_topic_or_partition, 0,
                                               ErrorCode.unknown_topic_or_partition]
    missing = [unknown_topic, unknown_partition]
    assert {r.error_code for r in world.owner.read([ReadItem(t, 0, 100, False) for t in missing], None)} == {
        ErrorCode.unknown_topic_or_partition}
    assert world.owner.list_offsets([OffsetItem(t, LATEST) for t in missing]) == [
        OffsetResult(ErrorCode.unknown_topic_or_partition)] * 2
    assert world.owner.delete_records([DeleteItem(t, 0) for t in missing]) == [
        OffsetResult(ErrorCode.unknown_topic_or_partition)] * 2
    assert world.owner.epoch_end_offsets([EpochItem(t, -1, 0) for t in missing]) == [
        EpochEndResult(ErrorCode.unknown_topic_or_partition)] * 2
    assert world.owner.partition_state([unknown_topic, tp]) == [PartitionState(-1, -1, -1), PartitionState(0, 1, 1)]
    # Nothing was created for them on disk.
    assert world.logs.get_log(unknown_topic) is None and world.logs.get_log(unknown_partition) is None


def test_a_partition_another_worker_owns_is_unknown_here(tmp_path):
    mine, theirs = TopicPartition("split", 0), TopicPartition("split", 1)
    world = World(str(tmp_path), owned={mine})
    try:
        world.topic("split", 2)
        results = world.owner.append([AppendItem(mine, batch(), 9), AppendItem(theirs, batch(), 9)])
        assert [r.error_code for r in results] == [0, ErrorCode.unknown_topic_or_partition]
        assert world.logs.get_log(theirs) is None
    finally:
        world.close()


def test_a_follower_refuses_producers_consumers_and_deletions(world):
    (tp,) = world.topic("followed", replicas=[2, NODE], leader=2, epoch=4)
    assert world.replication.followed[tp].leader == 2
    assert world.owner.append([AppendItem(tp, batch(), 9)])[0].error_code == ErrorCode.not_leader_or_follower
    assert read(world, tp, 0).error_code == ErrorCode.not_leader_or_follower
    assert world.owner.list_offsets([OffsetItem(tp, LATEST)])[0].error_code == ErrorCode.not_leader_or_follower
    assert world.owner.epoch_end_offsets([EpochItem(tp, -1, 0)])[0].error_code == ErrorCode.not_leader_or_follower
    # The leader decides where the log starts; a follower learns it by fetching.
    assert world.owner.delete_records([DeleteItem(tp, 0)])[0].error_code == ErrorCode.not_leader_or_follower
    # Its state is still there to read (the follower's own log).
    assert world.owner.partition_state([tp]) == [PartitionState(0, 0, 0)]


def test_a_producer_retry_is_answered_with_its_first_offsets_and_a_gap_is_refused(world):
    (tp,) = world.topic("idempotent")
    owner = world.owner
    first = owner.append([AppendItem(tp, batch(2, b"x", producer_id=7, base_sequence=0), 9)])[0]
    assert (first.error_code, first.base_offset) == (0, 0)
    retry = owner.append([AppendItem(tp, batch(2, b"x", producer_id=7, base_sequence=0), 9)])[0]
    assert (retry.error_code, retry.base_offset) == (0, 0)
    assert world.logs.get_log(tp).log_end_offset == 2, "the retry was not written again"
    gap = owner.append([AppendItem(tp, batch(1, producer_id=7, base_sequence=5), 9)])[0]
    assert gap.error_code == ErrorCode.out_of_order_sequence_number
    assert gap.error_message and "producer 7" in gap.error_message
    following = owner.append([AppendItem(tp, batch(1, b"y", producer_id=7, base_sequence=2), 9)])[0]
    assert (following.error_code, following.base_offset) == (0, 2)
    other = owner.append([AppendItem(tp, batch(1, producer_id=8, base_sequence=0), 9)])[0]
    assert (other.error_code, other.base_offset) == (0, 3)
    assert [info.first_offset for _tp, info in world.appends] == [0, 2, 3], "a retry is no new append"


def test_bad_batches_are_error_codes(world):
    (tp,) = world.topic("strict")
    good = batch(1, producer_id=9, base_sequence=0)
    broken = bytearray(good)
    broken[-1] ^= 0xFF  # the CRC no longer matches
    zstd = batch(1, compression=COMPRESSION_ZSTD)
    results = world.owner.append([AppendItem(tp, b"short", 9), AppendItem(tp, bytes(broken), 9),
                                  AppendItem(tp, zstd, 6), AppendItem(tp, good, 9), AppendItem(tp, zstd, 7)])
    assert [r.error_code for r in results] == [ErrorCode.corrupt_message, ErrorCode.corrupt_message,
                                               ErrorCode.unsupported_compression_type, 0, 0]
    assert [r.base_offset for r in results[3:]] == [0, 1]
    # A fetch below v10 cannot read zstd: the range holding it is refused, not sent.
    assert read(world, tp, 1, refuse_zstd=True).error_code == ErrorCode.unsupported_compression_type
    assert read(world, tp, 1).error_code == 0
    assert read(world, tp, 0, refuse_zstd=True).error_code == ErrorCode.unsupported_compression_type, \
        "the range from offset 0 reaches the zstd batch too"


def test_a_deposed_coordinator_cannot_append(tmp_path):
    world = World(str(tmp_path), fence_epoch=5)
    try:
        tps = world.topic("__consumer_offsets", 2)
        items = [AppendItem(tp, batch(), 9) for tp in tps]
        refused = world.owner.append(items, fence_epoch=4)
        assert [r.error_code for r in refused] == [ErrorCode.not_coordinator] * 2
        assert "fenced by 5" in (refused[0].error_message or "")
        assert world.owner.partition_state(tps) == [PartitionState(0, 0, 0)] * 2
        assert [r.error_code for r in world.owner.append(items, fence_epoch=5)] == [0, 0]
        assert [r.error_code for r in world.owner.append(items)] == [0, 0], "not the coordinator's: no fence"
    finally:
        world.close()


def test_list_offsets_by_timestamp_and_marks(world):
    (tp,) = world.topic("timed")
    world.owner.append([AppendItem(tp, batch(3, timestamp=1_000), 9), AppendItem(tp, batch(3, timestamp=2_000), 9)])
    results = world.owner.list_offsets([OffsetItem(tp, EARLIEST), OffsetItem(tp, LATEST), OffsetItem(tp, LOG_END),
                                        OffsetItem(tp, 1_001), OffsetItem(tp, 1_500), OffsetItem(tp, 9_999)])
    assert [(r.error_code, r.offset) for r in results] == [(0, 0), (0, 6), (0, 6), (0, 1), (0, 3), (0, -1)]
    assert results[3].timestamp == 1_001 and results[4].timestamp == 2_000
    assert results[2].leader_epoch == 0


def test_delete_records_moves_the_log_start_up_to_the_high_watermark(world):
    (tp,) = world.topic("trimmed")
    world.owner.append([AppendItem(tp, batch(5), 9)])
    assert world.owner.delete_records([DeleteItem(tp, 2)]) == [OffsetResult(0, 2)]
    assert world.owner.delete_records([DeleteItem(tp, 9)])[0].error_code == ErrorCode.offset_out_of_range
    assert world.owner.partition_state([tp]) == [PartitionState(2, 5, 5)]
    assert read(world, tp, 1).error_code == ErrorCode.offset_out_of_range
    assert world.owner.delete_records([DeleteItem(tp, -1)]) == [OffsetResult(0, 5)], "-1: the high watermark"
    assert world.owner.list_offsets([OffsetItem(tp, EARLIEST)])[0].offset == 5


def test_epoch_end_offsets_and_the_fence_on_a_stale_epoch(world):
    (tp,) = world.topic("epochs", epoch=0)
    world.owner.append([AppendItem(tp, batch(2), 9)])
    world.set_view(tp, [NODE], NODE, 3)  # re-elected: epoch 3 starts at offset 2
    world.replication.apply(world.views.items())
    world.owner.append([AppendItem(tp, batch(1), 9)])
    results = world.owner.epoch_end_offsets([EpochItem(tp, -1, 0), EpochItem(tp, 3, 3), EpochItem(tp, 2, 0),
                                             EpochItem(tp, 4, 0)])
    assert results == [EpochEndResult(0, 0, 2), EpochEndResult(0, 3, 3), EpochEndResult(ErrorCode.fenced_leader_epoch),
                       EpochEndResult(ErrorCode.unknown_leader_epoch)]
    (stale,) = world.owner.read([ReadItem(tp, 0, 100, False, -1, 2)], None)
    assert (stale.error_code, stale.leader_epoch) == (ErrorCode.fenced_leader_epoch, 3)


def test_a_read_notes_the_other_workers_waiting_on_the_partition(world):
    tp, other = world.topic("watched", 2)
    world.owner.read([ReadItem(tp, 0, 100, False), ReadItem(other, 0, 100, False)], 3)
    world.owner.read([ReadItem(tp, 0, 100, False)], 2)
    world.owner.read([ReadItem(tp, 0, 100, False)], world.owner.index)  # its own: woken locally
    world.owner.read([ReadItem(other, 0, 100, False)], None)
    assert world.owner.remote_watchers == {tp: {2, 3}, other: {3}}


def test_sync_registry_is_idempotent_and_drops_deleted_topics(world):
    tps = world.topic("synced", 2)
    world.owner.append([AppendItem(tps[0], batch(), 9)])
    directories = sorted(os.listdir(world.logs.config.log_dirs[0]))
    world.owner.sync_registry()
    world.owner.sync_registry()
    assert sorted(os.listdir(world.logs.config.log_dirs[0])) == directories
    assert world.owner.partition_state(tps) == [PartitionState(0, 1, 1), PartitionState(0, 0, 0)]

    world.registry.delete("synced")
    for tp in tps:
        del world.views[tp]
    world.owner.sync_registry()
    assert world.logs.get_log(tps[0]) is None and world.logs.get_log(tps[1]) is None
    assert tps[0] not in world.replication.led
    assert world.owner.append([AppendItem(tps[0], batch(), 9)])[0] == AppendResult(
        ErrorCode.unknown_topic_or_partition)
