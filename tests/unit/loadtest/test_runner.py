"""The workload runner's pieces that need no broker: workload files, histograms, medians
and ratios, and the report (Markdown and charts)."""

from __future__ import annotations

import glob
import json
import os
import random
import time
from array import array

import pytest

from loadtest.runner import loop_lag
from loadtest.runner.__main__ import workload_overrides
from loadtest.runner.figures import FIGURES, medians, ratios
from loadtest.runner.goals import BELOW_FLOOR, MET, NO_FIGURE, NOT_MET, Goal, evaluate_goals, goal_lines, parse_goals
from loadtest.runner.histogram import encode, merge_into, new_histogram, record_us, summary_ms
from loadtest.runner.limits import LIMITS, LimitPlan, limit_of_run
from loadtest.runner.procstats import Sample
from loadtest.runner.producer import CLIENT_SPLIT, client_split, histogram_of_seconds
from loadtest.runner.report import goals_table, table, write_report
from loadtest.runner.run import _broker_figures, _physical_limit, _weighted_median
from loadtest.runner.workload import PHYSICAL_LIMITS, WorkloadError, load_workload, workload_from_dict

WORKLOADS = sorted(glob.glob(os.path.join(os.path.dirname(__file__), "..", "..", "..", "loadtest", "workloads", "*.toml")))


def test_every_shipped_workload_loads():
    names = {load_workload(path).name for path in WORKLOADS}
    assert {"max-throughput-100b", "max-throughput-1kb", "fixed-rate-latency", "many-partitions",
            "many-connections", "catch-up"} <= names
    assert load_workload([p for p in WORKLOADS if p.endswith("many-connections.toml")][0]).idle_connections >= 5000
    assert load_workload([p for p in WORKLOADS if p.endswith("many-partitions.toml")][0]).partitions_per_topic == 1000
    catch_up = load_workload([p for p in WORKLOADS if p.endswith("catch-up.toml")][0])
    assert catch_up.catch_up and not catch_up.compare
    # The workloads that keep more than the mock are judged against the machine too.
    assert catch_up.physical_limit == "loopback-sendfile"
    for name in ("max-throughput-100b.toml", "max-throughput-1kb.toml"):
        assert load_workload([p for p in WORKLOADS if p.endswith(name)][0]).physical_limit == "page-ingest"


def _goals_of(name: str) -> dict[str, Goal]:
    w = load_workload([p for p in WORKLOADS if p.endswith(name)][0])
    return {g.figure: g for g in parse_goals(w.goals)}


def test_the_shipped_workloads_carry_the_issues_goals():
    for path in WORKLOADS:
        assert _goals_of(os.path.basename(path))["broker_rss_anon_mib_max"].at_most == 500, path  # memory, in every workload
    assert _goals_of("max-throughput-100b.toml")["broker_cpu_s_per_m_records"].at_most == 0.2
    for name in ("max-throughput-100b.toml", "max-throughput-1kb.toml", "fixed-rate-latency.toml", "many-partitions.toml"):
        goals = _goals_of(name)
        # consume is judged where the mock reads what was sent (live), not on a read-back
        figures = ("publish_records_per_s", "consume_records_per_s") if "max-throughput" not in name else ("publish_records_per_s",)
        for figure in figures:
            assert (goals[figure].ratio, goals[figure].at_least, goals[figure].never_below) == (True, 0.9, 0.8), name
    assert _goals_of("fixed-rate-latency.toml")["publish_p99_ms"].at_most == 10
    connections = _goals_of("many-connections.toml")
    assert connections["idle_connections_open_at_stop"].at_least == 5000
    assert connections["idle_connections_failed"].at_most == 0 == connections["idle_connections_closed_by_peer"].at_most
    assert _goals_of("catch-up.toml")["of_physical_limit"].at_least == 0.7


@pytest.mark.parametrize("goal, value, verdict", [
    (Goal("publish_p99_ms", at_most=10), 9.9, MET),
    (Goal("publish_p99_ms", at_most=10), 10.0, MET),
    (Goal("publish_p99_ms", at_most=10), 10.1, NOT_MET),
    (Goal("publish_records_per_s", at_least=0.9, ratio=True, never_below=0.8), 0.9, MET),
    (Goal("publish_records_per_s", at_least=0.9, ratio=True, never_below=0.8), 0.85, NOT_MET),
    (Goal("publish_records_per_s", at_least=0.9, ratio=True, never_below=0.8), 0.79, BELOW_FLOOR),
    (Goal("publish_records_per_s", at_least=0.9), 0.5, NOT_MET),
    (Goal("publish_p99_ms", at_most=10), None, NO_FIGURE),
])
def test_a_goal_gives_its_verdict(goal, value, verdict):
    assert goal.verdict(value) == verdict


@pytest.mark.parametrize("goals, complaint", [
    ({"figure": "publish_p99_ms", "at_most": 10}, "list of tables"),
    (["publish_p99_ms"], "goal 1: must be a table"),
    ([{"figure": "publish_p99_ms", "at_most": 10, "max": 3}], "unknown key"),
    ([{"figure": "p99", "at_most": 10}], "figure 'p99'"),
    ([{"figure": "publish_p99_ms"}], "exactly one of"),
    ([{"figure": "publish_p99_ms", "at_most": 10, "at_least": 1}], "exactly one of"),
    ([{"figure": "publish_p99_ms", "at_most": "10"}], "at_most must be a number"),
    ([{"figure": "publish_p99_ms", "at_most": True}], "at_most must be a number"),
    ([{"figure": "publish_p99_ms", "at_most": 10, "never_below": 1}], "never_below"),
    ([{"figure": "consume_records_per_s", "at_least": 0.8, "never_below": 0.9}], "never_below"),
    ([{"figure": "publish_p99_ms", "at_most": 10, "ratio": "yes"}], "ratio must be"),
    ([{"figure": "publish_p99_ms", "at_most": 10}, {"figure": "publish_p99_ms", "at_most": 10, "why": 3}],
     "goal 2: why must be a string"),
])
def test_bad_goals_are_workload_errors_that_say_which(goals, complaint):
    with pytest.raises(WorkloadError, match=f"goals: .*{complaint}"):
        workload_from_dict({"name": "x", "goals": goals})


def test_goals_are_judged_on_the_broker_under_tests_medians_or_the_ratios():
    goals = [{"figure": "publish_p99_ms", "at_most": 10, "why": "fast"},
             {"figure": "publish_records_per_s", "ratio": True, "at_least": 0.9, "never_below": 0.8},
             {"figure": "broker_cpu_s_per_m_records", "at_most": 0.2}]
    entry = {"workload": workload_from_dict({"name": "w", "goals": goals}).as_dict(),
             "medians": {"castle": {"publish_p99_ms": 8.5, "publish_records_per_s": 90.0, "broker_cpu_s_per_m_records": None},
                         "mock": {"publish_p99_ms": 50.0, "publish_records_per_s": 120.0}},
             "ratios": {"publish_p99_ms": 0.17, "publish_records_per_s": 0.75}}
    verdicts = evaluate_goals(entry, "castle")
    assert [(v["value"], v["verdict"]) for v in verdicts] == [(8.5, MET), (0.75, BELOW_FLOOR), (None, NO_FIGURE)]
    assert verdicts[0]["goal"] == "publish_p99_ms <= 10" and verdicts[0]["why"] == "fast"
    assert verdicts[1]["goal"] == "publish_records_per_s / compared broker's >= 0.9, never below 0.8"
    # The mock's own medians judge nothing: only the broker under test is judged.
    assert evaluate_goals(entry, "mock")[0]["verdict"] == NOT_MET
    entry["goals"] = verdicts
    assert goal_lines({"workloads": {"w": entry}}) == [
        "goal w: publish_p99_ms <= 10: 8.5: met",
        "goal w: publish_records_per_s / compared broker's >= 0.9, never below 0.8: 0.75: below the floor",
        "goal w: broker_cpu_s_per_m_records <= 0.2: –: no figure"]
    text = goals_table(verdicts, "castle")
    assert text.splitlines()[0] == "Goals for castle (median over rounds):"
    assert "| publish_p99_ms <= 10 | 8.5 | met | fast |" in text
    assert "| broker_cpu_s_per_m_records <= 0.2 | – | **no figure** |  |" in text


def test_every_physical_limit_a_workload_may_name_is_measured():
    assert set(LIMITS) == set(PHYSICAL_LIMITS)


@pytest.mark.parametrize("kind, section", [("page-ingest", "publish"), ("loopback-sendfile", "consume")])
def test_a_physical_limit_is_measured_beside_the_rate_it_bounds(tmp_path, kind, section):
    limit = limit_of_run(kind, 8, str(tmp_path), {section: {"mib_per_s": 10.0}}, settle_s=0)
    assert limit["kind"] == kind and limit["compared"] == f"{section}.mib_per_s"
    assert limit["mib_per_s"] > 10  # 8 MiB into this machine's page cache or through loopback: far above 10 MiB/s
    assert limit["of_limit"] == round(10.0 / limit["mib_per_s"], 3)
    assert os.listdir(tmp_path) == []  # the measurement's files are gone
    assert limit["settle_s"] == 0
    if kind == "page-ingest":
        assert set(limit["modes"]) == {"write", "mmap"} and limit["mib_per_s"] == max(limit["modes"].values())
    else:
        assert len(limit["runs_mib_per_s"]) == 3


def test_a_run_without_the_bounded_rate_gets_the_limit_but_no_share(tmp_path):
    limit = limit_of_run("page-ingest", 4, str(tmp_path), {}, settle_s=0)
    assert limit["mib_per_s"] > 0 and limit["of_limit"] is None


def test_a_byte_rate_becomes_records_per_second():
    w = workload_from_dict({"name": "r", "record_size": 1024, "rate_mib_s": 10})
    assert w.target_records_per_s == 10 * 1024


@pytest.mark.parametrize("fields, complaint", [
    ({"name": "x", "partitions": 4}, "partitions: unknown field"),
    ({"name": "x", "compression": "brotli"}, "compression"),
    ({"name": "x", "rate": 10, "rate_mib_s": 1}, "rate"),
    ({"name": "x", "record_size": 4}, "record_size"),
    ({"name": "x", "acks": 2}, "acks"),
    ({"name": "x", "duration_s": 0}, "duration_s"),
    ({"name": "x", "backlog_mib": 10, "consumers": 0}, "backlog_mib"),
    ({"name": "x", "topics": "many"}, "topics"),
    ({"name": "x", "physical_limit": "disk"}, "physical_limit"),
    ({"name": "x", "physical_limit": "page-ingest", "limit_size_mib": 0}, "limit_size_mib"),
])
def test_bad_workloads_name_the_field(fields, complaint):
    with pytest.raises(WorkloadError, match=complaint):
        workload_from_dict(fields)


def test_a_broken_toml_file_is_a_workload_error(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text('name = "x"\nrate = \n')
    with pytest.raises(WorkloadError, match="bad.toml"):
        load_workload(str(path))


def test_set_overrides_parse_toml_values():
    assert workload_overrides(["duration_s=20", "acks=\"all\"", "compare=false", "compression=lz4"]) == {
        "duration_s": 20, "acks": "all", "compare": False, "compression": "lz4"}


def test_histograms_travel_and_merge():
    a, b = new_histogram(), new_histogram()
    for v in range(1, 1001):
        record_us(a, v * 1000)  # 1..1000 ms
    record_us(b, 5_000_000, count=10)  # ten of 5 s
    total = new_histogram()
    merge_into(total, encode(a))
    merge_into(total, encode(b))
    s = summary_ms(total)
    assert s["count"] == 1010
    assert s["p50"] == pytest.approx(505, rel=0.01)
    assert s["max"] == pytest.approx(5000, rel=0.001)
    assert summary_ms(new_histogram())["p99"] is None


def test_delivery_latencies_histogrammed_with_numpy_match_exact_percentiles():
    rng = random.Random(7)
    seconds = array("d", (rng.lognormvariate(-5, 1) for _ in range(50_000)))
    exact = sorted(seconds)
    s = summary_ms(histogram_of_seconds(seconds))
    assert s["count"] == len(seconds)
    for key, q in (("p50", 0.50), ("p99", 0.99), ("p99_9", 0.999)):
        assert s[key] == pytest.approx(exact[int(q * len(exact)) - 1] * 1000, rel=0.01)
    assert s["max"] == pytest.approx(exact[-1] * 1000, rel=0.01)


def test_the_client_split_takes_each_broker_connection_that_carried_requests_from_real_statistics():
    """librdkafka's statistics, from a real producer on librdkafka's own mock cluster: the
    split keeps only node ids >= 0 whose round trips were counted, with all three parts."""
    from confluent_kafka import Producer

    seen: list[str] = []
    producer = Producer({"test.mock.num.brokers": 2, "statistics.interval.ms": 100, "stats_cb": seen.append,
                         "linger.ms": 0})
    deadline = time.monotonic() + 20
    split: dict = {}
    while time.monotonic() < deadline and not split:
        for _ in range(50):
            producer.produce("t", b"x" * 100)
        producer.poll(0.05)
        while seen and not split:
            statistics = json.loads(seen.pop(0))
            split = client_split(statistics)
    producer.flush(10)
    assert split, "no statistics window with a counted round trip"
    node_ids = {str(b["nodeid"]) for b in statistics["brokers"].values() if b["nodeid"] >= 0 and b["rtt"]["cnt"]}
    assert set(split) == node_ids and all(int(n) >= 0 for n in split)  # no bootstrap or internal connection
    for parts in split.values():
        assert set(parts) == set(CLIENT_SPLIT)
        p50, p99, top, count, out_of_range = parts["rtt"]
        # librdkafka rounds percentiles up to its histogram's buckets (2 significant
        # digits), so a p99 may pass the exact max by a little.
        assert count > 0 and out_of_range == 0 and 0 < p50 <= p99 <= top * 1.02


def test_loop_lag_of_a_window_is_the_difference_of_two_scrapes():
    inf = float("inf")
    before = {0.001: 50.0, 0.01: 60.0, 0.05: 60.0, inf: 60.0}  # cumulative, as scraped
    after = {0.001: 150.0, 0.01: 257.0, 0.05: 259.0, inf: 260.0}
    lag = loop_lag.window_figures(before, after)
    # the window: 100 samples within 1 ms, 97 within 10 ms, 2 within 50 ms, 1 beyond
    assert lag == {"samples": 200, "p50_ms_at_most": 1.0, "p99_ms_at_most": 50.0, "late_share": 0.015, "late_ms": 10.0}
    assert loop_lag.window_figures(before, before) is None  # no samples: nothing to say
    assert loop_lag.window_figures(None, after) is None  # the endpoint could not be read
    assert loop_lag.window_figures({inf: 0.0}, {0.001: 99.0, inf: 100.0})["p99_ms_at_most"] == 1.0
    assert loop_lag.window_figures({inf: 0.0}, {0.001: 98.0, inf: 100.0})["p99_ms_at_most"] is None  # beyond the last bound


def test_a_weighted_median_is_the_value_at_half_the_weight():
    assert _weighted_median([(5.0, 1), (1.0, 1), (3.0, 1)]) == 3.0
    assert _weighted_median([(1.0, 10), (100.0, 1)]) == 1.0  # the busy window outweighs the quiet one
    assert _weighted_median([(1.0, 1), (100.0, 10)]) == 100.0


def _result(label: str, pub: float, con: float, p99: float, cpu: float) -> dict:
    return {"label": label, "publish": {"records_per_s": pub, "mib_per_s": pub / 10_000, "latency_ms": {"p50": 1.0, "p99": p99}},
            "consume": {"records_per_s": con, "mib_per_s": con / 10_000, "latency_ms": {"p50": 2.0, "p99": 2 * p99}},
            "broker": {"cpu_s_per_m_records": cpu, "rss_anon_mib_max": 100.0},
            "timeline": [{"t": t, "publish_bytes": 1_000_000, "consume_bytes": 900_000} for t in range(5)]}


def test_medians_and_ratios():
    runs = [_result("a", 100, 90, 5, 0.3), _result("b", 300, 80, 7, 0.1), _result("c", 200, 70, 6, 0.2)]
    m = medians(runs)
    assert m["publish_records_per_s"] == 200 and m["consume_records_per_s"] == 80 and m["publish_p99_ms"] == 6
    assert m["e2e_max_ms"] is None  # no run has it
    r = ratios(m, medians([_result("m", 400, 160, 3, 0.1)]))
    assert r["publish_records_per_s"] == 0.5 and r["publish_p99_ms"] == 2.0 and r["e2e_max_ms"] is None
    assert set(r) == set(FIGURES)


def test_the_report_has_a_table_with_ratios_and_both_charts(tmp_path):
    runs = {"castle": [_result("w-castle-r1", 90, 90, 5, 0.3)], "mock": [_result("w-mock-r1", 100, 80, 4, 0.1)]}
    for rs in runs.values():
        for r in rs:
            (tmp_path / f"{r['label']}.json").write_text(json.dumps(r))
    entry = {"workload": {"name": "w", "description": "a test workload"}, "skipped": [],
             "medians": {name: medians(rs) for name, rs in runs.items()},
             "runs": {name: [r["label"] for r in rs] for name, rs in runs.items()}}
    entry["ratios"] = ratios(entry["medians"]["castle"], entry["medians"]["mock"])
    path = write_report({"workloads": {"w": entry}, "failures": [{"label": "x-r1", "error": "boom"}],
                         "command": "python -m loadtest.runner w.toml", "warmup_rounds": 1}, str(tmp_path))
    text = open(path).read()
    assert "| castle / mock | 0.90x |" in text
    assert "Warm-up: 1 uncounted round(s)" in text
    assert "a test workload" in text and "x-r1: boom" in text
    for png in ("w-throughput.png", "w-latency.png"):
        with open(tmp_path / png, "rb") as handle:
            assert handle.read(8) == b"\x89PNG\r\n\x1a\n"


def test_a_limit_that_cannot_be_measured_is_an_error_in_the_result_not_a_lost_run():
    w = workload_from_dict({"name": "x", "physical_limit": "page-ingest", "limit_size_mib": 4})
    limit = _physical_limit(w, LimitPlan("/proc/castle-no-such-dir", settle_s=0), {"publish": {"mib_per_s": 1.0}})
    assert limit["kind"] == "page-ingest" and "castle-no-such-dir" in limit["error"]


def test_the_physical_limit_columns_show_only_where_a_run_measured_one():
    castle = _result("w-castle-r1", 90, 90, 5, 0.3)
    castle["physical_limit"] = {"kind": "page-ingest", "mib_per_s": 400.0, "of_limit": 0.0225}
    with_limit = {"medians": {"castle": medians([castle]), "mock": medians([_result("w-mock-r1", 100, 80, 4, 0.1)])}}
    text = table(with_limit)
    assert "| physical limit MiB/s | of the limit |" in text.splitlines()[0]
    assert text.splitlines()[2].endswith("| 400.0 | 0.02 |") and text.splitlines()[3].endswith("| – | – |")
    assert "of the limit" not in table({"medians": {"castle": medians([_result("w-castle-r1", 90, 90, 5, 0.3)])}})


def test_a_key_value_option_without_equals_stops_the_tool_naming_the_option():
    from loadtest.common import parse_key_values

    assert parse_key_values(["a=1", " b = x=y "], "--castle-override") == {"a": "1", "b": "x=y"}
    with pytest.raises(SystemExit, match="--castle-override: setting 'nokv' is not key=value"):
        parse_key_values(["a=1", "nokv"], "--castle-override")


def test_broker_cpu_is_a_rate_over_the_span_its_samples_cover():
    # One core busy throughout; samples once a second, 0.5 s off the window's edges. The
    # span the samples cover (from 9.5 to 19.5) is 10 s for a 9 s window [10, 19]: CPU
    # per second must still come out at one core, and the window's CPU at 9 s.
    # A quarter of it in the kernel.
    samples = [(t + 0.5, Sample(cpu_s=t + 0.5, rss_anon_mib=100.0 + t, pss_anon_mib=None, pss_mib=None, processes=4,
                                kernel_cpu_s=(t + 0.5) / 4))
               for t in range(0, 30)]
    figures = _broker_figures(samples, 10.0, 19.0, 9_000_000)
    assert figures["cpu_cores"] == pytest.approx(1.0)
    assert figures["cpu_s"] == pytest.approx(9.0)
    assert figures["cpu_s_per_m_records"] == pytest.approx(1.0)
    assert figures["kernel_cpu_s_per_m_records"] == pytest.approx(0.25)
    assert figures["rss_anon_mib_max"] == 118.0  # the last sample inside the window (18.5 s)
    assert figures["processes"] == 4
    # A window shorter than the sampling interval still gets the samples around it.
    short = _broker_figures(samples, 10.6, 11.2, 600_000)
    assert short["cpu_cores"] == pytest.approx(1.0)
    assert _broker_figures([], 10.0, 19.0, 1) == {}
