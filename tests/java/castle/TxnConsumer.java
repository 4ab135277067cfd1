package castle;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * A consumer (read_committed unless {@code isolation=read_uncommitted}) of every partition of
 * {@code topic} from the beginning, with no group: prints {@code RECORD <partition> <offset>
 * <key> <value>} for each record, until {@code expect} records came and then {@code settle-ms}
 * more passed (to show nothing else comes), or {@code timeout-ms} passed. Then, per partition,
 * {@code END <partition> <end offset>} (for read_committed the end offset is the last stable
 * offset) and {@code POSITION <partition> <position>}, and {@code DONE <records>}.
 */
public final class TxnConsumer {
    private TxnConsumer() {
    }

    public static void main(String[] argv) {
        Args args = new Args(argv);
        String topic = args.get("topic");
        int expect = args.getInt("expect", Integer.MAX_VALUE);
        long settleMs = args.getInt("settle-ms", 1000);
        long timeoutMs = args.getInt("timeout-ms", 30000);
        Properties defaults = new Properties();
        defaults.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, args.get("bootstrap"));
        defaults.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, args.get("isolation", "read_committed"));
        defaults.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        defaults.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        defaults.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(args.clientConfigs(defaults))) {
            List<TopicPartition> partitions = new ArrayList<>();
            for (PartitionInfo info : consumer.partitionsFor(topic, Duration.ofMillis(timeoutMs))) {
                partitions.add(new TopicPartition(topic, info.partition()));
            }
            partitions.sort((a, b) -> Integer.compare(a.partition(), b.partition()));
            consumer.assign(partitions);
            consumer.seekToBeginning(partitions);
            long deadline = System.currentTimeMillis() + timeoutMs;
            long settleUntil = Long.MAX_VALUE;
            int count = 0;
            while (System.currentTimeMillis() < Math.min(deadline, settleUntil)) {
                for (ConsumerRecord<String, String> record : consumer.poll(Duration.ofMillis(100))) {
                    Out.line("RECORD " + record.partition() + " " + record.offset() + " " + record.key() + " "
                            + record.value());
                    count++;
                }
                if (count >= expect && settleUntil == Long.MAX_VALUE) {
                    settleUntil = System.currentTimeMillis() + settleMs;
                }
            }
            Map<TopicPartition, Long> ends = consumer.endOffsets(partitions);
            for (TopicPartition partition : partitions) {
                Out.line("END " + partition.partition() + " " + ends.get(partition));
                Out.line("POSITION " + partition.partition() + " " + consumer.position(partition));
            }
            Out.line("DONE " + count);
        }
    }
}
