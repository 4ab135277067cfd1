"""Topic and broker-level log settings take only values in Kafka's ranges (storage/config.py):
a value a log could not run with is refused where it enters, never when a log opens."""

from __future__ import annotations

import pytest

from storage.config import INT_MAX, LONG_MAX, LogConfig

REFUSED = [
    ("segment.bytes", "0"), ("segment.bytes", "-1"), ("segment.bytes", "13"), ("segment.bytes", str(INT_MAX + 1)),
    ("segment.ms", "0"), ("segment.index.bytes", "3"), ("index.interval.bytes", "-1"), ("flush.messages", "0"),
    ("flush.ms", "-1"), ("retention.ms", "-2"), ("delete.retention.ms", "-1"), ("min.compaction.lag.ms", "-1"),
    ("min.cleanable.dirty.ratio", "1.5"), ("min.cleanable.dirty.ratio", "-0.1"), ("min.cleanable.dirty.ratio", "nan"),
    ("max.message.bytes", "-1"), ("file.delete.delay.ms", "-1"), ("preallocate.window.bytes", "-1"),
    ("retention.ms", str(LONG_MAX + 1)), ("segment.bytes", "1.5"),
]

ACCEPTED = [
    ("segment.bytes", "14", 14), ("segment.bytes", str(INT_MAX), INT_MAX), ("segment.ms", "1", 1),
    ("segment.index.bytes", "4", 4), ("index.interval.bytes", "0", 0), ("flush.messages", "1", 1),
    ("flush.ms", "0", 0), ("retention.ms", "-1", -1), ("retention.bytes", "-5", -5),
    ("min.cleanable.dirty.ratio", "0", 0.0), ("min.cleanable.dirty.ratio", "1", 1.0), ("max.message.bytes", "0", 0),
]


@pytest.mark.parametrize("key,value", REFUSED)
def test_out_of_range_topic_values_are_refused(key, value):
    with pytest.raises(ValueError):
        LogConfig().with_overrides({key: value})


@pytest.mark.parametrize("key,value,parsed", ACCEPTED)
def test_range_edges_are_accepted(key, value, parsed):
    from storage.config import TOPIC_KEYS

    field = TOPIC_KEYS[key][0]
    assert getattr(LogConfig().with_overrides({key: value}), field) == parsed


def test_broker_level_keys_share_the_ranges():
    with pytest.raises(ValueError, match="at least 1"):
        LogConfig.from_broker_config({"log.flush.interval.messages": "0"})
    assert LogConfig.from_broker_config({"log.segment.bytes": "65536"}).segment_bytes == 65536
