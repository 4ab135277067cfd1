"""Workload files: what a benchmark run does, in TOML (Python's own tomllib reads it).

    name = "max-throughput-100b"
    description = "As many 100-byte records as one producer can send"
    topics = 1
    partitions_per_topic = 4
    record_size = 100
    key_distribution = "none"        # none | round-robin | random
    producers = 1                    # processes
    consumers = 1                    # processes per consumer group
    consumer_groups = 1              # each group reads every record
    rate = 0                         # records/s over all producers; 0 = as fast as possible
    # rate_mib_s = 10                # or a byte rate (MiB/s); the two exclude each other
    acks = "1"
    compression = "none"
    linger_ms = 5
    duration_s = 60
    warmup_s = 10

Catch-up reads: ``backlog_mib = 4096`` makes the producers write that much first with no
consumer running; the consumers then start from the earliest offset and the run measures
how fast they read it all (duration_s is then only a bound). ``idle_connections = 5000``
holds that many idle connections (ApiVersions and Metadata done) during the run.
``read_after_write = true``: producers run alone for warmup_s + duration_s, then the
consumers read everything back (Kafka's producer and consumer perf tools run one after
the other, like this); publish and consume are each measured without the other
competing for this machine's cores.
``producer_config`` / ``consumer_config`` tables pass librdkafka settings through.
Transactions: ``transactional = true`` gives each producer process its own
transactional.id; it calls init_transactions and commits every
``transaction_interval_ms`` (100 by default) from the start of each transaction, and a
record counts as published once its transaction committed (loadtest/runner/producer.py).
``idempotent = true`` is the same producer without transactions (enable.idempotence), the
baseline a transactional workload is judged against. Both need ``acks = "all"``.
``isolation_level = "read_committed"`` or ``"read_uncommitted"`` sets the consumers'
isolation.level; absent, librdkafka's default holds, which is read_committed (the Java
client's is read_uncommitted).
``physical_limit = "page-ingest"`` (publish) or ``"loopback-sendfile"`` (consume) has the
runner measure that limit of the machine right after each run (``limit_size_mib`` bytes;
loadtest/runner/limits.py) and report the run's rate as a share of it: the yardstick for
workloads that store more than the mock keeps.
``compare = false`` marks a workload the reference broker cannot hold (the librdkafka mock
keeps ~5 MiB per partition), so ``--compare`` skips it.
``[[goals]]`` tables set the bounds the runner judges the broker under test against
(loadtest/runner/goals.py): the summary and the report give a verdict for each.
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
from dataclasses import dataclass, field
from typing import Any

from loadtest.common import MIB
from loadtest.runner.goals import parse_goals

KEY_DISTRIBUTIONS = ("none", "round-robin", "random")
COMPRESSIONS = ("none", "gzip", "snappy", "lz4", "zstd")
ACKS = ("0", "1", "all", "-1")
PHYSICAL_LIMITS = ("page-ingest", "loopback-sendfile")  # loadtest/runner/limits.py measures them
ISOLATION_LEVELS = ("read_committed", "read_uncommitted")


class WorkloadError(ValueError):
    """A workload file that cannot run: says which field and why."""


@dataclass(frozen=True)
class Workload:
    name: str
    description: str = ""
    topics: int = 1
    partitions_per_topic: int = 1
    record_size: int = 100
    key_distribution: str = "none"
    key_count: int = 10_000  # distinct keys for round-robin / random
    producers: int = 1
    consumers: int = 1
    consumer_groups: int = 1
    rate: float = 0.0
    rate_mib_s: float = 0.0
    acks: str = "1"
    compression: str = "none"
    linger_ms: float = 5.0
    batch_size: int = 1_000_000  # librdkafka's batch.size default
    duration_s: float = 60.0
    warmup_s: float = 10.0
    backlog_mib: float = 0.0
    read_after_write: bool = False
    idle_connections: int = 0
    transactional: bool = False
    transaction_interval_ms: float = 100.0
    idempotent: bool = False
    isolation_level: str = ""  # "" = the client's default
    compare: bool = True
    physical_limit: str = ""  # "" = none
    limit_size_mib: float = 2048.0
    producer_config: dict[str, Any] = field(default_factory=dict)
    consumer_config: dict[str, Any] = field(default_factory=dict)
    goals: list[dict[str, Any]] = field(default_factory=list)  # as written; goals.py reads them

    @property
    def catch_up(self) -> bool:
        return self.backlog_mib > 0

    @property
    def target_records_per_s(self) -> float:
        """Over all producers; 0 = unthrottled."""
        if self.rate_mib_s:
            return self.rate_mib_s * MIB / self.record_size
        return self.rate

    def topic_names(self, prefix: str) -> list[str]:
        return [f"{prefix}-{i}" for i in range(self.topics)]

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _check(condition: bool, field_name: str, why: str) -> None:
    if not condition:
        raise WorkloadError(f"{field_name}: {why}")


def workload_from_dict(data: dict[str, Any], default_name: str = "") -> Workload:
    known = {f.name for f in dataclasses.fields(Workload)}
    unknown = sorted(set(data) - known)
    _check(not unknown, ", ".join(unknown), f"unknown field(s); known: {', '.join(sorted(known))}")
    data = dict(data)
    data.setdefault("name", default_name)
    if "acks" in data:
        data["acks"] = str(data["acks"])
    try:
        w = Workload(**data)
    except TypeError as exc:
        raise WorkloadError(str(exc)) from None
    _check(bool(w.name), "name", "is required")
    for name in ("topics", "partitions_per_topic", "record_size", "producers", "key_count"):
        _check(isinstance(getattr(w, name), int) and getattr(w, name) >= 1, name, "must be an integer >= 1")
    for name in ("consumers", "consumer_groups", "idle_connections"):
        _check(isinstance(getattr(w, name), int) and getattr(w, name) >= 0, name, "must be an integer >= 0")
    _check(w.record_size >= 8, "record_size", "must be >= 8 (the first 8 bytes carry the send time)")
    _check(w.key_distribution in KEY_DISTRIBUTIONS, "key_distribution", f"one of {KEY_DISTRIBUTIONS}")
    _check(w.compression in COMPRESSIONS, "compression", f"one of {COMPRESSIONS}")
    _check(w.acks in ACKS, "acks", f"one of {ACKS}")
    _check(w.physical_limit in ("", *PHYSICAL_LIMITS), "physical_limit", f"one of {PHYSICAL_LIMITS} (or absent)")
    _check(w.limit_size_mib >= 1, "limit_size_mib", "must be >= 1")
    _check(not (w.rate and w.rate_mib_s), "rate", "give rate or rate_mib_s, not both")
    for name in ("rate", "rate_mib_s", "linger_ms", "warmup_s", "backlog_mib"):
        _check(getattr(w, name) >= 0, name, "must be >= 0")
    _check(w.duration_s > 0, "duration_s", "must be > 0")
    for name in ("transactional", "idempotent"):
        _check(isinstance(getattr(w, name), bool), name, "must be true or false")
    _check(not (w.transactional or w.idempotent) or w.acks in ("all", "-1"), "acks",
           'an idempotent or transactional producer needs acks = "all"')
    _check(w.transaction_interval_ms > 0, "transaction_interval_ms", "must be > 0")
    _check(w.isolation_level in ("", *ISOLATION_LEVELS), "isolation_level", f"one of {ISOLATION_LEVELS} (or absent)")
    _check(not (w.isolation_level and "isolation.level" in w.consumer_config), "isolation_level",
           "set it here or as consumer_config's isolation.level, not both")
    for name in ("enable.idempotence", "transactional.id"):
        _check(name not in w.producer_config, "producer_config",
               f"{name} is the runner's: use idempotent = true or transactional = true")
    _check(not (w.catch_up or w.read_after_write) or (w.consumers >= 1 and w.consumer_groups >= 1),
           "backlog_mib", "a catch-up read (or read_after_write) needs consumers")
    try:
        parse_goals(w.goals)
    except ValueError as exc:
        raise WorkloadError(f"goals: {exc}") from None
    return w


def load_workload(path: str) -> Workload:
    with open(path, "rb") as handle:
        try:
            data = tomllib.load(handle)
        except tomllib.TOMLDecodeError as exc:
            raise WorkloadError(f"{path}: {exc}") from None
    try:
        return workload_from_dict(data, default_name=os.path.splitext(os.path.basename(path))[0])
    except WorkloadError as exc:
        raise WorkloadError(f"{path}: {exc}") from None
