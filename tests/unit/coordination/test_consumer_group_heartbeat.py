"""The consumer group protocol (KIP-848) in the group coordinator, over real partition logs and
a real local topic registry: members join and get disjoint partitions, a partition moves only
after its owner revoked it, members leave and are fenced, static members come back, bad
heartbeats get Kafka's errors and change nothing, and a coordinator that loads the log resumes
every group where it stood."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import pytest

from coordination.group_config_keys import BrokerValues
from coordination.group_config_store import LocalGroupConfigs
from coordination.group_configs import GroupConfigs
from coordination.groups.consumer.heartbeat import ConsumerSettings, HeartbeatAnswer, HeartbeatRequest
from coordination.groups.consumer.service import RegistryCatalog
from coordination.groups.coordinator import GroupCoordinator
from coordination.groups.requests import JoiningMember, MemberRef
from tests.unit.coordination.group_cluster import COORDINATOR_SETTINGS, GroupCluster, clusters, parts, run
from tests.unit.coordination.test_coordinator_offsets import known

E_UNKNOWN_MEMBER, E_FENCED_INSTANCE, E_INVALID_REQUEST, E_GROUP_NOT_FOUND = 25, 82, 42, 69
E_FENCED_EPOCH, E_UNRELEASED_INSTANCE, E_UNSUPPORTED_ASSIGNOR, E_STALE_EPOCH = 110, 111, 112, 113
E_INVALID_REGEX, E_GROUP_MAX_SIZE, E_UNSUPPORTED_VERSION, E_INCONSISTENT_PROTOCOL = 128, 81, 35, 23


class Cluster(GroupCluster):
    """A coordinator of consumer groups with its offsets log and topic registry, in a temp dir."""

    def __init__(self, tmp_path: Any, **settings: Any) -> None:
        super().__init__(tmp_path)
        self.settings = ConsumerSettings(**{"heartbeat_interval_ms": 100, **settings})
        self.coord = self.new_coordinator()

    def new_coordinator(self) -> GroupCoordinator:
        coord = GroupCoordinator(COORDINATOR_SETTINGS, self.log, self.settings)
        coord.consumer.catalog = RegistryCatalog(self.registry)
        coord.active = True
        return coord

    async def beat(self, member_id: str, epoch: int, owned: dict[uuid.UUID, tuple[int, ...]] | None = None,
                   group: str = "g", **fields: Any) -> HeartbeatAnswer:
        if epoch == 0:
            fields.setdefault("rebalance_timeout_ms", 60_000)
            fields.setdefault("subscribed_topic_names", ("t",))
            owned = {} if owned is None else owned
        return await self.coord.consumer.heartbeat(HeartbeatRequest(group, member_id, epoch, owned=owned, **fields))


@pytest.fixture
def make_cluster(tmp_path: Any) -> Any:
    yield from clusters(lambda **settings: Cluster(tmp_path, **settings))


class Client:
    """A member as a client runs it: it revokes what it is no longer assigned at once and
    reports what it holds in every heartbeat."""

    def __init__(self, cluster: Cluster, member_id: str, **fields: Any) -> None:
        self.cluster, self.member_id, self.fields = cluster, member_id, fields
        self.epoch = 0
        self.owned: dict[uuid.UUID, tuple[int, ...]] = {}

    async def beat(self) -> HeartbeatAnswer:
        answer = await self.cluster.beat(self.member_id, self.epoch, dict(self.owned), **self.fields)
        if answer.error_code == 0:
            self.epoch = answer.member_epoch
            if answer.assignment is not None:
                self.owned = {topic: tuple(p) for topic, p in answer.assignment.items()}  # type: ignore[misc]
        return answer

    def held(self) -> set[int]:
        return {p for ps in self.owned.values() for p in ps}



def test_two_members_split_the_partitions_and_a_partition_moves_only_after_its_owner_revoked_it(make_cluster: Any) -> None:
    c = make_cluster()
    t = c.topic("t", 4)

    async def scenario() -> None:
        a = await c.beat("a", 0)
        assert (a.error_code, a.member_epoch, parts(a)) == (0, 1, {0, 1, 2, 3})
        a_owned = {t: (0, 1, 2, 3)}
        b = await c.beat("b", 0)
        # b joins at the new epoch but gets nothing a still holds.
        assert (b.error_code, b.member_epoch, parts(b)) == (0, 2, set())
        group = c.coord.groups["g"].modern
        assert group is not None and group.group_epoch == 2 and group.state.value == "Reconciling"
        # a is told to revoke two partitions, at its current epoch.
        a = await c.beat("a", 1, a_owned)
        assert a.member_epoch == 1 and len(parts(a)) == 2
        kept = tuple(sorted(parts(a)))
        b = await c.beat("b", 2, {})
        assert parts(b) == set() if b.assignment is not None else True, "nothing moves before the revocation"
        a = await c.beat("a", 1, {t: kept})  # revoked
        assert a.member_epoch == 2
        b = await c.beat("b", 2, {})
        assert b.member_epoch == 2 and parts(b) == {0, 1, 2, 3} - set(kept)
        assert group.state.value == "Stable"
        # The owners index: every partition held once, at epoch 2.
        assert sorted(group.owners.holdings().values()) == sorted([("a", 2)] * 2 + [("b", 2)] * 2)

    run(scenario())


def test_a_leaving_member_bumps_the_epoch_and_the_other_takes_everything(make_cluster: Any) -> None:
    c = make_cluster()
    t = c.topic("t", 2)

    async def scenario() -> None:
        a, b = Client(c, "a"), Client(c, "b")
        await a.beat()
        await b.beat()
        await a.beat()  # told to revoke one
        await a.beat()  # revoked, at epoch 2
        await b.beat()
        assert (a.epoch, b.epoch, len(a.held()), len(b.held())) == (2, 2, 1, 1)
        gone = await c.beat("b", -1, {t: tuple(b.held())})
        assert (gone.error_code, gone.member_epoch) == (0, -1)
        group = c.coord.groups["g"].modern
        assert group is not None and "b" not in group.members and group.group_epoch == 3
        await a.beat()
        assert (a.epoch, a.held()) == (3, {0, 1})
        assert (await c.beat("b", 2, {})).error_code == E_UNKNOWN_MEMBER

    run(scenario())


def test_bad_heartbeats_get_kafkas_errors_and_change_nothing(make_cluster: Any) -> None:
    c = make_cluster(max_size=2)
    t = c.topic("t", 2)

    async def scenario() -> None:
        await c.beat("a", 0)
        await c.beat("a", 1, {t: (0, 1)})
        group = c.coord.groups["g"].modern
        assert group is not None
        before = (group.group_epoch, group.assignment_epoch, dict(group.members), dict(group.target))
        entries = len(c.log.entries())
        cases = [
            (await c.beat("a", 5, {t: (0, 1)}), E_FENCED_EPOCH),  # ahead of the coordinator
            (await c.beat("nobody", 1, {}), E_UNKNOWN_MEMBER),
            (await c.beat("a", 0, subscribed_topic_regex="t[", subscribed_topic_names=None), E_INVALID_REGEX),
            (await c.beat("a", 0, server_assignor="sticky"), E_UNSUPPORTED_ASSIGNOR),
            (await c.beat("a", -3), E_INVALID_REQUEST),
            (await c.beat("", 1, version=1), E_INVALID_REQUEST),
            (await c.beat("a", 0, rebalance_timeout_ms=-1), E_INVALID_REQUEST),
            (await c.beat("a", 0, {t: (0,)}), E_INVALID_REQUEST),  # a join owns nothing
            (await c.beat("a", 1, {}, group="other"), E_GROUP_NOT_FOUND),
            (await c.beat("a", -2, instance_id=None), E_INVALID_REQUEST),
        ]
        for answer, code in cases:
            assert answer.error_code == code, (answer, code)
            assert answer.error_message
        assert (group.group_epoch, group.assignment_epoch, dict(group.members), dict(group.target)) == before
        assert len(c.log.entries()) == entries, "a refused heartbeat writes nothing"
        # group.consumer.max.size
        await c.beat("b", 0)
        assert (await c.beat("c", 0)).error_code == E_GROUP_MAX_SIZE

    run(scenario())


def test_a_static_member_that_restarts_takes_its_place_back_without_a_rebalance(make_cluster: Any) -> None:
    c = make_cluster()
    t = c.topic("t", 4)

    async def scenario() -> None:
        a, b = Client(c, "a1", instance_id="i-a"), Client(c, "b")
        for member in (a, b, a, a, b):
            await member.beat()
        held = a.held()
        assert len(held) == 2 and held.isdisjoint(b.held())
        group = c.coord.groups["g"].modern
        assert group is not None
        epoch = group.group_epoch
        # A second instance with the same id while the first is alive is refused.
        assert (await c.beat("a2", 0, instance_id="i-a")).error_code == E_UNRELEASED_INSTANCE
        away = await c.beat("a1", -2, {t: tuple(held)}, instance_id="i-a")
        assert (away.error_code, away.member_epoch) == (0, -2)
        back = await c.beat("a2", 0, instance_id="i-a")
        assert back.error_code == 0 and parts(back) == held
        assert group.group_epoch == epoch, "the same subscription: no new epoch"
        assert "a1" not in group.members and group.members["a2"].instance_id == "i-a"
        # The old member id is fenced now.
        assert (await c.beat("a1", a.epoch, {t: tuple(held)}, instance_id="i-a")).error_code == E_FENCED_INSTANCE

    run(scenario())


def test_a_regex_subscription_follows_topics_that_appear(make_cluster: Any) -> None:
    c = make_cluster()
    first = c.topic("orders-eu", 2)
    c.topic("payments", 2)

    async def scenario() -> None:
        a = await c.beat("a", 0, subscribed_topic_names=(), subscribed_topic_regex="orders-.*", version=1)
        assert a.assignment == {first: (0, 1)}
        second = c.topic("orders-us", 1)
        a = await c.beat("a", a.member_epoch, {first: (0, 1)})
        assert a.assignment == {first: (0, 1), second: (0,)}
        group = c.coord.groups["g"].modern
        assert group is not None and group.resolved == {"orders-.*": frozenset({"orders-eu", "orders-us"})}

    run(scenario())


def test_a_coordinator_that_loads_the_log_resumes_the_group_where_it_stood(make_cluster: Any) -> None:
    c = make_cluster()
    t = c.topic("t", 3)

    async def scenario() -> None:
        await c.beat("a", 0, instance_id="i-a")
        b = await c.beat("b", 0, subscribed_topic_regex="t", subscribed_topic_names=())
        a = await c.beat("a", 1, {t: (0, 1, 2)}, instance_id="i-a")
        assert a.member_epoch == 1  # revoking
        assert await c.coord.commit_offsets("g", MemberRef(1, "a", "i-a"), -1, [("t", 0, 5, -1, "")], known, 9) == [0]
        old = c.coord.groups["g"].modern
        assert old is not None
        loaded = c.reload()
        new = loaded.groups["g"].modern
        assert new is not None
        assert (new.group_epoch, new.assignment_epoch, new.metadata_hash) == (old.group_epoch, old.assignment_epoch,
                                                                             old.metadata_hash)
        assert new.members == old.members and new.target == old.target and new.resolved == old.resolved
        assert new.owners.holdings() == old.owners.holdings()
        assert loaded.groups["g"].offsets[("t", 0)].offset == 5
        # The members carry on at their epochs: no rebalance.
        a = await c.beat("a", 1, {t: tuple(sorted(old.members["a"].assignment.assigned[t]))}, instance_id="i-a")
        assert a.error_code == 0 and a.member_epoch == 2
        b = await c.beat("b", b.member_epoch, {})
        assert b.error_code == 0 and new.group_epoch == old.group_epoch

    run(scenario())


def test_offset_commits_and_fetches_check_member_epochs(make_cluster: Any) -> None:
    c = make_cluster()
    t = c.topic("t", 2)

    async def scenario() -> None:
        a = await c.beat("a", 0)
        await c.beat("a", 1, {t: (0, 1)})
        commit = c.coord.commit_offsets
        assert await commit("g", MemberRef(1, "a", None), -1, [("t", 0, 1, -1, "")], known, 9) == [0]
        assert await commit("g", MemberRef(2, "a", None), -1, [("t", 0, 1, -1, "")], known, 9) == [E_STALE_EPOCH]
        assert await commit("g", MemberRef(1, "x", None), -1, [("t", 0, 1, -1, "")], known, 9) == [E_UNKNOWN_MEMBER]
        assert await commit("g", MemberRef(1, "a", None), -1, [("t", 0, 1, -1, "")], known, 8) == [E_UNSUPPORTED_VERSION]
        # An admin's commit (no member) only while the group is empty.
        assert await commit("g", MemberRef(-1, "", None), -1, [("t", 0, 1, -1, "")], known, 9) == [E_UNKNOWN_MEMBER]
        assert c.coord.fetch_offsets("g", None, False, ("a", 1))[0] == 0
        assert c.coord.fetch_offsets("g", None, False, ("a", 0))[0] == E_STALE_EPOCH
        assert c.coord.fetch_offsets("g", None, False, (None, -1))[0] == 0
        # A classic member cannot join a consumer group that has members.
        joining = JoiningMember("", None, "consumer", (("range", b""),), 10_000, 10_000, "c", "/h")
        assert (await c.coord.join_group("g", joining, False)).error_code == E_INCONSISTENT_PROTOCOL
        await c.beat("a", -1, {t: (0, 1)})
        assert await commit("g", MemberRef(-1, "", None), -1, [("t", 1, 9, -1, "")], known, 9) == [0]
        assert a.error_code == 0

    run(scenario())


def test_a_member_that_stops_heartbeating_is_fenced_after_its_session(make_cluster: Any) -> None:
    c = make_cluster(session_timeout_ms=200)
    c.topic("t", 2)

    async def scenario() -> None:
        a, b = Client(c, "a"), Client(c, "b")
        await a.beat()
        await b.beat()
        deadline = time.monotonic() + 5
        group = c.coord.groups["g"].modern
        assert group is not None
        while "a" in group.members and time.monotonic() < deadline:
            await b.beat()
            c.coord.tick()
            await asyncio.sleep(0.05)
        assert "a" not in group.members
        await b.beat()
        await b.beat()
        assert b.held() == {0, 1}

    run(scenario())


def test_a_groups_own_session_timeout_and_heartbeat_interval_are_used(make_cluster: Any, tmp_path: Any) -> None:
    """Group configs (coordination/group_configs.py over a real file): group "g" has a 200 ms
    session and a 50 ms heartbeat interval; "other" keeps the broker's 60 s and 100 ms."""
    c = make_cluster(session_timeout_ms=60_000)
    c.topic("t", 2)
    store = LocalGroupConfigs(str(tmp_path / "configs"))
    # The broker's floors lowered, as a broker allowing such short sessions would have them.
    configs = GroupConfigs(store, BrokerValues({"group.consumer.session.timeout.ms": 60_000,
                                                "group.consumer.heartbeat.interval.ms": 100,
                                                "group.consumer.min.session.timeout.ms": 100,
                                                "group.consumer.min.heartbeat.interval.ms": 10}))
    configs.start()
    configs.update("g", lambda _c: {"consumer.session.timeout.ms": "200", "consumer.heartbeat.interval.ms": "50"})
    c.coord.consumer.group_configs = configs

    async def scenario() -> None:
        a, b = Client(c, "a"), Client(c, "b")
        assert (await a.beat()).heartbeat_interval_ms == 50
        await b.beat()
        other = await c.beat("x", 0, group="other")
        assert other.heartbeat_interval_ms == 100
        deadline = time.monotonic() + 5
        group, kept = c.coord.groups["g"].modern, c.coord.groups["other"].modern
        assert group is not None and kept is not None
        while "a" in group.members and time.monotonic() < deadline:
            await b.beat()
            c.coord.tick()
            await asyncio.sleep(0.05)
        assert "a" not in group.members and "b" in group.members
        assert "x" in kept.members  # the broker's 60 s session still runs

    try:
        run(scenario())
    finally:
        configs.close()
        store.close()


def test_an_empty_consumer_group_is_deleted_with_its_records(make_cluster: Any) -> None:
    c = make_cluster()
    t = c.topic("t", 1)

    async def scenario() -> None:
        await c.beat("a", 0)
        assert await c.coord.delete_groups(["g"]) == [68]  # NON_EMPTY_GROUP
        await c.beat("a", -1, {t: (0,)})
        assert await c.coord.delete_groups(["g"]) == [0]
        assert "g" not in c.coord.groups
        assert "g" not in c.reload().groups, "the tombstones delete it for the next coordinator too"

    run(scenario())


