"""A share group's offsets, as admins see them: DescribeShareGroupOffsets,
AlterShareGroupOffsets and DeleteShareGroupOffsets (KIP-932).

A share group commits no offsets to __consumer_offsets: its partitions' start offsets are
share-partition state in the share coordinator. Describing reads their summaries; altering
(an empty group only) initializes the partitions again at the offsets given, through the
same initializing / initialized steps of the state partition metadata as a heartbeat;
deleting (an empty group only) writes the topics as deleting, deletes their state in the
share coordinator, then drops them from the metadata. Kafka's GroupCoordinatorService and
GroupMetadataManager do the same, with the same errors.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, replace

from kio.schema.errors import ErrorCode

from coordination.groups.share.group import InitTopic, ShareGroup, state_metadata_record
from coordination.groups.share.heartbeat import initialized
from coordination.groups.share.service import ShareGroupService
from coordination.groups.share.state_admin import UNINITIALIZED_START_OFFSET

log = logging.getLogger(__name__)
E = ErrorCode
DEFAULT_LEADER_EPOCH = 0  # what Kafka answers for a partition it has no state of
NO_OFFSET_INFORMATION = "There is no offset information to delete."


@dataclass(frozen=True)
class PartitionOffset:
    partition: int
    start_offset: int = UNINITIALIZED_START_OFFSET
    leader_epoch: int = DEFAULT_LEADER_EPOCH
    error_code: int = 0
    error_message: str | None = None
    delivery_complete_count: int = -1  # records from the start offset on already done (-1: not known)


@dataclass(frozen=True)
class TopicOffsets:
    name: str
    topic_id: uuid.UUID | None  # None: no such topic
    partitions: tuple[PartitionOffset, ...]


@dataclass(frozen=True)
class TopicResult:
    name: str
    topic_id: uuid.UUID | None
    error_code: int = 0
    error_message: str | None = None


class ShareOffsetsAdmin:
    def __init__(self, service: ShareGroupService) -> None:
        self.service = service

    def _empty_share_group(self, group_id: str) -> tuple[ShareGroup | None, int, str | None]:
        """The group, or Kafka's error: INVALID_GROUP_ID, GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP."""
        if not group_id:
            return None, int(E.invalid_group_id), None
        share = self.service.share_of(group_id)
        if share is None:
            return None, int(E.group_id_not_found), f"Group {group_id} is not a share group."
        if share.members:
            return None, int(E.non_empty_group), f"Share group {group_id} is not empty."
        return share, 0, None

    # ------------------------------------------------------------------ DescribeShareGroupOffsets
    async def describe(self, group_id: str, topics: Sequence[tuple[str, Sequence[int]]] | None
                       ) -> tuple[int, list[TopicOffsets]]:
        """(group error, topics); ``topics`` None: every initialized partition of the group."""
        code = self.service.coordinator.unavailable()
        if code:
            return code, []
        catalog = self.service.catalog
        if topics is None:
            share = self.service.share_of(group_id)
            topics = []
            if share is not None:
                for topic_id, init in sorted(share.initialized.items(), key=lambda item: str(item[0])):
                    name = catalog.name_of(topic_id)
                    if name is not None:
                        topics.append((name, sorted(init.partitions)))
        out = []
        try:
            for name, partitions in topics:
                found = catalog.by_name(name)
                if found is None:
                    # As OffsetFetch: no offset information, not an error.
                    out.append(TopicOffsets(name, None, tuple(PartitionOffset(p) for p in partitions)))
                    continue
                topic_id = found[0]
                described = []
                for partition in partitions:
                    summary = await self.service.state.summary(group_id, topic_id, partition, -1)
                    if summary.error_code:
                        described.append(PartitionOffset(partition))
                    else:
                        described.append(PartitionOffset(partition, summary.start_offset, summary.leader_epoch,
                                                         delivery_complete_count=summary.delivery_complete_count))
                out.append(TopicOffsets(name, topic_id, tuple(described)))
        except Exception:  # noqa: BLE001 - the share coordinator unreachable: the group's error
            log.exception("group %s: reading share state summaries failed", group_id)
            return int(E.unknown_server_error), []
        return 0, out

    # ------------------------------------------------------------------ AlterShareGroupOffsets
    async def alter(self, group_id: str, topics: Sequence[tuple[str, Sequence[tuple[int, int]]]]
                    ) -> tuple[int, str | None, list[TopicOffsets]]:
        """(group error, message, topics with a code per partition): the partitions' share state
        initialized again at the start offsets given."""
        code = self.service.coordinator.unavailable()
        if code:
            return code, None, []
        if not group_id:
            return int(E.invalid_group_id), None, []
        service = self.service
        async with service.lock(group_id):
            share, code, message = self._empty_share_group(group_id)
            if share is None:
                return code, message, []
            now_ms = _now_ms()
            answers: list[TopicOffsets] = []
            offsets: dict[tuple[uuid.UUID, int], int] = {}
            initializing = dict(share.initializing)
            for name, partitions in topics:
                found = service.catalog.by_name(name)
                if found is None:
                    answers.append(TopicOffsets(name, None, tuple(
                        PartitionOffset(p, error_code=int(E.unknown_topic_or_partition),
                                        error_message="This server does not host this topic-partition.")
                        for p, _ in partitions)))
                    continue
                topic_id, count = found
                answered = []
                for partition, start_offset in partitions:
                    if partition < count:
                        answered.append(PartitionOffset(partition))
                        offsets[(topic_id, partition)] = start_offset
                    else:
                        answered.append(PartitionOffset(partition, error_code=int(E.unknown_topic_or_partition),
                                                        error_message="This server does not host this topic-partition."))
                answers.append(TopicOffsets(name, topic_id, tuple(answered)))
                valid = frozenset(p for p, _ in partitions if p < count)
                before = initializing.get(topic_id)
                initializing[topic_id] = InitTopic(name, valid | (before.partitions if before else frozenset()), now_ms)
            if not answers:
                return 0, None, []
            deleting = {t: n for t, n in share.deleting.items() if t not in initializing}
            record = state_metadata_record(group_id, initializing, share.initialized, deleting)
            code = await service.write(group_id, [record])
            if code:
                return code, None, []
            share.apply(record[0], record[1], now_ms)
            failed: dict[tuple[uuid.UUID, int], int] = {}
            for (topic_id, partition), start_offset in sorted(offsets.items(), key=lambda i: (str(i[0][0]), i[0][1])):
                try:
                    result = await service.state.initialize(group_id, topic_id, partition, share.group_epoch,
                                                            start_offset)
                except Exception:  # noqa: BLE001 - the partition's error
                    log.exception("group %s: initializing share state failed", group_id)
                    result = int(E.unknown_server_error)
                if result:
                    failed[(topic_id, partition)] = result
            done: dict[uuid.UUID, frozenset[int]] = {}
            for topic_id, partition in offsets:
                if (topic_id, partition) not in failed:
                    done[topic_id] = done.get(topic_id, frozenset()) | {partition}
            if done and not failed:
                moved = initialized(share, done, service.catalog, _now_ms())
                if not await service.write(group_id, [moved]):
                    share.apply(moved[0], moved[1], _now_ms())
            answers = [replace(topic, partitions=tuple(
                replace(p, error_code=failed[(topic.topic_id, p.partition)], error_message=None)
                if topic.topic_id is not None and (topic.topic_id, p.partition) in failed else p
                for p in topic.partitions)) for topic in answers]
            return 0, None, answers

    # ------------------------------------------------------------------ DeleteShareGroupOffsets
    async def delete(self, group_id: str, topic_names: Sequence[str]) -> tuple[int, str | None, list[TopicResult]]:
        """(group error, message, a result per topic): the topics' share state deleted."""
        code = self.service.coordinator.unavailable()
        if code:
            return code, None, []
        if not group_id:
            return int(E.invalid_group_id), None, []
        service = self.service
        async with service.lock(group_id):
            share, code, message = self._empty_share_group(group_id)
            if share is None:
                return code, message, []
            errors: list[TopicResult] = []
            to_delete: dict[uuid.UUID, tuple[str, frozenset[int]]] = {}
            initialized_left = dict(share.initialized)
            deleting = dict(share.deleting)
            for name in topic_names:
                found = service.catalog.by_name(name)
                if found is None:
                    errors.append(TopicResult(name, None, int(E.unknown_topic_or_partition),
                                              "This server does not host this topic-partition."))
                    continue
                topic_id, count = found
                if topic_id in initialized_left:
                    to_delete[topic_id] = (name, initialized_left.pop(topic_id).partitions)
                    deleting[topic_id] = name
                elif topic_id in deleting:  # an earlier deletion did not finish: every partition again
                    to_delete[topic_id] = (name, frozenset(range(count)))
                else:
                    errors.append(TopicResult(name, None, int(E.unknown_topic_or_partition), NO_OFFSET_INFORMATION))
            if share.has_state_metadata:
                record = state_metadata_record(group_id, share.initializing, initialized_left, deleting)
                code = await service.write(group_id, [record])
                if code:
                    return code, None, []
                share.apply(record[0], record[1], _now_ms())
            succeeded: list[TopicResult] = []
            for topic_id, (name, partitions) in sorted(to_delete.items(), key=lambda item: str(item[0])):
                failed = 0
                for partition in sorted(partitions):
                    try:
                        failed = await service.state.delete(group_id, topic_id, partition) or failed
                    except Exception:  # noqa: BLE001 - the topic's error
                        log.exception("group %s: deleting share state failed", group_id)
                        failed = int(E.unknown_server_error)
                if failed:
                    errors.append(TopicResult(name, topic_id, failed))
                else:
                    succeeded.append(TopicResult(name, topic_id))
            if succeeded:
                gone = {t.topic_id for t in succeeded}
                record = state_metadata_record(group_id, share.initializing, share.initialized,
                                               {t: n for t, n in share.deleting.items() if t not in gone})
                code = await service.write(group_id, [record])
                if code:
                    return code, None, []
                share.apply(record[0], record[1], _now_ms())
            return 0, None, errors + succeeded


def _now_ms() -> int:
    return int(time.time() * 1000)


