"""Timing and printing shared by the per-request cost tools (fetch_cost, produce_cost):
each times steps of a worker's request handling on one in-memory request, with timeit,
and prints them per request and per partition."""

from __future__ import annotations

import argparse
import timeit
from typing import Any, Callable


def best_seconds(run: Callable[[], Any], rounds: int) -> float:
    """Seconds per call: the best of 5 repeats of ``rounds`` calls (the least disturbed)."""
    return min(timeit.repeat(run, number=rounds, repeat=5)) / rounds


def print_costs(figures: dict[str, float], partitions: int) -> None:
    width = max(len(step) for step in figures)
    for step, seconds in figures.items():
        print(f"{step:{width}s} {seconds * 1e6:9.2f} µs per request  {seconds * 1e6 / partitions:7.3f} µs per partition")


def main(argv: list[str] | None, doc: str, measure: Callable[[int, int, int], dict[str, float]], what: str,
         partitions: int, version: int, rounds: int) -> int:
    """The command line of a cost tool: ``measure(partitions, version, rounds)``, printed."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=partitions)
    parser.add_argument("--version", type=int, default=version, help=f"{what} version")
    parser.add_argument("--rounds", type=int, default=rounds)
    args = parser.parse_args(argv)
    print_costs(measure(args.partitions, args.version, args.rounds), args.partitions)
    return 0
