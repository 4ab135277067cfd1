"""What an operator sees of the transactions a coordinator holds: DescribeTransactions'
description of one transactional id and ListTransactions' filters (kafka-transactions.sh
describe, list, find-hanging).

Kafka's TransactionStateManager rules, kept as they are because the tools rely on them:

* a Dead id is never shown (it is being removed);
* the filters combine with AND; an empty list of states or producer ids means all;
* the duration filter keeps the transactions whose start is more than that many
  milliseconds ago; Kafka compares with the start time even when there is none (-1, an
  Empty id), so such ids always pass a duration filter;
* the transactional id pattern must match the whole id (``Matcher.matches``); Kafka
  compiles it with RE2, Python's ``re`` here: the same syntax for what operators write
  (classes, alternation, repetition), and a pattern ``re`` cannot compile is
  INVALID_REGULAR_EXPRESSION as in Kafka. Unlike RE2, ``re`` backtracks, so a pathological
  pattern costs time on the coordinator's loop; ids are short, which bounds it in practice.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from coordination.transactions.metadata import TransactionMetadata
from coordination.transactions.state import TransactionState
from storage.types import TopicPartition

_BY_NAME = {state.wire_name: state for state in TransactionState}


class InvalidPattern(ValueError):
    """The transactional id pattern does not compile (INVALID_REGULAR_EXPRESSION)."""


@dataclass(frozen=True)
class TxnDescription:
    """DescribeTransactions' entry. On an error the other fields keep Kafka's defaults
    (empty state, zeros), as its response does."""

    error_code: int
    state: str = ""
    producer_id: int = 0
    producer_epoch: int = 0
    timeout_ms: int = 0
    start_ms: int = 0
    partitions: tuple[TopicPartition, ...] = ()


@dataclass(frozen=True)
class TxnListing:
    transactional_id: str
    producer_id: int
    state: str


@dataclass(frozen=True)
class ListFilters:
    states: frozenset[str] = frozenset()  # state names as asked (unknown ones are reported back)
    producer_ids: frozenset[int] = frozenset()
    duration_ms: int = -1  # < 0: no duration filter
    pattern: str | None = None  # None or empty: every id
    _compiled: re.Pattern[str] | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.pattern:
            try:
                object.__setattr__(self, "_compiled", re.compile(self.pattern))
            except re.error as exc:
                raise InvalidPattern(f"Transaction ID pattern `{self.pattern}` is not a valid regular "
                                     f"expression: {exc}.") from None

    def unknown_states(self) -> list[str]:
        return sorted(name for name in self.states if name not in _BY_NAME)

    def _known_states(self) -> frozenset[TransactionState]:
        return frozenset(_BY_NAME[name] for name in self.states if name in _BY_NAME)

    def select(self, transactions: list[TransactionMetadata], now_ms: int) -> list[TxnListing]:
        """The listings of the transactions that pass every filter, in id order."""
        states = self._known_states()
        # As Kafka: any state asked filters, so asking only unknown names lists nothing.
        filter_states = bool(self.states)
        out = []
        for metadata in sorted(transactions, key=lambda m: m.transactional_id):
            if metadata.state == TransactionState.DEAD:
                continue
            if self.producer_ids and metadata.producer_id not in self.producer_ids:
                continue
            if filter_states and metadata.state not in states:
                continue
            if self.duration_ms >= 0 and now_ms - metadata.start_ms <= self.duration_ms:
                continue
            if self._compiled is not None and self._compiled.fullmatch(metadata.transactional_id) is None:
                continue
            out.append(TxnListing(metadata.transactional_id, metadata.producer_id, metadata.state.wire_name))
        return out


def describe(metadata: TransactionMetadata) -> TxnDescription:
    """The id's state as DescribeTransactions reports it: during PrepareCommit/PrepareAbort
    only the partitions still waiting for their marker are listed (each leaves the set as
    its marker lands)."""
    return TxnDescription(0, metadata.state.wire_name, metadata.producer_id, metadata.producer_epoch,
                          metadata.timeout_ms, metadata.start_ms, tuple(sorted(metadata.partitions)))
