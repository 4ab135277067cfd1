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
import org.apache.kafka.coordinator.group.GroupCoordinatorRecordSerde;
import org.apache.kafka.coordinator.group.generated.ConsumerGroupCurrentMemberAssignmentKey;
import org.apache.kafka.coordinator.group.generated.ConsumerGroupCurrentMemberAssignmentValue;
import org.apache.kafka.coordinator.group.generated.ConsumerGroupMemberMetadataKey;
import org.apache.kafka.coordinator.group.generated.ConsumerGroupMemberMetadataValue;
import org.apache.kafka.coordinator.group.generated.ConsumerGroupMetadataKey;
import org.apache.kafka.coordinator.group.generated.ConsumerGroupMetadataValue;
import org.apache.kafka.coordinator.group.generated.ConsumerGroupPartitionMetadataKey;
import org.apache.kafka.coordinator.group.generated.ConsumerGroupPartitionMetadataValue;
import org.apache.kafka.coordinator.group.generated.ConsumerGroupRegularExpressionKey;
import org.apache.kafka.coordinator.group.generated.ConsumerGroupRegularExpressionValue;
import org.apache.kafka.coordinator.group.generated.ConsumerGroupTargetAssignmentMemberKey;
import org.apache.kafka.coordinator.group.generated.ConsumerGroupTargetAssignmentMemberValue;
import org.apache.kafka.coordinator.group.generated.ConsumerGroupTargetAssignmentMetadataKey;
import org.apache.kafka.coordinator.group.generated.ConsumerGroupTargetAssignmentMetadataValue;
import org.apache.kafka.server.common.ApiMessageAndVersion;

/**
 * Kafka's own serializer of __consumer_offsets records (GroupCoordinatorRecordSerde, what the
 * group coordinator writes and its loader reads), for tests of Castle's consumer group records.
 *
 * First prints "GOLDEN name keyhex valuehex" (valuehex "-" for a tombstone) for records built here
 * from Kafka's generated classes, field by field. Then reads "keyhex valuehex" lines on stdin until
 * its end, and answers each with "READ keyhex valuehex": the record deserialized by Kafka and
 * serialized again, or "ERROR message" when Kafka cannot read it.
 */
public final class ConsumerGroupRecords {
    private static final GroupCoordinatorRecordSerde SERDE = new GroupCoordinatorRecordSerde();
    private static final HexFormat HEX = HexFormat.of();
    private static final Uuid TOPIC_A = new Uuid(0x0011223344556677L, 0x8899aabbccddeeffL);
    private static final Uuid TOPIC_B = new Uuid(0xffeeddccbbaa9988L, 0x7766554433221100L);

    private static void golden(String name, ApiMessage key, ApiMessage value) {
        CoordinatorRecord record = value == null
            ? CoordinatorRecord.tombstone(key)
            : CoordinatorRecord.record(key, new ApiMessageAndVersion(value, (short) 0));
        byte[] valueBytes = SERDE.serializeValue(record);
        System.out.println("GOLDEN " + name + " " + HEX.formatHex(SERDE.serializeKey(record)) + " "
            + (valueBytes == null ? "-" : HEX.formatHex(valueBytes)));
    }

    private static void goldens() {
        golden("metadata", new ConsumerGroupMetadataKey().setGroupId("g"),
            new ConsumerGroupMetadataValue().setEpoch(3).setMetadataHash(-5));
        golden("partition-metadata", new ConsumerGroupPartitionMetadataKey().setGroupId("g"),
            new ConsumerGroupPartitionMetadataValue().setTopics(List.of(
                new ConsumerGroupPartitionMetadataValue.TopicMetadata().setTopicId(TOPIC_A).setTopicName("orders")
                    .setNumPartitions(6),
                new ConsumerGroupPartitionMetadataValue.TopicMetadata().setTopicId(TOPIC_B).setTopicName("b")
                    .setNumPartitions(1).setPartitionMetadata(List.of(
                        new ConsumerGroupPartitionMetadataValue.PartitionMetadata().setPartition(0)
                            .setRacks(List.of("a", "b")))))));
        golden("member-metadata", new ConsumerGroupMemberMetadataKey().setGroupId("g").setMemberId("m"),
            new ConsumerGroupMemberMetadataValue().setInstanceId("inst").setRackId("rack").setClientId("client")
                .setClientHost("/10.0.0.1").setSubscribedTopicNames(List.of("a", "b")).setSubscribedTopicRegex("x.*")
                .setRebalanceTimeoutMs(45000).setServerAssignor("range")
                .setClassicMemberMetadata(new ConsumerGroupMemberMetadataValue.ClassicMemberMetadata()
                    .setSessionTimeoutMs(10000).setSupportedProtocols(List.of(
                        new ConsumerGroupMemberMetadataValue.ClassicProtocol().setName("range")
                            .setMetadata("m".getBytes(StandardCharsets.UTF_8)),
                        new ConsumerGroupMemberMetadataValue.ClassicProtocol().setName("sticky")
                            .setMetadata(new byte[0])))));
        golden("target-metadata", new ConsumerGroupTargetAssignmentMetadataKey().setGroupId("g"),
            new ConsumerGroupTargetAssignmentMetadataValue().setAssignmentEpoch(4).setAssignmentTimestamp(99));
        golden("target-member", new ConsumerGroupTargetAssignmentMemberKey().setGroupId("g").setMemberId("m"),
            new ConsumerGroupTargetAssignmentMemberValue().setTopicPartitions(List.of(
                new ConsumerGroupTargetAssignmentMemberValue.TopicPartition().setTopicId(TOPIC_A)
                    .setPartitions(List.of(0, 1, 2)),
                new ConsumerGroupTargetAssignmentMemberValue.TopicPartition().setTopicId(TOPIC_B))));
        golden("current-assignment", new ConsumerGroupCurrentMemberAssignmentKey().setGroupId("g").setMemberId("m"),
            new ConsumerGroupCurrentMemberAssignmentValue().setMemberEpoch(5).setPreviousMemberEpoch(4)
                .setState((byte) 2)
                .setAssignedPartitions(List.of(new ConsumerGroupCurrentMemberAssignmentValue.TopicPartitions()
                    .setTopicId(TOPIC_A).setPartitions(List.of(0)).setAssignmentEpochs(List.of(5))))
                .setPartitionsPendingRevocation(List.of(new ConsumerGroupCurrentMemberAssignmentValue.TopicPartitions()
                    .setTopicId(TOPIC_B).setPartitions(List.of(1, 2)))));
        golden("regular-expression",
            new ConsumerGroupRegularExpressionKey().setGroupId("g").setRegularExpression("^t.*$"),
            new ConsumerGroupRegularExpressionValue().setTopics(List.of("t1")).setVersion(7).setTimestamp(8));
        // A consumer-protocol member as Kafka's record helpers write it: no classic metadata.
        golden("member-metadata-consumer", new ConsumerGroupMemberMetadataKey().setGroupId("g").setMemberId("m"),
            new ConsumerGroupMemberMetadataValue().setInstanceId(null).setRackId(null).setClientId("c").setClientHost("/h")
                .setSubscribedTopicRegex(null)
                .setSubscribedTopicNames(List.of("t")).setRebalanceTimeoutMs(300000).setServerAssignor("uniform")
                .setClassicMemberMetadata(null));
        golden("current-assignment-empty-epochs",
            new ConsumerGroupCurrentMemberAssignmentKey().setGroupId("g").setMemberId("m"),
            new ConsumerGroupCurrentMemberAssignmentValue().setMemberEpoch(1).setAssignedPartitions(List.of(
                new ConsumerGroupCurrentMemberAssignmentValue.TopicPartitions().setTopicId(TOPIC_A)
                    .setPartitions(List.of(3)).setAssignmentEpochs(List.of()))));
        golden("current-assignment-null-epochs",
            new ConsumerGroupCurrentMemberAssignmentKey().setGroupId("g").setMemberId("m"),
            new ConsumerGroupCurrentMemberAssignmentValue().setMemberEpoch(1).setAssignedPartitions(List.of(
                new ConsumerGroupCurrentMemberAssignmentValue.TopicPartitions().setTopicId(TOPIC_A)
                    .setPartitions(List.of(3)).setAssignmentEpochs(null))));
        golden("metadata-tombstone", new ConsumerGroupMetadataKey().setGroupId("g"), null);
    }

    public static void main(String[] args) throws Exception {
        goldens();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            String[] words = line.trim().split(" ");
            try {
                ByteBuffer value = words[1].equals("-") ? null : ByteBuffer.wrap(HEX.parseHex(words[1]));
                CoordinatorRecord record = SERDE.deserialize(ByteBuffer.wrap(HEX.parseHex(words[0])), value);
                byte[] valueBytes = SERDE.serializeValue(record);
                System.out.println("READ " + HEX.formatHex(SERDE.serializeKey(record)) + " "
                    + (valueBytes == null ? "-" : HEX.formatHex(valueBytes)));
            } catch (RuntimeException e) {
                System.out.println("ERROR " + String.valueOf(e.getMessage()).replace('\n', ' '));
            }
        }
    }
}
