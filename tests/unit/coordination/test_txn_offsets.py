"""Transactional offsets (TxnOffsetCommit) in the group coordinator, over real partition
logs: they are written as the producer's transactional batch, stay pending (unseen by
OffsetFetch, UNSTABLE_OFFSET_COMMIT with require_stable) until the transaction's marker,
then count (COMMIT) or vanish (ABORT); a coordinator that loads the log finds them in the
same three states."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from coordination.groups import offsets_schema as schema
from coordination.groups.coordinator import GroupCoordinator
from coordination.groups.replay import TxnMarker, load_entries
from coordination.groups.requests import JoiningMember, MemberRef
from storage.log import PartitionLog
from storage.records import Record, encode_batch, iter_batches
from tests.unit.coordination.test_coordinator_offsets import PARTITIONS, FileOffsetsLog, coordinator, known

UNSTABLE_OFFSET_COMMIT = 88
ILLEGAL_GENERATION = 22
UNKNOWN_MEMBER_ID = 25
FENCED_INSTANCE_ID = 82
COORDINATOR_LOAD_IN_PROGRESS = 14

SIMPLE = MemberRef(-1, "", None)
PRODUCER, EPOCH = 4000, 2


def groups_in_distinct_partitions() -> tuple[str, str]:
    first = "g"
    other = next(f"g{i}" for i in range(100)
                 if schema.partition_for(f"g{i}", PARTITIONS) != schema.partition_for(first, PARTITIONS))
    return first, other


def write_marker(log: PartitionLog, producer_id: int, commit: bool) -> None:
    """The transaction coordinator's marker in the partition (what WriteTxnMarkers appends)."""
    log.append_marker(producer_id, EPOCH, commit, 0, leader_epoch=0)


def offset_of(coord: GroupCoordinator, group: str, partition: tuple[str, int], stable: bool = False) -> tuple[int, int]:
    """(committed offset or -1, partition error) as OffsetFetch answers it."""
    code, found = coord.fetch_offsets(group, [partition], require_stable=stable)
    assert code == 0
    ((_t, _p, value, error),) = found
    return (value.offset if value is not None else -1), error


def run(offsets_log: FileOffsetsLog, scenario: Any) -> None:
    try:
        asyncio.run(scenario())
    finally:
        offsets_log.close()


def test_offsets_wait_for_the_commit_as_a_transactional_batch(tmp_path: Any) -> None:
    offsets_log = FileOffsetsLog(str(tmp_path))

    async def scenario() -> None:
        coord = coordinator(offsets_log)
        assert await coord.commit_offsets("g", SIMPLE, -1, [("t", 0, 5, -1, "")], known) == [0]
        assert await coord.txn_commit_offsets("g", PRODUCER, EPOCH, SIMPLE, [("t", 0, 9, 1, "m"), ("t", 1, 3, -1, None)]) == [0, 0]
        assert offset_of(coord, "g", ("t", 0)) == (5, 0), "pending offsets are not the committed ones"
        assert offset_of(coord, "g", ("t", 1)) == (-1, 0)
        assert offset_of(coord, "g", ("t", 0), stable=True) == (-1, UNSTABLE_OFFSET_COMMIT)
        assert offset_of(coord, "g", ("t", 1), stable=True) == (-1, UNSTABLE_OFFSET_COMMIT)
        code, everything = coord.fetch_offsets("g", None, require_stable=True)
        assert [(t, p, error) for t, p, _v, error in everything] == [("t", 0, UNSTABLE_OFFSET_COMMIT)], \
            "asked for all, only committed partitions are listed (as Kafka)"

        log = offsets_log.logs[schema.partition_for("g", PARTITIONS)]
        headers = [header for header, _records in iter_batches(log.read_bytes(0, 1 << 20))]
        txn = headers[-1]
        assert (txn.is_transactional, txn.is_control, txn.producer_id, txn.producer_epoch, txn.base_sequence) == (
            True, False, PRODUCER, EPOCH, 0)
        assert not headers[0].is_transactional

        other_partition = (schema.partition_for("g", PARTITIONS) + 1) % PARTITIONS
        coord.complete_transaction(PRODUCER, True, other_partition)
        assert offset_of(coord, "g", ("t", 0), stable=True) == (-1, UNSTABLE_OFFSET_COMMIT), \
            "a marker ends the transaction in its own partition only"
        coord.complete_transaction(PRODUCER, True, schema.partition_for("g", PARTITIONS))
        assert offset_of(coord, "g", ("t", 0), stable=True) == (9, 0)
        assert offset_of(coord, "g", ("t", 1), stable=True) == (3, 0)
        assert coord.groups["g"].offsets[("t", 0)].leader_epoch == 1

    run(offsets_log, scenario)


def test_an_aborted_transaction_leaves_the_committed_offsets(tmp_path: Any) -> None:
    offsets_log = FileOffsetsLog(str(tmp_path))

    async def scenario() -> None:
        coord = coordinator(offsets_log)
        assert await coord.commit_offsets("g", SIMPLE, -1, [("t", 0, 5, -1, "")], known) == [0]
        assert await coord.txn_commit_offsets("g", PRODUCER, EPOCH, SIMPLE, [("t", 0, 9, -1, "")]) == [0]
        coord.complete_transaction(PRODUCER, False, schema.partition_for("g", PARTITIONS))
        assert offset_of(coord, "g", ("t", 0), stable=True) == (5, 0)
        coord.complete_transaction(PRODUCER, True, schema.partition_for("g", PARTITIONS))
        assert offset_of(coord, "g", ("t", 0)) == (5, 0), "aborted offsets are gone, a later commit marker finds none"

    run(offsets_log, scenario)


def test_the_more_recent_record_wins_between_transactional_and_plain_commits(tmp_path: Any) -> None:
    offsets_log = FileOffsetsLog(str(tmp_path))

    async def scenario() -> None:
        coord = coordinator(offsets_log)
        partition = schema.partition_for("g", PARTITIONS)
        assert await coord.txn_commit_offsets("g", PRODUCER, EPOCH, SIMPLE, [("t", 0, 9, -1, ""), ("t", 1, 9, -1, "")]) == [0, 0]
        # A plain commit written after the transactional one, for one of its partitions.
        assert await coord.commit_offsets("g", SIMPLE, -1, [("t", 0, 20, -1, "")], known) == [0]
        coord.complete_transaction(PRODUCER, True, partition)
        assert offset_of(coord, "g", ("t", 0)) == (20, 0), "the later plain commit stays"
        assert offset_of(coord, "g", ("t", 1)) == (9, 0)

        # The same from the log: a coordinator that loads it comes to the same offsets.
        write_marker(offsets_log.logs[partition], PRODUCER, True)
        reloaded = coordinator(offsets_log)
        reloaded.load(offsets_log.loaded())
        assert offset_of(reloaded, "g", ("t", 0)) == (20, 0)
        assert offset_of(reloaded, "g", ("t", 1)) == (9, 0)

    run(offsets_log, scenario)


def test_a_load_commits_aborts_or_keeps_pending_by_the_markers_it_reads(tmp_path: Any) -> None:
    offsets_log = FileOffsetsLog(str(tmp_path))
    first, other = groups_in_distinct_partitions()
    committer, aborter, open_producer = 100, 200, 300

    async def scenario() -> None:
        coord = coordinator(offsets_log)
        for group in (first, other):
            assert await coord.commit_offsets(group, SIMPLE, -1, [("t", 0, 1, -1, "")], known) == [0]
        assert await coord.txn_commit_offsets(first, committer, EPOCH, SIMPLE, [("t", 0, 10, -1, "")]) == [0]
        assert await coord.txn_commit_offsets(first, aborter, EPOCH, SIMPLE, [("t", 1, 20, -1, "")]) == [0]
        # The open producer has offsets in both groups: only the second's partition gets a marker.
        assert await coord.txn_commit_offsets(first, open_producer, EPOCH, SIMPLE, [("t", 2, 30, -1, "")]) == [0]
        assert await coord.txn_commit_offsets(other, open_producer, EPOCH, SIMPLE, [("t", 2, 31, -1, "")]) == [0]
        first_log = offsets_log.logs[schema.partition_for(first, PARTITIONS)]
        write_marker(first_log, committer, True)
        write_marker(first_log, aborter, False)
        write_marker(offsets_log.logs[schema.partition_for(other, PARTITIONS)], open_producer, True)

        reloaded = coordinator(offsets_log)
        reloaded.load(offsets_log.loaded())
        assert offset_of(reloaded, first, ("t", 0), stable=True) == (10, 0)
        assert offset_of(reloaded, first, ("t", 1), stable=True) == (-1, 0)
        assert offset_of(reloaded, first, ("t", 2), stable=True) == (-1, UNSTABLE_OFFSET_COMMIT)
        assert offset_of(reloaded, other, ("t", 2), stable=True) == (31, 0)
        # The transaction coordinator completes the open one once it has loaded its own log.
        reloaded.complete_transaction(open_producer, True, schema.partition_for(first, PARTITIONS))
        assert offset_of(reloaded, first, ("t", 2), stable=True) == (30, 0)

    run(offsets_log, scenario)


def test_a_group_with_only_pending_offsets_survives_the_load(tmp_path: Any) -> None:
    offsets_log = FileOffsetsLog(str(tmp_path))

    async def scenario() -> None:
        coord = coordinator(offsets_log)
        assert await coord.txn_commit_offsets("fresh", PRODUCER, EPOCH, SIMPLE, [("t", 0, 7, -1, "")]) == [0]
        reloaded = coordinator(offsets_log)
        reloaded.load(offsets_log.loaded())
        assert "fresh" in reloaded.groups
        assert offset_of(reloaded, "fresh", ("t", 0), stable=True) == (-1, UNSTABLE_OFFSET_COMMIT)
        reloaded.complete_transaction(PRODUCER, True, schema.partition_for("fresh", PARTITIONS))
        assert offset_of(reloaded, "fresh", ("t", 0)) == (7, 0)

    run(offsets_log, scenario)


def test_a_completion_told_while_loading_applies_after_the_load(tmp_path: Any) -> None:
    offsets_log = FileOffsetsLog(str(tmp_path))

    async def scenario() -> None:
        coord = coordinator(offsets_log)
        assert await coord.txn_commit_offsets("g", PRODUCER, EPOCH, SIMPLE, [("t", 0, 7, -1, "")]) == [0]
        loading = coordinator(offsets_log)
        loading.active, loading.loading = False, True
        entries = offsets_log.loaded()  # read before the marker is written
        write_marker(offsets_log.logs[schema.partition_for("g", PARTITIONS)], PRODUCER, True)
        loading.complete_transaction(PRODUCER, True, schema.partition_for("g", PARTITIONS))
        assert await loading.txn_commit_offsets("g", PRODUCER, EPOCH, SIMPLE, [("t", 0, 8, -1, "")]) == [
            COORDINATOR_LOAD_IN_PROGRESS]
        loading.load(entries)
        loading.loading, loading.active = False, True
        assert offset_of(loading, "g", ("t", 0), stable=True) == (7, 0)

    run(offsets_log, scenario)


async def stable_member(coord: GroupCoordinator, group: str, instance: str | None = None) -> MemberRef:
    joining = JoiningMember("", instance, "consumer", (("range", b""),), 10_000, 10_000, "c", "/h")
    joined = await coord.join_group(group, joining, False)
    assert joined.error_code == 0
    member = MemberRef(joined.generation, joined.member_id, instance)
    assert (await coord.sync_group(group, member, None, None, [(joined.member_id, b"")])).error_code == 0
    return member


@pytest.mark.parametrize("case", ["unknown member", "old generation", "fenced instance", "no such group"])
def test_the_sender_is_checked_as_kafka_checks_a_transactional_commit(tmp_path: Any, case: str) -> None:
    offsets_log = FileOffsetsLog(str(tmp_path))

    async def scenario() -> None:
        coord = coordinator(offsets_log)
        member = await stable_member(coord, "g", instance="static-1")
        sender, expected = {
            "unknown member": (MemberRef(member.generation, "nobody", None), UNKNOWN_MEMBER_ID),
            "old generation": (MemberRef(member.generation - 1, member.member_id, "static-1"), ILLEGAL_GENERATION),
            "fenced instance": (MemberRef(member.generation, "another-id", "static-1"), FENCED_INSTANCE_ID),
            "no such group": (MemberRef(3, "someone", None), ILLEGAL_GENERATION),
        }[case]
        group = "never-seen" if case == "no such group" else "g"
        assert await coord.txn_commit_offsets(group, PRODUCER, EPOCH, sender, [("t", 0, 1, -1, ""), ("t", 1, 1, -1, "")]) == [
            expected, expected]
        assert offset_of(coord, group, ("t", 0), stable=True) == (-1, 0), "nothing pending after a refusal"
        # The member itself commits; so does a transactional producer that names no member
        # (TxnOffsetCommit before v3 carries none), though the group has members.
        assert await coord.txn_commit_offsets("g", PRODUCER, EPOCH, member, [("t", 0, 1, -1, "")]) == [0]
        assert await coord.txn_commit_offsets("g", PRODUCER + 1, EPOCH, SIMPLE, [("t", 1, 1, -1, "")]) == [0]

    run(offsets_log, scenario)


def test_a_simple_consumer_group_is_created_and_metadata_is_bounded(tmp_path: Any) -> None:
    offsets_log = FileOffsetsLog(str(tmp_path))

    async def scenario() -> None:
        coord = coordinator(offsets_log, offset_metadata_max_bytes=4)
        assert await coord.txn_commit_offsets("new", PRODUCER, EPOCH, SIMPLE, [("t", 0, 1, -1, "long!"), ("t", 1, 1, -1, "ok")]) == [
            12, 0]  # OFFSET_METADATA_TOO_LARGE for the first only
        assert "new" in coord.groups
        assert await coord.txn_commit_offsets("", PRODUCER, EPOCH, SIMPLE, [("t", 0, 1, -1, "")]) == [24]  # INVALID_GROUP_ID
        assert await coord.txn_commit_offsets("new", -1, EPOCH, SIMPLE, [("t", 0, 1, -1, "")]) == [
            49]  # INVALID_PRODUCER_ID_MAPPING: no producer

    run(offsets_log, scenario)


def test_pending_offsets_do_not_expire_and_deleting_them_writes_a_tombstone(tmp_path: Any) -> None:
    offsets_log = FileOffsetsLog(str(tmp_path))

    async def scenario() -> None:
        coord = coordinator(offsets_log, offsets_retention_ms=1)
        assert await coord.commit_offsets("g", SIMPLE, -1, [("t", 0, 5, -1, ""), ("t", 1, 5, -1, "")], known) == [0, 0]
        assert await coord.txn_commit_offsets("g", PRODUCER, EPOCH, SIMPLE, [("t", 0, 9, -1, "")]) == [0]
        await asyncio.sleep(0.01)
        await coord.expire_offsets()
        assert "g" in coord.groups, "a group with a transaction open on it stays"
        assert offset_of(coord, "g", ("t", 0)) == (5, 0), "an offset with a pending one does not expire"
        assert offset_of(coord, "g", ("t", 1)) == (-1, 0)

        assert await coord.txn_commit_offsets("g", PRODUCER, EPOCH, SIMPLE, [("t", 2, 9, -1, "")]) == [0]
        assert await coord.delete_offsets("g", [("t", 2)]) == (0, [0])
        assert offset_of(coord, "g", ("t", 2), stable=True) == (-1, 0), "the tombstone drops the pending offset"
        assert (schema.OffsetKey("g", "t", 2), None) in offsets_log.entries()
        coord.complete_transaction(PRODUCER, True, schema.partition_for("g", PARTITIONS))
        assert offset_of(coord, "g", ("t", 2)) == (-1, 0)
        assert offset_of(coord, "g", ("t", 0)) == (9, 0)

    run(offsets_log, scenario)


def test_the_load_reads_producers_of_transactional_batches_and_markers_only(tmp_path: Any) -> None:
    offsets_log = FileOffsetsLog(str(tmp_path))
    try:
        log = offsets_log.logs[0]
        record = [(schema.encode_key(schema.OffsetKey("g", "t", 0)), schema.encode_offset_value(schema.OffsetValue(1, -1, "", 0)))]
        log.append(schema.offsets_batch(record, 0))
        log.append(encode_batch([Record(0, 0, *record[0])], producer_id=55, producer_epoch=0, base_sequence=0))  # idempotent only
        log.append(schema.txn_offsets_batch(record, 0, PRODUCER, EPOCH))
        write_marker(log, PRODUCER, False)
        data = log.read_bytes(0, 1 << 20)
        entries, next_offset = load_entries(data, 0)
        assert next_offset == 4
        assert [(type(e).__name__, e.offset, e.producer_id) for e in entries] == [
            ("OffsetsRecord", 0, -1), ("OffsetsRecord", 1, -1), ("OffsetsRecord", 2, PRODUCER), ("TxnMarker", 3, PRODUCER)]
        assert isinstance(entries[3], TxnMarker) and not entries[3].committed
        assert [e.offset for e in load_entries(data, 3)[0]] == [3], "entries before the asked offset are left out"
    finally:
        offsets_log.close()
