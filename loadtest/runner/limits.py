"""A workload's physical limit, measured by the runner right after the run it bounds.

librdkafka's mock cluster keeps ~5 MiB per partition, so a workload that stores or
reads back more than that is not fully judged by a ratio to the mock: the issue has
such workloads reported against the physical limits of the machine instead. A workload
names its limit (``physical_limit``) and the runner measures it in the same minutes as
the run, on the same filesystem, in the memory state the run left:

* ``page-ingest`` (publish): how fast one process puts new bytes into the page cache,
  with plain ``write()`` and with Castle's mmap path, the faster of the two
  (loadtest/ingest_limit.py). One writer, because the broker shares this machine with
  its producer: on two cores, the producer takes one.
* ``loopback-sendfile`` (consume): ``os.sendfile`` of a page-cached file into a
  127.0.0.1 socket read by another process (loadtest/loopback_limit.py).

Page ingest depends on the memory state (BENCHMARKS.md, "Memory state"): on a VM that
hands freed memory back to the host, a page freed seconds ago is cheap to reuse and one
handed back is not. So the limit is measured before the run's topics are deleted (GBs of
freed log would make it cheap), and only after ``settle_s`` of quiet, again between the
two modes: the clients' exit frees their memory, and the first mode's file is deleted
before the second writes. Without the pause the second mode ran on the first one's
freed pages at 751-1,202 MiB/s against 354-509 for the first (round ten, 2 GiB each).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from loadtest import ingest_limit, loopback_limit
from loadtest.common import info

SETTLE_S = 10.0  # longer than this VM takes to hand freed pages back (seconds, by test)


@dataclass(frozen=True)
class LimitPlan:
    """Where and how the runner measures workloads' limits (``--limit-dir``, ``--limit-settle-s``)."""

    directory: str
    settle_s: float = SETTLE_S


# kind -> the figure of the run it bounds, as (section, key) in a result
LIMITS = {
    "page-ingest": ("publish", "mib_per_s"),
    "loopback-sendfile": ("consume", "mib_per_s"),
}


def measure_limit(kind: str, size_mib: float, directory: str, settle_s: float = SETTLE_S) -> dict[str, Any]:
    """The limit's rate (MiB/s) and the measurement's own figures."""
    details: dict[str, Any]
    if kind == "page-ingest":
        time.sleep(settle_s)
        measured = ingest_limit.measure(size_mib, ingest_limit.BROKER_MODES, (1,), 1, directory, pause_s=settle_s)
        modes = {run["mode"]: run["mib_per_s"] for run in measured["runs"]}  # one run of each
        rate = max(modes.values())
        details = {"modes": modes,
                   "memory_before_mib": {run["mode"]: run["memory_before_mib"] for run in measured["runs"]}}
    elif kind == "loopback-sendfile":
        measured = loopback_limit.measure(size_mib, repeat=3, directory=directory, modes=("sendfile",))
        rate = measured["sendfile"]["median_mib_per_s"]
        details = {"runs_mib_per_s": [r["mib_per_s"] for r in measured["sendfile"]["runs"]]}
    else:
        raise ValueError(f"unknown physical limit {kind!r}")
    return {"kind": kind, "mib_per_s": rate, "size_mib": size_mib, "directory": directory, "settle_s": settle_s,
            **details}


def limit_of_run(kind: str, size_mib: float, directory: str, result: dict[str, Any],
                 settle_s: float = SETTLE_S) -> dict[str, Any]:
    """The limit beside the run's bounded figure: ``of_limit`` is their ratio."""
    limit = measure_limit(kind, size_mib, directory, settle_s)
    section, key = LIMITS[kind]
    rate = (result.get(section) or {}).get(key)
    limit["compared"] = f"{section}.{key}"
    limit["of_limit"] = round(rate / limit["mib_per_s"], 3) if rate and limit["mib_per_s"] else None
    info(f"   {kind} limit {limit['mib_per_s']:.1f} MiB/s; the run's {section} rate is {limit['of_limit']} of it")
    return limit
