"""The ``__consumer_offsets`` records of the ``consumer`` group protocol (KIP-848), in Kafka's
own key and value schemas.

Byte for byte what Apache Kafka 4.x's group coordinator writes, so a consumer group can be
persisted here and replayed, and a topic Kafka wrote can be read. The schemas are
apache/kafka's group-coordinator/src/main/resources/common/message/ConsumerGroup*{Key,Value}.json
(as shipped in the 4.4 group-coordinator jar). Like the classic records
(offsets_schema.py), a key starts with an int16 record type (Kafka's "apiKey" of the
coordinator-key schema) and a value with an int16 version; a null value is a tombstone::

    type  key fields                    value
    3     groupId                       ConsumerGroupMetadataValue: epoch int32;
                                        tag 0 metadataHash int64 (default 0)
    4     groupId                       ConsumerGroupPartitionMetadataValue: topics
                                        [topicId uuid, topicName string, numPartitions int32,
                                         partitionMetadata [partition int32, racks [string]]]
    5     groupId, memberId             ConsumerGroupMemberMetadataValue: instanceId string?,
                                        rackId string?, clientId string, clientHost string,
                                        subscribedTopicNames [string], subscribedTopicRegex
                                        string?, rebalanceTimeoutMs int32, serverAssignor
                                        string?; tag 0 classicMemberMetadata {sessionTimeoutMs
                                        int32, supportedProtocols [name string, metadata bytes]}?
    6     groupId                       ConsumerGroupTargetAssignmentMetadataValue:
                                        assignmentEpoch int32; tag 0 assignmentTimestamp int64
    7     groupId, memberId             ConsumerGroupTargetAssignmentMemberValue:
                                        topicPartitions [topicId uuid, partitions [int32]]
    8     groupId, memberId             ConsumerGroupCurrentMemberAssignmentValue: memberEpoch
                                        int32, previousMemberEpoch int32, state int8,
                                        assignedPartitions and partitionsPendingRevocation, each
                                        [topicId uuid, partitions [int32]; tag 0
                                        assignmentEpochs [int32]?]
    16    groupId, regularExpression    ConsumerGroupRegularExpressionValue: topics [string],
                                        version int64, timestamp int64

Keys are not flexible (int16-length strings). Every value has one version, 0, and it is
flexible: compact strings, bytes and arrays, a uuid as its 16 bytes, and a tagged-field
section after every struct (each array element and the value itself); see offsets_schema.py
for those encodings.

Tagged fields are written as Kafka's generated classes write them: when they differ from
the class's default. For metadataHash and assignmentTimestamp that is 0. For
classicMemberMetadata and assignmentEpochs the schemas say "default": null, but the
generated classes start with an empty struct (every field zero or empty) and an empty
array: an empty one is left out, and a null is written (tag 0, size 1, a 0 byte meaning
null) and read back as null. Kafka's record helpers write a null classicMemberMetadata for
every member of the consumer protocol, and 4.4's write the assignment epochs of every
topic. Here None is that null and the dataclass defaults are the generated classes'
defaults, so every value reads back as it was written, and a record without the tag reads
as the empty struct or array, as in Kafka.

Reading: a value version newer than 0 is read as version 0 is, as Kafka's generated
readers do: unknown tagged fields are skipped and bytes after the known fields left
unread. Version 0 must end after its last field; a record cut short raises
OffsetsSchemaError, and so does a known tag whose data is not exactly its size.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Callable, ClassVar, Union

from coordination.groups.offsets_schema import (
    INT8,
    INT16,
    INT32,
    INT64,
    Buffer,
    SchemaReader,
)
from coordination.groups.record_codec import TAG_0, RecordWriter, read_int32_array, read_tags, read_uuid

VALUE_VERSION = 0  # the only version of every value; flexible; every tagged field is tag 0


# --- keys -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ConsumerGroupMetadataKey:
    RECORD_TYPE: ClassVar[int] = 3
    group_id: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupPartitionMetadataKey:
    """Replaced by ConsumerGroupMetadataValue.metadataHash in Kafka 4.1 (KIP-1101); kept to
    read logs that hold it."""

    RECORD_TYPE: ClassVar[int] = 4
    group_id: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupMemberMetadataKey:
    RECORD_TYPE: ClassVar[int] = 5
    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMetadataKey:
    RECORD_TYPE: ClassVar[int] = 6
    group_id: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMemberKey:
    RECORD_TYPE: ClassVar[int] = 7
    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupCurrentMemberAssignmentKey:
    RECORD_TYPE: ClassVar[int] = 8
    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupRegularExpressionKey:
    RECORD_TYPE: ClassVar[int] = 16
    group_id: str
    regular_expression: str


# --- values -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ConsumerGroupMetadataValue:
    epoch: int
    metadata_hash: int = 0  # tagged; 0: not written (Kafka before 4.1 never writes it)


@dataclass(frozen=True, slots=True)
class PartitionRacks:
    partition: int
    racks: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class TopicMetadata:
    topic_id: uuid.UUID
    topic_name: str
    num_partitions: int
    partition_metadata: tuple[PartitionRacks, ...] = ()  # unused by Kafka since 4.0: empty


@dataclass(frozen=True, slots=True)
class ConsumerGroupPartitionMetadataValue:
    topics: tuple[TopicMetadata, ...]


@dataclass(frozen=True, slots=True)
class ClassicProtocol:
    name: str
    metadata: bytes


@dataclass(frozen=True, slots=True)
class ClassicMemberMetadata:
    """What a member that joined with the classic protocol (JoinGroup) supports."""

    session_timeout_ms: int
    supported_protocols: tuple[ClassicProtocol, ...]


EMPTY_CLASSIC_MEMBER_METADATA = ClassicMemberMetadata(0, ())
"""The generated class's default: what a record without the tag reads as."""


@dataclass(frozen=True, slots=True)
class ConsumerGroupMemberMetadataValue:
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None
    # Tagged. None (null) for a member of the consumer protocol, as Kafka writes it.
    classic_member_metadata: ClassicMemberMetadata | None = None


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMetadataValue:
    assignment_epoch: int
    assignment_timestamp: int = 0  # tagged; 0: not written


@dataclass(frozen=True, slots=True)
class TargetTopicPartitions:
    """One topic's partitions in a member's target assignment."""

    topic_id: uuid.UUID
    partitions: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMemberValue:
    topic_partitions: tuple[TargetTopicPartitions, ...]


@dataclass(frozen=True, slots=True)
class CurrentTopicPartitions:
    """One topic's partitions in a member's current assignment; ``assignment_epochs``, when
    set, holds the epoch each partition was assigned at, in the order of ``partitions``."""

    topic_id: uuid.UUID
    partitions: tuple[int, ...]
    assignment_epochs: tuple[int, ...] | None = ()  # tagged; () is not written, None (null) is


@dataclass(frozen=True, slots=True)
class ConsumerGroupCurrentMemberAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    state: int  # Kafka's MemberState id (0 stable, 1 unrevoked partitions, 2 unreleased partitions)
    assigned_partitions: tuple[CurrentTopicPartitions, ...]
    partitions_pending_revocation: tuple[CurrentTopicPartitions, ...]


@dataclass(frozen=True, slots=True)
class ConsumerGroupRegularExpressionValue:
    """The topics a subscribed regular expression resolved to, at which metadata version and when."""

    topics: tuple[str, ...]
    version: int
    timestamp: int


ConsumerGroupKey = Union[
    ConsumerGroupMetadataKey, ConsumerGroupPartitionMetadataKey, ConsumerGroupMemberMetadataKey,
    ConsumerGroupTargetAssignmentMetadataKey, ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupCurrentMemberAssignmentKey, ConsumerGroupRegularExpressionKey,
]
ConsumerGroupValue = Union[
    ConsumerGroupMetadataValue, ConsumerGroupPartitionMetadataValue, ConsumerGroupMemberMetadataValue,
    ConsumerGroupTargetAssignmentMetadataValue, ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupCurrentMemberAssignmentValue, ConsumerGroupRegularExpressionValue,
]

_KEY_FIELDS: dict[int, tuple[type, tuple[str, ...]]] = {
    ConsumerGroupMetadataKey.RECORD_TYPE: (ConsumerGroupMetadataKey, ("groupId",)),
    ConsumerGroupPartitionMetadataKey.RECORD_TYPE: (ConsumerGroupPartitionMetadataKey, ("groupId",)),
    ConsumerGroupMemberMetadataKey.RECORD_TYPE: (ConsumerGroupMemberMetadataKey, ("groupId", "memberId")),
    ConsumerGroupTargetAssignmentMetadataKey.RECORD_TYPE: (ConsumerGroupTargetAssignmentMetadataKey, ("groupId",)),
    ConsumerGroupTargetAssignmentMemberKey.RECORD_TYPE: (ConsumerGroupTargetAssignmentMemberKey, ("groupId", "memberId")),
    ConsumerGroupCurrentMemberAssignmentKey.RECORD_TYPE: (ConsumerGroupCurrentMemberAssignmentKey, ("groupId", "memberId")),
    ConsumerGroupRegularExpressionKey.RECORD_TYPE: (ConsumerGroupRegularExpressionKey, ("groupId", "regularExpression")),
}
RECORD_TYPES = frozenset(_KEY_FIELDS)
"""The key types (record types) of this module; offsets_schema.decode_key returns None for them."""

VALUE_OF_KEY: dict[type, type] = {  # the value class of each key class
    ConsumerGroupMetadataKey: ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataKey: ConsumerGroupPartitionMetadataValue,
    ConsumerGroupMemberMetadataKey: ConsumerGroupMemberMetadataValue,
    ConsumerGroupTargetAssignmentMetadataKey: ConsumerGroupTargetAssignmentMetadataValue,
    ConsumerGroupTargetAssignmentMemberKey: ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupCurrentMemberAssignmentKey: ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupRegularExpressionKey: ConsumerGroupRegularExpressionValue,
}


# --- writing ----------------------------------------------------------------------------


def encode_key(key: ConsumerGroupKey) -> bytes:
    """The key as Kafka writes it: int16 record type, then its strings (int16 lengths)."""
    if type(key) not in VALUE_OF_KEY:
        raise TypeError(f"not a consumer group record key: {key!r}")
    writer = RecordWriter()
    writer.out += INT16.pack(key.RECORD_TYPE)
    writer.string(key.group_id, "groupId")
    if isinstance(key, (ConsumerGroupMemberMetadataKey, ConsumerGroupTargetAssignmentMemberKey,
                        ConsumerGroupCurrentMemberAssignmentKey)):
        writer.string(key.member_id, "memberId")
    elif isinstance(key, ConsumerGroupRegularExpressionKey):
        writer.string(key.regular_expression, "regularExpression")
    return bytes(writer.out)


def encode_value(value: ConsumerGroupValue) -> bytes:
    """The value (version 0, the only one) as Kafka writes it."""
    writer = RecordWriter()
    writer.out += INT16.pack(VALUE_VERSION)
    if isinstance(value, ConsumerGroupMetadataValue):
        writer.fixed(INT32, value.epoch, "epoch")
        tags = []
        if value.metadata_hash != 0:
            tags.append((TAG_0, writer.sub(lambda w: w.fixed(INT64, value.metadata_hash, "metadataHash"))))
        writer.tagged(tags)
    elif isinstance(value, ConsumerGroupPartitionMetadataValue):
        _write_partition_metadata(writer, value)
    elif isinstance(value, ConsumerGroupMemberMetadataValue):
        _write_member_metadata(writer, value)
    elif isinstance(value, ConsumerGroupTargetAssignmentMetadataValue):
        writer.fixed(INT32, value.assignment_epoch, "assignmentEpoch")
        tags = []
        if value.assignment_timestamp != 0:
            tags.append((TAG_0, writer.sub(lambda w: w.fixed(INT64, value.assignment_timestamp, "assignmentTimestamp"))))
        writer.tagged(tags)
    elif isinstance(value, ConsumerGroupTargetAssignmentMemberValue):
        writer.count(len(value.topic_partitions), "topicPartitions")
        for topic in value.topic_partitions:
            writer.uuid(topic.topic_id)
            writer.int32_array(topic.partitions, "partitions")
            writer.no_tags()
        writer.no_tags()
    elif isinstance(value, ConsumerGroupCurrentMemberAssignmentValue):
        writer.fixed(INT32, value.member_epoch, "memberEpoch")
        writer.fixed(INT32, value.previous_member_epoch, "previousMemberEpoch")
        writer.fixed(INT8, value.state, "state")
        _write_current_partitions(writer, value.assigned_partitions, "assignedPartitions")
        _write_current_partitions(writer, value.partitions_pending_revocation, "partitionsPendingRevocation")
        writer.no_tags()
    elif isinstance(value, ConsumerGroupRegularExpressionValue):
        writer.count(len(value.topics), "topics")
        for topic_name in value.topics:
            writer.compact_string(topic_name, "topics")
        writer.fixed(INT64, value.version, "version")
        writer.fixed(INT64, value.timestamp, "timestamp")
        writer.no_tags()
    else:
        raise TypeError(f"not a consumer group record value: {value!r}")
    return bytes(writer.out)


def _write_partition_metadata(writer: RecordWriter, value: ConsumerGroupPartitionMetadataValue) -> None:
    writer.count(len(value.topics), "topics")
    for topic in value.topics:
        writer.uuid(topic.topic_id)
        writer.compact_string(topic.topic_name, "topicName")
        writer.fixed(INT32, topic.num_partitions, "numPartitions")
        writer.count(len(topic.partition_metadata), "partitionMetadata")
        for partition in topic.partition_metadata:
            writer.fixed(INT32, partition.partition, "partition")
            writer.count(len(partition.racks), "racks")
            for rack in partition.racks:
                writer.compact_string(rack, "racks")
            writer.no_tags()
        writer.no_tags()
    writer.no_tags()


def _write_member_metadata(writer: RecordWriter, value: ConsumerGroupMemberMetadataValue) -> None:
    writer.compact_string(value.instance_id, "instanceId")
    writer.compact_string(value.rack_id, "rackId")
    writer.compact_string(value.client_id, "clientId")
    writer.compact_string(value.client_host, "clientHost")
    writer.count(len(value.subscribed_topic_names), "subscribedTopicNames")
    for name in value.subscribed_topic_names:
        writer.compact_string(name, "subscribedTopicNames")
    writer.compact_string(value.subscribed_topic_regex, "subscribedTopicRegex")
    writer.fixed(INT32, value.rebalance_timeout_ms, "rebalanceTimeoutMs")
    writer.compact_string(value.server_assignor, "serverAssignor")
    classic = value.classic_member_metadata
    if classic is None:
        writer.tagged([(TAG_0, b"\x00")])  # not the generated class's default: written
    elif classic == EMPTY_CLASSIC_MEMBER_METADATA:
        writer.tagged([])
    else:
        writer.tagged([(TAG_0, writer.sub(lambda w: _write_classic(w, classic)))])


def _write_classic(writer: RecordWriter, classic: ClassicMemberMetadata) -> None:
    writer.uvarint(1)  # a nullable struct's "present" marker
    writer.fixed(INT32, classic.session_timeout_ms, "sessionTimeoutMs")
    writer.count(len(classic.supported_protocols), "supportedProtocols")
    for protocol in classic.supported_protocols:
        writer.compact_string(protocol.name, "name")
        writer.compact_bytes(protocol.metadata, "metadata")
        writer.no_tags()
    writer.no_tags()


def _write_current_partitions(writer: RecordWriter, topics: tuple[CurrentTopicPartitions, ...], field: str) -> None:
    writer.count(len(topics), field)
    for topic in topics:
        writer.uuid(topic.topic_id)
        writer.int32_array(topic.partitions, "partitions")
        epochs = topic.assignment_epochs
        if epochs is None:
            writer.tagged([(TAG_0, b"\x00")])  # a compact null array
        elif not epochs:
            writer.tagged([])
        else:
            writer.tagged([(TAG_0, writer.sub(lambda w: w.int32_array(epochs, "assignmentEpochs")))])


# --- reading ----------------------------------------------------------------------------


def decode_key(data: Buffer) -> ConsumerGroupKey | None:
    """The key of a consumer group record; None for any other record type (offset commits,
    classic groups, share and streams groups)."""
    reader = SchemaReader(data, "__consumer_offsets key")
    record_type = reader.int16("key type")
    known = _KEY_FIELDS.get(record_type)
    if known is None:
        return None
    key_class, fields = known
    reader.what = key_class.__name__
    strings = [reader.string(field, False) for field in fields]
    reader.finish()
    key: ConsumerGroupKey = key_class(*strings)
    return key


def decode_record(key_data: Buffer, value_data: Buffer | None) -> tuple[ConsumerGroupKey, ConsumerGroupValue | None] | None:
    """The typed key and value (None: a tombstone) of a consumer group record; None when
    the key is of another record type."""
    key = decode_key(key_data)
    if key is None:
        return None
    if value_data is None:
        return key, None
    return key, decode_value(type(key), value_data)


def decode_value(key_class: type, data: Buffer) -> ConsumerGroupValue:
    """The value of a record whose key is of ``key_class``."""
    value_class = VALUE_OF_KEY.get(key_class)
    if value_class is None:
        raise TypeError(f"not a consumer group record key class: {key_class!r}")
    reader = SchemaReader(data, value_class.__name__)
    version = reader.int16("version")
    if version < VALUE_VERSION:
        raise reader.fail(f"unknown version {version}")
    reader.what = f"{value_class.__name__} v{version}"
    value = _READERS[value_class](reader)
    if version == VALUE_VERSION:
        reader.finish()
    return value


def _read_group_metadata(reader: SchemaReader) -> ConsumerGroupMetadataValue:
    epoch = reader.int32("epoch")
    metadata_hash = 0

    def read_hash(tag: SchemaReader) -> None:
        nonlocal metadata_hash
        metadata_hash = tag.int64("metadataHash")

    read_tags(reader, read_hash)
    return ConsumerGroupMetadataValue(epoch, metadata_hash)


def _read_partition_metadata(reader: SchemaReader) -> ConsumerGroupPartitionMetadataValue:
    topics = []
    for _ in range(reader.array_count("topics", True)):
        topic_id = read_uuid(reader, "topicId")
        topic_name = reader.string("topicName", True)
        num_partitions = reader.int32("numPartitions")
        partitions = []
        for _ in range(reader.array_count("partitionMetadata", True)):
            partition = reader.int32("partition")
            racks = tuple(reader.string("racks", True) for _ in range(reader.array_count("racks", True)))
            read_tags(reader)
            partitions.append(PartitionRacks(partition, racks))
        read_tags(reader)
        topics.append(TopicMetadata(topic_id, topic_name, num_partitions, tuple(partitions)))
    read_tags(reader)
    return ConsumerGroupPartitionMetadataValue(tuple(topics))


def _read_member_metadata(reader: SchemaReader) -> ConsumerGroupMemberMetadataValue:
    instance_id = reader.nullable_string("instanceId", True)
    rack_id = reader.nullable_string("rackId", True)
    client_id = reader.string("clientId", True)
    client_host = reader.string("clientHost", True)
    names = tuple(reader.string("subscribedTopicNames", True)
                  for _ in range(reader.array_count("subscribedTopicNames", True)))
    regex = reader.nullable_string("subscribedTopicRegex", True)
    rebalance_timeout = reader.int32("rebalanceTimeoutMs")
    server_assignor = reader.nullable_string("serverAssignor", True)
    classic: ClassicMemberMetadata | None = EMPTY_CLASSIC_MEMBER_METADATA  # when the tag is absent

    def read_classic(tag: SchemaReader) -> None:
        nonlocal classic
        if tag.uvarint("classicMemberMetadata marker") == 0:  # 0 is null (Kafka reads any marker but > 0 as null)
            classic = None
            return
        session_timeout = tag.int32("sessionTimeoutMs")
        protocols = []
        for _ in range(tag.array_count("supportedProtocols", True)):
            name = tag.string("name", True)
            metadata = tag.bytes_("metadata", True)
            read_tags(tag)
            protocols.append(ClassicProtocol(name, metadata))
        read_tags(tag)
        classic = ClassicMemberMetadata(session_timeout, tuple(protocols))

    read_tags(reader, read_classic)
    return ConsumerGroupMemberMetadataValue(instance_id, rack_id, client_id, client_host, names, regex,
                                            rebalance_timeout, server_assignor, classic)


def _read_target_metadata(reader: SchemaReader) -> ConsumerGroupTargetAssignmentMetadataValue:
    epoch = reader.int32("assignmentEpoch")
    timestamp = 0

    def read_timestamp(tag: SchemaReader) -> None:
        nonlocal timestamp
        timestamp = tag.int64("assignmentTimestamp")

    read_tags(reader, read_timestamp)
    return ConsumerGroupTargetAssignmentMetadataValue(epoch, timestamp)


def _read_target_member(reader: SchemaReader) -> ConsumerGroupTargetAssignmentMemberValue:
    topics = []
    for _ in range(reader.array_count("topicPartitions", True)):
        topic_id = read_uuid(reader, "topicId")
        partitions = read_int32_array(reader, "partitions")
        read_tags(reader)
        topics.append(TargetTopicPartitions(topic_id, partitions))
    read_tags(reader)
    return ConsumerGroupTargetAssignmentMemberValue(tuple(topics))


def _read_current_partitions(reader: SchemaReader, field: str) -> tuple[CurrentTopicPartitions, ...]:
    topics = []
    for _ in range(reader.array_count(field, True)):
        topic_id = read_uuid(reader, "topicId")
        partitions = read_int32_array(reader, "partitions")
        epochs: tuple[int, ...] | None = ()  # when the tag is absent

        def read_epochs(tag: SchemaReader) -> None:
            nonlocal epochs
            count = tag.nullable_array_count("assignmentEpochs", True)
            epochs = None if count < 0 else tuple(tag.int32("assignmentEpochs") for _ in range(count))

        read_tags(reader, read_epochs)
        topics.append(CurrentTopicPartitions(topic_id, partitions, epochs))
    return tuple(topics)


def _read_current_assignment(reader: SchemaReader) -> ConsumerGroupCurrentMemberAssignmentValue:
    member_epoch = reader.int32("memberEpoch")
    previous_epoch = reader.int32("previousMemberEpoch")
    state = reader.int8("state")
    assigned = _read_current_partitions(reader, "assignedPartitions")
    pending = _read_current_partitions(reader, "partitionsPendingRevocation")
    read_tags(reader)
    return ConsumerGroupCurrentMemberAssignmentValue(member_epoch, previous_epoch, state, assigned, pending)


def _read_regular_expression(reader: SchemaReader) -> ConsumerGroupRegularExpressionValue:
    topics = tuple(reader.string("topics", True) for _ in range(reader.array_count("topics", True)))
    version = reader.int64("version")
    timestamp = reader.int64("timestamp")
    read_tags(reader)
    return ConsumerGroupRegularExpressionValue(topics, version, timestamp)


_READERS: dict[type, Callable[[SchemaReader], ConsumerGroupValue]] = {
    ConsumerGroupMetadataValue: _read_group_metadata,
    ConsumerGroupPartitionMetadataValue: _read_partition_metadata,
    ConsumerGroupMemberMetadataValue: _read_member_metadata,
    ConsumerGroupTargetAssignmentMetadataValue: _read_target_metadata,
    ConsumerGroupTargetAssignmentMemberValue: _read_target_member,
    ConsumerGroupCurrentMemberAssignmentValue: _read_current_assignment,
    ConsumerGroupRegularExpressionValue: _read_regular_expression,
}
