"""loadtest.bench_quota_cost's reading of a run: throttle counts from the workers' stats
files and the producers' event files, and the pairing of each round's two runs."""

from __future__ import annotations

import json
from pathlib import Path

from loadtest.bench_quota_cost import castle_throttles, paired_ratios, producer_throttle_ms_max, throttled_between


def test_throttles_are_read_per_worker_and_a_restarted_worker_counts_from_zero(tmp_path: Path) -> None:
    def write(index: int, produce: int, fetch: int) -> None:
        (tmp_path / f"worker-{index}.stats.json").write_text(json.dumps(
            {"worker": index, "requests": 10, "quota_throttled_produce": produce, "quota_throttled_fetch": fetch}))

    write(0, 5, 1)
    write(1, 7, 0)
    (tmp_path / "worker-2.stats.json").write_text("{half written")  # being replaced: skipped
    before = castle_throttles(str(tmp_path))
    assert before == {"worker-0.stats.json:quota_throttled_produce": 5, "worker-0.stats.json:quota_throttled_fetch": 1,
                      "worker-1.stats.json:quota_throttled_produce": 7, "worker-1.stats.json:quota_throttled_fetch": 0}
    write(0, 9, 1)
    write(1, 2, 3)  # restarted in between: its 2 and 3 are all new
    assert throttled_between(before, castle_throttles(str(tmp_path))) == {"quota_throttled_produce": 4 + 2,
                                                                          "quota_throttled_fetch": 0 + 3}
    assert throttled_between(before, before) == {"quota_throttled_produce": 0, "quota_throttled_fetch": 0}


def test_the_longest_throttle_a_producer_was_answered(tmp_path: Path) -> None:
    lines = [{"event": "started", "t": 1.0}, {"event": "client_stats", "t": 2.0, "brokers": {}, "throttle_ms_max": 0},
             {"event": "client_stats", "t": 3.0, "brokers": {}, "throttle_ms_max": 120},
             {"event": "interval", "t": 3.0, "acked": 5}]
    (tmp_path / "producer-0.events.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    (tmp_path / "producer-1.events.jsonl").write_text(json.dumps({"event": "client_stats", "throttle_ms_max": 40}) + "\n")
    (tmp_path / "consumer-g0-0.events.jsonl").write_text(json.dumps({"event": "client_stats", "throttle_ms_max": 900}) + "\n")
    assert producer_throttle_ms_max(str(tmp_path)) == 120
    assert producer_throttle_ms_max(str(tmp_path / "nothing-here")) == 0


def test_each_round_pairs_its_run_with_quotas_and_its_run_without() -> None:
    on = [{"round": 1, "publish": {"records_per_s": 90.0}}, {"round": 2, "publish": {"records_per_s": 110.0}},
          {"round": 3, "publish": {"records_per_s": 50.0}}]  # round 3's run without quotas failed
    off = [{"round": 2, "publish": {"records_per_s": 100.0}}, {"round": 1, "publish": {"records_per_s": 100.0}}]
    assert paired_ratios(on, off) == [{"round": 1, "on": 90.0, "off": 100.0, "ratio": 0.9},
                                      {"round": 2, "on": 110.0, "off": 100.0, "ratio": 1.1}]
