"""The broker's lifecycle under clients: a graceful restart in the middle of the data, a
restart with another worker count, and kill -9 of a worker while a producer runs."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time

import pytest

from broker.partitions.placement import owner_index
from storage.types import TopicPartition
from tests.integration.clients import (
    assert_same,
    confluent_consume,
    confluent_create_topic,
    confluent_produce,
    kafka_python_consume,
    make_records,
)
from tests.integration.conftest import round_trip, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

PARTITIONS = 4
CLEAN_SHUTDOWN = ".kafka_cleanshutdown"


def _high_watermarks(bootstrap: str, topic: str, partitions) -> dict[int, int]:
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as TP

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "castle-tests-unused"})
    try:
        return {p: consumer.get_watermark_offsets(TP(topic, p), timeout=10)[1] for p in partitions}
    finally:
        consumer.close()


@pytest.mark.parametrize("broker", [{"num.partitions": PARTITIONS}], indirect=True)
def test_graceful_restart_keeps_data_and_offsets_continue(broker):
    topic = "restart"
    first = make_records(2000, PARTITIONS, tag="first", seed=1)
    delivered = confluent_produce(broker.bootstrap, topic, first, codec="zstd")
    assert max(o for _p, o in delivered) == 2000 // PARTITIONS - 1
    old_pids = set(broker.worker_pids())

    broker.stop()  # asserts exit code 0
    assert os.path.exists(os.path.join(broker.log_dir, CLEAN_SHUTDOWN)), "no clean-shutdown marker after SIGTERM"
    broker.start()
    assert not set(broker.worker_pids()) & old_pids
    starts = [line for line in broker.stderr().splitlines() if "starting" in line and "workers on" in line]
    assert len(starts) == 2 and "clean start" in starts[-1], starts

    second = make_records(2000, PARTITIONS, tag="second", seed=2)
    delivered = confluent_produce(broker.bootstrap, topic, second, codec="gzip")
    per_partition: dict[int, list[int]] = {}
    for partition, offset in delivered:
        per_partition.setdefault(partition, []).append(offset)
    for partition, offsets in per_partition.items():
        start = 2000 // PARTITIONS
        assert offsets == list(range(start, start + len(offsets))), f"partition {partition}: offsets did not continue"

    got = kafka_python_consume(broker.bootstrap, topic, range(PARTITIONS), 4000)
    assert_same(_interleave(first, second), got)


@pytest.mark.parametrize("broker", [{"workers": 2, "num.partitions": PARTITIONS}], indirect=True)
def test_restart_with_another_worker_count(broker):
    """Ownership is (crc32(topic) + partition) % workers: with 3 workers instead of 2 the
    partitions get new owners, which open the same logs and continue them."""
    topic = "reowned"
    first = make_records(800, PARTITIONS, tag="first", seed=5)
    confluent_produce(broker.bootstrap, topic, first)
    broker.stop()
    broker.workers = 3
    broker.start()
    assert len(broker.worker_pids()) == 3
    second = make_records(800, PARTITIONS, tag="second", seed=6)
    confluent_produce(broker.bootstrap, topic, second)
    got = confluent_consume(broker.bootstrap, topic, range(PARTITIONS), 1600)
    assert_same(_interleave(first, second), got)


def _interleave(first, second):
    """Expected log contents: per partition, the first run's records then the second's."""
    return list(first) + list(second)


def _start_producing(producer, topic: str, prefix: str, partition_of, on_delivery, stop: threading.Event) -> threading.Thread:
    """Produce ``<prefix><sequence>`` values on a thread until ``stop`` is set."""

    def produce_loop() -> None:
        sequence = 0
        while not stop.is_set():
            try:
                producer.produce(topic, value=f"{prefix}{sequence:08d}".encode(), partition=partition_of(sequence),
                                 on_delivery=on_delivery)
                sequence += 1
            except BufferError:
                pass
            producer.poll(0.001 if sequence % 100 else 0.01)

    thread = threading.Thread(target=produce_loop)
    thread.start()
    return thread


@pytest.mark.parametrize("victim", ["owner", "other"])
@pytest.mark.parametrize("broker", [{"workers": 2, "num.partitions": 1}], indirect=True)
def test_kill_9_of_a_worker_loses_no_acknowledged_record(broker, victim):
    """acks=1 producer in a loop; kill -9 the partition's owner (or the other worker).
    The supervisor starts a new worker; afterwards every acknowledged record is in the
    partition at the offset it was acknowledged with."""
    from confluent_kafka import Producer

    topic = "crash"
    tp = TopicPartition(topic, 0)
    owner = owner_index(tp, broker.workers)
    target = owner if victim == "owner" else (owner + 1) % broker.workers

    acked: list[tuple[int, bytes]] = []
    failed: list[str] = []
    stop = threading.Event()
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": 1, "enable.idempotence": False,
                         "linger.ms": 2, "message.timeout.ms": 30000, "retry.backoff.ms": 50,
                         "reconnect.backoff.ms": 50, "reconnect.backoff.max.ms": 500,
                         "topic.metadata.refresh.interval.ms": 1000})

    def done(err, msg) -> None:
        if err is not None:
            failed.append(str(err))
        else:
            acked.append((msg.offset(), msg.value()))

    thread = _start_producing(producer, topic, "v", lambda sequence: 0, done, stop)
    try:
        wait_until(lambda: len(acked) >= 3000, 30, "3000 acknowledged records before the kill")
        stats = {s["worker"]: s["pid"] for s in broker.stats()}
        victim_pid = stats[target]
        assert victim_pid in broker.worker_pids()
        os.kill(victim_pid, signal.SIGKILL)
        acked_at_kill = len(acked)

        def replaced() -> bool:
            pids = broker.worker_pids()
            return len(pids) == broker.workers and victim_pid not in pids
        wait_until(replaced, 20, "the supervisor to start a new worker")
        new_pid = next(p for p in broker.worker_pids() if p not in stats.values())
        wait_until(lambda: any(s["worker"] == target and s["pid"] == new_pid for s in broker.stats()), 20,
                   "the new worker to serve")
        wait_until(lambda: len(acked) >= acked_at_kill + 3000, 40, "3000 more acknowledged records after the restart")
    finally:
        stop.set()
        thread.join(30)
        remaining = producer.flush(40)
    assert remaining == 0, f"{remaining} records still unacknowledged"
    assert "exited with signal 9" in broker.stderr()

    high_watermark = _high_watermarks(broker.bootstrap, topic, [0])[0]
    got = confluent_consume(broker.bootstrap, topic, [0], high_watermark)
    by_offset = {g.offset: g.value for g in got}
    assert sorted(by_offset) == list(range(high_watermark)), "the partition has a gap"
    missing = [(offset, value) for offset, value in acked if by_offset.get(offset) != value]
    assert not missing, f"{len(missing)} acknowledged records are not where they were acked, e.g. {missing[:5]}"
    # In acked-offset order, the values are the log's values in log order.
    ordered = sorted(acked)
    assert [v for _o, v in ordered] == [by_offset[o] for o, _v in ordered]
    assert len({o for o, _v in acked}) == len(acked), "two records acked at the same offset"

    broker.stop()  # still stops cleanly after a worker restart


@pytest.mark.parametrize("broker", [{"workers": 2, "num.partitions": 2}], indirect=True)
def test_sigterm_under_load_answers_parked_fetches_and_keeps_acked_records(broker):
    """SIGTERM while a consumer is parked in a 30 s long-poll and a producer is producing:
    the broker exits 0 promptly (parked fetches are answered, in-flight requests finish),
    and after a restart every acknowledged record is where it was acknowledged, while the
    same producer carries on."""
    from confluent_kafka import Consumer, Producer
    from confluent_kafka import TopicPartition as TP

    topic = "sigterm"
    confluent_create_topic(broker.bootstrap, "parked", 1)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "castle-tests-unused",
                         "enable.auto.commit": False, "fetch.wait.max.ms": 30_000, "fetch.min.bytes": 100_000_000,
                         "socket.timeout.ms": 60_000})
    fetches = sum(s["fetch_requests"] for s in broker.stats())
    consumer.assign([TP("parked", 0, 0)])
    acked: list[tuple[int, int, bytes]] = []
    failed: list[str] = []
    stop = threading.Event()
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": 1, "linger.ms": 2,
                         "message.timeout.ms": 60_000, "reconnect.backoff.ms": 50, "reconnect.backoff.max.ms": 500})

    def done(err, msg) -> None:
        if err is not None:
            failed.append(str(err))
        else:
            acked.append((msg.partition(), msg.offset(), msg.value()))

    thread = _start_producing(producer, topic, "s", lambda sequence: sequence % 2, done, stop)
    try:
        wait_until(lambda: len(acked) >= 2000, 30, "2000 acknowledged records before SIGTERM")
        # The consumer's fetch (min bytes 100 MB of an empty partition) now waits up to 30 s.
        wait_until(lambda: consumer.poll(0.1) is None and sum(s["fetch_requests"] for s in broker.stats()) > fetches,
                   15, "the consumer's fetch to park")
        started = time.monotonic()
        broker.stop()  # asserts exit code 0
        assert time.monotonic() - started < 15, "graceful stop waited for the parked long-poll"
        acked_at_stop = len(acked)
        broker.start()
        wait_until(lambda: len(acked) >= acked_at_stop + 2000, 40, "2000 more acknowledged records after the restart")
    finally:
        stop.set()
        thread.join(30)
        remaining = producer.flush(40)
        consumer.close()
    assert remaining == 0

    watermarks = _high_watermarks(broker.bootstrap, topic, [0, 1])
    for partition in (0, 1):
        got = confluent_consume(broker.bootstrap, topic, [partition], watermarks[partition])
        by_offset = {g.offset: g.value for g in got}
        assert sorted(by_offset) == list(range(watermarks[partition])), f"partition {partition} has a gap"
        missing = [(o, v) for p, o, v in acked if p == partition and by_offset.get(o) != v]
        assert not missing, f"partition {partition}: {len(missing)} acknowledged records lost or moved: {missing[:5]}"


@pytest.mark.parametrize("broker", [{"workers": 2, "num.partitions": 2, "worker.heartbeat.timeout.ms": 2000}],
                         indirect=True)
def test_wedged_worker_is_replaced(broker):
    """A worker whose loop stops beating (here: SIGSTOP, which SIGABRT cannot end) is
    killed and replaced by the supervisor, and the broker serves both partitions again."""
    stats = {s["worker"]: s["pid"] for s in broker.stats()}
    wedged = stats[0]
    os.kill(wedged, signal.SIGSTOP)
    try:
        wait_until(lambda: wedged not in broker.worker_pids() and len(broker.worker_pids()) == 2, 30,
                   "the supervisor to replace the wedged worker")
    finally:
        if wedged in broker.worker_pids():
            os.kill(wedged, signal.SIGCONT)
    new_pid = next(p for p in broker.worker_pids() if p not in stats.values())
    wait_until(lambda: any(s["worker"] == 0 and s["pid"] == new_pid for s in broker.stats()), 20, "the new worker")
    assert "missed its heartbeat" in broker.stderr()
    records = make_records(200, 2, tag="after-wedge")
    confluent_produce(broker.bootstrap, "wedge", records)
    assert_same(records, confluent_consume(broker.bootstrap, "wedge", range(2), len(records)))


@pytest.mark.parametrize("broker", [{"workers": 2, "num.partitions": 2, "coordinator.heartbeat.timeout.ms": 2000}],
                         indirect=True)
def test_wedged_coordinator_is_replaced(broker):
    """The coordinator process beats into its own slot of the shared heartbeat page
    (broker/process/heartbeats.py): stopped with SIGSTOP, it is killed and replaced, and the
    new one serves a group's committed offsets."""
    from confluent_kafka import Consumer, TopicPartition

    confluent_create_topic(broker.bootstrap, "wedged-coordinator", 1)
    wedged = wait_until(broker.coordinator_pid, 10, "the coordinator process")
    os.kill(wedged, signal.SIGSTOP)
    try:
        wait_until(lambda: broker.coordinator_pid() not in (None, wedged), 30,
                   "the supervisor to replace the wedged coordinator")
    finally:
        if _alive(wedged):
            os.kill(wedged, signal.SIGCONT)
    assert f"coordinator (pid {wedged}) missed its heartbeat" in broker.stderr()
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "after-wedge",
                         "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition("wedged-coordinator", 0, 7)], asynchronous=False)
        [committed] = consumer.committed([TopicPartition("wedged-coordinator", 0)], timeout=20)
        assert committed.offset == 7
    finally:
        consumer.close()


@pytest.mark.parametrize("broker", [{"workers": 2, "num.partitions": 2}], indirect=True)
def test_kill_9_of_the_supervisor(broker):
    """Workers whose supervisor died stop by themselves (no orphan keeps the port or the
    log dirs); the next start recovers and keeps every acknowledged record."""
    records = make_records(1000, 2, tag="before-supervisor-kill")
    confluent_produce(broker.bootstrap, "orphans", records, acks=1, **{"enable.idempotence": False})
    workers = broker.worker_pids()
    assert len(workers) == 2
    broker.process.kill()
    broker.process.wait(10)
    wait_until(lambda: not any(_alive(pid) for pid in workers), 15, "the orphaned workers to exit")
    broker.start()
    starts = [line for line in broker.stderr().splitlines() if "starting" in line and "workers on" in line]
    assert "recovering start" in starts[-1], starts
    more = make_records(1000, 2, tag="after-supervisor-kill", seed=9)
    confluent_produce(broker.bootstrap, "orphans", more)
    got = confluent_consume(broker.bootstrap, "orphans", range(2), 2000)
    assert_same(records + more, got)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except OSError:
        return False
    return stat[stat.rindex(b")") + 2:][:1] != b"Z"


@pytest.mark.parametrize("broker", [{"workers": 3, "num.partitions": 1}],
                         indirect=True)
def test_kill_9_of_the_owner_twice_under_idempotent_producers(broker):
    """Six idempotent producers (separate connections, so most appends are forwarded to the
    owner over the rings) while the owner is killed twice: retries of batches whose answer
    was lost are recognised after recovery (producer state rebuilt from the log), so the
    partition holds every acknowledged record exactly once and nothing else."""
    from confluent_kafka import Producer

    topic = "crash-idempotent"
    owner = owner_index(TopicPartition(topic, 0), broker.workers)
    acked: list[tuple[int, bytes]] = []
    failed: list[str] = []
    stop = threading.Event()

    def produce_loop(index: int) -> None:
        producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "enable.idempotence": True,
                             "linger.ms": 2, "message.timeout.ms": 60_000, "retry.backoff.ms": 50,
                             "reconnect.backoff.ms": 50, "reconnect.backoff.max.ms": 500})

        def done(err, msg) -> None:
            if err is not None:
                failed.append(str(err))
            else:
                acked.append((msg.offset(), msg.value()))

        sequence = 0
        while not stop.is_set():
            try:
                producer.produce(topic, value=f"{index}-{sequence}".encode(), partition=0, on_delivery=done)
                sequence += 1
            except BufferError:
                pass
            producer.poll(0.001 if sequence % 100 else 0.01)
        if producer.flush(50) != 0:
            failed.append(f"producer {index}: records left after flush")

    threads = [threading.Thread(target=produce_loop, args=(i,)) for i in range(6)]
    for thread in threads:
        thread.start()
    try:
        for kill in range(2):
            wait_until(lambda: len(acked) >= 3000 * (kill + 1), 40, "acknowledged records before the kill")
            pid = next(s["pid"] for s in broker.stats() if s["worker"] == owner)
            os.kill(pid, signal.SIGKILL)
            wait_until(lambda: pid not in broker.worker_pids() and len(broker.worker_pids()) == broker.workers, 20,
                       "the owner to be replaced")
            wait_until(lambda: any(s["worker"] == owner and s["pid"] not in (pid, 0) and s["pid"] in broker.worker_pids()
                                   for s in broker.stats()), 20, "the new owner to serve")
        wait_until(lambda: len(acked) >= 9000, 40, "acknowledged records after the kills")
    finally:
        stop.set()
        for thread in threads:
            thread.join(60)
    assert not failed, failed[:5]

    high_watermark = _high_watermarks(broker.bootstrap, topic, [0])[0]
    got = confluent_consume(broker.bootstrap, topic, [0], high_watermark)
    by_offset = {g.offset: g.value for g in got}
    assert sorted(by_offset) == list(range(high_watermark)), "the partition has a gap"
    assert high_watermark == len(acked), f"{high_watermark} records in the log, {len(acked)} acknowledged"
    # librdkafka acknowledges a batch whose answer was lost (the owner died) without an
    # offset once a later batch of the same producer succeeds: it was persisted, since
    # the broker took the later one in sequence (rd_kafka_dr_implicit_ack). Those records
    # must be in the log too, once; every record acknowledged with an offset must be there.
    with_offset = {offset: value for offset, value in acked if offset is not None}
    implicitly_acked = {value for offset, value in acked if offset is None}
    assert all(by_offset.get(offset) == value for offset, value in with_offset.items()), \
        "an acknowledged record is not at its acknowledged offset"
    assert implicitly_acked <= set(by_offset.values()), "a record acknowledged without an offset is not in the log"
    assert len(set(by_offset.values())) == high_watermark, "a record was appended twice"


def test_a_second_broker_on_the_same_port_refuses_to_start(broker, broker_factory):
    """SO_REUSEPORT would let a second broker share the port and take half the clients:
    it must refuse with a clear message instead, and the first broker keeps serving."""
    second = broker_factory(workers=1, start=False)
    second.port = broker.port
    assert run_refused(second) == 1
    assert f"cannot listen on 127.0.0.1:{broker.port}" in second.stderr()
    assert round_trip(broker.host, broker.port)


def test_a_second_broker_on_the_same_data_dir_refuses_to_start(broker, broker_factory):
    """Two brokers appending to one log dir would interleave batches: the second one (on
    its own port) stops at the lock with a message naming the holder, and the first one
    keeps serving."""
    second = broker_factory(workers=1, start=False)
    second.log_dir = broker.log_dir
    assert run_refused(second) == 1
    text = second.stderr()
    assert "cannot start" in text and broker.log_dir in text and str(broker.pid) in text, text
    assert round_trip(broker.host, broker.port)


def run_refused(broker):
    """Start a broker expected to refuse (its own stderr file); its exit code, bounded."""
    with open(broker.stderr_path, "ab") as err:
        process = subprocess.Popen(broker.command(), stdin=subprocess.DEVNULL, stdout=err, stderr=err,
                                   start_new_session=True)
    try:
        return process.wait(30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)
