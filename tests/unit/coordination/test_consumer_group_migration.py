"""Classic members in a consumer group and groups that change kind with members in them
(KIP-848's online migration), in the group coordinator over real logs and a real topic
registry; and the embedded consumer protocol's bytes they are read from and written in."""

from __future__ import annotations

import asyncio
import struct
from typing import Any

import pytest

from coordination.groups.consumer.embedded_protocol import (
    EmbeddedProtocolError,
    encode_assignment,
    parse_subscription,
)
from coordination.groups.group import parse_assignment_partitions
from coordination.groups.requests import JoiningMember, MemberRef
from coordination.groups.state import GroupState
from tests.unit.coordination.test_consumer_group_heartbeat import Client, make_cluster  # noqa: F401

E_REBALANCE, E_ILLEGAL_GENERATION, E_UNKNOWN_MEMBER, E_MEMBER_ID_REQUIRED = 27, 22, 25, 79


def subscription(topics: list[str], owned: list[tuple[str, int]] | None = None, version: int = 1) -> bytes:
    out = struct.pack(">hi", version, len(topics))
    for topic in topics:
        out += struct.pack(">h", len(topic)) + topic.encode()
    out += struct.pack(">i", -1)
    if version >= 1:
        by_topic: dict[str, list[int]] = {}
        for topic, partition in owned or ():
            by_topic.setdefault(topic, []).append(partition)
        out += struct.pack(">i", len(by_topic))
        for topic, parts in by_topic.items():
            out += struct.pack(">h", len(topic)) + topic.encode() + struct.pack(">i", len(parts))
            out += b"".join(struct.pack(">i", p) for p in parts)
    if version >= 2:
        out += struct.pack(">i", 7)
    if version >= 3:
        out += struct.pack(">h", 2) + b"r1"
    return out


def test_the_embedded_subscription_reads_every_version_and_refuses_garbage() -> None:
    for version in range(4):
        parsed = parse_subscription(subscription(["a", "b"], [("a", 1)], version))
        assert parsed.topics == ("a", "b") and parsed.version == version
        assert parsed.owned == (None if version == 0 else (("a", 1),))
        assert parsed.generation == (7 if version >= 2 else -1)
        assert parsed.rack_id == ("r1" if version == 3 else None)
    for garbage in (b"", b"\x00\x01\x7f\xff\xff\xff", subscription(["a"])[:-3]):
        with pytest.raises(EmbeddedProtocolError):
            parse_subscription(garbage)


def test_an_encoded_assignment_reads_back_with_the_classic_parser() -> None:
    data = encode_assignment({"b": [2, 0], "a": [1]}, 3)
    assert struct.unpack_from(">h", data)[0] == 3
    assert parse_assignment_partitions(data) == [("a", 1), ("b", 0), ("b", 2)]


def _join(member_id: str, topics: list[str], owned: list[tuple[str, int]] | None = None) -> JoiningMember:
    return JoiningMember(member_id, None, "consumer", (("range", subscription(topics, owned)),), 10_000, 10_000,
                         "c", "/h")


def test_a_classic_member_joins_a_consumer_group_and_follows_its_assignment(make_cluster: Any) -> None:  # noqa: F811
    c = make_cluster()
    c.topic("t", 2)

    async def scenario() -> None:
        modern = Client(c, "m")
        await modern.beat()
        assert modern.held() == {0, 1}
        coord = c.coord
        first = await coord.join_group("g", _join("", ["t"]), True)
        assert first.error_code == E_MEMBER_ID_REQUIRED and first.member_id
        joined = await coord.join_group("g", _join(first.member_id, ["t"]), True)
        assert joined.error_code == 0 and joined.leader == "" and joined.members == []
        generation = joined.generation
        # Nothing is free yet: the classic member gets nothing until the other revokes.
        synced = await coord.sync_group("g", MemberRef(generation, joined.member_id, None), "consumer", "range", [])
        assert synced.error_code == 0 and parse_assignment_partitions(synced.assignment) == []
        await modern.beat()  # told to revoke one
        await modern.beat()
        assert len(modern.held()) == 1
        assert coord.heartbeat("g", MemberRef(generation, joined.member_id, None)) == E_REBALANCE  # it may take it now
        assert coord.heartbeat("g", MemberRef(generation + 5, joined.member_id, None)) == E_ILLEGAL_GENERATION
        again = await coord.join_group("g", _join(joined.member_id, ["t"]), True)
        synced = await coord.sync_group("g", MemberRef(again.generation, joined.member_id, None), None, None, [])
        assert {p for _t, p in parse_assignment_partitions(synced.assignment)} == {0, 1} - modern.held()
        assert coord.heartbeat("g", MemberRef(again.generation, joined.member_id, None)) == 0
        assert await coord.leave_group("g", [("nobody", None)]) == (0, [E_UNKNOWN_MEMBER])

    asyncio.run(scenario())


def test_a_classic_group_is_upgraded_by_a_consumer_member_and_downgraded_when_it_leaves(make_cluster: Any) -> None:  # noqa: F811
    c = make_cluster()
    c.topic("t", 2)

    async def scenario() -> None:
        coord = c.coord
        joined = await coord.join_group("g", _join("", ["t"]), False)
        await coord.sync_group("g", MemberRef(joined.generation, joined.member_id, None), None, None,
                               [(joined.member_id, encode_assignment({"t": [0, 1]}))])
        assert coord.groups["g"].is_(GroupState.STABLE)
        modern = Client(c, "m")
        await modern.beat()
        group = coord.groups["g"]
        assert group.modern is not None and set(group.modern.members) == {joined.member_id, "m"}
        assert group.modern.members[joined.member_id].uses_classic_protocol
        assert not group.members, "no classic members left beside the consumer group's"
        assert group.modern.members[joined.member_id].assignment.assigned, "it keeps what it held"
        # The classic member learns of the new epoch, revokes by rejoining, and the new one gets its share.
        assert coord.heartbeat("g", MemberRef(joined.generation, joined.member_id, None)) == E_REBALANCE
        again = await coord.join_group("g", _join(joined.member_id, ["t"], [("t", 0), ("t", 1)]), False)
        rejoined = await coord.join_group("g", _join(joined.member_id, ["t"], []), False)
        await modern.beat()
        assert len(modern.held()) == 1 and again.error_code == rejoined.error_code == 0
        # The consumer member leaves: only a classic member remains, so the group is classic again.
        assert (await c.beat("m", -1, {})).error_code == 0
        group = coord.groups["g"]
        assert group.modern is None and set(group.members) == {joined.member_id}
        assert group.is_(GroupState.PREPARING_REBALANCE)
        loaded = c.reload().groups["g"]
        assert loaded.modern is None and set(loaded.members) == {joined.member_id}, "the log says so too"

    asyncio.run(scenario())


def test_committed_offsets_survive_every_change_of_kind_and_a_reload(make_cluster: Any) -> None:  # noqa: F811
    c = make_cluster()
    c.topic("t", 2)

    async def scenario() -> None:
        coord = c.coord
        joined = await coord.join_group("g", _join("", ["t"]), False)
        ref = MemberRef(joined.generation, joined.member_id, None)
        await coord.sync_group("g", ref, None, None, [(joined.member_id, encode_assignment({"t": [0, 1]}))])
        assert await coord.commit_offsets("g", ref, -1, [("t", 0, 11, -1, "")], lambda _t, _p: True) == [0]
        await Client(c, "m").beat()  # upgrade: the classic record is tombstoned
        assert c.reload().groups["g"].offsets[("t", 0)].offset == 11
        assert await c.coord.commit_offsets("g", MemberRef(-1, "", None), -1, [("t", 1, 5, -1, "")],
                                            lambda _t, _p: True) != [0], "not while the group has members"
        assert (await c.beat("m", -1, {})).error_code == 0  # downgrade
        loaded = c.reload().groups["g"]
        assert loaded.modern is None and loaded.offsets[("t", 0)].offset == 11

    asyncio.run(scenario())
