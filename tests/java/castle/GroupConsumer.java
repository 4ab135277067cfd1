package castle;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.SubscriptionPattern;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * A member of consumer group {@code group}: subscribes to {@code topics} (comma separated) or to
 * {@code pattern}, a regular expression the group coordinator matches (RE2, KIP-848's
 * {@code SubscriptionPattern}; with {@code group.protocol=classic} the client matches it as a
 * Java regex instead, the only way that protocol has). The protocol is whatever
 * {@code group.protocol} says (Kafka's default: classic); {@code group.instance.id} makes the
 * member static. Every dotted word is a consumer config.
 *
 * <p>Prints {@code SUBSCRIBED}, then from the rebalance listener {@code ASSIGNED}, {@code REVOKED}
 * and {@code LOST} with the partitions that changed as {@code topic:partition} words (KIP-848 and
 * cooperative rebalances hand over deltas; an eager one revokes everything first), and
 * {@code RECORD <topic> <partition> <offset> <key> <value>} per record. With {@code commit=sync}
 * (the default) each poll's records are committed by {@code commitSync} before the next poll, so
 * a partition handed over carries on where this member stopped; the offsets committed are printed
 * as {@code COMMITTED topic:partition=offset ...}. {@code commit=none} commits nothing.
 *
 * <p>Stops after {@code records} records in all, or when none came for {@code idle-ms} (default
 * never), or on SIGTERM; then closes the consumer (it leaves the group) and prints
 * {@code DONE <records>}.
 */
public final class GroupConsumer {
    private GroupConsumer() {
    }

    public static void main(String[] argv) throws InterruptedException {
        Args args = new Args(argv);
        int limit = args.getInt("records", Integer.MAX_VALUE);
        long idleMs = Long.parseLong(args.get("idle-ms", Long.toString(Long.MAX_VALUE)));
        boolean commit = switch (args.get("commit", "sync")) {
            case "sync" -> true;
            case "none" -> false;
            default -> throw new IllegalArgumentException("commit: sync or none");
        };
        Properties defaults = new Properties();
        defaults.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, args.get("bootstrap"));
        defaults.put(ConsumerConfig.GROUP_ID_CONFIG, args.get("group"));
        defaults.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        defaults.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        defaults.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        defaults.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());

        KafkaConsumer<String, String> consumer = new KafkaConsumer<>(args.clientConfigs(defaults));
        CountDownLatch closed = new CountDownLatch(1);
        // SIGTERM: wake the poll up, then wait for the main thread's close (which leaves the group).
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            try {
                consumer.wakeup();
                closed.await();
            } catch (InterruptedException ignored) {
                Thread.currentThread().interrupt();
            }
        }));
        int count = 0;
        try {
            subscribe(consumer, args);
            Out.line("SUBSCRIBED");
            long lastRecord = System.currentTimeMillis();
            while (count < limit && System.currentTimeMillis() - lastRecord < idleMs) {
                ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(200));
                if (records.isEmpty()) {
                    continue;
                }
                lastRecord = System.currentTimeMillis();
                Map<TopicPartition, OffsetAndMetadata> next = new HashMap<>();
                for (ConsumerRecord<String, String> record : records) {
                    Out.line("RECORD " + record.topic() + " " + record.partition() + " " + record.offset() + " "
                            + record.key() + " " + record.value());
                    next.put(new TopicPartition(record.topic(), record.partition()),
                            new OffsetAndMetadata(record.offset() + 1));
                    count++;
                }
                if (commit) {
                    consumer.commitSync(next);
                    Out.line("COMMITTED" + offsets(next));
                }
            }
        } catch (WakeupException stopping) {
            // SIGTERM
        } finally {
            consumer.close();
            Out.line("DONE " + count);
            closed.countDown();
        }
    }

    private static void subscribe(KafkaConsumer<String, String> consumer, Args args) {
        ConsumerRebalanceListener listener = new ConsumerRebalanceListener() {
            @Override
            public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
                Out.line("ASSIGNED" + words(partitions));
            }

            @Override
            public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
                Out.line("REVOKED" + words(partitions));
            }

            @Override
            public void onPartitionsLost(Collection<TopicPartition> partitions) {
                Out.line("LOST" + words(partitions));
            }
        };
        String pattern = args.get("pattern", "");
        if (pattern.isEmpty()) {
            consumer.subscribe(Arrays.asList(args.get("topics").split(",")), listener);
        } else if ("classic".equalsIgnoreCase(args.clientConfigs(new Properties())
                .getProperty(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "classic"))) {
            consumer.subscribe(java.util.regex.Pattern.compile(pattern), listener);
        } else {
            consumer.subscribe(new SubscriptionPattern(pattern), listener);
        }
    }

    private static String words(Collection<TopicPartition> partitions) {
        List<TopicPartition> sorted = new ArrayList<>(partitions);
        sorted.sort((a, b) -> a.topic().equals(b.topic()) ? Integer.compare(a.partition(), b.partition())
                : a.topic().compareTo(b.topic()));
        StringBuilder out = new StringBuilder();
        for (TopicPartition partition : sorted) {
            out.append(' ').append(partition.topic()).append(':').append(partition.partition());
        }
        return out.toString();
    }

    private static String offsets(Map<TopicPartition, OffsetAndMetadata> next) {
        StringBuilder out = new StringBuilder();
        next.forEach((partition, offset) -> out.append(' ').append(partition.topic()).append(':')
                .append(partition.partition()).append('=').append(offset.offset()));
        return out.toString();
    }
}
