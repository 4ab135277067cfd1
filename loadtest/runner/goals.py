"""The goals a workload file sets, and the runner's verdict on each.

    [[goals]]
    figure = "publish_records_per_s"   # a figure of loadtest/runner/figures.py
    ratio = true                       # judged on the ratio to the compared broker (--compare)
    at_least = 0.9                     # or at_most = ...
    never_below = 0.8                  # with at_least only: a floor below the goal
    why = "produce at >= 90% of the mock in the same run, never below 80%"

    [[goals]]
    figure = "publish_records_per_s"
    against_workload = "idempotent-produce-100b"   # another workload of the same run
    at_least = 0.9
    why = "transactions cost under 10% of the idempotent producer's rate"

A goal is judged on the median over the rounds of the broker under test (the runner's
first target); with ``ratio = true`` on that median over the compared broker's; with
``against_workload`` on that median over the same broker's median of the same figure in
the named workload, which must run in the same invocation (the same machine, minutes
apart: the only comparison this shared machine allows). The verdicts:

* ``met``;
* ``not met``;
* ``below the floor``: under ``never_below`` as well as under ``at_least``;
* ``no figure``: the run did not give the figure (a ratio without --compare, a workload
  skipped for the compared broker, every round failed, the other workload not run).

The goals live in the workload files, beside what they judge, so a run on another
machine gives the same table that docs/BENCHMARKS.md shows for this one. A goal that is
not met does not fail the runner: a benchmark measures, it does not test.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from loadtest.runner.figures import FIGURES

MET, NOT_MET, BELOW_FLOOR, NO_FIGURE = "met", "not met", "below the floor", "no figure"
KEYS = {"figure", "ratio", "against_workload", "at_least", "at_most", "never_below", "why"}


@dataclass(frozen=True)
class Goal:
    figure: str
    at_least: float | None = None
    at_most: float | None = None
    ratio: bool = False
    never_below: float | None = None
    why: str = ""
    against_workload: str = ""  # "" = none

    def describe(self) -> str:
        subject = self.figure
        if self.ratio:
            subject = f"{self.figure} / compared broker's"
        elif self.against_workload:
            subject = f"{self.figure} / {self.against_workload}'s"
        bound = f">= {self.at_least:g}" if self.at_least is not None else f"<= {self.at_most:g}"
        floor = f", never below {self.never_below:g}" if self.never_below is not None else ""
        return f"{subject} {bound}{floor}"

    def verdict(self, value: float | None) -> str:
        if value is None:
            return NO_FIGURE
        if self.at_least is not None:
            if value >= self.at_least:
                return MET
            return BELOW_FLOOR if self.never_below is not None and value < self.never_below else NOT_MET
        assert self.at_most is not None
        return MET if value <= self.at_most else NOT_MET


def _number(item: dict[str, Any], key: str, where: str) -> float | None:
    value = item.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{where}: {key} must be a number, got {value!r}")
    return float(value)


def parse_goals(items: Any) -> list[Goal]:
    """The ``goals`` of a workload (a list of tables); ValueError says which is wrong."""
    if not isinstance(items, list):
        raise ValueError("must be a list of tables ([[goals]])")
    goals = []
    for i, item in enumerate(items):
        where = f"goal {i + 1}"
        if not isinstance(item, dict):
            raise ValueError(f"{where}: must be a table")
        unknown = sorted(set(item) - KEYS)
        if unknown:
            raise ValueError(f"{where}: unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(KEYS))}")
        figure = item.get("figure")
        if figure not in FIGURES:
            raise ValueError(f"{where}: figure {figure!r} is not one of the runner's figures "
                             "(loadtest/runner/figures.py)")
        at_least, at_most = _number(item, "at_least", where), _number(item, "at_most", where)
        if (at_least is None) == (at_most is None):
            raise ValueError(f"{where}: give exactly one of at_least and at_most")
        never_below = _number(item, "never_below", where)
        if never_below is not None and (at_least is None or never_below > at_least):
            raise ValueError(f"{where}: never_below goes with at_least, and is not above it")
        ratio = item.get("ratio", False)
        if not isinstance(ratio, bool):
            raise ValueError(f"{where}: ratio must be true or false")
        why = item.get("why", "")
        if not isinstance(why, str):
            raise ValueError(f"{where}: why must be a string")
        against = item.get("against_workload", "")
        if not isinstance(against, str) or (ratio and against):
            raise ValueError(f"{where}: against_workload must be a workload's name, and does not go with ratio")
        goals.append(Goal(figure, at_least, at_most, ratio, never_below, why, against))
    return goals


def workloads_named(goals: list[Goal]) -> set[str]:
    """The other workloads these goals are judged against."""
    return {g.against_workload for g in goals if g.against_workload}


def _over(ours: float | None, theirs: float | None) -> float | None:
    return round(ours / theirs, 3) if ours is not None and theirs else None


def evaluate_goals(entry: dict[str, Any], primary: str,
                   workloads: dict[str, dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """One verdict per goal of a summary entry (its workload, medians and ratios), for the
    broker under test named ``primary``; ``workloads`` (the summary's entries by name) gives
    the figures of the other workloads goals may be judged against."""
    medians = entry.get("medians", {}).get(primary) or {}
    ratios = entry.get("ratios") or {}
    verdicts = []
    for goal in parse_goals(entry["workload"].get("goals", [])):
        if goal.against_workload:
            other = ((workloads or {}).get(goal.against_workload) or {}).get("medians", {}).get(primary) or {}
            value = _over(medians.get(goal.figure), other.get(goal.figure))
        else:
            value = (ratios if goal.ratio else medians).get(goal.figure)
        verdicts.append({"goal": goal.describe(), "figure": goal.figure, "ratio": goal.ratio,
                         "against_workload": goal.against_workload, "value": value,
                         "verdict": goal.verdict(value), "why": goal.why})
    return verdicts


def goal_lines(summary: dict[str, Any]) -> list[str]:
    """The verdicts of every workload of a summary, one console line each."""
    lines = []
    for name, entry in summary["workloads"].items():
        for v in entry.get("goals", []):
            value = "–" if v["value"] is None else f"{v['value']:g}"
            lines.append(f"goal {name}: {v['goal']}: {value}: {v['verdict']}")
    return lines
