"""ConsumerGroupHeartbeat: what one heartbeat of a ``consumer`` group member (KIP-848) changes.

Kafka's GroupMetadataManager.consumerGroupHeartbeat, in three steps, as pure functions of the
group's state: nothing here mutates a group. Each returns the records to append and the answer
to send once they are in; the coordinator appends, then folds the records in with
``ConsumerGroup.apply`` (group.py), exactly as a coordinator that loads the log later does.

1. The member: found (its epoch checked: FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID, the static
   member rules) or created, and updated with what the heartbeat changed. A changed
   subscription (topic names, a regular expression, or the topics either now stands for)
   bumps the group epoch.
2. The target assignment: when the group epoch is ahead of it, the group's assignor
   (uniform or range, by the members' votes) computes a new one, sticky to the last.
3. Reconciliation (reconciliation.py): the member moves one step towards its target,
   revoking before it is given what others still hold.

Leaving (epoch -1), a static member's temporary leave (-2), and the fencing of a member
whose session or revocation deadline passed are here too.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from kio.schema.errors import ErrorCode

from coordination.groups.consumer import topic_regex
from coordination.groups.consumer.assignment_spec import GroupSpec, MemberSubscription, TopicKey, TopicMetadata
from coordination.groups.consumer.assignors import preferred_assignor
from coordination.groups.consumer.group import (
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ConsumerGroup,
    ConsumerMember,
    Record,
    Target,
    TopicCatalog,
    current_assignment_record,
    epoch_record,
    member_record,
    regex_record,
    regex_tombstone,
    removal_records,
    target_epoch_record,
    target_member_record,
    topics_of,
)
from coordination.groups.consumer.reconciliation import (
    CurrentAssignment,
    FencedMemberEpoch,
    MemberState,
    assigned_partitions_changed,
    reconcile,
    validate_member_epoch,
)

E = ErrorCode
OwnedPartitions = Mapping[TopicKey, tuple[int, ...]]


@dataclass(frozen=True)
class ConsumerSettings:
    """The broker's group.consumer.* settings."""

    session_timeout_ms: int = 45_000
    heartbeat_interval_ms: int = 5_000
    max_size: int = 2**31 - 1
    assignors: tuple[str, ...] = ("uniform", "range")
    migration_policy: str = "bidirectional"  # group.consumer.migration.policy: which kind changes are made


@dataclass(frozen=True)
class HeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: OwnedPartitions | None = None  # the heartbeat's TopicPartitions; None: not sent
    client_id: str = ""
    client_host: str = ""
    version: int = 1


@dataclass
class HeartbeatAnswer:
    error_code: int = 0
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: dict[TopicKey, tuple[int, ...]] | None = None  # None: unchanged, not sent


@dataclass
class Plan:
    """What a heartbeat (or a deadline) does to a group: records to append, then the answer,
    and the member's revocation deadline to keep (epoch, or None to clear it)."""

    answer: HeartbeatAnswer
    records: list[Record] = field(default_factory=list)
    member_id: str | None = None  # the member whose session the heartbeat renews
    revoking_at_epoch: int | None = None
    catalog_version: int | None = None  # the topics' version the regular expressions were resolved at


class HeartbeatError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


CONSUMER_GENERATED_MEMBER_ID_VERSION = 1  # from v1 the client names itself (KIP-1082)


def validate(request: HeartbeatRequest, settings: ConsumerSettings) -> None:
    """Kafka's throwIfConsumerGroupHeartbeatRequestIsInvalid."""
    def invalid(message: str) -> HeartbeatError:
        return HeartbeatError(int(E.invalid_request), message)

    if not request.group_id:
        raise invalid("GroupId can't be empty.")
    if request.instance_id == "":
        raise invalid("InstanceId can't be empty.")
    if request.rack_id == "":
        raise invalid("RackId can't be empty.")
    if request.version >= CONSUMER_GENERATED_MEMBER_ID_VERSION and not request.member_id:
        raise invalid("MemberId can't be empty.")
    epoch = request.member_epoch
    if epoch > 0 or epoch == LEAVE_GROUP_MEMBER_EPOCH:
        if not request.member_id:
            raise invalid("MemberId can't be empty.")
    elif epoch == 0:
        if request.rebalance_timeout_ms == -1:
            raise invalid("RebalanceTimeoutMs must be provided in first request.")
        if request.owned is None or len(request.owned) > 0:
            raise invalid("TopicPartitions must be empty when (re-)joining.")
        if request.subscribed_topic_names is None and request.subscribed_topic_regex is None:
            raise invalid("Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.")
    elif epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        if not request.member_id:
            raise invalid("MemberId can't be empty.")
        if request.instance_id is None:
            raise invalid("InstanceId can't be null.")
    else:
        raise invalid("MemberEpoch is invalid.")
    if request.subscribed_topic_regex:
        try:
            topic_regex.compile_topic_regex(request.subscribed_topic_regex)
        except topic_regex.InvalidRegularExpression as exc:
            raise HeartbeatError(int(E.invalid_regular_expression), str(exc)) from None
    if request.server_assignor is not None and request.server_assignor not in settings.assignors:
        raise HeartbeatError(int(E.unsupported_assignor),
                             f"ServerAssignor {request.server_assignor} is not supported. "
                             f"Supported assignors: {', '.join(settings.assignors)}.")


# --- joining and heartbeating -------------------------------------------------------------------


def heartbeat(group: ConsumerGroup, request: HeartbeatRequest, settings: ConsumerSettings, catalog: TopicCatalog,
              now_ms: int) -> Plan:
    """A heartbeat of epoch 0 or more (the caller sends leaves to ``leave``). Raises
    HeartbeatError with Kafka's code for a request it refuses; ``group`` is left as it was."""
    records: list[Record] = []
    member, replaced = _member_for(group, request, settings)
    if replaced is not None:
        records.extend(replacement_records(group, replaced, member))
    updated = _updated(member, request)
    after = advance(group, member, updated, replaced, request.owned, settings, catalog, now_ms, records)
    answer = HeartbeatAnswer(member_id=updated.member_id, member_epoch=after.member_epoch,
                             heartbeat_interval_ms=settings.heartbeat_interval_ms)
    full_request = request.member_epoch == 0 or (request.rebalance_timeout_ms != -1
                                                  and request.subscribed_topic_names is not None
                                                  and request.owned is not None)
    if full_request or assigned_partitions_changed(member.assignment, after):
        answer.assignment = {topic: tuple(sorted(parts)) for topic, parts in after.assigned.items()}
    revoking = after.member_epoch if after.state is MemberState.UNREVOKED_PARTITIONS else None
    return Plan(answer, records, updated.member_id, revoking, catalog.version())


def replacement_records(group: ConsumerGroup, replaced: ConsumerMember, member: ConsumerMember) -> list[Record]:
    """A static member back under a new member id takes the old one's place (Kafka's replaceMember)."""
    gid = group.group_id
    records = removal_records(gid, replaced.member_id)
    records.append(member_record(gid, member))
    if group.target_of(replaced.member_id):
        records.append(target_member_record(gid, member.member_id, group.target_of(replaced.member_id)))
    records.append(current_assignment_record(gid, member.member_id, member.assignment))
    return records


def advance(group: ConsumerGroup, member: ConsumerMember, updated: ConsumerMember, replaced: ConsumerMember | None,
            owned: OwnedPartitions | None, settings: ConsumerSettings, catalog: TopicCatalog, now_ms: int,
            records: list[Record]) -> CurrentAssignment:
    """Steps 1 to 3 for a member whose request made ``member`` into ``updated`` (the records go
    to ``records``); its assignment after the step. Shared by both protocols' members."""
    gid = group.group_id

    # 1. The member and the group's subscriptions.
    bump = False
    is_new = member.member_id not in group.members and replaced is None
    if updated != member or is_new:
        records.append(member_record(gid, updated))
        bump = (updated.subscribed_topic_names != member.subscribed_topic_names
                or updated.subscribed_topic_regex != member.subscribed_topic_regex or is_new)
    members = {mid: m for mid, m in group.members.items() if replaced is None or mid != replaced.member_id}
    members[updated.member_id] = updated
    resolved, regex_records = _resolve_regexes(group, members.values(), catalog, now_ms)
    records.extend(regex_records)
    bump = bump or bool(regex_records)
    subscribed = subscription_metadata(members.values(), resolved, catalog)
    metadata_hash = metadata_hash_of(subscribed)
    group_epoch = group.group_epoch
    if bump or metadata_hash != group.metadata_hash:
        group_epoch += 1
        records.append(epoch_record(gid, group_epoch, metadata_hash))

    # 2. The target assignment.
    targets = {mid: group.target_of(mid) for mid in members}
    if replaced is not None:
        targets[updated.member_id] = group.target_of(replaced.member_id)
    target_epoch = group.assignment_epoch
    if group_epoch > group.assignment_epoch:
        new_targets = compute_targets(members, targets, resolved, subscribed, settings)
        for mid, target in new_targets.items():
            if target != targets.get(mid, {}):
                records.append(target_member_record(gid, mid, target))
        targets = new_targets
        target_epoch = group_epoch
        records.append(target_epoch_record(gid, target_epoch, now_ms))

    # 3. Reconciliation.
    others = {updated.member_id} | ({replaced.member_id} if replaced is not None else set())
    topic_ids = {subscribed[name][0] for name in topics_of(updated, resolved) if name in subscribed}
    before = updated.assignment
    after = before
    if not before.is_reconciled_to(target_epoch):
        after = reconcile(before, target_epoch, targets.get(updated.member_id, {}),
                          owned, lambda topic, p: group.owners.holder(topic, p) not in (None, *others),
                          subscribed_topics=topic_ids)
        if after != before:
            records.append(current_assignment_record(gid, updated.member_id, after))
    return after


def _member_for(group: ConsumerGroup, request: HeartbeatRequest,
                settings: ConsumerSettings) -> tuple[ConsumerMember, ConsumerMember | None]:
    """The member the heartbeat is from, and the static member it replaces (or None)."""
    joining = request.member_epoch == 0
    member_id = request.member_id or str(uuid.uuid4())
    if request.instance_id is None:
        member = group.members.get(member_id)
        if member is None:
            if not joining:
                raise HeartbeatError(int(E.unknown_member_id),
                                     f"Member {member_id} is not a member of group {group.group_id}.")
            check_size(group, settings)
            return ConsumerMember(member_id), None
        if joining:
            # The member rejoins having given up everything it held (its client was fenced, or
            # restarted with the same id): it starts again from epoch 0.
            return replace(member, assignment=CurrentAssignment()), None
        _check_epoch(member, request)
        return member, None
    static = group.static_member(request.instance_id)
    if joining:
        if static is None:
            existing = group.members.get(member_id)
            if existing is None:
                check_size(group, settings)
                return ConsumerMember(member_id), None
            return replace(existing, assignment=CurrentAssignment()), None
        if static.member_id == member_id:
            return replace(static, assignment=CurrentAssignment()), None
        if static.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            raise HeartbeatError(int(E.unreleased_instance_id),
                                 f"Static member {member_id} with instance id {request.instance_id} cannot join the "
                                 f"group because the instance id is owned by {static.member_id} member.")
        # The instance comes back under a new member id: it takes the old member's place and
        # what it held, from epoch 0 (Kafka's replaceMember).
        held = static.assignment
        taken = CurrentAssignment(0, 0, held.state, held.assigned, held.pending_revocation)
        return replace(static, member_id=member_id, assignment=taken), static
    if static is None:
        raise HeartbeatError(int(E.unknown_member_id), f"Instance id {request.instance_id} is unknown.")
    if static.member_id != member_id:
        raise HeartbeatError(int(E.fenced_instance_id),
                             f"Static member {member_id} with instance id {request.instance_id} was fenced by "
                             f"member {static.member_id}.")
    _check_epoch(static, request)
    return static, None


def check_size(group: ConsumerGroup, settings: ConsumerSettings) -> None:
    if len(group.members) >= settings.max_size:
        raise HeartbeatError(int(E.group_max_size_reached),
                             f"The consumer group has reached its maximum capacity of {settings.max_size} members.")


def _check_epoch(member: ConsumerMember, request: HeartbeatRequest) -> None:
    owned = None if request.owned is None else {topic: parts for topic, parts in request.owned.items()}
    try:
        validate_member_epoch(member.assignment, request.member_epoch, owned)
    except FencedMemberEpoch as exc:
        raise HeartbeatError(int(E.fenced_member_epoch), str(exc)) from None


def _updated(member: ConsumerMember, request: HeartbeatRequest) -> ConsumerMember:
    """The member with what the heartbeat sent (a null field keeps what the member had)."""
    changes: dict[str, object] = {"client_id": request.client_id, "client_host": request.client_host}
    if request.instance_id is not None:
        changes["instance_id"] = request.instance_id
    if request.rack_id is not None:
        changes["rack_id"] = request.rack_id
    if request.rebalance_timeout_ms != -1:
        changes["rebalance_timeout_ms"] = request.rebalance_timeout_ms
    if request.server_assignor is not None:
        changes["server_assignor"] = request.server_assignor
    if request.subscribed_topic_names is not None:
        changes["subscribed_topic_names"] = tuple(sorted(set(request.subscribed_topic_names)))
    if request.subscribed_topic_regex is not None:
        # An empty pattern clears the regular expression (a client that moved to names).
        changes["subscribed_topic_regex"] = request.subscribed_topic_regex or None
    return replace(member, **changes)  # type: ignore[arg-type]


# --- subscriptions ------------------------------------------------------------------------------


def _resolve_regexes(group: ConsumerGroup, members: Iterable[ConsumerMember], catalog: TopicCatalog,
                     now_ms: int) -> tuple[dict[str, frozenset[str]], list[Record]]:
    """The topics each regular expression in use stands for now, and the records of those
    that changed (a regular expression no member uses any more is tombstoned)."""
    in_use = {m.subscribed_topic_regex for m in members if m.subscribed_topic_regex is not None}
    version = catalog.version()
    names = list(catalog.names())
    resolved: dict[str, frozenset[str]] = {}
    records: list[Record] = []
    for regex in sorted(in_use):
        known = group.resolved.get(regex)
        topics = known if known is not None and group.catalog_version == version else \
            topic_regex.matching_topics(regex, names)
        resolved[regex] = topics
        if topics != known:
            records.append(regex_record(group.group_id, regex, topics, version, now_ms))
    for regex in sorted(set(group.resolved) - in_use):
        records.append(regex_tombstone(group.group_id, regex))
    return resolved, records


def subscription_metadata(members: Iterable[ConsumerMember], resolved: Mapping[str, frozenset[str]],
                           catalog: TopicCatalog) -> dict[str, tuple[uuid.UUID, int]]:
    """name -> (topic id, partitions) of every existing topic some member subscribes to."""
    names: set[str] = set()
    for member in members:
        names |= topics_of(member, resolved)
    out = {}
    for name in sorted(names):
        found = catalog.by_name(name)
        if found is not None:
            out[name] = found
    return out


def metadata_hash_of(subscribed: Mapping[str, tuple[uuid.UUID, int]]) -> int:
    """A fingerprint of the subscribed topics (names, ids, partition counts), kept in the group
    epoch record: a coordinator that loads the group compares it with the topics it sees and
    bumps the epoch only when they changed meanwhile. Never 0, the value of "not written"."""
    digest = hashlib.blake2b(digest_size=8)
    for name, (topic_id, partitions) in sorted(subscribed.items()):
        digest.update(f"{name}\0{topic_id}\0{partitions}\n".encode())
    return int.from_bytes(digest.digest(), "big", signed=True) or 1


def compute_targets(members: Mapping[str, ConsumerMember], current: Mapping[str, Target],
                    resolved: Mapping[str, frozenset[str]], subscribed: Mapping[str, tuple[uuid.UUID, int]],
                    settings: ConsumerSettings) -> dict[str, Target]:
    """The next target assignment of every member, by the group's assignor, sticky to ``current``."""
    spec = GroupSpec({
        mid: MemberSubscription(
            frozenset(subscribed[name][0] for name in topics_of(m, resolved) if name in subscribed),
            {topic: frozenset(parts) for topic, parts in current.get(mid, {}).items()}, m.rack_id, m.instance_id)
        for mid, m in members.items()})
    topics: dict[TopicKey, TopicMetadata] = {topic_id: TopicMetadata(partitions) for topic_id, partitions in subscribed.values()}
    assignor = preferred_assignor((m.server_assignor for m in members.values()), settings.assignors)
    assigned = assignor.assign(spec, topics) if members else {}
    return {mid: {topic: frozenset(parts) for topic, parts in assigned.get(mid, {}).items() if parts}
            for mid in members}


def assignor_name(group: ConsumerGroup, settings: ConsumerSettings) -> str:
    return preferred_assignor(group.assignor_votes(), settings.assignors).name


# --- leaving and fencing ------------------------------------------------------------------------


def leave(group: ConsumerGroup, request: HeartbeatRequest, catalog: TopicCatalog) -> Plan:
    """Epoch -1 (leave for good) or -2 (a static member away for a while)."""
    gid = group.group_id
    answer = HeartbeatAnswer(member_id=request.member_id, member_epoch=request.member_epoch)
    if request.instance_id is None:
        member = group.members.get(request.member_id)
        if member is None:
            raise HeartbeatError(int(E.unknown_member_id),
                                 f"Member {request.member_id} is not a member of group {gid}.")
        return fence(group, member, catalog, answer)
    static = group.static_member(request.instance_id)
    if static is None:
        raise HeartbeatError(int(E.unknown_member_id), f"Instance id {request.instance_id} is unknown.")
    if static.member_id != request.member_id:
        raise HeartbeatError(int(E.fenced_instance_id),
                             f"Static member {request.member_id} with instance id {request.instance_id} was fenced "
                             f"by member {static.member_id}.")
    if request.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        # It keeps its place and its partitions for a session; its pending revocations are
        # done (it released everything when it stopped).
        held = static.assignment
        away = CurrentAssignment(LEAVE_GROUP_STATIC_MEMBER_EPOCH, held.previous_member_epoch, held.state, held.assigned, {})
        return Plan(answer, [current_assignment_record(gid, static.member_id, away)])
    return fence(group, static, catalog, answer)


def fence(group: ConsumerGroup, member: ConsumerMember, catalog: TopicCatalog,
          answer: HeartbeatAnswer | None = None) -> Plan:
    """The member is out (it left, or its session or revocation deadline passed): its records
    go and the group epoch moves on, so the next heartbeat computes a target without it."""
    gid = group.group_id
    records = removal_records(gid, member.member_id)
    rest = [m for mid, m in group.members.items() if mid != member.member_id]
    subscribed = subscription_metadata(rest, group.resolved, catalog)
    records.append(epoch_record(gid, group.group_epoch + 1, metadata_hash_of(subscribed)))
    return Plan(answer or HeartbeatAnswer(), records)
