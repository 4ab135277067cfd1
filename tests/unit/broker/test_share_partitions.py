"""A share-partition leader (broker/partitions/share_partitions.py) over a real log and the real
share coordinator (coordination/share/state_coordinator.py, its records kept in a list): the
start offset resolved and written, whole batches acquired, acknowledgements persisted before
they are answered, a leader that starts again from what was written, fenced writes dropping the
partition, and bad acknowledgements changing nothing."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from broker.partitions.partition_ops import AppendItem, ShareAckItem, ShareFetchItem
from broker.partitions.share_partitions import SharePartitions, ShareSettings
from broker.protocol.errors import ErrorCode
from coordination.share.state_coordinator import ShareStateCoordinator
from storage.types import TopicPartition
from tests.unit.broker.partition_world import World, batch, values_at

GROUP = "sg"
ACCEPT, RELEASE, REJECT = 1, 2, 3


class RecordLog:
    """__share_group_state as a list of appended batches; ``fail`` makes appends fail."""

    partitions = 3

    def __init__(self) -> None:
        self.batches: list[tuple[int, bytes]] = []
        self.fail = 0

    async def append(self, partition: int, data: bytes) -> int:
        if self.fail:
            return self.fail
        self.batches.append((partition, data))
        return 0


class Leader:
    """One worker's share partitions over ``world``'s log, with a live share coordinator."""

    def __init__(self, world: World, state: ShareStateCoordinator, settings: ShareSettings | None = None) -> None:
        self.world = world
        self.state = state
        self.shares = SharePartitions(_Holder(world), state, lambda _group: settings or ShareSettings())

    def fetch(self, tp: TopicPartition, topic_id: uuid.UUID, member: str, acks: tuple = (), max_records: int = 500,
              fetch: bool = True) -> Any:
        item = ShareFetchItem(tp, str(topic_id), GROUP, member, fetch, 1 << 20, max_records, acks)
        (result,) = run(self.shares.fetch([item]))
        return result

    def acknowledge(self, tp: TopicPartition, topic_id: uuid.UUID, member: str, acks: tuple, release: bool = False) -> int:
        (code,) = run(self.shares.acknowledge([ShareAckItem(tp, str(topic_id), GROUP, member, acks, release)]))
        return code


class _Holder:
    def __init__(self, world: World) -> None:
        self.world = world

    def log_for(self, tp: TopicPartition) -> Any:
        return self.world.owner.log_for(tp)

    def leader_epoch(self, tp: TopicPartition) -> int:
        return self.world.owner.leader_epoch(tp)


_LOOP = asyncio.new_event_loop()


def run(coro: Any) -> Any:
    return _LOOP.run_until_complete(coro)


def coordinator(log: RecordLog) -> ShareStateCoordinator:
    share = ShareStateCoordinator(log, lambda _topic, _partition: True)
    share.active = True
    return share


def records(result: Any) -> list[tuple[int, bytes | None]]:
    acquired = {o for first, last, _count in result.acquired for o in range(first, last + 1)}
    return [(o, v) for o, v in values_at(result.path, result.position, result.length) if o in acquired]


@pytest.fixture
def world(tmp_path):
    built = World(str(tmp_path))
    yield built
    built.close()


def test_acquire_acknowledge_and_redeliver(world):
    (tp,) = world.topic("events")
    tid = uuid.uuid4()
    world.owner.append([AppendItem(tp, batch(3, b"old"), 9)])
    leader = Leader(world, coordinator(RecordLog()))
    # latest: the share partition starts at the high watermark, and says so durably.
    first = leader.fetch(tp, tid, "m1")
    assert (first.error_code, first.acquired) == (0, ())
    assert run(leader.state.read(GROUP, tid, 0, 0)).start_offset == 3
    world.owner.append([AppendItem(tp, batch(4, b"a"), 9), AppendItem(tp, batch(4, b"b"), 9)])
    got = leader.fetch(tp, tid, "m1", max_records=5)
    # max_records rounds up to the end of a batch: two whole batches.
    assert got.acquired == ((3, 10, 1),)
    assert records(got)[:2] == [(3, b"a0"), (4, b"a1")]
    assert leader.fetch(tp, tid, "m2").acquired == ()
    assert leader.acknowledge(tp, tid, "m1", ((3, 4, (ACCEPT,)), (5, 6, (RELEASE,)), (7, 10, (REJECT,)))) == 0
    again = leader.fetch(tp, tid, "m2")
    assert again.acquired == ((5, 6, 2),)
    # Another member's records, and records no one holds, are refused; nothing changes.
    assert leader.acknowledge(tp, tid, "m1", ((5, 6, (ACCEPT,)),)) == ErrorCode.invalid_record_state
    assert leader.acknowledge(tp, tid, "m2", ((5, 6, (ACCEPT,)),)) == 0
    persisted = run(leader.state.read(GROUP, tid, 0, 0))
    assert persisted.start_offset == 11 and persisted.batches == ()


def test_a_new_leader_starts_from_what_was_written(world):
    (tp,) = world.topic("events")
    tid = uuid.uuid4()
    log = RecordLog()
    state = coordinator(log)
    leader = Leader(world, state, ShareSettings(auto_offset_reset="earliest"))
    world.owner.append([AppendItem(tp, batch(6, b"x"), 9)])
    got = leader.fetch(tp, tid, "m1")
    assert got.acquired == ((0, 5, 1),)
    assert leader.acknowledge(tp, tid, "m1", ((0, 1, (ACCEPT,)), (2, 2, (RELEASE,)))) == 0
    # A new leader (a restarted worker) reads the state: 0-1 done, 2 delivered once and
    # released, 3-5 held at the restart (not persisted: available again with count 0+1).
    replayed = ShareStateCoordinator(log, lambda _t, _p: True)
    from coordination.share.state_coordinator import entries_of

    replayed.load([entry for _p, data in log.batches for entry in entries_of(data, 0)[0]])
    replayed.active = True
    fresh = Leader(world, replayed)
    after = fresh.fetch(tp, tid, "m9")
    assert after.acquired == ((2, 2, 2), (3, 5, 1))


def test_a_failed_write_answers_its_error_and_the_state_is_read_again(world):
    (tp,) = world.topic("events")
    tid = uuid.uuid4()
    log = RecordLog()
    leader = Leader(world, coordinator(log), ShareSettings(auto_offset_reset="earliest"))
    world.owner.append([AppendItem(tp, batch(2, b"y"), 9)])
    assert leader.fetch(tp, tid, "m1").acquired == ((0, 1, 1),)
    log.fail = int(ErrorCode.not_enough_replicas)
    assert leader.acknowledge(tp, tid, "m1", ((0, 0, (ACCEPT,)),)) == ErrorCode.coordinator_not_available
    log.fail = 0
    # The acknowledgement answered with an error is undone: the state is read again, and both
    # records are delivered again (the acquisition was never written, as in Kafka).
    assert (GROUP, tp) not in leader.shares.partitions
    assert leader.fetch(tp, tid, "m2").acquired == ((0, 1, 1),)
    # The state epoch moves on (the group's offsets were reset): the old state's write is fenced.
    assert run(leader.state.initialize(GROUP, tid, 0, 5, 1)) == 0
    assert leader.acknowledge(tp, tid, "m2", ((1, 1, (ACCEPT,)),)) == ErrorCode.fenced_state_epoch
    assert (GROUP, tp) not in leader.shares.partitions
    # The next fetch reads the new state: start offset 1, nothing held.
    assert leader.fetch(tp, tid, "m3").acquired == ((1, 1, 1),)


def test_a_group_config_read_after_the_load_governs_the_next_deliveries(world):
    """The worker loaded the share partition before it had read the group's new configs (the
    broker's default limit 5); once it has them, the group's limit of 3 holds: a record released
    at its 3rd delivery is archived, never delivered a 4th time (suite70, 2026-11-29)."""
    (tp,) = world.topic("events")
    tid = uuid.uuid4()
    settings = {"now": ShareSettings(auto_offset_reset="earliest")}  # delivery_count_limit 5
    leader = Leader(world, coordinator(RecordLog()))
    leader.shares.settings_of = lambda _group: settings["now"]
    world.owner.append([AppendItem(tp, batch(2, b"z"), 9)])
    assert leader.fetch(tp, tid, "m1").acquired == ((0, 1, 1),)
    settings["now"] = ShareSettings(auto_offset_reset="earliest", delivery_count_limit=3, record_lock_duration_ms=1000)
    assert leader.acknowledge(tp, tid, "m1", ((0, 1, (RELEASE,)),)) == 0
    assert leader.fetch(tp, tid, "m2").acquired == ((0, 1, 2),)
    assert leader.shares.partitions[(GROUP, tp)].state.lock_duration_ms == 1000
    # Released by a member that leaves (its session closed): the 3rd delivery follows.
    assert leader.acknowledge(tp, tid, "m2", (), release=True) == 0
    assert leader.fetch(tp, tid, "m3").acquired == ((0, 1, 3),)
    assert leader.acknowledge(tp, tid, "m3", ((0, 1, (RELEASE,)),)) == 0
    assert leader.fetch(tp, tid, "m4").acquired == (), "released at the limit: archived"
    assert leader.shares.partitions[(GROUP, tp)].state.start_offset == 2, "both records done with"
