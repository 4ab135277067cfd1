"""The classic group's join phase ends as soon as it can: every known member has rejoined
(or left), the initial delay of a group that was empty is over, or the rebalance timeout
has passed. A member that leaves is gone at once, and a group its last member left is
Empty at once, written to __consumer_offsets, describable and deletable.

The coordinator runs on a real offsets log (storage's PartitionLog in a temp dir); time is
real, with delays of a few tenths of a second, and every wait is bounded. No tick() runs
unless a test calls it: what ends a phase here is a request, or the initial delay's timer.
"""

from __future__ import annotations

import asyncio
from typing import Any

from coordination.groups import offsets_schema as schema
from coordination.groups.coordinator import CoordinatorSettings, GroupCoordinator, JoinResult
from coordination.groups.requests import JoiningMember, MemberRef
from coordination.groups.state import GroupState
from tests.unit.coordination.test_coordinator_offsets import FileOffsetsLog

REBALANCE_MS = 30_000
WAIT_S = 5.0  # far below REBALANCE_MS: a join that had to wait for the timeout would not answer


def joining(member_id: str = "", instance: str | None = None, rebalance_ms: int = REBALANCE_MS) -> JoiningMember:
    return JoiningMember(member_id, instance, "consumer", (("range", b"meta"),), 10_000, rebalance_ms, "c", "/h")


async def join(coord: GroupCoordinator, group: str, member_id: str = "", instance: str | None = None,
               rebalance_ms: int = REBALANCE_MS) -> JoinResult:
    return await asyncio.wait_for(coord.join_group(group, joining(member_id, instance, rebalance_ms), False), WAIT_S)


async def stable_group(coord: GroupCoordinator, group: str, count: int,
                       instances: list[str | None] | None = None) -> list[JoinResult]:
    """``count`` members joined and synced: the group Stable."""
    instances = instances or [None] * count
    results = await asyncio.gather(*(join(coord, group, instance=instances[i]) for i in range(count)))
    leader = next(r for r in results if r.member_id == r.leader)
    await asyncio.gather(*(coord.sync_group(group, MemberRef(r.generation, r.member_id, instances[i]), None, None,
                                            [(m, b"a") for m, _i, _md in leader.members or ()] if r is leader else [])
                           for i, r in enumerate(results)))
    assert coord.groups[group].state is GroupState.STABLE
    return list(results)


def run(tmp_path: Any, body: Any, **settings: Any) -> None:
    """``body(coordinator, offsets log)``; the initial delay (a tenth of a second unless
    given) lets members that join together form one generation."""
    settings.setdefault("initial_rebalance_delay_ms", 100)
    offsets_log = FileOffsetsLog(str(tmp_path))
    try:
        coord = GroupCoordinator(CoordinatorSettings(min_session_timeout_ms=100, **settings), offsets_log)
        coord.active = True
        asyncio.run(body(coord, offsets_log))
    finally:
        offsets_log.close()


def test_the_initial_delay_is_extended_while_new_members_keep_arriving(tmp_path: Any) -> None:
    async def body(coord: GroupCoordinator, _log: FileOffsetsLog) -> None:
        loop = asyncio.get_running_loop()
        started = loop.time()
        first = asyncio.ensure_future(join(coord, "g"))
        await asyncio.sleep(0.3)
        second = asyncio.ensure_future(join(coord, "g"))
        await asyncio.sleep(0.3)  # past the first member's delay, within the second's
        assert not first.done(), "a new member arrived during the delay: the join phase goes on"
        third = asyncio.ensure_future(join(coord, "g"))
        results = await asyncio.gather(first, second, third)
        ended = loop.time() - started
        assert {r.generation for r in results} == {1}
        assert {r.error_code for r in results} == {0}
        assert len(next(r for r in results if r.member_id == r.leader).members or ()) == 3
        assert ended >= 0.6 + 0.4, "the phase ends a whole delay after the last arrival"
        print(f"join phase of three members ended {ended:.2f} s after the first arrived")

    run(tmp_path, body, initial_rebalance_delay_ms=400)


def test_the_initial_delay_ends_at_the_rebalance_timeout_however_many_arrive(tmp_path: Any) -> None:
    async def body(coord: GroupCoordinator, _log: FileOffsetsLog) -> None:
        first = asyncio.ensure_future(join(coord, "g", rebalance_ms=700))
        await asyncio.sleep(0.4)
        second = asyncio.ensure_future(join(coord, "g", rebalance_ms=700))
        # The second member's arrival would push the end to 0.9 s; the cap ends it at 0.7 s.
        results = await asyncio.gather(first, second)
        assert [r.generation for r in results] == [1, 1]
        await asyncio.sleep(0.5)
        late = asyncio.ensure_future(join(coord, "g", rebalance_ms=700))
        await asyncio.sleep(0.1)
        assert not late.done() and coord.groups["g"].state is GroupState.PREPARING_REBALANCE, \
            "a member after the phase ended starts the next rebalance"
        late.cancel()

    run(tmp_path, body, initial_rebalance_delay_ms=500)


def test_a_member_leaving_during_the_join_phase_completes_it_at_once(tmp_path: Any) -> None:
    async def body(coord: GroupCoordinator, _log: FileOffsetsLog) -> None:
        a, b, c = await stable_group(coord, "g", 3)
        rejoin_a = asyncio.ensure_future(join(coord, "g", a.member_id))
        rejoin_b = asyncio.ensure_future(join(coord, "g", b.member_id))
        await asyncio.sleep(0.05)
        assert not rejoin_a.done(), "c has not rejoined yet"
        assert coord.heartbeat("g", MemberRef(c.generation, c.member_id, None)) == 27  # REBALANCE_IN_PROGRESS
        assert await coord.leave_group("g", [(c.member_id, None)]) == (0, [0])
        results = await asyncio.gather(rejoin_a, rejoin_b)  # bounded by WAIT_S, not the rebalance timeout
        assert {r.generation for r in results} == {a.generation + 1}
        assert c.member_id not in coord.groups["g"].members and len(coord.groups["g"].members) == 2

    run(tmp_path, body)


def test_a_member_leaving_a_stable_group_rebalances_the_others_at_once(tmp_path: Any) -> None:
    async def body(coord: GroupCoordinator, _log: FileOffsetsLog) -> None:
        a, b = await stable_group(coord, "g", 2)
        assert coord.heartbeat("g", MemberRef(a.generation, a.member_id, None)) == 0
        assert await coord.leave_group("g", [(b.member_id, None)]) == (0, [0])
        assert coord.heartbeat("g", MemberRef(a.generation, a.member_id, None)) == 27  # REBALANCE_IN_PROGRESS
        again = await join(coord, "g", a.member_id)  # the only known member: no wait
        assert again.error_code == 0 and again.generation == a.generation + 1 and again.leader == a.member_id

    run(tmp_path, body)


def test_a_member_leaving_while_the_others_wait_for_the_assignment_rebalances_them(tmp_path: Any) -> None:
    async def body(coord: GroupCoordinator, _log: FileOffsetsLog) -> None:
        results = await asyncio.gather(join(coord, "g"), join(coord, "g"))
        leader = next(r for r in results if r.member_id == r.leader)
        follower = next(r for r in results if r is not leader)
        parked = asyncio.ensure_future(coord.sync_group("g", MemberRef(follower.generation, follower.member_id, None),
                                                        None, None, []))
        await asyncio.sleep(0.05)
        assert coord.groups["g"].state is GroupState.COMPLETING_REBALANCE and not parked.done()
        assert await coord.leave_group("g", [(leader.member_id, None)]) == (0, [0])
        assert (await asyncio.wait_for(parked, WAIT_S)).error_code == 27  # REBALANCE_IN_PROGRESS

    run(tmp_path, body)


def test_after_the_last_member_leaves_the_group_is_empty_written_and_deletable(tmp_path: Any) -> None:
    async def body(coord: GroupCoordinator, offsets_log: FileOffsetsLog) -> None:
        a, b = await stable_group(coord, "g", 2)
        assert await coord.leave_group("g", [(a.member_id, None), (b.member_id, None)]) == (0, [0, 0])
        described = coord.describe("g")
        assert (described.error_code, described.state, described.members) == (0, "Empty", [])
        assert await coord.delete_groups(["g"]) == [0]
        assert coord.describe("g").error_code != 0  # GROUP_ID_NOT_FOUND: gone
        written = [value for key, value in offsets_log.entries() if key == schema.GroupKey("g")]
        empty = [v for v in written if isinstance(v, schema.GroupValue) and not v.members]
        assert empty and empty[0].generation == a.generation + 1, "the Empty generation was written"
        assert written[-1] is None, "then the group's tombstone"

    run(tmp_path, body)


def test_a_static_member_that_does_not_rejoin_keeps_its_place_and_does_not_stall_the_others(tmp_path: Any) -> None:
    async def body(coord: GroupCoordinator, _log: FileOffsetsLog) -> None:
        static, dynamic = await stable_group(coord, "g", 2, instances=["i-1", None])
        assert await coord.leave_group("g", [("", "i-1")]) == (0, [0]), "removed by its instance id, as admin tools do"
        again = await join(coord, "g", dynamic.member_id)
        assert again.generation == static.generation + 1 and list(coord.groups["g"].members) == [dynamic.member_id]
        assert "i-1" not in coord.groups["g"].static_members

    run(tmp_path, body)


def test_when_only_static_members_that_did_not_rejoin_are_left_the_join_phase_goes_on(tmp_path: Any) -> None:
    async def body(coord: GroupCoordinator, _log: FileOffsetsLog) -> None:
        results = await stable_group(coord, "g", 2, instances=["i-1", "i-2"])
        group = coord.groups["g"]
        await coord.leave_group("g", [(results[1].member_id, "i-2")])
        assert group.state is GroupState.PREPARING_REBALANCE
        group.rebalance_deadline = 0.0  # the rebalance timeout has passed with i-1 silent
        coord.tick()
        assert group.state is GroupState.PREPARING_REBALANCE, "no generation that no member would hear of"
        assert list(group.static_members) == ["i-1"]
        # i-1 restarts (unknown member id, same instance id) and takes its place.
        back = await join(coord, "g", instance="i-1")
        assert back.error_code == 0 and back.generation == results[0].generation + 1 and back.leader == back.member_id

    run(tmp_path, body)


def test_a_join_phase_waiting_only_for_a_pending_member_ends_when_it_leaves(tmp_path: Any) -> None:
    async def body(coord: GroupCoordinator, _log: FileOffsetsLog) -> None:
        (a,) = await stable_group(coord, "g", 1)
        # A new client is given its member id (JoinGroup v4+) and closes before joining with it.
        pending = await coord.join_group("g", joining(), require_known_member_id=True)
        assert pending.error_code == 79 and pending.member_id  # MEMBER_ID_REQUIRED
        rejoin = asyncio.ensure_future(join(coord, "g", a.member_id))  # the leader rejoining starts a rebalance
        await asyncio.sleep(0.05)
        assert not rejoin.done(), "the pending member may still come"
        assert await coord.leave_group("g", [(pending.member_id, None)]) == (0, [0])
        again = await rejoin
        assert again.error_code == 0 and again.generation == a.generation + 1

    run(tmp_path, body)
