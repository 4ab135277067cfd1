"""loadtest.bench_groups against two real brokers and a real ZooKeeper: the in-place mode
kills the elected coordinator process and reports when the group could commit again."""

from __future__ import annotations

import json
from typing import Any

import pytest

from loadtest import bench_groups

pytestmark = [pytest.mark.integration, pytest.mark.zookeeper, pytest.mark.timeout(180)]


def test_in_place_mode_reports_the_time_to_the_first_commit_after_the_kill(zookeeper_server: Any, capsys: Any) -> None:
    assert bench_groups.main(["--zookeeper", zookeeper_server.address, "--mode", "in-place", "--rounds", "1"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["mode"] == "in-place" and result["session_timeout_ms"] == 18_000
    (seconds,) = result["seconds_after_kill"]
    assert seconds > 0  # a commit succeeded after the kill (the bench exits non-zero if none does)
