"""loadtest.bench_replication against three real brokers and a real ZooKeeper, with tiny
parameters: every publish case reports a positive rate, the latency cases their p99s, and
the stopped follower catches up (back in the ISR) with a time and a loopback ratio."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

pytestmark = [pytest.mark.integration, pytest.mark.zookeeper, pytest.mark.replication, pytest.mark.timeout(300)]


def test_replicated_and_unreplicated_cases_and_the_follower_catch_up_are_all_measured(zookeeper_server: Any) -> None:
    command = [sys.executable, "-m", "loadtest.bench_replication", "--zookeeper", zookeeper_server.address,
               "--seconds", "1", "--warmup", "0.3", "--backlog-mib", "8", "--catchup-partitions", "2",
               "--replica-lag-ms", "3000", "--loopback-repeat", "1", "--json"]
    done = subprocess.run(command, cwd=REPO_ROOT, stdin=subprocess.DEVNULL, capture_output=True, timeout=240)
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-4000:]
    result = json.loads(done.stdout)
    for size in ("100", "1024"):
        row = result["throughput"][size]
        for case in ("replicated", "unreplicated"):
            assert row[case]["mib_per_s"] > 0 and row[case]["records_per_s"] > 0, (size, case, row[case])
            assert row[case]["broker_cpu_s_per_million"] > 0, (size, case, row[case])  # the brokers' CPU was read
        assert row["ratio"] > 0
    for case in ("replicated", "unreplicated"):
        assert result["latency"][case]["achieved_mib_per_s"] > 0 and result["latency"][case]["p99_ms"] > 0
    catch_up = result["catch_up"]
    assert catch_up["seconds"] > 0 and catch_up["mib_per_s"] > 0 and catch_up["backlog_mib"] >= 8
    assert catch_up["stopped_follower"] not in (catch_up["leader"], catch_up["controller"])
    assert catch_up["loopback_sendfile_mib_per_s"] > 0 and catch_up["over_loopback"] > 0
    assert set(result["goals"]) == {"throughput_100b", "throughput_1024b", "latency_p99", "catch_up"}
