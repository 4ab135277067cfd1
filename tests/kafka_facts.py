"""Facts about Apache Kafka that several tests check Castle against."""

from __future__ import annotations

# org.apache.kafka.storage.internals.log.LogConfig.configNames() of Kafka 4.0.0: every topic config.
KAFKA_4_0_TOPIC_CONFIGS = frozenset({
    "cleanup.policy", "compression.gzip.level", "compression.lz4.level", "compression.type",
    "compression.zstd.level", "delete.retention.ms", "file.delete.delay.ms", "flush.messages", "flush.ms",
    "follower.replication.throttled.replicas", "index.interval.bytes", "leader.replication.throttled.replicas",
    "local.retention.bytes", "local.retention.ms", "max.compaction.lag.ms", "max.message.bytes",
    "message.timestamp.after.max.ms", "message.timestamp.before.max.ms", "message.timestamp.type",
    "min.cleanable.dirty.ratio", "min.compaction.lag.ms", "min.insync.replicas", "preallocate",
    "remote.log.copy.disable", "remote.log.delete.on.disable", "remote.storage.enable", "retention.bytes",
    "retention.ms", "segment.bytes", "segment.index.bytes", "segment.jitter.ms", "segment.ms",
    "unclean.leader.election.enable",
})
