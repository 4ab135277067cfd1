"""The share coordinator's decisions (coordination/share/state_coordinator.py): Kafka's
fencing, merging and snapshot cadence, every record really encoded into a batch that a
list-backed log keeps, and a replay of those bytes giving back the same state."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from coordination.share.persisted import PersistedState
from coordination.share.records import ShareSnapshotValue, ShareUpdateValue, StateBatch
from coordination.share.state_batches import combine
from coordination.share.state_coordinator import (
    ShareStateCoordinator,
    coordinator_key,
    entries_of,
    kafka_uuid_string,
    partition_for,
)

TOPIC = uuid.UUID("6f1c5f0e-8a54-4c4e-9d0c-2b1f3a4c5d6e")
OTHER_TOPIC = uuid.UUID(int=7)
GROUP = "sg"


class ListLog:
    """__share_group_state as bytes per partition; ``fail`` makes the next appends fail."""

    def __init__(self, partitions: int = 5) -> None:
        self.partitions = partitions
        self.batches: dict[int, list[bytes]] = {}
        self.fail = 0

    async def append(self, partition: int, batch: bytes) -> int:
        if self.fail:
            return self.fail
        self.batches.setdefault(partition, []).append(batch)
        return 0

    def records(self) -> list[tuple[Any, Any]]:
        out: list[tuple[Any, Any]] = []
        for partition in sorted(self.batches):
            found, _next = entries_of(b"".join(self.batches[partition]), 0)
            out.extend(found)
        return out


def coordinator(log: ListLog | None = None, updates_per_snapshot: int = 3) -> ShareStateCoordinator:
    known = {(TOPIC, p) for p in range(4)}
    share = ShareStateCoordinator(log or ListLog(), lambda topic_id, p: (topic_id, p) in known, updates_per_snapshot,
                                  clock=lambda: 1_700_000_000_000)
    share.active = True
    return share


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def batch(first: int, last: int, state: int = 0, count: int = 1) -> StateBatch:
    return StateBatch(first, last, state, count)


def replayed(share: ShareStateCoordinator) -> ShareStateCoordinator:
    """A new coordinator loaded from the bytes the first one wrote."""
    assert isinstance(share.log, ListLog)
    other = coordinator(share.log, share.updates_per_snapshot)
    other.load(other.log.records())  # type: ignore[attr-defined]
    return other


def test_kafka_key_and_partition_mapping() -> None:
    # Kafka's Uuid.ONE_UUID prints as this; the key is SharePartitionKey.asCoordinatorKey.
    assert kafka_uuid_string(uuid.UUID(int=1)) == "AAAAAAAAAAAAAAAAAAAAAQ"
    assert coordinator_key("g", uuid.UUID(int=1), 3) == "g:AAAAAAAAAAAAAAAAAAAAAQ:3"
    # What a JVM (OpenJDK 17) answers for Utils.abs(key.hashCode()) % 50 of these keys; the
    # last group is not ASCII and its hash is negative.
    assert coordinator_key("sg", TOPIC, 7) == "sg:bxxfDopUTE6dDCsfOkxdbg:7"
    assert [partition_for(group, TOPIC, 7, 50) for group in ("sg", "my-share-group", "ĝroup-é")] == [15, 11, 30]


def test_initialize_read_write_and_the_records_written() -> None:
    log = ListLog()
    share = coordinator(log)

    async def go() -> None:
        assert await share.initialize(GROUP, TOPIC, 0, 1, 10) == 0
        state = await share.read(GROUP, TOPIC, 0, 0)
        assert state == PersistedState(0, 1, 0, 10, 0, ())
        assert await share.write(GROUP, TOPIC, 0, 1, 0, 10, 2, (batch(10, 14), batch(15, 19, 2))) == 0
        state = await share.read(GROUP, TOPIC, 0, 0)
        assert state == PersistedState(0, 1, 0, 10, 2, (batch(10, 14), batch(15, 19, 2)))

    run(go())
    values = [value for _key, value in log.records()]
    assert isinstance(values[0], ShareSnapshotValue) and values[0].leader_epoch == -1 and values[0].state_epoch == 1
    assert isinstance(values[1], ShareUpdateValue) and values[1].leader_epoch == 0  # the read's new leader epoch
    assert isinstance(values[2], ShareUpdateValue) and values[2].state_batches == (batch(10, 14), batch(15, 19, 2))
    assert len(values) == 3  # the second read at the same epoch wrote nothing


def test_leader_and_state_epoch_fencing() -> None:
    share = coordinator()

    async def go() -> None:
        assert await share.initialize(GROUP, TOPIC, 1, 3, 0) == 0
        assert (await share.read(GROUP, TOPIC, 1, 5)).error_code == 0
        assert (await share.read(GROUP, TOPIC, 1, 4)).error_code == ErrorCode.fenced_leader_epoch
        assert await share.write(GROUP, TOPIC, 1, 3, 4, 0, -1, (batch(0, 1),)) == ErrorCode.fenced_leader_epoch
        assert await share.write(GROUP, TOPIC, 1, 2, 5, 0, -1, (batch(0, 1),)) == ErrorCode.fenced_state_epoch
        assert await share.initialize(GROUP, TOPIC, 1, 2, 0) == ErrorCode.fenced_state_epoch
        # A write keeps the recorded leader epoch (only a read records a new one); -1 is no epoch.
        assert await share.write(GROUP, TOPIC, 1, 3, 6, 0, -1, (batch(0, 1),)) == 0
        assert await share.write(GROUP, TOPIC, 1, -1, -1, 0, -1, (batch(2, 2),)) == 0
        assert (await share.read(GROUP, TOPIC, 1, 5)).error_code == 0
        assert (await share.read(GROUP, TOPIC, 1, -1)).leader_epoch == 5
        assert (await share.read(GROUP, TOPIC, 1, 6)).leader_epoch == 6
        assert (await share.read(GROUP, TOPIC, 1, 5)).error_code == ErrorCode.fenced_leader_epoch
        summary = await share.summary(GROUP, TOPIC, 1, 5)  # a summary fences nothing
        assert (summary.error_code, summary.leader_epoch, summary.state_epoch, summary.batches) == (0, 6, 3, ())
        # A newer state epoch (the group reset the share-partition) starts over.
        assert await share.initialize(GROUP, TOPIC, 1, 4, 100) == 0
        state = await share.read(GROUP, TOPIC, 1, 6)
        assert (state.state_epoch, state.start_offset, state.batches) == (4, 100, ())

    run(go())


def test_refusals_change_nothing() -> None:
    log = ListLog()
    share = coordinator(log)

    async def go() -> None:
        assert await share.initialize(GROUP, TOPIC, 0, 1, 0) == 0
        assert await share.write(GROUP, TOPIC, 0, 1, 0, 0, -1, (batch(0, 4),)) == 0
        before = (share.states.copy(), sum(map(len, log.batches.values())))
        invalid = int(ErrorCode.invalid_request)
        assert (await share.read("unknown", TOPIC, 0, 0)).error_code == invalid  # never initialized
        assert await share.write("unknown", TOPIC, 0, 1, 0, 0, -1, ()) == invalid
        assert await share.initialize(GROUP, TOPIC, -1, 1, 0) == invalid
        assert (await share.read(GROUP, TOPIC, -1, 0)).error_code == invalid
        assert await share.write(GROUP, TOPIC, 0, 1, -2, 0, -1, ()) == ErrorCode.fenced_leader_epoch
        for garbage in (batch(5, 4), batch(-1, 3), batch(0, 3, 1), batch(0, 3, 7), batch(0, 3, 0, -1)):
            assert await share.write(GROUP, TOPIC, 0, 1, 0, 0, -1, (batch(6, 7), garbage)) == invalid
        unknown = int(ErrorCode.unknown_topic_or_partition)
        assert await share.initialize(GROUP, OTHER_TOPIC, 0, 1, 0) == unknown
        assert await share.initialize(GROUP, TOPIC, 9, 1, 0) == unknown
        assert (await share.summary(GROUP, OTHER_TOPIC, 0, -1)).error_code == unknown
        log.fail = int(ErrorCode.not_enough_replicas)
        assert await share.write(GROUP, TOPIC, 0, 1, 0, 0, -1, (batch(5, 9),)) == ErrorCode.coordinator_not_available
        assert (await share.read(GROUP, TOPIC, 0, 3)).error_code == ErrorCode.coordinator_not_available
        log.fail = 0
        assert (share.states, sum(map(len, log.batches.values()))) == before
        assert (await share.read(GROUP, TOPIC, 0, 0)).batches == (batch(0, 4),)

    run(go())


def test_unknown_keys_answer_as_kafka() -> None:
    share = coordinator()

    async def go() -> None:
        assert await share.summary(GROUP, TOPIC, 2, -1) == PersistedState(0)  # start offset -1
        assert await share.delete(GROUP, TOPIC, 2) == 0
        assert share.log.batches == {}  # type: ignore[attr-defined]

    run(go())


def test_overlapping_batches_merge_as_kafkas_combiner() -> None:
    share = coordinator(updates_per_snapshot=100)

    async def go() -> None:
        assert await share.initialize(GROUP, TOPIC, 0, 0, 0) == 0
        # Overlapping within one write: the higher delivery count wins where they overlap.
        assert await share.write(GROUP, TOPIC, 0, 0, 0, 0, -1, (batch(0, 9), batch(5, 14, 0, 2))) == 0
        # Then offsets 3..6 acknowledged at count 2, and the start offset moves to 2.
        assert await share.write(GROUP, TOPIC, 0, 0, 0, 2, -1, (batch(3, 6, 2, 2),)) == 0
        state = await share.read(GROUP, TOPIC, 0, 0)
        assert state.start_offset == 2
        assert state.batches == (batch(2, 2), batch(3, 6, 2, 2), batch(7, 14, 0, 2))
        # A write's start offset is the share-partition's, as Kafka takes it; -1 leaves it.
        assert await share.write(GROUP, TOPIC, 0, 0, 0, -1, -1, ()) == 0
        assert (await share.read(GROUP, TOPIC, 0, 0)).start_offset == 2
        assert await share.write(GROUP, TOPIC, 0, 0, 0, 7, -1, ()) == 0
        assert (await share.read(GROUP, TOPIC, 0, 0)).batches == (batch(7, 14, 0, 2),)

    run(go())


def test_combine_cases() -> None:
    # Same information: overlapping and contiguous batches become one.
    assert combine((batch(0, 4),), (batch(3, 8), batch(9, 10)), -1) == (batch(0, 10),)
    # A lower-ranked batch inside a higher one disappears; a higher one splits a lower one.
    assert combine((batch(0, 9, 2),), (batch(3, 5, 0),), -1) == (batch(0, 9, 2),)
    assert combine((batch(0, 9, 0),), (batch(3, 5, 4),), -1) == (batch(0, 2), batch(3, 5, 4), batch(6, 9))
    # Pruned at the start offset; gaps stay gaps.
    assert combine((batch(0, 4), batch(10, 12)), (), 3) == (batch(3, 4), batch(10, 12))
    assert combine((batch(0, 4),), (), 5) == ()


def test_the_delivery_complete_count_is_the_last_written() -> None:
    share = coordinator()

    async def go() -> list[int]:
        counts = []
        assert await share.initialize(GROUP, TOPIC, 0, 0, -1) == 0
        counts.append((await share.summary(GROUP, TOPIC, 0, -1)).delivery_complete_count)  # nothing to count from
        assert await share.initialize(GROUP, TOPIC, 1, 0, 10) == 0
        counts.append((await share.summary(GROUP, TOPIC, 1, -1)).delivery_complete_count)  # counting from 10
        for count in (4, 3):
            assert await share.write(GROUP, TOPIC, 1, 0, 0, 10, count, ()) == 0
            counts.append((await share.summary(GROUP, TOPIC, 1, -1)).delivery_complete_count)
        return counts

    assert run(go()) == [-1, 0, 4, 3]


def test_a_snapshot_after_every_n_updates_and_replay_gives_the_same_state() -> None:
    log = ListLog()
    share = coordinator(log, updates_per_snapshot=3)

    async def go() -> None:
        assert await share.initialize(GROUP, TOPIC, 0, 2, 0) == 0
        assert await share.initialize(GROUP, TOPIC, 3, 1, -1) == 0
        for index in range(8):
            assert await share.write(GROUP, TOPIC, 0, 2, 1, index, index, (batch(index * 2, index * 2 + 5, 0, index),)) == 0
        assert await share.write(GROUP, TOPIC, 3, 1, 0, 5, 1, (batch(5, 6, 2, 1),)) == 0

    run(go())
    kinds = [type(value).__name__[5] for key, value in log.records() if key.partition == 0]
    # initialize, 3 updates, a snapshot, 3 updates, a snapshot
    assert kinds == ["S", "U", "U", "U", "S", "U", "U", "U", "S"]
    snapshot_epochs = [value.snapshot_epoch for key, value in log.records()
                       if key.partition == 0 and isinstance(value, ShareSnapshotValue)]
    assert snapshot_epochs == [0, 1, 2]
    again = replayed(share)
    assert again.states == share.states

    async def after() -> tuple[PersistedState, PersistedState]:
        return await again.read(GROUP, TOPIC, 0, 1), await share.read(GROUP, TOPIC, 0, 1)

    replay_answer, live_answer = run(after())
    assert replay_answer == live_answer and replay_answer.start_offset == 7


def test_delete_tombstones_and_replay_forgets() -> None:
    log = ListLog()
    share = coordinator(log)

    async def go() -> None:
        assert await share.initialize(GROUP, TOPIC, 0, 1, 0) == 0
        assert await share.write(GROUP, TOPIC, 0, 1, 0, 0, -1, (batch(0, 3),)) == 0
        assert await share.delete(GROUP, TOPIC, 0) == 0
        assert (await share.read(GROUP, TOPIC, 0, 0)).error_code == ErrorCode.invalid_request

    run(go())
    assert log.records()[-1][1] is None
    assert replayed(share).states == {}


def test_not_serving_answers() -> None:
    share = coordinator()
    share.active = False

    async def go() -> tuple[int, int]:
        first = await share.initialize(GROUP, TOPIC, 0, 1, 0)
        share.loading = True
        return first, (await share.read(GROUP, TOPIC, 0, 0)).error_code

    assert run(go()) == (ErrorCode.not_coordinator, ErrorCode.coordinator_load_in_progress)


@pytest.mark.parametrize("updates_per_snapshot", [0, 1])
def test_every_write_a_snapshot_when_so_configured(updates_per_snapshot: int) -> None:
    log = ListLog()
    share = coordinator(log, updates_per_snapshot)

    async def go() -> None:
        assert await share.initialize(GROUP, TOPIC, 0, 1, 0) == 0
        for index in range(3):
            assert await share.write(GROUP, TOPIC, 0, 1, 0, 0, -1, (batch(index, index),)) == 0

    run(go())
    snapshots = [isinstance(value, ShareSnapshotValue) for _key, value in log.records()]
    assert snapshots == ([True] * 4 if updates_per_snapshot == 0 else [True, False, True, False])
    assert replayed(share).states == share.states


def test_a_deleted_topics_share_partitions_are_tombstoned() -> None:
    log = ListLog()
    known = {(TOPIC, 0), (OTHER_TOPIC, 0)}
    share = ShareStateCoordinator(log, lambda topic_id, p: (topic_id, p) in known, 3)
    share.active = True

    async def go() -> int:
        for topic_id in (TOPIC, OTHER_TOPIC):
            assert await share.initialize(GROUP, topic_id, 0, 1, 0) == 0
        assert share.topic_ids() == {TOPIC, OTHER_TOPIC}
        return await share.forget_topics({OTHER_TOPIC})

    assert run(go()) == 1
    assert set(share.states) == {(GROUP, TOPIC, 0)}
    other = [value for key, value in log.records() if key.topic_id == OTHER_TOPIC]
    assert isinstance(other[0], ShareSnapshotValue) and other[1:] == [None]
    again = ShareStateCoordinator(log, lambda _t, _p: True, 3)
    again.load(log.records())
    assert set(again.states) == {(GROUP, TOPIC, 0)}
