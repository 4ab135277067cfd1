"""How late a worker's event loop runs: the wait a request has before the worker reads it.

A worker reads a request only when its loop comes round to the socket. While the loop is
busy with other callbacks, or the process is off the CPU (another process has it, or the
hypervisor took the vCPU), bytes that arrived wait in the socket, and no request latency
the worker measures itself (from a frame being taken to its answer being queued) can see
that wait. The benchmark runs on a 2-vCPU host found it was most of the fixed-rate
workload's publish p99 (thirteenth round, `git show 0858314:docs/BENCHMARKS.md`).

The probe is a timer due every ``PROBE_INTERVAL_S``: how late it fires is the wait a
request arriving at that moment would have had. Timers fire at random moments with
respect to the work, so the distribution of those waits is the distribution a request
arriving at a random moment sees. At 10 samples a second it costs nothing measurable,
even on an idle broker, and a minute of load gives 600 samples per worker.

The loop's timers have a resolution of one millisecond, so lateness under ~1 ms is noise.
"""

from __future__ import annotations

import asyncio
import time
from typing import Callable

PROBE_INTERVAL_S = 0.1


class LoopLagProbe:
    """Calls ``record(seconds late)`` from a timer on the running loop until ``stop``."""

    def __init__(self, loop: asyncio.AbstractEventLoop, record: Callable[[float], None],
                 interval: float = PROBE_INTERVAL_S) -> None:
        self.loop = loop
        self.record = record
        self.interval = interval
        self._handle: asyncio.TimerHandle | None = None
        self._due = 0.0

    def start(self) -> None:
        self._schedule()

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _schedule(self) -> None:
        # time.monotonic, not loop.time(): the loop's clock is cached once per iteration,
        # so a timer set late in a long iteration would count that iteration as lateness.
        self._due = time.monotonic() + self.interval
        self._handle = self.loop.call_later(self.interval, self._fire)

    def _fire(self) -> None:
        # A timer may fire up to a millisecond early (whole-millisecond timeouts): no lag.
        self.record(max(0.0, time.monotonic() - self._due))
        self._schedule()
