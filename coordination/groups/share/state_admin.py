"""What the group side of share groups asks of the share coordinator (the share-partition
state): exactly ShareStateCoordinator's initialize / delete / summary
(coordination/share/state_coordinator.py), as a Protocol, so the group coordinator takes
whichever object the process wires in.

``MemoryShareState`` keeps the state in this process only: a stand-in for a process that
has no share coordinator wired, and a real implementation for tests.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Protocol

UNINITIALIZED_START_OFFSET = -1  # the share-partition leader resolves share.auto.offset.reset


class StateSummary(Protocol):
    """The fields of PersistedState (coordination/share/persisted.py) a summary is read for."""

    @property
    def error_code(self) -> int: ...

    @property
    def state_epoch(self) -> int: ...

    @property
    def leader_epoch(self) -> int: ...

    @property
    def start_offset(self) -> int: ...


class ShareStateAdmin(Protocol):
    async def initialize(self, group_id: str, topic_id: uuid.UUID, partition: int, state_epoch: int,
                         start_offset: int) -> int: ...

    async def delete(self, group_id: str, topic_id: uuid.UUID, partition: int) -> int: ...

    async def summary(self, group_id: str, topic_id: uuid.UUID, partition: int, leader_epoch: int) -> StateSummary: ...


@dataclass(frozen=True, slots=True)
class MemorySummary:
    error_code: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    delivery_complete_count: int = -1


class MemoryShareState:
    """Share-partition state in a dict: (group, topic id, partition) -> (state epoch, start offset).
    Initialize and delete answer as the share coordinator does: 0, idempotent."""

    def __init__(self) -> None:
        self.partitions: dict[tuple[str, uuid.UUID, int], tuple[int, int]] = {}
        self.deleted: list[tuple[str, uuid.UUID, int]] = []

    async def initialize(self, group_id: str, topic_id: uuid.UUID, partition: int, state_epoch: int,
                         start_offset: int) -> int:
        self.partitions[(group_id, topic_id, partition)] = (state_epoch, start_offset)
        return 0

    async def delete(self, group_id: str, topic_id: uuid.UUID, partition: int) -> int:
        self.partitions.pop((group_id, topic_id, partition), None)
        self.deleted.append((group_id, topic_id, partition))
        return 0

    async def summary(self, group_id: str, topic_id: uuid.UUID, partition: int, leader_epoch: int) -> MemorySummary:
        found = self.partitions.get((group_id, topic_id, partition))
        if found is None:
            return MemorySummary(0, 0, -1, UNINITIALIZED_START_OFFSET)
        return MemorySummary(0, found[0], leader_epoch, found[1])
