"""GroupCoordinator over real partition logs: commits land as Kafka's records, offsets of
empty groups expire, and a coordinator that loads the log knows the groups again.

The offsets log here is storage's PartitionLog in a temp dir (what a worker appends to),
one per __consumer_offsets partition, behind the coordinator's OffsetsLog interface.
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

from coordination.groups import offsets_schema as schema
from coordination.groups.coordinator import CoordinatorSettings, GroupCoordinator
from coordination.groups.replay import LoadEntry, OffsetsRecord, load_entries
from coordination.groups.requests import JoiningMember, MemberRef
from coordination.groups.state import GroupState
from storage.config import LogConfig
from storage.log import PartitionLog
from storage.types import TopicPartition

PARTITIONS = 3


class FileOffsetsLog:
    partitions = PARTITIONS

    def __init__(self, directory: str) -> None:
        self.logs = [PartitionLog(os.path.join(directory, f"__consumer_offsets-{p}"),
                                  TopicPartition("__consumer_offsets", p), LogConfig(), clean_shutdown=True)
                     for p in range(PARTITIONS)]

    async def append(self, partition: int, batch: bytes) -> int:
        self.logs[partition].append(memoryview(batch))
        return 0

    def loaded(self) -> list[tuple[int, list[LoadEntry]]]:
        """What a coordinator's load reads: each partition's entries, decoded as the coordinator process does."""
        return [(p, load_entries(log.read_bytes(0, 1 << 24) if log.log_end_offset else b"", 0)[0])
                for p, log in enumerate(self.logs)]

    def entries(self) -> list[tuple[Any, Any]]:
        """(key, value) of every record, all partitions."""
        return [(e.key, e.value) for _p, entries in self.loaded() for e in entries if isinstance(e, OffsetsRecord)]

    def close(self) -> None:
        for log in self.logs:
            log.close()


def coordinator(offsets_log: FileOffsetsLog, **settings: Any) -> GroupCoordinator:
    made = GroupCoordinator(CoordinatorSettings(min_session_timeout_ms=100, initial_rebalance_delay_ms=0, **settings),
                            offsets_log)
    made.active = True
    return made


def known(_topic: str, _partition: int) -> bool:
    return True


def test_commits_are_kafka_records_and_a_new_coordinator_loads_them(tmp_path: Any) -> None:
    offsets_log = FileOffsetsLog(str(tmp_path))

    async def run() -> None:
        first = coordinator(offsets_log)
        member = JoiningMember("", None, "consumer", (("range", b"meta"),), 10_000, 10_000, "c", "/h")
        joined = await first.join_group("g", member, False)
        assert joined.error_code == 0
        synced = await first.sync_group("g", MemberRef(joined.generation, joined.member_id, None), None, None,
                                        [(joined.member_id, b"assigned")])
        assert synced.error_code == 0
        assert await first.commit_offsets("g", MemberRef(joined.generation, joined.member_id, None), -1,
                                          [("t", 0, 42, 3, "m"), ("t", 1, 7, -1, None)], known) == [0, 0]
        assert await first.commit_offsets("simple", MemberRef(-1, "", None), -1, [("u", 0, 5, -1, "")], known) == [0]

        second = coordinator(offsets_log)
        second.load(offsets_log.loaded())
        group = second.groups["g"]
        assert group.state is GroupState.STABLE and group.generation == joined.generation
        assert list(group.members) == [joined.member_id] and group.members[joined.member_id].assignment == b"assigned"
        assert second.fetch_offsets("g", [("t", 0), ("t", 1), ("t", 2)])[1] == [
            ("t", 0, schema.OffsetValue(42, 3, "m", group.offsets[("t", 0)].commit_timestamp), 0),
            ("t", 1, schema.OffsetValue(7, -1, "", group.offsets[("t", 1)].commit_timestamp), 0),
            ("t", 2, None, 0)]
        assert second.groups["simple"].state is GroupState.EMPTY
        # The member keeps heartbeating to the new coordinator in the same generation.
        assert second.heartbeat("g", MemberRef(joined.generation, joined.member_id, None)) == 0

    try:
        asyncio.run(run())
    finally:
        offsets_log.close()


def test_offsets_of_an_empty_group_expire_and_the_group_goes(tmp_path: Any) -> None:
    offsets_log = FileOffsetsLog(str(tmp_path))

    async def run() -> None:
        coord = coordinator(offsets_log, offsets_retention_ms=50)
        assert await coord.commit_offsets("old", MemberRef(-1, "", None), -1, [("t", 0, 1, -1, ""), ("t", 1, 2, -1, "")], known) == [0, 0]
        member = JoiningMember("", None, "consumer", (("range", b""),), 10_000, 10_000, "c", "/h")
        joined = await coord.join_group("busy", member, False)
        # Until the assignment is in, a member's commit is refused (REBALANCE_IN_PROGRESS), as Kafka does.
        assert await coord.commit_offsets("busy", MemberRef(joined.generation, joined.member_id, None), -1, [("t", 0, 9, -1, "")],
                                          known) == [27]
        await coord.sync_group("busy", MemberRef(joined.generation, joined.member_id, None), None, None, [(joined.member_id, b"")])
        assert await coord.commit_offsets("busy", MemberRef(joined.generation, joined.member_id, None), -1, [("t", 0, 9, -1, "")],
                                          known) == [0]
        await asyncio.sleep(0.15)
        await coord.expire_offsets()
        assert "old" not in coord.groups, "an empty group with no offsets left is removed"
        assert coord.fetch_offsets("busy", [("t", 0)])[1][0][2] is not None, "a group with members keeps its offsets"
        tombstones = [key for key, value in offsets_log.entries() if value is None]
        assert set(tombstones) == {schema.OffsetKey("old", "t", 0), schema.OffsetKey("old", "t", 1), schema.GroupKey("old")}
        reloaded = coordinator(offsets_log)
        reloaded.load(offsets_log.loaded())
        assert "old" not in reloaded.groups and "busy" in reloaded.groups

    try:
        asyncio.run(run())
    finally:
        offsets_log.close()


def test_an_explicit_retention_time_expires_offsets_at_that_time(tmp_path: Any) -> None:
    offsets_log = FileOffsetsLog(str(tmp_path))

    async def run() -> None:
        coord = coordinator(offsets_log)  # the default retention is a week
        assert await coord.commit_offsets("brief", MemberRef(-1, "", None), 30, [("t", 0, 1, -1, "")], known) == [0]
        assert await coord.commit_offsets("brief", MemberRef(-1, "", None), -1, [("t", 1, 1, -1, "")], known) == [0]
        started = time.monotonic()
        while time.monotonic() - started < 0.1:
            await asyncio.sleep(0.01)
        await coord.expire_offsets()
        assert [(t, p, v is not None) for t, p, v, _code in coord.fetch_offsets("brief", [("t", 0), ("t", 1)])[1]] == [
            ("t", 0, False), ("t", 1, True)]

    try:
        asyncio.run(run())
    finally:
        offsets_log.close()
