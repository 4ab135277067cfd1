"""Turning a read's options into offset ranges, on the driver: where each partition
starts and ends, what counts as data loss, and how a micro-batch is bounded.

Kept apart from the Spark classes (pipeline/source.py) so the rules read as Spark's
Kafka source states them and can be checked against a broker without Spark.
"""

from __future__ import annotations

import logging
from typing import Iterable

from pipeline.cluster import Cluster, PlanError
from pipeline.offsets import EARLIEST, LATEST, OffsetRange, PartitionOffsets, TopicPartition
from pipeline.options import EndingPoint, StartingPoint

log = logging.getLogger("pipeline.castle")

LOSS_HINT = ("Some data may have been lost: it is no longer on the broker (deleted by retention, or the topic was "
             "recreated). If you want the query to go on, set the option failOnDataLoss to false.")


class DataLossError(PlanError):
    """Records a read should have covered are gone and failOnDataLoss is true."""


def report_data_loss(message: str, fail: bool) -> None:
    if fail:
        raise DataLossError(f"{message}. {LOSS_HINT}")
    log.warning("%s. Skipping the lost records (failOnDataLoss=false).", message)


def _name(tp: TopicPartition) -> str:
    return f"{tp[0]}-{tp[1]}"


def require_same_partitions(given: Iterable[TopicPartition], partitions: list[TopicPartition], option: str) -> None:
    """Spark's rule: per-partition offsets name every partition the read covers, no more."""
    given_set, wanted = set(given), set(partitions)
    if given_set != wanted:
        missing = ", ".join(_name(tp) for tp in sorted(wanted - given_set)) or "none"
        extra = ", ".join(_name(tp) for tp in sorted(given_set - wanted)) or "none"
        raise PlanError(f"{option} must give an offset for every partition the read covers (use -2 for earliest, "
                        f"-1 for latest); missing: {missing}; not covered by the subscription: {extra}")


def starting_offsets(cluster: Cluster, starting: StartingPoint, partitions: list[TopicPartition],
                     fail_on_data_loss: bool) -> PartitionOffsets:
    """The first offset to read in each partition."""
    if not partitions:
        return {}
    if starting.kind == "earliest":
        return cluster.earliest(partitions)
    if starting.kind == "latest":
        return cluster.latest(partitions)
    if starting.kind in ("timestamp", "timestamps"):
        if starting.kind == "timestamp":
            stamps = {tp: starting.timestamp for tp in partitions}
        else:
            require_same_partitions(starting.offsets, partitions, "startingOffsetsByTimestamp")
            stamps = dict(starting.offsets)
        found = cluster.for_timestamps(stamps)
        empty = sorted(tp for tp, offset in found.items() if offset < 0)
        if empty and starting.no_match == "error":
            raise PlanError("no record at or after the starting timestamp in " + ", ".join(_name(tp) for tp in empty)
                            + " (set startingOffsetsByTimestampStrategy=latest to start those at their end)")
        if empty:
            found.update(cluster.latest(empty))
        return found
    require_same_partitions(starting.offsets, partitions, "startingOffsets")
    return resolve_specific(cluster, starting.offsets, partitions, fail_on_data_loss)


def resolve_specific(cluster: Cluster, given: PartitionOffsets, partitions: list[TopicPartition],
                     fail_on_data_loss: bool) -> PartitionOffsets:
    """-2/-1 become earliest/latest; an offset before the earliest kept is data loss; one
    past the end is an error (it names records that were never written)."""
    earliest = cluster.earliest(partitions)
    latest = cluster.latest(partitions)
    resolved: PartitionOffsets = {}
    for tp in partitions:
        offset = given[tp]
        if offset == EARLIEST:
            offset = earliest[tp]
        elif offset == LATEST:
            offset = latest[tp]
        elif offset < earliest[tp]:
            report_data_loss(f"startingOffsets asks for {_name(tp)} from offset {offset}, but the earliest offset "
                             f"kept is {earliest[tp]}", fail_on_data_loss)
            offset = earliest[tp]
        elif offset > latest[tp]:
            raise PlanError(f"startingOffsets asks for {_name(tp)} from offset {offset}, past its end offset {latest[tp]}")
        resolved[tp] = offset
    return resolved


def ending_offsets(cluster: Cluster, ending: EndingPoint, partitions: list[TopicPartition]) -> PartitionOffsets:
    """The offset after the last record a batch read takes in each partition."""
    if not partitions:
        return {}
    latest = cluster.latest(partitions)
    if ending.kind == "latest":
        return latest
    require_same_partitions(ending.offsets, partitions, "endingOffsets")
    resolved: PartitionOffsets = {}
    for tp in partitions:
        offset = ending.offsets[tp]
        if offset == LATEST:
            offset = latest[tp]
        elif offset > latest[tp]:
            raise PlanError(f"endingOffsets asks for {_name(tp)} up to offset {offset}, past its end offset {latest[tp]}")
        resolved[tp] = offset
    return resolved


def batch_ranges(start: PartitionOffsets, end: PartitionOffsets) -> list[OffsetRange]:
    ranges = []
    for tp in sorted(end):
        if start[tp] > end[tp]:
            raise PlanError(f"{_name(tp)}: the starting offset {start[tp]} is after the ending offset {end[tp]}")
        ranges.append(OffsetRange(tp[0], tp[1], start[tp], end[tp]))
    return ranges


def stream_ranges(cluster: Cluster, start: PartitionOffsets, end: PartitionOffsets,
                  fail_on_data_loss: bool) -> list[OffsetRange]:
    """The ranges of one micro-batch. Partitions new since ``start`` begin at their
    earliest offset; ranges whose start was deleted meanwhile begin at the earliest kept
    (or fail); partitions that went away or went backwards are data loss."""
    for tp in sorted(set(start) - set(end)):
        report_data_loss(f"partition {_name(tp)} is gone (its topic was deleted, or has fewer partitions now)",
                         fail_on_data_loss)
    earliest = cluster.earliest(list(end))
    ranges = []
    for tp in sorted(end):
        if tp in start:
            begin = start[tp]
        else:
            begin = earliest[tp]
            if begin != 0:
                report_data_loss(f"new partition {_name(tp)} starts at offset {begin}, not 0", fail_on_data_loss)
        until = end[tp]
        if begin < earliest[tp] <= until:
            report_data_loss(f"{_name(tp)}: offsets {begin} to {earliest[tp] - 1} were deleted before they were read",
                             fail_on_data_loss)
            begin = earliest[tp]
        elif begin < until < earliest[tp]:
            report_data_loss(f"{_name(tp)}: offsets {begin} to {until - 1} were deleted before they were read",
                             fail_on_data_loss)
            begin = until
        if until < begin:
            report_data_loss(f"{_name(tp)}: the end offset {until} is before the start {begin} (was the topic "
                             "recreated?)", fail_on_data_loss)
            continue
        ranges.append(OffsetRange(tp[0], tp[1], begin, until))
    return ranges


def capped(latest: PartitionOffsets, cap: PartitionOffsets | None) -> PartitionOffsets:
    """Trigger.AvailableNow: never past the offsets fixed when the trigger began (only the
    partitions known then)."""
    if cap is None:
        return latest
    return {tp: min(offset, cap[tp]) for tp, offset in latest.items() if tp in cap}
