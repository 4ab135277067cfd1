"""Typed values the group coordinator is asked with (the broker builds them from the
Kafka requests it decodes)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class JoiningMember:
    """Who asks to join, as JoinGroup tells it. An empty ``member_id`` is a member the
    group does not know yet; ``rebalance_timeout_ms`` -1 means "the session timeout"
    (JoinGroup v0 has none)."""

    member_id: str
    group_instance_id: str | None
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]  # (name, metadata) in the member's order of preference
    session_timeout_ms: int
    rebalance_timeout_ms: int
    client_id: str
    client_host: str


@dataclass(frozen=True, slots=True)
class MemberRef:
    """Who a SyncGroup, Heartbeat or OffsetCommit comes from: the generation it believes in
    and its ids. Generation -1 with an empty member id is a commit from outside any
    generation (a simple consumer, an admin tool)."""

    generation: int
    member_id: str
    group_instance_id: str | None
