"""What the group side of share groups asks of the share coordinator (the share-partition
state): exactly ShareStateCoordinator's initialize / delete / summary
(coordination/share/state_coordinator.py), as a Protocol, so the group coordinator takes
whichever object the process wires in.

``NoShareState`` is a group coordinator's without a share coordinator beside it (tests of
the other group kinds): every call is COORDINATOR_NOT_AVAILABLE, so no share partition is
ever assigned.
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

    @property
    def delivery_complete_count(self) -> int: ...


class ShareStateAdmin(Protocol):
    async def initialize(self, group_id: str, topic_id: uuid.UUID, partition: int, state_epoch: int,
                         start_offset: int) -> int: ...

    async def delete(self, group_id: str, topic_id: uuid.UUID, partition: int) -> int: ...

    async def summary(self, group_id: str, topic_id: uuid.UUID, partition: int, leader_epoch: int) -> StateSummary: ...


COORDINATOR_NOT_AVAILABLE = 15


@dataclass(frozen=True, slots=True)
class NoSummary:
    error_code: int = COORDINATOR_NOT_AVAILABLE
    state_epoch: int = 0
    leader_epoch: int = -1
    start_offset: int = UNINITIALIZED_START_OFFSET
    delivery_complete_count: int = -1


class NoShareState:
    """No share coordinator: share groups get no partitions."""

    async def initialize(self, group_id: str, topic_id: uuid.UUID, partition: int, state_epoch: int,
                         start_offset: int) -> int:
        return COORDINATOR_NOT_AVAILABLE

    async def delete(self, group_id: str, topic_id: uuid.UUID, partition: int) -> int:
        return COORDINATOR_NOT_AVAILABLE

    async def summary(self, group_id: str, topic_id: uuid.UUID, partition: int, leader_epoch: int) -> NoSummary:
        return NoSummary()
