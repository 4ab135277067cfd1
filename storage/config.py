"""Per-log configuration, under Kafka's names.

Each topic-level key (``segment.bytes``) has a broker-level default key
(``log.segment.bytes``), as in Kafka's LogConfig/ServerLogConfigs. The broker's config
module reads the broker-level keys; CreateTopics/AlterConfigs pass topic-level
overrides. Unknown keys are an error, never a silent no-op.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, Mapping, NamedTuple

LONG_MAX = (1 << 63) - 1
LONG_MIN = -(1 << 63)
INT_MAX = (1 << 31) - 1
DAY_MS = 24 * 60 * 60 * 1000

CLEANUP_DELETE = "delete"
CLEANUP_COMPACT = "compact"


def _parse_policy(value: str) -> str:
    parts = sorted(p.strip() for p in str(value).split(",") if p.strip())
    if not parts or any(p not in (CLEANUP_DELETE, CLEANUP_COMPACT) for p in parts):
        raise ValueError(f"cleanup.policy must be delete, compact or both, not {value!r}")
    return ",".join(parts)


def integer_in(low: int, high: int = LONG_MAX) -> Callable[[Any], int]:
    """A parser for an integer setting in [low, high], Kafka's INT or LONG with atLeast(low).

    Out-of-range values are refused here, where CreateTopics/AlterConfigs turn the
    ValueError into INVALID_CONFIG: a topic whose log cannot open (segment.bytes=0 cannot
    be mapped) must never reach the registry, or every restart of its owner would fail."""

    def parse(value: Any) -> int:
        number = int(value)
        if number < low:
            raise ValueError(f"Value must be at least {low}")
        if number > high:
            raise ValueError(f"Value must be no more than {high}")
        return number

    return parse


def _ratio(value: Any) -> float:
    number = float(value)
    if not 0.0 <= number <= 1.0:  # also refuses NaN
        raise ValueError("Value must be between 0 and 1")
    return number


def _parse_timestamp_type(value: str) -> str:
    if value not in ("CreateTime", "LogAppendTime"):
        raise ValueError(f"message.timestamp.type must be CreateTime or LogAppendTime, not {value!r}")
    return value


def _bool(value: Any) -> bool:
    text = str(value).strip().lower()
    if text not in ("true", "false"):
        raise ValueError(f"Expected value to be either true or false, not {value!r}")
    return text == "true"


# compression.type: Kafka's BrokerCompressionType names; the codec ids of the v2 attributes.
COMPRESSION_CODECS = {"uncompressed": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
PRODUCER = "producer"


def _parse_compression_type(value: Any) -> str:
    text = str(value).strip().lower()
    if text != PRODUCER and text not in COMPRESSION_CODECS:
        raise ValueError(f"String must be one of: {PRODUCER}, {', '.join(COMPRESSION_CODECS)}")
    return text


def _gzip_level(value: Any) -> int:
    # Deflater's levels, or -1 (Deflater.DEFAULT_COMPRESSION, zlib's 6).
    level = int(value)
    if level != -1 and not 1 <= level <= 9:
        raise ValueError("Value must be between 1 and 9, or -1 (the codec's default)")
    return level


def _throttled_replicas(value: Any) -> str:
    """``*`` or a list of partition:broker (Kafka's ThrottledReplicaListValidator)."""
    items = [item.strip() for item in str(value).split(",") if item.strip()]
    if items == ["*"]:
        return "*"
    for item in items:
        partition, sep, broker = item.partition(":")
        if not (sep and partition.strip().isdigit() and broker.strip().isdigit()):
            raise ValueError("Value must be '*' or a list of partition:brokerId (e.g. 0:101,1:102)")
    return ",".join(items)


def _false_only(name: str) -> Callable[[Any], bool]:
    def parse(value: Any) -> bool:
        if _bool(value):
            raise ValueError(f"{name}=true needs tiered storage, which Castle does not have")
        return False

    return parse


@dataclass(frozen=True, slots=True)
class LogConfig:
    """Settings of one partition log. Field -> (topic key, broker key) in TOPIC_KEYS."""

    segment_bytes: int = 1 << 30
    segment_ms: int = 7 * DAY_MS
    segment_jitter_ms: int = 0
    segment_index_bytes: int = 10 * 1024 * 1024
    index_interval_bytes: int = 4096
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    retention_ms: int = 7 * DAY_MS
    retention_bytes: int = -1
    cleanup_policy: str = CLEANUP_DELETE
    delete_retention_ms: int = DAY_MS
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    min_cleanable_dirty_ratio: float = 0.5
    max_message_bytes: int = 1048588
    message_timestamp_type: str = "CreateTime"
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_after_max_ms: int = 3_600_000  # Kafka 4.0 (KIP-1030); LONG_MAX before
    file_delete_delay_ms: int = 60_000
    compression_type: str = PRODUCER
    compression_gzip_level: int = -1
    compression_lz4_level: int = 9
    compression_zstd_level: int = 3
    preallocate: bool = False
    # Stored and described; enforced once partitions have replicas (replication).
    min_insync_replicas: int = 1
    unclean_leader_election_enable: bool = False
    leader_replication_throttled_replicas: str = ""
    follower_replication_throttled_replicas: str = ""
    # Tiered storage: Castle has none, so only the values that mean "off" are accepted.
    remote_storage_enable: bool = False
    remote_log_copy_disable: bool = False
    remote_log_delete_on_disable: bool = False
    local_retention_ms: int = -2
    local_retention_bytes: int = -2
    # Castle's own: how far ahead of the writer disk blocks are reserved (fallocate).
    preallocate_window_bytes: int = 16 * 1024 * 1024

    @property
    def compact(self) -> bool:
        return CLEANUP_COMPACT in self.cleanup_policy.split(",")

    @property
    def delete(self) -> bool:
        return CLEANUP_DELETE in self.cleanup_policy.split(",")

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    @property
    def target_codec(self) -> int | None:
        """The codec every batch is stored in (compression.type), None for ``producer``."""
        return COMPRESSION_CODECS.get(self.compression_type)

    @property
    def target_level(self) -> int | None:
        """compression.<codec>.level of the target codec (None: the codec's default)."""
        if self.compression_type == "gzip":
            return None if self.compression_gzip_level == -1 else self.compression_gzip_level
        if self.compression_type == "lz4":
            return self.compression_lz4_level
        if self.compression_type == "zstd":
            return self.compression_zstd_level
        return None

    @property
    def max_segment_ms(self) -> int:
        """How old the active segment may get: a compacted log also rolls by
        max.compaction.lag.ms, so that its records can be cleaned in time (Kafka's rule)."""
        if self.compact and self.max_compaction_lag_ms > 0:
            return min(self.max_compaction_lag_ms, self.segment_ms)
        return self.segment_ms

    @property
    def segment_reserve_bytes(self) -> int:
        """fallocate window: the whole segment at roll with preallocate, else the window."""
        return self.segment_bytes if self.preallocate else self.preallocate_window_bytes

    def with_overrides(self, overrides: Mapping[str, Any]) -> "LogConfig":
        """Apply topic-level keys (``retention.ms``…); unknown keys raise ValueError."""
        changes: dict[str, Any] = {}
        for key, value in overrides.items():
            if key not in TOPIC_KEYS:
                raise ValueError(f"unknown topic config {key!r}")
            spec = TOPIC_KEYS[key]
            changes[spec.field] = spec.parse(value)
        return _checked(dataclasses.replace(self, **changes)) if changes else self

    @classmethod
    def from_broker_config(cls, settings: Mapping[str, Any]) -> "LogConfig":
        """Build the defaults from broker-level keys (``log.retention.ms``…); others ignored."""
        changes: dict[str, Any] = {}
        for spec in TOPIC_KEYS.values():
            if spec.broker_key and spec.broker_key in settings:
                changes[spec.field] = spec.parse(settings[spec.broker_key])
        return _checked(cls(**changes))

    def topic_values(self) -> dict[str, str]:
        """Every topic-level key with its value, as DescribeConfigs shows them."""
        out = {}
        for key, spec in TOPIC_KEYS.items():
            value = getattr(self, spec.field)
            out[key] = str(value).lower() if isinstance(value, bool) else str(value)
        return out


def _checked(config: LogConfig) -> LogConfig:
    """Rules between keys (Kafka's LogConfig.validateValues)."""
    if config.min_compaction_lag_ms > config.max_compaction_lag_ms:
        raise ValueError(f"conflict topic config setting min.compaction.lag.ms ({config.min_compaction_lag_ms}) > "
                         f"max.compaction.lag.ms ({config.max_compaction_lag_ms})")
    return config


Parser = Callable[[Any], Any]


class TopicKey(NamedTuple):
    field: str  # of LogConfig
    broker_key: str  # the broker-level default's name ("" when Kafka has none)
    parse: Parser
    kafka_type: str  # ConfigDef type: boolean, string, int, long, double, list


# Ranges as Kafka 4.0's LogConfig defines them (INT keys also stop at 2^31-1), except
# segment.bytes: Kafka 4 raised its floor to 1 MiB (KIP-1030); Castle keeps Kafka 3.9's
# floor of 14 bytes (one legacy record's overhead), because small segments are useful in
# tests and small deployments, and a batch larger than the segment is refused on append.
# Kafka 4.0 removed message.format.version, message.downconversion.enable and
# message.timestamp.difference.max.ms: they are unknown names here too.
TOPIC_KEYS: dict[str, TopicKey] = {
    "segment.bytes": TopicKey("segment_bytes", "log.segment.bytes", integer_in(14, INT_MAX), "int"),
    "segment.ms": TopicKey("segment_ms", "log.roll.ms", integer_in(1), "long"),
    "segment.jitter.ms": TopicKey("segment_jitter_ms", "log.roll.jitter.ms", integer_in(0), "long"),
    "segment.index.bytes": TopicKey("segment_index_bytes", "log.index.size.max.bytes", integer_in(4, INT_MAX), "int"),
    "index.interval.bytes": TopicKey("index_interval_bytes", "log.index.interval.bytes", integer_in(0, INT_MAX), "int"),
    "flush.messages": TopicKey("flush_messages", "log.flush.interval.messages", integer_in(1), "long"),
    "flush.ms": TopicKey("flush_ms", "log.flush.interval.ms", integer_in(0), "long"),
    "retention.ms": TopicKey("retention_ms", "log.retention.ms", integer_in(-1), "long"),
    "retention.bytes": TopicKey("retention_bytes", "log.retention.bytes", integer_in(LONG_MIN), "long"),
    "cleanup.policy": TopicKey("cleanup_policy", "log.cleanup.policy", _parse_policy, "list"),
    "delete.retention.ms": TopicKey("delete_retention_ms", "log.cleaner.delete.retention.ms", integer_in(0), "long"),
    "min.compaction.lag.ms": TopicKey("min_compaction_lag_ms", "log.cleaner.min.compaction.lag.ms", integer_in(0), "long"),
    "max.compaction.lag.ms": TopicKey("max_compaction_lag_ms", "log.cleaner.max.compaction.lag.ms", integer_in(1), "long"),
    "min.cleanable.dirty.ratio": TopicKey("min_cleanable_dirty_ratio", "log.cleaner.min.cleanable.ratio", _ratio, "double"),
    "max.message.bytes": TopicKey("max_message_bytes", "message.max.bytes", integer_in(0, INT_MAX), "int"),
    "message.timestamp.type": TopicKey("message_timestamp_type", "log.message.timestamp.type", _parse_timestamp_type,
                                       "string"),
    "message.timestamp.before.max.ms": TopicKey("message_timestamp_before_max_ms",
                                                "log.message.timestamp.before.max.ms", integer_in(0), "long"),
    "message.timestamp.after.max.ms": TopicKey("message_timestamp_after_max_ms",
                                               "log.message.timestamp.after.max.ms", integer_in(0), "long"),
    "file.delete.delay.ms": TopicKey("file_delete_delay_ms", "log.segment.delete.delay.ms", integer_in(0), "long"),
    "compression.type": TopicKey("compression_type", "compression.type", _parse_compression_type, "string"),
    "compression.gzip.level": TopicKey("compression_gzip_level", "compression.gzip.level", _gzip_level, "int"),
    "compression.lz4.level": TopicKey("compression_lz4_level", "compression.lz4.level", integer_in(1, 17), "int"),
    "compression.zstd.level": TopicKey("compression_zstd_level", "compression.zstd.level", integer_in(-131072, 22),
                                       "int"),
    "preallocate": TopicKey("preallocate", "log.preallocate", _bool, "boolean"),
    "min.insync.replicas": TopicKey("min_insync_replicas", "min.insync.replicas", integer_in(1, INT_MAX), "int"),
    "unclean.leader.election.enable": TopicKey("unclean_leader_election_enable", "unclean.leader.election.enable",
                                               _bool, "boolean"),
    "leader.replication.throttled.replicas": TopicKey("leader_replication_throttled_replicas", "",
                                                      _throttled_replicas, "list"),
    "follower.replication.throttled.replicas": TopicKey("follower_replication_throttled_replicas", "",
                                                        _throttled_replicas, "list"),
    "remote.storage.enable": TopicKey("remote_storage_enable", "", _false_only("remote.storage.enable"), "boolean"),
    "remote.log.copy.disable": TopicKey("remote_log_copy_disable", "", _bool, "boolean"),
    "remote.log.delete.on.disable": TopicKey("remote_log_delete_on_disable", "", _bool, "boolean"),
    "local.retention.ms": TopicKey("local_retention_ms", "log.local.retention.ms", integer_in(-2), "long"),
    "local.retention.bytes": TopicKey("local_retention_bytes", "log.local.retention.bytes", integer_in(-2), "long"),
    "preallocate.window.bytes": TopicKey("preallocate_window_bytes", "log.preallocate.window.bytes",
                                         integer_in(0, INT_MAX), "long"),
}
