"""Replication throttles (KIP-73), as Kafka's ReplicationQuotaManager and its callers apply them.

Which partitions: a topic's ``leader.replication.throttled.replicas`` and
``follower.replication.throttled.replicas`` are ``*`` or ``partition:broker`` lists; a broker
throttles, as leader or as follower, the partitions whose entries name itself (Kafka's
ConfigHandler.parseThrottledPartitions: kafka-reassign-partitions lists a move's existing
replicas in the leader list and its new ones in the follower list).

How much: the broker's ``leader.replication.throttled.rate`` and
``follower.replication.throttled.rate`` (bytes/s; unbounded unless set), measured broker-wide
across workers (broker/quotas/replication_rates.py). A side whose rate is unbounded has no
``ReplicaThrottle`` at all (None), so the fetch paths pay one attribute test.

What it does (Kafka's ReplicaManager.shouldLeaderThrottle and the follower's
shouldFollowerThrottle: throttled only when the partition is listed, the rate is over and the
replica is NOT in sync, so the throttle never pushes a replica out of the ISR):
* leader: a follower's Fetch gets no bytes of such a partition (the leader answers it empty),
  and the bytes it does send of every listed partition, in sync or not, are recorded;
* follower: such a partition is left out of the Fetch; the bytes received of every listed
  partition are recorded.
* alter log dirs: ``replica.alter.log.dirs.io.max.bytes.per.second`` bounds the copy into
  future logs (AlterReplicaLogDirs), every future log counting.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from broker.dynamic_configs import ALTER_LOG_DIRS_RATE, FOLLOWER_REPLICATION_RATE, LEADER_REPLICATION_RATE
from broker.quotas.replication_rates import ALTER_LOG_DIRS, FOLLOWER, LEADER, ReplicationRates
from storage.config import LONG_MAX
from storage.manager import LogManager
from storage.types import TopicPartition

LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"

ALL: frozenset[int] = frozenset({-1})  # every partition of the topic ("*"), as Kafka's AllReplicas


def throttled_partitions(value: str, broker_id: int) -> frozenset[int]:
    """The partitions a throttled-replicas value names for ``broker_id``; ALL for ``*``."""
    value = value.strip()
    if value == "*":
        return ALL
    partitions = set()
    for item in value.split(","):
        partition, _sep, broker = item.partition(":")
        if broker.strip() == str(broker_id) and partition.strip().isdigit():
            partitions.add(int(partition))
    return frozenset(partitions)


class ReplicaThrottle:
    """One side's throttle on this broker: which partitions it holds, and whether its rate is over."""

    __slots__ = ("measure", "bound", "_rates", "_key", "_broker_id", "_configs_of", "_parsed")

    def __init__(self, measure: int, bound: float, rates: ReplicationRates, replicas_key: str, broker_id: int,
                 configs_of: Callable[[str], Mapping[str, str] | None]) -> None:
        self.measure = measure
        self.bound = bound
        self._rates = rates
        self._key = replicas_key
        self._broker_id = broker_id
        self._configs_of = configs_of
        self._parsed: dict[str, frozenset[int]] = {}  # a list's text -> what it names for this broker

    def throttled(self, tp: TopicPartition) -> bool:
        """Kafka's isThrottled: the topic's list names this partition on this broker (or is "*")."""
        configs = self._configs_of(tp.topic)
        value = configs.get(self._key, "") if configs else ""
        if not value:
            return False
        parsed = self._parsed.get(value)
        if parsed is None:
            if len(self._parsed) > 10_000:
                self._parsed.clear()
            parsed = self._parsed[value] = throttled_partitions(value, self._broker_id)
        return parsed is ALL or tp.partition in parsed

    def exceeded(self) -> bool:
        """Kafka's isQuotaExceeded: the broker's measured rate is above the bound."""
        return self._rates.rate(self.measure) > self.bound

    def record(self, value: float) -> None:
        self._rates.record(self.measure, value)


class ReplicationThrottles:
    """A worker's throttles, rebuilt when the rates change: ``leader`` and ``follower`` are None
    while their rate is unbounded; ``alter_log_dirs_bound`` likewise."""

    def __init__(self, broker_id: int, rates: ReplicationRates,
                 configs_of: Callable[[str], Mapping[str, str] | None]) -> None:
        self.broker_id = broker_id
        self.rates = rates
        self._configs_of = configs_of
        self.leader: ReplicaThrottle | None = None
        self.follower: ReplicaThrottle | None = None
        self.alter_log_dirs_bound: int | None = None
        # Told after each set_rates (the worker hands the new throttles to the fetch paths).
        self.on_change: Callable[[], None] = lambda: None

    def set_rates(self, value: Callable[[str], Any]) -> None:
        """Take the rates from ``value(name)`` (the broker's effective configs)."""
        self.leader = self._throttle(LEADER, int(value(LEADER_REPLICATION_RATE)), LEADER_REPLICAS)
        self.follower = self._throttle(FOLLOWER, int(value(FOLLOWER_REPLICATION_RATE)), FOLLOWER_REPLICAS)
        alter = int(value(ALTER_LOG_DIRS_RATE))
        self.alter_log_dirs_bound = None if alter >= LONG_MAX else alter
        self.on_change()

    def _throttle(self, measure: int, bound: int, key: str) -> ReplicaThrottle | None:
        if bound >= LONG_MAX:
            return None
        return ReplicaThrottle(measure, float(bound), self.rates, key, self.broker_id, self._configs_of)

    def copy_future_logs(self, logs: LogManager, most: int, seconds: float) -> None:
        """One housekeeping tick of AlterReplicaLogDirs' copy into the future logs: up to ``most``
        bytes each unthrottled; else nothing while the broker's copy rate is over its bound, and
        about ``seconds`` of the bound's worth otherwise. What was copied is measured (a copy
        takes whole batches, so it may exceed what it was given), and the rate catches it up."""
        bound = self.alter_log_dirs_bound
        if bound is None:
            logs.move_future_logs(most)
            return
        if self.rates.rate(ALTER_LOG_DIRS) > bound:
            return
        before = {tp: future.log.size_in_bytes for tp, future in logs.futures.items()}
        logs.move_future_logs(max(1, min(most, int(bound * seconds))))
        copied = 0
        for tp, size in before.items():
            future = logs.futures.get(tp)
            after = future.log if future is not None else logs.get_log(tp)  # swapped in: the log it became
            if after is not None:
                copied += max(0, after.size_in_bytes - size)
        self.rates.record(ALTER_LOG_DIRS, copied)
