"""Quota rates shared by all workers of a broker: Kafka's sampled Rate in shared memory.

Kafka measures a quota entity's rate with a Rate over ``quota.window.num`` samples of
``quota.window.size.seconds`` each; here a broker's workers share one measure per quota
entity, so a client's connections landing on different workers are held to one quota.

Memory. The supervisor maps one anonymous ``MAP_SHARED`` region before it forks anyone
(``prepare``), so every worker, including one forked again after a death, inherits it
(as broker/links/rings.py does for the rings). The region has one table per worker; a
worker writes only its own table and reads all of them, so no lock is needed::

    table (per worker)   SLOTS slots
    slot                 key u64 (a hash of the counted entity; 0: free)
                         per metric (produce, fetch, request): ``samples`` x (start ms u64, value f64)

A sample belongs to the window ``now_ms // window_ms``; the slot of a window is ``window %
samples``, so a stale sample is recognized by its window and restarted by its writer, which
notes when its first value came (Kafka's Sample.lastWindowMs). A reader may see a sample
half-restarted (the new start with the old value for an instant): the rate is off for that
one read, never stuck.

Rate and throttle are Kafka's (Rate.measure / windowSize, QuotaUtils.throttleTime): the
total of the live samples over the time since the oldest live sample began, that time
padded to ``samples - 1`` whole windows (so a new client may send that much at once, as
in Kafka); over the bound, the throttle is ``(rate - bound) / bound * window size`` ms.
"""

from __future__ import annotations

import hashlib
import logging
import mmap
import time

log = logging.getLogger(__name__)

PRODUCE, FETCH, REQUEST = 0, 1, 2
METRICS = 3
SLOTS = 4096
PROBES = 64  # a key is looked for this far from its home slot
REFRESH_MS = 10  # throttle_ms sums all workers' samples again after this long

_region: "QuotaCounters | None" = None


def key_hash(key: str) -> int:
    """A stable 64-bit hash (the same in every process; 0 is kept for free slots)."""
    return int.from_bytes(hashlib.blake2b(key.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "little") or 1


def live_samples(u64: "memoryview[int]", f64: "memoryview[float]", at: int, samples: int, oldest_live: int,
                 now_ms: int) -> tuple[float, int]:
    """The total of the live samples of one (start ms, value) array at word ``at``, and when the
    oldest live one began (``now_ms`` when none is)."""
    span = 2 * samples
    starts = u64[at:at + span:2].tolist()
    values = f64[at + 1:at + span:2].tolist()
    total, oldest = 0.0, now_ms
    for index, started in enumerate(starts):
        if oldest_live <= started <= now_ms:
            total += values[index]
            if started < oldest:
                oldest = started
    return total, oldest


class QuotaCounters:
    """The shared tables of ``workers`` workers; ``bind(index)`` says which one is ours."""

    def __init__(self, workers: int, samples: int, window_ms: int, metrics: int = METRICS,
                 reuse_ms: int = REFRESH_MS) -> None:
        self.workers = workers
        self.reuse_ms = reuse_ms  # how long throttle_ms may reuse a sum (0: never)
        self.samples = samples
        self.window_ms = window_ms
        self.metric_words = 2 * samples  # (window, value) pairs, in 8-byte words
        self.slot_words = 1 + metrics * self.metric_words
        self.table_words = SLOTS * self.slot_words
        self.memory = mmap.mmap(-1, max(1, workers) * self.table_words * 8, flags=mmap.MAP_SHARED)
        view = memoryview(self.memory)
        self._u64 = view.cast("Q")
        self._f64 = view.cast("d")
        self.index = 0
        self._slots: dict[str, int] = {}  # key -> our slot's first word
        self._everywhere: dict[str, list[int]] = {}  # key -> its slot in every table
        self._hashes: dict[str, int] = {}
        self._measured: dict[tuple[str, int], list[float]] = {}  # (key, metric) -> [window, at ms, total, oldest]
        self._full_warned = False

    def bind(self, index: int) -> None:
        """This process is worker ``index``: it writes that table only."""
        self.index = index
        self._slots.clear()
        self._everywhere.clear()
        self._measured.clear()

    # ------------------------------------------------------------------ slots
    def _find(self, table: int, hashed: int, claim: bool) -> int:
        """The first word of ``hashed``'s slot in ``table`` (-1: absent, or the table is full)."""
        u64 = self._u64
        base = table * self.table_words
        home = hashed % SLOTS
        for probe in range(PROBES):
            word = base + ((home + probe) % SLOTS) * self.slot_words
            found = u64[word]
            if found == hashed:
                return word
            if found == 0:
                if not claim:
                    return -1
                u64[word] = hashed
                return word
        return -1

    def _hash(self, key: str) -> int:
        hashed = self._hashes.get(key)
        if hashed is None:
            if len(self._hashes) > 100_000:
                self._hashes.clear()
            hashed = self._hashes[key] = key_hash(key)
        return hashed

    def _own_slot(self, key: str) -> int:
        word = self._slots.get(key)
        if word is None:
            word = self._find(self.index, self._hash(key), claim=True)
            if word < 0:
                if not self._full_warned:
                    log.warning("the shared quota table is full: %s is measured by this worker alone", key)
                    self._full_warned = True
                return -1
            self._slots[key] = word
        return word

    # ------------------------------------------------------------------ measuring
    def record(self, key: str, metric: int, value: float, now_ms: int | None = None) -> None:
        """Add ``value`` to ``key``'s ``metric`` in this worker's sample of now."""
        if now_ms is None:
            now_ms = int(time.time() * 1000)
        window = now_ms // self.window_ms
        word = self._own_slot(key)
        if word >= 0:
            at = word + 1 + metric * self.metric_words + 2 * (window % self.samples)
            if self._u64[at] // self.window_ms != window:
                self._f64[at + 1] = 0.0
                self._u64[at] = now_ms
            self._f64[at + 1] += value
        cached = self._measured.get((key, metric))
        if cached is not None:
            cached[2] += value  # a reused measure sees what this worker records (or takes back)

    def rate(self, key: str, metric: int, now_ms: int) -> float:
        total, elapsed_ms = self.measure(key, metric, now_ms)
        return total * 1000.0 / elapsed_ms

    def measure(self, key: str, metric: int, now_ms: int) -> tuple[float, int]:
        """The total of the live samples of all workers and the window size (ms) it spans."""
        total, oldest = self._sum(key, metric, now_ms)
        return total, self._span(now_ms, oldest)

    def _sum(self, key: str, metric: int, now_ms: int) -> tuple[float, int]:
        """The total of the live samples of all workers, and when the oldest of them began."""
        window_ms = self.window_ms
        oldest_live = (now_ms // window_ms - self.samples + 1) * window_ms  # the earliest start still live
        total = 0.0
        oldest = now_ms
        offset = 1 + metric * self.metric_words
        for word in self._slots_everywhere(key):
            part, began = live_samples(self._u64, self._f64, word + offset, self.samples, oldest_live, now_ms)
            total += part
            oldest = min(oldest, began)
        return total, oldest

    def _span(self, now_ms: int, oldest: int) -> int:
        """Kafka's window size: the time since the oldest live sample, padded to samples - 1 windows."""
        elapsed = now_ms - oldest
        full = elapsed // self.window_ms
        if full < self.samples - 1:
            elapsed += (self.samples - 1 - full) * self.window_ms
        return max(1, elapsed)

    def _slots_everywhere(self, key: str) -> list[int]:
        """The first word of ``key``'s slot in each table that has one. A slot, once taken,
        stays its key's: what is found is remembered; a table without it is asked again."""
        found = self._everywhere.get(key)
        if found is not None and len(found) == self.workers:
            return found
        hashed = self._hash(key)
        words = [self._find(table, hashed, claim=False) for table in range(self.workers)]
        present = [word for word in words if word >= 0]
        if len(present) == self.workers:
            if len(self._everywhere) > 100_000:
                self._everywhere.clear()
            self._everywhere[key] = present
        return present

    def throttle_ms(self, key: str, metric: int, value: float, bound: float, now_ms: int | None = None) -> int:
        """Record ``value``; Kafka's throttle time if the rate is now above ``bound``, else 0.

        Summing every worker's samples costs microseconds, so a measure is reused for up to
        ``reuse_ms`` within one window, adding what this worker recorded since: the other
        workers' last few milliseconds are missed, a tiny part of a multi-second window."""
        if now_ms is None:
            now_ms = int(time.time() * 1000)
        self.record(key, metric, value, now_ms)
        window = now_ms // self.window_ms
        cached = self._measured.get((key, metric))
        if cached is not None and cached[0] == window and now_ms - cached[1] < self.reuse_ms:
            total, oldest = cached[2], int(cached[3])  # record() added the value
        else:
            total, oldest = self._sum(key, metric, now_ms)
            if self.reuse_ms:
                if len(self._measured) > 100_000:
                    self._measured.clear()
                self._measured[(key, metric)] = [window, now_ms, total, oldest]
        elapsed_ms = self._span(now_ms, oldest)
        rate = total * 1000.0 / elapsed_ms
        if rate <= bound:
            return 0
        return round((rate - bound) / bound * elapsed_ms)

    def close(self) -> None:
        self._u64.release()
        self._f64.release()
        self.memory.close()


def prepare(workers: int, samples: int, window_ms: int) -> QuotaCounters:
    """The supervisor, before any fork: the region every worker will inherit."""
    global _region
    _region = QuotaCounters(workers, samples, window_ms)
    return _region


def inherited(index: int, workers: int, samples: int, window_ms: int) -> QuotaCounters:
    """The worker's view of the region its supervisor prepared; a private one when there is
    none (a worker run on its own), or when it does not fit the configuration."""
    region = _region
    if region is None or region.workers != workers or region.samples != samples or region.window_ms != window_ms:
        region = QuotaCounters(max(workers, index + 1), samples, window_ms)
    region.bind(index)
    return region
