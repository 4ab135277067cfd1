"""Split per-partition work by owning worker, run it there, and merge the answers.

Each owner's share goes to its PartitionOps: this worker's Owner answers at once, another
worker's proxy (broker/links/remote_ops.py) over the rings; all owners work concurrently.
Results come back in the order of the items, whichever worker answered first. Partitions
another broker holds answer NOT_LEADER_OR_FOLLOWER without being sent anywhere. A worker
that cannot answer (restarting, timed out) fails only its own partitions, each with that
error code (narrowest scope, P3).
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable, Protocol, Sequence, TypeVar, cast

from broker.partitions.partition_ops import PartitionOps, Reply
from broker.protocol.errors import ErrorCode, code_for_exception
from storage.types import TopicPartition

# An item's first field is its partition (AppendItem, ReadItem, OffsetItem, DeleteItem).
ItemT = TypeVar("ItemT", bound=tuple[Any, ...])
R = TypeVar("R")


class Router(Protocol):
    """Who writes a partition (broker.process.node.WorkerNode)."""

    index: int

    def holds(self, tp: TopicPartition) -> bool: ...

    def owner_of(self, tp: TopicPartition) -> int: ...

    def ops_for(self, worker: int) -> PartitionOps: ...


class ReplicaNode(Router, Protocol):
    """A worker that also knows this broker's id and the cluster's replica lists."""

    @property
    def node_id(self) -> int: ...

    @property
    def cluster(self) -> Any: ...


class AnyReplica:
    """A Router for an op every replica answers (DescribeProducers, AlterReplicaLogDirs): the
    node's own routing, except that this broker "holds" each partition it has a replica of,
    not only those it leads."""

    def __init__(self, node: ReplicaNode) -> None:
        self.node = node
        self.index = node.index

    def holds(self, tp: TopicPartition) -> bool:
        view = self.node.cluster.partition(tp.topic, tp.partition)
        return view is not None and self.node.node_id in view.replicas

    def owner_of(self, tp: TopicPartition) -> int:
        return self.node.owner_of(tp)

    def ops_for(self, worker: int) -> PartitionOps:
        return self.node.ops_for(worker)


async def on_owners(router: Router, items: Sequence[ItemT], run: Callable[[PartitionOps, list[ItemT]], Reply[list[R]]],
                    error_result: Callable[[int], R]) -> list[R]:
    """``run(ops, items_of_that_owner)`` on each owner; the results in item order."""
    groups: dict[int, list[int]] = {}
    results: list[R | None] = [None] * len(items)
    index = router.index
    all_here = True
    for position, item in enumerate(items):
        tp: TopicPartition = item[0]
        if not router.holds(tp):
            # Another broker of the cluster holds it: the client refreshes its metadata.
            results[position] = error_result(int(ErrorCode.not_leader_or_follower))
            all_here = False
            continue
        owner = router.owner_of(tp)
        all_here = all_here and owner == index
        groups.setdefault(owner, []).append(position)
    if all_here and items:
        # The usual case with one worker, or a connection the kernel gave to the writer:
        # one synchronous call, none of the merging below.
        try:
            answers = run(router.ops_for(index), list(items))
            if not isinstance(answers, list):
                answers = await answers  # an op that waits (acks=all's wait for replication)
        except Exception as exc:
            code = int(code_for_exception(exc))
            return [error_result(code) for _ in items]
        return answers

    def fail(positions: list[int], exc: BaseException) -> None:
        code = int(code_for_exception(exc))
        for p in positions:
            results[p] = error_result(code)

    def fill(positions: list[int], answers: list[R]) -> None:
        for p, answer in zip(positions, answers):
            results[p] = answer

    # Every call is sent (remote) or run (local, synchronous) before the first await, so
    # requests pipelined on one connection reach each owner in request order: their
    # appends to a partition are never reordered.
    waiting: list[tuple[list[int], asyncio.Future[list[R]]]] = []
    for owner, positions in groups.items():
        try:
            answer = run(router.ops_for(owner), [items[p] for p in positions])
        except Exception as exc:
            fail(positions, exc)
            continue
        if isinstance(answer, list):
            fill(positions, answer)
        else:
            waiting.append((positions, answer))
    if waiting:
        gathered = asyncio.gather(*(w for _positions, w in waiting), return_exceptions=True)
        try:
            outcomes = await gathered
        except asyncio.CancelledError:
            # The request was cancelled (its connection closed): the gather ends later with
            # CancelledError, which nobody awaits any more; retrieve it so that asyncio does not
            # log "_GatheringFuture exception was never retrieved".
            gathered.add_done_callback(_retrieve)
            raise
        for (positions, _w), outcome in zip(waiting, outcomes):
            if isinstance(outcome, BaseException):
                if not isinstance(outcome, Exception):
                    raise outcome
                fail(positions, outcome)
            else:
                fill(positions, outcome)
    return cast(list[R], results)  # every position was filled above, once


def _retrieve(future: "asyncio.Future[Any]") -> None:
    if not future.cancelled():
        future.exception()
