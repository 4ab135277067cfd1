"""Replication across three real brokers sharing a real ZooKeeper, with unmodified clients.

Each partition has replicas on several brokers; the leader's high watermark is the
smallest log end in the ISR; acks=all answers once the ISR has the batch; the controller
(the elected coordinator process) elects a new leader from the ISR when a broker dies.
The faults are real: kill -9 of every process of a broker, SIGSTOP of a whole broker.
"""

from __future__ import annotations

import concurrent.futures
import functools
import json
import os
import random
import shutil
import signal
import subprocess
import threading
import time
import uuid
from contextlib import contextmanager
from typing import Any, Callable, Iterator

import pytest
from confluent_kafka import Consumer, ElectionType, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

from broker.partitions.replica_fetcher import fetcher_id
from storage.batch import HEADER_SIZE, BatchHeader, parse_header
from storage.records import decode_batch
from storage.types import TopicPartition as StorageTopicPartition
from tests.integration.broker.test_admin_cli import as_json, ok
from tests.integration.conftest import Broker, wait_until
from tests.integration.coordination.test_cluster import cluster_settings, zk
from tests.integration.replication_history import History
from tests.kafka_cli import LEADER_ELECTION_COMMAND, REASSIGN_COMMAND, missing_tools, run_tool

pytestmark = [pytest.mark.integration, pytest.mark.zookeeper, pytest.mark.replication]

LAG_MS = 3000  # replica.lag.time.max.ms: a stopped follower leaves the ISR after this


@pytest.fixture
def three(broker_factory: Callable[..., Broker], zk_connect: str) -> list[Broker]:
    return start_three(broker_factory, zk_connect)


def start_three(broker_factory: Callable[..., Broker], zk_connect: str, **extra: Any) -> list[Broker]:
    """Brokers 1, 2, 3 (2, 1 and 1 workers), each registered before the test goes on."""
    brokers = [broker_factory(workers=workers, start=False, overrides={
        **cluster_settings(zk_connect, node_id), "replica.lag.time.max.ms": LAG_MS,
        "offsets.topic.replication.factor": 3, **extra}) for node_id, workers in ((1, 2), (2, 1), (3, 1))]
    with concurrent.futures.ThreadPoolExecutor(3) as pool:  # side by side: each start waits for its broker
        for started in [pool.submit(b.start) for b in brokers]:
            started.result()
    client = zk(zk_connect)
    try:
        wait_until(lambda: len(client.get_children("/brokers/ids")) == 3, 30, "three brokers registered")
    finally:
        client.stop()
        client.close()
    return brokers


def bootstrap(brokers: list[Broker]) -> str:
    return ",".join(b.bootstrap for b in brokers if b.process is not None and b.process.poll() is None)


def create(brokers: list[Broker], topic: str, partitions: int, factor: int, configs: dict[str, str]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap(brokers)})
    futures = admin.create_topics([NewTopic(topic, partitions, factor, config=configs)], operation_timeout=30)
    futures[topic].result(30)


def describe(brokers: list[Broker], topic: str) -> dict[int, tuple[int, list[int], list[int]]]:
    """partition -> (leader, replicas, isr) as Metadata from the live brokers says."""
    admin = AdminClient({"bootstrap.servers": bootstrap(brokers)})
    meta = admin.list_topics(topic, timeout=10)
    return {p.id: (p.leader, list(p.replicas), list(p.isrs)) for p in meta.topics[topic].partitions.values()}


def broker_with_id(brokers: list[Broker], node_id: int) -> Broker:
    return brokers[node_id - 1]


def produce_acked(brokers: list[Broker], topic: str, values: list[str], history: History, acks: str = "all",
                  extra: dict[str, Any] | None = None, partitions: int = 3) -> None:
    producer = Producer({"bootstrap.servers": bootstrap(brokers), "enable.idempotence": acks == "all", "acks": acks,
                         "linger.ms": 5, "message.timeout.ms": 60000, **(extra or {})})

    def report(err: Any, msg: Any) -> None:
        key = (msg.topic(), msg.partition())
        value = msg.value().decode()
        if err is None:
            history.ack(key, value, msg.offset())
        elif err.code() == KafkaError._MSG_TIMED_OUT:
            history.info(key, value)
        else:
            history.fail(key, value)

    for value in values:
        while True:
            try:
                producer.produce(topic, value=value.encode(), partition=sum(map(ord, value)) % partitions,
                                 on_delivery=report)
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    assert producer.flush(90) == 0, "messages still in flight after 90 s"


def read_all(brokers: list[Broker], topic: str, partitions: int, history: History | None = None,
             timeout: float = 60) -> dict[int, list[tuple[int, str]]]:
    """Every record of every partition, from offset 0 to the high watermark."""
    consumer = Consumer({"bootstrap.servers": bootstrap(brokers), "group.id": f"check-{uuid.uuid4().hex}",
                         "enable.auto.commit": False, "enable.partition.eof": True})
    try:
        ends = {}
        for p in range(partitions):
            _low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            ends[p] = high
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        out: dict[int, list[tuple[int, str]]] = {p: [] for p in range(partitions)}
        deadline = time.monotonic() + timeout
        while any((out[p][-1][0] + 1 if out[p] else 0) < ends[p] for p in out):
            assert time.monotonic() < deadline, f"read {[len(v) for v in out.values()]} of {ends}"
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            out[msg.partition()].append((msg.offset(), msg.value().decode()))
        for p, records in out.items():
            if history is not None:
                history.final((topic, p), records)
        return out
    finally:
        consumer.close()


def log_records(broker: Broker, topic: str, partitions: int) -> dict[int, list[tuple[int, str]]]:
    """(offset, value) of every record in a broker's own partition logs, read from its files
    batch by batch (a segment file is preallocated: its tail is zeros)."""
    out: dict[int, list[tuple[int, str]]] = {}
    for p in range(partitions):
        records: list[tuple[int, str]] = []
        directory = os.path.join(broker.log_dir, f"{topic}-{p}")
        for name in sorted(n for n in os.listdir(directory) if n.endswith(".log")):
            for _header, read in segment_batches(os.path.join(directory, name)):
                _h, decoded = decode_batch(read())
                records.extend((r.offset, (r.value or b"").decode()) for r in decoded)
        out[p] = records
    return out


def segment_batches(path: str) -> Iterator[tuple[BatchHeader, Callable[[], bytes]]]:
    """Each whole batch of a segment file: its header, and how to read its bytes (while the
    iteration lasts). A segment file is preallocated: the batches end at its zeros."""
    with open(path, "rb") as handle:
        position = 0
        while True:
            head = os.pread(handle.fileno(), HEADER_SIZE, position)
            if len(head) < HEADER_SIZE or parse_header(head).batch_length == 0:
                return
            header = parse_header(head)
            yield header, functools.partial(os.pread, handle.fileno(), header.size, position)
            position += header.size


class Load:
    """Idempotent acks=all producers and an assigned consumer running in threads, every
    outcome recorded in ``history`` (Jepsen's Kafka checker then judges the whole run)."""

    def __init__(self, brokers: list[Broker], topic: str, partitions: int, history: History) -> None:
        self.brokers, self.topic, self.partitions, self.history = brokers, topic, partitions, history
        self.stop = threading.Event()
        self.sent = 0
        self.errors: list[BaseException] = []
        self.threads = [threading.Thread(target=self._guard, args=(self._produce,), daemon=True),
                        threading.Thread(target=self._guard, args=(self._consume,), daemon=True)]

    def __enter__(self) -> "Load":
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(120)
        assert not any(t.is_alive() for t in self.threads), "a load thread did not stop"

    def _guard(self, work: Callable[[], None]) -> None:
        try:
            work()
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.errors.append(exc)

    def _produce(self) -> None:
        history, topic = self.history, self.topic
        producer = Producer({"bootstrap.servers": ",".join(b.bootstrap for b in self.brokers),
                             "enable.idempotence": True, "acks": "all", "linger.ms": 2, "message.timeout.ms": 90000,
                             "retry.backoff.ms": 100, "reconnect.backoff.max.ms": 500})

        def report(err: Any, msg: Any) -> None:
            key, value = (msg.topic(), msg.partition()), msg.value().decode()
            if err is None:
                history.ack(key, value, msg.offset())
            elif err.code() == KafkaError._MSG_TIMED_OUT or err.retriable():
                history.info(key, value)
            else:
                history.fail(key, value)

        while not self.stop.is_set():
            value = f"w{self.sent}"
            try:
                producer.produce(topic, value=value.encode(), partition=self.sent % self.partitions, on_delivery=report)
                self.sent += 1
            except BufferError:
                pass
            producer.poll(0.004)
        assert producer.flush(120) == 0, "records still in flight 120 s after the load stopped"

    def _consume(self) -> None:
        consumer = Consumer({"bootstrap.servers": ",".join(b.bootstrap for b in self.brokers),
                             "group.id": f"reader-{uuid.uuid4().hex}", "enable.auto.commit": False,
                             "auto.offset.reset": "earliest", "topic.metadata.refresh.interval.ms": 1000})
        consumer.assign([TopicPartition(self.topic, p, 0) for p in range(self.partitions)])
        try:
            while not self.stop.is_set():
                msg = consumer.poll(0.2)
                if msg is None or msg.error():
                    continue
                self.history.read("reader", (msg.topic(), msg.partition()), msg.offset(), msg.value().decode())
        finally:
            consumer.close()


def pause(broker: Broker) -> None:
    """SIGSTOP every process of a broker (its process group: the test started it in a new session)."""
    os.killpg(broker.pid, signal.SIGSTOP)


def resume(broker: Broker) -> None:
    os.killpg(broker.pid, signal.SIGCONT)


def leader_of(brokers: list[Broker], topic: str, partition: int) -> int:
    return describe(brokers, topic)[partition][0]


def test_kill_9_of_each_partition_leader_loses_no_acknowledged_record(three: list[Broker]) -> None:
    """min.insync.replicas=2, idempotent producers with acks=all: the leader of each
    partition in turn dies by kill -9 (every process of its broker) while they write; a
    new leader is elected from the ISR, the dead broker comes back, truncates what the
    others never had and catches up. Every acknowledged record is read back exactly once,
    at its offset, and no consumer ever read a record that later disappeared."""
    topic = "jepsen"
    create(three, topic, 3, 3, {"min.insync.replicas": "2"})
    layout = wait_until(lambda: (d := describe(three, topic)) and all(len(isr) == 3 for _l, _r, isr in d.values()) and d,
                        30, "every partition with three in-sync replicas")
    assert {tuple(sorted(r)) for _l, r, _i in layout.values()} == {(1, 2, 3)}
    assert sorted(leader for leader, _r, _i in layout.values()) == [1, 2, 3]  # leaders spread
    history = History()
    with Load(three, topic, 3, history) as load:
        for partition in range(3):
            time.sleep(1)
            victim_id = leader_of(three, topic, partition)
            victim = broker_with_id(three, victim_id)
            victim.kill()
            others = [b for b in three if b is not victim]
            wait_until(lambda: leader_of(others, topic, partition) not in (victim_id, -1), 30,
                       f"a new leader of {topic}-{partition}")
            time.sleep(1)
            victim.start()
            wait_until(lambda: all(len(isr) == 3 for _l, _r, isr in describe(three, topic).values()), 60,
                       f"broker {victim_id} back in every ISR")
        time.sleep(2)
    assert not load.errors, load.errors
    read_all(three, topic, 3, history)
    report = history.check()
    assert report.ok, report.summary()
    assert report.acked > 300, report.summary()
    # The three copies agree, record for record and offset for offset.
    final = {p: records for p, records in read_all(three, topic, 3).items()}
    for broker in three:
        wait_until(lambda: log_records(broker, topic, 3) == final, 30, f"broker {broker.bootstrap}'s copy")


def test_a_stopped_follower_leaves_the_isr_and_rejoins_and_two_stopped_refuse_acks_all(three: list[Broker]) -> None:
    topic = "stopped"
    create(three, topic, 1, 3, {"min.insync.replicas": "2"})
    wait_until(lambda: len(describe(three, topic)[0][2]) == 3, 30, "a full ISR")
    leader_id = leader_of(three, topic, 0)
    followers = [b for i, b in enumerate(three, start=1) if i != leader_id]
    history = History()
    pause(followers[0])
    try:
        # The ISR shrinks after replica.lag.time.max.ms; acks=all goes on with two replicas.
        wait_until(lambda: len(describe([broker_with_id(three, leader_id)], topic)[0][2]) == 2, LAG_MS / 1000 + 15,
                   "the stopped follower out of the ISR")
        produce_acked([broker_with_id(three, leader_id)], topic, [f"a{i}" for i in range(50)], history, partitions=1)
        assert history.check().acked == 50
        pause(followers[1])
        try:
            wait_until(lambda: len(describe([broker_with_id(three, leader_id)], topic)[0][2]) == 1, LAG_MS / 1000 + 15,
                       "the second stopped follower out of the ISR")
            refused = History()
            produce_acked([broker_with_id(three, leader_id)], topic, ["refused"], refused, partitions=1,
                          extra={"message.timeout.ms": 3000, "enable.idempotence": False, "retries": 0})
            assert refused.check().acked == 0
            assert error_of_acks_all(broker_with_id(three, leader_id), topic) == "NOT_ENOUGH_REPLICAS"
            before = high_watermark(broker_with_id(three, leader_id), topic)
            produce_acked([broker_with_id(three, leader_id)], topic, ["one"], history, acks="1", partitions=1)
            time.sleep(1)
            # Appended, acknowledged (acks=1), but not committed below min.insync.replicas (KIP-966).
            assert high_watermark(broker_with_id(three, leader_id), topic) == before
        finally:
            resume(followers[1])
    finally:
        resume(followers[0])
    wait_until(lambda: len(describe(three, topic)[0][2]) == 3, 60, "both followers back in the ISR")
    # Back above min.insync.replicas, the acks=1 record is committed once the followers have it.
    wait_until(lambda: high_watermark(broker_with_id(three, leader_id), topic) == 51, 30, "the high watermark at 51")
    read_all(three, topic, 1, history)
    assert history.check().ok, history.check().summary()
    final = read_all(three, topic, 1)
    for broker in three:
        wait_until(lambda: log_records(broker, topic, 1) == final, 30, f"broker {broker.bootstrap}'s copy")


def test_two_fetch_loops_per_leader_each_on_its_own_connection_copy_every_partition(
        broker_factory: Callable[..., Broker], zk_connect: str) -> None:
    """num.replica.fetchers=2: a follower fetches a leader's partitions over as many
    connections as Kafka's getFetcherId gives them loops; a follower stopped past
    replica.lag.time.max.ms catches up through all of them, and every replica ends
    byte for byte the leader's, with no acknowledged record lost."""
    brokers = start_three(broker_factory, zk_connect, **{"num.replica.fetchers": 2})
    topic = "fetchers"
    create(brokers, topic, 6, 3, {"min.insync.replicas": "2"})
    wait_until(lambda: all(len(isr) == 3 for _l, _r, isr in describe(brokers, topic).values()), 30, "full ISRs")
    history = History()
    produce_acked(brokers, topic, [f"a{i}" for i in range(300)], history, partitions=6)

    # Brokers 2 and 3 run one worker, which follows every partition it does not lead: one
    # connection to each leader per fetcher id among that leader's partitions.
    leaders = {p: leader for p, (leader, _r, _i) in describe(brokers, topic).items()}
    expected = {(node_id, leader): len({fetcher_id(StorageTopicPartition(topic, p), 2) for p, at in leaders.items()
                                        if at == leader})
                for node_id in (2, 3) for leader in set(leaders.values()) - {node_id}}
    assert max(expected.values()) == 2, (leaders, expected)  # some leader's partitions take both loops
    for (node_id, leader), loops in expected.items():
        (worker,) = broker_with_id(brokers, node_id).worker_pids()
        wait_until(lambda: connections(worker, broker_with_id(brokers, leader).port) >= loops, 15,
                   f"broker {node_id}'s {loops} fetch connection(s) to broker {leader}")

    stopped = broker_with_id(brokers, 3)
    pause(stopped)
    try:
        wait_until(lambda: all(3 not in isr for _l, _r, isr in describe(brokers[:2], topic).values()),
                   LAG_MS / 1000 + 15, "broker 3 out of every ISR")
        produce_acked(brokers[:2], topic, [f"b{i}" for i in range(3000)], history, partitions=6)
    finally:
        resume(stopped)
    # Every broker's own Metadata, broker 3's included: back from a pause past its ZooKeeper
    # session, it answers from its new session's view only once it has read it.
    wait_until(lambda: all(all(len(isr) == 3 for _l, _r, isr in describe([b], topic).values()) for b in brokers), 60,
               "broker 3 back in every ISR, as every broker tells it")
    read_all(brokers, topic, 6, history)
    assert history.check().ok, history.check().summary()
    final = read_all(brokers, topic, 6)
    assert sum(len(records) for records in final.values()) == 3300
    for broker in brokers:
        wait_until(lambda: log_records(broker, topic, 6) == final, 30, f"broker {broker.bootstrap}'s copy")


def connections(pid: int, port: int) -> int:
    """TCP connections process ``pid`` holds open to 127.0.0.1:``port``."""
    listed = subprocess.run(["ss", "-Htnp", "state", "established", "dst", f"127.0.0.1:{port}"],
                            capture_output=True, text=True, timeout=10, check=True).stdout
    return sum(f"pid={pid}," in line for line in listed.splitlines())


def high_watermark(broker: Broker, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"hw-{uuid.uuid4().hex}"})
    try:
        return int(consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1])
    finally:
        consumer.close()


def error_of_acks_all(broker: Broker, topic: str) -> str:
    """The error name an acks=all produce gets from ``broker`` (one try, no retries)."""
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "retries": 0,
                         "message.timeout.ms": 5000, "enable.idempotence": False})
    errors: list[str] = []
    producer.produce(topic, value=b"x", partition=0, on_delivery=lambda err, _m: errors.append(err.name() if err else ""))
    producer.flush(10)
    return errors[0] if errors else "no answer"


def java_hash(text: str) -> int:
    value = 0
    for char in text:
        value = (31 * value + ord(char)) & 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def committed(brokers: list[Broker], group: str, topic: str, partitions: int) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap(brokers), "group.id": group, "enable.auto.commit": False})
    try:
        found = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=30)
        return {tp.partition: tp.offset for tp in found}
    finally:
        consumer.close()


def test_committed_offsets_survive_the_loss_of_the_broker_leading_their_partition(three: list[Broker]) -> None:
    """A commit is answered once the ISR of its __consumer_offsets partition has it; when
    the broker leading that partition dies for good, the new leader has every commit."""
    topic, group = "orders", "billing"
    # Created and described with the admin CLI, as an operator would.
    ok(bootstrap(three), "topics", "create", topic, "--partitions", "2", "--replication-factor", "3")
    wait_until(lambda: all(len(isr) == 3 for _l, _r, isr in describe(three, "__consumer_offsets").values()), 60,
               "__consumer_offsets replicated on the three brokers")
    consumer = Consumer({"bootstrap.servers": bootstrap(three), "group.id": group, "enable.auto.commit": False})
    try:
        for round_ in range(1, 6):
            consumer.commit(offsets=[TopicPartition(topic, 0, 10 * round_), TopicPartition(topic, 1, 7 * round_)],
                            asynchronous=False)
    finally:
        consumer.close()
    assert committed(three, group, topic, 2) == {0: 50, 1: 35}
    partition = abs(java_hash(group)) % 4
    victim_id = describe(three, "__consumer_offsets")[partition][0]
    victim = broker_with_id(three, victim_id)
    victim.kill()
    victim.process = None  # dead for good: nothing for the teardown to stop
    survivors = [b for b in three if b is not victim]
    wait_until(lambda: describe(survivors, "__consumer_offsets")[partition][0] not in (victim_id, -1), 30,
               f"a new leader of __consumer_offsets-{partition}")
    assert wait_until(lambda: committed(survivors, group, topic, 2) == {0: 50, 1: 35}, 60,
                      "the committed offsets from the surviving brokers")
    described = as_json(bootstrap(survivors), "topics", "describe", topic)
    partitions = described["topics"][0]["partitions"] if "topics" in described else described["partitions"]
    assert all(p["offline_replicas"] == [victim_id] and victim_id in p["replicas"] for p in partitions), partitions
    assert "OFFLINE" in ok(bootstrap(survivors), "topics", "describe", topic, "--under-replicated-partitions").stdout


@contextmanager
def leader_alone_in_the_isr(three: list[Broker], topic: str) -> Iterator[tuple[int, Broker, list[Broker]]]:
    """A new one-partition topic on the three (min ISR 1) whose followers are paused until its
    leader is alone in the ISR: (leader id, leader, followers); the followers resume after."""
    create(three, topic, 1, 3, {"min.insync.replicas": "1"})
    wait_until(lambda: len(describe(three, topic)[0][2]) == 3, 30, "a full ISR")
    leader_id = leader_of(three, topic, 0)
    old_leader = broker_with_id(three, leader_id)
    followers = [b for b in three if b is not old_leader]
    for follower in followers:
        pause(follower)
    try:
        wait_until(lambda: describe([old_leader], topic)[0][2] == [leader_id], LAG_MS / 1000 + 15, "an ISR of the leader alone")
        yield leader_id, old_leader, followers
    finally:
        for follower in followers:
            resume(follower)


def test_an_unclean_leader_and_the_old_leader_truncating_its_diverged_log(three: list[Broker]) -> None:
    """Followers stopped, the leader alone in the ISR takes acks=1 writes, then dies: the
    partition stays offline (no in-sync replica is alive) until unclean.leader.election.enable
    lets a follower lead. When the old leader returns its log has diverged: it truncates
    the records only it had (Fetch's DivergingEpoch) and copies the new leader's."""
    topic = "diverge"
    with leader_alone_in_the_isr(three, topic) as (leader_id, old_leader, followers):
        lost = History()
        produce_acked([old_leader], topic, [f"x{i}" for i in range(10)], lost, acks="1", partitions=1)
        assert lost.check().acked == 10
        old_leader.kill()
    wait_until(lambda: describe(followers, topic)[0][0] == -1, 30, "the partition offline")
    time.sleep(2)
    assert describe(followers, topic)[0][0] == -1, "a replica out of the ISR was elected while unclean election is off"
    admin = AdminClient({"bootstrap.servers": bootstrap(followers)})
    resource = ConfigResource("topic", topic, incremental_configs=[
        ConfigEntry("unclean.leader.election.enable", "true", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(30)
    new_leader = wait_until(lambda: describe(followers, topic)[0][0] not in (-1, leader_id) and describe(followers, topic)[0][0],
                            30, "an unclean leader")
    kept = History()
    produce_acked([broker_with_id(three, new_leader)], topic, [f"y{i}" for i in range(10)], kept, partitions=1)
    assert kept.check().acked == 10
    old_leader.start()
    wait_until(lambda: len(describe(three, topic)[0][2]) == 3, 60, "the old leader back in the ISR")
    final = read_all(three, topic, 1)
    assert [v for _o, v in final[0]] == [f"y{i}" for i in range(10)]
    for broker in three:
        wait_until(lambda: log_records(broker, topic, 1) == final, 30, f"broker {broker.bootstrap}'s copy")
    assert "diverges from the leader" in old_leader.stderr(tail=2000)


def test_a_broker_back_with_an_empty_log_dir_never_leads_and_catches_up(three: list[Broker]) -> None:
    """The leader's disk is lost (its log dir wiped while it is down) and it comes back at
    once, before its ZooKeeper session expired (its session resumes: it never looked dead).
    Its new directory.id tells it apart: it leaves every ISR before serving, a replica that
    has the data leads, and it copies everything back from the leaders."""
    topic = "lost-disk"
    create(three, topic, 3, 3, {"min.insync.replicas": "2"})
    wait_until(lambda: all(len(isr) == 3 for _l, _r, isr in describe(three, topic).values()), 30, "full ISRs")
    history = History()
    produce_acked(three, topic, [f"v{i}" for i in range(300)], history)
    victim_id = leader_of(three, topic, 0)
    victim = broker_with_id(three, victim_id)
    victim.kill()
    shutil.rmtree(victim.log_dir)
    victim.start()
    layout = describe([victim], topic)  # what the wiped broker itself serves right away
    assert layout[0][0] != victim_id, layout  # its empty log does not lead
    assert all(victim_id not in isr or len(isr) == 3 for _l, _r, isr in layout.values()), layout
    assert "its data is gone" in victim.stderr(tail=3000)
    wait_until(lambda: all(len(isr) == 3 for _l, _r, isr in describe(three, topic).values()), 60,
               "the wiped broker back in every ISR")
    read_all(three, topic, 3, history)
    assert history.check().ok, history.check().summary()
    final = read_all(three, topic, 3)
    wait_until(lambda: log_records(victim, topic, 3) == final, 30, "the wiped broker's copy")


def test_the_controller_process_killed_another_is_elected_and_leaders_are_still_elected(three: list[Broker],
                                                                                       zk_connect: str) -> None:
    topic = "controlled"
    create(three, topic, 3, 3, {})
    wait_until(lambda: all(len(isr) == 3 for _l, _r, isr in describe(three, topic).values()), 30, "full ISRs")
    client = zk(zk_connect)
    try:
        controller_id = int(json.loads(client.get("/consumers/coordinator")[0])["brokerid"])
        controller = broker_with_id(three, controller_id)
        pid = controller.coordinator_pid()
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        # A leader dies while the controller is being replaced: its partitions still get a new leader.
        victim = next(b for i, b in enumerate(three, start=1) if i != controller_id)
        victim_id = three.index(victim) + 1
        led = [p for p, (leader, _r, _i) in describe(three, topic).items() if leader == victim_id]
        victim.kill()
        victim.process = None
        survivors = [b for b in three if b is not victim]
        wait_until(lambda: all(describe(survivors, topic)[p][0] not in (-1, victim_id) for p in led), 40,
                   f"new leaders for {led}")
        assert wait_until(lambda: client.exists("/consumers/coordinator"), 30, "a controller elected")
    finally:
        client.stop()
        client.close()


def test_preferred_leaders_come_back_by_request_and_by_the_controller(broker_factory: Callable[..., Broker],
                                                                      zk_connect: str) -> None:
    """After a failover the preferred (first) replica is back in the ISR but does not lead:
    ElectLeaders makes it lead again, and so does auto.leader.rebalance.enable."""
    three = start_three(broker_factory, zk_connect, **{"leader.imbalance.check.interval.seconds": 2,
                                                       "leader.imbalance.per.broker.percentage": 0})
    topic = "preferred"
    admin = AdminClient({"bootstrap.servers": bootstrap(three)})
    admin.create_topics([NewTopic(topic, num_partitions=2, replica_assignment=[[1, 2, 3], [1, 3, 2]])])[topic].result(30)
    wait_until(lambda: all(len(isr) == 3 and leader == 1 for leader, _r, isr in describe(three, topic).values()), 30,
               "broker 1 leading both partitions")
    done = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition(topic, 0)]).result(30)
    assert done[TopicPartition(topic, 0)] is not None  # ELECTION_NOT_NEEDED: it leads already
    one = broker_with_id(three, 1)
    pause(one)
    try:
        others = [b for b in three if b is not one]
        wait_until(lambda: all(leader in (2, 3) for leader, _r, _i in describe(others, topic).values()), 40,
                   "leaders moved off the stopped broker 1")
    finally:
        resume(one)
    # Back and in sync, broker 1 leads again: the controller's rebalance (every 2 s here)
    # or an election by request, whichever comes first.
    wait_until(lambda: all(len(isr) == 3 for _l, _r, isr in describe(three, topic).values()), 60, "full ISRs")
    try:
        admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition(topic, 0)]).result(30)
    except KafkaException:
        pass  # already moved back by the controller: ELECTION_NOT_NEEDED
    wait_until(lambda: all(leader == 1 for leader, _r, _i in describe(three, topic).values()), 30,
               "broker 1 leading both partitions again")


def test_a_reassignment_copies_the_partition_to_new_brokers_then_drops_the_old(three: list[Broker]) -> None:
    """castle topics reassign (AlterPartitionReassignments): the new replica catches up and
    joins the ISR, the leadership moves into the target, the old replica leaves and its
    broker deletes its copy; castle topics reassignments lists the move while it runs."""
    topic = "moving"
    ok(bootstrap(three), "topics", "create", topic, "--replica-assignment", "1:2")
    wait_until(lambda: describe(three, topic)[0][2] == [1, 2], 30, "ISR [1, 2]")
    history = History()
    produce_acked(three, topic, [f"m{i}" for i in range(300)], history, partitions=1)
    one = broker_with_id(three, 1)
    pause(broker_with_id(three, 3))  # the move waits for broker 3: it is seen in progress
    try:
        ok(bootstrap([one]), "topics", "reassign", topic, "--partition", "0", "--replicas", "3,2")
        listed = as_json(bootstrap([one]), "topics", "reassignments")
        assert listed == [{"topic": topic, "partition": 0, "replicas": [3, 2, 1], "adding": [3], "removing": [1]}]
    finally:
        resume(broker_with_id(three, 3))
    wait_until(lambda: as_json(bootstrap(three), "topics", "reassignments", topic) == [], 60, "the move done")
    wait_until(lambda: describe(three, topic)[0] == (3, [3, 2], [3, 2]) or describe(three, topic)[0] == (3, [3, 2], [2, 3]),
               30, "broker 3 leading replicas [3, 2]")
    wait_until(lambda: not os.path.exists(os.path.join(one.log_dir, f"{topic}-0")), 30, "broker 1's copy deleted")
    produce_acked(three, topic, [f"n{i}" for i in range(50)], history, partitions=1)
    read_all(three, topic, 1, history)
    assert history.check().ok and history.check().acked == 350, history.check().summary()
    final = read_all(three, topic, 1)
    for node_id in (2, 3):
        broker = broker_with_id(three, node_id)
        wait_until(lambda: log_records(broker, topic, 1) == final, 30, f"broker {node_id}'s copy")


def test_a_randomized_run_of_kills_and_pauses_loses_no_acknowledged_record(three: list[Broker]) -> None:
    """Jepsen's Kafka checker over ~20 s of random faults (a seed printed for replay): kill -9
    of a broker then its restart, or a broker paused (SIGSTOP) for 1-6 s, one at a time,
    while idempotent acks=all producers and a consumer run. Afterwards every acknowledged
    record is in every copy once, at its offset, and nothing read was ever rolled back."""
    seed = int(os.environ.get("CASTLE_NEMESIS_SEED", time.time_ns() % 1_000_000))
    rng = random.Random(seed)
    print(f"nemesis seed {seed} (CASTLE_NEMESIS_SEED={seed} replays it)")
    topic = "nemesis"
    create(three, topic, 3, 3, {"min.insync.replicas": "2"})
    wait_until(lambda: all(len(isr) == 3 for _l, _r, isr in describe(three, topic).values()), 30, "full ISRs")
    history = History()
    faults = []
    deadline = time.monotonic() + 20
    with Load(three, topic, 3, history) as load:
        while time.monotonic() < deadline:
            victim = rng.choice(three)
            if rng.random() < 0.5:
                faults.append(f"kill -9 {victim.bootstrap}")
                victim.kill()
                time.sleep(rng.uniform(0.5, 5))
                victim.start()
            else:
                pause_for = rng.uniform(1, 6)
                faults.append(f"SIGSTOP {victim.bootstrap} {pause_for:.1f} s")
                pause(victim)
                try:
                    time.sleep(pause_for)
                finally:
                    resume(victim)
            wait_until(lambda: all(len(isr) >= 2 for _l, _r, isr in describe(three, topic).values()), 60,
                       "two in-sync replicas again")
            time.sleep(rng.uniform(0.5, 3))
    assert not load.errors, load.errors
    wait_until(lambda: all(len(isr) == 3 for _l, _r, isr in describe(three, topic).values()), 60, "full ISRs at the end")
    read_all(three, topic, 3, history)
    report = history.check()
    assert report.ok, f"seed {seed}, faults {faults}:\n{report.summary()}"
    assert report.acked > 100, report.summary()
    final = read_all(three, topic, 3)
    for broker in three:
        wait_until(lambda: log_records(broker, topic, 3) == final, 30, f"broker {broker.bootstrap}'s copy (seed {seed})")


@pytest.mark.kafka_cli
@pytest.mark.timeout(600)
def test_kafka_reassign_partitions_and_leader_election_tools_drive_castle(three: list[Broker], tmp_path: Any) -> None:
    """Apache Kafka 4.0.0's kafka-reassign-partitions and kafka-leader-election, unmodified,
    against three Castle brokers (jars fetched once with Maven: tests/kafka_cli.py)."""
    missing = missing_tools()
    if missing:
        pytest.fail(f"Kafka's CLI needs {', '.join(missing)} on PATH (apt-get install default-jre-headless maven)")
    topic = "kafka-tools"
    ok(bootstrap(three), "topics", "create", topic, "--replica-assignment", "1:2,2:1")
    wait_until(lambda: all(len(isr) == 2 for _l, _r, isr in describe(three, topic).values()), 30, "ISRs of two")
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": 0, "replicas": [3, 2]},
                                                             {"topic": topic, "partition": 1, "replicas": [2, 3]}]}))
    servers = ["--bootstrap-server", three[0].bootstrap]
    done = run_tool(REASSIGN_COMMAND, [*servers, "--execute", "--reassignment-json-file", str(plan)])
    assert done.returncode == 0, done.stdout + done.stderr

    seen: list[str] = []

    def verified() -> bool:
        check = run_tool(REASSIGN_COMMAND, [*servers, "--verify", "--reassignment-json-file", str(plan)])
        seen.append(f"exit {check.returncode}\n{check.stdout}\n{check.stderr[-2000:]}")
        return check.returncode == 0 and "is still in progress" not in check.stdout
    try:
        wait_until(verified, 60, "kafka-reassign-partitions --verify to report the moves complete", interval=2)
    except AssertionError:
        raise AssertionError(f"{seen[-1] if seen else 'never ran'}") from None
    layout = describe(three, topic)
    assert (sorted(layout[0][1]), sorted(layout[1][1])) == ([2, 3], [2, 3]), layout
    wait_until(lambda: all(len(isr) == 2 for _l, _r, isr in describe(three, topic).values()), 30, "ISRs of two")
    election = run_tool(LEADER_ELECTION_COMMAND, [*servers, "--election-type", "PREFERRED", "--all-topic-partitions"])
    assert election.returncode in (0, 1), election.stdout + election.stderr  # 1: some elections not needed
    wait_until(lambda: [describe(three, topic)[p][0] for p in (0, 1)] == [3, 2], 30, "preferred leaders 3 and 2")
