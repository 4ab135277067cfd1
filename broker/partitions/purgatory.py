"""Long-poll waits: a fetch that has too few bytes parks here until an append to one of
its partitions (in this worker, or noted by the owning worker over the rings) or its deadline.

No polling: a watch is a future registered under each of its partitions *before* the
fetch reads (so an append between the read and the wait is not missed); ``wake(tp)``
resolves every watch of ``tp`` once, as Kafka's DelayedFetch is checked on each append.
"""

from __future__ import annotations

import asyncio
from typing import Iterable

from storage.types import TopicPartition

_TIMED_OUT = "timed out"


def _time_out(future: "asyncio.Future[str | None]") -> None:
    if not future.done():
        future.set_result(_TIMED_OUT)


class Watch:
    def __init__(self, purgatory: "FetchPurgatory", tps: list[TopicPartition]) -> None:
        self._purgatory = purgatory
        self._tps = tps
        self.future: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()
        # The partitions appended to since the last (re)arm: a woken fetch re-reads only
        # these, as the others were read empty after the watch was registered.
        self.woken: set[TopicPartition] = set()

    async def wait(self, timeout: float) -> bool:
        """True if an append woke us, False when the timeout passed.

        A timer resolves the future itself instead of asyncio.wait_for(shield(...)): those
        made two more futures, a task and their callbacks per wait, and a fetch at a fixed
        rate parks once per record. A cancelled fetch cancels the future, which wake()
        then skips (done) until the fetch's finally unregisters the watch."""
        future = self.future
        if future.done():
            return True
        timer = asyncio.get_running_loop().call_later(timeout, _time_out, future)
        try:
            await future
        finally:
            timer.cancel()
        return future.result() is not _TIMED_OUT

    def rearm(self) -> set[TopicPartition]:
        """Arm for the next wakeup; return the partitions appended to since the last arm.

        Called before the fetch reads again, so an append from here on wakes the new
        future and lands in the new set: none is missed between the read and the wait."""
        woken, self.woken = self.woken, set()
        self.future = asyncio.get_running_loop().create_future()
        return woken  # still registered: wake() finds the new future and set through self

    def cancel(self) -> None:
        self._purgatory._unregister(self)


class FetchPurgatory:
    def __init__(self) -> None:
        self._watches: dict[TopicPartition, set[Watch]] = {}
        self.closed = False

    def watch(self, tps: Iterable[TopicPartition]) -> Watch:
        w = Watch(self, list(tps))
        self._register(w)
        return w

    # A Fetch of 1,000 partitions registers and unregisters 1,000 times per request, so
    # the sets of watches stay in place when they empty (bounded by the partitions ever
    # watched): no set is made and dropped per partition per request (setdefault built a
    # new set() on every call), and the next fetch of the same partitions reuses them.
    def _register(self, w: Watch) -> None:
        watches = self._watches
        for tp in w._tps:
            found = watches.get(tp)
            if found is None:
                watches[tp] = {w}
            else:
                found.add(w)

    def _unregister(self, w: Watch) -> None:
        watches = self._watches
        for tp in w._tps:
            found = watches.get(tp)
            if found is not None:
                found.discard(w)

    def wake(self, tp: TopicPartition) -> None:
        for w in self._watches.get(tp, ()):
            w.woken.add(tp)
            if not w.future.done():
                w.future.set_result(None)

    def wake_all(self) -> None:
        """Shutdown: answer every parked fetch now."""
        self.closed = True
        for tp in list(self._watches):
            self.wake(tp)

    def __len__(self) -> int:
        """How many partitions have a parked fetch."""
        return sum(1 for watches in self._watches.values() if watches)
