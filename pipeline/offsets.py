"""Offsets as Spark's Kafka source writes them, and the ranges a read is planned in.

A partition offset map is ``{topic: {partition: offset}}``. In JSON (startingOffsets,
endingOffsets, and the streaming offsets in the checkpoint) partitions are strings,
topics and partitions are sorted, so the same position always gives the same text: the
engine compares offsets as JSON. -2 means earliest and -1 latest where an option allows
them. Every offset is the next one to read.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Mapping

EARLIEST = -2
LATEST = -1

TopicPartition = tuple[str, int]
PartitionOffsets = dict[TopicPartition, int]


class OffsetsError(ValueError):
    """An offsets option that cannot be used; the message names the option."""


def parse_offsets_json(text: str, option: str) -> PartitionOffsets:
    """``{"topic": {"0": 23, "1": -1}}`` → {("topic", 0): 23, ("topic", 1): -1}."""
    try:
        parsed = json.loads(text)
    except ValueError as exc:
        raise OffsetsError(f"{option} is not valid JSON ({exc}): {text!r}; expected e.g. "
                           '{"topicA":{"0":23,"1":-1},"topicB":{"0":-2}}') from None
    if not isinstance(parsed, dict):
        raise OffsetsError(f"{option} must be a JSON object of topics, got {text!r}")
    offsets: PartitionOffsets = {}
    for topic, partitions in parsed.items():
        if not isinstance(partitions, dict):
            raise OffsetsError(f"{option}: topic {topic!r} must map to an object of partitions, got {partitions!r}")
        for partition, offset in partitions.items():
            try:
                number = int(partition)
            except ValueError:
                raise OffsetsError(f"{option}: partition {partition!r} of topic {topic!r} is not a number") from None
            if isinstance(offset, bool) or not isinstance(offset, int) or offset < EARLIEST or number < 0:
                raise OffsetsError(f"{option}: offset {offset!r} for {topic}-{partition} must be an integer "
                                   ">= 0, or -2 (earliest) or -1 (latest)")
            offsets[(topic, number)] = offset
    return offsets


def parse_timestamps_json(text: str, option: str) -> PartitionOffsets:
    """startingOffsetsByTimestamp: the same shape, with milliseconds since the epoch."""
    stamps = parse_offsets_json(text, option)
    for (topic, partition), stamp in stamps.items():
        if stamp < 0:
            raise OffsetsError(f"{option}: timestamp {stamp} for {topic}-{partition} must be >= 0")
    return stamps


def to_json_dict(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """The sorted nested dict a streaming offset is (the engine serialises it to JSON)."""
    nested: dict[str, dict[str, int]] = {}
    for topic, partition in sorted(offsets):
        nested.setdefault(topic, {})[str(partition)] = int(offsets[(topic, partition)])
    return nested


def from_json_dict(nested: Mapping[str, Any]) -> PartitionOffsets:
    """Back from what the engine hands over (a dict, or its JSON text)."""
    if isinstance(nested, str):
        nested = json.loads(nested)
    return {(topic, int(partition)): int(offset)
            for topic, partitions in nested.items() for partition, offset in partitions.items()}


@dataclass(frozen=True)
class OffsetRange:
    """Records [start, until) of one topic-partition: one Spark input partition."""

    topic: str
    partition: int
    start: int
    until: int

    @property
    def size(self) -> int:
        return self.until - self.start


def split_ranges(ranges: list[OffsetRange], min_partitions: int | None) -> list[OffsetRange]:
    """Cut ranges so that there are about ``min_partitions`` of them, as Spark's Kafka
    source does: each range gets a share of the pieces in proportion to its size (at
    least one), is cut evenly, the last piece taking the remainder; empty pieces go."""
    if not min_partitions or len(ranges) >= min_partitions:
        return [r for r in ranges if r.size > 0]
    total = sum(r.size for r in ranges)
    if total <= 0:
        return []
    pieces: list[OffsetRange] = []
    for whole in ranges:
        parts = max(int(math.floor(whole.size / total * min_partitions + 0.5)), 1)
        remaining, start = whole.size, whole.start
        for index in range(parts):
            this = remaining // (parts - index)
            remaining -= this
            end = min(start + this, whole.until)
            if end > start:
                pieces.append(OffsetRange(whole.topic, whole.partition, start, end))
            start = end
    return pieces


def rate_limit(start: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int],
               max_rows: int) -> PartitionOffsets:
    """The end offsets of a micro-batch of at most about ``max_rows`` records, shared out
    over the partitions in proportion to what each has waiting (Spark's rule: a share
    below one record rounds up, others down; never past the latest offset)."""
    sizes = {tp: end - start[tp] for tp, end in latest.items() if tp in start and end - start[tp] > 0}
    total = float(sum(sizes.values()))
    if total < 1:
        return dict(latest)
    limited: PartitionOffsets = {}
    for tp, end in latest.items():
        if tp not in sizes:
            limited[tp] = end
            continue
        share = max_rows * (sizes[tp] / total)
        rows = math.ceil(share) if share < 1 else math.floor(share)
        limited[tp] = min(end, start[tp] + int(rows))
    return limited
