"""broker/quotas/shared_counters.py: Kafka's sampled rate and throttle time, shared by forked
workers through the memory mapped before the fork."""

from __future__ import annotations

import os

import pytest

from broker.quotas import shared_counters
from broker.quotas.shared_counters import FETCH, PRODUCE, QuotaCounters

T0 = 1_800_000_000_000  # ms, on a window boundary


def test_a_new_measure_spans_samples_minus_one_windows() -> None:
    """Kafka's Rate pads the elapsed time to (samples - 1) whole windows."""
    counters = QuotaCounters(1, 11, 1000)
    counters.record("k", PRODUCE, 5000, T0 + 200)
    total, elapsed = counters.measure("k", PRODUCE, T0 + 700)  # since the first value: 500 ms, padded
    assert total == 5000 and elapsed == 10_500
    assert counters.rate("k", PRODUCE, T0 + 700) == pytest.approx(5000 / 10.5)
    assert counters.measure("k", PRODUCE, T0 + 10_200)[1] == 10_000  # ten whole windows: no padding


def test_throttle_time_is_kafkas() -> None:
    """(rate - bound) / bound * window size, in ms; nothing while under the bound."""
    counters = QuotaCounters(1, 11, 1000)
    assert counters.throttle_ms("k", PRODUCE, 9_000, 1000.0, T0) == 0  # 9000 / 10 s = 900/s
    throttle = counters.throttle_ms("k", PRODUCE, 6_000, 1000.0, T0)  # 15000 / 10 s = 1500/s
    assert throttle == round((1500 - 1000) / 1000 * 10_000)


def test_samples_older_than_the_window_count_no_more() -> None:
    counters = QuotaCounters(1, 11, 1000)
    counters.record("k", PRODUCE, 1000, T0)
    counters.record("k", PRODUCE, 500, T0 + 5_000)
    assert counters.measure("k", PRODUCE, T0 + 10_999)[0] == 1500
    total, elapsed = counters.measure("k", PRODUCE, T0 + 11_000)  # the first window left
    assert total == 500 and elapsed == 10_000  # since T0 + 5000 is only 6 s: padded
    counters.record("k", PRODUCE, 7, T0 + 11_500)  # reuses the first sample's slot, restarted
    assert counters.measure("k", PRODUCE, T0 + 11_500)[0] == 507


def test_metrics_and_keys_are_apart() -> None:
    counters = QuotaCounters(1, 11, 1000)
    counters.record("a", PRODUCE, 10, T0)
    counters.record("a", FETCH, 20, T0)
    counters.record("b", PRODUCE, 40, T0)
    assert counters.measure("a", PRODUCE, T0)[0] == 10
    assert counters.measure("a", FETCH, T0)[0] == 20
    assert counters.measure("b", PRODUCE, T0)[0] == 40
    assert counters.measure("c", PRODUCE, T0)[0] == 0


def test_forked_workers_share_one_measure() -> None:
    """Each worker writes its own table; each reads the sum of all."""
    region = shared_counters.prepare(2, 11, 1000)
    try:
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                mine = shared_counters.inherited(1, 2, 11, 1000)
                mine.record("shared", PRODUCE, 3000, T0)
                code = 0
            finally:
                os._exit(code)
        assert os.waitpid(pid, 0)[1] == 0
        worker0 = shared_counters.inherited(0, 2, 11, 1000)
        assert worker0 is region
        worker0.record("shared", PRODUCE, 1000, T0)
        assert worker0.measure("shared", PRODUCE, T0)[0] == 4000
        # a throttle sees the other worker's bytes: 4000 + 8000 over 10 s is 1200/s against 1000/s
        assert worker0.throttle_ms("shared", PRODUCE, 8000, 1000.0, T0) == 2000
    finally:
        shared_counters._region = None
        region.close()


def test_a_reused_measure_sees_this_worker_at_once_and_the_others_after_the_refresh() -> None:
    """throttle_ms sums every table at most every REFRESH_MS within a window: what this worker
    records or takes back counts at once, another worker's values from the next refresh."""
    region = QuotaCounters(2, 11, 1000)
    other = QuotaCounters.__new__(QuotaCounters)
    other.__dict__.update(region.__dict__)  # the other worker's view of the same memory
    other._slots, other._everywhere, other._hashes, other._measured = {}, {}, {}, {}
    region.bind(0)
    other.bind(1)
    bound = 1000.0  # per s: about 10,000 over a new measure's padded 10 s
    assert region.throttle_ms("k", PRODUCE, 10_000, bound, T0 + 100) == 0
    other.record("k", PRODUCE, 5_000, T0 + 101)
    assert region.throttle_ms("k", PRODUCE, 1, bound, T0 + 102) == 0  # the other's 5,000 not seen yet
    region.record("k", PRODUCE, 1_000, T0 + 103)  # ours, seen at once: 11,001 > 10,500
    assert region.throttle_ms("k", PRODUCE, 1, bound, T0 + 104) > 0
    region.record("k", PRODUCE, -1_000, T0 + 105)  # taken back, at once
    assert region.throttle_ms("k", PRODUCE, 1, bound, T0 + 106) == 0
    later = T0 + 106 + shared_counters.REFRESH_MS
    total, span = 10_000 + 5_000 + 1 + 1 + 1 + 1, later - (T0 + 100) + 10_000  # since the first value, padded
    assert region.throttle_ms("k", PRODUCE, 1, bound, later) == round((total * 1000 / span - bound) / bound * span)
