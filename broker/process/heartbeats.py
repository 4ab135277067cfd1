"""The children's heartbeats: one shared page of beat times, no file.

The supervisor maps an anonymous shared page before it forks (P12: made once, inherited by
every child, again after a death). Each child writes the time of its beat (CLOCK_MONOTONIC,
one clock for every process of the machine) into its own 8-byte slot, from its event loop,
so a wedged loop stops beating (P11); the supervisor reads the slots and kills a child
whose beat is older than its timeout.

The beats were the mtimes of files in run.dir until the loop's os.utime was seen stalling
a worker under replicated load: with run.dir on the data's ext4 (the default, a dir under
/tmp here), an inode update can wait for the journal. py-spy once found a worker 1.2 s of a
20 s run in it; a probe of the same call beside a later run saw p50 0.2 ms, p99 4 ms, max
10 ms (docs/BENCHMARKS.md, "Garbage collection and heartbeats"). A store into shared memory
waits for nothing.
"""

from __future__ import annotations

import mmap
import struct
import time

_SLOT = struct.Struct("d")
NEVER = 0.0  # a slot not beaten since its child was spawned: not checked yet


class Heartbeats:
    """``count`` slots; slot ``i`` belongs to worker ``i``, slot ``count`` to the coordinator."""

    def __init__(self, count: int) -> None:
        self.count = count
        self._map = mmap.mmap(-1, max(mmap.PAGESIZE, _SLOT.size * (count + 1)))  # MAP_SHARED | MAP_ANONYMOUS

    def slot(self, index: int) -> "HeartbeatSlot":
        """The slot of worker ``index``, or of the coordinator for a negative index."""
        return HeartbeatSlot(self, index if index >= 0 else self.count)

    def beat(self, position: int) -> None:
        _SLOT.pack_into(self._map, position * _SLOT.size, time.monotonic())

    def reset(self, position: int) -> None:
        _SLOT.pack_into(self._map, position * _SLOT.size, NEVER)

    def last(self, position: int) -> float:
        """The slot's last beat (time.monotonic()), NEVER if none. Read until two reads agree:
        the 8 bytes are not written atomically by contract, so a read could meet half a store."""
        offset = position * _SLOT.size
        value = _SLOT.unpack_from(self._map, offset)[0]
        while True:
            again = _SLOT.unpack_from(self._map, offset)[0]
            if again == value:
                return float(value)
            value = again


class HeartbeatSlot:
    """What a child holds: its own slot."""

    def __init__(self, beats: Heartbeats, position: int) -> None:
        self._beats = beats
        self._position = position

    def beat(self) -> None:
        self._beats.beat(self._position)

    def last(self) -> float:
        return self._beats.last(self._position)

    def reset(self) -> None:
        self._beats.reset(self._position)
