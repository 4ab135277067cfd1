"""One transactional id's state, and the changes to it.

As in Kafka's TransactionMetadata, a change is two steps: ``prepare_*`` checks it and
returns the new state as a ``Transit`` (also marking the change pending, so a concurrent
request is answered CONCURRENT_TRANSACTIONS), the coordinator writes the Transit to
__transaction_state, and only once the write succeeds does ``complete`` apply it (or
``abandon`` forget it). Memory never runs ahead of the log.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from coordination.transactions import schema
from coordination.transactions.state import TransactionState, check_transition
from storage.types import TopicPartition

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
MAX_EPOCH = 32767  # Short.MaxValue
# transaction.version of the client that drives a transaction: 2 (KIP-890) bumps the
# epoch at every transaction end; 0 and 1 behave alike here.
TV_1, TV_2 = 1, 2


def epoch_exhausted(epoch: int) -> bool:
    """A producer never gets Short.MaxValue, so the coordinator can always fence it."""
    return epoch >= MAX_EPOCH - 1


class ProducerFenced(Exception):
    """The producer's expected epoch is neither the current one nor the last one."""


@dataclass(frozen=True)
class Transit:
    """A transactional id's state as it will be once written."""

    producer_id: int
    previous_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    timeout_ms: int
    state: TransactionState
    partitions: frozenset[TopicPartition]
    start_ms: int
    last_update_ms: int
    # A producer id allocated because the epochs ran out at a v2 transaction's end: it
    # becomes the producer id once the transaction completes (Kafka's NextProducerId).
    next_producer_id: int = NO_PRODUCER_ID
    client_transaction_version: int = 0

    def to_value(self) -> schema.TxnLogValue | None:
        """The record written for it; None (a tombstone) for Dead."""
        if self.state == TransactionState.DEAD:
            return None
        partitions: dict[str, tuple[int, ...]] | None = None
        if self.state != TransactionState.EMPTY:
            grouped: dict[str, list[int]] = {}
            for tp in sorted(self.partitions):
                grouped.setdefault(tp.topic, []).append(tp.partition)
            partitions = {topic: tuple(ids) for topic, ids in grouped.items()}
        return schema.TxnLogValue(self.producer_id, self.producer_epoch, self.timeout_ms, int(self.state), partitions,
                                  self.last_update_ms, self.start_ms, self.previous_producer_id,
                                  self.next_producer_id, self.client_transaction_version)


@dataclass
class TransactionMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    timeout_ms: int = 60_000
    state: TransactionState = TransactionState.EMPTY
    partitions: set[TopicPartition] = field(default_factory=set)
    start_ms: int = -1
    last_update_ms: int = -1
    previous_producer_id: int = NO_PRODUCER_ID
    # The epoch before the last bump, so a retried InitProducerId (KIP-360) gets the same answer.
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    pending: TransactionState | None = None
    # A fence whose write failed bumped the epoch in memory only; the next fence reuses it.
    failed_epoch_fence: bool = False
    next_producer_id: int = NO_PRODUCER_ID
    client_transaction_version: int = 0

    @classmethod
    def from_value(cls, transactional_id: str, value: schema.TxnLogValue) -> TransactionMetadata:
        state = TransactionState(value.status)
        partitions = set()
        if state != TransactionState.EMPTY:
            partitions = {TopicPartition(topic, p) for topic, ids in (value.partitions or {}).items() for p in ids}
        return cls(transactional_id, value.producer_id, value.producer_epoch, value.timeout_ms, state, partitions,
                   value.start_ms, value.last_update_ms, value.previous_producer_id,
                   next_producer_id=value.next_producer_id,
                   client_transaction_version=value.client_transaction_version)

    @property
    def bumps_epoch_at_end(self) -> bool:
        """Kafka's supportsEpochBump: a v2 client's transaction ends with the epoch bumped."""
        return self.client_transaction_version >= TV_2

    # ------------------------------------------------------------------ prepare
    def _transit(self, state: TransactionState, producer_id: int, epoch: int, last_epoch: int, timeout_ms: int,
                 partitions: frozenset[TopicPartition], start_ms: int, now: int,
                 next_producer_id: int = NO_PRODUCER_ID, transaction_version: int | None = None) -> Transit:
        if self.pending is not None:
            raise RuntimeError(f"{self.transactional_id}: preparing {state.wire_name} while "
                               f"{self.pending.wire_name} is pending")
        if state != TransactionState.DEAD and epoch < 0:
            raise ValueError(f"{self.transactional_id}: illegal producer epoch {epoch}")
        check_transition(self.state, state)
        self.pending = state
        # Kafka's PreviousProducerId: the id before the last rotation.
        previous = self.producer_id if producer_id != self.producer_id else self.previous_producer_id
        version = self.client_transaction_version if transaction_version is None else transaction_version
        return Transit(producer_id, previous, epoch, last_epoch, timeout_ms, state, partitions, start_ms,
                       now, next_producer_id, version)

    def prepare_fence_epoch(self) -> Transit:
        """Ongoing, to be aborted by the coordinator with the epoch bumped (a new producer
        with this id came, or the transaction timed out): the old producer is fenced."""
        epoch = self.producer_epoch if self.failed_epoch_fence else self.producer_epoch + 1
        return self._transit(TransactionState.PREPARE_EPOCH_FENCE, self.producer_id, epoch, NO_PRODUCER_EPOCH,
                             self.timeout_ms, frozenset(self.partitions), self.start_ms, self.last_update_ms)

    def prepare_increment_epoch(self, timeout_ms: int, expected_epoch: int | None, now: int) -> Transit:
        """InitProducerId on a quiet id: the next epoch; a retry of a bump that succeeded
        (expected = the last epoch) gets the current one again. ProducerFenced otherwise."""
        bumped = self.producer_epoch + 1
        if expected_epoch is None:
            epoch, last = bumped, NO_PRODUCER_EPOCH
        elif self.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == self.producer_epoch:
            epoch, last = bumped, self.producer_epoch
        elif expected_epoch == self.last_producer_epoch:
            epoch, last = self.producer_epoch, self.last_producer_epoch
        else:
            raise ProducerFenced(f"expected epoch {expected_epoch}, current {self.producer_epoch}, "
                                 f"last {self.last_producer_epoch}")
        return self._transit(TransactionState.EMPTY, self.producer_id, epoch, last, timeout_ms, frozenset(), -1, now)

    def prepare_rotate(self, producer_id: int, timeout_ms: int, now: int, record_last_epoch: bool) -> Transit:
        """The epochs of this producer id are used up: a new producer id with epoch 0."""
        last = self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH
        return self._transit(TransactionState.EMPTY, producer_id, 0, last, timeout_ms, frozenset(), -1, now)

    def prepare_add_partitions(self, added: set[TopicPartition], now: int, transaction_version: int = TV_1
                               ) -> Transit:
        starting = self.state in (TransactionState.EMPTY, TransactionState.COMPLETE_COMMIT,
                                  TransactionState.COMPLETE_ABORT)
        return self._transit(TransactionState.ONGOING, self.producer_id, self.producer_epoch,
                             self.last_producer_epoch, self.timeout_ms, frozenset(self.partitions | added),
                             now if starting else self.start_ms, now, transaction_version=transaction_version)

    def prepare_end(self, commit: bool, now: int, transaction_version: int | None = None,
                    next_producer_id: int = NO_PRODUCER_ID) -> Transit:
        """PrepareCommit or PrepareAbort. A v2 client's EndTxn (``transaction_version`` 2)
        bumps the epoch here: the markers carry the new epoch, which fences every late
        batch of the transaction just ended, and EndTxn returns it. The coordinator's own
        aborts (None: the recorded version is kept) carry the fence's bumped epoch already."""
        state = TransactionState.PREPARE_COMMIT if commit else TransactionState.PREPARE_ABORT
        epoch, last = self.producer_epoch, self.last_producer_epoch
        if transaction_version is not None and transaction_version >= TV_2:
            epoch, last = self.producer_epoch + 1, self.producer_epoch
        return self._transit(state, self.producer_id, epoch, last, self.timeout_ms, frozenset(self.partitions),
                             self.start_ms, now, next_producer_id, transaction_version)

    def prepare_complete(self, now: int) -> Transit:
        """Every marker is written: CompleteCommit or CompleteAbort, no partitions."""
        committed = self.state == TransactionState.PREPARE_COMMIT
        state = TransactionState.COMPLETE_COMMIT if committed else TransactionState.COMPLETE_ABORT
        self.failed_epoch_fence = False
        producer_id, epoch = self.producer_id, self.producer_epoch
        if self.bumps_epoch_at_end and self.next_producer_id != NO_PRODUCER_ID:
            producer_id, epoch = self.next_producer_id, 0  # the epochs ran out: the next id takes over
        return self._transit(state, producer_id, epoch, self.producer_epoch, self.timeout_ms, frozenset(),
                             self.start_ms, now)

    def prepare_dead(self) -> Transit:
        return self._transit(TransactionState.DEAD, self.producer_id, self.producer_epoch, self.last_producer_epoch,
                             self.timeout_ms, frozenset(), self.start_ms, self.last_update_ms)

    # ------------------------------------------------------------------ apply
    def complete(self, transit: Transit) -> None:
        """The transit is written: it becomes the state."""
        if self.pending != transit.state:
            raise RuntimeError(f"{self.transactional_id}: completing {transit.state.wire_name}, "
                               f"pending {self.pending.wire_name if self.pending is not None else None}")
        self.pending = None
        self.previous_producer_id = transit.previous_producer_id
        self.next_producer_id = transit.next_producer_id
        self.client_transaction_version = transit.client_transaction_version
        self.producer_id = transit.producer_id
        self.producer_epoch = transit.producer_epoch
        self.last_producer_epoch = transit.last_producer_epoch
        self.timeout_ms = transit.timeout_ms
        self.state = transit.state
        self.partitions = set(transit.partitions)
        self.start_ms = transit.start_ms
        self.last_update_ms = transit.last_update_ms

    def abandon(self) -> None:
        """The write failed: the change never happened."""
        self.pending = None
