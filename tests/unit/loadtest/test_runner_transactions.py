"""The load runner's transactions: the workload fields, the pairs of shipped workloads
that judge transactions against their yardsticks, what the producer and consumer
processes are configured with, a transactional producer's bookkeeping (on librdkafka's
own mock cluster), and goals judged against another workload of the same run."""

from __future__ import annotations

import glob
import json
import os
import time

import pytest
from confluent_kafka import KafkaException, Producer

from loadtest.runner.__main__ import missing_workloads
from loadtest.runner.consumer import consumer_config
from loadtest.runner.goals import MET, NO_FIGURE, NOT_MET, evaluate_goals, goal_lines, parse_goals
from loadtest.runner.producer import Counters, Transactions, producer_config
from loadtest.runner.run import consumer_cfg, producer_cfg
from loadtest.runner.workload import Workload, WorkloadError, load_workload, workload_from_dict

WORKLOAD_DIR = os.path.join(os.path.dirname(__file__), "..", "..", "..", "loadtest", "workloads")


def _shipped(name: str) -> Workload:
    return load_workload(os.path.join(WORKLOAD_DIR, f"{name}.toml"))


def _shape(w: Workload, *leave_out: str) -> dict:
    """A workload's fields but its name, description, goals and the fields named."""
    return {k: v for k, v in w.as_dict().items() if k not in {"name", "description", "goals", *leave_out}}


def test_the_transactional_produce_pair_differs_only_in_transactions():
    txn, idem = _shipped("txn-produce-100b"), _shipped("idempotent-produce-100b")
    assert txn.transactional and txn.transaction_interval_ms == 100 and txn.acks == "all"
    assert idem.idempotent and not idem.transactional
    assert _shape(txn, "transactional", "transaction_interval_ms", "idempotent") == \
        _shape(idem, "transactional", "transaction_interval_ms", "idempotent")
    assert txn.record_size == 100 and txn.rate == 0 and txn.consumers == 0  # the producer alone, flat out


def test_the_read_pair_differs_only_in_the_isolation_level():
    committed, uncommitted = _shipped("read-committed-1kb"), _shipped("read-uncommitted-1kb")
    assert (committed.isolation_level, uncommitted.isolation_level) == ("read_committed", "read_uncommitted")
    assert committed.transactional and committed.read_after_write and committed.record_size == 1024
    assert _shape(committed, "isolation_level") == _shape(uncommitted, "isolation_level")


def test_the_transaction_workloads_carry_the_issues_goals():
    txn = {(g.figure, g.ratio, g.against_workload): g for g in parse_goals(_shipped("txn-produce-100b").goals)}
    assert txn[("publish_records_per_s", False, "idempotent-produce-100b")].at_least == 0.9
    assert txn[("publish_records_per_s", True, "")].at_least == 1.5  # over Kafka's, with --compare kafka
    read = {(g.figure, g.ratio, g.against_workload): g for g in parse_goals(_shipped("read-committed-1kb").goals)}
    assert read[("consume_records_per_s", False, "read-uncommitted-1kb")].at_least == 0.9
    assert read[("consume_records_per_s", True, "")].at_least == 1.5
    # Each yardstick is a shipped workload, so the pair can run in one invocation.
    names = {load_workload(p).name for p in glob.glob(os.path.join(WORKLOAD_DIR, "*.toml"))}
    assert {"idempotent-produce-100b", "read-uncommitted-1kb"} <= names


@pytest.mark.parametrize("fields, complaint", [
    ({"transactional": True}, "acks: an idempotent or transactional producer needs acks"),
    ({"idempotent": True, "acks": "1"}, "acks: an idempotent or transactional producer needs acks"),
    ({"transactional": "yes", "acks": "all"}, "transactional: must be true or false"),
    ({"transactional": True, "acks": "all", "transaction_interval_ms": 0}, "transaction_interval_ms"),
    ({"isolation_level": "committed"}, "isolation_level: one of"),
    ({"isolation_level": "read_committed", "consumer_config": {"isolation.level": "read_uncommitted"}},
     "isolation_level: set it here or as consumer_config"),
    ({"producer_config": {"transactional.id": "mine"}}, "producer_config: transactional.id is the runner's"),
    ({"producer_config": {"enable.idempotence": True}}, "producer_config: enable.idempotence is the runner's"),
])
def test_bad_transaction_fields_name_the_field(fields, complaint):
    with pytest.raises(WorkloadError, match=complaint):
        workload_from_dict({"name": "x", **fields})


def test_the_producers_get_a_transactional_id_each_and_librdkafka_takes_their_config():
    w = workload_from_dict({"name": "t", "transactional": True, "acks": "all", "producers": 2,
                            "transaction_interval_ms": 250})
    cfgs = [producer_cfg(w, "127.0.0.1:9", ["run-1-0"], i) for i in range(2)]
    ids = [c["transactional_id"] for c in cfgs]
    assert ids == ["run-1-0-producer-0", "run-1-0-producer-1"]  # unique per run (the topic) and process
    assert all(c["transaction_interval_ms"] == 250 for c in cfgs)
    config = producer_config(cfgs[0], None)
    assert config["transactional.id"] == ids[0] and "enable.idempotence" not in config
    Producer({k: v for k, v in config.items() if k != "on_delivery"})  # a config librdkafka refuses raises
    idem = producer_config(producer_cfg(workload_from_dict({"name": "i", "idempotent": True, "acks": "all"}),
                                        "127.0.0.1:9", ["t"], 0), None)
    assert idem["enable.idempotence"] is True and "transactional.id" not in idem
    plain = producer_config(producer_cfg(workload_from_dict({"name": "p"}), "127.0.0.1:9", ["t"], 0), None)
    assert "enable.idempotence" not in plain and "transactional.id" not in plain
    # What the field guards against: librdkafka itself refuses idempotence with acks=1.
    with pytest.raises(KafkaException, match="acks"):
        Producer({"bootstrap.servers": "127.0.0.1:9", "enable.idempotence": True, "acks": "1"})


def test_the_consumers_get_the_isolation_level():
    for level in ("read_committed", "read_uncommitted"):
        w = workload_from_dict({"name": "c", "isolation_level": level})
        assert consumer_config(consumer_cfg(w, "127.0.0.1:9", ["t"], "g"))["isolation.level"] == level
    # Absent: librdkafka's own default, unchanged (read_committed; Kafka's Java client's is
    # read_uncommitted).
    assert "isolation.level" not in consumer_config(consumer_cfg(workload_from_dict({"name": "c"}), "127.0.0.1:9", ["t"], "g"))
    passed = workload_from_dict({"name": "c", "consumer_config": {"isolation.level": "read_uncommitted"}})
    assert consumer_config(consumer_cfg(passed, "127.0.0.1:9", ["t"], "g"))["isolation.level"] == "read_uncommitted"


def _mock_transactional_producer(counters: Counters) -> Producer:
    cfg = {"bootstrap": "", "acks": "all", "compression": "none", "linger_ms": 1, "batch_size": 1_000_000,
           "transactional_id": "unit-txn", "producer_config": {"test.mock.num.brokers": 1}}
    config = producer_config(cfg, counters.on_delivery)
    config.pop("bootstrap.servers")
    config.pop("stats_cb")
    config["statistics.interval.ms"] = 0
    return Producer(config)


def _delivered(producer: Producer, counters: Counters, n: int) -> None:
    deadline = time.monotonic() + 20
    while len(counters.pending) < n and time.monotonic() < deadline:
        producer.poll(0.05)
    assert len(counters.pending) == n


def test_a_transactional_producers_records_count_once_committed_and_never_when_aborted(capsys):
    """On librdkafka's mock cluster, which implements the transactional protocol: records
    delivered in a transaction wait in ``pending``; the commit (which flushes first) counts
    them with their latencies, an abort drops them; the lines say so."""
    counters = Counters(record_size=100)
    producer = _mock_transactional_producer(counters)
    txn = Transactions(producer, counters, interval_s=0.05)
    txn.start()
    assert txn.due_in() <= 0.05
    for _ in range(10):
        producer.produce("t", b"x" * 100)
    txn.end()  # flushes: every delivery is in before it returns
    assert (len(counters.pending), len(counters.latencies), counters.transactions) == (0, 10, 1)
    assert counters.commit_s > 0
    txn.begin()
    for _ in range(4):
        producer.produce("t", b"x" * 100)
    _delivered(producer, counters, 4)
    assert len(counters.latencies) == 10  # delivered, not yet committed: not counted
    producer.abort_transaction(10)
    counters.aborted(0.001)
    assert (counters.aborted_transactions, counters.aborted_records, len(counters.pending)) == (1, 4, 0)
    txn.begin()
    txn.end()  # an empty transaction commits too
    assert counters.transactions == 2
    capsys.readouterr()
    counters.emit(counters.latencies, "done")
    line = json.loads(capsys.readouterr().out)
    assert (line["acked"], line["acked_bytes"], line["transactions"]) == (10, 1000, 2)
    assert (line["aborted_transactions"], line["aborted_records"]) == (1, 4)
    assert line["commit_s"] == pytest.approx(counters.commit_s)


def test_a_producer_without_transactions_reports_no_transaction_counters(capsys):
    counters = Counters(record_size=100)
    counters.emit(counters.latencies, "interval")
    assert "transactions" not in json.loads(capsys.readouterr().out)


# Goals judged against another workload of the same run.

AGAINST = [{"figure": "publish_records_per_s", "against_workload": "base", "at_least": 0.9, "why": "cheap"},
           {"figure": "publish_p99_ms", "against_workload": "base", "at_most": 1.2}]


def _entry(name: str, goals: list[dict], castle: dict, kafka: dict | None = None) -> dict:
    medians = {"castle": castle}
    if kafka is not None:
        medians["kafka"] = kafka
    return {"workload": workload_from_dict({"name": name, "goals": goals}).as_dict(), "medians": medians}


def test_a_goal_against_another_workload_is_judged_on_the_two_medians_of_the_broker_under_test():
    workloads = {"txn": _entry("txn", AGAINST, {"publish_records_per_s": 95.0, "publish_p99_ms": 13.0},
                               kafka={"publish_records_per_s": 1.0, "publish_p99_ms": 1.0}),
                 "base": _entry("base", [], {"publish_records_per_s": 100.0, "publish_p99_ms": 10.0},
                                kafka={"publish_records_per_s": 1000.0, "publish_p99_ms": 100.0})}
    verdicts = evaluate_goals(workloads["txn"], "castle", workloads)
    assert [(v["value"], v["verdict"]) for v in verdicts] == [(0.95, MET), (1.3, NOT_MET)]
    assert verdicts[0]["goal"] == "publish_records_per_s / base's >= 0.9" and verdicts[0]["why"] == "cheap"
    assert verdicts[0]["against_workload"] == "base" and verdicts[0]["ratio"] is False
    # The compared broker's medians play no part: the same two workloads on kafka give 0.001.
    assert evaluate_goals(workloads["txn"], "kafka", workloads)[0]["value"] == 0.001
    workloads["txn"]["goals"] = verdicts
    workloads["base"]["goals"] = []
    assert goal_lines({"workloads": workloads})[0] == "goal txn: publish_records_per_s / base's >= 0.9: 0.95: met"


def test_a_goal_against_a_workload_the_run_lacks_or_could_not_measure_has_no_figure():
    txn = _entry("txn", AGAINST, {"publish_records_per_s": 95.0, "publish_p99_ms": None})
    assert [v["verdict"] for v in evaluate_goals(txn, "castle", {"txn": txn})] == [NO_FIGURE, NO_FIGURE]
    assert [v["verdict"] for v in evaluate_goals(txn, "castle")] == [NO_FIGURE, NO_FIGURE]
    zero = {"txn": txn, "base": _entry("base", [], {"publish_records_per_s": 0.0, "publish_p99_ms": 10.0})}
    assert [v["value"] for v in evaluate_goals(txn, "castle", zero)] == [None, None]  # no division by zero; no p99 of ours


def test_the_runner_says_when_a_goals_workload_is_not_in_the_run():
    txn = workload_from_dict({"name": "txn", "goals": AGAINST})
    assert missing_workloads([txn]) == [
        "workload txn: a goal is judged against workload 'base', which this run does not include"]
    assert missing_workloads([txn, workload_from_dict({"name": "base"})]) == []


@pytest.mark.parametrize("goal, complaint", [
    ({"figure": "publish_records_per_s", "against_workload": "base", "ratio": True, "at_least": 1},
     "does not go with ratio"),
    ({"figure": "publish_records_per_s", "against_workload": 3, "at_least": 1}, "against_workload must be"),
])
def test_bad_goals_against_another_workload_are_workload_errors(goal, complaint):
    with pytest.raises(WorkloadError, match=f"goals: goal 1: .*{complaint}"):
        workload_from_dict({"name": "x", "goals": [goal]})
