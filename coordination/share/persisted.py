"""What the share coordinator keeps of one share-partition, as its callers see it."""

from __future__ import annotations

from dataclasses import dataclass

from coordination.share.records import NO_DELIVERY_COMPLETE_COUNT, StateBatch

UNINITIALIZED_START_OFFSET = -1  # Kafka's PartitionFactory: the leader resolves share.auto.offset.reset
DEFAULT_STATE_EPOCH = 0
NO_LEADER_EPOCH = -1


@dataclass(frozen=True, slots=True)
class PersistedState:
    """A share-partition's durable state, or the error that stands for it (error_code != 0:
    the other fields are the defaults). ``start_offset`` -1: initialized without a start
    offset; the share-partition leader resolves share.auto.offset.reset at its first fetch."""

    error_code: int
    state_epoch: int = DEFAULT_STATE_EPOCH
    leader_epoch: int = NO_LEADER_EPOCH
    start_offset: int = UNINITIALIZED_START_OFFSET
    delivery_complete_count: int = NO_DELIVERY_COMPLETE_COUNT
    batches: tuple[StateBatch, ...] = ()


def failed(error_code: int) -> PersistedState:
    return PersistedState(error_code)
