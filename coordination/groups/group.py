"""The model of one classic group: its members, generation, protocol and offsets.

Owned by the coordinator's event loop (single-threaded): nothing here locks. The
coordinator (coordinator.py) drives the state machine; this module holds data and the
pure decisions about it (protocol selection, who has rejoined, subscribed topics).

Time is ``time.monotonic()`` seconds for deadlines and wall-clock milliseconds for
what is persisted (commit timestamps, state timestamps).
"""

from __future__ import annotations

import asyncio
import struct
import time
from dataclasses import dataclass, field

from coordination.groups.answers import JoinResult, SyncResult
from coordination.groups.consumer.group import ConsumerGroup
from coordination.groups.offsets_schema import OffsetValue
from coordination.groups.share.group import ShareGroup
from coordination.groups.state import GroupState, check_transition

CONSUMER_PROTOCOL_TYPE = "consumer"


@dataclass
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]  # (name, metadata), in the member's order of preference
    assignment: bytes = b""
    # A JoinGroup / SyncGroup of this member waiting for the rebalance to reach it.
    join_waiter: asyncio.Future[JoinResult] | None = None
    sync_waiter: asyncio.Future[SyncResult] | None = None
    session_deadline: float = 0.0  # monotonic seconds
    is_new: bool = True  # joined during the current rebalance, never got a join answer

    def touch(self, now: float | None = None) -> None:
        """A heartbeat (or any request of the member) keeps it alive one session longer."""
        self.session_deadline = (time.monotonic() if now is None else now) + self.session_timeout_ms / 1000

    @property
    def awaiting_join(self) -> bool:
        return self.join_waiter is not None

    def metadata_for(self, protocol: str) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        raise KeyError(protocol)

    def same_protocols(self, protocols: list[tuple[str, bytes]]) -> bool:
        return self.protocols == protocols


@dataclass
class Group:
    group_id: str
    state: GroupState = GroupState.EMPTY
    generation: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # group.instance.id -> member id
    pending_members: dict[str, float] = field(default_factory=dict)  # member id -> deadline (MEMBER_ID_REQUIRED)
    offsets: dict[tuple[str, int], OffsetValue] = field(default_factory=dict)
    # Each committed offset's place in the log (see txn_offsets.py): a transaction that
    # commits later replaces only offsets whose records came before its own.
    offset_order: dict[tuple[str, int], int] = field(default_factory=dict)
    state_timestamp: int = field(default_factory=lambda: int(time.time() * 1000))
    # PreparingRebalance: when the join phase ends at the latest; the initial delay of a
    # group that was empty (group.initial.rebalance.delay.ms) ends no earlier than join_not_before.
    rebalance_deadline: float = 0.0
    join_not_before: float = 0.0
    # CompletingRebalance: when a missing leader assignment gives up on this generation.
    sync_deadline: float = 0.0
    # A consumer group (KIP-848): its consumer-protocol state (consumer/service.py); None for a
    # classic group. Its classic fields stay empty, and ``state`` is Empty or Stable.
    modern: ConsumerGroup | None = None
    # A share group (KIP-932): its share-protocol state (share/service.py); None for the other
    # kinds. Like a consumer group's, its classic fields stay empty and ``state`` is Empty or Stable.
    share: ShareGroup | None = None

    # ------------------------------------------------------------------ state
    def transition(self, target: GroupState) -> None:
        check_transition(self.state, target)
        self.state = target
        self.state_timestamp = int(time.time() * 1000)

    def is_(self, *states: GroupState) -> bool:
        return self.state in states

    # ------------------------------------------------------------------ members
    def add(self, member: Member) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        if member.group_instance_id is not None and self.static_members.get(member.group_instance_id) == member_id:
            del self.static_members[member.group_instance_id]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        if not self.members:
            self.protocol_type = None if not self.offsets else self.protocol_type
        return member

    def replace_static(self, old_id: str, new_id: str) -> Member:
        """A static member came back with a new member id: the old id is fenced."""
        member = self.members.pop(old_id)
        member.member_id = new_id
        self.members[new_id] = member
        assert member.group_instance_id is not None
        self.static_members[member.group_instance_id] = new_id
        if self.leader_id == old_id:
            self.leader_id = new_id
        return member

    def has_all_members_joined(self) -> bool:
        return not self.pending_members and all(m.awaiting_join for m in self.members.values())

    def not_yet_rejoined(self) -> list[Member]:
        return [m for m in self.members.values() if not m.awaiting_join]

    def max_rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    # ------------------------------------------------------------------ offsets
    def set_offset(self, partition: tuple[str, int], value: OffsetValue, order: int) -> None:
        self.offsets[partition] = value
        self.offset_order[partition] = order

    def drop_offset(self, partition: tuple[str, int]) -> None:
        self.offsets.pop(partition, None)
        self.offset_order.pop(partition, None)

    def is_newer_than_committed(self, partition: tuple[str, int], order: int) -> bool:
        """Whether a record at ``order`` comes after the committed offset's record (or
        there is none). An offset set without an order counts as the oldest."""
        return partition not in self.offsets or order > self.offset_order.get(partition, -1)

    # ------------------------------------------------------------------ protocols
    def supports(self, protocol_type: str, protocols: list[tuple[str, bytes]]) -> bool:
        """A new member fits if the group is empty, or its protocol type matches and it
        shares at least one protocol with every current member."""
        if not protocol_type or not protocols:
            return False
        if not self.members:
            return True
        if protocol_type != self.protocol_type:
            return False
        names = {name for name, _ in protocols}
        return bool(names & self.candidate_protocols())

    def candidate_protocols(self) -> set[str]:
        """Protocols every member supports."""
        common: set[str] | None = None
        for member in self.members.values():
            names = {name for name, _ in member.protocols}
            common = names if common is None else common & names
        return common or set()

    def select_protocol(self) -> str:
        """Each member votes for its most preferred candidate; the most votes win, ties
        going to the protocol the leader prefers (Kafka counts votes the same way)."""
        candidates = self.candidate_protocols()
        if not candidates:
            raise ValueError(f"group {self.group_id}: members share no protocol")
        votes: dict[str, int] = {}
        for member in self.members.values():
            for name, _ in member.protocols:
                if name in candidates:
                    votes[name] = votes.get(name, 0) + 1
                    break
        leader = self.members.get(self.leader_id or "")
        order = [name for name, _ in leader.protocols] if leader is not None else sorted(candidates)
        return max(votes, key=lambda name: (votes[name], -order.index(name) if name in order else -len(order)))

    def subscribed_topics(self) -> set[str] | None:
        """Topics the members subscribe to (consumer protocol); None if unknown (another
        protocol type, or metadata we cannot parse)."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE or self.protocol_name is None:
            return None
        topics: set[str] = set()
        for member in self.members.values():
            try:
                topics |= parse_subscription_topics(member.metadata_for(self.protocol_name))
            except (KeyError, ValueError):
                return None
        return topics

    # ------------------------------------------------------------------ generations
    def init_next_generation(self) -> None:
        """End of the join phase: bump the generation and pick the protocol (or go Empty)."""
        self.generation += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.transition(GroupState.COMPLETING_REBALANCE)
        else:
            self.protocol_name = None
            self.transition(GroupState.EMPTY)
        for member in self.members.values():
            member.assignment = b""


_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
assert _I16.size == 2 and _I32.size == 4


def parse_subscription_topics(metadata: bytes) -> set[str]:
    """The topics of a ConsumerProtocolSubscription (every version starts the same way)::

        version  int16
        topics   int32 count, then per topic: int16 length, UTF-8 name
        …        user data, owned partitions, generation, rack (not needed here)
    """
    try:
        (_version,) = _I16.unpack_from(metadata, 0)
        (count,) = _I32.unpack_from(metadata, 2)
        if count < 0 or count > len(metadata):
            raise ValueError(f"bad topic count {count}")
        position = 6
        topics = set()
        for _ in range(count):
            (length,) = _I16.unpack_from(metadata, position)
            position += 2
            if length < 0 or position + length > len(metadata):
                raise ValueError("topic name runs past the metadata")
            topics.add(metadata[position:position + length].decode())
            position += length
        return topics
    except (struct.error, UnicodeDecodeError) as exc:
        raise ValueError(f"not a consumer subscription: {exc}") from None


def parse_assignment_partitions(assignment: bytes) -> list[tuple[str, int]]:
    """The partitions of a ConsumerProtocolAssignment (every version starts the same way)::

        version              int16
        assigned_partitions  int32 count, then per topic: int16 length, UTF-8 name,
                             int32 count, int32 partition ...
        …                    user data (not needed here)
    """
    try:
        position = 2
        (topics,) = _I32.unpack_from(assignment, position)
        position += 4
        if topics < 0 or topics > len(assignment):
            raise ValueError(f"bad topic count {topics}")
        out = []
        for _ in range(topics):
            (length,) = _I16.unpack_from(assignment, position)
            position += 2
            if length < 0 or position + length > len(assignment):
                raise ValueError("topic name runs past the assignment")
            topic = assignment[position:position + length].decode()
            position += length
            (count,) = _I32.unpack_from(assignment, position)
            position += 4
            if count < 0 or position + 4 * count > len(assignment):
                raise ValueError(f"bad partition count {count}")
            out += [(topic, _I32.unpack_from(assignment, position + 4 * i)[0]) for i in range(count)]
            position += 4 * count
        return out
    except (struct.error, UnicodeDecodeError) as exc:
        raise ValueError(f"not a consumer assignment: {exc}") from None
