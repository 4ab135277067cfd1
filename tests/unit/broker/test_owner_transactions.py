"""Transactions on the owner's side (broker/partitions/owner.py) over real logs: markers
written by ``write_markers`` end a producer's transaction and move the last stable offset,
answered once committed; read_committed reads stop at the last stable offset and name the
aborted transactions in the bytes they give; ListOffsets' LATEST_STABLE is the last stable
offset; the coordinator's own appends are checked for their producer's epoch only; and no
client writes a control batch."""

from __future__ import annotations

import asyncio

import pytest

from broker.partitions.partition_ops import (
    LATEST_STABLE,
    VERIFICATION_NEEDED,
    AppendItem,
    MarkerItem,
    OffsetItem,
    ReadItem,
    ReadResult,
)
from broker.protocol.errors import ErrorCode
from storage.records import CONTROL_TYPE_COMMIT, Record, encode_batch, encode_control_batch
from storage.types import TopicPartition
from tests.unit.broker.partition_world import NODE, World, batch, values_at

READ_COMMITTED = 1


@pytest.fixture
def world(tmp_path):
    built = World(str(tmp_path), fence_epoch=3)
    yield built
    built.close()


def txn_batch(producer_id: int, sequence: int, count: int = 2, epoch: int = 0, value: bytes = b"t") -> bytes:
    """A transactional producer's batch (the transactional bit, its id, epoch and sequence)."""
    records = [Record(i, 1_000 + i, b"k", value + str(i).encode()) for i in range(count)]
    return encode_batch(records, producer_id=producer_id, producer_epoch=epoch, base_sequence=sequence,
                        is_transactional=True)


def append(world: World, tp: TopicPartition, records: bytes, fence_epoch: int = -1) -> int:
    """Append; the base offset. A transaction's first batch on the partition is answered
    VERIFICATION_NEEDED: appended again with its guard, as after the coordinator said yes."""
    item = AppendItem(tp, records, 9)
    (result,) = world.owner.append([item], fence_epoch)
    if result.error_code == VERIFICATION_NEEDED:
        (result,) = world.owner.append_verified([item], [result.base_offset])
    assert result.error_code == 0, result
    return result.base_offset


def read(world: World, tp: TopicPartition, offset: int, isolation: int = 0, replica: int = -1) -> ReadResult:
    (result,) = world.owner.read([ReadItem(tp, offset, 1 << 20, False, replica, -1, -1, isolation)], None)
    return result


def marker(world: World, tp: TopicPartition, producer_id: int, commit: bool, epoch: int = 0,
           coordinator_epoch: int = 0) -> int:
    (code,) = world.owner.write_markers([MarkerItem(tp, producer_id, epoch, commit, coordinator_epoch)], 1_000)
    return code


def offsets(result: ReadResult) -> list[int]:
    return [offset for offset, _value in values_at(result.path, result.position, result.length)]


def test_a_commit_marker_ends_the_transaction_and_read_committed_stops_at_the_stable_offset(world):
    (tp,) = world.topic("orders")
    append(world, tp, batch(2, b"plain"))  # offsets 0-1, no transaction
    assert append(world, tp, txn_batch(7, 0, 3)) == 2  # 2-4: producer 7's open transaction
    append(world, tp, batch(1, b"later"))  # 5

    # read_uncommitted sees everything below the high watermark, and learns the LSO.
    uncommitted = read(world, tp, 0)
    assert (uncommitted.high_watermark, uncommitted.last_stable_offset, uncommitted.aborted) == (6, 2, ())
    assert offsets(uncommitted) == [0, 1, 2, 3, 4, 5]
    # read_committed stops where the open transaction starts, by sendfile all the same.
    committed = read(world, tp, 0, READ_COMMITTED)
    assert committed.error_code == 0 and committed.last_stable_offset == 2 and committed.path
    assert offsets(committed) == [0, 1]
    caught_up = read(world, tp, 2, READ_COMMITTED)
    assert (caught_up.error_code, caught_up.length, caught_up.last_stable_offset) == (0, 0, 2)
    assert world.owner.list_offsets([OffsetItem(tp, LATEST_STABLE)])[0][:2] == (0, 2)

    assert marker(world, tp, 7, commit=True, coordinator_epoch=4) == 0
    assert world.appends[-1][1].first_offset == 6, "the marker is one control batch at the log end"
    after = read(world, tp, 2, READ_COMMITTED)
    assert (after.high_watermark, after.last_stable_offset, after.aborted) == (7, 7, ())
    assert offsets(after) == [2, 3, 4, 5, 6]  # the marker too: consumers skip control batches
    assert world.owner.list_offsets([OffsetItem(tp, LATEST_STABLE)])[0][:2] == (0, 7)


def test_markers_are_refused_for_an_older_producer_epoch_or_coordinator_and_unknown_places(world):
    (tp,) = world.topic("fenced")
    append(world, tp, txn_batch(9, 0, epoch=2))
    assert marker(world, tp, 9, commit=False, epoch=1) == ErrorCode.invalid_producer_epoch
    assert marker(world, tp, 9, commit=False, epoch=2, coordinator_epoch=5) == 0
    append(world, tp, txn_batch(9, 2, epoch=2))  # the producer's next transaction
    assert marker(world, tp, 9, commit=True, epoch=2, coordinator_epoch=4) == ErrorCode.transaction_coordinator_fenced
    assert read(world, tp, 0).last_stable_offset == 3, "a refused marker leaves the transaction open"
    # A producer with nothing open here still gets its marker, as Kafka writes it.
    assert marker(world, tp, 12, commit=True) == 0
    world.topic("led-elsewhere", leader=2, replicas=[2, NODE])
    codes = world.owner.write_markers([MarkerItem(TopicPartition("nowhere", 0), 9, 2, True, 5),
                                       MarkerItem(TopicPartition("led-elsewhere", 0), 9, 2, True, 5),
                                       MarkerItem(tp, 9, 2, True, 5)], 1_000)
    assert codes == [ErrorCode.unknown_topic_or_partition, ErrorCode.not_leader_or_follower, 0]


def test_a_marker_is_answered_once_the_followers_have_it(world):
    (tp,) = world.topic("replicated", replicas=[NODE, 2])

    async def scenario() -> None:
        append(world, tp, txn_batch(5, 0))
        read(world, tp, 2, replica=2)  # the follower has the batch: the high watermark is 2
        waiting = world.owner.write_markers([MarkerItem(tp, 5, 0, True, 0)], 5_000)
        assert isinstance(waiting, asyncio.Future)
        await asyncio.sleep(0.01)
        assert not waiting.done()
        assert read(world, tp, 0, READ_COMMITTED).last_stable_offset == 0, "not stable before the marker is replicated"
        # Followers fetch with no isolation of their own: to the log end, the marker included.
        follower = read(world, tp, 2, isolation=READ_COMMITTED, replica=2)
        assert offsets(follower) == [2]
        read(world, tp, 3, replica=2)
        assert await asyncio.wait_for(waiting, 1) == [0]
        assert read(world, tp, 0, READ_COMMITTED).last_stable_offset == 3

        append(world, tp, txn_batch(5, 2))
        read(world, tp, 5, replica=2)
        assert await asyncio.wait_for(world.owner.write_markers([MarkerItem(tp, 5, 0, False, 0)], 50), 1) == [
            ErrorCode.request_timed_out]

    asyncio.run(scenario())


def test_no_marker_below_min_insync_replicas(world):
    (tp,) = world.topic("thin", replicas=[NODE, 2], isr=[NODE], configs={"min.insync.replicas": "2"})
    assert marker(world, tp, 1, commit=True) == ErrorCode.not_enough_replicas
    assert world.logs.get_log(tp).log_end_offset == 0


def test_the_coordinators_appends_skip_sequence_checks_but_not_the_epoch(world):
    (tp,) = world.topic("__consumer_offsets")
    first = append(world, tp, txn_batch(20, 0, epoch=1), fence_epoch=3)
    # The same sequence again: a client's retry would be answered with the first offsets;
    # the coordinator's batch is appended (Kafka's AppendOrigin.COORDINATOR).
    assert append(world, tp, txn_batch(20, 0, epoch=1), fence_epoch=3) == first + 2
    assert append(world, tp, txn_batch(20, 7, epoch=1), fence_epoch=3) == first + 4
    (stale,) = world.owner.append([AppendItem(tp, txn_batch(20, 0, epoch=0), 9)], 3)
    assert stale.error_code == ErrorCode.invalid_producer_epoch
    # A client's batch with a gap is still refused.
    (tp_client,) = world.topic("client-topic")
    append(world, tp_client, txn_batch(21, 0))
    (gap,) = world.owner.append([AppendItem(tp_client, txn_batch(21, 9), 9)])
    assert gap.error_code == ErrorCode.out_of_order_sequence_number


def test_no_client_appends_a_control_batch(world):
    (tp,) = world.topic("forged")
    forged = encode_control_batch(CONTROL_TYPE_COMMIT, 0, producer_id=30, producer_epoch=0, timestamp=1_000)
    for records in (forged, batch(1) + forged):  # alone, or behind an ordinary batch
        (result,) = world.owner.append([AppendItem(tp, records, 9)])
        assert result.error_code == ErrorCode.invalid_record
    assert world.logs.get_log(tp).log_end_offset == 0


def test_read_committed_names_the_aborted_transactions_of_the_segment_it_reads(world):
    """Aborted transactions are looked up in the .txnindex files from the fetch offset to
    the end of the range read (the next segment's base offset): one that starts in the
    range is named even when its marker is in the next segment; one that ended before the
    fetch offset, or lies past the range, is not."""
    (tp,) = world.topic("aborts")
    partition_log = world.logs.get_log(tp)
    append(world, tp, txn_batch(1, 0))  # 0-1
    assert marker(world, tp, 1, commit=False) == 0  # 2: ABORT
    append(world, tp, txn_batch(2, 0))  # 3-4
    assert marker(world, tp, 2, commit=True) == 0  # 5: COMMIT
    partition_log.roll()
    append(world, tp, txn_batch(3, 0))  # 6-7, in the second segment
    assert marker(world, tp, 3, commit=False) == 0  # 8
    append(world, tp, txn_batch(4, 0))  # 9-10
    partition_log.roll()
    assert marker(world, tp, 4, commit=False) == 0  # 11: its ABORT opens the third segment

    first = read(world, tp, 0, READ_COMMITTED)
    assert offsets(first) == [0, 1, 2, 3, 4, 5] and first.last_stable_offset == 12
    assert first.aborted == ((1, 0),)
    assert read(world, tp, 3, READ_COMMITTED).aborted == ()
    second = read(world, tp, 6, READ_COMMITTED)
    assert offsets(second) == [6, 7, 8, 9, 10]
    assert second.aborted == ((3, 6), (4, 9))
    assert read(world, tp, 9, READ_COMMITTED).aborted == ((4, 9),)
    # read_uncommitted is never told.
    assert read(world, tp, 0).aborted == ()


# ---------------------------------------------------------------------- verification (KIP-890)
def test_a_transactions_first_batch_waits_for_verification_and_later_ones_do_not(world):
    (tp,) = world.topic("verified")
    item = AppendItem(tp, txn_batch(40, 0), 9)
    (first,) = world.owner.append([item])
    assert first.error_code == VERIFICATION_NEEDED and first.base_offset > 0
    assert world.logs.get_log(tp).log_end_offset == 0, "nothing appended before the coordinator answers"
    (again,) = world.owner.append([item])
    assert again.base_offset == first.base_offset, "requests verifying at once share the guard"
    (done,) = world.owner.append_verified([item], [first.base_offset])
    assert (done.error_code, done.base_offset) == (0, 0)
    (next_batch,) = world.owner.append([AppendItem(tp, txn_batch(40, 2), 9)])
    assert (next_batch.error_code, next_batch.base_offset) == (0, 2), "the transaction is open here: no question"
    # Non-transactional and idempotent batches never wait.
    (plain,) = world.owner.append([AppendItem(tp, batch(1), 9)])
    assert plain.error_code == 0


def test_a_marker_between_verification_and_append_refuses_the_late_batch(world):
    """The zombie's race: verified while its transaction was open, appended after the
    coordinator ended it. The marker dropped the guard: INVALID_TXN_STATE, nothing
    appended, no transaction left hanging."""
    (tp,) = world.topic("zombie")
    item = AppendItem(tp, txn_batch(41, 0), 9)
    (first,) = world.owner.append([item])
    assert first.error_code == VERIFICATION_NEEDED
    assert marker(world, tp, 41, commit=False) == 0
    end = world.logs.get_log(tp).log_end_offset
    (late,) = world.owner.append_verified([item], [first.base_offset])
    assert late.error_code == ErrorCode.invalid_txn_state
    assert world.logs.get_log(tp).log_end_offset == end
    assert world.logs.get_log(tp).last_stable_offset == end, "no transaction opened"
    # A guard of another epoch does not fit either.
    (other,) = world.owner.append([AppendItem(tp, txn_batch(41, 0, epoch=1), 9)])
    (wrong,) = world.owner.append_verified([AppendItem(tp, txn_batch(41, 0, epoch=2), 9)], [other.base_offset])
    assert wrong.error_code == ErrorCode.invalid_txn_state
