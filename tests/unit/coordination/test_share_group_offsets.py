"""A share group's offsets for admins: described from the share state summaries, altered (an
empty group only) by initializing the partitions again at the offsets given, deleted (an
empty group only) from the share coordinator and the group's state partition metadata."""

from __future__ import annotations

import asyncio
from typing import Any, Iterator

import pytest

from coordination.groups.share.offsets import PartitionOffset
from tests.unit.coordination.share_state_log import known as share_known
from tests.unit.coordination.test_share_group_heartbeat import Cluster

E_UNKNOWN_TOPIC, E_GROUP_NOT_FOUND, E_NON_EMPTY, E_INVALID_GROUP_ID = 3, 69, 68, 24


@pytest.fixture
def make_cluster(tmp_path: Any) -> Iterator[Any]:
    made: list[Cluster] = []

    def make() -> Cluster:
        made.append(Cluster(tmp_path))
        return made[-1]

    yield make
    for cluster in made:
        cluster.log.close()


async def group_with_state(c: Cluster) -> None:
    """Group "g" with "t"'s partitions initialized, then left empty."""
    await c.beat("a", 0)
    await c.settled()
    await c.beat("a", 1)


def test_describe_reads_the_summaries_and_answers_minus_one_for_what_has_no_state(make_cluster: Any) -> None:
    c = make_cluster()
    t = c.topic("t", 2)

    async def scenario() -> None:
        await group_with_state(c)
        admin = c.coord.share_offsets
        code, [topic] = await admin.describe("g", [("t", [0, 1])])
        assert (code, topic.topic_id, topic.partitions) == (0, t, (PartitionOffset(0, -1, -1), PartitionOffset(1, -1, -1)))
        code, everything = await admin.describe("g", None)
        assert code == 0 and [(x.name, [p.partition for p in x.partitions]) for x in everything] == [("t", [0, 1])]
        code, [missing] = await admin.describe("g", [("nope", [0])])
        assert (code, missing.topic_id, missing.partitions) == (0, None, (PartitionOffset(0),))
        assert await admin.describe("other", None) == (0, [])

    asyncio.run(scenario())


def test_alter_initializes_the_partitions_at_the_offsets_of_an_empty_group_only(make_cluster: Any) -> None:
    c = make_cluster()
    t = c.topic("t", 2)

    async def scenario() -> None:
        await group_with_state(c)
        admin = c.coord.share_offsets
        before = c.written()
        code, message, _ = await admin.alter("g", [("t", [(0, 7)])])
        assert (code, c.written()) == (E_NON_EMPTY, before) and message
        await c.beat("a", -1)
        assert (await admin.alter("nope", [("t", [(0, 7)])]))[0] == E_GROUP_NOT_FOUND
        assert (await admin.alter("", [("t", [(0, 7)])]))[0] == E_INVALID_GROUP_ID
        code, _, answers = await admin.alter("g", [("t", [(0, 7), (5, 1)]), ("nope", [(0, 1)])])
        assert code == 0
        assert [(x.name, x.topic_id, [(p.partition, p.error_code) for p in x.partitions]) for x in answers] == [
            ("t", t, [(0, 0), (5, E_UNKNOWN_TOPIC)]), ("nope", None, [(0, E_UNKNOWN_TOPIC)])]
        share = c.coord.groups["g"].share
        assert share is not None
        assert share_known(c.state)[("g", t, 0)] == (share.group_epoch, 7)
        assert share.initializing == {} and share.initialized[t].partitions == frozenset({0, 1})
        code, [topic] = await admin.describe("g", [("t", [0])])
        assert topic.partitions[0].start_offset == 7
        # The metadata written is loaded back.
        assert c.reload().groups["g"].share.initialized[t].partitions == frozenset({0, 1})  # type: ignore[union-attr]

    asyncio.run(scenario())


def test_delete_removes_the_topics_share_state(make_cluster: Any) -> None:
    c = make_cluster()
    t = c.topic("t", 2)
    c.topic("u", 1)

    async def scenario() -> None:
        await group_with_state(c)
        admin = c.coord.share_offsets
        assert (await admin.delete("g", ["t"]))[0] == E_NON_EMPTY
        await c.beat("a", -1)
        code, _, results = await admin.delete("g", ["t", "u", "nope"])
        assert code == 0
        assert [(r.name, r.topic_id, r.error_code) for r in results] == [
            ("u", None, E_UNKNOWN_TOPIC), ("nope", None, E_UNKNOWN_TOPIC), ("t", t, 0)]
        assert not {("g", t, 0), ("g", t, 1)} & set(share_known(c.state))
        share = c.coord.groups["g"].share
        assert share is not None and share.initialized == {} and share.deleting == {}
        assert (await admin.delete("g", ["t"]))[2][0].error_code == E_UNKNOWN_TOPIC  # nothing left to delete

    asyncio.run(scenario())
