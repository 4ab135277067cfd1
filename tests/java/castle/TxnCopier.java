package castle;

import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Consume-transform-produce, exactly once: a read_committed consumer in group {@code group}
 * (subscribed to {@code input}) and a transactional producer; per letter of {@code pattern},
 * one poll's records (at most {@code batch}) are copied to {@code output} (same key, value
 * {@code copy:<value>}, same partition number modulo the output's) and their next offsets sent
 * to the transaction with the consumer's group metadata; C commits, A aborts and seeks back, so
 * the next transaction copies the same records again. With {@code until=<n>} the pattern repeats
 * until n input records were copied in committed transactions.
 *
 * <p>Prints {@code COMMITTED <n> <records>} or {@code ABORTED <n> <records>} per transaction
 * and {@code DONE} at the end; {@code IDLE} and exit code 2 when no record came for
 * {@code timeout-ms}.
 */
public final class TxnCopier {
    private TxnCopier() {
    }

    public static void main(String[] argv) {
        Args args = new Args(argv);
        String input = args.get("input");
        String output = args.get("output");
        String pattern = args.get("pattern");
        long timeoutMs = args.getInt("timeout-ms", 30000);
        int until = args.getInt("until", -1);
        Properties consumerDefaults = new Properties();
        consumerDefaults.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, args.get("bootstrap"));
        consumerDefaults.put(ConsumerConfig.GROUP_ID_CONFIG, args.get("group"));
        consumerDefaults.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        consumerDefaults.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        consumerDefaults.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        consumerDefaults.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, args.get("batch", "10"));
        consumerDefaults.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        consumerDefaults.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        Properties producerDefaults = new Properties();
        producerDefaults.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, args.get("bootstrap"));
        producerDefaults.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, args.get("txn-id"));
        producerDefaults.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, "30000");
        producerDefaults.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        producerDefaults.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        // Options without a dot are the program's; the dotted ones go to the producer only.
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(consumerDefaults);
             KafkaProducer<String, String> producer = new KafkaProducer<>(args.clientConfigs(producerDefaults))) {
            producer.initTransactions();
            consumer.subscribe(List.of(input));
            int outputPartitions = producer.partitionsFor(output).size();
            int copied = 0;
            for (int txn = 0; until >= 0 ? copied < until : txn < pattern.length(); txn++) {
                ConsumerRecords<String, String> records = pollSome(consumer, timeoutMs);
                if (records.isEmpty()) {
                    Out.line("IDLE");
                    System.exit(2);
                }
                Map<TopicPartition, OffsetAndMetadata> next = new HashMap<>();
                Map<TopicPartition, Long> first = new HashMap<>();
                producer.beginTransaction();
                for (ConsumerRecord<String, String> record : records) {
                    TopicPartition from = new TopicPartition(record.topic(), record.partition());
                    first.putIfAbsent(from, record.offset());
                    next.put(from, new OffsetAndMetadata(record.offset() + 1));
                    producer.send(new ProducerRecord<>(output, record.partition() % outputPartitions, record.key(),
                            "copy:" + record.value()));
                }
                producer.sendOffsetsToTransaction(next, consumer.groupMetadata());
                if (pattern.charAt(txn % pattern.length()) == 'C') {
                    producer.commitTransaction();
                    copied += records.count();
                    Out.line("COMMITTED " + txn + " " + records.count());
                } else {
                    producer.flush();
                    producer.abortTransaction();
                    first.forEach(consumer::seek);
                    Out.line("ABORTED " + txn + " " + records.count());
                }
            }
            Out.line("DONE");
        }
    }

    private static ConsumerRecords<String, String> pollSome(KafkaConsumer<String, String> consumer, long timeoutMs) {
        long deadline = System.currentTimeMillis() + timeoutMs;
        ConsumerRecords<String, String> records = ConsumerRecords.empty();
        while (records.isEmpty() && System.currentTimeMillis() < deadline) {
            records = consumer.poll(Duration.ofMillis(200));
        }
        return records;
    }
}
