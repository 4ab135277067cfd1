package castle;

import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.Callable;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.FeatureUpdate;
import org.apache.kafka.clients.admin.ListConfigResourcesOptions;
import org.apache.kafka.clients.admin.LogDirDescription;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.admin.UpdateFeaturesOptions;
import org.apache.kafka.common.ElectionType;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionReplica;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.quota.ClientQuotaAlteration;
import org.apache.kafka.common.quota.ClientQuotaEntity;
import org.apache.kafka.common.quota.ClientQuotaFilter;
import org.apache.kafka.common.quota.ClientQuotaFilterComponent;

/**
 * The Java AdminClient's operator calls, one after another, against one broker (node 0).
 * Options: {@code bootstrap=}, {@code topic=} (created here with 2 partitions). Prints one
 * line a call: {@code OK <call> <what it answered>} or {@code FAIL <call> <exception>}, then
 * {@code DONE}. The test judges the answers; a FAIL does not stop the calls after it.
 */
public final class AdminCalls {
    private AdminCalls() {
    }

    private static void call(String name, Callable<Object> body) {
        try {
            Out.line("OK " + name + " " + body.call());
        } catch (Exception e) {
            Throwable cause = e.getCause() != null ? e.getCause() : e;
            Out.line("FAIL " + name + " " + cause.getClass().getSimpleName() + ": " + cause.getMessage());
        }
    }

    private static AlterConfigOp set(String key, String value) {
        return new AlterConfigOp(new ConfigEntry(key, value), AlterConfigOp.OpType.SET);
    }

    private static AlterConfigOp delete(String key) {
        return new AlterConfigOp(new ConfigEntry(key, null), AlterConfigOp.OpType.DELETE);
    }

    private static String entry(Admin admin, ConfigResource resource, String key) throws Exception {
        Config config = admin.describeConfigs(List.of(resource)).all().get().get(resource);
        ConfigEntry found = config.get(key);
        return found == null ? "absent" : found.value() + "/" + found.source();
    }

    public static void main(String[] argv) throws Exception {
        Args args = new Args(argv);
        String topic = args.get("topic");
        Properties defaults = new Properties();
        defaults.setProperty(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args.get("bootstrap"));
        defaults.setProperty(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        TopicPartition tp = new TopicPartition(topic, 0);
        ConfigResource broker = new ConfigResource(ConfigResource.Type.BROKER, "0");
        ConfigResource clusterDefault = new ConfigResource(ConfigResource.Type.BROKER, "");
        ConfigResource loggers = new ConfigResource(ConfigResource.Type.BROKER_LOGGER, "0");
        ConfigResource group = new ConfigResource(ConfigResource.Type.GROUP, topic + "-group");
        ConfigResource subscription = new ConfigResource(ConfigResource.Type.CLIENT_METRICS, topic + "-metrics");
        ClientQuotaEntity user = new ClientQuotaEntity(Map.of(ClientQuotaEntity.USER, topic + "-user"));
        try (Admin admin = Admin.create(args.clientConfigs(defaults))) {
            call("describeCluster", () -> admin.describeCluster().nodes().get().size());
            call("createTopics", () -> {
                admin.createTopics(List.of(new NewTopic(topic, 2, (short) 1))).all().get();
                return topic;
            });
            call("describeTopics", () -> {
                TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
                return d.partitions().size() + " " + (d.topicId() != null);
            });
            call("describeConfigs.broker", () -> entry(admin, broker, "log.retention.ms"));
            call("incrementalAlterConfigs.broker", () -> {
                admin.incrementalAlterConfigs(Map.of(broker, List.of(set("message.max.bytes", "2000000")))).all().get();
                return entry(admin, broker, "message.max.bytes");
            });
            call("incrementalAlterConfigs.clusterDefault", () -> {
                admin.incrementalAlterConfigs(Map.of(clusterDefault, List.of(set("log.segment.bytes", "20000000"))))
                        .all().get();
                String seen = entry(admin, broker, "log.segment.bytes");
                admin.incrementalAlterConfigs(Map.of(clusterDefault, List.of(delete("log.segment.bytes")))).all().get();
                admin.incrementalAlterConfigs(Map.of(broker, List.of(delete("message.max.bytes")))).all().get();
                return seen;
            });
            call("incrementalAlterConfigs.readOnly", () -> {
                admin.incrementalAlterConfigs(Map.of(broker, List.of(set("log.dirs", "/tmp/x")))).all().get();
                return "applied";
            });
            call("brokerLoggers", () -> {
                admin.incrementalAlterConfigs(Map.of(loggers, List.of(set("root", "INFO")))).all().get();
                return entry(admin, loggers, "root");
            });
            call("groupConfigs", () -> {
                admin.incrementalAlterConfigs(Map.of(group, List.of(set("consumer.session.timeout.ms", "50000"))))
                        .all().get();
                return entry(admin, group, "consumer.session.timeout.ms");
            });
            call("clientMetrics", () -> {
                admin.incrementalAlterConfigs(Map.of(subscription, List.of(set("metrics", "org.apache.kafka.producer."),
                        set("interval.ms", "60000")))).all().get();
                return entry(admin, subscription, "interval.ms");
            });
            call("listConfigResources", () -> {
                Collection<ConfigResource> listed = admin.listConfigResources(
                        Set.of(ConfigResource.Type.GROUP, ConfigResource.Type.CLIENT_METRICS, ConfigResource.Type.TOPIC),
                        new ListConfigResourcesOptions()).all().get();
                return listed.contains(group) + " " + listed.contains(subscription) + " "
                        + listed.contains(new ConfigResource(ConfigResource.Type.TOPIC, topic));
            });
            call("alterClientQuotas", () -> {
                admin.alterClientQuotas(List.of(new ClientQuotaAlteration(user, List.of(
                        new ClientQuotaAlteration.Op("producer_byte_rate", 1048576.0),
                        new ClientQuotaAlteration.Op("request_percentage", 200.0))))).all().get();
                return "set";
            });
            call("describeClientQuotas", () -> new java.util.TreeMap<>(admin.describeClientQuotas(
                    ClientQuotaFilter.containsOnly(List.of(ClientQuotaFilterComponent.ofEntity(ClientQuotaEntity.USER,
                            topic + "-user")))).entities().get().get(user)));
            call("describeLogDirs", () -> {
                Map<String, LogDirDescription> dirs = admin.describeLogDirs(List.of(0)).allDescriptions().get().get(0);
                Set<String> replicas = new TreeSet<>();
                dirs.values().forEach(d -> d.replicaInfos().keySet().stream().filter(p -> p.topic().equals(topic))
                        .forEach(p -> replicas.add(p.toString())));
                return dirs.size() + " " + replicas;
            });
            call("describeReplicaLogDirs", () -> admin.describeReplicaLogDirs(
                    List.of(new TopicPartitionReplica(topic, 0, 0))).all().get().values().iterator().next()
                    .getCurrentReplicaLogDir() != null);
            call("describeFeatures", () -> new TreeSet<>(
                    admin.describeFeatures().featureMetadata().get().finalizedFeatures().keySet()));
            call("updateFeatures", () -> {
                admin.updateFeatures(Map.of("transaction.version",
                        new FeatureUpdate((short) 2, FeatureUpdate.UpgradeType.UPGRADE)),
                        new UpdateFeaturesOptions().validateOnly(true)).all().get();
                return "validated";
            });
            call("listOffsets", () -> admin.listOffsets(Map.of(tp, OffsetSpec.latest())).all().get().get(tp).offset());
            call("deleteRecords", () -> admin.deleteRecords(Map.of(tp, RecordsToDelete.beforeOffset(0))).lowWatermarks()
                    .get(tp).get().lowWatermark());
            call("electLeaders", () -> {
                Optional<Throwable> outcome = admin.electLeaders(ElectionType.PREFERRED, Set.of(tp)).partitions().get()
                        .get(tp);
                return outcome.map(t -> t.getClass().getSimpleName()).orElse("elected");
            });
        }
        Out.line("DONE");
    }
}
