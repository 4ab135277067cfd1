"""The states of a transactional id and the transitions allowed between them.

Kafka's TransactionState, with its names and ids (the ids are what __transaction_state
stores; the names are what DescribeTransactions and ListTransactions report)::

    Empty ──AddPartitions──▶ Ongoing ──EndTxn(commit)──▶ PrepareCommit ──markers──▶ CompleteCommit
      ▲                        │  └──EndTxn(abort), timeout──▶ PrepareAbort ──markers──▶ CompleteAbort
      │                        └──InitProducerId (fence)──▶ PrepareEpochFence ──▶ PrepareAbort
      └──InitProducerId (epoch bump)── Empty, CompleteCommit, CompleteAbort ──expired──▶ Dead

PrepareEpochFence is never written: it stands for "abort this with the epoch bumped" until
the PrepareAbort record is; Dead is written as a tombstone.
"""

from __future__ import annotations

import enum


class TransactionState(enum.IntEnum):
    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def wire_name(self) -> str:
        return _NAMES[self]


_NAMES = {
    TransactionState.EMPTY: "Empty", TransactionState.ONGOING: "Ongoing",
    TransactionState.PREPARE_COMMIT: "PrepareCommit", TransactionState.PREPARE_ABORT: "PrepareAbort",
    TransactionState.COMPLETE_COMMIT: "CompleteCommit", TransactionState.COMPLETE_ABORT: "CompleteAbort",
    TransactionState.DEAD: "Dead", TransactionState.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}

S = TransactionState
VALID_PREVIOUS: dict[TransactionState, frozenset[TransactionState]] = {
    S.EMPTY: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.ONGOING: frozenset({S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_COMMIT: frozenset({S.ONGOING}),
    S.PREPARE_ABORT: frozenset({S.ONGOING, S.PREPARE_EPOCH_FENCE}),
    S.COMPLETE_COMMIT: frozenset({S.PREPARE_COMMIT}),
    S.COMPLETE_ABORT: frozenset({S.PREPARE_ABORT}),
    S.DEAD: frozenset({S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT}),
    S.PREPARE_EPOCH_FENCE: frozenset({S.ONGOING}),
}

# An id idle in one of these for transactional.id.expiration.ms is removed.
EXPIRABLE = frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT})
PREPARED = frozenset({S.PREPARE_COMMIT, S.PREPARE_ABORT})


class IllegalTransition(RuntimeError):
    """A bug in the coordinator: a transition the state table does not allow."""


def check_transition(current: TransactionState, target: TransactionState) -> None:
    if current not in VALID_PREVIOUS[target]:
        raise IllegalTransition(f"a transaction cannot go from {current.wire_name} to {target.wire_name}")
