"""Replication (broker/partitions/replication.py) over real logs, driven as the worker drives
it: roles from the cluster's PartitionViews, followers' fetches through Owner.read with
their replica id, acks=all waits through Owner.wait_committed. The ISR writes go to a
versioned store through the Replication's IsrWriter seam (tests/unit/broker/partition_world.py).

Broker 1 is the leader; brokers 2 and 3 are its followers, seen only through their fetches."""

from __future__ import annotations

import asyncio
import time

import pytest

from broker.partitions.partition_ops import LOG_END, AppendItem, CommitItem, OffsetItem, ReadItem, ReadResult
from broker.protocol.errors import ErrorCode
from storage.types import TopicPartition
from tests.unit.broker.partition_world import NODE, World, batch, values_at


@pytest.fixture
def world(tmp_path):
    built = World(str(tmp_path))
    yield built
    built.close()


def fetch(world: World, tp: TopicPartition, replica: int, offset: int, last_fetched_epoch: int = -1) -> ReadResult:
    """Follower ``replica`` fetches from ``offset`` (it has everything before it)."""
    (result,) = world.owner.read([ReadItem(tp, offset, 1 << 20, False, replica, -1, last_fetched_epoch)], None)
    return result


def append(world: World, tp: TopicPartition, count: int) -> int:
    """Append ``count`` records; the offset after them (what acks=all waits for)."""
    (result,) = world.owner.append([AppendItem(tp, batch(count), 9)])
    assert result.error_code == 0, result
    return result.base_offset + count


def hw(world: World, tp: TopicPartition) -> int:
    return world.logs.get_log(tp).high_watermark


def replicated_topic(world: World, name: str = "replicated", **kwargs) -> TopicPartition:
    (tp,) = world.topic(name, replicas=[NODE, 2, 3], **kwargs)
    return tp


def test_a_single_replica_commits_at_once(world):
    (tp,) = world.topic("alone")
    assert world.replication.leader_epoch(tp) == 0
    assert append(world, tp, 4) == 4
    assert hw(world, tp) == 4
    assert world.owner.wait_committed([CommitItem(tp, 4)], 1000) == [0]


def test_the_high_watermark_is_the_smallest_log_end_in_the_isr(world):
    tp = replicated_topic(world)
    assert world.logs.get_log(tp).replicated
    end = append(world, tp, 5)
    assert hw(world, tp) == 0, "nothing is committed before the followers have it"

    # A follower reads past the high watermark, to the log end.
    first = fetch(world, tp, 2, 0)
    assert first.error_code == 0 and first.high_watermark == 0
    assert [offset for offset, _value in values_at(first.path, first.position, first.length)] == [0, 1, 2, 3, 4]
    assert fetch(world, tp, 2, end).error_code == 0
    assert hw(world, tp) == 0, "broker 3, in the ISR, has not fetched yet"
    fetch(world, tp, 3, 3)
    assert hw(world, tp) == 3
    fetch(world, tp, 3, end)
    assert hw(world, tp) == end
    assert world.hw_moves == [tp, tp]
    # A consumer now reads what is committed.
    (consumer,) = world.owner.read([ReadItem(tp, 0, 1 << 20, False)], None)
    assert consumer.error_code == 0 and consumer.length > 0 and consumer.high_watermark == end


def test_acks_all_waits_resolve_when_the_high_watermark_passes_them(world):
    tp = replicated_topic(world)

    async def scenario() -> None:
        first = append(world, tp, 2)
        second = append(world, tp, 3)
        waits = world.owner.wait_committed([CommitItem(tp, first), CommitItem(tp, second)], 5_000)
        assert isinstance(waits, asyncio.Future)
        fetch(world, tp, 2, second)
        fetch(world, tp, 3, first)  # the first append is committed, the second is not yet
        await asyncio.sleep(0.01)
        assert not waits.done()
        assert hw(world, tp) == first
        fetch(world, tp, 3, second)
        assert await asyncio.wait_for(waits, 5) == [0, 0]
        # Already committed: answered at once, no future.
        assert world.owner.wait_committed([CommitItem(tp, first)], 5_000) == [0]

    asyncio.run(scenario())


def test_an_acks_all_wait_times_out_or_ends_when_leadership_does(world):
    tp = replicated_topic(world)

    async def scenario() -> None:
        end = append(world, tp, 1)
        started = time.monotonic()
        late = world.owner.wait_committed([CommitItem(tp, end)], 50)
        assert await asyncio.wait_for(late, 5) == [ErrorCode.request_timed_out]
        assert time.monotonic() - started < 2

        waiting = world.owner.wait_committed([CommitItem(tp, end)], 5_000)
        assert isinstance(waiting, asyncio.Future)
        world.set_view(tp, [NODE, 2, 3], 2, 1)  # broker 2 was elected
        world.replication.apply(world.views.items())
        assert await asyncio.wait_for(waiting, 5) == [ErrorCode.not_leader_or_follower]
        assert world.replication.followed[tp].leader == 2
        assert world.owner.wait_committed([CommitItem(tp, end)], 5_000) == [ErrorCode.not_leader_or_follower]

    asyncio.run(scenario())


def test_below_min_insync_replicas_nothing_more_is_committed(world):
    tp = replicated_topic(world, configs={"min.insync.replicas": "2"}, isr=[NODE])

    async def scenario() -> None:
        end = append(world, tp, 2)
        assert hw(world, tp) == 0, "alone in the ISR, but two in-sync replicas are required"
        waiting = world.owner.wait_committed([CommitItem(tp, end)], 5_000)
        assert isinstance(waiting, asyncio.Future)
        # Broker 2 catches up: it joins the ISR (written to the store), which is then large
        # enough, and the high watermark moves to what both have.
        fetch(world, tp, 2, end)
        assert world.isr.writes == [(tp, [NODE, 2])]
        await asyncio.sleep(0)  # the write's answer comes back on the loop
        assert world.replication.led[tp].isr == [NODE, 2]
        assert hw(world, tp) == end
        assert await asyncio.wait_for(waiting, 5) == [0]

    asyncio.run(scenario())


def test_a_follower_that_stops_fetching_leaves_the_isr_and_the_rest_commit(tmp_path):
    world = World(str(tmp_path), lag_time_ms=50)
    try:
        tp = replicated_topic(world)

        async def scenario() -> None:
            end = append(world, tp, 3)
            waiting = world.owner.wait_committed([CommitItem(tp, end)], 5_000)
            fetch(world, tp, 2, end)  # broker 3 never fetches
            await asyncio.sleep(0.1)
            fetch(world, tp, 2, end)  # broker 2 keeps up
            world.replication.check_lag()
            assert world.isr.writes == [(tp, [NODE, 2])]
            await asyncio.sleep(0)
            led = world.replication.led[tp]
            assert led.isr == [NODE, 2] and led.zk_version == world.isr.states[tp].zk_version
            assert await asyncio.wait_for(waiting, 5) == [0]
            assert hw(world, tp) == end

            # Broker 3 comes back and catches up: it rejoins, in replica order.
            fetch(world, tp, 3, end)
            assert world.isr.writes[-1] == (tp, [NODE, 2, 3])
            await asyncio.sleep(0)
            assert world.replication.led[tp].isr == [NODE, 2, 3]

        asyncio.run(scenario())
    finally:
        world.close()


def test_a_follower_behind_the_high_watermark_does_not_rejoin(world):
    tp = replicated_topic(world, isr=[NODE, 2])

    async def scenario() -> None:
        end = append(world, tp, 4)
        fetch(world, tp, 2, end)
        assert hw(world, tp) == end
        fetch(world, tp, 3, 2)  # below the high watermark: not in sync
        assert world.isr.writes == []
        assert world.replication.led[tp].isr == [NODE, 2]
        fetch(world, tp, 3, end)
        assert world.isr.writes == [(tp, [NODE, 2, 3])]

    asyncio.run(scenario())


def test_an_isr_write_refused_or_outrun_changes_nothing(tmp_path):
    world = World(str(tmp_path), lag_time_ms=10_000)
    tp = replicated_topic(world, isr=[NODE, 2])

    async def scenario() -> None:
        end = append(world, tp, 1)
        world.isr.refuse_next = True  # the controller wrote the state first
        fetch(world, tp, 3, end)
        await asyncio.sleep(0)
        led = world.replication.led[tp]
        assert led.isr == [NODE, 2] and not led.isr_write_pending
        # The next fetch decides again; this time one write is in flight at a time.
        world.isr.hold = True
        fetch(world, tp, 3, end)
        fetch(world, tp, 3, end)
        assert led.isr_write_pending
        world.isr.release()
        await asyncio.sleep(0)
        assert world.isr.writes == [(tp, [NODE, 2, 3])]
        assert led.isr == [NODE, 2, 3] and not led.isr_write_pending

        # Deposed while a write is in flight: its answer changes nothing any more.
        world.set_view(tp, [NODE, 2, 3], NODE, 1, isr=[NODE, 2, 3])
        world.replication.apply(world.views.items())
        new_led = world.replication.led[tp]
        assert new_led is not led and new_led.epoch == 1
        world.isr.hold = True
        for progress in new_led.followers.values():
            progress.last_caught_up_ms = 0  # neither has caught up for a long time
        world.replication.check_lag()
        assert new_led.isr_write_pending
        world.set_view(tp, [NODE, 2, 3], 2, 2)  # broker 2 is elected meanwhile
        world.replication.apply(world.views.items())
        world.isr.release()
        await asyncio.sleep(0)
        assert tp not in world.replication.led and world.replication.followed[tp].leader == 2
        assert new_led.isr == [NODE, 2, 3] and not new_led.isr_write_pending

    try:
        asyncio.run(scenario())
    finally:
        world.close()


def test_our_own_isr_write_read_back_keeps_the_epoch_and_its_progress(world):
    tp = replicated_topic(world, isr=[NODE, 2])

    async def scenario() -> None:
        end = append(world, tp, 2)
        fetch(world, tp, 2, end)
        fetch(world, tp, 3, end)
        led = world.replication.led[tp]
        world.apply_written_state(tp)  # the watch brings our write back
        assert world.replication.led[tp] is led, "same epoch: the same leadership, not a new one"
        assert led.isr == [NODE, 2, 3] and led.zk_version == world.isr.states[tp].zk_version
        assert led.followers[2].log_end_offset == end

    asyncio.run(scenario())


def test_a_new_epoch_starts_in_the_log_and_followers_are_checked(world):
    tp = replicated_topic(world, epoch=0)
    end = append(world, tp, 3)
    fetch(world, tp, 2, end)
    fetch(world, tp, 3, end)
    world.set_view(tp, [NODE, 2, 3], NODE, 5)  # re-elected in epoch 5
    world.replication.apply(world.views.items())
    assert world.replication.leader_epoch(tp) == 5
    (log_end,) = world.owner.list_offsets([OffsetItem(tp, LOG_END)])
    assert (log_end.offset, log_end.leader_epoch) == (end, 5)
    assert world.logs.get_log(tp).epochs.end_offset_for(0, end) == (0, end)

    # Not a replica: refused. Past our log end: out of range.
    assert fetch(world, tp, 4, 0).error_code == ErrorCode.not_leader_or_follower
    assert fetch(world, tp, 2, end + 10).error_code == ErrorCode.offset_out_of_range
    # A follower whose last batch says epoch 4 at offset 3: epoch 4 never existed here;
    # epoch 0 ended at 3, so it truncates there.
    diverged = fetch(world, tp, 2, end, last_fetched_epoch=4)
    assert (diverged.diverging_epoch, diverged.diverging_end_offset) == (0, end)
    assert diverged.length == 0
    # Its log agrees with ours (epoch 0 up to 3): a plain read.
    agreed = fetch(world, tp, 2, end, last_fetched_epoch=0)
    assert agreed.error_code == 0 and agreed.diverging_epoch == -1


def test_roles_follow_the_views_and_followers_are_told(world):
    changes: list[int] = []
    world.replication.on_followed_changed = lambda: changes.append(1)
    led_tp, followed_tp = world.topic("roles", 2, replicas=[NODE, 2])
    world.set_view(followed_tp, [2, NODE], 2, 3)
    world.replication.apply(world.views.items())
    assert world.replication.leader_epoch(led_tp) == 0 and world.replication.leader_epoch(followed_tp) == -1
    assert world.replication.followed == {followed_tp: world.replication.followed[followed_tp]}
    assert (world.replication.followed[followed_tp].leader, world.replication.followed[followed_tp].epoch) == (2, 3)
    assert len(changes) == 1 and world.logs.get_log(followed_tp).replicated
    world.replication.apply(world.views.items())
    assert len(changes) == 1, "the same roles again: nothing to tell"

    # Moved off this broker entirely: neither led nor followed.
    world.set_view(led_tp, [2, 3], 2, 1)
    world.set_view(followed_tp, [2, 3], 2, 4)
    world.replication.apply(world.views.items())
    assert world.replication.led == {} and world.replication.followed == {}
    assert len(changes) == 2
