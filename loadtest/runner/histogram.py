"""Latency histograms (HdrHistogram, in microseconds) that travel between processes.

Each producer and consumer process records into its own histogram and ships it every
interval in HdrHistogram's compressed base64 encoding; the runner decodes and adds them.
Percentiles from an HdrHistogram with 3 significant digits are within 0.1% of the
recorded value, over 1 µs to 10 minutes.
"""

from __future__ import annotations

from typing import Any

from hdrh.histogram import HdrHistogram

LOWEST_US = 1
HIGHEST_US = 600_000_000  # 10 minutes: a backlog's end-to-end latency can be long
SIGNIFICANT_DIGITS = 3
PERCENTILES = (50.0, 99.0, 99.9)


def new_histogram() -> HdrHistogram:
    return HdrHistogram(LOWEST_US, HIGHEST_US, SIGNIFICANT_DIGITS)


def record_us(histogram: HdrHistogram, value_us: float, count: int = 1) -> None:
    """Record a latency, clamped into the histogram's range (a clock step could give 0)."""
    histogram.record_value(min(max(int(value_us), LOWEST_US), HIGHEST_US), count)


def encode(histogram: HdrHistogram) -> str:
    return histogram.encode().decode("ascii")


def merge_into(total: HdrHistogram, encoded: str) -> None:
    total.add(HdrHistogram.decode(encoded))


def summary_ms(histogram: HdrHistogram) -> dict[str, Any]:
    """count, mean, p50, p99, p99.9 and max, in milliseconds (None when empty)."""
    count = histogram.get_total_count()
    if not count:
        return {"count": 0, "mean": None, "p50": None, "p99": None, "p99_9": None, "max": None}
    values = {f"p{q:g}".replace(".", "_"): round(histogram.get_value_at_percentile(q) / 1000, 3) for q in PERCENTILES}
    return {"count": count, "mean": round(histogram.get_mean_value() / 1000, 3), **values,
            "max": round(histogram.get_max_value() / 1000, 3)}
