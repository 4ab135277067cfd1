"""Share groups (KIP-932), group side, in the group coordinator over real partition logs and a
real local topic registry: members join and split the partitions once their share state is
initialized, share them when they outnumber them, leave and are fenced; bad heartbeats get
Kafka's errors and write nothing; requests of the other group kinds get Kafka's answers; a
coordinator that loads the log resumes every share group where it stood."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from coordination.groups.consumer.heartbeat import HeartbeatRequest
from coordination.groups.consumer.service import RegistryCatalog
from coordination.groups.coordinator import GroupCoordinator
from coordination.groups.requests import JoiningMember, MemberRef
from coordination.groups.share.heartbeat import ShareHeartbeatAnswer, ShareHeartbeatRequest, ShareSettings
from coordination.share import records as share_records
from coordination.share.state_coordinator import ShareStateCoordinator
from tests.unit.coordination.group_cluster import COORDINATOR_SETTINGS, GroupCluster, clusters, parts, run
from tests.unit.coordination.share_state_log import ListStateLog, share_state
from tests.unit.coordination.share_state_log import known as share_known
from tests.unit.coordination.test_coordinator_offsets import known

E_UNKNOWN_MEMBER, E_INVALID_REQUEST, E_GROUP_NOT_FOUND, E_FENCED_EPOCH = 25, 42, 69, 110
E_GROUP_MAX_SIZE, E_INCONSISTENT_PROTOCOL, E_NON_EMPTY_GROUP = 81, 23, 68


class Cluster(GroupCluster):
    """A coordinator of share groups with its offsets log, topic registry and share state, in a temp dir."""

    def __init__(self, tmp_path: Any, state: ShareStateCoordinator | None = None, **settings: Any) -> None:
        super().__init__(tmp_path)
        self.state = state or share_state()
        self.settings = ShareSettings(**{"heartbeat_interval_ms": 100, **settings})
        self.coord = self.new_coordinator()

    def new_coordinator(self) -> GroupCoordinator:
        coord = GroupCoordinator(COORDINATOR_SETTINGS, self.log, share_settings=self.settings, share_state=self.state)
        coord.consumer.catalog = RegistryCatalog(self.registry)
        coord.share.catalog = RegistryCatalog(self.registry)
        coord.active = True
        return coord

    async def beat(self, member_id: str, epoch: int, group: str = "g", **fields: Any) -> ShareHeartbeatAnswer:
        if epoch == 0:
            fields.setdefault("subscribed_topic_names", ("t",))
        return await self.coord.share.heartbeat(ShareHeartbeatRequest(group, member_id, epoch, **fields))

    async def settled(self) -> None:
        """Wait for the background work (share state initialization) to be done."""
        deadline = time.monotonic() + 5
        while self.coord._background and time.monotonic() < deadline:
            await asyncio.sleep(0.001)
        assert not self.coord._background

    def written(self) -> int:
        return len(self.log.entries())


@pytest.fixture
def make_cluster(tmp_path: Any) -> Any:
    yield from clusters(lambda **settings: Cluster(tmp_path, **settings))


def test_partitions_are_initialized_first_then_two_members_split_them(make_cluster: Any) -> None:
    c = make_cluster()
    t = c.topic("t", 4)

    async def scenario() -> None:
        a = await c.beat("a", 0)
        # Nothing is assignable before the share coordinator has the partitions' state.
        assert (a.error_code, a.member_id, a.member_epoch, parts(a), a.heartbeat_interval_ms) == (0, "a", 1, set(), 100)
        share = c.coord.groups["g"].share
        assert share is not None and set(share.initializing) == {t}
        await c.settled()
        assert share_known(c.state) == {("g", t, p): (1, -1) for p in range(4)}
        assert share.initializing == {} and share.initialized[t].partitions == frozenset(range(4))
        a = await c.beat("a", 1)
        assert (a.member_epoch, parts(a)) == (2, {0, 1, 2, 3})
        b = await c.beat("b", 0)
        # No revocation phase: b gets its share at once, a is told at its next heartbeat.
        assert (b.error_code, b.member_epoch, len(parts(b))) == (0, 3, 2)
        a = await c.beat("a", 2)
        assert a.member_epoch == 3 and parts(a) == {0, 1, 2, 3} - parts(b)
        again = await c.beat("a", 3)
        assert (again.member_epoch, again.assignment) == (3, None)  # nothing new: no assignment sent
        assert share.state == "Stable" and share.group_epoch == share.assignment_epoch == 3
        assert c.coord.groups["g"].protocol_type == "share"

    run(scenario())


def test_members_that_outnumber_the_partitions_share_them(make_cluster: Any) -> None:
    c = make_cluster()
    c.topic("t", 1)

    async def scenario() -> None:
        await c.beat("a", 0)
        await c.settled()
        epochs = {m: (await c.beat(m, 0)).member_epoch for m in ("b", "c")}
        epochs["a"] = 1
        for member, epoch in epochs.items():
            answer = await c.beat(member, epoch, subscribed_topic_names=("t",))
            assert parts(answer) == {0}, member

    run(scenario())


def test_the_previous_epoch_is_accepted_and_others_are_fenced(make_cluster: Any) -> None:
    c = make_cluster()
    c.topic("t", 2)

    async def scenario() -> None:
        await c.beat("a", 0)
        await c.settled()
        assert (await c.beat("a", 1)).member_epoch == 2
        assert (await c.beat("a", 1)).member_epoch == 2  # the answer that bumped it was lost
        before = c.written()
        for epoch in (3, 0):
            answer = await c.beat("a", epoch)
            assert (answer.error_code, answer.member_epoch) == (E_FENCED_EPOCH, 0), epoch
            assert answer.error_message
        assert c.written() == before

    run(scenario())


def test_bad_heartbeats_get_kafkas_errors_and_write_nothing(make_cluster: Any) -> None:
    c = make_cluster(max_size=2)
    c.topic("t", 2)

    async def scenario() -> None:
        await c.beat("a", 0)
        await c.beat("b", 0)
        await c.settled()
        before = c.written()
        share = c.coord.groups["g"].share
        assert share is not None
        epoch_before = share.group_epoch
        cases = [
            (await c.beat("", 0), E_INVALID_REQUEST),
            (await c.beat(" ", 1), E_INVALID_REQUEST),
            (await c.beat("x", 0, group=""), E_INVALID_REQUEST),
            (await c.beat("x", 0, subscribed_topic_names=()), E_INVALID_REQUEST),
            (await c.beat("x", 0, subscribed_topic_names=None), E_INVALID_REQUEST),
            (await c.beat("a", -2), E_INVALID_REQUEST),
            (await c.beat("a", 1, rack_id=""), E_INVALID_REQUEST),
            (await c.beat("nobody", 1), E_GROUP_MAX_SIZE),  # Kafka checks the size before the member
            (await c.beat("nobody", -1), E_UNKNOWN_MEMBER),
            (await c.beat("c", 0), E_GROUP_MAX_SIZE),
            (await c.beat("x", 1, group="missing"), E_GROUP_NOT_FOUND),
            (await c.beat("x", -1, group="missing"), E_GROUP_NOT_FOUND),
        ]
        assert [answer.error_code for answer, _ in cases] == [code for _, code in cases]
        assert all(answer.member_id is None or answer.error_code == 0 for answer, _ in cases)
        assert c.written() == before and share.group_epoch == epoch_before and set(share.members) == {"a", "b"}
        assert "missing" not in c.coord.groups

    run(scenario())


def test_a_member_leaves_and_the_other_takes_everything(make_cluster: Any) -> None:
    c = make_cluster()
    t = c.topic("t", 2)

    async def scenario() -> None:
        await c.beat("a", 0)
        await c.settled()
        await c.beat("a", 1)
        b = await c.beat("b", 0)
        assert (await c.beat("nobody", 3)).error_code == E_UNKNOWN_MEMBER
        left = await c.beat("b", -1)
        assert (left.error_code, left.member_id, left.member_epoch) == (0, "b", -1)
        share = c.coord.groups["g"].share
        assert share is not None and set(share.members) == {"a"} and "b" not in share.target
        assert share.group_epoch == b.member_epoch + 1
        a = await c.beat("a", 2)
        # a never heard of b: it held both partitions all along, so no assignment is sent.
        assert a.member_epoch == share.group_epoch and a.assignment is None
        assert share.members["a"].assigned == share.target["a"] == {t: frozenset({0, 1})}

    run(scenario())


def test_a_subscription_change_assigns_the_new_topic_once_it_is_initialized(make_cluster: Any) -> None:
    c = make_cluster()
    c.topic("t", 1)
    u = c.topic("u", 2)

    async def scenario() -> None:
        await c.beat("a", 0)
        await c.settled()
        a = await c.beat("a", 1)
        a = await c.beat("a", a.member_epoch, subscribed_topic_names=("u",))
        assert a.assignment == {}  # t is gone; u has no share state yet
        await c.settled()
        assert ("g", u, 1) in share_known(c.state)
        a = await c.beat("a", a.member_epoch)
        assert a.assignment == {u: (0, 1)}

    run(scenario())


def test_a_failed_initialization_is_asked_for_again(make_cluster: Any, tmp_path: Any) -> None:
    log = ListStateLog()
    log.failing = True
    c = make_cluster(state=share_state(log))
    t = c.topic("t", 1)

    async def scenario() -> None:
        await c.beat("a", 0)
        await c.settled()
        share = c.coord.groups["g"].share
        assert share is not None and share.initializing == {} and share.initialized == {}
        log.failing = False
        a = await c.beat("a", 1)
        assert a.assignment is None or not parts(a)
        await c.settled()
        assert share.initialized[t].partitions == frozenset({0})
        assert parts(await c.beat("a", a.member_epoch)) == {0}

    run(scenario())


def test_an_expired_session_fences_the_member(make_cluster: Any) -> None:
    c = make_cluster(session_timeout_ms=50)
    c.topic("t", 1)

    async def scenario() -> None:
        await c.beat("a", 0)
        await c.settled()
        await asyncio.sleep(0.08)
        c.coord.tick()
        await c.settled()
        share = c.coord.groups["g"].share
        assert share is not None and share.members == {} and share.state == "Empty"
        assert (await c.beat("a", 1)).error_code == E_UNKNOWN_MEMBER

    run(scenario())


def test_a_new_coordinator_loads_the_groups_as_they_stood(make_cluster: Any) -> None:
    c = make_cluster()
    t = c.topic("t", 3)

    async def scenario() -> None:
        await c.beat("a", 0)
        await c.settled()
        await c.beat("a", 1)
        b = await c.beat("b", 0, rack_id="r1")
        a = await c.beat("a", 2)
        before = c.coord.groups["g"].share
        coord = c.reload()
        share = coord.groups["g"].share
        assert share is not None and before is not None
        assert (share.group_epoch, share.assignment_epoch, share.metadata_hash) == \
            (before.group_epoch, before.assignment_epoch, before.metadata_hash)
        assert share.members == before.members and share.target == before.target
        assert share.initialized.keys() == {t} and share.initialized[t].partitions == frozenset(range(3))
        assert set(share.session_deadlines) == {"a", "b"}
        assert coord.groups["g"].state.wire_name == "Stable"
        # The members carry on at their epochs, with what they hold.
        again = await c.beat("b", b.member_epoch)
        assert (again.error_code, again.member_epoch) == (0, b.member_epoch)
        assert share.members["a"].assigned == {t: frozenset(a.assignment[t])}  # type: ignore[index]
        assert share.members["b"].rack_id == "r1"

    run(scenario())


def test_describe_list_and_the_other_kinds_requests(make_cluster: Any) -> None:
    c = make_cluster()
    t = c.topic("t", 2)

    async def scenario() -> None:
        await c.beat("a", 0, rack_id="r")
        await c.settled()
        await c.beat("a", 1)
        coord = c.coord
        [described, missing] = coord.share.describe(["g", "nope"])
        assert (described.error_code, described.state, described.group_epoch, described.assignment_epoch,
                described.assignor) == (0, "Stable", 2, 2, "simple")
        [member] = described.members
        assert (member.member_id, member.rack_id, member.member_epoch, member.subscribed_topic_names,
                member.assigned) == ("a", "r", 2, ("t",), {t: frozenset({0, 1})})
        assert missing.error_code == E_GROUP_NOT_FOUND
        assert coord.list_groups(None) == (0, [("g", "share", "Stable", "share")])
        assert coord.list_groups({"empty"}) == (0, [])
        assert coord.describe("g").error_code == E_GROUP_NOT_FOUND  # DescribeGroups: not a classic group
        assert coord.consumer.describe(["g"])[0].error_code == E_GROUP_NOT_FOUND
        join = await coord.join_group("g", JoiningMember("", None, "consumer", [("range", b"")], 10_000, 10_000,
                                                         "c", "h"), True)
        assert (join.error_code, join.member_id) == (E_INCONSISTENT_PROTOCOL, "")
        consumer = await coord.consumer.heartbeat(HeartbeatRequest("g", "m", 0, rebalance_timeout_ms=1000,
                                                                   subscribed_topic_names=("t",), owned={}))
        assert consumer.error_code == E_GROUP_NOT_FOUND
        sender = MemberRef("a", None, -1)
        assert await coord.commit_offsets("g", sender, -1, [("t", 0, 5, -1, None)], known, 9) == [E_GROUP_NOT_FOUND]
        assert coord.fetch_offsets("g", None)[0] == E_GROUP_NOT_FOUND
        assert (await coord.delete_offsets("g", [("t", 0)]))[0] == E_GROUP_NOT_FOUND
        assert coord.heartbeat("g", MemberRef("a", None, 1)) == E_UNKNOWN_MEMBER
        assert (await coord.sync_group("g", MemberRef("a", None, 1), None, None, [])).error_code == E_UNKNOWN_MEMBER
        assert await coord.delete_groups(["g"]) == [E_NON_EMPTY_GROUP]
        share = coord.groups["g"].share
        assert share is not None and share.members  # unchanged
        # A share heartbeat for a consumer group's id is GROUP_ID_NOT_FOUND too.
        await coord.consumer.heartbeat(HeartbeatRequest("cg", "m", 0, rebalance_timeout_ms=1000,
                                                        subscribed_topic_names=("t",), owned={}))
        wrong = await c.beat("x", 0, group="cg")
        assert (wrong.error_code, wrong.error_message) == (E_GROUP_NOT_FOUND, "Group cg is not a share group.")

    run(scenario())


def test_deleting_an_empty_share_group_deletes_its_share_state_and_its_records(make_cluster: Any) -> None:
    c = make_cluster()
    t = c.topic("t", 2)

    async def scenario() -> None:
        await c.beat("a", 0)
        await c.settled()
        await c.beat("a", 1)
        await c.beat("a", -1)
        coord = c.coord
        assert coord.list_groups({"empty"}) == (0, [("g", "share", "Empty", "share")])
        assert set(share_known(c.state)) == {("g", t, 0), ("g", t, 1)}
        assert await coord.delete_groups(["g"]) == [0]
        assert not share_known(c.state)
        assert "g" not in coord.groups
        last = [(k, v) for k, v in c.log.entries() if isinstance(k, share_records.ShareGroupMetadataKey)][-1]
        assert last[1] is None  # tombstoned
        assert "g" not in c.reload().groups
        # The id is free again: a new share group starts from scratch.
        fresh = await c.beat("a", 0)
        assert (fresh.error_code, fresh.member_epoch) == (0, 1)

    run(scenario())


def test_the_records_are_kafkas_share_group_records(make_cluster: Any) -> None:
    c = make_cluster()
    t = c.topic("t", 1)

    async def scenario() -> None:
        await c.beat("a", 0, client_id="cli", client_host="10.0.0.1")
        await c.settled()
        values = {type(k).__name__: v for k, v in c.log.entries()}
        assert values["ShareGroupMemberMetadataKey"] == share_records.ShareGroupMemberMetadataValue(
            None, "cli", "10.0.0.1", ("t",))
        assert values["ShareGroupMetadataKey"].epoch == 1
        assert values["ShareGroupCurrentMemberAssignmentKey"] == share_records.ShareGroupCurrentMemberAssignmentValue(
            1, 0, 0, ())
        state = values["ShareGroupStatePartitionMetadataKey"]
        assert state.initializing_topics == () and state.deleting_topics == ()
        assert state.initialized_topics == (share_records.TopicPartitionsInfo(t, "t", (0,)),)

    run(scenario())


def test_a_deleted_topic_is_no_longer_assigned_and_its_state_records_stay(make_cluster: Any) -> None:
    c = make_cluster()
    t = c.topic("t", 2)
    u = c.topic("u", 1)

    async def scenario() -> None:
        await c.beat("a", 0, subscribed_topic_names=("t", "u"))
        await c.settled()
        a = await c.beat("a", 1)
        assert a.assignment == {t: (0, 1), u: (0,)}
        c.registry.delete("t")
        c.registry.refresh()
        a = await c.beat("a", a.member_epoch)
        assert a.assignment == {u: (0,)}  # the subscribed topics changed: a new epoch without t
        share = c.coord.groups["g"].share
        assert share is not None and set(share.initialized) == {t, u}
        # A topic created again under the name is a new topic: initialized anew, then assigned.
        t2 = c.topic("t", 1)
        a = await c.beat("a", a.member_epoch)
        await c.settled()
        assert share.initialized[t2].partitions == frozenset({0}) and t in share.initialized
        a = await c.beat("a", a.member_epoch)
        assert a.assignment == {t2: (0,), u: (0,)}

    run(scenario())
