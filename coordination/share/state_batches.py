"""Combining a share-partition's state batches, as Kafka's PersisterStateBatchCombiner does.

The result covers the same offsets as the inputs, without overlaps, sorted: where batches
overlap, an offset takes the delivery information of the batch that ranks highest by
(delivery count, delivery state), which is how Kafka's combiner resolves every overlap
case (a delivery count only grows, and of two states with the same count the later one,
acknowledged or archived, has the higher number). Neighbouring pieces with the same
information are one batch. Offsets below ``start_offset`` (unless it is -1) are dropped:
those are no longer the share-partition's.
"""

from __future__ import annotations

import heapq
from typing import Iterable

from coordination.share.records import StateBatch

DELIVERY_STATES = frozenset({0, 2, 4})  # available, acknowledged, archived: what is persisted


def valid_batch(batch: StateBatch) -> bool:
    """A batch a share-partition leader can mean: a non-empty offset range at or above 0,
    a persisted delivery state, a delivery count that is not negative."""
    return (0 <= batch.first_offset <= batch.last_offset and batch.delivery_state in DELIVERY_STATES
            and batch.delivery_count >= 0)


def _rank(batch: StateBatch) -> tuple[int, int]:
    return batch.delivery_count, batch.delivery_state


def combine(so_far: Iterable[StateBatch], new: Iterable[StateBatch], start_offset: int) -> tuple[StateBatch, ...]:
    """``so_far`` and ``new`` as one list of batches that do not overlap."""
    batches = []
    for batch in (*so_far, *new):
        if start_offset != -1:
            if batch.last_offset < start_offset:
                continue
            if batch.first_offset < start_offset:
                batch = StateBatch(start_offset, batch.last_offset, batch.delivery_state, batch.delivery_count)
        batches.append(batch)
    if len(batches) < 2:
        return tuple(batches)
    batches.sort(key=lambda b: b.first_offset)
    out: list[StateBatch] = []
    # A sweep over the offsets: ``active`` holds the batches begun by the current offset,
    # highest rank first (-count, -state, last offset, position); one that has ended is
    # dropped when it comes to the top.
    active: list[tuple[int, int, int, int]] = []
    index = 0
    offset = batches[0].first_offset
    while index < len(batches) or active:
        if not active:
            offset = max(offset, batches[index].first_offset)
        while index < len(batches) and batches[index].first_offset <= offset:
            batch = batches[index]
            heapq.heappush(active, (-batch.delivery_count, -batch.delivery_state, batch.last_offset, index))
            index += 1
        while active and active[0][2] < offset:
            heapq.heappop(active)
        if not active:
            continue
        count, state, end, _position = active[0]
        # The top batch holds until it ends, or until the next batch begins (it may outrank it).
        if index < len(batches):
            end = min(end, batches[index].first_offset - 1)
        _extend(out, StateBatch(offset, end, -state, -count))
        offset = end + 1
    return tuple(out)


def _extend(out: list[StateBatch], piece: StateBatch) -> None:
    """Append ``piece``, merged into the last batch when contiguous with the same information."""
    if out:
        last = out[-1]
        if last.last_offset + 1 == piece.first_offset and _rank(last) == _rank(piece):
            out[-1] = StateBatch(last.first_offset, piece.last_offset, last.delivery_state, last.delivery_count)
            return
    out.append(piece)
