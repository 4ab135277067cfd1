"""Classic members in a consumer group, and groups that change protocol while they have
members (KIP-848's online migration, ``group.consumer.migration.policy``).

A consumer whose client speaks only the classic protocol (JoinGroup, SyncGroup, Heartbeat,
LeaveGroup) can be a member of a consumer group, as in Kafka 4.x: the coordinator assigns for
it like for any member, reading its subscription and owned partitions from its JoinGroup's
embedded consumer protocol and answering its SyncGroup with its current assignment. Its
generation is its member epoch; a Heartbeat answers REBALANCE_IN_PROGRESS when it must rejoin
to move on (a newer group epoch, partitions to revoke, or partitions it waits for now free).
JoinGroup answers at once: no member waits for another.

Upgrade: the first consumer-protocol member of a classic group that has members converts it:
each classic member becomes a consumer group member holding its classic assignment at the
generation's epoch, so nothing moves until the new target says so. Downgrade: when the last
consumer-protocol member leaves and classic members remain, the group becomes classic again
(its members rejoin in a normal classic rebalance). Both write the tombstones of the old kind
and the records of the new one in one batch. Like heartbeat.py, these functions only decide.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, replace

from kio.schema.errors import ErrorCode

from coordination.groups import offsets_schema as schema
from coordination.groups.consumer import records as rec
from coordination.groups.consumer.assignment_spec import TopicKey
from coordination.groups.consumer.embedded_protocol import (
    EmbeddedProtocolError,
    encode_assignment,
    parse_subscription,
    parse_version,
)
from coordination.groups.consumer.group import (
    ConsumerGroup,
    ConsumerMember,
    Record,
    TopicCatalog,
    current_assignment_record,
    deletion_records,
    encode,
    epoch_record,
    member_record,
    target_epoch_record,
    target_member_record,
)
from coordination.groups.consumer.heartbeat import (
    ConsumerSettings,
    HeartbeatAnswer,
    HeartbeatError,
    Plan,
    advance,
    check_size,
    metadata_hash_of,
    replacement_records,
    subscription_metadata,
)
from coordination.groups.consumer.reconciliation import CurrentAssignment, MemberState
from coordination.groups.group import CONSUMER_PROTOCOL_TYPE, Group, parse_assignment_partitions

E = ErrorCode
MIGRATION_POLICIES = ("disabled", "downgrade", "upgrade", "bidirectional")


def upgrade_enabled(settings: ConsumerSettings) -> bool:
    return settings.migration_policy in ("upgrade", "bidirectional")


def downgrade_enabled(settings: ConsumerSettings) -> bool:
    return settings.migration_policy in ("downgrade", "bidirectional")


@dataclass(frozen=True)
class ClassicJoin:
    group_id: str
    member_id: str
    instance_id: str | None
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    session_timeout_ms: int
    rebalance_timeout_ms: int
    client_id: str
    client_host: str
    require_known_member_id: bool


@dataclass
class ClassicJoinAnswer:
    error_code: int
    member_id: str = ""
    generation: int = -1
    protocol_name: str | None = None


def _error(code: int, message: str) -> HeartbeatError:
    return HeartbeatError(int(code), message)


def classic_join(group: ConsumerGroup, join: ClassicJoin, settings: ConsumerSettings, catalog: TopicCatalog,
                 now_ms: int) -> tuple[ClassicJoinAnswer, Plan]:
    """A JoinGroup to a consumer group. Raises HeartbeatError with the JoinGroup error."""
    if join.protocol_type != CONSUMER_PROTOCOL_TYPE or not join.protocols:
        raise _error(E.inconsistent_group_protocol, "a consumer group takes the consumer protocol type only")
    try:
        subscription = parse_subscription(join.protocols[0][1])
    except EmbeddedProtocolError as exc:
        raise _error(E.inconsistent_group_protocol, str(exc)) from None
    unknown = not join.member_id
    member_id = join.member_id or f"{join.client_id or 'member'}-{uuid.uuid4()}"
    if unknown and join.instance_id is None and join.require_known_member_id:
        check_size(group, settings)
        return ClassicJoinAnswer(int(E.member_id_required), member_id), Plan(HeartbeatAnswer())
    records: list[Record] = []
    replaced: ConsumerMember | None = None
    if join.instance_id is None:
        member = group.members.get(member_id)
        if member is None:  # new, or back with the id MEMBER_ID_REQUIRED gave it (Kafka keeps no list of those)
            check_size(group, settings)
            member = ConsumerMember(member_id)
    else:
        static = group.static_member(join.instance_id)
        if static is None:
            check_size(group, settings)
            member = ConsumerMember(member_id)
        elif static.member_id == member_id:
            member = static
        elif unknown:
            held = static.assignment
            member = replace(static, member_id=member_id,
                             assignment=CurrentAssignment(0, 0, held.state, held.assigned, held.pending_revocation))
            replaced = static
            records.extend(replacement_records(group, static, member))
        else:
            raise _error(E.fenced_instance_id, f"Static member {member_id} with instance id {join.instance_id} "
                                               f"was fenced by member {static.member_id}.")
    updated = replace(member, instance_id=join.instance_id or member.instance_id,
                      rack_id=subscription.rack_id or member.rack_id,
                      rebalance_timeout_ms=join.rebalance_timeout_ms, server_assignor=None,
                      subscribed_topic_names=tuple(sorted(set(subscription.topics))), subscribed_topic_regex=None,
                      client_id=join.client_id, client_host=join.client_host,
                      classic=rec.ClassicMemberMetadata(join.session_timeout_ms, tuple(
                          rec.ClassicProtocol(name, metadata) for name, metadata in join.protocols)))
    owned: dict[TopicKey, tuple[int, ...]] = {}
    for topic, partition in subscription.owned or ():
        found = catalog.by_name(topic)
        if found is not None:
            owned[found[0]] = tuple(sorted({*owned.get(found[0], ()), partition}))
    after = advance(group, member, updated, replaced, owned, settings, catalog, now_ms, records)
    answer = ClassicJoinAnswer(0, member_id, after.member_epoch, join.protocols[0][0])
    return answer, Plan(HeartbeatAnswer(), records, member_id, None, catalog.version())


def classic_member(group: ConsumerGroup, member_id: str, instance_id: str | None) -> ConsumerMember:
    """Kafka's validateConsumerGroupMember, for a member that must speak the classic protocol."""
    if instance_id is None:
        member = group.members.get(member_id)
        if member is None:
            raise _error(E.unknown_member_id, f"Member {member_id} is not a member of group {group.group_id}.")
    else:
        member = group.static_member(instance_id)
        if member is None:
            raise _error(E.unknown_member_id, f"Instance id {instance_id} is unknown.")
        if member_id and member.member_id != member_id:
            raise _error(E.fenced_instance_id, f"Static member {member_id} was fenced by member {member.member_id}.")
    if not member.uses_classic_protocol:
        raise _error(E.unknown_member_id, f"Member {member.member_id} does not use the classic protocol.")
    return member


def needs_rejoin(group: ConsumerGroup, member: ConsumerMember) -> bool:
    """A newer group epoch, partitions to revoke, or partitions it waits for that are now free."""
    assignment = member.assignment
    if assignment.member_epoch < group.group_epoch or assignment.state is MemberState.UNREVOKED_PARTITIONS:
        return True
    if assignment.state is MemberState.UNRELEASED_PARTITIONS:
        target = group.target_of(member.member_id)
        waiting = [(topic, p) for topic, parts in target.items() for p in parts
                   if p not in assignment.assigned.get(topic, {})]
        return not any(group.owners.holder(topic, p) not in (None, member.member_id) for topic, p in waiting)
    return False


def classic_sync(group: ConsumerGroup, member_id: str, instance_id: str | None, generation: int,
                 protocol_type: str | None, protocol_name: str | None, catalog: TopicCatalog) -> bytes:
    """A SyncGroup to a consumer group: the member's current assignment, in the embedded
    protocol's bytes. Raises HeartbeatError with the SyncGroup error."""
    member = classic_member(group, member_id, instance_id)
    if generation != member.member_epoch:
        raise _error(E.illegal_generation, f"generation {generation} is not the member's epoch {member.member_epoch}")
    assert member.classic is not None
    protocols = member.classic.supported_protocols
    if (protocol_type is not None and protocol_type != CONSUMER_PROTOCOL_TYPE) or \
            (protocol_name is not None and protocol_name != protocols[0].name):
        raise _error(E.inconsistent_group_protocol, "the protocol does not match the member's")
    if member.member_epoch < group.group_epoch:
        raise _error(E.rebalance_in_progress, "the group moved to a newer epoch: rejoin")
    return encode_assignment(_assigned_by_name(member, catalog), _version_of(protocols[0].metadata))


def _assigned_by_name(member: ConsumerMember, catalog: TopicCatalog) -> dict[str, list[int]]:
    """The member's assigned partitions keyed by topic name (the embedded protocol's keys)."""
    by_name: dict[str, list[int]] = {}
    for topic, parts in member.assignment.assigned.items():
        name = catalog.name_of(topic) if isinstance(topic, uuid.UUID) else topic
        if name is not None:
            by_name[name] = sorted(parts)
    return by_name


def _version_of(metadata: bytes) -> int:
    """The embedded protocol version to answer a member in: its subscription's (0 if unreadable)."""
    try:
        return parse_version(metadata)
    except EmbeddedProtocolError:
        return 0


def classic_heartbeat(group: ConsumerGroup, member_id: str, instance_id: str | None, generation: int) -> int:
    """A Heartbeat to a consumer group: 0, or REBALANCE_IN_PROGRESS when the member must rejoin."""
    member = classic_member(group, member_id, instance_id)
    if generation != member.member_epoch:
        raise _error(E.illegal_generation, f"generation {generation} is not the member's epoch {member.member_epoch}")
    return int(E.rebalance_in_progress) if needs_rejoin(group, member) else 0


# --- changing kind ------------------------------------------------------------------------------


def upgrade_records(classic: Group, catalog: TopicCatalog, now_ms: int) -> list[Record]:
    """The consumer group records of a classic group with members: each member holds its classic
    assignment at the generation's epoch, which is also the group's and the target's."""
    gid, generation = classic.group_id, classic.generation
    records: list[Record] = []
    members: list[ConsumerMember] = []
    for old in classic.members.values():
        protocol = classic.protocol_name or (old.protocols[0][0] if old.protocols else "")
        metadata = dict(old.protocols).get(protocol, old.protocols[0][1] if old.protocols else b"")
        try:
            subscription = parse_subscription(metadata)
            held = parse_assignment_partitions(old.assignment) if old.assignment else []
        except (EmbeddedProtocolError, ValueError) as exc:
            raise _error(E.group_id_not_found, f"Cannot upgrade the classic group {gid} to a consumer group: "
                                               f"the embedded consumer protocol is malformed ({exc}).") from None
        assigned: dict[TopicKey, dict[int, int]] = {}
        for topic, partition in held:
            found = catalog.by_name(topic)
            if found is not None:
                assigned.setdefault(found[0], {})[partition] = generation
        member = ConsumerMember(
            old.member_id, old.group_instance_id, subscription.rack_id, old.client_id, old.client_host,
            tuple(sorted(set(subscription.topics))), None, old.rebalance_timeout_ms, None,
            CurrentAssignment(generation, generation, MemberState.STABLE, assigned),
            rec.ClassicMemberMetadata(old.session_timeout_ms,
                                      tuple(rec.ClassicProtocol(name, data) for name, data in old.protocols)))
        members.append(member)
        records.append(member_record(gid, member))
        records.append(target_member_record(gid, member.member_id,
                                            {topic: frozenset(parts) for topic, parts in assigned.items()}))
        records.append(current_assignment_record(gid, member.member_id, member.assignment))
    subscribed = subscription_metadata(members, {}, catalog)
    records.append(epoch_record(gid, generation, metadata_hash_of(subscribed)))
    records.append(target_epoch_record(gid, generation, now_ms))
    return records


def downgrade_value(group: ConsumerGroup, leaving: str, catalog: TopicCatalog, now_ms: int) -> schema.GroupValue:
    """The classic group that the consumer group's remaining (classic) members form: its
    generation is the group epoch, each member keeps its protocols and current assignment."""
    members = [m for mid, m in group.members.items() if mid != leaving]
    first = members[0].classic
    assert first is not None
    protocol = first.supported_protocols[0].name
    values = []
    for member in members:
        assert member.classic is not None
        metadata = {p.name: p.metadata for p in member.classic.supported_protocols}
        subscription = metadata.get(protocol, b"")
        assignment = encode_assignment(_assigned_by_name(member, catalog), _version_of(subscription))
        values.append(schema.MemberValue(member.member_id, member.instance_id, member.client_id, member.client_host,
                                         max(member.rebalance_timeout_ms, 0), member.classic.session_timeout_ms,
                                         subscription, assignment))
    return schema.GroupValue(CONSUMER_PROTOCOL_TYPE, group.group_epoch, protocol, members[0].member_id, now_ms,
                             tuple(values))


def downgrade_records(group: ConsumerGroup, value: schema.GroupValue) -> list[tuple[bytes, bytes | None]]:
    entries = encode(deletion_records(group))
    entries.append((schema.encode_key(schema.GroupKey(group.group_id)), schema.encode_group_value(value)))
    return entries


def can_downgrade(group: ConsumerGroup, leaving: str, settings: ConsumerSettings) -> bool:
    """Kafka's validateOnlineDowngradeWithFencedMember: every other member speaks classic, and
    there is one at least."""
    rest = [m for mid, m in group.members.items() if mid != leaving]
    return bool(rest) and all(m.uses_classic_protocol for m in rest) and downgrade_enabled(settings)
