"""The real share coordinator (coordination/share/state_coordinator.py) for unit tests of what
calls it: its __share_group_state partitions are a list of appended batches, which a test can
make fail (``failing``) or read back (``keys``)."""

from __future__ import annotations

import uuid

from coordination.share.state_coordinator import ShareStateCoordinator, entries_of

NOT_LEADER_OR_FOLLOWER = 6


class ListStateLog:
    partitions = 3

    def __init__(self) -> None:
        self.batches: list[tuple[int, bytes]] = []
        self.failing = False

    async def append(self, partition: int, batch: bytes) -> int:
        if self.failing:
            return NOT_LEADER_OR_FOLLOWER
        self.batches.append((partition, batch))
        return 0


def share_state(log: ListStateLog | None = None) -> ShareStateCoordinator:
    """A serving share coordinator over ``log`` (a new one if None) that knows every topic."""
    state = ShareStateCoordinator(log or ListStateLog(), lambda _topic, _partition: True)
    state.active = True
    return state


def known(state: ShareStateCoordinator) -> dict[tuple[str, uuid.UUID, int], tuple[int, int]]:
    """(group, topic id, partition) -> (state epoch, start offset) of every share-partition it has."""
    return {key: (s.state_epoch, s.start_offset) for key, s in state.states.items()}


def written(log: ListStateLog) -> list[object]:
    """Every record key written, in order (tombstones included)."""
    return [key for _p, data in log.batches for key, _value in entries_of(data, 0)[0]]
