"""Per-log configuration, under Kafka's names.

Each topic-level key (``segment.bytes``) has a broker-level default key
(``log.segment.bytes``), as in Kafka's LogConfig/ServerLogConfigs. The broker's config
module reads the broker-level keys; CreateTopics/AlterConfigs pass topic-level
overrides. Unknown keys are an error, never a silent no-op.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, Mapping

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


@dataclass(frozen=True, slots=True)
class LogConfig:
    """Settings of one partition log. Field -> (topic key, broker key) in TOPIC_KEYS."""

    segment_bytes: int = 1 << 30
    segment_ms: int = 7 * DAY_MS
    segment_index_bytes: int = 10 * 1024 * 1024
    index_interval_bytes: int = 4096
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    retention_ms: int = 7 * DAY_MS
    retention_bytes: int = -1
    cleanup_policy: str = CLEANUP_DELETE
    delete_retention_ms: int = DAY_MS
    min_compaction_lag_ms: int = 0
    min_cleanable_dirty_ratio: float = 0.5
    max_message_bytes: int = 1048588
    message_timestamp_type: str = "CreateTime"
    file_delete_delay_ms: int = 60_000
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

    def with_overrides(self, overrides: Mapping[str, Any]) -> "LogConfig":
        """Apply topic-level keys (``retention.ms``…); unknown keys raise ValueError."""
        changes: dict[str, Any] = {}
        for key, value in overrides.items():
            if key not in TOPIC_KEYS:
                raise ValueError(f"unknown topic config {key!r}")
            field, _broker_key, parse = TOPIC_KEYS[key]
            changes[field] = parse(value)
        return dataclasses.replace(self, **changes) if changes else self

    @classmethod
    def from_broker_config(cls, settings: Mapping[str, Any]) -> "LogConfig":
        """Build the defaults from broker-level keys (``log.retention.ms``…); others ignored."""
        changes: dict[str, Any] = {}
        for _topic_key, (field, broker_key, parse) in TOPIC_KEYS.items():
            if broker_key in settings:
                changes[field] = parse(settings[broker_key])
        return cls(**changes)

    def topic_values(self) -> dict[str, str]:
        """Every topic-level key with its value, as DescribeConfigs shows them."""
        out = {}
        for key, (field, _broker_key, _parse) in TOPIC_KEYS.items():
            value = getattr(self, field)
            out[key] = str(value).lower() if isinstance(value, bool) else str(value)
        return out


Parser = Callable[[Any], Any]

# Ranges as Kafka 4.x's LogConfig defines them (INT keys also stop at 2^31-1), except
# segment.bytes: Kafka 4 raised its floor to 1 MiB; Castle keeps Kafka 3's floor of 14
# bytes (one legacy record's overhead), because small segments are useful in tests and
# small deployments, and a batch larger than the segment is refused on append anyway.
# topic key: (LogConfig field, broker-level key, parser)
TOPIC_KEYS: dict[str, tuple[str, str, Parser]] = {
    "segment.bytes": ("segment_bytes", "log.segment.bytes", integer_in(14, INT_MAX)),
    "segment.ms": ("segment_ms", "log.roll.ms", integer_in(1)),
    "segment.index.bytes": ("segment_index_bytes", "log.index.size.max.bytes", integer_in(4, INT_MAX)),
    "index.interval.bytes": ("index_interval_bytes", "log.index.interval.bytes", integer_in(0, INT_MAX)),
    "flush.messages": ("flush_messages", "log.flush.interval.messages", integer_in(1)),
    "flush.ms": ("flush_ms", "log.flush.interval.ms", integer_in(0)),
    "retention.ms": ("retention_ms", "log.retention.ms", integer_in(-1)),
    "retention.bytes": ("retention_bytes", "log.retention.bytes", integer_in(LONG_MIN)),
    "cleanup.policy": ("cleanup_policy", "log.cleanup.policy", _parse_policy),
    "delete.retention.ms": ("delete_retention_ms", "log.cleaner.delete.retention.ms", integer_in(0)),
    "min.compaction.lag.ms": ("min_compaction_lag_ms", "log.cleaner.min.compaction.lag.ms", integer_in(0)),
    "min.cleanable.dirty.ratio": ("min_cleanable_dirty_ratio", "log.cleaner.min.cleanable.ratio", _ratio),
    "max.message.bytes": ("max_message_bytes", "message.max.bytes", integer_in(0, INT_MAX)),
    "message.timestamp.type": ("message_timestamp_type", "log.message.timestamp.type", _parse_timestamp_type),
    "file.delete.delay.ms": ("file_delete_delay_ms", "log.segment.delete.delay.ms", integer_in(0)),
    "preallocate.window.bytes": ("preallocate_window_bytes", "log.preallocate.window.bytes", integer_in(0, INT_MAX)),
}
