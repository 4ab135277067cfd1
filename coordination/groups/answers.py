"""What the group coordinator answers a classic member's JoinGroup and SyncGroup with (the
broker encodes them as Kafka's responses); group.py keeps the answers its waiting members
are owed.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class JoinResult:
    error_code: int
    generation: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    member_id: str = ""
    members: list[tuple[str, str | None, bytes]] | None = None  # the leader's view: (id, instance id, metadata)


@dataclass
class SyncResult:
    error_code: int
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""
