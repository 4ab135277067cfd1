"""The delivery state of one share partition (KIP-932): which records are in flight, who holds
them, how often each was delivered, and how far the partition is done.

Semantics are Kafka's SharePartition (core/src/main/java/kafka/server/share/SharePartition.java,
as shipped in Kafka 4.4); this module is pure: no I/O, no timers, no threads. Time is a
monotonic millisecond clock the caller passes in, so a lock expires when a call says so
(``expire_locks``; ``acquire`` and ``acknowledge`` expire what is due first, as Kafka's timer
would have). The caller fetches records, persists ``state_batches()`` through the share
coordinator, and answers clients; this module only decides.

Records and their states::

    AVAILABLE ──acquire (delivery count + 1)──▶ ACQUIRED ──ACCEPT──────────▶ ACKNOWLEDGED
        ▲                                           │ ─────REJECT / GAP────▶ ARCHIVED
        └──RELEASE, lock expiry, member gone────────┘ (ARCHIVED instead once the delivery
                                                        count has reached the limit)

The window is [start_offset, end_offset): the share-partition start offset (SPSO) is the first
record not yet ACKNOWLEDGED or ARCHIVED, the end offset (SPEO here is exclusive: the next offset
never fetched; Kafka keeps the last fetched offset) is one past the last record ever acquired.
Everything below SPSO is done; everything from SPEO on was never delivered. At most
``max_in_flight`` records (``group.share.partition.max.record.locks``) lie in the window: new
records are acquired only while ``end - start`` is below it, records released inside the window
can always be acquired again.

Representation: the window is tiled by runs, contiguous offset ranges whose records share state,
delivery count, holder and lock deadline. A fetch of 100k records becomes one run, a partial
acknowledgement splits a run in three, and equal neighbours merge back, so the number of runs
is bounded by the window (at most ``max_in_flight`` records) and is usually a handful. Kafka
keeps fetched batches and explodes one into per-offset state on a partial acknowledgement; the
runs give the same answers without keeping batch boundaries.

Where this follows Kafka exactly: the transitions and when the limit archives (a release with
the delivery count at the limit), released records are acquired before new ones (fetch from
``next_fetch_offset()``), acknowledgements of a partition are all-or-nothing with Kafka's error
codes (INVALID_REQUEST for a malformed list, INVALID_RECORD_STATE for records not ACQUIRED by
that member), lock expiry and member departure release, SPSO moves past terminal records only,
the persisted form carries no ACQUIRED state. Where it chooses: the in-flight limit is hard
(Kafka rounds a fetch up to the end of a log batch even past it; here ``max_records`` rounds up
to the batch end, the window never does), an AVAILABLE record already at the limit (a snapshot
written under a higher limit) is archived instead of being handed out, offsets the log skipped
between SPEO and the next fetched batch (compaction) are ARCHIVED with delivery count 0 (Kafka
leaves them out of its cache, which amounts to the same). Not here: Kafka 4.4's throttled
redelivery of records near the limit, RENEW acknowledgements, the DLQ's ARCHIVING state, the
``record_limit`` acquire mode, aborted-transaction filtering, and moving SPSO when the log start
offset passes it.
"""

from __future__ import annotations

import enum
from bisect import bisect_right
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

from kio.schema.errors import ErrorCode

from coordination.share.records import StateBatch

NONE = 0
INVALID_REQUEST = ErrorCode.invalid_request.value
INVALID_RECORD_STATE = ErrorCode.invalid_record_state.value

DEFAULT_DELIVERY_COUNT_LIMIT = 5  # group.share.delivery.count.limit
DEFAULT_MAX_IN_FLIGHT = 2000  # group.share.partition.max.record.locks
DEFAULT_LOCK_DURATION_MS = 30000  # group.share.record.lock.duration.ms


class RecordState(enum.IntEnum):
    """Kafka's RecordState, with its ids (the persisted ``DeliveryState`` byte)."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVING = 3  # Kafka 4.4's DLQ hand-off; loaded as ARCHIVED, never produced here
    ARCHIVED = 4


class AcknowledgeType(enum.IntEnum):
    """The ShareAcknowledge / ShareFetch ``AcknowledgeTypes`` values."""

    GAP = 0  # an offset with no record (compacted away, a control record)
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3


TERMINAL = (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)
_ACK_TYPES = frozenset(int(t) for t in AcknowledgeType)


@dataclass(frozen=True)
class AcquiredRecords:
    """One ``AcquiredRecords`` entry of a ShareFetch response."""

    first_offset: int
    last_offset: int
    delivery_count: int


@dataclass(frozen=True)
class RecordInfo:
    state: RecordState
    delivery_count: int
    member_id: str | None  # the holder while ACQUIRED


# An acknowledgement batch: (first offset, last offset, one type for all or one per offset).
AckBatch = tuple[int, int, int | Sequence[int]]


@dataclass
class _Run:
    first: int
    last: int
    state: RecordState
    delivery_count: int
    member_id: str | None = None
    deadline_ms: int | None = None

    def same_as(self, other: _Run) -> bool:
        return (
            self.state == other.state
            and self.delivery_count == other.delivery_count
            and self.member_id == other.member_id
            and self.deadline_ms == other.deadline_ms
        )

    def part(self, first: int, last: int) -> _Run:
        return _Run(first, last, self.state, self.delivery_count, self.member_id, self.deadline_ms)

    def archived(self) -> _Run:
        return _Run(self.first, self.last, RecordState.ARCHIVED, self.delivery_count)


class SharePartitionState:
    """The in-flight records of one share partition of one share group."""

    def __init__(
        self,
        start_offset: int,
        delivery_count_limit: int = DEFAULT_DELIVERY_COUNT_LIMIT,
        max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
        lock_duration_ms: int = DEFAULT_LOCK_DURATION_MS,
    ) -> None:
        if start_offset < 0:
            raise ValueError("share partition start offset below 0")
        self.configure(delivery_count_limit, max_in_flight, lock_duration_ms)
        self._start = start_offset
        self._end = start_offset
        self._runs: list[_Run] = []  # tile [start, end) in order, neighbours differ
        self._next_deadline: int | None = None  # no lock expires before this

    def configure(self, delivery_count_limit: int, max_in_flight: int, lock_duration_ms: int) -> None:
        """Take the group's settings as they are now. Its leader calls this on every use, not
        only at load: a group config changed later (or read late by this process) governs the
        next acquisition and release. A record already delivered more often than a lowered limit
        is archived when it would next be handed out, never delivered again."""
        if delivery_count_limit < 1 or max_in_flight < 1 or lock_duration_ms < 1:
            raise ValueError("share partition settings out of range")
        self.delivery_count_limit = delivery_count_limit
        self.max_in_flight = max_in_flight
        self.lock_duration_ms = lock_duration_ms

    # -- reading ---------------------------------------------------------------------------

    @property
    def start_offset(self) -> int:
        return self._start

    @property
    def end_offset(self) -> int:
        return self._end

    def in_flight(self) -> int:
        """Records in the window, whatever their state (what the in-flight limit counts)."""
        return self._end - self._start

    def next_fetch_offset(self) -> int:
        """Where the next fetch should read: the first AVAILABLE record, else the end offset."""
        for run in self._runs:
            if run.state == RecordState.AVAILABLE:
                return run.first
        return self._end

    def can_acquire(self) -> bool:
        """Whether a fetch could acquire anything (Kafka's canAcquireRecords)."""
        return self.next_fetch_offset() < self._end or self.in_flight() < self.max_in_flight

    def state_of(self, offset: int) -> RecordInfo:
        """One record's state; below the window it is done, from the end it is new."""
        if offset < self._start:
            return RecordInfo(RecordState.ACKNOWLEDGED, 0, None)
        if offset >= self._end:
            return RecordInfo(RecordState.AVAILABLE, 0, None)
        run = self._runs[self._index(offset)]
        return RecordInfo(run.state, run.delivery_count, run.member_id)

    def acquired_by(self, member_id: str) -> list[tuple[int, int]]:
        return [(r.first, r.last) for r in self._runs if r.state == RecordState.ACQUIRED and r.member_id == member_id]

    # -- acquiring -------------------------------------------------------------------------

    def acquire(
        self,
        member_id: str,
        fetched: range | tuple[int, int] | Sequence[tuple[int, int]],
        max_records: int,
        now_ms: int,
    ) -> list[AcquiredRecords]:
        """Acquire for ``member_id`` what it may have of the records a fetch returned.

        ``fetched`` is the span the log returned (a range, or (first, last)) or its record
        batches [(base offset, last offset)] in order; batches let ``max_records`` round up to
        a batch end, as Kafka does, so a client gets whole batches. AVAILABLE records inside
        the window come first (in offset order), then new records from the end offset while
        the window has room. Returns the acquired ranges with their delivery counts.
        """
        self.expire_locks(now_ms)
        batches = _batches(fetched)
        # A bare span has no batch ends to round to.
        record_batches = batches if not isinstance(fetched, range) and not _is_pair(fetched) else []
        if max_records <= 0 or not batches:
            return []
        span_first, span_last = max(batches[0][0], self._start), batches[-1][1]
        if span_last < span_first:
            return []
        acquired: list[AcquiredRecords] = []
        remaining = max_records
        deadline = now_ms + self.lock_duration_ms

        if span_first < self._end:
            limit = self.delivery_count_limit

            def take(run: _Run) -> list[_Run]:
                nonlocal remaining
                if run.state != RecordState.AVAILABLE or remaining <= 0:
                    return [run]
                if run.delivery_count >= limit:
                    return [run.archived()]
                count = min(remaining, run.last - run.first + 1)
                remaining -= count
                held = _Run(run.first, run.first + count - 1, RecordState.ACQUIRED, run.delivery_count + 1, member_id, deadline)
                acquired.append(AcquiredRecords(held.first, held.last, held.delivery_count))
                rest = [run.part(held.last + 1, run.last)] if held.last < run.last else []
                return [held, *rest]

            self._rewrite(span_first, min(span_last, self._end - 1), take)

        if remaining > 0 and span_last >= self._end:
            self._acquire_new(member_id, record_batches, max(span_first, self._end), span_last, remaining, deadline, acquired)

        if acquired:
            self._next_deadline = deadline if self._next_deadline is None else min(self._next_deadline, deadline)
        self._advance_start()
        return _coalesced(acquired)

    def _acquire_new(
        self,
        member_id: str,
        batches: list[tuple[int, int]],
        first: int,
        span_last: int,
        max_records: int,
        deadline: int,
        acquired: list[AcquiredRecords],
    ) -> None:
        if first > self._end:
            if self._runs:
                # The log has no records there (compacted away): nothing to deliver, nothing
                # to wait for.
                self._append(_Run(self._end, first - 1, RecordState.ARCHIVED, 0))
            else:
                self._start = first
            self._end = first
        room = self.max_in_flight - self.in_flight()
        if room <= 0:
            return
        last = first + min(max_records, span_last - first + 1) - 1
        if last < span_last and batches:
            last = _batch_end(batches, last)
        last = min(last, first + room - 1)
        self._append(_Run(first, last, RecordState.ACQUIRED, 1, member_id, deadline))
        acquired.append(AcquiredRecords(first, last, 1))

    # -- acknowledging ---------------------------------------------------------------------

    def acknowledge(self, member_id: str, batches: Sequence[AckBatch], now_ms: int) -> int:
        """Apply one partition's acknowledgement batches, all or none; the Kafka error code.

        Checks are Kafka's: the list must be ordered, each batch well formed with known types
        (else INVALID_REQUEST); a batch reaching past the end offset is INVALID_REQUEST; every
        record it names at or above the start offset must be ACQUIRED by this member (else
        INVALID_RECORD_STATE, which is also the answer when nothing is in flight). Offsets
        below the start offset are done already and skipped.
        """
        self.expire_locks(now_ms)
        error = self._check_acknowledgements(member_id, batches)
        if error != NONE:
            return error
        for first, last, types in batches:
            if last < self._start:
                continue
            for a, b, ack_type in _type_runs(first, last, types):
                if b >= self._start:
                    self._rewrite(max(a, self._start), b, self._settler(member_id, ack_type))
        self._advance_start()
        return NONE

    def _check_acknowledgements(self, member_id: str, batches: Sequence[AckBatch]) -> int:
        previous_last = -1
        for first, last, types in batches:
            type_list = [types] if isinstance(types, int) else list(types)
            if (
                first > last
                or first < previous_last
                or not type_list
                or (len(type_list) > 1 and len(type_list) != last - first + 1)
                or any(t not in _ACK_TYPES for t in type_list)
            ):
                return INVALID_REQUEST
            overlaps_previous = first == previous_last  # Kafka lets one offset repeat, then finds it settled
            previous_last = last
            if last < self._start:
                continue
            if not self._runs:
                return INVALID_RECORD_STATE
            if first >= self._end or last >= self._end:
                return INVALID_REQUEST
            if overlaps_previous and first >= self._start:
                return INVALID_RECORD_STATE
            index = self._index(max(first, self._start))
            while index < len(self._runs) and self._runs[index].first <= last:
                run = self._runs[index]
                if run.state != RecordState.ACQUIRED or run.member_id != member_id:
                    return INVALID_RECORD_STATE
                index += 1
        return NONE

    def _settler(self, member_id: str, ack_type: int) -> Callable[[_Run], list[_Run]]:
        def settle(run: _Run) -> list[_Run]:
            assert run.state == RecordState.ACQUIRED and run.member_id == member_id
            if ack_type == AcknowledgeType.ACCEPT:
                return [_Run(run.first, run.last, RecordState.ACKNOWLEDGED, run.delivery_count)]
            if ack_type == AcknowledgeType.RELEASE:
                return [self._released(run)]
            return [run.archived()]

        return settle

    def _released(self, run: _Run) -> _Run:
        if run.delivery_count >= self.delivery_count_limit:
            return run.archived()
        return _Run(run.first, run.last, RecordState.AVAILABLE, run.delivery_count)

    # -- releasing -------------------------------------------------------------------------

    def release_member(self, member_id: str) -> int:
        """The member left or its share session ended: its records are released. How many."""
        return self._release_where(lambda run: run.member_id == member_id)

    def expire_locks(self, now_ms: int) -> int:
        """Release every record whose acquisition lock has run out by ``now_ms``. How many."""
        if self._next_deadline is None or now_ms < self._next_deadline:
            return 0
        released = self._release_where(lambda run: run.deadline_ms is not None and run.deadline_ms <= now_ms)
        deadlines = [r.deadline_ms for r in self._runs if r.state == RecordState.ACQUIRED and r.deadline_ms is not None]
        self._next_deadline = min(deadlines) if deadlines else None
        return released

    def _release_where(self, holds: Callable[[_Run], bool]) -> int:
        if not self._runs:
            return 0
        released = 0

        def release(run: _Run) -> list[_Run]:
            nonlocal released
            if run.state != RecordState.ACQUIRED or not holds(run):
                return [run]
            released += run.last - run.first + 1
            return [self._released(run)]

        self._rewrite(self._start, self._end - 1, release)
        self._advance_start()
        return released

    # -- persistence -----------------------------------------------------------------------

    def state_batches(self) -> tuple[StateBatch, ...]:
        """The snapshot's state batches: maximal runs of equal (state, delivery count), ready for
        a ShareSnapshot / ShareUpdate value (records.py).

        What Kafka would have persisted: an acquisition is never written, so an ACQUIRED record
        appears as it was before (AVAILABLE, one delivery fewer), and records never delivered
        (AVAILABLE, count 0) are left out, as Kafka has no state for them.
        """
        out: list[StateBatch] = []
        for run in self._runs:
            if run.state == RecordState.ACQUIRED:
                state, count = RecordState.AVAILABLE, run.delivery_count - 1
            else:
                state, count = run.state, run.delivery_count
            if state == RecordState.AVAILABLE and count == 0:
                continue
            if (
                out
                and out[-1].last_offset + 1 == run.first
                and (out[-1].delivery_state, out[-1].delivery_count) == (state, count)
            ):
                out[-1] = StateBatch(out[-1].first_offset, run.last, int(state), count)
            else:
                out.append(StateBatch(run.first, run.last, int(state), count))
        return tuple(out)

    def delivery_complete_count(self) -> int:
        """Records of the window already ACKNOWLEDGED or ARCHIVED (the snapshot's
        deliveryCompleteCount: with SPSO and SPEO it tells how much of the window is left)."""
        return sum(run.last - run.first + 1 for run in self._runs if run.state in TERMINAL)

    @classmethod
    def from_state(
        cls,
        start_offset: int,
        batches: Iterable[StateBatch | tuple[int, int, int, int]],
        delivery_count_limit: int = DEFAULT_DELIVERY_COUNT_LIMIT,
        max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
        lock_duration_ms: int = DEFAULT_LOCK_DURATION_MS,
    ) -> SharePartitionState:
        """Rebuild from a snapshot (a new leader, a restarted broker).

        Nobody holds a lock after a move: ACQUIRED comes back AVAILABLE, ARCHIVING (a DLQ
        hand-off in progress) ARCHIVED. Offsets between the batches were never delivered.
        Batches must be ordered, disjoint and at or above the start offset (Kafka fails the
        load otherwise): ValueError.
        """
        state = cls(start_offset, delivery_count_limit, max_in_flight, lock_duration_ms)
        for batch in batches:
            first, last, delivery_state, count = (
                (batch.first_offset, batch.last_offset, batch.delivery_state, batch.delivery_count)
                if isinstance(batch, StateBatch)
                else batch
            )
            if first < state._end or last < first or count < 0:
                raise ValueError(f"state batch {first}-{last} out of order or below the start offset {start_offset}")
            kind = RecordState(delivery_state)
            if kind == RecordState.ACQUIRED:
                kind = RecordState.AVAILABLE
            elif kind == RecordState.ARCHIVING:
                kind = RecordState.ARCHIVED
            if first > state._end:
                state._append(_Run(state._end, first - 1, RecordState.AVAILABLE, 0))
            state._append(_Run(first, last, kind, count))
        state._advance_start()
        return state

    # -- runs ------------------------------------------------------------------------------

    def _index(self, offset: int) -> int:
        return bisect_right(self._runs, offset, key=lambda run: run.first) - 1

    def _split(self, offset: int) -> int:
        """Make ``offset`` start a run (start <= offset <= end); that run's index."""
        if offset >= self._end:
            return len(self._runs)
        index = self._index(offset)
        run = self._runs[index]
        if run.first == offset:
            return index
        self._runs[index : index + 1] = [run.part(run.first, offset - 1), run.part(offset, run.last)]
        return index + 1

    def _rewrite(self, first: int, last: int, change: Callable[[_Run], list[_Run]]) -> None:
        """Replace every run of [first, last] by what ``change`` makes of it, then re-merge."""
        lo = self._split(first)
        hi = self._split(last + 1)
        replaced: list[_Run] = []
        for run in self._runs[lo:hi]:
            replaced.extend(change(run))
        self._runs[lo:hi] = replaced
        self._merge(max(lo - 1, 0), min(lo + len(replaced) + 1, len(self._runs)))

    def _merge(self, lo: int, hi: int) -> None:
        merged: list[_Run] = []
        for run in self._runs[lo:hi]:
            if merged and merged[-1].same_as(run):
                merged[-1] = merged[-1].part(merged[-1].first, run.last)
            else:
                merged.append(run)
        self._runs[lo:hi] = merged

    def _append(self, run: _Run) -> None:
        self._runs.append(run)
        self._end = run.last + 1
        self._merge(max(len(self._runs) - 2, 0), len(self._runs))

    def _advance_start(self) -> None:
        """SPSO moves past the leading ACKNOWLEDGED / ARCHIVED records, and only those."""
        done = 0
        while done < len(self._runs) and self._runs[done].state in TERMINAL:
            done += 1
        if done:
            self._start = self._runs[done - 1].last + 1
            del self._runs[:done]


def _is_pair(fetched: object) -> bool:
    return isinstance(fetched, tuple) and len(fetched) == 2 and all(isinstance(x, int) for x in fetched)


def _batches(fetched: range | tuple[int, int] | Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    if isinstance(fetched, range):
        return [(fetched.start, fetched.stop - 1)] if len(fetched) else []
    if _is_pair(fetched):
        first, last = fetched
        return [(int(first), int(last))]  # type: ignore[arg-type]
    batches = [(int(a), int(b)) for a, b in fetched]  # type: ignore[misc]
    for (_, prev_last), (first, last) in zip(batches, batches[1:]):
        if first <= prev_last or last < first:
            raise ValueError("fetched batches must be ordered and disjoint")
    return batches


def _batch_end(batches: list[tuple[int, int]], offset: int) -> int:
    """The last offset of the fetched batch holding ``offset`` (``offset`` if in a hole)."""
    index = bisect_right(batches, offset, key=lambda b: b[0]) - 1
    if index >= 0 and batches[index][1] >= offset:
        return batches[index][1]
    return offset


def _type_runs(first: int, last: int, types: int | Sequence[int]) -> list[tuple[int, int, int]]:
    """One (first, last, type) per stretch of equal acknowledgement types."""
    if isinstance(types, int) or len(types) == 1:
        return [(first, last, types if isinstance(types, int) else types[0])]
    out: list[tuple[int, int, int]] = []
    for offset, ack_type in zip(range(first, last + 1), types):
        if out and out[-1][2] == ack_type:
            out[-1] = (out[-1][0], offset, ack_type)
        else:
            out.append((offset, offset, ack_type))
    return out


def _coalesced(acquired: list[AcquiredRecords]) -> list[AcquiredRecords]:
    out: list[AcquiredRecords] = []
    for records in acquired:
        if out and out[-1].last_offset + 1 == records.first_offset and out[-1].delivery_count == records.delivery_count:
            out[-1] = AcquiredRecords(out[-1].first_offset, records.last_offset, records.delivery_count)
        else:
            out.append(records)
    return out
