"""What the consumer and share group heartbeat tests stand on: a group coordinator over a real
offsets log and a real local topic registry in a temp dir, one that a reload replaces by a
coordinator that loads the log, and the helpers both kinds of test read answers with."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from coordination.groups.coordinator import CoordinatorSettings, GroupCoordinator
from coordination.local_topics import LocalTopicRegistry
from tests.unit.coordination.test_coordinator_offsets import FileOffsetsLog

# Short enough for tests to see sessions run out; no wait before a classic rebalance.
COORDINATOR_SETTINGS = CoordinatorSettings(min_session_timeout_ms=100, initial_rebalance_delay_ms=0)


class GroupCluster:
    """A coordinator with its offsets log and topic registry, in a temp dir; ``new_coordinator``
    builds one for the group kind under test."""

    def __init__(self, tmp_path: Any) -> None:
        self.dir = str(tmp_path)
        self.log = FileOffsetsLog(self.dir)
        self.registry = LocalTopicRegistry(self.dir)

    def new_coordinator(self) -> GroupCoordinator:
        raise NotImplementedError

    def topic(self, name: str, partitions: int) -> uuid.UUID:
        info = self.registry.create(name, partitions, {})
        self.registry.refresh()
        return info.topic_id

    def reload(self) -> GroupCoordinator:
        """A coordinator elected after this one: it loads the log."""
        self.coord = self.new_coordinator()
        self.coord.load(self.log.loaded())
        return self.coord


ClusterT = TypeVar("ClusterT", bound=GroupCluster)


def clusters(make: Callable[..., ClusterT]) -> Iterator[Callable[..., ClusterT]]:
    """A ``make_cluster`` fixture's body: yield a maker of clusters, then close the logs of those it made."""
    made: list[ClusterT] = []

    def maker(**settings: Any) -> ClusterT:
        made.append(make(**settings))
        return made[-1]

    yield maker
    for cluster in made:
        cluster.log.close()


class HasAssignment(Protocol):
    @property
    def assignment(self) -> Mapping[Any, Sequence[int]] | None: ...


def parts(answer: HasAssignment) -> set[int]:
    """The partition numbers a heartbeat answer assigns, of whatever topic."""
    assert answer.assignment is not None
    return {p for ps in answer.assignment.values() for p in ps}


def run(coro: Any) -> Any:
    return asyncio.run(coro)
