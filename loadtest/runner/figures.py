"""The figures of a run that the runner summarises: medians over rounds, and ratios
between the two brokers of a --compare run. A figure is named by its path in a run's
result JSON (run.py writes them); the goals of a workload file (goals.py) name these
figures too.
"""

from __future__ import annotations

import statistics
from typing import Any

# The figures compared between two brokers, as (path in a result, higher is better).
FIGURES = {
    "publish_records_per_s": (("publish", "records_per_s"), True),
    "publish_mib_per_s": (("publish", "mib_per_s"), True),
    "consume_records_per_s": (("consume", "records_per_s"), True),
    "consume_mib_per_s": (("consume", "mib_per_s"), True),
    "publish_p50_ms": (("publish", "latency_ms", "p50"), False),
    "publish_p99_ms": (("publish", "latency_ms", "p99"), False),
    "publish_p99_9_ms": (("publish", "latency_ms", "p99_9"), False),
    "publish_max_ms": (("publish", "latency_ms", "max"), False),
    # librdkafka's split of it (producer.py, client_stats), as p99 of the median second:
    # the request's round trip, and the record's wait inside the client before it was put
    # in a request
    "publish_rtt_p99_ms": (("publish", "client_split", "rtt", "p99_ms_median_second"), False),
    "publish_queue_p99_ms": (("publish", "client_split", "queue", "p99_ms_median_second"), False),
    # a transactional producer's mean time in commit_transaction (its records wait for it)
    "publish_commit_ms_mean": (("publish", "commit_ms_mean"), False),
    "e2e_p50_ms": (("consume", "latency_ms", "p50"), False),
    "e2e_p99_ms": (("consume", "latency_ms", "p99"), False),
    "e2e_p99_9_ms": (("consume", "latency_ms", "p99_9"), False),
    "e2e_max_ms": (("consume", "latency_ms", "max"), False),
    "broker_cpu_s_per_m_records": (("broker", "cpu_s_per_m_records"), False),
    "broker_rss_anon_mib_max": (("broker", "rss_anon_mib_max"), False),
    "broker_pss_anon_mib_max": (("broker", "pss_anon_mib_max"), False),
    # a Castle's workers' loops (runner/loop_lag.py): the share of the window's samples
    # in which a request would have waited over 10 ms to be read, and the p99's bucket
    "broker_loop_late_share": (("broker_loop_lag", "late_share"), False),
    "broker_loop_lag_p99_ms": (("broker_loop_lag", "p99_ms_at_most"), False),
    # the CPUs the broker shared: clients and the whole machine, in cores
    "producers_cores": (("cpu", "producers_cores"), False),
    "consumers_cores": (("cpu", "consumers_cores"), False),
    "machine_busy_cores": (("cpu", "machine_busy_cores"), False),
    # the workload's physical limit, measured after the run (runner/limits.py), and the
    # share of it the run reached
    "physical_limit_mib_per_s": (("physical_limit", "mib_per_s"), True),
    "of_physical_limit": (("physical_limit", "of_limit"), True),
    # write-then-read runs: the read phase apart
    "read_broker_cpu_s_per_m_records": (("broker_read", "cpu_s_per_m_records"), False),
    "read_broker_rss_anon_mib_max": (("broker_read", "rss_anon_mib_max"), False),
    # idle connections (many-connections): still open when the run stopped them, never
    # established, and closed by the broker while held
    "idle_connections_open_at_stop": (("idle_connections", "summary", "open_at_stop"), True),
    "idle_connections_failed": (("idle_connections", "failed"), False),
    "idle_connections_closed_by_peer": (("idle_connections", "summary", "closed_by_peer"), False),
}


def figure(result: dict[str, Any], path: tuple[str, ...]) -> float | None:
    value: Any = result
    for key in path:
        if not isinstance(value, dict) or value.get(key) is None:
            return None
        value = value[key]
    return float(value)


def medians(results: list[dict[str, Any]]) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for name, (path, _) in FIGURES.items():
        values = [v for v in (figure(r, path) for r in results) if v is not None]
        out[name] = round(statistics.median(values), 3) if values else None
    return out


def ratios(ours: dict[str, float | None], theirs: dict[str, float | None]) -> dict[str, float | None]:
    """ours / theirs for every figure both have (throughput: > 1 is better for us;
    latency, CPU and memory: < 1 is better for us)."""
    return {name: round(ours[name] / theirs[name], 3) if ours.get(name) and theirs.get(name) else None  # type: ignore[operator]
            for name in FIGURES}
