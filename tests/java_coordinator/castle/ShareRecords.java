package castle;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.HexFormat;
import java.util.List;

import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.protocol.ApiMessage;
import org.apache.kafka.coordinator.common.runtime.CoordinatorRecord;
import org.apache.kafka.coordinator.common.runtime.CoordinatorRecordSerde;
import org.apache.kafka.coordinator.group.GroupCoordinatorRecordSerde;
import org.apache.kafka.coordinator.group.generated.ShareGroupCurrentMemberAssignmentKey;
import org.apache.kafka.coordinator.group.generated.ShareGroupCurrentMemberAssignmentValue;
import org.apache.kafka.coordinator.group.generated.ShareGroupMemberMetadataKey;
import org.apache.kafka.coordinator.group.generated.ShareGroupMemberMetadataValue;
import org.apache.kafka.coordinator.group.generated.ShareGroupMetadataKey;
import org.apache.kafka.coordinator.group.generated.ShareGroupMetadataValue;
import org.apache.kafka.coordinator.group.generated.ShareGroupStatePartitionMetadataKey;
import org.apache.kafka.coordinator.group.generated.ShareGroupStatePartitionMetadataValue;
import org.apache.kafka.coordinator.group.generated.ShareGroupTargetAssignmentMemberKey;
import org.apache.kafka.coordinator.group.generated.ShareGroupTargetAssignmentMemberValue;
import org.apache.kafka.coordinator.group.generated.ShareGroupTargetAssignmentMetadataKey;
import org.apache.kafka.coordinator.group.generated.ShareGroupTargetAssignmentMetadataValue;
import org.apache.kafka.coordinator.share.ShareCoordinatorRecordSerde;
import org.apache.kafka.coordinator.share.generated.ShareSnapshotKey;
import org.apache.kafka.coordinator.share.generated.ShareSnapshotValue;
import org.apache.kafka.coordinator.share.generated.ShareUpdateKey;
import org.apache.kafka.coordinator.share.generated.ShareUpdateValue;
import org.apache.kafka.server.common.ApiMessageAndVersion;

/**
 * Kafka's own serializers of share group records, for tests of Castle's (coordination/share/records.py):
 * the group coordinator's GroupCoordinatorRecordSerde for the share group records of
 * __consumer_offsets ("group") and the share coordinator's ShareCoordinatorRecordSerde for the
 * share-partition state of __share_group_state ("state").
 *
 * First prints "GOLDEN name topic keyhex valuehex" (valuehex "-" for a tombstone) for records built
 * here from Kafka's generated classes, field by field. Then reads "topic keyhex valuehex" lines on
 * stdin until its end, and answers each with "READ keyhex valuehex": the record deserialized by
 * that topic's serde and serialized again, or "ERROR message" when Kafka cannot read it.
 */
public final class ShareRecords {
    private static final CoordinatorRecordSerde GROUP = new GroupCoordinatorRecordSerde();
    private static final CoordinatorRecordSerde STATE = new ShareCoordinatorRecordSerde();
    private static final HexFormat HEX = HexFormat.of();
    private static final Uuid TOPIC_A = new Uuid(0x0011223344556677L, 0x8899aabbccddeeffL);
    private static final Uuid TOPIC_B = new Uuid(0xffeeddccbbaa9988L, 0x7766554433221100L);

    private static CoordinatorRecordSerde serde(String topic) {
        return switch (topic) {
            case "group" -> GROUP;
            case "state" -> STATE;
            default -> throw new IllegalArgumentException("unknown topic " + topic);
        };
    }

    private static void golden(String name, String topic, ApiMessage key, ApiMessage value) {
        CoordinatorRecord record = value == null
            ? CoordinatorRecord.tombstone(key)
            : CoordinatorRecord.record(key, new ApiMessageAndVersion(value, (short) 0));
        byte[] valueBytes = serde(topic).serializeValue(record);
        System.out.println("GOLDEN " + name + " " + topic + " " + HEX.formatHex(serde(topic).serializeKey(record)) + " "
            + (valueBytes == null ? "-" : HEX.formatHex(valueBytes)));
    }

    private static void goldens() {
        golden("member-metadata", "group", new ShareGroupMemberMetadataKey().setGroupId("g").setMemberId("m"),
            new ShareGroupMemberMetadataValue().setRackId("rack").setClientId("client").setClientHost("/10.0.0.1")
                .setSubscribedTopicNames(List.of("a", "b")));
        golden("metadata", "group", new ShareGroupMetadataKey().setGroupId("g"),
            new ShareGroupMetadataValue().setEpoch(3).setMetadataHash(-5));
        golden("target-metadata", "group", new ShareGroupTargetAssignmentMetadataKey().setGroupId("g"),
            new ShareGroupTargetAssignmentMetadataValue().setAssignmentEpoch(4).setAssignmentTimestamp(99));
        golden("target-member", "group", new ShareGroupTargetAssignmentMemberKey().setGroupId("g").setMemberId("m"),
            new ShareGroupTargetAssignmentMemberValue().setTopicPartitions(List.of(
                new ShareGroupTargetAssignmentMemberValue.TopicPartition().setTopicId(TOPIC_A)
                    .setPartitions(List.of(0, 1, 2)),
                new ShareGroupTargetAssignmentMemberValue.TopicPartition().setTopicId(TOPIC_B))));
        golden("current-assignment", "group", new ShareGroupCurrentMemberAssignmentKey().setGroupId("g").setMemberId("m"),
            new ShareGroupCurrentMemberAssignmentValue().setMemberEpoch(5).setPreviousMemberEpoch(4).setState((byte) 0)
                .setAssignedPartitions(List.of(new ShareGroupCurrentMemberAssignmentValue.TopicPartitions()
                    .setTopicId(TOPIC_A).setPartitions(List.of(0, 7)))));
        golden("state-partition-metadata", "group", new ShareGroupStatePartitionMetadataKey().setGroupId("g"),
            new ShareGroupStatePartitionMetadataValue()
                .setInitializingTopics(List.of(new ShareGroupStatePartitionMetadataValue.TopicPartitionsInfo()
                    .setTopicId(TOPIC_A).setTopicName("orders").setPartitions(List.of(2))))
                .setInitializedTopics(List.of(new ShareGroupStatePartitionMetadataValue.TopicPartitionsInfo()
                    .setTopicId(TOPIC_A).setTopicName("orders").setPartitions(List.of(0, 1))))
                .setDeletingTopics(List.of(new ShareGroupStatePartitionMetadataValue.TopicInfo()
                    .setTopicId(TOPIC_B).setTopicName("gone"))));
        golden("snapshot", "state", new ShareSnapshotKey().setGroupId("g").setTopicId(TOPIC_A).setPartition(3),
            new ShareSnapshotValue().setSnapshotEpoch(2).setStateEpoch(1).setLeaderEpoch(7).setStartOffset(100)
                .setDeliveryCompleteCount(4).setCreateTimestamp(1_000).setWriteTimestamp(2_000)
                .setStateBatches(List.of(
                    new ShareSnapshotValue.StateBatch().setFirstOffset(100).setLastOffset(104)
                        .setDeliveryState((byte) 2).setDeliveryCount((short) 1),
                    new ShareSnapshotValue.StateBatch().setFirstOffset(105).setLastOffset(105)
                        .setDeliveryState((byte) 0).setDeliveryCount((short) 3))));
        golden("update", "state", new ShareUpdateKey().setGroupId("g").setTopicId(TOPIC_B).setPartition(0),
            new ShareUpdateValue().setSnapshotEpoch(2).setLeaderEpoch(7).setStartOffset(-1).setDeliveryCompleteCount(0)
                .setStateBatches(List.of(new ShareUpdateValue.StateBatch().setFirstOffset(110).setLastOffset(119)
                    .setDeliveryState((byte) 4).setDeliveryCount((short) 5))));
        // The defaults of the tagged fields, and a null rack: what a class left as built writes.
        golden("member-metadata-no-rack", "group", new ShareGroupMemberMetadataKey().setGroupId("g").setMemberId("m"),
            new ShareGroupMemberMetadataValue().setRackId(null).setClientId("c").setClientHost("/h"));
        golden("target-metadata-default", "group", new ShareGroupTargetAssignmentMetadataKey().setGroupId("g"),
            new ShareGroupTargetAssignmentMetadataValue().setAssignmentEpoch(4));
        golden("snapshot-default", "state", new ShareSnapshotKey().setGroupId("g").setTopicId(TOPIC_A).setPartition(0),
            new ShareSnapshotValue());
        golden("update-default", "state", new ShareUpdateKey().setGroupId("g").setTopicId(TOPIC_A).setPartition(0),
            new ShareUpdateValue().setStartOffset(-1));
        golden("metadata-tombstone", "group", new ShareGroupMetadataKey().setGroupId("g"), null);
        golden("snapshot-tombstone", "state",
            new ShareSnapshotKey().setGroupId("g").setTopicId(TOPIC_B).setPartition(1), null);
    }

    public static void main(String[] args) throws Exception {
        goldens();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            String[] words = line.trim().split(" ");
            try {
                CoordinatorRecordSerde serde = serde(words[0]);
                ByteBuffer value = words[2].equals("-") ? null : ByteBuffer.wrap(HEX.parseHex(words[2]));
                CoordinatorRecord record = serde.deserialize(ByteBuffer.wrap(HEX.parseHex(words[1])), value);
                byte[] valueBytes = serde.serializeValue(record);
                System.out.println("READ " + HEX.formatHex(serde.serializeKey(record)) + " "
                    + (valueBytes == null ? "-" : HEX.formatHex(valueBytes)));
            } catch (RuntimeException e) {
                System.out.println("ERROR " + String.valueOf(e.getMessage()).replace('\n', ' '));
            }
        }
    }
}
