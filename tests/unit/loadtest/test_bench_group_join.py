"""loadtest.bench_group_join's bookkeeping: when a group counts as stable, the order of the
rounds, the medians and ratios, the options."""

from __future__ import annotations

import pytest

from loadtest.bench_group_join import Target, parse_args, ratios, schedule, stable, summarize


def test_stable_needs_every_partition_once_every_member_some_and_balance() -> None:
    assert stable([frozenset({0, 1}), frozenset({2, 3}), frozenset({4})], 5)
    assert not stable([frozenset({0, 1}), frozenset({2, 3}), frozenset()], 4)  # a member without any
    assert not stable([frozenset({0, 1}), frozenset({1, 2}), frozenset({3, 4})], 5)  # 1 twice, none missing in sum
    assert not stable([frozenset({0, 1}), frozenset({1, 2}), frozenset({3})], 5)  # 1 twice, 4 held by nobody
    assert not stable([frozenset({0, 1, 2}), frozenset({3})], 4)  # unbalanced: not what any assignor settles on


def test_warm_ups_come_first_then_the_brokers_take_turns() -> None:
    castle, kafka = Target("castle", "a:1"), Target("kafka", "b:2")
    labels = [(label, warmup) for _, _, label, warmup in schedule([castle, kafka], 2, 1, ["classic", "consumer"])]
    assert labels[:4] == [("castle-classic-warmup1", True), ("castle-consumer-warmup1", True),
                          ("kafka-classic-warmup1", True), ("kafka-consumer-warmup1", True)]
    assert [label for label, _ in labels[4:]] == ["castle-classic-r1", "kafka-classic-r1", "castle-consumer-r1",
                                                  "kafka-consumer-r1", "castle-classic-r2", "kafka-classic-r2",
                                                  "castle-consumer-r2", "kafka-consumer-r2"]


def test_medians_leave_warm_ups_out_and_ratios_divide_by_the_other_broker() -> None:
    def result(target: str, join_all: float, warmup: bool = False) -> dict[str, object]:
        return {"target": target, "protocol": "consumer", "warmup": warmup, "join_all_s": join_all,
                "join_one_s": 1.0, "empty_s": 0.5}

    summary = summarize([result("castle", 100.0, warmup=True), result("castle", 2.0), result("castle", 4.0),
                         result("castle", 3.0), result("kafka", 6.0)])
    assert summary["castle"]["consumer"]["rounds"] == 3
    assert summary["castle"]["consumer"]["join_all_s_each"] == [2.0, 4.0, 3.0]
    assert summary["castle"]["consumer"]["join_all_s_median"] == 3.0
    assert ratios(summary, "castle", "kafka") == {"consumer": {"join_all_s": 0.5, "join_one_s": 1.0, "empty_s": 1.0}}


def test_every_member_and_the_newcomer_must_be_able_to_hold_a_partition() -> None:
    with pytest.raises(SystemExit):
        parse_args(["--members", "10", "--partitions", "10"])
    args = parse_args(["--members", "9", "--partitions", "10", "--heartbeat-interval-ms", "500"])
    assert args.protocols == ["classic", "consumer"] and args.settle_s == 1.5
