"""The skeleton the consumer and share group services (consumer/service.py, share/service.py)
stand on: what the group coordinator gives them, and how they change a group.

A group's changes run one at a time (a lock per group, held across the append): the records a
change decides are appended as one batch to the group's __consumer_offsets partition, and only
once they are in does the service fold them in. A member whose deadline passed is fenced by one
task at a time, in the background. Each group's own session timeout and heartbeat interval come
from its group configs. What the two protocols decide, and how they fold records in, stays in
their own services.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterable
from dataclasses import replace
from typing import Any, Awaitable, Callable, Coroutine, Generic, Protocol, TypeVar

from coordination.groups import offsets_schema as schema
from coordination.groups.consumer.group import TopicCatalog
from coordination.groups.group import Group
from coordination.groups.state import GroupState


class GroupConfigReader(Protocol):
    """Groups' own configs (coordination/group_configs.py GroupConfigs): a key's value
    for the group, its override or else the broker's."""

    def group_config(self, group_id: str, name: str) -> str | int: ...


class Timeouts(Protocol):
    """Settings with a session timeout and a heartbeat interval (ConsumerSettings, ShareSettings)."""

    @property
    def session_timeout_ms(self) -> int: ...

    @property
    def heartbeat_interval_ms(self) -> int: ...


TimeoutsT = TypeVar("TimeoutsT", bound=Timeouts)


def with_group_timeouts(settings: TimeoutsT, configs: GroupConfigReader | None, group_id: str, session_key: str,
                        interval_key: str) -> TimeoutsT:
    """``settings`` with the group's own session timeout and heartbeat interval (its group configs
    ``session_key`` and ``interval_key``), the same object when they are the broker's."""
    if configs is None:
        return settings
    session_ms = int(configs.group_config(group_id, session_key))
    interval_ms = int(configs.group_config(group_id, interval_key))
    if session_ms == settings.session_timeout_ms and interval_ms == settings.heartbeat_interval_ms:
        return settings
    return replace(settings, session_timeout_ms=session_ms, heartbeat_interval_ms=interval_ms)  # type: ignore[type-var]  # both are dataclasses


class OffsetsAppender(Protocol):
    async def append(self, partition: int, batch: bytes) -> int: ...


class GroupHost(Protocol):
    """What a protocol service needs of the group coordinator that owns it (coordinator.py): its
    groups, its log, and the classic side of a group that changes kind."""

    groups: dict[str, Group]

    @property
    def log(self) -> OffsetsAppender: ...

    def unavailable(self) -> int: ...

    def partition_for(self, group_id: str) -> int: ...

    def commit_error(self, code: int) -> int: ...

    def in_background(self, work: Coroutine[Any, Any, Any]) -> None: ...

    def release_classic(self, group: Group) -> None: ...

    def replace_with_classic(self, group_id: str, value: schema.GroupValue, reason: str) -> None: ...


class NoTopics:
    """The catalog before the process has its topic registry."""

    def version(self) -> int:
        return 0

    def by_name(self, name: str) -> tuple[uuid.UUID, int] | None:
        return None

    def name_of(self, topic_id: uuid.UUID) -> str | None:
        return None

    def names(self) -> Iterable[str]:
        return ()


class GroupProtocolService(Generic[TimeoutsT]):
    """A group protocol's service: the broker's ``settings``, per group as its configs
    (``session_timeout_config``, ``heartbeat_interval_config``) make them."""

    session_timeout_config: str
    heartbeat_interval_config: str

    def __init__(self, coordinator: GroupHost, settings: TimeoutsT) -> None:
        self.coordinator = coordinator
        self.settings = settings
        self.catalog: TopicCatalog = NoTopics()
        # The session timeout and heartbeat interval per group (group configs); None: every
        # group has the broker's.
        self.group_configs: GroupConfigReader | None = None
        self._locks: dict[str, asyncio.Lock] = {}
        self._fencing: set[tuple[str, str]] = set()

    def settings_for(self, group_id: str) -> TimeoutsT:
        """The broker's settings with the group's own session timeout and heartbeat interval."""
        return with_group_timeouts(self.settings, self.group_configs, group_id, self.session_timeout_config,
                                   self.heartbeat_interval_config)

    def lock(self, group_id: str) -> asyncio.Lock:
        """The group's lock: held by each change of the group, across its append."""
        lock = self._locks.get(group_id)
        if lock is None:
            lock = self._locks[group_id] = asyncio.Lock()
        return lock

    async def append(self, group_id: str, entries: list[tuple[bytes, bytes | None]]) -> int:
        """Append ``entries`` (encoded records) as one batch to the group's partition; the client's
        error, 0 once appended (or when there is nothing to append)."""
        if not entries:
            return 0
        code = await self.coordinator.log.append(self.coordinator.partition_for(group_id),
                                                 schema.offsets_batch(entries, now_ms()))
        return self.coordinator.commit_error(code) if code else 0

    def fence_soon(self, group_id: str, member_id: str, fence: Callable[[], Awaitable[None]]) -> None:
        """Run ``fence`` in the background, unless the member is being fenced already."""
        if (group_id, member_id) in self._fencing:
            return
        self._fencing.add((group_id, member_id))

        async def run() -> None:
            try:
                await fence()
            finally:
                self._fencing.discard((group_id, member_id))

        self.coordinator.in_background(run())


def settle_state(group: Group, has_members: bool) -> None:
    """The classic state that stands for a group of another protocol in the code all kinds share
    (offset expiry, deletion): Stable with members, else Empty."""
    state = GroupState.STABLE if has_members else GroupState.EMPTY
    if group.state is not state:
        group.state = state
        group.state_timestamp = now_ms()


def now_ms() -> int:
    return int(time.time() * 1000)
