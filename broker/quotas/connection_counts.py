"""A broker's open connections and connection creation rates, shared by all its workers.

Each worker accepts its own connections (SO_REUSEPORT), but Kafka's connection limits are the
broker's: ``max.connections.per.ip`` counts an address's connections on every worker. So the
counts live in memory the supervisor maps before it forks anyone (``prepare``), as the client
quotas' measures do (broker/quotas/shared_counters.py), and a worker forked again after a death
inherits it too.

Layout: one table per worker, written by that worker only and summed on read::

    table (per worker)   total u64, then MAX_LISTENERS listener counts u64
                         SLOTS + PROBES slots of (address hash u64, count u64)

An address's slot is found by scanning the PROBES slots from its home (hash % SLOTS) for its
hash, whole, so nothing is ever deleted: a slot whose count fell to 0 may be taken by another
address of the same table, and a reader needs no tombstones.

Exactness. Summing tables is not enough on its own: two workers that each see 4 of 5 and each
admit one would leave 6. A worker therefore checks and counts (``AdmissionLock``) under an
exclusive flock of one file of the broker's run dir, held for a few microseconds on the accept
path only, and only while some limit is set; the kernel drops the lock of a worker that dies,
so a killed worker never wedges the others. A close needs no lock: a worker lowers only its own
table, and a reader that misses a close of this instant over-counts one for that instant.
A worker starting in a slot zeroes its table: its predecessor's connections died with it.

The creation rates are Kafka's sampled Rate in a QuotaCounters region of their own (one measure
per key: the broker, a listener, an address), prepared alongside.
"""

from __future__ import annotations

import fcntl
import logging
import mmap
import os

from broker.quotas.shared_counters import QuotaCounters, key_hash

log = logging.getLogger(__name__)

MAX_LISTENERS = 32
SLOTS = 16384
PROBES = 64
HEADER = 1 + MAX_LISTENERS
CREATED = 0  # the creation rates' one measure

_prepared: "tuple[ConnectionCounts, QuotaCounters] | None" = None


class ConnectionCounts:
    """The open-connection tables of ``workers`` workers; ``bind(index)`` says which one is ours."""

    def __init__(self, workers: int) -> None:
        self.workers = max(1, workers)
        self.table_words = HEADER + 2 * (SLOTS + PROBES)
        self.memory = mmap.mmap(-1, self.workers * self.table_words * 8, flags=mmap.MAP_SHARED)
        self._u64 = memoryview(self.memory).cast("Q")
        self.index = 0
        self._base = 0
        self._full_warned = False

    def bind(self, index: int) -> None:
        """This process is worker ``index``: its table starts empty, and only it writes there."""
        self.index = index
        self._base = index * self.table_words
        self.memory[self._base * 8:(self._base + self.table_words) * 8] = bytes(self.table_words * 8)

    # ------------------------------------------------------------------ reading (all tables)
    def total(self) -> int:
        u64, words = self._u64, self.table_words
        return sum(u64[table * words] for table in range(self.workers))

    def listener(self, listener: int) -> int:
        u64, words = self._u64, self.table_words
        return sum(u64[table * words + 1 + listener] for table in range(self.workers))

    def address(self, hashed: int) -> int:
        """The open connections from the address whose key_hash is ``hashed``."""
        count = 0
        for table in range(self.workers):
            word = self._find(table * self.table_words, hashed)
            if word >= 0:
                count += self._u64[word + 1]
        return count

    def _find(self, base: int, hashed: int) -> int:
        start = base + HEADER + 2 * (hashed % SLOTS)
        keys = self._u64[start:start + 2 * PROBES:2].tolist()
        try:
            return start + 2 * keys.index(hashed)
        except ValueError:
            return -1

    # ------------------------------------------------------------------ writing (our table)
    def opened(self, listener: int, hashed: int) -> None:
        u64, base = self._u64, self._base
        u64[base] += 1
        u64[base + 1 + listener] += 1
        word = self._find(base, hashed)
        if word < 0:
            word = self._claim(base, hashed)
        if word >= 0:
            u64[word + 1] += 1

    def closed(self, listener: int, hashed: int) -> None:
        u64, base = self._u64, self._base
        if u64[base]:
            u64[base] -= 1
        if u64[base + 1 + listener]:
            u64[base + 1 + listener] -= 1
        word = self._find(base, hashed)
        if word >= 0 and u64[word + 1]:
            u64[word + 1] -= 1

    def _claim(self, base: int, hashed: int) -> int:
        """A free slot of our table for ``hashed``: never used, or its address has no connection left."""
        u64 = self._u64
        start = base + HEADER + 2 * (hashed % SLOTS)
        counts = u64[start + 1:start + 1 + 2 * PROBES:2].tolist()
        try:
            word = start + 2 * counts.index(0)
        except ValueError:
            if not self._full_warned:
                log.warning("the shared connection table is full near one address: its connections are not counted "
                            "against max.connections.per.ip")
                self._full_warned = True
            return -1
        u64[word] = hashed
        return word

    def close(self) -> None:
        self._u64.release()
        self.memory.close()


class AdmissionLock:
    """The broker-wide lock a worker holds while it checks the counts and counts a connection."""

    def __init__(self, path: str) -> None:
        # Opened by each worker itself: an flock taken through a descriptor inherited over fork
        # would be shared with the other workers instead of excluding them.
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)

    def __enter__(self) -> "AdmissionLock":
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *_exc: object) -> None:
        fcntl.flock(self._fd, fcntl.LOCK_UN)

    def close(self) -> None:
        os.close(self._fd)


def address_hash(address: str) -> int:
    return key_hash(address)


def _creation_rates(workers: int, samples: int, window_ms: int) -> QuotaCounters:
    """The connection creation rates: every accept sums all workers' samples afresh (no reuse),
    since a burst spread over the workers must be counted whole, under the admission lock."""
    return QuotaCounters(workers, samples, window_ms, metrics=1, reuse_ms=0)


def prepare(workers: int, samples: int, window_ms: int) -> tuple[ConnectionCounts, QuotaCounters]:
    """The supervisor, before any fork: the regions every worker will inherit."""
    global _prepared
    _prepared = (ConnectionCounts(workers), _creation_rates(workers, samples, window_ms))
    return _prepared


def inherited(index: int, workers: int, samples: int, window_ms: int) -> tuple[ConnectionCounts, QuotaCounters]:
    """Worker ``index``'s view of the regions its supervisor prepared; private ones when there are
    none (a worker run on its own) or they do not fit the configuration."""
    found = _prepared
    if found is None or found[0].workers != max(1, workers) or found[1].samples != samples \
            or found[1].window_ms != window_ms:
        found = (ConnectionCounts(max(workers, index + 1)),
                 _creation_rates(max(workers, index + 1), samples, window_ms))
    counts, rates = found
    counts.bind(index)
    rates.bind(index)
    return counts, rates
