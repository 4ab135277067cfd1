"""loadtest.bench_group_join against a real Castle and real librdkafka members: a small
group under both protocols, one round; the JSON it prints carries every figure, each one
sane (no timing is asserted: the machine is shared)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from loadtest import bench_group_join

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

MEMBERS, PARTITIONS = 5, 10


def test_both_protocols_report_a_stable_assignment_after_every_join(tmp_path: Path, capsys: Any) -> None:
    argv = ["--members", str(MEMBERS), "--partitions", str(PARTITIONS), "--rounds", "1",
            "--heartbeat-interval-ms", "500", "--initial-rebalance-delay-ms", "500", "--timeout-s", "60",
            "--out", str(tmp_path)]
    assert bench_group_join.main(argv) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.strip()]
    *rounds, report = lines
    assert [(r["target"], r["protocol"], r["warmup"]) for r in rounds] == [("castle", "classic", False),
                                                                           ("castle", "consumer", False)]
    for r in rounds:
        assert r["members"] == MEMBERS and r["partitions"] == PARTITIONS
        assert r["partitions_held"] == list(range(PARTITIONS))  # every partition once, the newcomer's too
        assert r["newcomer_partitions"] and set(r["newcomer_partitions"]) <= set(range(PARTITIONS))
        assert r["join_all_s"] > 0 and r["join_one_s"] > 0 and r["empty_s"] > 0 and r["close_s"] > 0
        assert 0 < r["first_held_s"]["min"] <= r["first_held_s"]["max"] <= r["join_all_s"]
        assert 0 < r["newcomer_first_held_s"] <= r["join_one_s"]
        assert r["old_members_moved"] >= 1  # someone gave partitions up for the newcomer
        assert r["assignment_changes"] >= MEMBERS
    # What the broker ran with: the options reached it.
    settings = report["settings"]["castle"]
    assert settings["group.consumer.heartbeat.interval.ms"] == "500"
    assert settings["group.initial.rebalance.delay.ms"] == "500"
    for protocol, r in zip(("classic", "consumer"), rounds):
        entry = report["summary"]["castle"][protocol]
        assert entry["rounds"] == 1
        assert entry["join_all_s_median"] == r["join_all_s"] and entry["join_one_s_median"] == r["join_one_s"]
        assert entry["empty_s_median"] == r["empty_s"]
    saved = json.loads((tmp_path / "results.json").read_text())
    assert len(saved["rounds_each"]) == 2 and saved["summary"] == report["summary"]
