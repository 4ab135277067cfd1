"""Shared-memory rings between the processes of one broker (its workers and its coordinator).

The anchor is Seastar's per-core queues behind Redpanda's ``submit_to``: one single-producer,
single-consumer ring per ordered pair of processes, raw bytes in, an eventfd as the doorbell.

Memory. The supervisor maps one anonymous ``MAP_SHARED`` region and creates one eventfd per
endpoint before it forks anyone, and keeps both for its whole life. Every child, including
one forked again after a death, inherits the same region and the same doorbells, so no
process ever has to find, create or attach anything. Layout::

    endpoint table   SLOT bytes per endpoint: its generation (u64)
    rings            one per ordered pair (src, dst), src != dst:
                       head u64 at 0           bytes consumed so far (written by dst only)
                       tail u64 at 64          bytes published so far (written by src only)
                       space wanted u64 at 128 src found the ring full (dst rings src when it frees)
                       data from HEADER        ``capacity`` bytes, used circularly

head and tail only grow; a position in the data is ``counter % capacity``. Each is an
aligned 8-byte value written by one process with one native store (``struct`` "Q" copies
it with memcpy, a single mov on x86-64), so a reader never sees it torn.

Records are 16-byte aligned: a RECORD header (payload size, flags, the sender's generation)
and the payload. A record never wraps: when it does not fit before the end of the data,
the producer fills the rest with a PAD record and starts again at 0 (every gap is a multiple
of 16, so a PAD header always fits). A message larger than ``max_record`` travels as
several records, all flagged FRAGMENT, the first FIRST, all but the last MORE
(broker/links/mesh.py reassembles them, and drops pieces whose beginning it never saw).

Ordering. The producer copies the payload, then publishes the new tail, then rings the
consumer's doorbell (an eventfd write); the consumer reads its eventfd, then the tail, then
the payload. The syscalls on both sides order those accesses on any CPU; x86-64 would need
no more than its store order. The consumer reads only after a doorbell.

Generations (one per endpoint, in shared memory). Even: the process serves. Odd: it is
down, or not up yet (every endpoint starts at 1). The supervisor makes a dead endpoint's
generation odd when it reaps it; the process that replaces it discards what waits in its
inbound rings (requests to its predecessor, whose senders have failed them), then makes its
generation even. A sender notices the change and fails its calls to the old generation with
a retriable error (broker/links/mesh.py).
"""

from __future__ import annotations

import mmap
import os
import struct
from typing import Iterable

U64 = struct.Struct("Q")  # native layout: one aligned 8-byte memcpy, never torn
RECORD = struct.Struct("=IHHI4x")  # payload size, flags, reserved, sender generation (low 32 bits)
assert RECORD.size == 16

ALIGN = 16
SLOT = 64
HEADER = 192
HEAD, TAIL, SPACE_WANTED = 0, 64, 128

PAD = 1  # skip to the start of the data
MORE = 2  # a fragment that the next record continues
FRAGMENT = 4  # a piece of a message larger than a record
FIRST = 8  # the first piece

# Ring sizes. Between workers a ring carries forwarded Produce requests, so it holds a few
# of the largest (1 MiB batches) at once; the total is workers * (workers - 1) rings, so it
# shrinks with many workers to keep each worker's inbound memory near INBOUND_BUDGET. The
# coordinator's rings carry offset commits and group requests: small.
MAX_RING = 8 * 1024 * 1024
MIN_RING = 1024 * 1024
INBOUND_BUDGET = 64 * 1024 * 1024
COORDINATOR_RING = 1024 * 1024


def _aligned(size: int) -> int:
    return (size + ALIGN - 1) & ~(ALIGN - 1)


def default_ring_bytes(workers: int) -> int:
    """The capacity of a ring between two workers when ``worker.ring.bytes`` is 0 (auto)."""
    share = INBOUND_BUDGET // max(1, workers - 1)
    return _aligned(max(MIN_RING, min(MAX_RING, share)))


class SharedRings:
    """The region and the doorbells of one broker: endpoints 0..workers-1 are the workers,
    endpoint ``workers`` is the coordinator process. Made by the supervisor."""

    def __init__(self, workers: int, ring_bytes: int = 0, coordinator_ring_bytes: int = COORDINATOR_RING) -> None:
        self.workers = workers
        self.endpoints = workers + 1
        self.coordinator = workers
        worker_ring = _aligned(ring_bytes) if ring_bytes > 0 else default_ring_bytes(workers)
        self._layout: dict[tuple[int, int], tuple[int, int]] = {}
        offset = _aligned(self.endpoints * SLOT)
        for src in range(self.endpoints):
            for dst in range(self.endpoints):
                if src == dst:
                    continue
                capacity = coordinator_ring_bytes if self.coordinator in (src, dst) else worker_ring
                capacity = _aligned(capacity)
                self._layout[(src, dst)] = (offset, capacity)
                offset += HEADER + capacity
        self.size = offset
        self.memory = mmap.mmap(-1, self.size, flags=mmap.MAP_SHARED)
        for endpoint in range(self.endpoints):
            self.set_generation(endpoint, 1)  # not up yet
        self.doorbells = [os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC) for _ in range(self.endpoints)]

    def ring(self, src: int, dst: int) -> "Ring":
        offset, capacity = self._layout[(src, dst)]
        return Ring(self.memory, offset, capacity)

    def generation(self, endpoint: int) -> int:
        value: int = U64.unpack_from(self.memory, endpoint * SLOT)[0]
        return value

    def set_generation(self, endpoint: int, generation: int) -> None:
        U64.pack_into(self.memory, endpoint * SLOT, generation)

    def mark_down(self, endpoint: int) -> None:
        """The supervisor reaped ``endpoint``: its generation turns odd, and every endpoint is
        woken so that callers waiting on it fail their calls now (a retriable error)."""
        generation = self.generation(endpoint)
        if generation % 2 == 0:
            self.set_generation(endpoint, generation + 1)
        for other in range(self.endpoints):
            if other != endpoint:
                ring_doorbell(self.doorbells[other])

    def close(self) -> None:
        for fd in self.doorbells:
            os.close(fd)
        self.doorbells = []
        try:
            self.memory.close()
        except BufferError:
            pass  # a payload view is still referenced somewhere: the map goes with the process


def ring_doorbell(fd: int) -> None:
    try:
        os.eventfd_write(fd, 1)
    except BlockingIOError:
        pass  # the counter is at its maximum: the consumer is due to wake anyway


def clear_doorbell(fd: int) -> None:
    try:
        os.eventfd_read(fd)
    except BlockingIOError:
        pass


class Ring:
    """One direction between two endpoints. The producer calls ``try_push``; the consumer
    calls ``drain`` (and ``discard`` once when it starts). Each side is one process."""

    __slots__ = ("_memory", "_data", "capacity", "max_record", "_head_at", "_tail_at", "_wanted_at",
                 "_pending_head")

    def __init__(self, memory: mmap.mmap, offset: int, capacity: int) -> None:
        self._memory = memory
        self._head_at = offset + HEAD
        self._tail_at = offset + TAIL
        self._wanted_at = offset + SPACE_WANTED
        self._data = offset + HEADER
        self.capacity = capacity
        self._pending_head = U64.unpack_from(memory, self._head_at)[0]
        # The largest payload of one record: a quarter of the ring, so that a few messages
        # fit at once and a PAD at the end never wastes more than that.
        self.max_record = capacity // 4 - RECORD.size

    # ------------------------------------------------------------------ producer
    def try_push(self, parts: Iterable[bytes | bytearray | memoryview], size: int, flags: int, generation: int) -> bool:
        """Copy one record (``parts`` concatenated, ``size`` bytes, at most ``max_record``)
        into the ring and publish it; False when it does not fit now."""
        memory = self._memory
        head: int = U64.unpack_from(memory, self._head_at)[0]
        tail: int = U64.unpack_from(memory, self._tail_at)[0]
        need = RECORD.size + _aligned(size)
        position = tail % self.capacity
        to_end = self.capacity - position
        pad = to_end if need > to_end else 0
        if pad + need > self.capacity - (tail - head):
            return False
        if pad:
            RECORD.pack_into(memory, self._data + position, to_end - RECORD.size, PAD, 0, generation & 0xFFFFFFFF)
            position = 0
        start = self._data + position
        RECORD.pack_into(memory, start, size, flags, 0, generation & 0xFFFFFFFF)
        at = start + RECORD.size
        for part in parts:
            length = len(part)
            memory[at:at + length] = part
            at += length
        U64.pack_into(memory, self._tail_at, tail + pad + need)
        return True

    def want_space(self) -> None:
        U64.pack_into(self._memory, self._wanted_at, 1)

    # ------------------------------------------------------------------ consumer
    def has_records(self) -> bool:
        memory = self._memory
        return bool(U64.unpack_from(memory, self._head_at)[0] != U64.unpack_from(memory, self._tail_at)[0])

    def drain(self) -> "list[tuple[int, int, memoryview]]":
        """Every record published so far: (flags, sender generation, payload view). The
        views stay valid until ``release`` (the producer cannot reuse the space before)."""
        memory = self._memory
        head: int = U64.unpack_from(memory, self._head_at)[0]
        tail: int = U64.unpack_from(memory, self._tail_at)[0]
        records = []
        view = memoryview(memory)  # its slices are the payloads: they pin the map until dropped
        data = self._data
        capacity = self.capacity
        while head < tail:
            start = data + head % capacity
            size, flags, _reserved, generation = RECORD.unpack_from(memory, start)
            if not flags & PAD:
                records.append((flags, generation, view[start + RECORD.size:start + RECORD.size + size]))
            head += RECORD.size + _aligned(size)
        self._pending_head = head
        return records

    def release(self) -> bool:
        """Give the drained space back to the producer. True when the producer asked to be
        told (it found the ring full): ring its doorbell."""
        memory = self._memory
        U64.pack_into(memory, self._head_at, self._pending_head)
        if U64.unpack_from(memory, self._wanted_at)[0]:
            U64.pack_into(memory, self._wanted_at, 0)
            return True
        return False

    def discard(self) -> None:
        """Drop every unread record (a process replacing a dead one, at its start)."""
        memory = self._memory
        U64.pack_into(memory, self._head_at, U64.unpack_from(memory, self._tail_at)[0])
        U64.pack_into(memory, self._wanted_at, 0)
