"""controller_mutation_rate's token buckets (KIP-599), one per quota entity, shared by all
workers of a broker: Kafka's TokenBucket in shared memory.

Kafka measures partition mutations (created, added, deleted) with a token bucket, not a
sampled rate: it refills at the quota (``bound`` per second) up to a burst of ``samples x
window size x bound`` (``controller.quota.window.num`` x ``controller.quota.window.size.seconds``)
and starts full; a mutation takes its partitions even when that leaves the bucket below
zero, and the quota is exceeded while it is below zero, for ``-tokens / bound`` seconds.

Which process decides. Topics are created, grown and deleted by the worker that got the
request (through the topic registry), so the quota is one measure per broker, as Kafka's
ControllerMutationQuotaManager is per broker in ZooKeeper mode: each entity's bucket lives
in a region every worker maps. A bucket is read, refilled and taken from in one step,
which must not interleave with another worker's: the region is a file the supervisor
creates before it forks (unlinked: it goes with the broker), and each step holds a POSIX
lock on it, which the kernel drops if its holder dies. Mutations are admin requests: a
lock per topic costs nothing that matters.

Layout: SLOTS slots of three 8-byte words: key (a hash of the counted entity; 0: free),
tokens (f64), time of the last refill (ms, u64).
"""

from __future__ import annotations

import fcntl
import mmap
import os
import tempfile
import threading
import time

from broker.quotas.shared_counters import key_hash

SLOTS = 4096
PROBES = 64
WORDS = 3

_region: "MutationBuckets | None" = None


def burst(bound: float, samples: int, window_ms: int) -> float:
    """Kafka's TokenBucket.burst: the most a bucket holds."""
    return samples * window_ms / 1000.0 * bound


def refilled(tokens: float, last_ms: int, now_ms: int, bound: float, most: float) -> float:
    """Kafka's TokenBucket.refill: ``bound`` tokens a second since ``last_ms``, at most ``most``."""
    return min(most, tokens + bound * max(0, now_ms - last_ms) / 1000.0)


def throttle_ms(tokens: float, bound: float) -> int:
    """Kafka's ControllerMutationQuotaManager.throttleTimeMs: until the bucket is back at zero."""
    return round(-tokens / bound * 1000) if tokens < 0 else 0


class MutationBuckets:
    """The shared buckets. ``take`` is the one operation; it holds the region's lock."""

    def __init__(self) -> None:
        self._file = tempfile.TemporaryFile(prefix="castle-mutation-quotas-")
        self._fd = self._file.fileno()
        os.ftruncate(self._fd, SLOTS * WORDS * 8)
        self.memory = mmap.mmap(self._fd, SLOTS * WORDS * 8, flags=mmap.MAP_SHARED)
        view = memoryview(self.memory)
        self._u64 = view.cast("Q")
        self._f64 = view.cast("d")
        self._threads = threading.Lock()  # POSIX locks do not exclude the threads of one process

    def take(self, key: str, permits: float, bound: float, samples: int, window_ms: int, strict: bool,
             now_ms: int | None = None) -> tuple[bool, int]:
        """Take ``permits`` from ``key``'s bucket: (taken, throttle ms). ``strict`` (Kafka's
        StrictControllerMutationQuota): nothing is taken while the bucket is below zero, and
        the throttle is then the time until it is back at zero (else 0, even when this take
        leaves it below). Permissive: always taken; the throttle is the time until the bucket
        is back at zero after it."""
        if now_ms is None:
            now_ms = int(time.time() * 1000)
        most = burst(bound, samples, window_ms)
        with self._threads:
            fcntl.lockf(self._fd, fcntl.LOCK_EX)
            try:
                word = self._slot(key_hash(key))
                if word < 0:
                    return True, 0  # full: this entity goes unmeasured (logged nowhere: 4096 mutating entities)
                tokens = refilled(self._f64[word + 1], self._u64[word + 2], now_ms, bound, most)
                self._u64[word + 2] = now_ms
                if strict and tokens < 0:
                    self._f64[word + 1] = tokens
                    return False, throttle_ms(tokens, bound)
                tokens = min(most, tokens - permits)
                self._f64[word + 1] = tokens
                return True, 0 if strict else throttle_ms(tokens, bound)
            finally:
                fcntl.lockf(self._fd, fcntl.LOCK_UN)

    def give_back(self, key: str, permits: float, bound: float, samples: int, window_ms: int,
                  now_ms: int | None = None) -> None:
        """Undo a take whose mutation did not happen (the topic existed, the registry refused)."""
        self.take(key, -permits, bound, samples, window_ms, strict=False, now_ms=now_ms)

    def _slot(self, hashed: int) -> int:
        u64 = self._u64
        home = hashed % SLOTS
        for probe in range(PROBES):
            word = ((home + probe) % SLOTS) * WORDS
            found = u64[word]
            if found == hashed:
                return word
            if found == 0:
                u64[word] = hashed
                self._f64[word + 1] = 0.0
                u64[word + 2] = 0  # a new bucket refills to full at once: Kafka's start
                return word
        return -1

    def close(self) -> None:
        self._u64.release()
        self._f64.release()
        self.memory.close()
        self._file.close()


def prepare() -> MutationBuckets:
    """The supervisor, before any fork: the region every worker inherits."""
    global _region
    _region = MutationBuckets()
    return _region


def shared() -> MutationBuckets:
    """The region the supervisor prepared; a private one for a worker run on its own."""
    global _region
    if _region is None:
        _region = MutationBuckets()
    return _region
