"""How late a Castle's worker loops ran during a run's window, from its metrics endpoint.

Castle's workers sample their own event loops ten times a second
(``castle_worker_loop_lag_seconds``, broker/process/loop_lag.py): how long a request arriving at
that moment waited before its worker could read it. The runner scrapes the histogram when
the measurement window opens and when it closes, and reports the window's share: how many
samples, the bucket bounds that hold the p50 and p99, and the share of samples over
10 ms. Only a broker with that endpoint has these figures (a Castle; not the mock).
"""

from __future__ import annotations

import urllib.request
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

LAG_METRIC = "castle_worker_loop_lag_seconds"
SCRAPE_TIMEOUT_S = 10.0
LATE_S = 0.01  # "late": a request waited 10 ms or more before its worker read it

# upper bound (seconds, inf for +Inf) -> cumulative count, all workers together
Buckets = dict[float, float]


def scrape(address: str) -> Buckets | None:
    """The loop-lag histogram summed over the workers, or None when the endpoint cannot be
    read or has no such histogram (a broker of another kind, metrics off)."""
    try:
        with urllib.request.urlopen(f"http://{address}/metrics", timeout=SCRAPE_TIMEOUT_S) as answer:
            text = answer.read().decode()
    except OSError:
        return None
    buckets: Buckets = {}
    for family in text_string_to_metric_families(text):
        if family.name != LAG_METRIC:
            continue
        for sample in family.samples:
            if sample.name == LAG_METRIC + "_bucket":
                bound = float(sample.labels["le"])
                buckets[bound] = buckets.get(bound, 0.0) + sample.value
    return buckets or None


def _at_most(buckets: list[tuple[float, float]], total: float, q: float) -> float:
    """The upper bound of the first bucket holding the q-th sample."""
    for bound, cumulative in buckets:
        if cumulative >= q * total:
            return bound
    return buckets[-1][0]


def window_figures(before: Buckets | None, after: Buckets | None) -> dict[str, Any] | None:
    """The window's samples: after minus before, bucket by bucket."""
    if before is None or after is None:
        return None
    deltas = sorted((bound, after.get(bound, 0.0) - before.get(bound, 0.0)) for bound in after)
    total = deltas[-1][1] if deltas else 0.0
    if total <= 0:
        return None
    on_time = max((cumulative for bound, cumulative in deltas if bound <= LATE_S), default=0.0)

    def ms(bound: float) -> float | None:
        return None if bound == float("inf") else round(bound * 1000, 3)

    return {"samples": int(total), "p50_ms_at_most": ms(_at_most(deltas, total, 0.50)),
            "p99_ms_at_most": ms(_at_most(deltas, total, 0.99)),
            "late_share": round((total - on_time) / total, 4), "late_ms": LATE_S * 1000}
