package castle;

import java.util.List;
import java.util.Properties;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * A transactional producer: one transaction per letter of {@code pattern}, each of
 * {@code records} records spread over the topic's partitions (record i to partition i mod n),
 * key and value {@code <prefix>t<transaction>-<i>} (prefix empty unless given).
 *
 * <p>C commits; A flushes (the records are in the log) then aborts; O flushes and leaves the
 * transaction open, printing {@code OPEN <n>}, then waits to be killed. Prints
 * {@code INITIALIZED}, then {@code COMMITTED <n>} or {@code ABORTED <n>} as each ends, and
 * {@code DONE} after the last. Options: bootstrap, topic, txn-id, pattern, records, prefix;
 * any {@code a.b=c} is a producer config.
 */
public final class TxnProducer {
    private TxnProducer() {
    }

    public static void main(String[] argv) throws Exception {
        Args args = new Args(argv);
        String topic = args.get("topic");
        String pattern = args.get("pattern");
        int records = args.getInt("records", 10);
        String prefix = args.get("prefix", "");
        Properties defaults = new Properties();
        defaults.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, args.get("bootstrap"));
        defaults.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, args.get("txn-id"));
        defaults.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, "30000");
        defaults.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        defaults.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        defaults.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(args.clientConfigs(defaults))) {
            producer.initTransactions();
            Out.line("INITIALIZED");
            // go-file: wait for it to exist before the first transaction, so that producers
            // started together (their JVMs come up at different speeds) do run together.
            String goFile = args.get("go-file", "");
            while (!goFile.isEmpty() && !java.nio.file.Files.exists(java.nio.file.Path.of(goFile))) {
                Thread.sleep(20);
            }
            List<PartitionInfo> partitions = producer.partitionsFor(topic);
            for (int txn = 0; txn < pattern.length(); txn++) {
                char end = pattern.charAt(txn);
                producer.beginTransaction();
                for (int i = 0; i < records; i++) {
                    String text = prefix + "t" + txn + "-" + i;
                    producer.send(new ProducerRecord<>(topic, i % partitions.size(), text, text));
                }
                switch (end) {
                    case 'C' -> {
                        producer.commitTransaction();
                        Out.line("COMMITTED " + txn);
                    }
                    case 'A' -> {
                        producer.flush();
                        producer.abortTransaction();
                        Out.line("ABORTED " + txn);
                    }
                    case 'O' -> {
                        producer.flush();
                        Out.line("OPEN " + txn);
                        Thread.sleep(Long.MAX_VALUE);
                    }
                    default -> throw new IllegalArgumentException("pattern letters are C, A and O: " + pattern);
                }
            }
            Out.line("DONE");
        }
    }
}
