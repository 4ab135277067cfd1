"""Share sessions (KIP-932): which share partitions a share consumer fetches from this worker.

Kafka keys a share session by (group id, member id) per broker; here each worker keeps its own
(a consumer's connection stays on one worker; one that reconnects to another worker is told
SHARE_SESSION_NOT_FOUND and opens a new session with epoch 0, as the clients do). Epochs are
Kafka's: a request with epoch 0 opens (or replaces) the session, which then expects 1, 2, ...
(after the largest int32 comes 1); -1 closes it. At most ``group.share.max.share.sessions``
sessions; one more is SHARE_SESSION_LIMIT_REACHED.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from broker.protocol.errors import ErrorCode, KafkaError

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
INT32_MAX = 2**31 - 1

SharePartitionKey = tuple[uuid.UUID, int]  # (topic id, partition)


def next_epoch(epoch: int) -> int:
    return 1 if epoch >= INT32_MAX else epoch + 1


@dataclass(slots=True)
class ShareSession:
    group_id: str
    member_id: str
    epoch: int = 1  # the epoch the next request must carry
    partitions: dict[SharePartitionKey, None] = field(default_factory=dict)  # in the order they came

    def add(self, keys: list[SharePartitionKey]) -> None:
        for key in keys:
            self.partitions.setdefault(key, None)

    def forget(self, keys: list[SharePartitionKey]) -> None:
        for key in keys:
            self.partitions.pop(key, None)


class ShareSessions:
    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.sessions: dict[tuple[str, str], ShareSession] = {}

    def open(self, group_id: str, member_id: str) -> ShareSession:
        key = (group_id, member_id)
        self.sessions.pop(key, None)
        if len(self.sessions) >= self.limit:
            raise KafkaError(ErrorCode.share_session_limit_reached, f"{self.limit} share sessions are open")
        session = self.sessions[key] = ShareSession(group_id, member_id)
        return session

    def current(self, group_id: str, member_id: str, epoch: int) -> ShareSession:
        """The session a request of ``epoch`` (> 0) continues, its epoch moved on; or -1's,
        which the caller then closes."""
        session = self.sessions.get((group_id, member_id))
        if session is None:
            raise KafkaError(ErrorCode.share_session_not_found, f"no share session of {member_id} in {group_id}")
        if epoch == FINAL_EPOCH:
            return session
        if epoch != session.epoch:
            raise KafkaError(ErrorCode.invalid_share_session_epoch,
                             f"share session epoch {epoch}, expected {session.epoch}")
        session.epoch = next_epoch(epoch)
        return session

    def close(self, session: ShareSession) -> None:
        if self.sessions.get((session.group_id, session.member_id)) is session:
            del self.sessions[(session.group_id, session.member_id)]
