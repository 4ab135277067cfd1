"""The Prometheus endpoint (broker/process/metrics.py), scraped over HTTP from a real broker:
every worker's requests and bytes count, partition state and group lag are current,
counters survive a worker restart, and the endpoint's settings are honoured."""

from __future__ import annotations

import os
import signal
import socket
import time
import urllib.request
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.integration.clients import confluent_produce, make_records
from tests.integration.conftest import pid_alive, port_in_use, serve_until_exit, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(broker: Any) -> Samples:
    with urllib.request.urlopen(f"http://127.0.0.1:{broker.metrics_port}/metrics", timeout=10) as answer:
        assert answer.status == 200
        text = answer.read().decode()
    out: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def value(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, tuple(sorted(labels.items()))))


def total(samples: Samples, name: str, **labels: str) -> float:
    """The sum over every sample of ``name`` whose labels include ``labels``."""
    return sum(v for (n, have), v in samples.items() if n == name and set(labels.items()) <= set(have))


def create_topic(bootstrap: str, topic: str, partitions: int, configs: dict[str, str] | None = None) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1, config=configs or {})])[topic].result(10)


def consume_and_commit(bootstrap: str, topic: str, group: str, count: int) -> None:
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    try:
        consumer.subscribe([topic])
        seen = 0
        deadline = time.monotonic() + 30
        while seen < count and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                seen += 1
        assert seen == count
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()


APIS = ("Produce", "Fetch", "Metadata", "ApiVersions")


@pytest.mark.parametrize("broker", [{"workers": 2}], indirect=True)
def test_a_scrape_shows_requests_bytes_partitions_and_group_lag(broker: Any) -> None:
    topic, partitions = "scraped", 4
    create_topic(broker.bootstrap, topic, partitions)
    records = make_records(400, partitions, "metrics")
    confluent_produce(broker.bootstrap, topic, records)
    consume_and_commit(broker.bootstrap, topic, "lagging", len(records))
    more = make_records(40, partitions, "after-commit", seed=2)
    confluent_produce(broker.bootstrap, topic, more)
    produced = {p: sum(1 for r in records + more if r.partition == p) for p in range(partitions)}
    after_commit = {p: sum(1 for r in more if r.partition == p) for p in range(partitions)}

    def settled() -> Samples | None:
        samples = scrape(broker)
        ends = {p: value(samples, "castle_log_end_offset", topic=topic, partition=str(p)) for p in range(partitions)}
        records_in = total(samples, "castle_topic_records_in_total", topic=topic)
        lagging = value(samples, "castle_consumer_group_lag", group="lagging", topic=topic, partition="0")
        # A worker moves its counts into prometheus_client once a second, the request
        # counter and then the latency histogram: a scrape may fall between the two.
        counted_twice = all(total(samples, "castle_requests_total", api=api)
                            == total(samples, "castle_request_duration_seconds_count", api=api) for api in APIS)
        return samples if (ends == produced and records_in == len(records) + len(more) and lagging is not None
                           and counted_twice) else None

    samples = wait_until(settled, 15, "the scrape to show every record")
    for p in range(partitions):
        labels = {"topic": topic, "partition": str(p)}
        assert value(samples, "castle_log_start_offset", **labels) == 0
        assert (value(samples, "castle_log_size_bytes", **labels) or 0) > 0
        committed = value(samples, "castle_consumer_group_committed_offset", group="lagging", **labels)
        assert committed == produced[p] - after_commit[p]
        assert value(samples, "castle_consumer_group_lag", group="lagging", **labels) == after_commit[p]
    assert total(samples, "castle_topic_bytes_in_total", topic=topic) > 0
    assert total(samples, "castle_topic_bytes_out_total", topic=topic) > 0
    # Every request counted once, by API and version, and its latency histogram agrees.
    for api in APIS:
        count = total(samples, "castle_requests_total", api=api)
        assert count > 0, api
        assert total(samples, "castle_request_duration_seconds_count", api=api) == count, api
        assert total(samples, "castle_request_duration_seconds_bucket", api=api, le="+Inf") == count, api
    assert total(samples, "castle_connections_accepted_total") > 0
    assert {labels for (name, labels) in samples if name == "castle_connections"} == {
        (("worker", "0"),), (("worker", "1"),)}


@pytest.mark.parametrize("broker", [{"workers": 2}], indirect=True)
def test_counters_survive_a_worker_restart_which_is_counted(broker: Any) -> None:
    topic = "restart-metrics"
    create_topic(broker.bootstrap, topic, 2)
    confluent_produce(broker.bootstrap, topic, make_records(100, 2, "before"))
    before = wait_until(lambda: (lambda s: s if total(s, "castle_topic_records_in_total", topic=topic) == 100 else None)(
        scrape(broker)), 15, "records counted")
    produce_before = total(before, "castle_requests_total", api="Produce")
    victim = next(pid for pid in broker.worker_pids() if "worker 1" in open(f"/proc/{pid}/cmdline").read())
    os.kill(victim, signal.SIGKILL)
    wait_until(lambda: not pid_alive(victim), 10, "worker 1 gone")
    after = wait_until(lambda: (lambda s: s if value(s, "castle_process_restarts_total", process="worker 1") == 1
                                else None)(scrape(broker)), 30, "the restart counted")
    assert total(after, "castle_topic_records_in_total", topic=topic) == 100  # the dead worker's counts stay
    assert total(after, "castle_requests_total", api="Produce") >= produce_before
    assert {labels for (name, labels) in after if name == "castle_connections"} == {(("worker", "0"),), (("worker", "1"),)}


@pytest.mark.parametrize("broker", [{"workers": 1, "log.flush.interval.messages": 1}], indirect=True)
def test_flushes_are_timed_and_a_deleted_topic_leaves_the_scrape(broker: Any) -> None:
    from confluent_kafka.admin import AdminClient

    topic = "flushed"
    create_topic(broker.bootstrap, topic, 1)
    confluent_produce(broker.bootstrap, topic, make_records(20, 1, "flush"))
    # The flush timings and the partitions' offsets reach the scrape in separate snapshots
    # of the worker: wait for both.
    samples = wait_until(lambda: (lambda s: s if total(s, "castle_log_flush_duration_seconds_count") > 0
                                  and value(s, "castle_log_end_offset", topic=topic, partition="0") == 20 else None)(
        scrape(broker)), 15, "flushes counted and the log end offset published")
    assert total(samples, "castle_log_flush_duration_seconds_count") > 0
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.delete_topics([topic])[topic].result(10)
    wait_until(lambda: value(scrape(broker), "castle_log_end_offset", topic=topic, partition="0") is None, 15,
               "the deleted partition gone from the scrape")


def _loop_lag(samples: Samples, worker: str) -> tuple[float, float]:
    """(samples, samples later than 500 ms) of a worker's loop-lag histogram."""
    count = value(samples, "castle_worker_loop_lag_seconds_count", worker=worker) or 0.0
    on_time = value(samples, "castle_worker_loop_lag_seconds_bucket", worker=worker, le="0.5") or 0.0
    return count, count - on_time


@pytest.mark.parametrize("broker", [{"workers": 2}], indirect=True)
def test_a_worker_held_off_the_cpu_shows_in_its_loop_lag(broker: Any) -> None:
    """The probe samples each worker's loop ten times a second; a worker stopped for a
    second (as if its vCPU were taken away) shows one sample that late, the other none."""
    first = wait_until(lambda: (lambda s: s if min(_loop_lag(s, w)[0] for w in ("0", "1")) >= 5 else None)(
        scrape(broker)), 15, "both workers' loops sampled")
    assert _loop_lag(first, "1")[1] == 0  # an idle broker's loop is on time
    victim = next(pid for pid in broker.worker_pids() if "worker 0" in open(f"/proc/{pid}/cmdline").read())
    os.kill(victim, signal.SIGSTOP)
    try:
        time.sleep(1.0)
    finally:
        os.kill(victim, signal.SIGCONT)
    late = wait_until(lambda: (lambda s: s if _loop_lag(s, "0")[1] >= 1 else None)(scrape(broker)), 15,
                      "worker 0's late sample counted")
    count, over = _loop_lag(late, "0")
    assert over == 1 and count > _loop_lag(first, "0")[0]  # one late sample; the probe went on after it
    assert _loop_lag(late, "1")[1] == 0
    # The timer fell due within the stop's first 100 ms, so it ran at least 0.9 s late.
    assert value(late, "castle_worker_loop_lag_seconds_sum", worker="0") >= 0.85


def test_a_metrics_port_in_use_stops_the_start(tmp_path: Any) -> None:
    with port_in_use() as port:
        done = serve_until_exit(tmp_path, f"metrics.listener=127.0.0.1:{port}")
    assert done.returncode == 1
    assert f"cannot listen on 127.0.0.1:{port} for metrics" in done.stderr


def test_a_bad_metrics_listener_is_refused(tmp_path: Any) -> None:
    done = serve_until_exit(tmp_path, "metrics.listener=localhost")
    assert done.returncode == 2
    assert "bad value for metrics.listener" in done.stderr


def test_metrics_off_when_the_listener_is_empty(broker_factory: Any) -> None:
    broker = broker_factory(workers=1, overrides={"metrics.listener": ""})
    confluent_produce(broker.bootstrap, "quiet", make_records(5, 1, "quiet"))
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", broker.metrics_port), timeout=2).close()
    assert not os.path.exists(os.path.join(broker.run_dir, "metrics"))


@pytest.mark.parametrize("broker", [{"workers": 1}], indirect=True)
def test_a_metric_file_still_being_created_does_not_fail_the_scrape(broker: Any) -> None:
    """prometheus_client creates a process's file empty and sizes it after: a scrape in
    between used to answer HTTP 500 (struct.error reading the empty file)."""
    create_topic(broker.bootstrap, "scrape-race", 1)
    confluent_produce(broker.bootstrap, "scrape-race", make_records(10, 1, "race"))
    with open(os.path.join(broker.run_dir, "metrics", "counter_999999.db"), "wb"):
        pass  # what a starting process's file looks like before prometheus_client sizes it
    samples = wait_until(lambda: (lambda s: s if total(s, "castle_topic_records_in_total", topic="scrape-race") == 10
                                  else None)(scrape(broker)), 15, "records counted")
    assert total(samples, "castle_requests_total", api="Produce") >= 1
