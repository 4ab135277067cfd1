"""The loop-lag probe (broker/process/loop_lag.py) on a real uvloop loop: on time while the loop
is free, late by as long as a callback holds the loop, and silent once stopped."""

from __future__ import annotations

import asyncio
import time

import uvloop

from broker.process.loop_lag import LoopLagProbe


def test_a_callback_that_holds_the_loop_shows_as_one_late_sample():
    loop = uvloop.new_event_loop()
    samples: list[float] = []
    probe = LoopLagProbe(loop, samples.append, interval=0.02)
    try:
        probe.start()
        loop.run_until_complete(_sleep(loop, 0.2))  # free: ~10 samples, each on time
        free = list(samples)
        loop.call_soon(time.sleep, 0.3)  # a callback that keeps the loop for 300 ms
        loop.run_until_complete(_sleep(loop, 0.35))
        probe.stop()
        stopped_at = len(samples)
        loop.run_until_complete(_sleep(loop, 0.1))
    finally:
        loop.close()
    assert len(free) >= 5 and max(free) < 0.1, free
    late = [s for s in samples[len(free):] if s >= 0.2]
    assert len(late) == 1 and late[0] < 0.35, samples  # the one timer due while the loop was held
    assert len(samples) == stopped_at  # nothing after stop
    assert min(samples) >= 0.0  # a timer firing early is not negative lag


async def _sleep(loop: asyncio.AbstractEventLoop, seconds: float) -> None:
    await asyncio.sleep(seconds)
