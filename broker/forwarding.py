"""Split per-partition work by owning worker, run it there, and merge the answers.

The owner runs the op directly when it is this worker, over IPC otherwise; all owners
work concurrently. Results come back in the order of the items, whichever worker
answered first. Partitions another broker holds answer NOT_LEADER_OR_FOLLOWER without
being sent anywhere. A worker that cannot answer (restarting, timed out) fails only its own
partitions, each with that error code (narrowest scope, P3).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Sequence

from broker.protocol.errors import ErrorCode, code_for_exception
from storage.types import TopicPartition

if TYPE_CHECKING:
    from broker.node import WorkerNode


async def on_owners(node: "WorkerNode", op: str, items: Sequence[tuple[Any, ...]], error_result: Callable[[int], Any],
                    *extra: Any, timeout: float = 30.0) -> list[Any]:
    """Run ``Owner.<op>(items_of_that_owner, *extra)`` on each owner; items[i][0] is a tp."""
    groups: dict[int, list[int]] = {}
    results: list[Any] = [None] * len(items)
    index = node.index
    all_here = True
    for position, item in enumerate(items):
        tp: TopicPartition = item[0]
        if not node.holds(tp):
            # Another broker of the cluster holds it: the client refreshes its metadata.
            results[position] = error_result(int(ErrorCode.not_leader_or_follower))
            all_here = False
            continue
        owner = node.owner_of(tp)
        all_here = all_here and owner == index
        groups.setdefault(owner, []).append(position)
    if all_here and items:
        # The usual case (a client sends each partition to the worker that owns it): one
        # synchronous call, none of the merging below.
        try:
            answers: list[Any] = getattr(node.owner, op)(items, *extra)
            return answers
        except Exception as exc:
            code = int(code_for_exception(exc))
            return [error_result(code) for _ in items]

    def fail(positions: list[int], exc: BaseException) -> None:
        code = int(code_for_exception(exc))
        for p in positions:
            results[p] = error_result(code)

    # Every call is sent (remote) or run (local, synchronous) before the first await, so
    # requests pipelined on one connection reach each owner in request order: their
    # appends to a partition are never reordered.
    local = groups.pop(node.index, None)
    waiting: list[tuple[list[int], Awaitable[Any]]] = []
    for owner, positions in groups.items():
        node.stats["forwards"] += 1
        try:
            waiting.append((positions, node.peers.call(owner, op, [items[p] for p in positions], *extra, timeout=timeout)))
        except Exception as exc:
            fail(positions, exc)
    if local is not None:
        try:
            answers = getattr(node.owner, op)([items[p] for p in local], *extra)
        except Exception as exc:
            fail(local, exc)
        else:
            for p, answer in zip(local, answers):
                results[p] = answer
    if not waiting:
        return results
    outcomes = await asyncio.gather(*(w for _positions, w in waiting), return_exceptions=True)
    for (positions, _w), outcome in zip(waiting, outcomes):
        if isinstance(outcome, BaseException):
            if not isinstance(outcome, Exception):
                raise outcome
            fail(positions, outcome)
        else:
            for p, answer in zip(positions, outcome):
                results[p] = answer
    return results
