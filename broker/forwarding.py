"""Split per-partition work by owning worker, run it there, and merge the answers.

The owner runs the op directly when it is this worker, over IPC otherwise; all owners
work concurrently. Results come back in the order of the items, whichever worker
answered first. A worker that cannot answer (restarting, timed out) fails only its own
partitions, each with that error code (narrowest scope, P3).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Callable, Sequence

from broker.protocol.errors import code_for_exception
from storage.types import TopicPartition

if TYPE_CHECKING:
    from broker.node import WorkerNode


async def on_owners(node: "WorkerNode", op: str, items: Sequence[tuple[Any, ...]], error_result: Callable[[int], Any],
                    *extra: Any, timeout: float = 30.0) -> list[Any]:
    """Run ``Owner.<op>(items_of_that_owner, *extra)`` on each owner; items[i][0] is a tp."""
    groups: dict[int, list[int]] = {}
    for position, item in enumerate(items):
        tp: TopicPartition = item[0]
        groups.setdefault(node.owner_of(tp), []).append(position)
    results: list[Any] = [None] * len(items)

    async def run(owner: int, positions: list[int]) -> None:
        chosen = [items[p] for p in positions]
        try:
            if owner == node.index:
                answers = getattr(node.owner, op)(chosen, *extra)
            else:
                answers = await node.peers.call(owner, op, chosen, *extra, timeout=timeout)
        except Exception as exc:
            code = int(code_for_exception(exc))
            answers = [error_result(code)] * len(positions)
        for p, answer in zip(positions, answers):
            results[p] = answer

    local = groups.pop(node.index, None)
    if local is not None and not groups:
        await run(node.index, local)  # the common single-owner case: no gather overhead
        return results
    tasks = [run(owner, positions) for owner, positions in groups.items()]
    if local is not None:
        tasks.append(run(node.index, local))
    await asyncio.gather(*tasks)
    return results
