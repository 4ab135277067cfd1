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
