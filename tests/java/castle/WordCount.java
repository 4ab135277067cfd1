package castle;

import java.util.Arrays;
import java.util.Locale;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.state.KeyValueStore;

/**
 * Kafka Streams word count, exactly_once_v2: lines from {@code input}, split into words, regrouped
 * by word (a repartition topic), counted in the state store {@code counts} (a changelog topic),
 * each new count written to {@code output} (key the word, value the count as a long).
 *
 * <p>Options: bootstrap, app-id, input, output, state-dir; any {@code a.b=c} is a Streams config.
 * Prints {@code STATE <new state>} on every state change; an uncaught exception is printed on
 * stderr and ends the process with exit code 3; SIGTERM closes Streams cleanly.
 */
public final class WordCount {
    private WordCount() {
    }

    public static void main(String[] argv) throws InterruptedException {
        Args args = new Args(argv);
        Properties defaults = new Properties();
        defaults.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args.get("bootstrap"));
        defaults.put(StreamsConfig.APPLICATION_ID_CONFIG, args.get("app-id"));
        defaults.put(StreamsConfig.STATE_DIR_CONFIG, args.get("state-dir"));
        defaults.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        defaults.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, "1");
        defaults.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, "1");
        defaults.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class.getName());
        defaults.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class.getName());

        StreamsBuilder builder = new StreamsBuilder();
        KStream<String, String> lines = builder.stream(args.get("input"), Consumed.with(Serdes.String(), Serdes.String()));
        lines.flatMapValues(line -> Arrays.asList(line.toLowerCase(Locale.ROOT).split("\\W+")))
                .filter((key, word) -> !word.isEmpty())
                .groupBy((key, word) -> word, Grouped.with("words", Serdes.String(), Serdes.String()))
                .count(Materialized.<String, Long, KeyValueStore<Bytes, byte[]>>as("counts"))
                .toStream()
                .to(args.get("output"), Produced.with(Serdes.String(), Serdes.Long()));

        KafkaStreams streams = new KafkaStreams(builder.build(), args.clientConfigs(defaults));
        CountDownLatch closed = new CountDownLatch(1);
        streams.setStateListener((now, before) -> Out.line("STATE " + now));
        streams.setUncaughtExceptionHandler(error -> {
            error.printStackTrace();
            Out.line("FAILED " + error);
            Runtime.getRuntime().halt(3);
            return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            streams.close();
            closed.countDown();
        }));
        streams.start();
        closed.await();
    }
}
