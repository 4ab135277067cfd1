package castle;

import java.time.Duration;
import java.util.Properties;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * A plain producer that lives long enough to push its metrics (KIP-714: enable.metrics.push
 * is on by default): prints {@code INSTANCE <client instance id>} once the broker gave it one,
 * then sends one record every 100 ms for {@code seconds} seconds and prints {@code DONE <n>}.
 * Options: bootstrap, topic, seconds; any {@code a.b=c} is a producer config.
 */
public final class MetricsProducer {
    private MetricsProducer() {
    }

    public static void main(String[] argv) throws Exception {
        Args args = new Args(argv);
        Properties defaults = new Properties();
        defaults.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, args.get("bootstrap"));
        defaults.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        defaults.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        String topic = args.get("topic");
        long end = System.currentTimeMillis() + 1000L * args.getInt("seconds", 10);
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(args.clientConfigs(defaults))) {
            Out.line("INSTANCE " + producer.clientInstanceId(Duration.ofSeconds(30)));
            int sent = 0;
            while (System.currentTimeMillis() < end) {
                producer.send(new ProducerRecord<>(topic, "k" + sent, "v" + sent)).get();
                sent++;
                Thread.sleep(100);
            }
            Out.line("DONE " + sent);
        }
    }
}
