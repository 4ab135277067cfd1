"""Kafka Streams 4.x, processing.guarantee=exactly_once_v2, against Castle: a word count
(tests/java/castle/WordCount.java: lines -> words -> a repartition topic -> a count in a state
store with its changelog topic -> an output topic of counts) killed with SIGKILL in the middle of
its input and restarted, judged by reading its output read_committed.

Streams creates its internal topics itself (CreateTopics with configs), writes each task's output,
changelog and repartition records and its input offsets in one transaction, reads its input and
restores its store read_committed. The store's cache is off, so every word read emits its new
count: what a read_committed reader sees of a word must be exactly 1, 2, ..., its number of
occurrences: a count done twice (an aborted transaction's work that stayed visible, or input
offsets that moved without their output) repeats or skips a number.
"""

from __future__ import annotations

import contextlib
import os
import signal
import struct
import threading
import time
import uuid
from collections import Counter, defaultdict
from pathlib import Path
from typing import Callable

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from tests.integration.conftest import Broker, start_cluster_broker
from tests.java_clients import JavaProcess, java_present, start_java

pytestmark = [pytest.mark.integration, pytest.mark.transactions, pytest.mark.java_clients, pytest.mark.timeout(300)]

__all__ = ["java_present"]  # the autouse fixture: Java must be on PATH

TIMEOUT = 30.0
WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliett", "kilo",
         "lima", "mike", "november", "oscar", "papa"]
LINES = 1200
WORDS_PER_LINE = 5


def line(i: int) -> str:
    return " ".join(WORDS[(i * 7 + j * 3 + i // 16) % len(WORDS)] for j in range(WORDS_PER_LINE))


def _produce_lines(bootstrap: str, topic: str, first: int, last: int, pause_every: int, pause: float) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    for i in range(first, last):
        producer.produce(topic, line(i).encode(), key=str(i).encode())
        if pause_every and (i + 1) % pause_every == 0:
            producer.flush(TIMEOUT)
            time.sleep(pause)
    assert producer.flush(TIMEOUT) == 0


def _read_counts(bootstrap: str, topic: str, partitions: int, isolation: str, expected: Counter[str],
                 timeout: float) -> dict[str, list[int]]:
    """Every count of every word in ``topic``, in offset order per partition, read from the start
    until each word's last count is its ``expected`` one (then one more second, to show nothing
    follows) or ``timeout`` s passed."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{uuid.uuid4()}",
                         "isolation.level": isolation, "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    counts: dict[str, list[int]] = defaultdict(list)
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        deadline = time.monotonic() + timeout
        settle_until: float | None = None
        while time.monotonic() < (settle_until or deadline):
            message = consumer.poll(0.2)
            if message is not None:
                assert message.error() is None, message.error()
                key, value = message.key(), message.value()
                assert key is not None and value is not None, message
                (count,) = struct.unpack(">q", value)
                counts[key.decode()].append(count)
            if settle_until is None and all(counts.get(w, [0])[-1] == n for w, n in expected.items()):
                settle_until = time.monotonic() + 1.0
    finally:
        consumer.close()
    return dict(counts)


def _topic_config(admin: AdminClient, topic: str) -> dict[str, str]:
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    entries = admin.describe_configs([resource])[resource].result(timeout=TIMEOUT)
    return {name: entry.value for name, entry in entries.items()}


def _committed(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        found = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=TIMEOUT)
        return {tp.partition: tp.offset for tp in found}
    finally:
        consumer.close()


def _ends(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"ends-{uuid.uuid4()}"})
    try:
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=TIMEOUT)[1]
                for p in range(partitions)}
    finally:
        consumer.close()


def _starts(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"starts-{uuid.uuid4()}"})
    try:
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=TIMEOUT)[0]
                for p in range(partitions)}
    finally:
        consumer.close()


STREAM_THREAD_LOGGER = "org.apache.kafka.streams.processor.internals.StreamThread"


def _word_count(bootstrap: str, app_id: str, state_dir: Path, log_dir: Path, name: str,
                replicas: int = 1) -> JavaProcess:
    # The stream thread's INFO lines tell how it lost its tasks; CASTLE_JAVA_INFO (comma-separated logger
    # names) adds others when a run needs looking into.
    loggers = [STREAM_THREAD_LOGGER, *filter(None, os.environ.get("CASTLE_JAVA_INFO", "").split(","))]
    flags = [f"-Dorg.slf4j.simpleLogger.log.{logger}=info" for logger in loggers]
    return start_java("castle.WordCount", [
        f"bootstrap={bootstrap}", f"app-id={app_id}", "input=wc-lines", "output=wc-counts",
        f"state-dir={state_dir}", f"replication.factor={replicas}",
        "statestore.cache.max.bytes=0",  # every count reaches the output: the sequence 1..n is checked
        "commit.interval.ms=200",
        "repartition.purge.interval.ms=1000",  # DeleteRecords on the repartition topic up to what is committed
        # the killed member leaves the group when its session ends: keep that short
        "session.timeout.ms=6000", "heartbeat.interval.ms=1000",
    ], log_dir, name, flags)


def _open_transaction_in(bootstrap: str, topic: str, partitions: int) -> bool:
    """Whether a partition of ``topic`` holds records of a transaction not yet ended: its last
    stable offset (the end a read_committed consumer is told) is below its high watermark."""
    ends = {}
    for isolation in ("read_committed", "read_uncommitted"):
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"ends-{uuid.uuid4()}",
                             "isolation.level": isolation})
        try:
            ends[isolation] = [consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=TIMEOUT)[1]
                               for p in range(partitions)]
        finally:
            consumer.close()
    return any(stable < high for stable, high in zip(ends["read_committed"], ends["read_uncommitted"]))


def _kill_inside_a_transaction(bootstrap: str, streams: JavaProcess, timeout: float) -> None:
    """SIGKILL ``streams`` while its output holds an open transaction. It is frozen (SIGSTOP) when one
    is seen, and looked at again once a request it had in flight had time to land: a commit may have
    raced the freeze; then it is let go (SIGCONT) and watched again."""
    deadline = time.monotonic() + timeout
    try:
        while True:
            assert time.monotonic() < deadline, f"no open transaction seen in {timeout} s:\n{streams.report()}"
            assert streams.process.poll() is None, f"Streams exited:\n{streams.report()}"
            if not _open_transaction_in(bootstrap, "wc-counts", 2):
                continue
            os.kill(streams.pid, signal.SIGSTOP)
            time.sleep(0.5)
            if _open_transaction_in(bootstrap, "wc-counts", 2):
                return
            os.kill(streams.pid, signal.SIGCONT)
    finally:
        streams.kill()


def test_streams_word_count_exactly_once_across_a_kill(broker: Broker, tmp_path: Path) -> None:
    _kill_and_restart(broker.bootstrap, tmp_path, replicas=1)


@pytest.mark.zookeeper
def test_streams_word_count_exactly_once_across_a_kill_on_two_brokers(
        broker_factory: Callable[..., Broker], zk_connect: str, tmp_path: Path) -> None:
    """The same on a ZooKeeper cluster of two brokers, every topic on both: each transaction's
    partitions are led by both brokers (markers by WriteTxnMarkers to the one not running the
    coordinator), replicated to followers, and read_committed on either."""
    brokers = [_cluster_broker(broker_factory, zk_connect, node_id) for node_id in (1, 2)]
    _kill_and_restart(",".join(b.bootstrap for b in brokers), tmp_path, replicas=2)


def _cluster_broker(broker_factory: Callable[..., Broker], zk_connect: str, node_id: int) -> Broker:
    return start_cluster_broker(broker_factory, zk_connect, node_id, settings={
        "offsets.topic.num.partitions": 4, "transaction.state.log.num.partitions": 4})


def _kill_and_restart(bootstrap: str, tmp_path: Path, replicas: int) -> None:
    """Word count over ``replicas`` replicas of every topic (Streams' internal ones too), killed inside
    a transaction while its input arrives, restarted on the same state directory."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic("wc-lines", 2, replicas), NewTopic("wc-counts", 2, replicas)],
                                      operation_timeout=10).values():
        future.result(timeout=TIMEOUT)
    expected = Counter(word for i in range(LINES) for word in line(i).split())
    app_id = f"wc-{uuid.uuid4().hex[:6]}"
    state_dir = tmp_path / "state"
    started = time.monotonic()

    _produce_lines(bootstrap, "wc-lines", 0, LINES // 3, 0, 0)
    streams = _word_count(bootstrap, app_id, state_dir, tmp_path, "streams-1", replicas)
    # More input arrives while it runs; it is killed in the middle of that, inside a transaction.
    feeder = threading.Thread(target=_produce_lines, args=(bootstrap, "wc-lines", LINES // 3, LINES, 25, 0.35),
                              daemon=True)
    try:
        streams.wait_for_line(r"^STATE RUNNING$", timeout=90)
        feeder.start()
        _kill_inside_a_transaction(bootstrap, streams, timeout=30)
        killed_at = time.monotonic() - started
        streams = _word_count(bootstrap, app_id, state_dir, tmp_path, "streams-restarted", replicas)
        feeder.join(TIMEOUT)
        assert not feeder.is_alive()
        committed = _read_counts(bootstrap, "wc-counts", 2, "read_committed", expected, timeout=120)
        finished_at = time.monotonic() - started
        assert streams.process.poll() is None, f"Streams exited:\n{streams.report()}"
    finally:
        streams.stop()
        if feeder.ident is not None:
            feeder.join(TIMEOUT)

    for word, n in sorted(expected.items()):
        assert committed.get(word) == list(range(1, n + 1)), (
            f"{word}: expected counts 1..{n}, read_committed saw {committed.get(word)}\n{streams.report()}")
    # The killed transaction's records are in the log, aborted.
    uncommitted = _read_counts(bootstrap, "wc-counts", 2, "read_uncommitted", expected, timeout=30)
    assert sum(map(len, uncommitted.values())) > sum(map(len, committed.values())), "no transaction was aborted"

    # Streams made its internal topics with the configs it asked for; its input offsets are all committed.
    changelog, repartition = f"{app_id}-counts-changelog", f"{app_id}-words-repartition"
    assert _topic_config(admin, changelog)["cleanup.policy"] == "compact"
    assert _topic_config(admin, repartition)["cleanup.policy"] == "delete"
    assert _topic_config(admin, repartition)["retention.ms"] == "-1"
    for internal in (changelog, repartition):
        described = admin.list_topics(internal, timeout=TIMEOUT).topics[internal].partitions
        assert [len(partition.replicas) for partition in described.values()] == [replicas] * 2
    assert _committed(bootstrap, app_id, "wc-lines", 2) == _ends(bootstrap, "wc-lines", 2)
    assert all(start > 0 for start in _starts(bootstrap, repartition, 2).values()), "the repartition topic was purged"
    print(f"killed at {killed_at:.1f} s, exact counts at {finished_at:.1f} s, "
          f"{sum(map(len, uncommitted.values())) - sum(map(len, committed.values()))} aborted results")


@pytest.mark.parametrize("broker", [{"transaction.abort.timed.out.transaction.cleanup.interval.ms": 1000}],
                         indirect=True)
def test_streams_paused_instance_is_fenced_as_a_zombie(broker: Broker, tmp_path: Path) -> None:
    """Two instances share the tasks; one is paused (SIGSTOP) past its session and its transaction
    timeout: the coordinator aborts its open transaction (bumping its epoch), the other instance
    takes its tasks over (restoring their stores from the changelog). Resumed (SIGCONT), the paused
    one is a zombie: whatever it had in flight must not commit. The counts stay exact."""
    bootstrap = broker.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic("wc-lines", 4, 1), NewTopic("wc-counts", 2, 1)],
                                      operation_timeout=10).values():
        future.result(timeout=TIMEOUT)
    expected = Counter(word for i in range(LINES) for word in line(i).split())
    app_id = f"wc-{uuid.uuid4().hex[:6]}"
    started = time.monotonic()
    _produce_lines(bootstrap, "wc-lines", 0, LINES // 4, 0, 0)
    survivor = _word_count(bootstrap, app_id, tmp_path / "state-a", tmp_path, "streams-a")
    zombie = _word_count(bootstrap, app_id, tmp_path / "state-b", tmp_path, "streams-b")
    # Input arrives while both run (the zombie is paused inside a transaction) and after it resumes.
    before = threading.Thread(target=_produce_lines, args=(bootstrap, "wc-lines", LINES // 4, LINES // 2, 25, 0.4),
                              daemon=True)
    after = threading.Thread(target=_produce_lines, args=(bootstrap, "wc-lines", LINES // 2, LINES, 25, 0.25),
                             daemon=True)
    try:
        for streams in (survivor, zombie):
            streams.wait_for_line(r"^STATE RUNNING$", timeout=90)
        before.start()
        # Paused inside a transaction when one is seen before this input ends (as a rule it is).
        while before.is_alive() and not _open_transaction_in(bootstrap, "wc-counts", 2):
            pass
        os.kill(zombie.pid, signal.SIGSTOP)
        paused_at = time.monotonic() - started
        # Past the session (6 s) and the transaction timeout (Streams' 10 s) and the abort tick (1 s).
        time.sleep(16)
        os.kill(zombie.pid, signal.SIGCONT)
        after.start()
        for feeder in (before, after):
            feeder.join(TIMEOUT)
            assert not feeder.is_alive()
        committed = _read_counts(bootstrap, "wc-counts", 2, "read_committed", expected, timeout=120)
        finished_at = time.monotonic() - started
        for streams in (survivor, zombie):
            assert streams.process.poll() is None, f"{streams.name} exited:\n{streams.report()}"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(zombie.pid, signal.SIGCONT)
        zombie.stop()
        survivor.stop()
        for feeder in (before, after):
            if feeder.ident is not None:
                feeder.join(TIMEOUT)

    for word, n in sorted(expected.items()):
        assert committed.get(word) == list(range(1, n + 1)), (
            f"{word}: expected counts 1..{n}, read_committed saw {committed.get(word)}\n"
            f"{zombie.report()}\n{survivor.report()}")
    assert _committed(bootstrap, app_id, "wc-lines", 4) == _ends(bootstrap, "wc-lines", 4)
    # The zombie learnt it had been put out of the group and gave its tasks up; the other one never did.
    assert "thread is being fenced" in zombie.stderr() or "lost due to missed rebalance" in zombie.stderr(), \
        zombie.report()
    assert "lost due to missed rebalance" not in survivor.stderr(), survivor.report()
    print(f"paused at {paused_at:.1f} s, exact counts at {finished_at:.1f} s")
