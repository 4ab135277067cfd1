"""loadtest/bench_groups.py runs end to end in a tiny configuration against a broker it
starts itself, and writes a complete result. No timing thresholds: speed is for the
benchmark (docs/BENCHMARKS.md), not for tests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest

ROOT_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.integration
def test_bench_groups_tiny_run_writes_a_complete_result(tmp_path: Any) -> None:
    out = tmp_path / "result.json"
    command = [sys.executable, "-m", "loadtest.bench_groups", "--members", "2", "--partitions", "2", "--runs", "1",
               "--rate", "200", "--session-timeout-ms", "3000", "--join-consumers", "4", "--join-processes", "2",
               "--join-runs", "1", "--quiet-s", "0.5", "--out", str(out)]  # fmt: skip
    done = subprocess.run(command, cwd=ROOT_DIR, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"exit code {done.returncode}\nstdout:\n{done.stdout}\nstderr:\n{done.stderr[-4000:]}"
    assert "Recovery after SIGKILL" in done.stdout and "Join+sync" in done.stdout

    result = json.loads(out.read_text())
    machine = result["machine"]
    assert machine["nproc"] >= 1 and machine["python"] and "cpu_model" in machine
    assert "loadtest.bench_groups" in result["command"] and result["date_utc"]
    assert result["settings"]["session_timeout_ms"] == 3000
    broker = result["broker"]
    assert broker["started_here"] and broker["exit_code"] == 0
    assert "group.initial.rebalance.delay.ms=0" in broker["command"]

    recovery = result["recovery"]
    assert recovery["runs_failed"] == 0 and len(recovery["runs"]) == 1
    assert recovery["goal_s"] == 4.0
    assert recovery["producer"]["acked"] > 0 and recovery["producer"]["errors"] == 0
    run = recovery["runs"][0]
    assert len(run["victim_partitions"]) == 1
    assert run["recovered_s"] > 0 and run["reassigned_s"] > 0 and run["detected_s"] > 0
    survivor = next(iter(run["assignment_after"]))
    assert sorted(run["assignment_after"][survivor]) == [0, 1]  # the survivor holds both partitions
    assert set(run["per_partition"]) == {str(p) for p in run["victim_partitions"]}
    assert recovery["recovered_s"]["n"] == 1 and recovery["recovered_s"]["max"] == run["recovered_s"]

    join = result["join"]
    assert join["runs_failed"] == 0 and len(join["runs"]) == 1
    run = join["runs"][0]
    assert "error" not in run
    assert run["subscribed_consumers"] == 4 and run["assigned_consumers"] == 4  # every consumer got an assignment
    assert len(run["per_consumer"]) == 4
    assert all(c["subscribe_to_first_assign_s"] > 0 and len(c["final_partitions"]) == 1 for c in run["per_consumer"])
    assert sorted(p for c in run["per_consumer"] for p in c["final_partitions"]) == [0, 1, 2, 3]
    assert run["subscribe_to_first_assign_s"]["n"] == 4
    assert 0 < run["subscribe_to_first_assign_s"]["p50"] <= run["subscribe_to_first_assign_s"]["max"]
    assert run["all_assigned_s"] > 0 and run["stable_s"] >= run["all_assigned_s"]
    assert run["broker_generations_members"] and run["broker_generations_members"][-1] == 4
    assert run["broker_cpu"]["cpu_s"] >= 0 and set(run["broker_cpu"]["by_role_s"]) >= {"supervisor", "worker", "coordinator"}
    assert run["process_exit_codes"] == [0, 0]
    assert join["all_assigned_s"]["n"] == 1 and join["all_assigned_s"]["max"] == run["all_assigned_s"]
