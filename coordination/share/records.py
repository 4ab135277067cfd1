"""The records of share groups (KIP-932), in Kafka's own key and value schemas.

Byte for byte what Apache Kafka 4.4 writes: the group coordinator's share group records in
``__consumer_offsets`` (GroupCoordinatorRecordSerde) and the share coordinator's
share-partition state in ``__share_group_state`` (ShareCoordinatorRecordSerde). The schemas
are apache/kafka's group-coordinator and share-coordinator
src/main/resources/common/message/Share*{Key,Value}.json, as shipped in the 4.4 jars. As
for the consumer group records (groups/consumer/records.py), a key is an int16 record type
(the schema's "apiKey") and its fields, a value an int16 version and its fields, and a null
value is a tombstone.

``__consumer_offsets`` (the group coordinator; read with decode_key / decode_record)::

    type  key fields           value
    10    groupId, memberId    ShareGroupMemberMetadataValue: rackId string?, clientId string,
                               clientHost string, subscribedTopicNames [string]
    11    groupId              ShareGroupMetadataValue: epoch int32, metadataHash int64
    12    groupId              ShareGroupTargetAssignmentMetadataValue: assignmentEpoch
                               int32; tag 0 assignmentTimestamp int64 (default 0)
    13    groupId, memberId    ShareGroupTargetAssignmentMemberValue: topicPartitions
                               [topicId uuid, partitions [int32]]
    14    groupId, memberId    ShareGroupCurrentMemberAssignmentValue: memberEpoch int32,
                               previousMemberEpoch int32, state int8, assignedPartitions
                               [topicId uuid, partitions [int32]]
    15    groupId              ShareGroupStatePartitionMetadataValue: initializingTopics and
                               initializedTopics [topicId uuid, topicName string, partitions
                               [int32]], deletingTopics [topicId uuid, topicName string]

``__share_group_state`` (the share coordinator; read with decode_state_key /
decode_state_record); the record types start again at 0, so a key is only meaningful with
its topic::

    type  key fields                          value
    0     groupId, topicId uuid,              ShareSnapshotValue: snapshotEpoch int32,
          partition int32                     stateEpoch int32, leaderEpoch int32,
                                              startOffset int64, createTimestamp int64,
                                              writeTimestamp int64, stateBatches [StateBatch];
                                              tag 0 deliveryCompleteCount int32 (default -1)
    1     groupId, topicId uuid,              ShareUpdateValue: snapshotEpoch int32,
          partition int32                     leaderEpoch int32, startOffset int64,
                                              stateBatches [StateBatch]; tag 0
                                              deliveryCompleteCount int32 (default -1)
    StateBatch: firstOffset int64, lastOffset int64, deliveryState int8, deliveryCount int16

Keys are not flexible (int16-length strings; a uuid is its 16 bytes). Every value has one
version, 0, and it is flexible (see offsets_schema.py for the encodings). A tagged field is
written, as Kafka's generated classes write it, only when it differs from its default, and
a record without it reads as that default. Unlike the consumer group's tagged metadataHash,
ShareGroupMetadataValue's metadataHash is an ordinary field, always written.

Reading is Kafka's serde's, stricter where only garbage differs: a value version other
than 0 raises ShareRecordError (Kafka's serde raises UnknownRecordVersionException, which
its loaders log and skip), unknown tagged fields are skipped, and bytes left after the last
field, a record cut short, or a known tag whose data is not exactly its size raise
ShareRecordError.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Union, cast

from coordination.groups.offsets_schema import INT8, INT16, INT32, INT64, Buffer, OffsetsSchemaError, SchemaReader
from coordination.groups.record_codec import TAG_0, RecordWriter, read_int32_array, read_tags, read_uuid

VALUE_VERSION = 0  # the only version of every value; flexible
NO_DELIVERY_COMPLETE_COUNT = -1  # the schemas' default: not known (state written before Kafka 4.2)
NO_ASSIGNMENT_TIMESTAMP = 0  # the schema's default (target assignments written before Kafka 4.3)


class ShareRecordError(OffsetsSchemaError):
    """Bytes that are no valid share group record key or value (truncated, garbage, an
    unknown value version), or a value that does not fit its schema."""


class _Reader(SchemaReader):
    __slots__ = ()
    error = ShareRecordError


class _Writer(RecordWriter):
    __slots__ = ()
    error = ShareRecordError


# --- keys -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ShareGroupMemberMetadataKey:
    RECORD_TYPE: ClassVar[int] = 10
    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True)
class ShareGroupMetadataKey:
    RECORD_TYPE: ClassVar[int] = 11
    group_id: str


@dataclass(frozen=True, slots=True)
class ShareGroupTargetAssignmentMetadataKey:
    RECORD_TYPE: ClassVar[int] = 12
    group_id: str


@dataclass(frozen=True, slots=True)
class ShareGroupTargetAssignmentMemberKey:
    RECORD_TYPE: ClassVar[int] = 13
    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True)
class ShareGroupCurrentMemberAssignmentKey:
    RECORD_TYPE: ClassVar[int] = 14
    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True)
class ShareGroupStatePartitionMetadataKey:
    RECORD_TYPE: ClassVar[int] = 15
    group_id: str


@dataclass(frozen=True, slots=True)
class ShareSnapshotKey:
    """The whole state of one share-partition (a group's view of one topic partition)."""

    RECORD_TYPE: ClassVar[int] = 0
    group_id: str
    topic_id: uuid.UUID
    partition: int


@dataclass(frozen=True, slots=True)
class ShareUpdateKey:
    """A change to a share-partition's state since its last snapshot."""

    RECORD_TYPE: ClassVar[int] = 1
    group_id: str
    topic_id: uuid.UUID
    partition: int


# --- values -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ShareGroupMemberMetadataValue:
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ShareGroupMetadataValue:
    epoch: int
    metadata_hash: int  # the hash of the subscribed topics' metadata


@dataclass(frozen=True, slots=True)
class ShareGroupTargetAssignmentMetadataValue:
    assignment_epoch: int
    assignment_timestamp: int = NO_ASSIGNMENT_TIMESTAMP  # tagged; the default is not written


@dataclass(frozen=True, slots=True)
class TopicPartitions:
    """One topic's partitions in a member's target or current assignment."""

    topic_id: uuid.UUID
    partitions: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class ShareGroupTargetAssignmentMemberValue:
    topic_partitions: tuple[TopicPartitions, ...]


@dataclass(frozen=True, slots=True)
class ShareGroupCurrentMemberAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    state: int  # Kafka's MemberState id
    assigned_partitions: tuple[TopicPartitions, ...]


@dataclass(frozen=True, slots=True)
class TopicPartitionsInfo:
    topic_id: uuid.UUID
    topic_name: str
    partitions: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class TopicInfo:
    topic_id: uuid.UUID
    topic_name: str


@dataclass(frozen=True, slots=True)
class ShareGroupStatePartitionMetadataValue:
    """Which topic partitions of the group have share-partition state in the share
    coordinator: being initialized, initialized, or (whole topics) being deleted."""

    initializing_topics: tuple[TopicPartitionsInfo, ...]
    initialized_topics: tuple[TopicPartitionsInfo, ...]
    deleting_topics: tuple[TopicInfo, ...]


@dataclass(frozen=True, slots=True)
class StateBatch:
    """The delivery state of the offsets first_offset..last_offset (inclusive)."""

    first_offset: int
    last_offset: int
    delivery_state: int  # 0 available, 2 acknowledged, 4 archived
    delivery_count: int


@dataclass(frozen=True, slots=True)
class ShareSnapshotValue:
    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    create_timestamp: int
    write_timestamp: int
    state_batches: tuple[StateBatch, ...]
    delivery_complete_count: int = NO_DELIVERY_COMPLETE_COUNT  # tagged; the default is not written


@dataclass(frozen=True, slots=True)
class ShareUpdateValue:
    snapshot_epoch: int
    leader_epoch: int
    start_offset: int  # -1: not updated
    state_batches: tuple[StateBatch, ...]
    delivery_complete_count: int = NO_DELIVERY_COMPLETE_COUNT  # tagged; the default is not written


ShareGroupKey = Union[
    ShareGroupMemberMetadataKey, ShareGroupMetadataKey, ShareGroupTargetAssignmentMetadataKey,
    ShareGroupTargetAssignmentMemberKey, ShareGroupCurrentMemberAssignmentKey, ShareGroupStatePartitionMetadataKey,
]
ShareGroupValue = Union[
    ShareGroupMemberMetadataValue, ShareGroupMetadataValue, ShareGroupTargetAssignmentMetadataValue,
    ShareGroupTargetAssignmentMemberValue, ShareGroupCurrentMemberAssignmentValue,
    ShareGroupStatePartitionMetadataValue,
]
ShareStateKey = Union[ShareSnapshotKey, ShareUpdateKey]
ShareStateValue = Union[ShareSnapshotValue, ShareUpdateValue]
ShareKey = Union[ShareGroupKey, ShareStateKey]
ShareValue = Union[ShareGroupValue, ShareStateValue]

_GROUP_KEY_FIELDS: dict[int, tuple[type, tuple[str, ...]]] = {
    ShareGroupMemberMetadataKey.RECORD_TYPE: (ShareGroupMemberMetadataKey, ("groupId", "memberId")),
    ShareGroupMetadataKey.RECORD_TYPE: (ShareGroupMetadataKey, ("groupId",)),
    ShareGroupTargetAssignmentMetadataKey.RECORD_TYPE: (ShareGroupTargetAssignmentMetadataKey, ("groupId",)),
    ShareGroupTargetAssignmentMemberKey.RECORD_TYPE: (ShareGroupTargetAssignmentMemberKey, ("groupId", "memberId")),
    ShareGroupCurrentMemberAssignmentKey.RECORD_TYPE: (ShareGroupCurrentMemberAssignmentKey, ("groupId", "memberId")),
    ShareGroupStatePartitionMetadataKey.RECORD_TYPE: (ShareGroupStatePartitionMetadataKey, ("groupId",)),
}
_STATE_KEYS: dict[int, type[ShareSnapshotKey] | type[ShareUpdateKey]] = {
    ShareSnapshotKey.RECORD_TYPE: ShareSnapshotKey,
    ShareUpdateKey.RECORD_TYPE: ShareUpdateKey,
}
GROUP_RECORD_TYPES = frozenset(_GROUP_KEY_FIELDS)
"""The __consumer_offsets record types of share groups."""
STATE_RECORD_TYPES = frozenset(_STATE_KEYS)
"""The __share_group_state record types."""

VALUE_OF_KEY: dict[type, type] = {  # the value class of each key class
    ShareGroupMemberMetadataKey: ShareGroupMemberMetadataValue,
    ShareGroupMetadataKey: ShareGroupMetadataValue,
    ShareGroupTargetAssignmentMetadataKey: ShareGroupTargetAssignmentMetadataValue,
    ShareGroupTargetAssignmentMemberKey: ShareGroupTargetAssignmentMemberValue,
    ShareGroupCurrentMemberAssignmentKey: ShareGroupCurrentMemberAssignmentValue,
    ShareGroupStatePartitionMetadataKey: ShareGroupStatePartitionMetadataValue,
    ShareSnapshotKey: ShareSnapshotValue,
    ShareUpdateKey: ShareUpdateValue,
}


# --- writing ----------------------------------------------------------------------------


def encode_key(key: ShareKey) -> bytes:
    """The key as Kafka writes it: int16 record type, then its fields."""
    if type(key) not in VALUE_OF_KEY:
        raise TypeError(f"not a share group record key: {key!r}")
    writer = _Writer()
    writer.out += INT16.pack(key.RECORD_TYPE)
    writer.string(key.group_id, "groupId")
    if isinstance(key, (ShareSnapshotKey, ShareUpdateKey)):
        writer.uuid(key.topic_id)
        writer.fixed(INT32, key.partition, "partition")
    elif isinstance(key, (ShareGroupMemberMetadataKey, ShareGroupTargetAssignmentMemberKey,
                          ShareGroupCurrentMemberAssignmentKey)):
        writer.string(key.member_id, "memberId")
    return bytes(writer.out)


def encode_value(value: ShareValue) -> bytes:
    """The value (version 0, the only one) as Kafka writes it."""
    write = _WRITERS.get(type(value))
    if write is None:
        raise TypeError(f"not a share group record value: {value!r}")
    writer = _Writer()
    writer.out += INT16.pack(VALUE_VERSION)
    write(writer, value)
    return bytes(writer.out)


def _strings(writer: RecordWriter, values: tuple[str, ...], field: str) -> None:
    writer.count(len(values), field)
    for value in values:
        writer.compact_string(value, field)


def _write_member_metadata(writer: RecordWriter, value: ShareGroupMemberMetadataValue) -> None:
    writer.compact_string(value.rack_id, "rackId")
    writer.compact_string(value.client_id, "clientId")
    writer.compact_string(value.client_host, "clientHost")
    _strings(writer, value.subscribed_topic_names, "subscribedTopicNames")
    writer.no_tags()


def _write_group_metadata(writer: RecordWriter, value: ShareGroupMetadataValue) -> None:
    writer.fixed(INT32, value.epoch, "epoch")
    writer.fixed(INT64, value.metadata_hash, "metadataHash")
    writer.no_tags()


def _write_target_metadata(writer: RecordWriter, value: ShareGroupTargetAssignmentMetadataValue) -> None:
    writer.fixed(INT32, value.assignment_epoch, "assignmentEpoch")
    tags = []
    if value.assignment_timestamp != NO_ASSIGNMENT_TIMESTAMP:
        tags.append((TAG_0, writer.sub(lambda w: w.fixed(INT64, value.assignment_timestamp, "assignmentTimestamp"))))
    writer.tagged(tags)


def _topic_partitions(writer: RecordWriter, topics: tuple[TopicPartitions, ...], field: str) -> None:
    writer.count(len(topics), field)
    for topic in topics:
        writer.uuid(topic.topic_id)
        writer.int32_array(topic.partitions, "partitions")
        writer.no_tags()


def _write_target_member(writer: RecordWriter, value: ShareGroupTargetAssignmentMemberValue) -> None:
    _topic_partitions(writer, value.topic_partitions, "topicPartitions")
    writer.no_tags()


def _write_current_assignment(writer: RecordWriter, value: ShareGroupCurrentMemberAssignmentValue) -> None:
    writer.fixed(INT32, value.member_epoch, "memberEpoch")
    writer.fixed(INT32, value.previous_member_epoch, "previousMemberEpoch")
    writer.fixed(INT8, value.state, "state")
    _topic_partitions(writer, value.assigned_partitions, "assignedPartitions")
    writer.no_tags()


def _topics_info(writer: RecordWriter, topics: tuple[TopicPartitionsInfo, ...] | tuple[TopicInfo, ...],
                 field: str) -> None:
    writer.count(len(topics), field)
    for topic in topics:
        writer.uuid(topic.topic_id)
        writer.compact_string(topic.topic_name, "topicName")
        if isinstance(topic, TopicPartitionsInfo):
            writer.int32_array(topic.partitions, "partitions")
        writer.no_tags()


def _write_state_partition_metadata(writer: RecordWriter, value: ShareGroupStatePartitionMetadataValue) -> None:
    _topics_info(writer, value.initializing_topics, "initializingTopics")
    _topics_info(writer, value.initialized_topics, "initializedTopics")
    _topics_info(writer, value.deleting_topics, "deletingTopics")
    writer.no_tags()


def _state_batches(writer: RecordWriter, batches: tuple[StateBatch, ...]) -> None:
    writer.count(len(batches), "stateBatches")
    for batch in batches:
        writer.fixed(INT64, batch.first_offset, "firstOffset")
        writer.fixed(INT64, batch.last_offset, "lastOffset")
        writer.fixed(INT8, batch.delivery_state, "deliveryState")
        writer.fixed(INT16, batch.delivery_count, "deliveryCount")
        writer.no_tags()


def _delivery_complete_count(writer: RecordWriter, count: int) -> None:
    """The value's tagged-field section: deliveryCompleteCount when not the default."""
    tags = []
    if count != NO_DELIVERY_COMPLETE_COUNT:
        tags.append((TAG_0, writer.sub(lambda w: w.fixed(INT32, count, "deliveryCompleteCount"))))
    writer.tagged(tags)


def _write_snapshot(writer: RecordWriter, value: ShareSnapshotValue) -> None:
    writer.fixed(INT32, value.snapshot_epoch, "snapshotEpoch")
    writer.fixed(INT32, value.state_epoch, "stateEpoch")
    writer.fixed(INT32, value.leader_epoch, "leaderEpoch")
    writer.fixed(INT64, value.start_offset, "startOffset")
    writer.fixed(INT64, value.create_timestamp, "createTimestamp")
    writer.fixed(INT64, value.write_timestamp, "writeTimestamp")
    _state_batches(writer, value.state_batches)
    _delivery_complete_count(writer, value.delivery_complete_count)


def _write_update(writer: RecordWriter, value: ShareUpdateValue) -> None:
    writer.fixed(INT32, value.snapshot_epoch, "snapshotEpoch")
    writer.fixed(INT32, value.leader_epoch, "leaderEpoch")
    writer.fixed(INT64, value.start_offset, "startOffset")
    _state_batches(writer, value.state_batches)
    _delivery_complete_count(writer, value.delivery_complete_count)


# Any: each writer takes the one value class it is the writer of.
_WRITERS: dict[type, Callable[[RecordWriter, Any], None]] = {
    ShareGroupMemberMetadataValue: _write_member_metadata,
    ShareGroupMetadataValue: _write_group_metadata,
    ShareGroupTargetAssignmentMetadataValue: _write_target_metadata,
    ShareGroupTargetAssignmentMemberValue: _write_target_member,
    ShareGroupCurrentMemberAssignmentValue: _write_current_assignment,
    ShareGroupStatePartitionMetadataValue: _write_state_partition_metadata,
    ShareSnapshotValue: _write_snapshot,
    ShareUpdateValue: _write_update,
}


# --- reading ----------------------------------------------------------------------------


def decode_key(data: Buffer) -> ShareGroupKey | None:
    """The key of a share group record of __consumer_offsets; None for any other record
    type (offset commits, classic, consumer and streams groups)."""
    reader = _Reader(data, "__consumer_offsets key")
    known = _GROUP_KEY_FIELDS.get(reader.int16("key type"))
    if known is None:
        return None
    key_class, fields = known
    reader.what = key_class.__name__
    strings = [reader.string(field, False) for field in fields]
    reader.finish()
    key: ShareGroupKey = key_class(*strings)
    return key


def decode_state_key(data: Buffer) -> ShareStateKey | None:
    """The key of a __share_group_state record; None for a record type Kafka 4.4 does not
    write there (its loader skips those)."""
    reader = _Reader(data, "__share_group_state key")
    key_class = _STATE_KEYS.get(reader.int16("key type"))
    if key_class is None:
        return None
    reader.what = key_class.__name__
    group_id = reader.string("groupId", False)
    topic_id = read_uuid(reader, "topicId")
    partition = reader.int32("partition")
    reader.finish()
    return key_class(group_id, topic_id, partition)


def decode_record(key_data: Buffer, value_data: Buffer | None) -> tuple[ShareGroupKey, ShareGroupValue | None] | None:
    """The typed key and value (None: a tombstone) of a share group record of
    __consumer_offsets; None when the key is of another record type."""
    key = decode_key(key_data)
    if key is None:
        return None
    if value_data is None:
        return key, None
    return key, cast(ShareGroupValue, decode_value(type(key), value_data))


def decode_state_record(key_data: Buffer, value_data: Buffer | None
                        ) -> tuple[ShareStateKey, ShareStateValue | None] | None:
    """The typed key and value (None: a tombstone) of a __share_group_state record; None
    when the key is of a record type Kafka does not write there."""
    key = decode_state_key(key_data)
    if key is None:
        return None
    if value_data is None:
        return key, None
    return key, cast(ShareStateValue, decode_value(type(key), value_data))


def decode_value(key_class: type, data: Buffer) -> ShareValue:
    """The value of a record whose key is of ``key_class``."""
    value_class = VALUE_OF_KEY.get(key_class)
    if value_class is None:
        raise TypeError(f"not a share group record key class: {key_class!r}")
    reader = _Reader(data, value_class.__name__)
    version = reader.int16("version")
    if version != VALUE_VERSION:
        raise reader.fail(f"unknown version {version}")
    value = _READERS[value_class](reader)
    reader.finish()
    return value


def _read_strings(reader: SchemaReader, field: str) -> tuple[str, ...]:
    return tuple(reader.string(field, True) for _ in range(reader.array_count(field, True)))


def _read_member_metadata(reader: SchemaReader) -> ShareGroupMemberMetadataValue:
    rack_id = reader.nullable_string("rackId", True)
    client_id = reader.string("clientId", True)
    client_host = reader.string("clientHost", True)
    names = _read_strings(reader, "subscribedTopicNames")
    read_tags(reader)
    return ShareGroupMemberMetadataValue(rack_id, client_id, client_host, names)


def _read_group_metadata(reader: SchemaReader) -> ShareGroupMetadataValue:
    epoch = reader.int32("epoch")
    metadata_hash = reader.int64("metadataHash")
    read_tags(reader)
    return ShareGroupMetadataValue(epoch, metadata_hash)


def _read_target_metadata(reader: SchemaReader) -> ShareGroupTargetAssignmentMetadataValue:
    epoch = reader.int32("assignmentEpoch")
    timestamp = NO_ASSIGNMENT_TIMESTAMP

    def read_timestamp(tag: SchemaReader) -> None:
        nonlocal timestamp
        timestamp = tag.int64("assignmentTimestamp")

    read_tags(reader, read_timestamp)
    return ShareGroupTargetAssignmentMetadataValue(epoch, timestamp)


def _read_topic_partitions(reader: SchemaReader, field: str) -> tuple[TopicPartitions, ...]:
    topics = []
    for _ in range(reader.array_count(field, True)):
        topic_id = read_uuid(reader, "topicId")
        partitions = read_int32_array(reader, "partitions")
        read_tags(reader)
        topics.append(TopicPartitions(topic_id, partitions))
    return tuple(topics)


def _read_target_member(reader: SchemaReader) -> ShareGroupTargetAssignmentMemberValue:
    topics = _read_topic_partitions(reader, "topicPartitions")
    read_tags(reader)
    return ShareGroupTargetAssignmentMemberValue(topics)


def _read_current_assignment(reader: SchemaReader) -> ShareGroupCurrentMemberAssignmentValue:
    member_epoch = reader.int32("memberEpoch")
    previous_epoch = reader.int32("previousMemberEpoch")
    state = reader.int8("state")
    assigned = _read_topic_partitions(reader, "assignedPartitions")
    read_tags(reader)
    return ShareGroupCurrentMemberAssignmentValue(member_epoch, previous_epoch, state, assigned)


def _read_topic_partitions_info(reader: SchemaReader, field: str) -> tuple[TopicPartitionsInfo, ...]:
    topics = []
    for _ in range(reader.array_count(field, True)):
        topic_id = read_uuid(reader, "topicId")
        topic_name = reader.string("topicName", True)
        partitions = read_int32_array(reader, "partitions")
        read_tags(reader)
        topics.append(TopicPartitionsInfo(topic_id, topic_name, partitions))
    return tuple(topics)


def _read_state_partition_metadata(reader: SchemaReader) -> ShareGroupStatePartitionMetadataValue:
    initializing = _read_topic_partitions_info(reader, "initializingTopics")
    initialized = _read_topic_partitions_info(reader, "initializedTopics")
    deleting = []
    for _ in range(reader.array_count("deletingTopics", True)):
        topic_id = read_uuid(reader, "topicId")
        topic_name = reader.string("topicName", True)
        read_tags(reader)
        deleting.append(TopicInfo(topic_id, topic_name))
    read_tags(reader)
    return ShareGroupStatePartitionMetadataValue(initializing, initialized, tuple(deleting))


def _read_state_batches(reader: SchemaReader) -> tuple[StateBatch, ...]:
    batches = []
    for _ in range(reader.array_count("stateBatches", True)):
        first_offset = reader.int64("firstOffset")
        last_offset = reader.int64("lastOffset")
        delivery_state = reader.int8("deliveryState")
        delivery_count = reader.int16("deliveryCount")
        read_tags(reader)
        batches.append(StateBatch(first_offset, last_offset, delivery_state, delivery_count))
    return tuple(batches)


def _read_delivery_complete_count(reader: SchemaReader) -> int:
    count = NO_DELIVERY_COMPLETE_COUNT

    def read_count(tag: SchemaReader) -> None:
        nonlocal count
        count = tag.int32("deliveryCompleteCount")

    read_tags(reader, read_count)
    return count


def _read_snapshot(reader: SchemaReader) -> ShareSnapshotValue:
    snapshot_epoch = reader.int32("snapshotEpoch")
    state_epoch = reader.int32("stateEpoch")
    leader_epoch = reader.int32("leaderEpoch")
    start_offset = reader.int64("startOffset")
    create_timestamp = reader.int64("createTimestamp")
    write_timestamp = reader.int64("writeTimestamp")
    batches = _read_state_batches(reader)
    count = _read_delivery_complete_count(reader)
    return ShareSnapshotValue(snapshot_epoch, state_epoch, leader_epoch, start_offset, create_timestamp,
                              write_timestamp, batches, count)


def _read_update(reader: SchemaReader) -> ShareUpdateValue:
    snapshot_epoch = reader.int32("snapshotEpoch")
    leader_epoch = reader.int32("leaderEpoch")
    start_offset = reader.int64("startOffset")
    batches = _read_state_batches(reader)
    count = _read_delivery_complete_count(reader)
    return ShareUpdateValue(snapshot_epoch, leader_epoch, start_offset, batches, count)


_READERS: dict[type, Callable[[SchemaReader], ShareValue]] = {
    ShareGroupMemberMetadataValue: _read_member_metadata,
    ShareGroupMetadataValue: _read_group_metadata,
    ShareGroupTargetAssignmentMetadataValue: _read_target_metadata,
    ShareGroupTargetAssignmentMemberValue: _read_target_member,
    ShareGroupCurrentMemberAssignmentValue: _read_current_assignment,
    ShareGroupStatePartitionMetadataValue: _read_state_partition_metadata,
    ShareSnapshotValue: _read_snapshot,
    ShareUpdateValue: _read_update,
}
