"""loadtest.bench_quota_cost against a Castle it starts, on a tiny workload: rounds that
alternate quotas off and on, the quotas configured as DescribeClientQuotas shows them and
never reached (no request throttled, by the workers' counts and by the producers' own
statistics), medians, ratios and the goal's verdict. Then quotas low enough to be reached:
the bench must see it, by both counts, and say the measure is void."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
CLIENT_ID = "castle-bench-quota"
# Every run's consumer group joins anew: without Kafka's 3 s initial rebalance delay (its
# shipped server.properties sets 0 too) a run takes seconds less and measures the same.
NO_JOIN_DELAY = ["--castle-override", "group.initial.rebalance.delay.ms=0"]

TINY = """
name = "tiny"
topics = 1
partitions_per_topic = 2
record_size = 256
producers = 1
consumers = 1
consumer_groups = 1
rate = 2000
acks = "1"
linger_ms = 5
duration_s = 2
warmup_s = 1
"""


def bench(tmp_path: Path, *args: str, timeout: float = 260) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    workload = tmp_path / "tiny.toml"
    workload.write_text(TINY)
    out = tmp_path / "out"
    process = subprocess.Popen([sys.executable, "-m", "loadtest.bench_quota_cost", str(workload), "--out", str(out),
                                "--json", "--settle-s", "0.5", "--castle-override", "workers=2", *NO_JOIN_DELAY, *args], cwd=REPO,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()  # its own session: the broker and clients it started stop with it by their PIDs
        stdout, stderr = process.communicate(timeout=30)
    done = subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)
    assert stdout, stderr[-4000:]
    summary = json.loads(stdout)
    with open(out / "summary.json") as handle:
        assert json.load(handle) == summary
    return done, summary


def positive(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0


def test_quotas_configured_but_not_reached_are_measured_in_alternating_rounds(tmp_path: Path) -> None:
    done, summary = bench(tmp_path, "--rounds", "2")
    assert done.returncode == 0, done.stderr[-4000:]
    assert summary["failures"] == [] and summary["quota_reached"] is False
    assert summary["command"][1:4] == [str(tmp_path / "tiny.toml"), "--out", str(tmp_path / "out")]
    assert summary["workload"]["producer_config"]["client.id"] == CLIENT_ID
    assert summary["workload"]["consumer_config"]["client.id"] == CLIENT_ID
    # Off then on, then on then off: drift on the machine favours neither.
    assert summary["order"] == ["tiny-castle-off-r1", "tiny-castle-on-r1", "tiny-castle-on-r2", "tiny-castle-off-r2"]

    assert list(summary["brokers"]) == ["castle"]
    castle = summary["brokers"]["castle"]
    wanted = {"producer_byte_rate": float(1 << 40), "consumer_byte_rate": float(1 << 40), "request_percentage": 10000.0}
    # What DescribeClientQuotas answered while they were on: the default user and the client id.
    assert castle["quotas"] == {"user=<default>": wanted, f"client-id={CLIENT_ID}": wanted}
    assert castle["on"]["runs"] == ["tiny-castle-on-r1", "tiny-castle-on-r2"]
    assert castle["off"]["runs"] == ["tiny-castle-off-r1", "tiny-castle-off-r2"]
    for mode in ("on", "off"):
        figures = castle[mode]["medians"]
        for key in ("publish_records_per_s", "publish_mib_per_s", "broker_cpu_s_per_m_records", "consume_records_per_s"):
            assert positive(figures[key]), (mode, key, figures)
        # The workload's fixed rate, with or without quotas: none held the producer back.
        assert figures["publish_records_per_s"] == pytest.approx(2000, rel=0.25), (mode, figures)
        for label, throttled in castle["throttled"][mode].items():
            assert throttled == {"producer_throttle_ms_max": 0, "quota_throttled_produce": 0,
                                 "quota_throttled_fetch": 0}, (label, throttled)
    assert castle["quota_reached"] is False
    assert positive(castle["publish_ratio"])
    assert castle["publish_ratio"] == castle["ratios"]["publish_records_per_s"]
    assert castle["cost"] == pytest.approx(1 - castle["publish_ratio"], abs=1e-4)
    assert [r["round"] for r in castle["rounds"]] == [1, 2]
    for pair in castle["rounds"]:
        assert pair["ratio"] == pytest.approx(pair["on"] / pair["off"], rel=1e-3)
    assert positive(castle["paired_ratio_median"])

    goal = summary["goal"]
    assert goal["goal"] == "<= 0.03" and goal["value"] == castle["cost"]
    assert goal["met"] is (castle["cost"] <= 0.03)

    for label in summary["order"]:  # the runner's result of each run, with its mode and throttles
        with open(tmp_path / "out" / f"{label}.json") as handle:
            run = json.load(handle)
        assert run["quota_mode"] == label.split("-")[2] and run["throttled"]["quota_throttled_produce"] == 0
        assert run["publish"]["errors"] == 0 and run["consume"]["missing"] == 0


def test_a_quota_that_is_reached_is_seen_and_voids_the_measure(tmp_path: Path) -> None:
    """256 KiB/s against a producer sending 500 KiB/s: throttled, by the workers' counts and
    in the throttle times the producer was answered. Two one-second samples per quota, so
    the short run is measured as it goes rather than padded to Kafka's ten windows."""
    done, summary = bench(tmp_path, "--rounds", "1", "--byte-rate", str(256 * 1024),
                          "--castle-override", "quota.window.num=2")
    assert done.returncode == 1, done.stderr[-4000:]
    assert "measured the quota, not its cost" in done.stderr
    assert summary["failures"] == [] and summary["quota_reached"] is True
    castle = summary["brokers"]["castle"]
    assert castle["quota_reached"] is True and summary["goal"]["met"] is None
    (on,) = castle["throttled"]["on"].values()
    assert on["quota_throttled_produce"] > 0 and on["producer_throttle_ms_max"] > 0, on
    (off,) = castle["throttled"]["off"].values()
    assert off == {"producer_throttle_ms_max": 0, "quota_throttled_produce": 0, "quota_throttled_fetch": 0}, off
    assert castle["on"]["medians"]["publish_records_per_s"] < castle["off"]["medians"]["publish_records_per_s"]


@pytest.mark.kafka_peer
@pytest.mark.timeout(900)
def test_compare_mode_measures_kafkas_own_quota_cost_beside_castles(tmp_path: Path) -> None:
    """--compare kafka: Apache Kafka 4.4 (loadtest/kafka_peer.py) takes the same quotas through
    the same AlterClientQuotas, answers them in DescribeClientQuotas, and is measured with and
    without them in the same rounds; its producers were never answered a throttle time."""
    from loadtest.kafka_peer import DEFAULT_VERSION, missing_tools

    missing = missing_tools(DEFAULT_VERSION)
    if missing:  # as tests/integration/loadtest/test_kafka_peer.py: CI installs them
        pytest.fail(f"the Kafka peer needs {', '.join(missing)} on PATH (apt-get install default-jre-headless maven)")
    done, summary = bench(tmp_path, "--rounds", "1", "--warmup-rounds", "0", "--compare", "kafka",
                          "--kafka-override", "group.initial.rebalance.delay.ms=0", timeout=840)
    assert done.returncode == 0, done.stderr[-4000:]
    kafka = f"kafka-{DEFAULT_VERSION}"
    assert list(summary["brokers"]) == ["castle", kafka]
    assert summary["order"] == ["tiny-castle-off-r1", "tiny-castle-on-r1", f"tiny-{kafka}-off-r1", f"tiny-{kafka}-on-r1"]
    wanted = {"producer_byte_rate": float(1 << 40), "consumer_byte_rate": float(1 << 40), "request_percentage": 10000.0}
    for name, entry in summary["brokers"].items():
        assert entry["quotas"] == {"user=<default>": wanted, f"client-id={CLIENT_ID}": wanted}, name
        assert entry["quota_reached"] is False and positive(entry["publish_ratio"]), (name, entry)
        for mode in ("on", "off"):
            assert positive(entry[mode]["medians"]["publish_records_per_s"]), (name, mode)
            (throttled,) = entry["throttled"][mode].values()
            assert throttled["producer_throttle_ms_max"] == 0, (name, mode, throttled)
    assert set(summary["brokers"][kafka]["throttled"]["on"][f"tiny-{kafka}-on-r1"]) == {"producer_throttle_ms_max"}
