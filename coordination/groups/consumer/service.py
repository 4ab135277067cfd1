"""The ``consumer`` group protocol (KIP-848) served by the group coordinator: heartbeats,
describes, deadlines, and the checks offset requests make of a consumer group's members.

The coordinator (coordination/groups/coordinator.py) owns the groups and the log and hands
the consumer-protocol work to this class. A group's heartbeats run one at a time (a lock per
group, held across the append): heartbeat.py decides the records from the group as it
stands, they are appended to the group's __consumer_offsets partition, and only once they are
in does ``ConsumerGroup.apply`` fold them in and the answer go out. A write that fails
changes nothing; the member gets the coordinator error and tries again.

A group is of one kind at a time. ``coordination.groups.group.Group`` carries its offsets
and classic state; ``Group.modern`` holds the consumer-protocol state when the group is a
consumer group. An empty classic group becomes a consumer group on the first consumer
heartbeat (its classic record tombstoned, its offsets kept), and an empty consumer group a
classic one on the first JoinGroup, as Kafka does; groups with members keep their kind.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from coordination.backend import TopicRegistry
from coordination.groups import offsets_schema as schema
from coordination.groups.consumer import records as rec
from coordination.groups.consumer.classic_members import (
    ClassicJoin,
    ClassicJoinAnswer,
    can_downgrade,
    classic_heartbeat,
    classic_join,
    classic_member,
    classic_sync,
    downgrade_records,
    downgrade_value,
    upgrade_enabled,
    upgrade_records,
)
from coordination.groups.consumer.group import (
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ConsumerGroup,
    ConsumerMember,
    Record,
    Target,
    deletion_records,
    encode,
)
from coordination.groups.consumer.heartbeat import (
    ConsumerSettings,
    HeartbeatAnswer,
    HeartbeatError,
    HeartbeatRequest,
    Plan,
    assignor_name,
    fence,
    heartbeat,
    leave,
    validate,
)
from coordination.groups.consumer.reconciliation import ConsumerGroupState, MemberState
from coordination.groups.group import Group
from coordination.groups.protocol_service import GroupHost, GroupProtocolService, now_ms, settle_state
from coordination.groups.requests import MemberRef
from coordination.groups.state import GroupState

log = logging.getLogger(__name__)
E = ErrorCode
PROTOCOL_TYPE = "consumer"
MODERN_OFFSET_COMMIT_VERSION = 9  # OffsetCommit v9+ carries member epochs
SESSION_TIMEOUT_CONFIG = "consumer.session.timeout.ms"    # GroupConfig keys
HEARTBEAT_INTERVAL_CONFIG = "consumer.heartbeat.interval.ms"


class RegistryCatalog:
    """The topic registry as the consumer group protocol reads it (a TopicCatalog)."""

    def __init__(self, registry: TopicRegistry) -> None:
        self.registry = registry

    def version(self) -> int:
        return self.registry.snapshot_generation

    def by_name(self, name: str) -> tuple[uuid.UUID, int] | None:
        info = self.registry.get(name)
        if info is None and self.registry.refresh():  # created a moment ago, perhaps
            info = self.registry.get(name)
        return None if info is None else (info.topic_id, info.partitions)

    def name_of(self, topic_id: uuid.UUID) -> str | None:
        info = self.registry.by_id(topic_id)
        return None if info is None else info.name

    def names(self) -> Iterable[str]:
        return [info.name for info in self.registry.all()]


@dataclass(frozen=True)
class MemberDescription:
    member: ConsumerMember
    target: Target


@dataclass(frozen=True)
class GroupDescription:
    error_code: int
    group_id: str
    error_message: str | None = None
    state: str = ConsumerGroupState.DEAD.value
    group_epoch: int = 0
    assignment_epoch: int = 0
    assignor: str = ""
    members: tuple[MemberDescription, ...] = ()


class ConsumerGroupService(GroupProtocolService[ConsumerSettings]):
    session_timeout_config = SESSION_TIMEOUT_CONFIG
    heartbeat_interval_config = HEARTBEAT_INTERVAL_CONFIG

    def __init__(self, coordinator: GroupHost, settings: ConsumerSettings) -> None:
        super().__init__(coordinator, settings)

    # ------------------------------------------------------------------ ConsumerGroupHeartbeat
    async def heartbeat(self, request: HeartbeatRequest) -> HeartbeatAnswer:
        code = self.coordinator.unavailable()
        if code:
            return HeartbeatAnswer(code)
        try:
            validate(request, self.settings)
        except HeartbeatError as exc:
            return HeartbeatAnswer(exc.code, exc.message)
        async with self.lock(request.group_id):
            try:
                group, prelude = self._group_for(request)
                if request.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
                    plan = leave(group, request, self.catalog)
                else:
                    plan = heartbeat(group, request, self.settings_for(request.group_id), self.catalog, now_ms())
            except HeartbeatError as exc:
                return HeartbeatAnswer(exc.code, exc.message)
            leaving = request.member_id if request.member_epoch == LEAVE_GROUP_MEMBER_EPOCH else None
            if leaving is not None and can_downgrade(group, leaving, self.settings):
                code = await self._downgrade(group, leaving)
                return HeartbeatAnswer(code) if code else plan.answer
            code = await self._write(group, prelude, plan.records)
            if code:
                return HeartbeatAnswer(code)
            self._after(group, plan)
            return plan.answer

    async def _downgrade(self, modern: ConsumerGroup, leaving: str) -> int:
        """The last consumer-protocol member leaves: the classic members left form a classic group."""
        value = downgrade_value(modern, leaving, self.catalog, now_ms())
        code = await self._write(modern, downgrade_records(modern, value), [])
        if code:
            return code
        log.info("group %s: downgraded to a classic group as member %s left", modern.group_id, leaving)
        self.coordinator.replace_with_classic(modern.group_id, value, f"the consumer group's member {leaving} left")
        return 0

    async def _remove(self, modern: ConsumerGroup, member: ConsumerMember) -> int:
        """Take a member out (it left, or a deadline passed): a downgrade when only classic members
        would be left and the policy allows it, else a fence."""
        if can_downgrade(modern, member.member_id, self.settings):
            return await self._downgrade(modern, member.member_id)
        plan = fence(modern, member, self.catalog)
        code = await self._write(modern, [], plan.records)
        if not code:
            self._after(modern, plan)
        return code

    # ------------------------------------------------------------------ classic members
    def _modern(self, group_id: str) -> ConsumerGroup | None:
        group = self.coordinator.groups.get(group_id)
        return group.modern if group is not None else None

    async def classic_join(self, join: ClassicJoin) -> ClassicJoinAnswer:
        """A JoinGroup to a consumer group: answered at once with the member's epoch as its
        generation (the coordinator assigns; no member leads)."""
        async with self.lock(join.group_id):
            modern = self._modern(join.group_id)
            if modern is None:  # it changed kind while this waited: the client joins again
                return ClassicJoinAnswer(int(E.rebalance_in_progress), join.member_id)
            try:
                answer, plan = classic_join(modern, join, self.settings_for(join.group_id), self.catalog, now_ms())
            except HeartbeatError as exc:
                return ClassicJoinAnswer(exc.code, join.member_id)
            if answer.error_code:
                return answer
            code = await self._write(modern, [], plan.records)
            if code:
                return ClassicJoinAnswer(code, join.member_id)
            self._after(modern, plan)
            return answer

    def classic_sync(self, group_id: str, member_id: str, instance_id: str | None, generation: int,
                     protocol_type: str | None, protocol_name: str | None) -> tuple[int, bytes]:
        modern = self._modern(group_id)
        if modern is None:
            return int(E.rebalance_in_progress), b""
        try:
            assignment = classic_sync(modern, member_id, instance_id, generation, protocol_type, protocol_name,
                                      self.catalog)
        except HeartbeatError as exc:
            return exc.code, b""
        self._renew(modern, classic_member(modern, member_id, instance_id))
        return 0, assignment

    def classic_heartbeat(self, group_id: str, member_id: str, instance_id: str | None, generation: int) -> int:
        modern = self._modern(group_id)
        if modern is None:
            return int(E.rebalance_in_progress)
        try:
            member = classic_member(modern, member_id, instance_id)
        except HeartbeatError as exc:
            return exc.code
        self._renew(modern, member)
        try:
            return classic_heartbeat(modern, member_id, instance_id, generation)
        except HeartbeatError as exc:
            return exc.code

    async def classic_leave(self, group_id: str, leaving: Sequence[tuple[str, str | None]]) -> list[int]:
        codes = []
        async with self.lock(group_id):
            for member_id, instance_id in leaving:
                modern = self._modern(group_id)
                if modern is None:
                    codes.append(int(E.unknown_member_id))
                    continue
                try:
                    member = classic_member(modern, member_id, instance_id)
                except HeartbeatError as exc:
                    codes.append(exc.code)
                    continue
                codes.append(await self._remove(modern, member))
        return codes

    def _renew(self, modern: ConsumerGroup, member: ConsumerMember) -> None:
        modern.session_deadlines[member.member_id] = time.monotonic() + self._session_s(modern.group_id, member)

    def _group_for(self, request: HeartbeatRequest) -> tuple[ConsumerGroup, list[tuple[bytes, bytes | None]]]:
        """The group the heartbeat is for, and records to write before the heartbeat's own
        (the tombstone of the empty classic group it replaces)."""
        group_id = request.group_id
        group = self.coordinator.groups.get(group_id)
        joining = request.member_epoch == 0
        if group is None or group.is_(GroupState.DEAD):
            if not joining:
                raise HeartbeatError(int(E.group_id_not_found), f"Consumer group {group_id} not found.")
            return ConsumerGroup(group_id), []
        if group.modern is not None:
            return group.modern, []
        if group.share is not None:  # Kafka converts no share group to another kind
            raise HeartbeatError(int(E.group_id_not_found), f"Group {group_id} is not a consumer group.")
        if joining and not group.members and group.is_(GroupState.EMPTY):
            # An empty classic group (perhaps only offsets) becomes a consumer group.
            prelude: list[tuple[bytes, bytes | None]] = []
            if group.generation > 0:
                prelude.append((schema.encode_key(schema.GroupKey(group_id)), None))
            return ConsumerGroup(group_id), prelude
        if joining and upgrade_enabled(self.settings) and group.protocol_type == PROTOCOL_TYPE \
                and len(group.members) < self.settings.max_size:
            # Online upgrade: the classic members become members of a consumer group holding
            # what they hold; the records of both kinds go in the heartbeat's batch.
            converted = upgrade_records(group, self.catalog, now_ms())
            modern = ConsumerGroup(group_id)
            for key, value in converted:
                modern.apply(key, value)
            return modern, [(schema.encode_key(schema.GroupKey(group_id)), None)] + encode(converted)
        raise HeartbeatError(int(E.group_id_not_found), f"Group {group_id} is not a consumer group.")

    async def _write(self, modern: ConsumerGroup, prelude: list[tuple[bytes, bytes | None]], records: list[Record]) -> int:
        """Append ``prelude`` (records already encoded) and ``records`` as one batch to the group's
        partition; the client's error, 0 once appended."""
        return await self.append(modern.group_id, prelude + encode(records))

    def _after(self, modern: ConsumerGroup, plan: Plan) -> None:
        """Fold the written records in, then keep the member's deadlines."""
        group = self._install(modern)
        for key, value in plan.records:
            modern.apply(key, value)
        if plan.catalog_version is not None:
            modern.catalog_version = plan.catalog_version
        now = time.monotonic()
        for other_id, other in modern.members.items():  # members a conversion brought in
            modern.session_deadlines.setdefault(other_id, now + self._session_s(modern.group_id, other))
        member_id = plan.member_id
        if member_id is not None and member_id in modern.members:
            member = modern.members[member_id]
            modern.session_deadlines[member_id] = now + self._session_s(modern.group_id, member)
            if plan.revoking_at_epoch is None:
                modern.revocation_deadlines.pop(member_id, None)
            elif modern.revocation_deadlines.get(member_id, (None, 0.0))[0] != plan.revoking_at_epoch:
                timeout = max(member.rebalance_timeout_ms, 0) / 1000
                modern.revocation_deadlines[member_id] = (plan.revoking_at_epoch, now + timeout)
        self.settle(group)

    def _session_s(self, group_id: str, member: ConsumerMember) -> float:
        """A classic member keeps the session timeout it joined with; a consumer-protocol
        member has its group's."""
        if member.classic is not None:
            return member.classic.session_timeout_ms / 1000
        return self.settings_for(group_id).session_timeout_ms / 1000

    def _install(self, modern: ConsumerGroup) -> Group:
        groups = self.coordinator.groups
        group = groups.get(modern.group_id)
        if group is None or group.is_(GroupState.DEAD):
            group = groups[modern.group_id] = Group(modern.group_id)
        if group.modern is not modern:
            if group.members or group.pending_members:
                self.coordinator.release_classic(group)  # upgraded: its parked joins rejoin
            group.modern = modern
            group.protocol_type, group.protocol_name, group.generation, group.leader_id = PROTOCOL_TYPE, None, 0, None
        return group

    @staticmethod
    def settle(group: Group) -> None:
        """The classic state that stands for a consumer group in the code both kinds share
        (offset expiry, deletion): Empty without members, else Stable."""
        assert group.modern is not None
        settle_state(group, bool(group.modern.members))

    # ------------------------------------------------------------------ deadlines
    def expire(self, now: float) -> None:
        """Fence members whose session ran out, or that did not revoke in time (tick)."""
        for group in list(self.coordinator.groups.values()):
            modern = group.modern
            if modern is None:
                continue
            for member_id, deadline in list(modern.session_deadlines.items()):
                if now > deadline:
                    self._fence_soon(modern.group_id, member_id, None, "the member session expired")
            for member_id, (epoch, deadline) in list(modern.revocation_deadlines.items()):
                if now > deadline:
                    self._fence_soon(modern.group_id, member_id, epoch, "it did not revoke its partitions in time")

    def _fence_soon(self, group_id: str, member_id: str, epoch: int | None, reason: str) -> None:
        async def fence() -> None:
            async with self.lock(group_id):
                group = self.coordinator.groups.get(group_id)
                modern = group.modern if group is not None else None
                member = modern.members.get(member_id) if modern is not None else None
                if modern is None or member is None or (epoch is not None and member.member_epoch != epoch):
                    if modern is not None:
                        modern.revocation_deadlines.pop(member_id, None)
                    return
                if epoch is None and time.monotonic() <= modern.session_deadlines.get(member_id, 0.0):
                    return  # it heartbeated while this waited for the lock
                code = await self._remove(modern, member)
                if code:
                    log.warning("group %s: member %s not fenced (error %d); retrying", group_id, member_id, code)
                    return
                log.info("group %s: member %s fenced: %s", group_id, member_id, reason)

        self.fence_soon(group_id, member_id, fence)

    def loaded(self, group: Group) -> None:
        """A group replayed by a load: every member gets a fresh session, as in Kafka."""
        modern = group.modern
        if modern is None:
            return
        if modern.deleted:
            group.modern = None
            return
        now = time.monotonic()
        session_s = self.settings_for(modern.group_id).session_timeout_ms / 1000
        for member_id, member in modern.members.items():
            modern.session_deadlines[member_id] = now + session_s
            if member.assignment.state is MemberState.UNREVOKED_PARTITIONS:
                modern.revocation_deadlines[member_id] = (member.member_epoch,
                                                          now + max(member.rebalance_timeout_ms, 0) / 1000)
        group.protocol_type = PROTOCOL_TYPE
        self.settle(group)

    # ------------------------------------------------------------------ ConsumerGroupDescribe
    def describe(self, group_ids: Sequence[str]) -> list[GroupDescription]:
        out = []
        for group_id in group_ids:
            code = self.coordinator.unavailable()
            group = self.coordinator.groups.get(group_id)
            if code:
                out.append(GroupDescription(code, group_id))
            elif group is None or group.is_(GroupState.DEAD):
                out.append(GroupDescription(int(E.group_id_not_found), group_id, f"Group {group_id} not found."))
            elif group.modern is None:
                out.append(GroupDescription(int(E.group_id_not_found), group_id,
                                            f"Group {group_id} is not a consumer group."))
            else:
                modern = group.modern
                members = tuple(MemberDescription(m, modern.target_of(m.member_id)) for m in modern.members.values())
                out.append(GroupDescription(0, group_id, None, modern.state.value, modern.group_epoch,
                                            modern.assignment_epoch, assignor_name(modern, self.settings), members))
        return out

    # ------------------------------------------------------------------ offsets of consumer groups
    def check_commit(self, modern: ConsumerGroup, sender: MemberRef, api_version: int | None,
                     partitions: Iterable[tuple[str, int]], transactional: bool = False) -> int:
        """Kafka's ConsumerGroup.validateOffsetCommit: a commit without a member epoch is an
        admin's or a simple consumer's, allowed while the group is empty; otherwise the member
        must exist and send its epoch (STALE_MEMBER_EPOCH), or an older epoch at which it was
        already assigned every partition it commits."""
        if sender.generation < 0 and not modern.members:
            return 0
        if transactional and sender.generation < 0 and not sender.member_id and sender.group_instance_id is None:
            return 0
        member = modern.members.get(sender.member_id)
        if member is None:
            return int(E.unknown_member_id)
        if not transactional and api_version is not None and api_version < MODERN_OFFSET_COMMIT_VERSION:
            return int(E.unsupported_version)
        if sender.generation == member.member_epoch:
            return 0
        if 0 <= sender.generation < member.member_epoch and self._assigned_by(member, sender.generation, partitions):
            return 0
        return int(E.stale_member_epoch)

    def _assigned_by(self, member: ConsumerMember, epoch: int, partitions: Iterable[tuple[str, int]]) -> bool:
        for topic, partition in partitions:
            found = self.catalog.by_name(topic)
            if found is None:
                return False
            assigned_at = member.assignment.assigned.get(found[0], {}).get(partition)
            if assigned_at is None or assigned_at > epoch:
                return False
        return True

    @staticmethod
    def check_fetch(modern: ConsumerGroup, member_id: str | None, member_epoch: int) -> int:
        """OffsetFetch v9+: a member asking must be one, at its current epoch."""
        if member_epoch < 0 and not member_id:
            return 0
        member = modern.members.get(member_id or "")
        if member is None:
            return int(E.unknown_member_id)
        if member_epoch != member.member_epoch:
            return int(E.stale_member_epoch)
        return 0

    @staticmethod
    def deletion_entries(group: Group) -> list[tuple[bytes, bytes | None]]:
        """The records that delete a group's consumer-protocol state with it."""
        return encode(deletion_records(group.modern)) if group.modern is not None else []

    def replay(self, key: rec.ConsumerGroupKey, value: rec.ConsumerGroupValue | None) -> None:
        """One consumer-protocol record of a load, in log order."""
        groups = self.coordinator.groups
        group = groups.get(key.group_id)
        if group is None:
            if value is None:
                return
            group = groups[key.group_id] = Group(key.group_id)
        if group.modern is None:
            group.modern = ConsumerGroup(key.group_id)
        group.modern.apply(key, value)

    def subscribed_topics(self, group: Group) -> set[str]:
        return group.modern.subscribed_topic_names() if group.modern is not None else set()
