"""loadtest.bench_idle against the Castle it starts: every process of the broker is measured
(CPU, wake-ups, RssAnon) and the broker is stopped by its PID afterwards."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def test_an_idle_castle_is_measured_process_by_process() -> None:
    done = subprocess.run([sys.executable, "-m", "loadtest.bench_idle", "--seconds", "2", "--settle-s", "1", "--json"],
                          cwd=REPO, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=100)
    assert done.returncode == 0, done.stderr[-4000:]
    [castle] = json.loads(done.stdout)
    assert castle["broker"] == "castle" and castle["seconds"] >= 2
    names = {name.split(" (")[0] for name in castle["cpu_cores_by_process"]}
    assert {"supervisor", "worker 0", "coordinator"} <= names, names
    assert castle["cpu_cores"] == pytest.approx(sum(castle["cpu_cores_by_process"].values()), abs=1e-3)
    assert castle["wakeups_per_s"] > 0 and castle["rss_anon_mib"] > 0
    # Every process it measured is gone: the broker was stopped by its PID.
    for name in castle["cpu_cores_by_process"]:
        pid = int(name.rsplit("(", 1)[1].rstrip(")"))
        assert not os.path.exists(f"/proc/{pid}") or open(f"/proc/{pid}/stat").read().split()[2] == "Z"
