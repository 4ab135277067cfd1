"""The classic group coordinator: JoinGroup, SyncGroup, Heartbeat, LeaveGroup, offsets.

Semantics are Kafka's classic GroupCoordinator (its error codes at the same points), so
clients behave as they do against Kafka. Everything runs on one asyncio loop (the
coordinator process's): each group is changed only there, so no locks (P6). A JoinGroup
or SyncGroup that must wait for the rest of the group is a future parked on the member
(``join_waiter`` / ``sync_waiter``); ``tick()`` runs every TICK seconds and handles every
deadline: session expiry, the end of the join phase, a missing leader assignment,
pending members that never came back, and offset retention.

Persistence goes through ``OffsetsLog`` (the group's partition of __consumer_offsets,
written by the partition's owning worker and fenced by the coordinator epoch). A commit
is acknowledged only after its records are appended; the in-memory cache changes after
the append succeeds. Group metadata is written when a generation becomes Stable or the
group goes Empty, so a coordinator elected later knows the groups and their members.

Transactional offsets (TxnOffsetCommit) are written at once in a transactional batch of
the producer, and wait in ``pending`` (txn_offsets.py) until the transaction coordinator,
in this process, tells ``complete_transaction`` that its marker is in the partition.

Inputs are plain values (the protocol layer in broker/apis translates kio entities);
results are ``(error code, …)`` tuples or small dataclasses. Expected failures are error
codes, never exceptions (P3).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from dataclasses import dataclass
from typing import Any, Callable, Coroutine, Iterable, Protocol, Sequence

from kio.schema.errors import ErrorCode

from coordination.groups import offsets_schema as schema
from coordination.groups.answers import JoinResult, SyncResult
from coordination.groups.consumer.classic_members import ClassicJoin
from coordination.groups.consumer.heartbeat import ConsumerSettings
from coordination.groups.consumer.service import ConsumerGroupService
from coordination.groups.group import Group, Member
from coordination.groups.replay import LoadEntry, OffsetsRecord, TxnMarker
from coordination.groups.requests import JoiningMember, MemberRef
from coordination.groups.share.group import SHARE_GROUP_KEYS
from coordination.groups.share.heartbeat import ShareSettings
from coordination.groups.share.offsets import ShareOffsetsAdmin
from coordination.groups.share.service import ShareGroupService
from coordination.groups.share.state_admin import NoShareState, ShareStateAdmin
from coordination.groups.state import GroupState
from coordination.groups.txn_offsets import OrderedOffset, PendingTxnOffsets
from storage.types import NO_PRODUCER_ID

log = logging.getLogger(__name__)

TICK = 0.1  # seconds between deadline checks
E = ErrorCode


class OffsetsLog(Protocol):
    """Where the coordinator's records go: the __consumer_offsets partitions."""

    partitions: int

    async def append(self, partition: int, batch: bytes) -> int:
        """Append one record batch to ``partition``; the Kafka error code (0: appended)."""
        ...


@dataclass(frozen=True)
class CoordinatorSettings:
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1_800_000
    initial_rebalance_delay_ms: int = 3000
    max_group_size: int = 2**31 - 1
    offset_metadata_max_bytes: int = 4096
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000
    offsets_retention_check_interval_ms: int = 600_000


@dataclass
class MemberSummary:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass
class GroupSummary:
    error_code: int
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: list[MemberSummary]


def _state_name(group: Group) -> str:
    if group.share is not None:
        return group.share.state
    return group.modern.state.value if group.modern is not None else group.state.wire_name


def _group_type(group: Group) -> str:
    if group.share is not None:
        return "share"
    return "consumer" if group.modern is not None else "classic"


# A share group id asked for by a request of another kind: Kafka's answers (the group is not
# found as a group of that kind).
NOT_THIS_KIND = int(E.group_id_not_found)


# Append failures a client should see as coordinator trouble (Kafka's
# GroupMetadataManager maps them the same way).
def _commit_error(code: int) -> int:
    if code in (E.unknown_topic_or_partition, E.not_enough_replicas, E.not_enough_replicas_after_append,
                E.request_timed_out, E.kafka_storage_error):
        return int(E.coordinator_not_available)
    if code in (E.not_leader_or_follower,):
        return int(E.not_coordinator)
    if code in (E.message_too_large, E.record_list_too_large, E.invalid_fetch_size):
        return int(E.invalid_commit_offset_size)
    return code


class GroupCoordinator:
    """All the groups whose __consumer_offsets partitions this coordinator serves."""

    def __init__(self, settings: CoordinatorSettings, offsets_log: OffsetsLog,
                 consumer_settings: ConsumerSettings | None = None, share_settings: ShareSettings | None = None,
                 share_state: ShareStateAdmin | None = None) -> None:
        self.settings = settings
        self.log = offsets_log
        # The consumer group protocol (KIP-848): heartbeats, describes, its members' checks.
        self.consumer = ConsumerGroupService(self, consumer_settings or ConsumerSettings())
        # Share groups (KIP-932), group side; their partitions' state is the share coordinator's.
        self.share = ShareGroupService(self, share_settings or ShareSettings(), share_state or NoShareState())
        self.share_offsets = ShareOffsetsAdmin(self.share)
        self._background: set[asyncio.Task[Any]] = set()
        # Group metadata records being written in the background, by group id.
        self._group_writes: dict[str, asyncio.Future[None]] = {}
        self.groups: dict[str, Group] = {}
        self.active = False  # elected and loaded: serving
        self._loading = False
        # Told when a group becomes Stable, goes Empty, or is removed (state DEAD), so the
        # process can mirror it for operators (ZooKeeper /consumers/<group>). Must not block.
        self.on_group_change: Callable[[Group], None] = lambda _group: None
        self._last_expiry_check = time.monotonic()
        self.pending = PendingTxnOffsets()
        # The place in the log of the next record written: beyond every offset loaded
        # (records are written in the order they are issued, one partition at a time).
        self._next_order = 0
        # Transactions completed while the log is being read: applied once it is loaded.
        self._completed_while_loading: list[tuple[int, bool, int]] = []

    @property
    def loading(self) -> bool:
        """Elected, reading __consumer_offsets: requests wait (COORDINATOR_LOAD_IN_PROGRESS)."""
        return self._loading

    @loading.setter
    def loading(self, value: bool) -> None:
        was, self._loading = self._loading, value
        if value and not was:
            # Completions kept by an earlier load that never finished are stale: this
            # load reads their markers from the log.
            self._completed_while_loading.clear()
        elif was and not value:
            # The log may have been read before their markers: done now (a completion
            # whose marker the load read finds nothing pending).
            completed, self._completed_while_loading = self._completed_while_loading, []
            for producer_id, committed, partition in completed:
                self._complete(producer_id, committed, partition)

    # ------------------------------------------------------------------ availability
    def unavailable(self) -> int:
        """COORDINATOR_LOAD_IN_PROGRESS while loading, NOT_COORDINATOR when not elected, else 0."""
        return self._unavailable()

    @staticmethod
    def commit_error(code: int) -> int:
        """An append's error as the client of a coordinator write sees it."""
        return _commit_error(code)

    def _unavailable(self) -> int:
        if self.loading:
            return int(E.coordinator_load_in_progress)
        if not self.active:
            return int(E.not_coordinator)
        return 0

    def partition_for(self, group_id: str) -> int:
        return schema.partition_for(group_id, self.log.partitions)

    # ------------------------------------------------------------------ loading
    def load(self, partitions: Iterable[tuple[int, Iterable[LoadEntry]]]) -> None:
        """Replace what this coordinator knows with a replay of __consumer_offsets: each
        partition's records in log order (later records win, tombstones delete). Groups
        with members come back Stable with their members and assignment, so consumers that
        keep heartbeating carry on without a rebalance. Transactional offsets wait for
        their producer's marker in the same partition: a COMMIT applies them, an ABORT
        drops them, and those with no marker yet stay pending (the transaction
        coordinator completes them once it has loaded its own log). Completions told while
        ``loading`` are applied when it ends."""
        self.groups.clear()
        self.pending.clear()
        for partition, entries in partitions:
            for entry in entries:
                self._next_order = max(self._next_order, entry.offset + 1)
                if isinstance(entry, TxnMarker):
                    self._complete(entry.producer_id, entry.committed, partition)
                else:
                    self._replay(entry)
        for group in self.groups.values():
            self.consumer.loaded(group)
            self.share.loaded(group)
        for group_id in [g for g, group in self.groups.items() if not group.members and not group.offsets
                         and group.generation == 0 and group.modern is None and group.share is None
                         and not self.pending.has_group(g)]:
            del self.groups[group_id]

    def _replay(self, record: OffsetsRecord) -> None:
        key, value = record.key, record.value
        if isinstance(key, SHARE_GROUP_KEYS):
            self.share.replay(key, value)  # type: ignore[arg-type]
            return
        if not isinstance(key, (schema.OffsetKey, schema.GroupKey)):
            self.consumer.replay(key, value)  # type: ignore[arg-type]
            return
        if isinstance(key, schema.OffsetKey):
            group = self.groups.get(key.group)
            partition = (key.topic, key.partition)
            if value is None:
                if group is not None:
                    group.drop_offset(partition)
                self.pending.discard(key.group, partition)
                return
            assert isinstance(value, schema.OffsetValue)
            if group is None:
                group = self.groups[key.group] = Group(key.group)
            if record.producer_id != NO_PRODUCER_ID:
                self.pending.add(record.producer_id, key.group, partition, OrderedOffset(value, record.offset))
            else:
                group.set_offset(partition, value, record.offset)
        elif value is None:
            # The classic group's metadata goes; its offsets are records of their own and stay
            # (DeleteGroups tombstones them first; a group that changed kind keeps them).
            group = self.groups.get(key.group)
            if group is not None and group.modern is None and group.share is None:
                kept = Group(key.group)
                kept.offsets, kept.offset_order = group.offsets, group.offset_order
                self.groups[key.group] = kept
        else:
            assert isinstance(value, schema.GroupValue)
            self.groups[key.group] = self._restore_group(key.group, value, self.groups.get(key.group))

    def _restore_group(self, group_id: str, value: schema.GroupValue, previous: Group | None) -> Group:
        group = Group(group_id, generation=value.generation, protocol_type=value.protocol_type or None,
                      protocol_name=value.protocol, state_timestamp=value.current_state_timestamp)
        if previous is not None:
            group.offsets, group.offset_order = previous.offsets, previous.offset_order
        now = time.monotonic()
        for m in value.members:
            member = Member(m.member_id, m.group_instance_id, m.client_id, m.client_host, m.session_timeout,
                            m.rebalance_timeout, value.protocol_type, [(value.protocol or "", m.subscription)],
                            assignment=m.assignment, is_new=False)
            member.touch(now)
            group.members[member.member_id] = member
            if member.group_instance_id is not None:
                group.static_members[member.group_instance_id] = member.member_id
        group.leader_id = value.leader if value.leader in group.members else next(iter(group.members), None)
        group.state = GroupState.STABLE if group.members else GroupState.EMPTY
        return group

    def deactivate(self) -> None:
        """Resigned or fenced: fail every parked request with NOT_COORDINATOR, drop state."""
        self.active = False
        for group in self.groups.values():
            for member in group.members.values():
                self._answer_join(member, JoinResult(int(E.not_coordinator)))
                self._answer_sync(member, SyncResult(int(E.not_coordinator)))
        self.groups.clear()
        self.pending.clear()
        self._completed_while_loading.clear()

    # ------------------------------------------------------------------ JoinGroup
    async def join_group(self, group_id: str, joining: JoiningMember, require_known_member_id: bool) -> JoinResult:
        member_id, group_instance_id, protocol_type = joining.member_id, joining.group_instance_id, joining.protocol_type
        protocols = list(joining.protocols)
        session_timeout_ms, rebalance_timeout_ms = joining.session_timeout_ms, joining.rebalance_timeout_ms
        client_id, client_host = joining.client_id, joining.client_host
        if not group_id:
            return JoinResult(int(E.invalid_group_id), member_id=member_id)
        code = self._unavailable()
        if code:
            return JoinResult(code, member_id=member_id)
        s = self.settings
        if not s.min_session_timeout_ms <= session_timeout_ms <= s.max_session_timeout_ms:
            return JoinResult(int(E.invalid_session_timeout), member_id=member_id)
        if rebalance_timeout_ms < 0:
            rebalance_timeout_ms = session_timeout_ms  # JoinGroup v0 has none: Kafka uses the session timeout
        group = self.groups.get(group_id)
        if group is None:
            if member_id:
                return JoinResult(int(E.unknown_member_id), member_id=member_id)
            group = self.groups[group_id] = Group(group_id)
        if group.is_(GroupState.DEAD):
            # The group is being deleted; the client finds the coordinator again.
            return JoinResult(int(E.coordinator_not_available), member_id=member_id)
        if group.share is not None:
            return JoinResult(int(E.inconsistent_group_protocol), member_id="")
        if group.modern is not None and group.modern.members:
            # A classic member of a consumer group (KIP-848): the consumer protocol assigns for it.
            answer = await self.consumer.classic_join(ClassicJoin(
                group_id, member_id, group_instance_id, protocol_type, tuple(protocols), session_timeout_ms,
                rebalance_timeout_ms, client_id, client_host, require_known_member_id))
            return JoinResult(answer.error_code, answer.generation, protocol_type if not answer.error_code else None,
                              answer.protocol_name, "", answer.member_id, [])
        if group.modern is not None:
            code = await self._make_classic(group)
            if code:
                return JoinResult(code, member_id=member_id)
        if not group.supports(protocol_type, protocols):
            return JoinResult(int(E.inconsistent_group_protocol), member_id=member_id)
        if not member_id:
            return await self._join_unknown_member(group, group_instance_id, protocol_type, protocols, session_timeout_ms,
                                                   rebalance_timeout_ms, client_id, client_host, require_known_member_id)
        return await self._join_known_member(group, member_id, group_instance_id, protocol_type, protocols,
                                             session_timeout_ms, rebalance_timeout_ms, client_id, client_host)

    def release_classic(self, group: Group) -> None:
        """A classic group became a consumer group (online upgrade): its parked JoinGroup and
        SyncGroup requests are answered REBALANCE_IN_PROGRESS (the members join the consumer
        group next), and its classic members go (they now live in ``group.modern``)."""
        for member in group.members.values():
            self._answer_join(member, JoinResult(int(E.rebalance_in_progress), member_id=member.member_id))
            self._answer_sync(member, SyncResult(int(E.rebalance_in_progress)))
        group.members.clear()
        group.static_members.clear()
        group.pending_members.clear()
        group.leader_id = None

    def replace_with_classic(self, group_id: str, value: schema.GroupValue, reason: str) -> None:
        """A consumer group whose members all speak the classic protocol becomes a classic group
        (online downgrade, its records already written): its members rejoin in a rebalance."""
        group = self._restore_group(group_id, value, self.groups.get(group_id))
        self.groups[group_id] = group
        if group.members:
            self._prepare_rebalance(group, reason)

    async def _make_classic(self, group: Group) -> int:
        """A JoinGroup for a consumer group: refused while it has members; an empty one
        becomes a classic group (its consumer records tombstoned, its offsets kept), as Kafka does."""
        assert group.modern is not None
        if group.modern.members:
            return int(E.inconsistent_group_protocol)
        entries = self.consumer.deletion_entries(group)
        code = await self.log.append(self.partition_for(group.group_id), schema.offsets_batch(entries, int(time.time() * 1000)))
        if code:
            return _commit_error(code)
        if group.modern is not None and not group.modern.members:
            group.modern = None
            group.protocol_type = None
        return 0 if group.modern is None else int(E.inconsistent_group_protocol)

    async def _join_unknown_member(self, group: Group, group_instance_id: str | None, protocol_type: str,
                                   protocols: list[tuple[str, bytes]], session_timeout_ms: int, rebalance_timeout_ms: int,
                                   client_id: str, client_host: str, require_known_member_id: bool) -> JoinResult:
        new_id = f"{client_id or 'member'}-{uuid.uuid4()}"
        if group_instance_id is not None:
            old_id = group.static_members.get(group_instance_id)
            if old_id is not None:
                return await self._rejoin_static(group, old_id, new_id, protocol_type, protocols, session_timeout_ms,
                                                 rebalance_timeout_ms)
        elif require_known_member_id:
            # JoinGroup v4+: hand out the id first, so a client that times out and retries
            # does not leave a ghost member behind (KIP-394).
            if len(group.members) + len(group.pending_members) >= self.settings.max_group_size:
                return JoinResult(int(E.group_max_size_reached))
            group.pending_members[new_id] = time.monotonic() + session_timeout_ms / 1000
            return JoinResult(int(E.member_id_required), member_id=new_id)
        if len(group.members) >= self.settings.max_group_size:
            return JoinResult(int(E.group_max_size_reached))
        member = Member(new_id, group_instance_id, client_id, client_host, session_timeout_ms, rebalance_timeout_ms,
                        protocol_type, protocols)
        return await self._add_member_and_rebalance(group, member)

    async def _join_known_member(self, group: Group, member_id: str, group_instance_id: str | None, protocol_type: str,
                                 protocols: list[tuple[str, bytes]], session_timeout_ms: int, rebalance_timeout_ms: int,
                                 client_id: str, client_host: str) -> JoinResult:
        if member_id in group.pending_members:
            del group.pending_members[member_id]
            if len(group.members) >= self.settings.max_group_size:
                return JoinResult(int(E.group_max_size_reached), member_id=member_id)
            member = Member(member_id, group_instance_id, client_id, client_host, session_timeout_ms,
                            rebalance_timeout_ms, protocol_type, protocols)
            return await self._add_member_and_rebalance(group, member)
        code = self._check_member(group, member_id, group_instance_id)
        if code:
            return JoinResult(code, member_id=member_id)
        member = group.members[member_id]
        if group.is_(GroupState.EMPTY):
            return JoinResult(int(E.unknown_member_id), member_id=member_id)
        member.session_timeout_ms = session_timeout_ms
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.touch()
        if group.is_(GroupState.PREPARING_REBALANCE):
            member.protocols = protocols
            return await self._await_join(group, member)
        if group.is_(GroupState.COMPLETING_REBALANCE):
            if member.same_protocols(protocols):
                # A retry of a join that already completed: answer it again.
                return self._join_answer(group, member)
            member.protocols = protocols
            self._prepare_rebalance(group, f"member {member_id} changed its protocols")
            return await self._await_join(group, member)
        # Stable: the leader rejoining, or changed metadata, starts a rebalance;
        # a follower with nothing new just gets the current generation.
        if member_id == group.leader_id or not member.same_protocols(protocols):
            member.protocols = protocols
            self._prepare_rebalance(group, f"member {member_id} rejoined")
            return await self._await_join(group, member)
        return self._join_answer(group, member)

    async def _rejoin_static(self, group: Group, old_id: str, new_id: str, protocol_type: str,
                             protocols: list[tuple[str, bytes]], session_timeout_ms: int,
                             rebalance_timeout_ms: int) -> JoinResult:
        """A static member (group.instance.id) restarted: it takes over its old place;
        the old member id is fenced (FENCED_INSTANCE_ID from now on)."""
        old = group.members[old_id]
        self._answer_join(old, JoinResult(int(E.fenced_instance_id), member_id=old_id))
        self._answer_sync(old, SyncResult(int(E.fenced_instance_id)))
        member = group.replace_static(old_id, new_id)
        member.session_timeout_ms = session_timeout_ms
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.touch()
        if group.is_(GroupState.STABLE) and member.same_protocols(protocols):
            # Nothing changed: no rebalance (KIP-345); it keeps its assignment. A returning
            # leader gets the member list too; its SyncGroup in Stable just returns its
            # assignment, so an assignment it computes again is not installed.
            return self._join_answer(group, member)
        member.protocols = protocols
        if group.is_(GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(group, f"static member {member.group_instance_id} rejoined with new metadata")
        return await self._await_join(group, member)

    async def _add_member_and_rebalance(self, group: Group, member: Member) -> JoinResult:
        member.touch()
        group.add(member)
        if group.is_(GroupState.EMPTY, GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(group, f"member {member.member_id} joined")
        elif group.is_(GroupState.PREPARING_REBALANCE):
            self._extend_initial_delay(group)
        return await self._await_join(group, member)

    def _extend_initial_delay(self, group: Group) -> None:
        """A new member joined while the group waits out its initial delay: more may be on
        their way, so the join phase ends only once the delay has passed with no new
        member, and never after the cap set when it began. Kafka extends by whole delays
        at fixed points (tryCompleteInitialRebalanceElseSchedule); counting the delay from
        the last arrival ends the phase no later than Kafka does, and sooner when the
        members come together."""
        now = time.monotonic()
        if not group.join_not_before or now >= group.join_not_before:
            return  # not an initial rebalance, or its delay is over
        group.join_not_before = min(now + self.settings.initial_rebalance_delay_ms / 1000, group.rebalance_deadline)
        self._complete_join_at(group, group.join_not_before)

    def _complete_join_at(self, group: Group, when: float) -> None:
        """End the join phase as soon as ``when`` (monotonic) comes, rather than at the
        next tick, if every member has joined by then. A stale call finds the group in
        another state, or its delay moved later, and does nothing."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no loop (a synchronous caller): tick() ends it
        # A hair late: the loop may run a timer a clock tick early, before ``when`` has come.
        loop.call_later(max(0.0, when - time.monotonic()) + 0.001, self._join_delay_over, group)

    def _join_delay_over(self, group: Group) -> None:
        if self.active and self.groups.get(group.group_id) is group:
            self._maybe_complete_join(group)

    async def _await_join(self, group: Group, member: Member) -> JoinResult:
        future: asyncio.Future[JoinResult] = asyncio.get_running_loop().create_future()
        if member.join_waiter is not None and not member.join_waiter.done():
            # A duplicate join while one is parked: the older one is superseded.
            member.join_waiter.set_result(JoinResult(int(E.rebalance_in_progress), member_id=member.member_id))
        member.join_waiter = future
        self._maybe_complete_join(group)
        return await future

    def _join_answer(self, group: Group, member: Member) -> JoinResult:
        members = None
        if member.member_id == group.leader_id and group.protocol_name is not None:
            members = [(m.member_id, m.group_instance_id, m.metadata_for(group.protocol_name))
                       for m in group.members.values() if group.protocol_name in dict(m.protocols)]
        return JoinResult(0, group.generation, group.protocol_type, group.protocol_name, group.leader_id or "",
                          member.member_id, members or [])

    def _prepare_rebalance(self, group: Group, reason: str) -> None:
        """Start (or restart) the join phase."""
        if group.is_(GroupState.COMPLETING_REBALANCE):
            # The assignment of the generation being completed will never come: members
            # parked in SyncGroup rejoin.
            for member in group.members.values():
                self._answer_sync(member, SyncResult(int(E.rebalance_in_progress)))
        now = time.monotonic()
        was_empty = group.is_(GroupState.EMPTY)
        group.transition(GroupState.PREPARING_REBALANCE)
        group.rebalance_deadline = now + group.max_rebalance_timeout_ms() / 1000
        delay = self.settings.initial_rebalance_delay_ms / 1000
        group.join_not_before = 0.0
        if was_empty and delay > 0:
            # The group's first rebalance waits group.initial.rebalance.delay.ms for the
            # other members to arrive, extended while they keep arriving, up to the
            # rebalance timeout (but never less than the delay), as Kafka caps it.
            group.rebalance_deadline = max(group.rebalance_deadline, now + delay)
            group.join_not_before = now + delay
            self._complete_join_at(group, group.join_not_before)
        log.info("group %s: preparing to rebalance (generation %d): %s", group.group_id, group.generation, reason)

    def _maybe_complete_join(self, group: Group, force: bool = False) -> None:
        if not group.is_(GroupState.PREPARING_REBALANCE):
            return
        now = time.monotonic()
        if not force:
            if group.join_not_before and now < group.join_not_before:
                return
            if not group.has_all_members_joined():
                return
        self._complete_join(group)

    def _complete_join(self, group: Group) -> None:
        # Dynamic members that did not rejoin in time are out; static members keep their
        # place (they may come back with the same group.instance.id).
        for member in group.not_yet_rejoined():
            if member.group_instance_id is None:
                group.remove(member.member_id)
        group.pending_members.clear()
        if group.members and not any(m.awaiting_join for m in group.members.values()):
            # Only static members are left and none of them rejoined: a generation nobody
            # would hear of. Wait one more rebalance timeout for them to come back, or
            # for their sessions to expire (Kafka postpones the same way).
            group.rebalance_deadline = time.monotonic() + group.max_rebalance_timeout_ms() / 1000
            log.info("group %s: no member rejoined; the join phase goes on", group.group_id)
            return
        if group.leader_id is not None and group.leader_id in group.members and not group.members[group.leader_id].awaiting_join:
            joined = [m.member_id for m in group.members.values() if m.awaiting_join]
            if joined:
                group.leader_id = joined[0]
        group.init_next_generation()
        log.info("group %s: generation %d with %d members (%s)", group.group_id, group.generation, len(group.members),
                 group.protocol_name)
        if group.is_(GroupState.EMPTY):
            self._persist_group_soon(group)
            self.on_group_change(group)
            return
        now = time.monotonic()
        group.sync_deadline = now + group.max_rebalance_timeout_ms() / 1000
        for member in group.members.values():
            if member.awaiting_join:
                self._answer_join(member, self._join_answer(group, member))
                member.is_new = False
            member.touch(now)

    def _answer_join(self, member: Member, result: JoinResult) -> None:
        waiter, member.join_waiter = member.join_waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(result)

    def _answer_sync(self, member: Member, result: SyncResult) -> None:
        waiter, member.sync_waiter = member.sync_waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(result)

    def _check_member(self, group: Group, member_id: str, group_instance_id: str | None) -> int:
        """UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID, or 0."""
        if group_instance_id is not None:
            known = group.static_members.get(group_instance_id)
            if known is not None and known != member_id:
                return int(E.fenced_instance_id)
        member = group.members.get(member_id)
        if member is None:
            return int(E.unknown_member_id)
        if group_instance_id is not None and member.group_instance_id != group_instance_id:
            return int(E.fenced_instance_id)
        return 0

    # ------------------------------------------------------------------ SyncGroup
    async def sync_group(self, group_id: str, sender: MemberRef, protocol_type: str | None, protocol_name: str | None,
                         assignments: list[tuple[str, bytes]]) -> SyncResult:
        generation, member_id, group_instance_id = sender.generation, sender.member_id, sender.group_instance_id
        code = self._unavailable()
        if code:
            return SyncResult(code)
        group = self.groups.get(group_id)
        if group is None:
            return SyncResult(int(E.unknown_member_id))
        if group.is_(GroupState.DEAD):
            return SyncResult(int(E.coordinator_not_available))
        if group.share is not None:
            return SyncResult(int(E.unknown_member_id))
        if group.modern is not None:
            code, assignment = self.consumer.classic_sync(group_id, member_id, group_instance_id, generation,
                                                          protocol_type, protocol_name)
            return SyncResult(code, protocol_type, protocol_name, assignment) if not code else SyncResult(code)
        code = self._check_member(group, member_id, group_instance_id)
        if code:
            return SyncResult(code)
        if generation != group.generation:
            return SyncResult(int(E.illegal_generation))
        if (protocol_type is not None and protocol_type != group.protocol_type) or \
                (protocol_name is not None and protocol_name != group.protocol_name):
            return SyncResult(int(E.inconsistent_group_protocol))
        member = group.members[member_id]
        member.touch()
        if group.is_(GroupState.EMPTY):
            return SyncResult(int(E.unknown_member_id))
        if group.is_(GroupState.PREPARING_REBALANCE):
            return SyncResult(int(E.rebalance_in_progress))
        if group.is_(GroupState.STABLE):
            return SyncResult(0, group.protocol_type, group.protocol_name, member.assignment)
        # CompletingRebalance: park until the leader's assignment arrives.
        future: asyncio.Future[SyncResult] = asyncio.get_running_loop().create_future()
        if member.sync_waiter is not None and not member.sync_waiter.done():
            member.sync_waiter.set_result(SyncResult(int(E.rebalance_in_progress)))
        member.sync_waiter = future
        if member_id == group.leader_id:
            # A member named twice keeps the last assignment given (as Kafka's toMap).
            await self._install_assignment(group, generation, dict(assignments))
        return await future

    async def _install_assignment(self, group: Group, generation: int, assignments: dict[str, bytes]) -> None:
        # Assignments for ids that are not members are dropped; members the leader left
        # out get an empty assignment (as Kafka does).
        for member in group.members.values():
            member.assignment = assignments.get(member.member_id, b"")
        code = await self._persist_group(group)
        if group.generation != generation or not group.is_(GroupState.COMPLETING_REBALANCE):
            return  # the group moved on while the metadata was written; its waiters were answered
        if code:
            for member in group.members.values():
                member.assignment = b""
                self._answer_sync(member, SyncResult(_commit_error(code)))
            self._prepare_rebalance(group, f"group metadata could not be written (error {code})")
            return
        group.transition(GroupState.STABLE)
        for member in group.members.values():
            self._answer_sync(member, SyncResult(0, group.protocol_type, group.protocol_name, member.assignment))
        self.on_group_change(group)

    # ------------------------------------------------------------------ Heartbeat
    def heartbeat(self, group_id: str, sender: MemberRef) -> int:
        generation, member_id, group_instance_id = sender.generation, sender.member_id, sender.group_instance_id
        code = self._unavailable()
        if code:
            return code
        group = self.groups.get(group_id)
        if group is None:
            return int(E.unknown_member_id)
        if group.is_(GroupState.DEAD):
            return int(E.coordinator_not_available)
        if group.share is not None:
            return int(E.unknown_member_id)
        if group.modern is not None:
            return self.consumer.classic_heartbeat(group_id, member_id, group_instance_id, generation)
        code = self._check_member(group, member_id, group_instance_id)
        if code:
            return code
        if group.is_(GroupState.EMPTY):
            return int(E.unknown_member_id)
        if generation != group.generation:
            return int(E.illegal_generation)
        group.members[member_id].touch()
        if group.is_(GroupState.PREPARING_REBALANCE):
            return int(E.rebalance_in_progress)
        return 0

    # ------------------------------------------------------------------ LeaveGroup
    async def leave_group(self, group_id: str, leaving: list[tuple[str, str | None]]) -> tuple[int, list[int]]:
        """(top-level error, per-member errors). A member given only by its
        group.instance.id (member id "") leaves by instance id, as admin tools do. The
        members are gone at once; a group left empty is Empty at once, and the answer
        waits for that to be written (as Kafka answers after its records), so a
        DeleteGroups right behind finds the group Empty in the log too."""
        code = self._unavailable()
        if code:
            return code, [code] * len(leaving)
        group = self.groups.get(group_id)
        if group is not None and group.share is not None:
            return int(E.unknown_member_id), [int(E.unknown_member_id)] * len(leaving)
        if group is not None and group.modern is not None:
            # A consumer group's classic members leave through the consumer protocol (a write).
            return 0, await self.consumer.classic_leave(group_id, leaving)
        if group is None or group.is_(GroupState.DEAD):
            return 0, [int(E.unknown_member_id)] * len(leaving)
        results = []
        removed = []
        for member_id, instance_id in leaving:
            if not member_id and instance_id is not None:
                member_id = group.static_members.get(instance_id, "")
                if not member_id:
                    results.append(int(E.unknown_member_id))
                    continue
            if member_id in group.pending_members and instance_id is None:
                del group.pending_members[member_id]
                results.append(0)
                continue
            code = self._check_member(group, member_id, instance_id)
            results.append(code)
            if not code:
                removed.append(member_id)
        if removed:
            self._remove_members(group, removed, "left the group")
        else:
            self._maybe_complete_join(group)  # the join phase may have waited only for a pending member
        await self._metadata_written(group)
        return 0, results

    def _remove_members(self, group: Group, member_ids: list[str], why: str) -> None:
        for member_id in member_ids:
            member = group.remove(member_id)
            if member is not None:
                self._answer_join(member, JoinResult(int(E.unknown_member_id), member_id=member_id))
                self._answer_sync(member, SyncResult(int(E.unknown_member_id)))
        log.info("group %s: %s %s", group.group_id, ", ".join(member_ids), why)
        if group.is_(GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(group, f"{len(member_ids)} member(s) {why}")
        if group.is_(GroupState.PREPARING_REBALANCE):
            if not group.members and not group.pending_members:
                self._complete_join(group)
            else:
                self._maybe_complete_join(group)

    # ------------------------------------------------------------------ deadlines
    def tick(self) -> None:
        """Expire sessions, end join phases and sync phases that ran out of time."""
        if not self.active:
            return
        now = time.monotonic()
        for group in list(self.groups.values()):
            for pending, deadline in list(group.pending_members.items()):
                if now > deadline:
                    del group.pending_members[pending]
                    self._maybe_complete_join(group)
            expired = [m.member_id for m in group.members.values()
                       if now > m.session_deadline and not m.awaiting_join and m.sync_waiter is None]
            if expired:
                self._remove_members(group, expired, "missed the session timeout")
            if group.is_(GroupState.PREPARING_REBALANCE):
                if now >= group.rebalance_deadline:
                    self._maybe_complete_join(group, force=True)
                else:
                    self._maybe_complete_join(group)
            elif group.is_(GroupState.COMPLETING_REBALANCE) and now >= group.sync_deadline:
                leader = group.members.get(group.leader_id or "")
                if leader is None or leader.sync_waiter is None:
                    missing = [m.member_id for m in group.members.values() if m.sync_waiter is None]
                    self._remove_members(group, missing, "sent no SyncGroup in time")
        self.consumer.expire(now)
        self.share.expire(now)
        interval = self.settings.offsets_retention_check_interval_ms / 1000
        if now - self._last_expiry_check >= interval:
            self._last_expiry_check = now
            self._in_background(self.expire_offsets())

    # ------------------------------------------------------------------ offsets
    async def commit_offsets(self, group_id: str, sender: MemberRef, retention_ms: int,
                             offsets: Sequence[tuple[str, int, int, int, str | None]],
                             known_topic: Callable[[str, int], bool], api_version: int | None = None) -> list[int]:
        """offsets: (topic, partition, offset, leader epoch, metadata). One code per entry.
        ``api_version``: the OffsetCommit version (a consumer group's members need v9+)."""
        generation, member_id, group_instance_id = sender.generation, sender.member_id, sender.group_instance_id
        code = self._unavailable()
        if code:
            return [code] * len(offsets)
        group = self.groups.get(group_id)
        if not group_id:
            return [int(E.invalid_group_id)] * len(offsets)
        if group is None:
            if generation >= 0:
                # A member of a generation this coordinator never saw (or of a deleted group): from
                # v9 Kafka answers GROUP_ID_NOT_FOUND, which both protocols' clients understand.
                code = int(E.group_id_not_found if api_version is not None and api_version >= 9
                           else E.illegal_generation)
                return [code] * len(offsets)
            group = self.groups[group_id] = Group(group_id)  # simple consumer: commits without joining
        if group.is_(GroupState.DEAD):
            return [int(E.coordinator_not_available)] * len(offsets)
        if group.share is not None:
            return [NOT_THIS_KIND] * len(offsets)
        if group.modern is not None:
            code = self.consumer.check_commit(group.modern, sender, api_version, [(t, p) for t, p, *_ in offsets])
            if code:
                return [code] * len(offsets)
        elif not (generation < 0 and group.is_(GroupState.EMPTY)):
            code = self._check_member(group, member_id, group_instance_id)
            if not code and generation != group.generation:
                code = int(E.illegal_generation)
            if not code and group.is_(GroupState.COMPLETING_REBALANCE):
                code = int(E.rebalance_in_progress)
            if code:
                return [code] * len(offsets)
            group.members[member_id].touch()
        now_ms = int(time.time() * 1000)
        expire = now_ms + retention_ms if retention_ms >= 0 else -1
        results: list[int] = []
        records: list[tuple[bytes, bytes | None]] = []
        accepted: list[tuple[tuple[str, int], schema.OffsetValue]] = []
        for topic, partition, offset, leader_epoch, metadata in offsets:
            if not known_topic(topic, partition):
                results.append(int(E.unknown_topic_or_partition))
                continue
            if metadata is not None and len(metadata.encode()) > self.settings.offset_metadata_max_bytes:
                results.append(int(E.offset_metadata_too_large))
                continue
            value = schema.OffsetValue(offset, leader_epoch, metadata or "", now_ms, expire)
            records.append((schema.encode_key(schema.OffsetKey(group_id, topic, partition)), schema.encode_offset_value(value)))
            accepted.append(((topic, partition), value))
            results.append(0)
        if records:
            order = self._take_order()
            code = await self.log.append(self.partition_for(group_id), schema.offsets_batch(records, now_ms))
            if code:
                code = _commit_error(code)
                return [code if r == 0 else r for r in results]
            for key, value in accepted:
                group.set_offset(key, value, order)
        return results

    def _take_order(self) -> int:
        """The place in the log of a batch about to be written."""
        order = self._next_order
        self._next_order += 1
        return order

    # ------------------------------------------------------------------ transactional offsets
    async def txn_commit_offsets(self, group_id: str, producer_id: int, producer_epoch: int, sender: MemberRef,
                                 offsets: Sequence[tuple[str, int, int, int, str | None]]) -> list[int]:
        """TxnOffsetCommit: offsets (topic, partition, offset, leader epoch, metadata) of
        existing partitions, one code per entry. They are written as a transactional batch
        of the producer (the log checks its epoch: a fenced producer gets its error) and
        wait for ``complete_transaction``. The sender is checked as Kafka checks a
        transactional commit: as OffsetCommit, except that a commit with no member and no
        generation is always accepted (TxnOffsetCommit before v3 carries neither) and a
        rebalance does not refuse it."""
        code = self._unavailable()
        if not code and not group_id:
            code = int(E.invalid_group_id)
        if not code and producer_id < 0:
            # No producer, no transaction for a marker to end (Kafka's coordinator, which
            # verifies the transaction first, answers this too).
            code = int(E.invalid_producer_id_mapping)
        if code:
            return [code] * len(offsets)
        group = self.groups.get(group_id)
        if group is None:
            if sender.generation >= 0:
                return [int(E.illegal_generation)] * len(offsets)
            group = self.groups[group_id] = Group(group_id)  # a simple consumer's group
        code = self._check_txn_sender(group, sender, [(t, p) for t, p, *_ in offsets])
        if code:
            return [code] * len(offsets)
        now_ms = int(time.time() * 1000)
        results: list[int] = []
        records: list[tuple[bytes, bytes | None]] = []
        accepted: list[tuple[tuple[str, int], schema.OffsetValue]] = []
        for topic, partition, offset, leader_epoch, metadata in offsets:
            if metadata is not None and len(metadata.encode()) > self.settings.offset_metadata_max_bytes:
                results.append(int(E.offset_metadata_too_large))
                continue
            value = schema.OffsetValue(offset, leader_epoch, metadata or "", now_ms)
            records.append((schema.encode_key(schema.OffsetKey(group_id, topic, partition)), schema.encode_offset_value(value)))
            accepted.append(((topic, partition), value))
            results.append(0)
        if records:
            order = self._take_order()
            batch = schema.txn_offsets_batch(records, now_ms, producer_id, producer_epoch)
            code = await self.log.append(self.partition_for(group_id), batch)
            if code:
                code = _commit_error(code)
                return [code if r == 0 else r for r in results]
            if self.groups.get(group_id) is group:  # not resigned, nor the group deleted, meanwhile
                for key, value in accepted:
                    self.pending.add(producer_id, group_id, key, OrderedOffset(value, order))
        return results

    def _check_txn_sender(self, group: Group, sender: MemberRef, partitions: Sequence[tuple[str, int]] = ()) -> int:
        if group.is_(GroupState.DEAD):
            return int(E.coordinator_not_available)
        if group.share is not None:
            return NOT_THIS_KIND
        if group.modern is not None:
            return self.consumer.check_commit(group.modern, sender, None, partitions, transactional=True)
        if sender.generation < 0 and group.is_(GroupState.EMPTY):
            return 0
        if sender.generation >= 0 or sender.member_id or sender.group_instance_id is not None:
            code = self._check_member(group, sender.member_id, sender.group_instance_id)
            if code:
                return code
            if sender.generation != group.generation:
                return int(E.illegal_generation)
        return 0

    def complete_transaction(self, producer_id: int, committed: bool, offsets_partition: int) -> None:
        """The transaction coordinator wrote the producer's COMMIT (``committed``) or ABORT
        marker to ``offsets_partition`` of __consumer_offsets: its pending offsets in the
        groups of that partition become the committed ones, or are dropped."""
        if self.loading:
            self._completed_while_loading.append((producer_id, committed, offsets_partition))
            return
        self._complete(producer_id, committed, offsets_partition)

    def _complete(self, producer_id: int, committed: bool, offsets_partition: int) -> None:
        taken = self.pending.take(producer_id, lambda group_id: self.partition_for(group_id) == offsets_partition)
        if not committed:
            return
        for group_id, offsets in taken.items():
            group = self.groups.get(group_id)
            if group is None:
                group = self.groups[group_id] = Group(group_id)
            for partition, pending in offsets.items():
                # An offset committed without a transaction after this one was written wins.
                if group.is_newer_than_committed(partition, pending.order):
                    group.set_offset(partition, pending.value, pending.order)

    def fetch_offsets(self, group_id: str, partitions: list[tuple[str, int]] | None, require_stable: bool = False,
                      member: tuple[str | None, int] | None = None,
                      ) -> tuple[int, list[tuple[str, int, schema.OffsetValue | None, int]]]:
        """(group error, [(topic, partition, value or None, partition error)]); ``partitions``
        None = all committed. With ``require_stable`` (OffsetFetch v7+) a partition with
        transactional offsets pending answers UNSTABLE_OFFSET_COMMIT and no offset: the
        client asks again once the transaction is over (KIP-447). ``member``: the (member
        id, member epoch) of OffsetFetch v9+, checked against a consumer group's members."""
        code = self._unavailable()
        if code:
            return code, []
        group = self.groups.get(group_id)
        if group is not None and group.share is not None:
            return NOT_THIS_KIND, []
        if group is not None and group.modern is not None and member is not None:
            code = self.consumer.check_fetch(group.modern, member[0], member[1])
            if code:
                return code, []
        offsets = group.offsets if group is not None else {}
        wanted = sorted(offsets) if partitions is None else partitions
        found: list[tuple[str, int, schema.OffsetValue | None, int]] = []
        for topic, partition in wanted:
            if require_stable and self.pending.has(group_id, (topic, partition)):
                found.append((topic, partition, None, int(E.unstable_offset_commit)))
            else:
                found.append((topic, partition, offsets.get((topic, partition)), 0))
        return 0, found

    async def delete_offsets(self, group_id: str, partitions: Sequence[tuple[str, int]]) -> tuple[int, list[int]]:
        """OffsetDelete: refused for topics the group's members subscribe to."""
        code = self._unavailable()
        if code:
            return code, []
        group = self.groups.get(group_id)
        if group is None or group.is_(GroupState.DEAD) or group.share is not None:
            return int(E.group_id_not_found), []
        subscribed: set[str] = set()
        if group.modern is not None:
            subscribed = self.consumer.subscribed_topics(group)
        elif not group.is_(GroupState.EMPTY):
            topics = group.subscribed_topics()
            if topics is None:
                return int(E.non_empty_group), []
            subscribed = topics
        results = []
        tombstones = []
        for topic, partition in partitions:
            if topic in subscribed:
                results.append(int(E.group_subscribed_to_topic))
                continue
            results.append(0)
            if (topic, partition) in group.offsets or self.pending.has(group_id, (topic, partition)):
                tombstones.append((topic, partition))
        code = await self._write_tombstones(group, tombstones, include_group=False)
        if code:
            return code, []
        return 0, results

    async def _write_tombstones(self, group: Group, partitions: list[tuple[str, int]], include_group: bool) -> int:
        if include_group:
            await self._metadata_written(group)  # else the group's last record could land after its tombstone
        records: list[tuple[bytes, bytes | None]] = [
            (schema.encode_key(schema.OffsetKey(group.group_id, t, p)), None) for t, p in partitions]
        if include_group:
            records.append((schema.encode_key(schema.GroupKey(group.group_id)), None))
            records += self.consumer.deletion_entries(group)
            records += self.share.deletion_entries(group)
        if not records:
            return 0
        code = await self.log.append(self.partition_for(group.group_id), schema.offsets_batch(records, int(time.time() * 1000)))
        if code:
            return _commit_error(code)
        for key in partitions:
            group.drop_offset(key)
            self.pending.discard(group.group_id, key)
        return 0

    async def expire_offsets(self) -> None:
        """offsets.retention.minutes: offsets of empty groups (or with an explicit expire
        time from OffsetCommit v2-4) are deleted; an empty group with no offsets left goes."""
        now_ms = int(time.time() * 1000)
        retention = self.settings.offsets_retention_ms
        for group in list(self.groups.values()):
            if not group.is_(GroupState.EMPTY) or group.share is not None:
                continue  # share groups keep no offsets here, and do not expire (Kafka's shouldExpire)
            expired = []
            for key, value in group.offsets.items():
                if self.pending.has(group.group_id, key):
                    continue  # kept until its transaction ends
                if value.expire_timestamp >= 0:
                    if now_ms >= value.expire_timestamp:
                        expired.append(key)
                elif now_ms >= max(value.commit_timestamp, group.state_timestamp) + retention:
                    expired.append(key)
            # A group with a transaction open on it stays (the transaction may commit offsets).
            empty_now = len(expired) == len(group.offsets) and not self.pending.has_group(group.group_id)
            if not expired:
                continue
            code = await self._write_tombstones(group, expired, include_group=empty_now and not group.members)
            if not code and empty_now and not group.members and group.is_(GroupState.EMPTY):
                group.transition(GroupState.DEAD)
                self.groups.pop(group.group_id, None)
                self.on_group_change(group)
            log.info("group %s: %d offsets expired", group.group_id, len(expired))

    # ------------------------------------------------------------------ group metadata
    def _group_value(self, group: Group) -> schema.GroupValue:
        protocol = group.protocol_name
        members = tuple(
            schema.MemberValue(m.member_id, m.group_instance_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
                               m.session_timeout_ms, m.metadata_for(protocol) if protocol and protocol in dict(m.protocols) else b"",
                               m.assignment)
            for m in group.members.values())
        return schema.GroupValue(group.protocol_type or "", group.generation, protocol, group.leader_id if members else None,
                                 group.state_timestamp, members)

    async def _persist_group(self, group: Group) -> int:
        record = (schema.encode_key(schema.GroupKey(group.group_id)), schema.encode_group_value(self._group_value(group)))
        return await self.log.append(self.partition_for(group.group_id), schema.offsets_batch([record], int(time.time() * 1000)))

    def _persist_group_soon(self, group: Group) -> None:
        async def write() -> None:
            code = await self._persist_group(group)
            if code:
                log.warning("group %s: metadata not written (error %d)", group.group_id, code)

        task = asyncio.ensure_future(write())
        self._background.add(task)
        self._group_writes[group.group_id] = task

        def done(finished: asyncio.Future[None]) -> None:
            self._background.discard(finished)
            if self._group_writes.get(group.group_id) is finished:
                del self._group_writes[group.group_id]

        task.add_done_callback(done)

    async def _metadata_written(self, group: Group) -> None:
        """Wait for the group's metadata record written in the background, if one is on
        its way: what comes next (an answer, the group's tombstone) must follow it."""
        pending = self._group_writes.get(group.group_id)
        if pending is not None:
            await asyncio.shield(pending)

    def in_background(self, work: Coroutine[Any, Any, Any]) -> None:
        self._in_background(work)

    def _in_background(self, work: Coroutine[Any, Any, Any]) -> None:
        """Run ``work`` as a task this coordinator holds until it is done (the loop keeps
        only weak references to tasks)."""
        task = asyncio.ensure_future(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    # ------------------------------------------------------------------ admin
    def describe(self, group_id: str) -> GroupSummary:
        code = self._unavailable()
        if code:
            return GroupSummary(code, group_id, "", "", "", [])
        group = self.groups.get(group_id)
        if group is None or group.modern is not None or group.share is not None:
            # A consumer group is described by ConsumerGroupDescribe (admin clients fall back
            # to DescribeGroups on this answer, and from it to ConsumerGroupDescribe).
            return GroupSummary(int(E.group_id_not_found), group_id, GroupState.DEAD.wire_name, "", "", [])
        stable = group.is_(GroupState.STABLE)
        members = [MemberSummary(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                 m.metadata_for(group.protocol_name) if stable and group.protocol_name else b"",
                                 m.assignment if stable else b"")
                   for m in group.members.values()]
        return GroupSummary(0, group_id, group.state.wire_name, group.protocol_type or "",
                            (group.protocol_name or "") if stable else "", members)

    def list_groups(self, states: set[str] | None) -> tuple[int, list[tuple[str, str, str, str]]]:
        """The groups this broker coordinates: (group id, protocol type, state, group type);
        ``states`` filters by state name, lower case. A broker that coordinates none (not the
        elected coordinator) answers an empty list with no error, as a Kafka broker that
        leads no __consumer_offsets partition does: admin clients ask every broker and
        merge the answers, so each group must come from exactly one of them."""
        if self.loading:
            return int(E.coordinator_load_in_progress), []
        if not self.active:
            return 0, []
        return 0, [(g.group_id, g.protocol_type or "", _state_name(g), _group_type(g))
                   for g in self.groups.values()
                   if not g.is_(GroupState.DEAD) and (states is None or _state_name(g).lower() in states)]

    async def delete_groups(self, group_ids: Sequence[str]) -> list[int]:
        results = []
        for group_id in group_ids:
            group = self.groups.get(group_id)
            if group is not None and group.share is not None:
                # A share group's heartbeats and its share state work hold its lock: none may
                # run between the emptiness check, the state deletion and the tombstones.
                async with self.share.lock(group_id):
                    results.append(await self._delete_group(group_id))
            else:
                results.append(await self._delete_group(group_id))
        return results

    async def _delete_group(self, group_id: str) -> int:
        code = self._unavailable()
        group = self.groups.get(group_id)
        if not code and (group is None or group.is_(GroupState.DEAD)):
            code = int(E.group_id_not_found)
        elif not code and group is not None and (group.members or not group.is_(GroupState.EMPTY)):
            code = int(E.non_empty_group)
        if not code and group is not None and group.share is not None:
            code = await self.share.delete_state(group)
        if not code and group is not None:
            partitions = list(group.offsets)
            partitions += sorted(self.pending.partitions_of(group_id) - set(partitions))
            code = await self._write_tombstones(group, partitions, include_group=True)
            if not code:
                group.transition(GroupState.DEAD)
                self.groups.pop(group_id, None)
                self.on_group_change(group)
        return code
