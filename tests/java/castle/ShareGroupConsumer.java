package castle;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Arrays;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.CountDownLatch;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * A member of share group {@code group} (KIP-932, Kafka's {@code KafkaShareConsumer}): subscribes
 * to {@code topics} (comma separated) and polls. Every dotted word is a consumer config; the
 * default is {@code share.acknowledgement.mode=explicit}, where each record is acknowledged as its
 * value says:
 * <ul>
 * <li>{@code release-once-...}: RELEASE at its first delivery (the share-partition leader hands it
 * out again, delivery count 2), ACCEPT after;</li>
 * <li>{@code release-always-...}: RELEASE at every delivery (the leader archives it once the
 * delivery count reaches the group's delivery count limit);</li>
 * <li>{@code reject-...}: REJECT (archived, never delivered again);</li>
 * <li>anything else: ACCEPT.</li>
 * </ul>
 * With {@code commit=sync} (the default) each poll's acknowledgements are sent at once by
 * {@code commitSync} (ShareAcknowledge); with {@code commit=poll} they ride on the next poll's
 * ShareFetch. With {@code share.acknowledgement.mode=implicit} the consumer accepts each batch
 * itself at the next poll.
 *
 * <p>Prints one JSON object a line: {@code {"event":"subscribed"}}; per record delivered
 * {@code {"event":"record","topic":..,"partition":..,"offset":..,"key":..,"value":..,
 * "delivery_count":..,"ack":"ACCEPT"|"RELEASE"|"REJECT"|"IMPLICIT"|"HELD"}}; per acknowledgement
 * the broker answered (the acknowledgement commit callback, per partition)
 * {@code {"event":"acknowledged","topic":..,"partition":..,"offsets":[..],"error":null|".."}};
 * {@code {"event":"error","error":".."}} when a poll or commit throws; at the end
 * {@code {"event":"done","records":N}}.
 *
 * <p>{@code hold=true}: the first batch is printed (ack {@code HELD}) but never acknowledged and
 * the consumer stops polling, holding the records' acquisition locks until it is killed (a test
 * kills it with SIGKILL) or, on SIGTERM, closes (which releases them).
 *
 * <p>Stops after {@code records} records in all, when none came for {@code idle-ms} (default
 * never), on the line {@code close} on stdin, or on SIGTERM; then closes the consumer (it sends
 * what it has not acknowledged yet and leaves the group) and prints the done line.
 */
public final class ShareGroupConsumer {
    private ShareGroupConsumer() {
    }

    public static void main(String[] argv) throws InterruptedException {
        Args args = new Args(argv);
        int limit = args.getInt("records", Integer.MAX_VALUE);
        long idleMs = Long.parseLong(args.get("idle-ms", Long.toString(Long.MAX_VALUE)));
        long pollMs = Long.parseLong(args.get("poll-ms", "200"));
        boolean hold = Boolean.parseBoolean(args.get("hold", "false"));
        boolean commitSync = switch (args.get("commit", "sync")) {
            case "sync" -> true;
            case "poll" -> false;
            default -> throw new IllegalArgumentException("commit: sync or poll");
        };
        Properties defaults = new Properties();
        defaults.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, args.get("bootstrap"));
        defaults.put(ConsumerConfig.GROUP_ID_CONFIG, args.get("group"));
        defaults.put(ConsumerConfig.SHARE_ACKNOWLEDGEMENT_MODE_CONFIG, "explicit");
        defaults.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        defaults.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        Properties configs = args.clientConfigs(defaults);
        boolean explicit = "explicit".equals(configs.getProperty(ConsumerConfig.SHARE_ACKNOWLEDGEMENT_MODE_CONFIG));

        KafkaShareConsumer<String, String> consumer = new KafkaShareConsumer<>(configs);
        consumer.setAcknowledgementCommitCallback(ShareGroupConsumer::acknowledged);
        CountDownLatch closed = new CountDownLatch(1);
        CountDownLatch stop = new CountDownLatch(1);
        // SIGTERM: wake the poll up, then wait for the main thread's close (which leaves the group).
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            try {
                stop.countDown();
                consumer.wakeup();
                closed.await();
            } catch (InterruptedException ignored) {
                Thread.currentThread().interrupt();
            }
        }));
        watchStdin(consumer, stop);
        int count = 0;
        try {
            consumer.subscribe(Arrays.asList(args.get("topics").split(",")));
            Out.line("{\"event\":\"subscribed\"}");
            long lastRecord = System.currentTimeMillis();
            while (count < limit && System.currentTimeMillis() - lastRecord < idleMs && stop.getCount() > 0) {
                ConsumerRecords<String, String> records;
                try {
                    records = consumer.poll(Duration.ofMillis(pollMs));
                } catch (WakeupException stopping) {
                    break;
                } catch (RuntimeException failed) {
                    error(failed);
                    Thread.sleep(pollMs);
                    continue;
                }
                if (records.isEmpty()) {
                    continue;
                }
                lastRecord = System.currentTimeMillis();
                for (ConsumerRecord<String, String> record : records) {
                    String ack = hold ? "HELD" : explicit ? decide(record).name() : "IMPLICIT";
                    Out.line(recordLine(record, ack));
                    if (explicit && !hold) {
                        consumer.acknowledge(record, AcknowledgeType.valueOf(ack));
                    }
                    count++;
                }
                if (hold) {
                    Out.line("{\"event\":\"held\",\"records\":" + records.count() + "}");
                    stop.await();  // no poll, no acknowledgement: the locks stay ours until we die
                    break;
                }
                if (commitSync) {
                    try {
                        consumer.commitSync();
                    } catch (WakeupException stopping) {
                        break;
                    } catch (RuntimeException failed) {
                        error(failed);
                    }
                }
            }
        } finally {
            try {
                consumer.close();
            } catch (RuntimeException failed) {
                error(failed);
            }
            Out.line("{\"event\":\"done\",\"records\":" + count + "}");
            closed.countDown();
        }
    }

    private static AcknowledgeType decide(ConsumerRecord<String, String> record) {
        String value = record.value() == null ? "" : record.value();
        int deliveries = record.deliveryCount().map(Short::intValue).orElse(1);
        if (value.startsWith("reject-")) {
            return AcknowledgeType.REJECT;
        }
        if (value.startsWith("release-always-") || value.startsWith("release-once-") && deliveries == 1) {
            return AcknowledgeType.RELEASE;
        }
        return AcknowledgeType.ACCEPT;
    }

    /** The line {@code close} on stdin stops the loop as SIGTERM does; end of input does nothing. */
    private static void watchStdin(KafkaShareConsumer<String, String> consumer, CountDownLatch stop) {
        Thread reader = new Thread(() -> {
            try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
                String line;
                while ((line = in.readLine()) != null) {
                    if (line.trim().equals("close")) {
                        stop.countDown();
                        consumer.wakeup();
                        return;
                    }
                }
            } catch (IOException ignored) {
                // no stdin: SIGTERM still stops the program
            }
        }, "stdin");
        reader.setDaemon(true);
        reader.start();
    }

    private static void acknowledged(Map<TopicIdPartition, Set<Long>> offsets, Exception exception) {
        String error = exception == null ? "null" : quote(exception.getClass().getSimpleName() + ": "
                + exception.getMessage());
        offsets.forEach((partition, acked) -> Out.line("{\"event\":\"acknowledged\",\"topic\":"
                + quote(partition.topic()) + ",\"partition\":" + partition.partition() + ",\"offsets\":"
                + new TreeSet<>(acked) + ",\"error\":" + error + "}"));
    }

    private static String recordLine(ConsumerRecord<String, String> record, String ack) {
        return "{\"event\":\"record\",\"topic\":" + quote(record.topic()) + ",\"partition\":" + record.partition()
                + ",\"offset\":" + record.offset() + ",\"key\":" + quote(record.key()) + ",\"value\":"
                + quote(record.value()) + ",\"delivery_count\":"
                + record.deliveryCount().map(String::valueOf).orElse("null") + ",\"ack\":\"" + ack + "\"}";
    }

    private static void error(Exception failed) {
        Out.line("{\"event\":\"error\",\"error\":" + quote(failed.getClass().getSimpleName() + ": "
                + failed.getMessage()) + "}");
    }

    /** A JSON string (or null): quote, backslash and control characters escaped. */
    private static String quote(String text) {
        if (text == null) {
            return "null";
        }
        StringBuilder out = new StringBuilder("\"");
        for (char c : text.toCharArray()) {
            if (c == '"' || c == '\\') {
                out.append('\\').append(c);
            } else if (c < 0x20) {
                out.append(String.format("\\u%04x", (int) c));
            } else {
                out.append(c);
            }
        }
        return out.append('"').toString();
    }
}
