"""The CPU cost of client quota accounting on a Produce request, without sockets.

    python -m loadtest.micro.quota_cost [--rounds 20000] [--workers 2]

What broker/apis/produce.py adds per request (timeit, best of 5 repeats):

* ``no_quota``: no producer_byte_rate configured anywhere: the one attribute test the
  handler makes;
* ``other_client``: quotas configured, none for this client: the test, then a resolution
  answered from the table's cache;
* ``under_quota``: this client has a quota it does not reach: resolution, the record into
  this worker's sample and the sum of every worker's samples (broker/quotas/
  shared_counters.py), as the handler does on every request.

It prints CPU µs per request; set against a worker's Produce requests per second (the runner's
figures), that is the share of its time quotas cost.
"""

from __future__ import annotations

import argparse
import time
import timeit
from typing import Any, Callable

from broker.quotas.book import QuotaBook, QuotaTable
from broker.quotas.shared_counters import PRODUCE, QuotaCounters
from coordination.client_quotas import entity


def best_seconds(run: Callable[[], Any], rounds: int) -> float:
    """CPU seconds per call, the best of 5 repeats: on a shared machine, wall time counts
    the other processes' turns too."""
    return min(timeit.repeat(run, number=rounds, repeat=5, timer=time.process_time)) / rounds

PRINCIPAL = "User:ANONYMOUS"


def book(workers: int, quotas: dict[str, float]) -> QuotaBook:
    counters = QuotaCounters(workers, 11, 1000)
    counters.bind(0)
    quota_book = QuotaBook(counters)
    quota_book.table = QuotaTable({entity([("client-id", client)]): {"producer_byte_rate": rate}
                                   for client, rate in quotas.items()})
    return quota_book


def costs(rounds: int, workers: int) -> dict[str, float]:
    none = book(workers, {})
    limited = book(workers, {"limited": 1e15})  # never reached
    if workers > 1:  # the other worker measures this client too: its samples are summed
        limited.counters.bind(1)
        limited.counters.record("\x00limited", PRODUCE, 16384)
        limited.counters.bind(0)

    def handler_step(quota_book: QuotaBook, client_id: str) -> None:
        if quota_book.table.produce:
            quota_book.throttle_ms(PRODUCE, PRINCIPAL, client_id, 16384)

    return {
        "no_quota": best_seconds(lambda: handler_step(none, "limited"), rounds),
        "other_client": best_seconds(lambda: handler_step(limited, "someone-else"), rounds),
        "under_quota": best_seconds(lambda: handler_step(limited, "limited"), rounds),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20000)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    for step, seconds in costs(args.rounds, args.workers).items():
        print(f"{step:13s} {seconds * 1e6:8.3f} µs per request")


if __name__ == "__main__":
    main()
