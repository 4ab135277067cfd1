"""A broker's replication byte rates, shared by all its workers: the measures of Kafka's
ReplicationQuotaManager (KIP-73).

Kafka keeps three per broker, each one rate whatever thread records it: LEADER (the bytes
its followers fetched of the partitions its leader throttled-replicas lists name), FOLLOWER
(the bytes it fetched as a follower of the partitions its follower lists name) and
ALTER_LOG_DIRS (the bytes copied into future logs). Here a broker's workers each lead,
follow and move some partitions, so each measure is shared by all of them.

Memory, as broker/quotas/shared_counters.py: the supervisor maps one anonymous ``MAP_SHARED``
region before it forks anyone (``prepare``) and every worker inherits it. One table per
worker, which only that worker writes (no lock); a reader adds up every table::

    table (per worker)   per measure: ``samples`` x (start ms u64, value f64)

A sample belongs to the window ``now_ms // window_ms`` and sits in slot ``window % samples``;
a stale one is recognized by its start and restarted by its writer.

The rate is Kafka's SimpleRate (the replication quotas' stat, unlike the client quotas'
Rate): the live samples' total over the time since the oldest live sample began, at least
one window. So a throttle set on an idle broker lets through one window's worth at once,
not ``samples - 1`` windows' worth.
"""

from __future__ import annotations

import mmap
import time
from typing import Callable

from broker.quotas.shared_counters import live_samples

LEADER, FOLLOWER, ALTER_LOG_DIRS = 0, 1, 2
MEASURES = 3

Windows = tuple[tuple[int, int], ...]  # per measure: (samples, window ms)

_region: "ReplicationRates | None" = None


def now_ms() -> int:
    return int(time.time() * 1000)  # the wall clock: the same in every process of the broker


class ReplicationRates:
    """The shared tables of ``workers`` workers; ``bind(index)`` says which one this process writes."""

    def __init__(self, workers: int, windows: Windows) -> None:
        if len(windows) != MEASURES:
            raise ValueError(f"one (samples, window ms) per measure: {MEASURES}, not {len(windows)}")
        self.workers = workers
        self.windows = windows
        self._offsets: list[int] = []  # each measure's first word in a table
        words = 0
        for samples, _window_ms in windows:
            self._offsets.append(words)
            words += 2 * samples
        self.table_words = words
        self.memory = mmap.mmap(-1, max(1, workers) * words * 8, flags=mmap.MAP_SHARED)
        view = memoryview(self.memory)
        self._u64 = view.cast("Q")
        self._f64 = view.cast("d")
        self.index = 0

    def bind(self, index: int) -> None:
        self.index = index

    def record(self, measure: int, value: float, at_ms: int | None = None) -> None:
        """Add ``value`` bytes to ``measure`` in this worker's sample of now."""
        now = now_ms() if at_ms is None else at_ms
        samples, window_ms = self.windows[measure]
        window = now // window_ms
        at = self.index * self.table_words + self._offsets[measure] + 2 * (window % samples)
        if self._u64[at] // window_ms != window:
            self._f64[at + 1] = 0.0
            self._u64[at] = now
        self._f64[at + 1] += value

    def rate(self, measure: int, at_ms: int | None = None) -> float:
        """Bytes per second over the live samples of every worker (Kafka's SimpleRate)."""
        now = now_ms() if at_ms is None else at_ms
        samples, window_ms = self.windows[measure]
        oldest_live = (now // window_ms - samples + 1) * window_ms
        total = 0.0
        oldest = now
        for table in range(self.workers):
            at = table * self.table_words + self._offsets[measure]
            part, began = live_samples(self._u64, self._f64, at, samples, oldest_live, now)
            total += part
            oldest = min(oldest, began)
        return total * 1000.0 / max(now - oldest, window_ms)

    def close(self) -> None:
        self._u64.release()
        self._f64.release()
        self.memory.close()


def windows_of(get_int: Callable[[str], int]) -> Windows:
    """The measures' windows from the broker's settings (Kafka's names)."""
    replication = (get_int("replication.quota.window.num"), get_int("replication.quota.window.size.seconds") * 1000)
    alter = (get_int("alter.log.dirs.replication.quota.window.num"),
             get_int("alter.log.dirs.replication.quota.window.size.seconds") * 1000)
    return (replication, replication, alter)


def prepare(workers: int, windows: Windows) -> ReplicationRates:
    """The supervisor, before any fork: the region every worker will inherit."""
    global _region
    _region = ReplicationRates(workers, windows)
    return _region


def inherited(index: int, workers: int, windows: Windows) -> ReplicationRates:
    """The worker's view of the region its supervisor prepared; a private one when there is
    none (a worker run on its own) or it does not fit the configuration."""
    region = _region
    if region is None or region.workers != workers or region.windows != windows:
        region = ReplicationRates(max(workers, index + 1), windows)
    region.bind(index)
    return region

