package castle;

import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.ExecutionException;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.CreateTopicsOptions;
import org.apache.kafka.clients.admin.NewTopic;

/**
 * Creates topics with the AdminClient's default options (retryOnQuotaViolation: true, so a
 * topic refused for controller_mutation_rate is retried after the throttle time, until the
 * API timeout).
 *
 * Options: bootstrap=host:port, topics=a,b,c, partitions=N. Prints "CREATED <topic> <ms>"
 * per topic (ms since the call), or "FAILED <topic> <exception class>: <message>".
 */
public final class TopicCreator {
    private TopicCreator() {
    }

    public static void main(String[] argv) throws InterruptedException {
        Args args = new Args(argv);
        Properties defaults = new Properties();
        defaults.setProperty(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args.get("bootstrap"));
        int partitions = args.getInt("partitions", 1);
        List<NewTopic> topics = new ArrayList<>();
        for (String name : args.get("topics").split(",")) {
            topics.add(new NewTopic(name, partitions, (short) 1));
        }
        try (Admin admin = Admin.create(args.clientConfigs(defaults))) {
            long started = System.nanoTime();
            var futures = admin.createTopics(topics, new CreateTopicsOptions()).values();
            for (NewTopic topic : topics) {
                try {
                    futures.get(topic.name()).get();
                    Out.line("CREATED " + topic.name() + " " + (System.nanoTime() - started) / 1_000_000);
                } catch (ExecutionException e) {
                    Out.line("FAILED " + topic.name() + " " + e.getCause().getClass().getSimpleName() + ": "
                             + e.getCause().getMessage());
                }
            }
        }
    }
}
