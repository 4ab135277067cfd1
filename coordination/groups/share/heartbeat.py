"""ShareGroupHeartbeat: what one heartbeat of a share group member (KIP-932) changes.

Kafka's GroupMetadataManager.shareGroupHeartbeat as pure functions of the group's state
(nothing here mutates a group): each returns the records to append and the answer to send
once they are in; the service appends, then folds them in with ``ShareGroup.apply``.

1. The member: found (its epoch checked: FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID) or created
   (epoch 0: in v1 the client names itself), and updated. A changed subscription, a change
   of the subscribed topics, or initialized partitions not yet in the target assignment
   bump the group epoch.
2. The target assignment: when the group epoch is ahead of it, the simple assignor
   (assignor.py) computes a new one over the partitions whose share state is initialized.
3. The member gets its target at once (no revocation in a share group), filtered to the
   topics it subscribes to.
4. Subscribed partitions with no share state yet are written as initializing
   (ShareGroupStatePartitionMetadata) and handed back to be initialized in the share
   coordinator; once that is done (``initialized``) they are assignable, and the next
   heartbeat assigns them.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from kio.schema.errors import ErrorCode

from coordination.groups.consumer.group import TopicCatalog
from coordination.groups.consumer.heartbeat import metadata_hash_of
from coordination.groups.share import assignor
from coordination.groups.share.group import (
    LEAVE_GROUP_MEMBER_EPOCH,
    Assignment,
    InitTopic,
    Record,
    ShareGroup,
    ShareMember,
    current_assignment_record,
    epoch_record,
    member_record,
    removal_records,
    state_metadata_record,
    target_epoch_record,
    target_member_record,
)

E = ErrorCode


@dataclass(frozen=True)
class ShareSettings:
    """The broker's group.share.* settings."""

    session_timeout_ms: int = 45_000
    heartbeat_interval_ms: int = 5_000
    max_size: int = 200
    # group.share.initialize.retry.interval.ms (internal in Kafka): partitions initializing for
    # longer than this are asked for again.
    initialize_retry_interval_ms: int = 30_000


@dataclass(frozen=True)
class ShareHeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int
    rack_id: str | None = None
    subscribed_topic_names: tuple[str, ...] | None = None  # None: unchanged, not sent
    client_id: str = ""
    client_host: str = ""


@dataclass
class ShareHeartbeatAnswer:
    error_code: int = 0
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: dict[uuid.UUID, tuple[int, ...]] | None = None  # None: not sent


@dataclass(frozen=True)
class Initialize:
    """Partitions to initialize in the share coordinator (start offset -1: the share-partition
    leader resolves share.auto.offset.reset), at state epoch ``state_epoch``."""

    group_id: str
    state_epoch: int
    partitions: Mapping[uuid.UUID, frozenset[int]]


@dataclass
class Plan:
    answer: ShareHeartbeatAnswer
    records: list[Record] = field(default_factory=list)
    member_id: str | None = None  # the member whose session the heartbeat renews
    initialize: Initialize | None = None


class ShareHeartbeatError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def validate(request: ShareHeartbeatRequest) -> None:
    """Kafka's throwIfShareGroupHeartbeatRequestIsInvalid: INVALID_REQUEST, before the group is looked at."""
    def invalid(message: str) -> ShareHeartbeatError:
        return ShareHeartbeatError(int(E.invalid_request), message)

    if not request.member_id.strip():
        raise invalid("MemberId can't be empty.")
    if not request.group_id.strip():
        raise invalid("GroupId can't be empty.")
    if request.rack_id is not None and not request.rack_id.strip():
        raise invalid("RackId can't be empty.")
    if request.member_epoch == 0:
        if not request.subscribed_topic_names:
            raise invalid("SubscribedTopicNames must be set in first request.")
    elif request.member_epoch < LEAVE_GROUP_MEMBER_EPOCH:
        raise invalid("MemberEpoch is invalid.")


def heartbeat(group: ShareGroup, request: ShareHeartbeatRequest, settings: ShareSettings, catalog: TopicCatalog,
              now_ms: int | None = None) -> Plan:
    """A heartbeat of a joining (epoch 0) or joined member."""
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    gid, member_id = group.group_id, request.member_id
    joining = request.member_epoch == 0
    if len(group.members) >= settings.max_size and member_id not in group.members:
        raise ShareHeartbeatError(int(E.group_max_size_reached), "The share group has reached its maximum capacity "
                                  f"of {settings.max_size} members.")
    member = group.members.get(member_id)
    if member is None:
        if not joining:
            raise ShareHeartbeatError(int(E.unknown_member_id), f"Member {member_id} is not a member of group {gid}.")
        member = ShareMember(member_id)
    _check_epoch(member, request.member_epoch)
    records: list[Record] = []

    # 1. The member and the group epoch.
    updated = replace(member, client_id=request.client_id, client_host=request.client_host,
                      rack_id=request.rack_id if request.rack_id is not None else member.rack_id,
                      subscribed_topic_names=(tuple(request.subscribed_topic_names)
                                              if request.subscribed_topic_names is not None
                                              else member.subscribed_topic_names))
    if member_id not in group.members or not updated.same_metadata(member):
        records.append(member_record(gid, updated))
    subscription_changed = set(updated.subscribed_topic_names) != set(member.subscribed_topic_names)
    members = {**group.members, member_id: updated}
    subscribed = _subscribed(members, catalog)
    metadata_hash = metadata_hash_of(subscribed)
    bump = subscription_changed or metadata_hash != group.metadata_hash or _initialized_unassigned(group, subscribed)
    group_epoch = group.group_epoch
    if bump:
        group_epoch += 1
        records.append(epoch_record(gid, group_epoch, metadata_hash))

    # 2. The target assignment.
    if group_epoch > group.assignment_epoch:
        targets = _targets(group, members, subscribed)
        for other_id, other_target in sorted(targets.items()):
            if other_target != dict(group.target_of(other_id)) or other_id not in group.target:
                records.append(target_member_record(gid, other_id, other_target))
        records.append(target_epoch_record(gid, group_epoch, now_ms))
        target: Assignment = targets.get(member_id, {})
        target_epoch = group_epoch
    else:
        target_epoch, target = group.assignment_epoch, group.target_of(member_id)

    # 3. The member's assignment: its target, at once.
    reconciled = updated
    if subscription_changed or updated.member_epoch != target_epoch:
        assigned = _filtered(target, updated.subscribed_topic_names, catalog)
        if updated.member_epoch != target_epoch:
            reconciled = replace(updated, member_epoch=target_epoch, previous_member_epoch=updated.member_epoch,
                                 assigned=assigned)
        else:
            reconciled = replace(updated, assigned=assigned)
    if (reconciled.member_epoch, reconciled.previous_member_epoch, dict(reconciled.assigned)) != \
            (member.member_epoch, member.previous_member_epoch, dict(member.assigned)) or member_id not in group.members:
        records.append(current_assignment_record(gid, reconciled))

    answer = ShareHeartbeatAnswer(0, None, member_id, reconciled.member_epoch, settings.heartbeat_interval_ms)
    if joining or request.subscribed_topic_names is not None or dict(reconciled.assigned) != dict(member.assigned):
        answer.assignment = {topic: tuple(sorted(parts)) for topic, parts in reconciled.assigned.items()}

    # 4. Share state for newly subscribed partitions.
    initialize = _to_initialize(group, subscribed, settings, now_ms)
    if initialize:
        records.append(_initializing_record(group, initialize, now_ms))
    plan = Plan(answer, records, member_id)
    if initialize:
        plan.initialize = Initialize(gid, group_epoch, {t: init.partitions for t, init in initialize.items()})
    return plan


def leave(group: ShareGroup, request: ShareHeartbeatRequest, catalog: TopicCatalog) -> Plan:
    """Epoch -1: the member goes (UNKNOWN_MEMBER_ID if it is none)."""
    member = group.members.get(request.member_id)
    if member is None:
        raise ShareHeartbeatError(int(E.unknown_member_id),
                                  f"Member {request.member_id} is not a member of group {group.group_id}.")
    answer = ShareHeartbeatAnswer(0, None, request.member_id, LEAVE_GROUP_MEMBER_EPOCH)
    return Plan(answer, fence(group, member, catalog))


def fence(group: ShareGroup, member: ShareMember, catalog: TopicCatalog) -> list[Record]:
    """The records that take a member out (it left, or its session expired): its three records
    go and the group epoch is bumped; the others' next heartbeat recomputes the assignment."""
    records = removal_records(group.group_id, member.member_id)
    others = {m: other for m, other in group.members.items() if m != member.member_id}
    records.append(epoch_record(group.group_id, group.group_epoch + 1, metadata_hash_of(_subscribed(others, catalog))))
    return records


def initialized(group: ShareGroup, partitions: Mapping[uuid.UUID, frozenset[int]], catalog: TopicCatalog,
                now_ms: int) -> Record:
    """The share coordinator initialized ``partitions``: they move from initializing to initialized."""
    done = dict(group.initialized)
    for topic, parts in partitions.items():
        before = done.get(topic)
        name = catalog.name_of(topic) or (before.name if before else "<UNKNOWN>")
        done[topic] = InitTopic(name, (before.partitions if before else frozenset()) | parts, now_ms)
    return state_metadata_record(group.group_id, _without(group.initializing, partitions), done, group.deleting)


def uninitialized(group: ShareGroup, partitions: Mapping[uuid.UUID, frozenset[int]]) -> Record | None:
    """Initializing ``partitions`` failed: they leave the initializing set (a later heartbeat asks again)."""
    if not group.initializing or not partitions:
        return None
    return state_metadata_record(group.group_id, _without(group.initializing, partitions), group.initialized,
                                 group.deleting)


def _without(topics: Mapping[uuid.UUID, InitTopic], partitions: Mapping[uuid.UUID, frozenset[int]]
             ) -> dict[uuid.UUID, InitTopic]:
    out = {}
    for topic, init in topics.items():
        left = init.partitions - partitions.get(topic, frozenset())
        if left:
            out[topic] = replace(init, partitions=left)
    return out


def _check_epoch(member: ShareMember, epoch: int) -> None:
    """Kafka's throwIfShareGroupMemberEpochIsInvalid: the previous epoch is accepted too (the
    answer that bumped it may have been lost)."""
    if epoch > member.member_epoch:
        raise ShareHeartbeatError(int(E.fenced_member_epoch), "The share group member has a greater member epoch "
                                  f"({epoch}) than the one known by the group coordinator ({member.member_epoch}). "
                                  "The member must abandon all its partitions and rejoin.")
    if epoch < member.member_epoch and epoch != member.previous_member_epoch:
        raise ShareHeartbeatError(int(E.fenced_member_epoch), "The share group member has a smaller member epoch "
                                  f"({epoch}) than the one known by the group coordinator ({member.member_epoch}), "
                                  f"and it does not match the previous member epoch ({member.previous_member_epoch}). "
                                  "The member must abandon all its partitions and rejoin.")


def _subscribed(members: Mapping[str, ShareMember], catalog: TopicCatalog) -> dict[str, tuple[uuid.UUID, int]]:
    """The subscribed topics that exist: name -> (topic id, partition count)."""
    out = {}
    for name in sorted({n for m in members.values() for n in m.subscribed_topic_names}):
        found = catalog.by_name(name)
        if found is not None:
            out[name] = found
    return out


def _initialized_unassigned(group: ShareGroup, subscribed: Mapping[str, tuple[uuid.UUID, int]]) -> bool:
    """Kafka's initializedAssignmentPending: a subscribed topic's initialized partitions differ
    from what the target assignment gives out, so the assignment must be computed again."""
    if not group.members or not group.initialized:
        return False
    counts = dict(subscribed.values())
    given: dict[uuid.UUID, set[int]] = {}
    for target in group.target.values():
        for topic, parts in target.items():
            given.setdefault(topic, set()).update(parts)
    return any(topic in counts and given.get(topic, set()) != {p for p in init.partitions if p < counts[topic]}
               for topic, init in group.initialized.items())


def _targets(group: ShareGroup, members: Mapping[str, ShareMember], subscribed: Mapping[str, tuple[uuid.UUID, int]]
             ) -> dict[str, dict[uuid.UUID, frozenset[int]]]:
    subscriptions = {m: frozenset(subscribed[n][0] for n in member.subscribed_topic_names if n in subscribed)
                     for m, member in members.items()}
    counts = {topic_id: count for topic_id, count in subscribed.values()}
    assignable = {topic: frozenset(p for p in init.partitions if p < counts[topic])
                  for topic, init in group.initialized.items() if topic in counts}
    return assignor.assign(subscriptions, assignable, group.target)


def _filtered(target: Assignment, names: tuple[str, ...], catalog: TopicCatalog) -> dict[uuid.UUID, frozenset[int]]:
    wanted = set(names)
    return {topic: parts for topic, parts in target.items() if parts and catalog.name_of(topic) in wanted}


def _to_initialize(group: ShareGroup, subscribed: Mapping[str, tuple[uuid.UUID, int]], settings: ShareSettings,
                   now_ms: int) -> dict[uuid.UUID, InitTopic]:
    """Kafka's subscribedTopicsChangeMap: subscribed partitions neither initialized nor being
    initialized (an initialization older than the retry interval is asked for again)."""
    out = {}
    for name, (topic_id, count) in subscribed.items():
        have: set[int] = set(group.initialized[topic_id].partitions) if topic_id in group.initialized else set()
        pending = group.initializing.get(topic_id)
        if pending is not None and now_ms - pending.timestamp_ms < settings.initialize_retry_interval_ms:
            have |= pending.partitions
        missing = frozenset(range(count)) - have
        if missing:
            out[topic_id] = InitTopic(name, missing, now_ms)
    return out


def _initializing_record(group: ShareGroup, change: Mapping[uuid.UUID, InitTopic], now_ms: int) -> Record:
    """Kafka's addInitializingTopicsRecords: the change joins the initializing topics; a topic
    initializing again is no longer being deleted."""
    initializing = dict(group.initializing)
    for topic, init in change.items():
        before = initializing.get(topic)
        initializing[topic] = InitTopic(init.name, init.partitions | (before.partitions if before else frozenset()),
                                        now_ms)
    deleting = {t: n for t, n in group.deleting.items() if t not in change}
    return state_metadata_record(group.group_id, initializing, group.initialized, deleting)
