"""The ``share`` group protocol (KIP-932), group side, served by the group coordinator:
ShareGroupHeartbeat, ShareGroupDescribe, session deadlines, the share state of the
group's partitions, and the parts of listing and deleting groups that are share groups'.

As for consumer groups (consumer/service.py): a group's heartbeats run one at a time (a
lock per group, held across the append); heartbeat.py decides the records, they are
appended to the group's __consumer_offsets partition, and only then ``ShareGroup.apply``
folds them in. A failed write changes nothing.

The share-partition state lives in the share coordinator, reached through a
``ShareStateAdmin`` (state_admin.py). As in Kafka, a heartbeat that subscribes the group
to partitions with no state writes them as initializing and answers at once; the
partitions are initialized in the background (start offset -1, the group epoch as state
epoch), then written as initialized, and the next heartbeat assigns them. A failed
initialization takes them out of the initializing set, and a later heartbeat asks again.

A group id is of one kind at a time: a share group is a ``Group`` whose ``share`` holds
its state (its classic fields stay empty, ``state`` is Empty or Stable). Kafka does not
convert share groups to or from the other kinds.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from coordination.groups.group import Group
from coordination.groups.protocol_service import GroupHost, GroupProtocolService, now_ms, settle_state
from coordination.groups.share import assignor
from coordination.groups.share.group import (
    LEAVE_GROUP_MEMBER_EPOCH,
    PROTOCOL_TYPE,
    STATE_DEAD,
    Record,
    ShareGroup,
    ShareMember,
    deletion_records,
    encode,
    state_metadata_record,
)
from coordination.groups.share.heartbeat import (
    Initialize,
    Plan,
    ShareHeartbeatAnswer,
    ShareHeartbeatError,
    ShareHeartbeatRequest,
    ShareSettings,
    fence,
    heartbeat,
    initialized,
    leave,
    uninitialized,
    validate,
)
from coordination.groups.share.state_admin import ShareStateAdmin
from coordination.groups.state import GroupState
from coordination.share.records import ShareGroupKey, ShareGroupValue

log = logging.getLogger(__name__)
E = ErrorCode


@dataclass(frozen=True)
class ShareGroupDescription:
    error_code: int
    group_id: str
    error_message: str | None = None
    state: str = STATE_DEAD
    group_epoch: int = 0
    assignment_epoch: int = 0
    assignor: str = ""
    members: tuple[ShareMember, ...] = ()


class ShareGroupService(GroupProtocolService[ShareSettings]):
    session_timeout_config = "share.session.timeout.ms"  # GroupConfig keys
    heartbeat_interval_config = "share.heartbeat.interval.ms"

    def __init__(self, coordinator: GroupHost, settings: ShareSettings, state: ShareStateAdmin) -> None:
        super().__init__(coordinator, settings)
        self.state = state

    def share_of(self, group_id: str) -> ShareGroup | None:
        group = self.coordinator.groups.get(group_id)
        return group.share if group is not None and not group.is_(GroupState.DEAD) else None

    # ------------------------------------------------------------------ ShareGroupHeartbeat
    async def heartbeat(self, request: ShareHeartbeatRequest) -> ShareHeartbeatAnswer:
        code = self.coordinator.unavailable()
        if code:
            return ShareHeartbeatAnswer(code)
        try:
            validate(request)
        except ShareHeartbeatError as exc:
            return ShareHeartbeatAnswer(exc.code, exc.message)
        async with self.lock(request.group_id):
            try:
                group = self._group_for(request)
                if request.member_epoch == LEAVE_GROUP_MEMBER_EPOCH:
                    plan = leave(group, request, self.catalog)
                else:
                    plan = heartbeat(group, request, self.settings_for(request.group_id), self.catalog, now_ms())
            except ShareHeartbeatError as exc:
                return ShareHeartbeatAnswer(exc.code, exc.message)
            code = await self.write(group.group_id, plan.records)
            if code:
                return ShareHeartbeatAnswer(code)
            self._after(group, plan)
        if plan.initialize is not None:
            self.coordinator.in_background(self._initialize(plan.initialize))
        return plan.answer

    def _group_for(self, request: ShareHeartbeatRequest) -> ShareGroup:
        """Kafka's getOrMaybeCreateShareGroup (a leave never creates)."""
        group_id = request.group_id
        group = self.coordinator.groups.get(group_id)
        if group is not None and not group.is_(GroupState.DEAD) and group.share is not None:
            return group.share
        if group is None or group.is_(GroupState.DEAD) or _bare(group):
            if request.member_epoch != 0:
                raise ShareHeartbeatError(int(E.group_id_not_found), f"Share group {group_id} not found.")
            return ShareGroup(group_id)
        raise ShareHeartbeatError(int(E.group_id_not_found), f"Group {group_id} is not a share group.")

    async def write(self, group_id: str, records: list[Record]) -> int:
        """Append ``records`` as one batch to the group's partition; the client's error, 0 once in."""
        return await self.append(group_id, encode(records))

    def _after(self, share: ShareGroup, plan: Plan) -> None:
        """Fold the written records in, then renew the member's session."""
        group = self._install(share)
        applied_ms = now_ms()
        for key, value in plan.records:
            share.apply(key, value, applied_ms)
        member_id = plan.member_id
        if member_id is not None and member_id in share.members:
            share.session_deadlines[member_id] = time.monotonic() + self.settings_for(share.group_id).session_timeout_ms / 1000
        self.settle(group)

    def _install(self, share: ShareGroup) -> Group:
        groups = self.coordinator.groups
        group = groups.get(share.group_id)
        if group is None or group.is_(GroupState.DEAD) or (group.share is None and _bare(group)):
            group = groups[share.group_id] = Group(share.group_id)
        group.share = share
        group.protocol_type, group.protocol_name, group.generation, group.leader_id = PROTOCOL_TYPE, None, 0, None
        return group

    @staticmethod
    def settle(group: Group) -> None:
        """The classic state that stands for a share group in shared code: Empty or Stable."""
        assert group.share is not None
        settle_state(group, bool(group.share.members))

    # ------------------------------------------------------------------ share state
    async def _initialize(self, request: Initialize) -> None:
        """Initialize the partitions in the share coordinator, then record the outcome."""
        wanted = [(topic, p) for topic, parts in sorted(request.partitions.items(), key=lambda i: str(i[0]))
                  for p in sorted(parts)]
        try:
            codes = await asyncio.gather(*(self.state.initialize(request.group_id, topic, p, request.state_epoch, -1)
                                           for topic, p in wanted))
            failed = next((c for c in codes if c), 0)
        except Exception:  # noqa: BLE001 - the share coordinator unreachable: retried by a later heartbeat
            log.exception("group %s: initializing share state failed", request.group_id)
            failed = int(E.unknown_server_error)
        async with self.lock(request.group_id):
            share = self.share_of(request.group_id)
            if share is None:
                return
            if failed:
                log.warning("group %s: share state not initialized (error %d)", request.group_id, failed)
                record = uninitialized(share, request.partitions)
            else:
                record = initialized(share, request.partitions, self.catalog, now_ms())
            if record is None:
                return
            code = await self.write(request.group_id, [record])
            if code:
                log.warning("group %s: share state metadata not written (error %d)", request.group_id, code)
                return
            share.apply(record[0], record[1], now_ms())

    async def delete_state(self, group: Group) -> int:
        """DeleteGroups of an empty share group, before its tombstones: its partitions are
        written as deleting, then their share state is deleted in the share coordinator
        (a failure leaves them deleting, and a later DeleteGroups retries them)."""
        share = group.share
        if share is None:
            return 0
        names: dict[uuid.UUID, str] = dict(share.deleting)
        partitions: dict[uuid.UUID, set[int]] = {}
        for source in (share.initialized, share.initializing):
            for topic, init in source.items():
                names[topic] = init.name
                partitions.setdefault(topic, set()).update(init.partitions)
        for topic in share.deleting:  # left by an earlier deletion that failed: all its partitions again
            found = self.catalog.by_name(self.catalog.name_of(topic) or "")
            if found is not None and found[0] == topic:
                partitions.setdefault(topic, set()).update(range(found[1]))
        if not names and not share.has_state_metadata:
            return 0
        record = state_metadata_record(share.group_id, {}, {}, names)
        code = await self.write(share.group_id, [record])
        if code:
            return code
        share.apply(record[0], record[1], now_ms())
        for topic, parts in partitions.items():
            for partition in sorted(parts):
                code = await self.state.delete(share.group_id, topic, partition)
                if code:
                    return code
        return 0

    # ------------------------------------------------------------------ deadlines
    def expire(self, now: float) -> None:
        """Fence members whose session ran out (tick)."""
        for group in list(self.coordinator.groups.values()):
            share = group.share
            if share is None:
                continue
            for member_id, deadline in list(share.session_deadlines.items()):
                if now > deadline:
                    self._fence_soon(share.group_id, member_id)

    def _fence_soon(self, group_id: str, member_id: str) -> None:
        async def fence_member() -> None:
            async with self.lock(group_id):
                share = self.share_of(group_id)
                member = share.members.get(member_id) if share is not None else None
                if share is None or member is None:
                    return
                if time.monotonic() <= share.session_deadlines.get(member_id, 0.0):
                    return  # it heartbeated while this waited for the lock
                records = fence(share, member, self.catalog)
                code = await self.write(group_id, records)
                if code:
                    log.warning("group %s: member %s not fenced (error %d); retrying", group_id, member_id, code)
                    return
                self._after(share, Plan(ShareHeartbeatAnswer(), records))
                log.info("group %s: share member %s fenced: the member session expired", group_id, member_id)

        self.fence_soon(group_id, member_id, fence_member)

    # ------------------------------------------------------------------ load
    def replay(self, key: ShareGroupKey, value: ShareGroupValue | None) -> None:
        """One share group record of a load, in log order."""
        groups = self.coordinator.groups
        group = groups.get(key.group_id)
        if group is None:
            if value is None:
                return
            group = groups[key.group_id] = Group(key.group_id)
        if group.share is None:
            group.share = ShareGroup(key.group_id)
        group.share.apply(key, value, now_ms())

    def loaded(self, group: Group) -> None:
        """A group replayed by a load: every member gets a fresh session, as in Kafka."""
        share = group.share
        if share is None:
            return
        if share.deleted:
            group.share = None
            return
        now = time.monotonic()
        for member_id in share.members:
            share.session_deadlines[member_id] = now + self.settings_for(share.group_id).session_timeout_ms / 1000
        group.protocol_type = PROTOCOL_TYPE
        self.settle(group)

    # ------------------------------------------------------------------ ShareGroupDescribe
    def describe(self, group_ids: Sequence[str]) -> list[ShareGroupDescription]:
        out = []
        for group_id in group_ids:
            code = self.coordinator.unavailable()
            group = self.coordinator.groups.get(group_id)
            if code:
                out.append(ShareGroupDescription(code, group_id))
            elif group is None or group.is_(GroupState.DEAD) or (group.share is None and _bare(group)):
                out.append(ShareGroupDescription(int(E.group_id_not_found), group_id, f"Group {group_id} not found."))
            elif group.share is None:
                out.append(ShareGroupDescription(int(E.group_id_not_found), group_id,
                                                 f"Group {group_id} is not a share group."))
            else:
                share = group.share
                out.append(ShareGroupDescription(0, group_id, None, share.state, share.group_epoch,
                                                 share.assignment_epoch, assignor.NAME,
                                                 tuple(share.members.values())))
        return out

    @staticmethod
    def deletion_entries(group: Group) -> list[tuple[bytes, bytes | None]]:
        """The records that delete a group's share-protocol state with it."""
        return encode(deletion_records(group.share)) if group.share is not None else []


def _bare(group: Group) -> bool:
    """A group object that stands for nothing yet (no members, offsets, generation or kind):
    as good as absent."""
    return (group.modern is None and group.share is None and not group.members and not group.pending_members
            and not group.offsets and group.generation == 0 and group.is_(GroupState.EMPTY))
