"""Share groups (KIP-932) under faults, judged by a checker that reads everything back.

A producer writes numbered records (acks=all) throughout; share consumers, each its own
process (tests/integration/share_consumer_process.py: confluent-kafka's ShareConsumer,
explicit acknowledgement, every record ACCEPTed then commit_sync), print every delivery and
every acknowledgement the broker confirmed, stamped with a clock the test shares; a sampler
reads DescribeShareGroupOffsets (each partition's share-partition start offset, SPSO) every
few tenths of a second. Faults: consumers killed -9 while holding records, a replacement
started each time; the coordinator process (share coordinator and group coordinator both)
killed -9, or first stopped for longer than a share-partition leader retries a state write
(its acknowledgements fail, its share partitions are dropped and read again); in a
three-broker ZooKeeper cluster, the coordinator's whole broker killed -9. Then the faults
stop and the group drains.

The checker, over every line and every sample:
- every produced record is accepted (the broker confirmed it) once, never twice; a record
  never confirmed must have its last delivery end in an acknowledgement whose outcome is
  unknown (its consumer killed before the answer, or the answer an error while the
  coordinator died) or at share.delivery.count.limit (archived on its release), and the
  final SPSO must have passed it: those the broker may have settled without telling anyone;
- no delivery has a delivery count above share.delivery.count.limit;
- the SPSO of a partition never decreases from one sample to the next;
- the SPSO never passes a record not yet settled when it was read: a sample received at time
  T with SPSO S says every offset below S was ACKNOWLEDGED or ARCHIVED before T, so a delivery
  of such a record printed after T is a violation (it was acquired before T and still held,
  so S could not pass it, or acquired after it was done), except a delivery at the limit
  that was never confirmed (its lock ran out or its session closed: archived, the late
  consumer's acknowledgement refused). Printing precedes the acknowledgement, so an
  acceptance of a record printed after T was applied after T: the same rule covers "accepted
  later than the sample that passed it", without trusting when confirmations arrive (an
  answer may come after the sample that already counts the acceptance);
- once drained, every partition's SPSO is its high watermark.
"""

from __future__ import annotations

import bisect
import json
import os
import random
import signal
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from tests.client_process import ClientProcess
from tests.integration.conftest import Broker, start_cluster_broker, wait_until
from tests.integration.kio_client import KioClient

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

DESCRIBE_SHARE_GROUP_OFFSETS = 90
PARTITIONS = 4
DELIVERY_COUNT_LIMIT = 3
LOCK_MS = 15_000
# Members that stop heartbeating leave after 6 s (not Kafka's 45 s), so that a killed
# consumer's assignment goes to the live ones within the run.
BROKER_SETTINGS = {"group.share.heartbeat.interval.ms": 1000, "group.share.min.heartbeat.interval.ms": 1000,
                   "group.share.session.timeout.ms": 6000, "group.share.min.session.timeout.ms": 6000,
                   "offsets.topic.num.partitions": 4, "share.coordinator.state.topic.num.partitions": 4}
DRAIN_S = 90.0
WORK_S = 0.5  # each poll's records held this long before their acknowledgements go: kills find records held


# ---------------------------------------------------------------------- what the consumers printed
@dataclass(frozen=True)
class Delivery:
    member: str
    partition: int
    offset: int
    value: str
    delivery_count: int
    at: float  # printed (before its acknowledgement was sent)
    outcome: str  # "confirmed", "error" (answered with one), "unanswered"
    answered_at: float | None


def complete_events(stdout: str) -> list[dict[str, Any]]:
    """The JSON lines of a consumer's output; a last line cut short by a kill is no line."""
    return [json.loads(line) for line in stdout.splitlines(keepends=True)
            if line.startswith("{") and line.endswith("\n")]


def read_deliveries(name: str, stdout: str, topic: str) -> list[Delivery]:
    printed: list[dict[str, Any]] = []
    pending: dict[tuple[int, int], int] = {}  # (partition, offset) -> index in printed, unanswered
    answers: dict[int, tuple[str, float]] = {}
    for event in complete_events(stdout):
        if event["event"] == "record" and event["topic"] == topic:
            pending[(event["partition"], event["offset"])] = len(printed)
            printed.append(event)
        elif event["event"] == "acknowledged" and event["topic"] == topic:
            for offset in event["offsets"]:
                index = pending.pop((event["partition"], offset), None)
                if index is not None:
                    answers[index] = ("confirmed" if event["error"] is None else "error", event["at"])
    out = []
    for i, e in enumerate(printed):
        outcome, answered_at = answers.get(i, ("unanswered", None))
        out.append(Delivery(name, e["partition"], e["offset"], e["value"], e["delivery_count"] or 0, e["at"],
                            outcome, answered_at))
    return out


# ---------------------------------------------------------------------- the run's parts
class ShareConsumers:
    """Consumer processes: started, killed -9 or stopped by PID; all stopped at the end."""

    def __init__(self, bootstrap: str, group: str, topic: str, log_dir: Path) -> None:
        self.bootstrap, self.group, self.topic, self.log_dir = bootstrap, group, topic, log_dir
        self.members: list[ClientProcess] = []
        self.killed: dict[str, float] = {}  # name -> when

    def start(self) -> ClientProcess:
        name = f"c{len(self.members)}"
        member = ClientProcess([sys.executable, "-m", "tests.integration.share_consumer_process", self.bootstrap,
                                self.group, self.topic, name, str(WORK_S)], self.log_dir, name)
        self.members.append(member)
        return member

    def live(self) -> list[ClientProcess]:
        return [m for m in self.members if m.process.poll() is None]

    def kill(self, member: ClientProcess) -> None:
        member.kill()
        self.killed[member.name] = time.monotonic()

    def stop_all(self) -> None:
        for member in self.members:
            member.stop(timeout=30)

    def deliveries(self) -> list[Delivery]:
        return [d for m in self.members for d in read_deliveries(m.name, m.stdout(), self.topic)]

    def errors(self) -> list[str]:
        return [f"{m.name}: {e['error']}" for m in self.members for e in complete_events(m.stdout())
                if e["event"] == "error"]

    def report(self, tail: int = 3000) -> str:
        return "\n".join(f"== {m.name}{' (killed)' if m.name in self.killed else ''}\n{m.report(tail)}"
                         for m in self.members)


class Producer:
    """Numbered records, round-robin over the partitions, acks=all, on a thread until stopped;
    ``placed``: value -> (partition, offset) of every record the broker acknowledged."""

    def __init__(self, bootstrap: str, topic: str, rate: float) -> None:
        self.bootstrap, self.topic, self.rate = bootstrap, topic, rate
        self.placed: dict[str, tuple[int, int]] = {}
        self.failures: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="share-faults-producer", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        from confluent_kafka import Producer as KafkaProducer

        producer = KafkaProducer({"bootstrap.servers": self.bootstrap, "acks": "all", "linger.ms": 5,
                                  "enable.idempotence": True})

        def delivered(err: Any, msg: Any) -> None:
            if err is not None:
                self.failures.append(str(err))
            else:
                self.placed[msg.value().decode()] = (msg.partition(), msg.offset())

        i = 0
        while not self._stop.is_set():
            value = f"r-{i}"
            producer.produce(self.topic, value=value.encode(), key=value.encode(), partition=i % PARTITIONS,
                             on_delivery=delivered)
            i += 1
            producer.poll(0)
            self._stop.wait(1 / self.rate)
        left = producer.flush(30)
        if left:
            self.failures.append(f"{left} records unacknowledged at the end")

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)
        assert not self._thread.is_alive(), "the producer did not stop"


@dataclass(frozen=True)
class Sample:
    sent: float
    received: float
    start_offsets: dict[int, int]  # partition -> SPSO (partitions with state only)


class Sampler:
    """DescribeShareGroupOffsets every ``interval`` s on a thread (reconnecting after a failure:
    the coordinator process may be down); the answered samples, in order."""

    def __init__(self, bootstrap: str, group: str, topic: str, interval: float = 0.25) -> None:
        self.brokers = bootstrap.split(",")  # asked in turn, the next one after a failure or an error
        self.group, self.topic, self.interval = group, topic, interval
        self.samples: list[Sample] = []
        self.refused: Counter[str] = Counter()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="share-faults-sampler", daemon=True)
        self._thread.start()

    def describe(self, client: KioClient) -> Sample | None:
        from kio.schema.describe_share_group_offsets.v1.request import (
            DescribeShareGroupOffsetsRequest,
            DescribeShareGroupOffsetsRequestGroup,
            DescribeShareGroupOffsetsRequestTopic,
        )
        from kio.schema.types import GroupId, TopicName
        from kio.static.primitive import i32

        request = DescribeShareGroupOffsetsRequest(groups=(DescribeShareGroupOffsetsRequestGroup(
            group_id=GroupId(self.group), topics=(DescribeShareGroupOffsetsRequestTopic(
                topic_name=TopicName(self.topic), partitions=tuple(i32(p) for p in range(PARTITIONS))),)),))
        sent = time.monotonic()
        answer = client.call(DESCRIBE_SHARE_GROUP_OFFSETS, 1, request)
        received = time.monotonic()
        (group,) = answer.groups
        if group.error_code != 0:
            self.refused[f"group {group.error_code}"] += 1
            return None
        offsets = {}
        for topic in group.topics:
            for p in topic.partitions:
                if p.error_code != 0:
                    self.refused[f"partition {p.error_code}"] += 1
                elif p.start_offset >= 0:
                    offsets[int(p.partition_index)] = int(p.start_offset)
        return Sample(sent, received, offsets)

    def _run(self) -> None:
        client: KioClient | None = None
        turn = 0
        while not self._stop.is_set():
            try:
                if client is None:
                    client = KioClient(self.brokers[turn % len(self.brokers)], timeout=5)
                sample = self.describe(client)
                if sample is not None:
                    self.samples.append(sample)
                else:  # not the coordinator (any more), or it is loading
                    client.close()
                    client = None
                    turn += 1
            except (OSError, ConnectionError, ValueError) as exc:
                self.refused[type(exc).__name__] += 1
                if client is not None:
                    client.close()
                client = None
                turn += 1
            self._stop.wait(self.interval)
        if client is not None:
            client.close()

    def latest(self) -> Sample | None:
        return self.samples[-1] if self.samples else None

    def answering(self, within: float) -> bool:
        """A sample was answered in the last ``within`` seconds."""
        latest = self.latest()
        return latest is not None and latest.received > time.monotonic() - within

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)


def set_group_configs(bootstrap: str, group: str, configs: dict[str, str]) -> None:
    """IncrementalAlterConfigs of the GROUP resource (kafka-configs.sh --entity-type groups)."""
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in configs.items()])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(30)


# ---------------------------------------------------------------------- the checker
@dataclass
class Verdict:
    accepted: int
    excused: Counter[str]
    deliveries: int
    redeliveries: int
    delivery_counts: dict[int, int]
    skipped: int  # deliveries counting two or more past the one printed before (acquired unprinted)
    samples: int


def judge(deliveries: list[Delivery], placed: dict[str, tuple[int, int]], samples: list[Sample],
          killed: dict[str, float], work_s: float, explain_error: Callable[[Delivery], bool],
          report: Callable[[], str]) -> Verdict:
    """Every check of the module docstring over what was printed and sampled; the counts.
    ``killed``: when each killed consumer was killed; ``work_s``: how long a consumer holds a
    poll's records before it sends their acknowledgements; ``explain_error``: whether an
    acknowledgement answered with an error may still have been applied (the fault's window)."""
    problems: list[str] = []
    by_place: dict[tuple[int, int], list[Delivery]] = {}
    for d in deliveries:
        by_place.setdefault((d.partition, d.offset), []).append(d)
        if placed.get(d.value) != (d.partition, d.offset):
            problems.append(f"delivered at {d.partition}:{d.offset} but produced at {placed.get(d.value)}: {d}")
        if not 1 <= d.delivery_count <= DELIVERY_COUNT_LIMIT:
            problems.append(f"delivery count {d.delivery_count} outside 1..{DELIVERY_COUNT_LIMIT}: {d}")

    # Accepted once, never twice; the others explained.
    excused: Counter[str] = Counter()
    final = samples[-1].start_offsets if samples else {}
    for value, place in placed.items():
        got = sorted(by_place.get(place, []), key=lambda d: d.at)
        confirmed = [d for d in got if d.outcome == "confirmed"]
        if len(confirmed) > 1:
            problems.append(f"{value} at {place} accepted {len(confirmed)} times: {confirmed}")
        if confirmed:
            # A delivery acquired after the acceptance counts one more delivery than it.
            later = [d for d in got if d.delivery_count > confirmed[0].delivery_count]
            if later:
                problems.append(f"{value} at {place} delivered again after its accepted delivery: {later}")
            continue
        if not got:
            problems.append(f"{value} at {place} never delivered")
            continue
        last = got[-1]
        if final.get(place[0], -1) <= place[1]:
            problems.append(f"{value} at {place} never accepted and not passed by the final SPSO {final}: {got}")
        elif last.delivery_count == DELIVERY_COUNT_LIMIT:
            excused["archived at the limit"] += 1
        elif last.outcome == "unanswered" and killed.get(last.member, 0) >= last.at + work_s:
            # Killed once its work was done: the acknowledgement may have gone out.
            excused["its consumer killed before the answer"] += 1
        elif last.outcome == "error" and explain_error(last):
            excused["answered with an error while the coordinator died"] += 1
        else:
            problems.append(f"{value} at {place} never accepted; its last delivery unexplained: {got}")

    # The SPSO never moves back, and never passes a record delivered later.
    for partition in range(PARTITIONS):
        seen = [(s.received, s.start_offsets[partition]) for s in samples if partition in s.start_offsets]
        for (t0, s0), (t1, s1) in zip(seen, seen[1:]):
            if s1 < s0:
                problems.append(f"partition {partition}: SPSO {s1} (at {t1:.2f}) after {s0} (at {t0:.2f})")
        times = [t for t, _ in seen]
        highest = []
        top = -1
        for _, start in seen:
            top = max(top, start)
            highest.append(top)
        for d in deliveries:
            if d.partition != partition:
                continue
            index = bisect.bisect_left(times, d.at) - 1  # the last sample received before the print
            if index < 0 or d.offset >= highest[index]:
                continue
            if d.delivery_count == DELIVERY_COUNT_LIMIT and d.outcome != "confirmed":
                continue
            problems.append(f"{d} printed at {d.at:.2f}, after a sample received at {times[index]:.2f} "
                            f"put the SPSO at {highest[index]}")

    assert not problems, f"{len(problems)} violations:\n" + "\n".join(problems[:25]) + "\n" + report()
    skipped = 0
    for got in by_place.values():
        in_order = sorted(got, key=lambda d: d.at)
        skipped += sum(1 for a, b in zip(in_order, in_order[1:]) if b.delivery_count > a.delivery_count + 1)
    return Verdict(accepted=sum(1 for got in by_place.values() if any(d.outcome == "confirmed" for d in got)),
                   excused=excused, deliveries=len(deliveries), redeliveries=len(deliveries) - len(by_place),
                   delivery_counts=dict(sorted(Counter(d.delivery_count for d in deliveries).items())),
                   skipped=skipped, samples=len(samples))


# ---------------------------------------------------------------------- the run
@dataclass
class Run:
    brokers: list[Broker]
    topic: str
    group: str
    consumers: ShareConsumers
    producer: Producer
    sampler: Sampler

    @property
    def broker(self) -> Broker:
        return self.brokers[0]


def running(brokers: list[Broker], tmp_path: Path, name: str, replicas: int = 1) -> Iterator[Run]:
    """The topic, the group's configs, the sampler and the producer; the consumers are the test's."""
    from confluent_kafka.admin import AdminClient, NewTopic

    bootstrap = ",".join(b.bootstrap for b in brokers)
    topic, group = f"sf-{name}", f"sf-g-{name}"
    configs = {"min.insync.replicas": "2"} if replicas > 1 else {}
    admin = AdminClient({"bootstrap.servers": bootstrap})
    created = admin.create_topics(
        [NewTopic(topic, num_partitions=PARTITIONS, replication_factor=replicas, config=configs)],
        operation_timeout=10, request_timeout=15)
    created[topic].result(timeout=20)
    set_group_configs(bootstrap, group, {"share.auto.offset.reset": "earliest",
                                         "share.delivery.count.limit": str(DELIVERY_COUNT_LIMIT),
                                         "share.record.lock.duration.ms": str(LOCK_MS)})
    consumers = ShareConsumers(bootstrap, group, topic, tmp_path / "consumers")
    sampler = Sampler(bootstrap, group, topic)
    producer: Producer | None = None
    try:
        producer = Producer(bootstrap, topic, rate=150)
        yield Run(brokers, topic, group, consumers, producer, sampler)
    finally:
        if producer is not None:
            producer.stop()
        sampler.stop()
        consumers.stop_all()


@pytest.fixture
def run(broker_factory: Callable[..., Broker], tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Run]:
    broker = broker_factory(workers=2, overrides=BROKER_SETTINGS)
    yield from running([broker], tmp_path, request.node.name.replace("test_", "")[:30])


def wait_consuming(run: Run, members: int, timeout: float = 60) -> None:
    def every_one_read() -> bool:
        return all(any(True for _ in read_deliveries(m.name, m.stdout(), run.topic)) for m in run.consumers.live()) \
            and len(run.consumers.live()) == members
    wait_until(every_one_read, timeout, f"{members} consumers each delivered records", interval=0.25)


def drain(run: Run) -> Sample:
    """Producer stopped and flushed: until a sample shows every partition's SPSO at its end."""
    run.producer.stop()
    assert not run.producer.failures, run.producer.failures[:10]
    ends = Counter(p for p, _ in run.producer.placed.values())
    assert all(max(o for p2, o in run.producer.placed.values() if p2 == p) + 1 == n for p, n in ends.items()), \
        "each partition holds only this run's records, numbered from 0"

    def drained() -> Sample | None:
        latest = run.sampler.latest()
        if latest is not None and latest.start_offsets == {p: ends[p] for p in range(PARTITIONS)}:
            return latest
        return None

    try:
        return wait_until(drained, DRAIN_S, "every partition's SPSO at its high watermark", interval=0.5)
    except AssertionError:
        raise AssertionError(f"not drained: latest sample {run.sampler.latest()}, ends {dict(ends)}\n"
                             f"{run.consumers.report()}") from None


def finish(run: Run, explain_error: Callable[[Delivery], bool]) -> Verdict:
    drain(run)
    time.sleep(1)  # a last sample or two after the drain
    run.sampler.stop()
    run.consumers.stop_all()
    verdict = judge(run.consumers.deliveries(), run.producer.placed, run.sampler.samples, run.consumers.killed,
                    WORK_S, explain_error, run.consumers.report)
    print(f"produced {len(run.producer.placed)}, {verdict}, killed {len(run.consumers.killed)} consumers, "
          f"sampler refused {dict(run.sampler.refused)}")
    return verdict


# ---------------------------------------------------------------------- the tests
def held(run: Run, member: ClientProcess) -> list[Delivery]:
    """The deliveries ``member`` printed and has no answer for yet: the records it holds."""
    return [d for d in read_deliveries(member.name, member.stdout(), run.topic) if d.outcome == "unanswered"]


def test_consumers_killed_9_while_holding_records(run: Run) -> None:
    """Four consumers; every 0.5-2 s for 20 s one is killed -9 while it holds records, a
    replacement started each time, the producer writing throughout. The victim is, when one
    can be caught in that time, a consumer holding a record delivered before (so that
    records reach share.delivery.count.limit and are archived), else one holding any."""
    for _ in range(4):
        run.consumers.start()
    wait_consuming(run, 4)
    rng = random.Random()
    at_limit = 0  # kills of a consumer holding a record at its last delivery
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        earliest, latest = time.monotonic() + 0.5, time.monotonic() + rng.uniform(1.0, 2.0)
        victim = None
        while victim is None and time.monotonic() < latest:
            time.sleep(0.05)
            if time.monotonic() < earliest:
                continue
            holding = {m.name: held(run, m) for m in run.consumers.live()}
            hot = [m for m in run.consumers.live() if any(d.delivery_count >= 2 for d in holding[m.name])]
            victim = rng.choice(hot) if hot else None
        if victim is None:
            holders = [m for m in run.consumers.live() if held(run, m)]
            victim = rng.choice(holders or run.consumers.live())
        run.consumers.kill(victim)
        at_limit += any(d.delivery_count == DELIVERY_COUNT_LIMIT for d in held(run, victim))
        run.consumers.start()
    verdict = finish(run, explain_error=lambda d: False)
    assert len(run.consumers.killed) >= 8, run.consumers.killed
    assert verdict.redeliveries > 0, "kills while holding records bring records back"
    assert verdict.accepted + sum(verdict.excused.values()) == len(run.producer.placed)
    print(f"{at_limit} kills of a consumer holding a record at delivery count {DELIVERY_COUNT_LIMIT}")


def test_coordinator_killed_9_twice_during_consumption(run: Run) -> None:
    """Three consumers; the coordinator process (group and share coordinators) killed -9 twice
    while they consume and the producer writes: acknowledgements in flight fail, their records
    come back, nothing is accepted twice and nothing is lost."""
    for _ in range(3):
        run.consumers.start()
    wait_consuming(run, 3)
    kills: list[float] = []
    for pause in (4, 6):
        time.sleep(pause)
        old = run.broker.coordinator_pid()
        assert old is not None
        os.kill(old, signal.SIGKILL)
        kills.append(time.monotonic())
        wait_until(lambda: run.broker.coordinator_pid() not in (None, old), 30, "a new coordinator process")
        wait_until(lambda: run.sampler.answering(0.5), 30, "the share coordinator answering again", interval=0.2)
    time.sleep(4)

    def while_it_died(d: Delivery) -> bool:
        # The answer came within the coordinator's restart and the reload it caused.
        return d.answered_at is not None and any(k <= d.answered_at <= k + 30 for k in kills)

    verdict = finish(run, explain_error=while_it_died)
    assert verdict.accepted + sum(verdict.excused.values()) == len(run.producer.placed)
    assert not [e for e in run.consumers.errors() if "Fatal" in e], run.consumers.errors()


# ---------------------------------------------------------------------- a ZooKeeper cluster
CLUSTER_SETTINGS = {**BROKER_SETTINGS, "offsets.topic.replication.factor": 3, "min.insync.replicas": 2,
                    "replica.lag.time.max.ms": 3000, "share.coordinator.state.topic.replication.factor": 3,
                    "share.coordinator.state.topic.min.isr": 2}


@pytest.fixture
def cluster_run(broker_factory: Callable[..., Broker], zk_connect: str, tmp_path: Path) -> Iterator[Run]:
    brokers = [start_cluster_broker(broker_factory, zk_connect, node_id, workers=1, settings=CLUSTER_SETTINGS)
               for node_id in (1, 2, 3)]
    yield from running(brokers, tmp_path, "cluster", replicas=3)


def elected_coordinator(zk_connect: str) -> int | None:
    from kazoo.client import KazooClient

    client = KazooClient(hosts=zk_connect)
    client.start(timeout=10)
    try:
        if not client.exists("/consumers/coordinator"):
            return None
        return int(json.loads(client.get("/consumers/coordinator")[0])["brokerid"])
    finally:
        client.stop()
        client.close()


@pytest.mark.zookeeper
@pytest.mark.replication
def test_the_coordinators_broker_killed_9_in_a_cluster(cluster_run: Run, zk_connect: str) -> None:
    """Three brokers (ZooKeeper), the topic and the share state topic replicated three times,
    min.insync.replicas 2; three consumers. The broker running the elected coordinator is
    killed -9 whole (its workers lead share partitions too): another broker's coordinator is
    elected and loads the share state, the partitions it led move, their share-partition
    leaders read their state again; the killed broker then comes back."""
    run = cluster_run
    for _ in range(3):
        run.consumers.start()
    wait_consuming(run, 3, timeout=90)
    time.sleep(3)
    node = wait_until(lambda: elected_coordinator(zk_connect), 20, "an elected coordinator")
    victim = run.brokers[node - 1]
    victim.kill()
    killed_at = time.monotonic()
    wait_until(lambda: elected_coordinator(zk_connect) not in (None, node), 30,
               f"a coordinator elected away from broker {node}", interval=0.5)
    wait_until(lambda: run.sampler.answering(1.0), 60, "the new share coordinator answering", interval=0.5)
    time.sleep(5)
    victim.start()

    def around_the_kill(d: Delivery) -> bool:
        return d.answered_at is not None and killed_at <= d.answered_at <= killed_at + 60

    verdict = finish(run, explain_error=around_the_kill)
    assert verdict.accepted + sum(verdict.excused.values()) == len(run.producer.placed)
    print(f"the coordinator's broker {node} killed; coordinator now on {elected_coordinator(zk_connect)}")


def test_coordinator_hung_past_the_persisters_retries_then_killed_9(run: Run) -> None:
    """The coordinator process stopped (SIGSTOP) for longer than a share-partition leader
    retries a state write, then killed -9: acknowledgements meanwhile are answered with an
    error, their share partitions dropped and read again from the new coordinator, their
    records delivered again; nothing accepted twice, nothing lost."""
    from broker.process.share_persister import RETRY_SECONDS

    for _ in range(3):
        run.consumers.start()
    wait_consuming(run, 3)
    time.sleep(3)
    old = run.broker.coordinator_pid()
    assert old is not None
    os.kill(old, signal.SIGSTOP)
    stopped = time.monotonic()
    time.sleep(RETRY_SECONDS + 3)
    os.kill(old, signal.SIGKILL)
    wait_until(lambda: run.broker.coordinator_pid() not in (None, old), 30, "a new coordinator process")
    wait_until(lambda: run.sampler.answering(0.5), 30, "the share coordinator answering again", interval=0.2)
    time.sleep(4)

    def while_it_hung(d: Delivery) -> bool:
        return d.answered_at is not None and stopped <= d.answered_at <= time.monotonic()

    verdict = finish(run, explain_error=while_it_hung)
    assert verdict.accepted + sum(verdict.excused.values()) == len(run.producer.placed)
    failed = run.consumers.errors() + [
        f"{d.member} {d.partition}:{d.offset}" for d in run.consumers.deliveries() if d.outcome == "error"]
    assert failed, "acknowledgements sent while the coordinator hung were answered with errors"
    assert verdict.redeliveries > 0, "the records of the failed acknowledgements came back"
