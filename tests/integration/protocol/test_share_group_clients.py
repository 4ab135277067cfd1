"""Share groups (KIP-932) with real clients: Kafka's Java ``KafkaShareConsumer``
(tests/java/castle/ShareGroupConsumer.java) and confluent-kafka's ``ShareConsumer``
(tests/integration/confluent_share_consumer.py), in explicit acknowledgement mode, and Kafka
4.4's kafka-share-groups.sh and kafka-configs.sh (tests/integration/share_group_tools.py).

Three consumers on four partitions accept every record exactly once between them; a RELEASE
brings a record back with delivery count 2, a REJECT archives it, a record released at every
delivery is archived at the group's share.delivery.count.limit; a consumer killed -9 while
holding records loses none of them; records held past the group's share.record.lock.duration.ms
by a live consumer go to the others; a Java and a librdkafka consumer share one group; the
operator's tool lists, describes, resets (to earliest, on the empty group) and deletes it, and
refuses both while the group has members; a classic group's id is no share group. Each
group is told share.auto.offset.reset=earliest first (a GROUP config, kafka-configs.sh), since
the records are produced before its share partitions start (Kafka's default is latest).

Against Castle the module runs only once ApiVersions advertises ShareGroupHeartbeat (key 76);
until then it is skipped. With ``CASTLE_SHARE_AGAINST_KAFKA=<version>`` (or
``CASTLE_KIP848_AGAINST_KAFKA``; e.g. 4.4.0) the same tests run against Apache Kafka itself
(loadtest/kafka_peer.py, one broker for the module), which is how they were checked:

    CASTLE_SHARE_AGAINST_KAFKA=4.4.0 .venv/bin/python -m pytest tests/integration/protocol/test_share_group_clients.py
"""

from __future__ import annotations

import os
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any, Iterator

import pytest

from broker.config import SETTINGS
from tests.integration import share_consumer_lines as lines
from tests.integration import share_group_tools as tools
from tests.integration.clients import confluent_create_topic
from tests.integration.confluent_share_consumer import ConfluentShareConsumer
from tests.integration.conftest import Broker, stop_all, wait_until
from tests.integration.kio_client import KioClient
from tests.java_clients import java_present, start_java  # noqa: F401  (java_present: autouse, JDK and jars)

AGAINST_KAFKA = os.environ.get("CASTLE_SHARE_AGAINST_KAFKA") or os.environ.get("CASTLE_KIP848_AGAINST_KAFKA", "")

pytestmark = [pytest.mark.integration, pytest.mark.java_clients, pytest.mark.kafka_cli, pytest.mark.timeout(600)]

SHARE_GROUP_HEARTBEAT = 76
WAIT_S = 90.0  # a consumer's start (a JVM), its join, the assignment heartbeats, the records
LOCK_MS = 15_000  # share.record.lock.duration.ms of the lock tests: the lowest Kafka's default bounds allow
IDLE_MS = 6_000  # a consumer that got nothing for this long has nothing more coming
# Kafka's share heartbeat interval is 5 s by default; each assignment step waits for one.
SHARE_SETTINGS = {"group.share.heartbeat.interval.ms": "1000", "group.share.min.heartbeat.interval.ms": "1000",
                  "offsets.topic.num.partitions": "4"}
KAFKA_SETTINGS = {**SHARE_SETTINGS, "share.coordinator.state.topic.num.partitions": "4"}
# Castle refuses a setting it does not have: those of SHARE_SETTINGS it has.
CASTLE_SETTINGS = {k: v for k, v in SHARE_SETTINGS.items() if k in {s.name for s in SETTINGS}}


# ---------------------------------------------------------------------- the broker
def advertises(bootstrap: str, api_key: int) -> bool:
    from kio.schema.api_versions.v3.request import ApiVersionsRequest

    with KioClient(bootstrap) as client:
        answer = client.call(18, 3, ApiVersionsRequest(client_software_name="castle-tests", client_software_version="1"))
    return any(entry.api_key == api_key for entry in answer.api_keys)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker | None]:
    """Castle, one for the module (None when the module runs against Kafka); each test keeps to
    topics and groups of its own."""
    if AGAINST_KAFKA:
        yield None
        return
    castle = Broker(str(tmp_path_factory.mktemp("broker")), 2, CASTLE_SETTINGS)
    try:
        castle.start()
        yield castle
    finally:
        unclean = stop_all([castle])
    if unclean:
        pytest.fail("broker did not stop cleanly on SIGTERM: " + "\n".join(unclean))


@pytest.fixture(scope="module")
def bootstrap(broker: Broker | None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if broker is not None:
        if not advertises(broker.bootstrap, SHARE_GROUP_HEARTBEAT):
            pytest.skip("Castle does not advertise ShareGroupHeartbeat (key 76) in ApiVersions yet")
        yield broker.bootstrap
        return
    from loadtest.kafka_peer import KafkaPeer

    peer = KafkaPeer(str(tmp_path_factory.mktemp("kafka") / "kafka.log"), version=AGAINST_KAFKA, partitions=1,
                     overrides=KAFKA_SETTINGS)
    try:
        peer.wait_ready()
        yield peer.bootstrap
    finally:
        peer.stop()


# ---------------------------------------------------------------------- consumers
class Consumers:
    """Starts share consumers and stops every one still running when the test ends."""

    def __init__(self, bootstrap: str, log_dir: Path) -> None:
        self.bootstrap = bootstrap
        self.log_dir = log_dir
        self.started: list[Any] = []

    def start(self, kind: str, name: str, group: str, topic: str, *options: str) -> Any:
        """``options``: the Java program's words (``commit=poll``, ``hold=true``, ``idle-ms=...``,
        client configs); for confluent, only ``idle-ms=...``."""
        if kind == "java":
            member: Any = start_java("castle.ShareGroupConsumer", [
                f"bootstrap={self.bootstrap}", f"group={group}", f"topics={topic}", f"client.id={name}", *options],
                self.log_dir, name)
        else:
            words = dict(option.split("=", 1) for option in options)
            idle = words.pop("idle-ms", None)
            assert not words, f"the confluent consumer takes idle-ms only, not {words}"
            member = ConfluentShareConsumer(self.bootstrap, group, [topic], name,
                                            idle_s=None if idle is None else int(idle) / 1000)
        self.started.append(member)
        return member

    def stop_all(self) -> None:
        failures = []
        for member in self.started:
            try:
                member.stop()
            except AssertionError as exc:  # stop the others all the same
                failures.append(str(exc))
        assert not failures, "\n".join(failures)


@pytest.fixture
def consumers(bootstrap: str, tmp_path: Path) -> Iterator[Consumers]:
    started = Consumers(bootstrap, tmp_path)
    yield started
    started.stop_all()


KINDS = ["java", "confluent"]


def new_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def new_group(bootstrap: str, prefix: str, **configs: str) -> str:
    """A group name, told share.auto.offset.reset=earliest (and ``configs``) before any member joins."""
    group = new_name(prefix)
    tools.set_group_configs(bootstrap, group, {"share.auto.offset.reset": "earliest", **configs})
    return group


def produce(bootstrap: str, topic: str, values: list[str], partitions: int) -> None:
    """``values`` round-robin over the partitions, key = value."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    failures: list[str] = []
    for i, value in enumerate(values):
        producer.produce(topic, key=value.encode(), value=value.encode(), partition=i % partitions,
                         on_delivery=lambda err, _msg: failures.append(str(err)) if err else None)
    assert producer.flush(30) == 0, "records still unacknowledged"
    assert not failures, failures


def all_partitions(topic: str, partitions: int) -> set[str]:
    return {f"{topic}:{p}" for p in range(partitions)}


def wait_assigned(bootstrap: str, group: str, names: list[str], expected: set[str]) -> dict[str, set[str]]:
    """Until kafka-share-groups.sh describes every one of ``names`` (client ids) as a member with
    some of ``expected``, the members together holding all of it, no partition twice; the assignment.
    A partition held twice is a member that has not heartbeated since the target moved (share groups
    revoke nothing: the old owner keeps its list until its next heartbeat), so that is waited out."""
    def assigned() -> dict[str, set[str]] | None:
        held = tools.members(bootstrap, group)
        if (set(held) == set(names) and all(held.values()) and set().union(*held.values()) == expected
                and sum(len(p) for p in held.values()) == len(expected)):
            return held
        return None

    return wait_until(assigned, WAIT_S, f"{names} to be assigned {sorted(expected)}", interval=0.5)


def wait_accepted(members: list[Any], topic: str, values: set[str], timeout: float = WAIT_S) -> None:
    def taken() -> bool:
        return values <= {d.value for d in lines.accepted(members) if d.topic == topic}

    try:
        wait_until(taken, timeout, f"{len(values)} records to be accepted", interval=0.25)
    except AssertionError:
        got = {d.value for d in lines.accepted(members)}
        raise AssertionError(f"{len(values - got)} records never accepted:\n{lines.reports(members)}") from None


def stop_cleanly(member: Any) -> int:
    member.stop()
    count = lines.done(member)
    assert count is not None, f"{member.name} did not close cleanly:\n{member.report()}"
    assert not lines.errors(member), f"{member.name}: {lines.errors(member)}\n{member.report()}"
    return count


def wait_done(member: Any, timeout: float) -> None:
    wait_until(lambda: lines.done(member) is not None, timeout, f"{member.name} to finish", interval=0.25)


# ---------------------------------------------------------------------- the tests
@pytest.mark.parametrize("kind", KINDS)
def test_three_consumers_on_four_partitions_accept_every_record_once(kind: str, bootstrap: str,
                                                                     consumers: Consumers) -> None:
    topic = new_name(f"split-{kind}")
    confluent_create_topic(bootstrap, topic, 4)
    group = new_group(bootstrap, f"g-{kind}")
    names = [f"{kind}-{i}" for i in range(3)]
    # Java: two send their acknowledgements by commitSync (ShareAcknowledge), one on its next poll (ShareFetch).
    options = {names[2]: ["commit=poll"]} if kind == "java" else {}
    members = [consumers.start(kind, name, group, topic, *options.get(name, [])) for name in names]
    wait_assigned(bootstrap, group, names, all_partitions(topic, 4))

    values = [f"a-{i}" for i in range(2000)]
    produce(bootstrap, topic, values, 4)
    wait_accepted(members, topic, set(values))
    for member in members:
        stop_cleanly(member)
    taken = lines.assert_accepted_once(members, topic, set(values))
    per_member = Counter(d.member for d in taken)
    assert set(per_member) == set(names), f"every consumer accepted some: {dict(per_member)}"
    delivered = lines.all_deliveries(members)
    assert len(delivered) == len(values), "a clean run delivers each record once"
    assert {d.delivery_count for d in delivered} == {1}
    lags = {p: lag for p, (_, lag) in tools.offsets(bootstrap, group).items()}
    assert lags == {p: 0 for p in all_partitions(topic, 4)}, "no lag once all is accepted"


@pytest.mark.parametrize("kind", KINDS)
def test_released_records_come_back_and_rejected_ones_never(kind: str, bootstrap: str, consumers: Consumers) -> None:
    """One consumer: ``release-once-`` records come back once (delivery count 2) and are accepted;
    ``reject-`` ones are delivered once and archived; ``release-always-`` ones are delivered up to
    the group's share.delivery.count.limit (2) and then archived; the others are accepted at once."""
    topic = new_name(f"ack-{kind}")
    confluent_create_topic(bootstrap, topic, 2)
    group = new_group(bootstrap, f"g-{kind}", **{"share.delivery.count.limit": "2"})
    kinds = ["ok", "release-once", "ok", "reject", "ok", "release-always"]
    values = [f"{kinds[i % len(kinds)]}-{i}" for i in range(120)]
    produce(bootstrap, topic, values, 2)
    member = consumers.start(kind, f"{kind}-acks", group, topic, f"idle-ms={IDLE_MS}")
    wait_done(member, WAIT_S + IDLE_MS / 1000)
    stop_cleanly(member)

    delivered = lines.deliveries(member)
    assert all(d.confirmed for d in delivered), [d for d in delivered if not d.confirmed][:5]
    by_value: dict[str, list[tuple[int, str]]] = {}
    for d in delivered:
        by_value.setdefault(d.value, []).append((d.delivery_count, d.ack))
    assert set(by_value) == set(values), f"never delivered: {sorted(set(values) - set(by_value))[:10]}"
    for value, got in by_value.items():
        if value.startswith("ok-"):
            assert got == [(1, "ACCEPT")], (value, got)
        elif value.startswith("release-once-"):
            assert got == [(1, "RELEASE"), (2, "ACCEPT")], (value, got)
        elif value.startswith("reject-"):
            assert got == [(1, "REJECT")], (value, got)
        else:  # archived at the delivery count limit: never a third delivery
            assert got == [(1, "RELEASE"), (2, "RELEASE")], (value, got)
    assert {lag for _, lag in tools.offsets(bootstrap, group).values()} == {0}, \
        "accepted, rejected and archived records all count as delivered"


@pytest.mark.java_clients
def test_a_consumer_killed_while_holding_records_loses_none(bootstrap: str, consumers: Consumers) -> None:
    """A consumer SIGKILLed with records acquired and unacknowledged: the broker hands them to the
    others (Kafka 4.4 releases them as soon as the connection drops; at the latest, their
    acquisition locks expire after share.record.lock.duration.ms), with delivery count 2."""
    topic = new_name("killed")
    confluent_create_topic(bootstrap, topic, 1)  # one partition: every member of the group shares it
    group = new_group(bootstrap, "g-killed", **{"share.record.lock.duration.ms": str(LOCK_MS)})
    values = [f"k-{i}" for i in range(500)]
    produce(bootstrap, topic, values, 1)
    holder = consumers.start("java", "holder", group, topic, "hold=true")
    holder.wait_for_line(r'"event":"held"', WAIT_S)
    held = {d.value for d in lines.deliveries(holder)}
    assert held and all(d.ack == "HELD" for d in lines.deliveries(holder))
    others = [consumers.start("java", f"other-{i}", group, topic) for i in range(2)]
    for other in others:
        other.wait_for_line(r'"event":"subscribed"', WAIT_S)
    holder.kill()

    wait_accepted(others, topic, set(values), timeout=WAIT_S + LOCK_MS / 1000)
    for other in others:
        stop_cleanly(other)
    taken = lines.assert_accepted_once([holder, *others], topic, set(values))
    again = [d for d in taken if d.value in held]
    assert again and all(d.delivery_count >= 2 for d in again), \
        f"the held records come back as redeliveries: {[(d.value, d.delivery_count) for d in again][:10]}"


@pytest.mark.java_clients
def test_records_held_past_the_lock_duration_go_to_the_others(bootstrap: str, consumers: Consumers) -> None:
    """A live consumer (still heartbeating, its connection open) that neither acknowledges nor polls:
    its records stay locked for share.record.lock.duration.ms from their acquisition, then another
    member gets them with delivery count 2, while the holder is still a member of the group."""
    topic = new_name("locked")
    confluent_create_topic(bootstrap, topic, 1)
    group = new_group(bootstrap, "g-locked", **{"share.record.lock.duration.ms": str(LOCK_MS)})
    values = [f"l-{i}" for i in range(300)]
    produce(bootstrap, topic, values, 1)
    started = time.monotonic()  # the holder acquires after this: its locks end LOCK_MS after it at the earliest
    holder = consumers.start("java", "holder", group, topic, "hold=true")
    holder.wait_for_line(r'"event":"held"', WAIT_S)
    held = {d.value for d in lines.deliveries(holder)}
    other = consumers.start("java", "other", group, topic)

    def redelivered() -> bool:
        return any(d.value in held for d in lines.deliveries(other))

    wait_until(redelivered, WAIT_S + LOCK_MS / 1000, "a held record to reach the other consumer", interval=0.1)
    seen = time.monotonic() - started
    assert seen >= LOCK_MS / 1000, f"a held record reached the other consumer {seen:.1f} s after the holder started"
    assert "holder" in tools.members(bootstrap, group), "the holder is still a member: its locks expired, not it"
    wait_accepted([other], topic, set(values))
    holder.kill()
    stop_cleanly(other)
    taken = lines.assert_accepted_once([holder, other], topic, set(values))
    assert all(d.delivery_count == 2 for d in taken if d.value in held)


@pytest.mark.java_clients
def test_java_and_confluent_consumers_share_one_group(bootstrap: str, consumers: Consumers) -> None:
    topic = new_name("mixed")
    confluent_create_topic(bootstrap, topic, 4)
    group = new_group(bootstrap, "g-mixed")
    java = consumers.start("java", "java-member", group, topic)
    confluent = consumers.start("confluent", "confluent-member", group, topic)
    wait_assigned(bootstrap, group, ["java-member", "confluent-member"], all_partitions(topic, 4))
    values = [f"m-{i}" for i in range(400)]
    produce(bootstrap, topic, values, 4)
    wait_accepted([java, confluent], topic, set(values))
    for member in (java, confluent):
        stop_cleanly(member)
    taken = lines.assert_accepted_once([java, confluent], topic, set(values))
    assert {d.member for d in taken} == {"java-member", "confluent-member"}, "both consumers accepted some"


def test_kafka_share_groups_tool_lists_describes_resets_and_deletes(bootstrap: str, consumers: Consumers) -> None:
    topic = new_name("tool")
    confluent_create_topic(bootstrap, topic, 2)
    group = new_group(bootstrap, "g-tool")
    assert tools.group_configs(bootstrap, group).get("share.auto.offset.reset") == "earliest"
    values = [f"t-{i}" for i in range(20)]
    produce(bootstrap, topic, values, 2)

    names = ["tool-1", "tool-2"]
    members = [consumers.start("java", name, group, topic) for name in names]
    assigned = wait_assigned(bootstrap, group, names, all_partitions(topic, 2))
    assert all(len(held) == 1 for held in assigned.values()), assigned
    assert tools.state(bootstrap, group) == ("Stable", 2)
    assert tools.listed(bootstrap).get(group) == "Stable"
    wait_accepted(members, topic, set(values))
    for member in members:
        stop_cleanly(member)
    lines.assert_accepted_once(members, topic, set(values))

    wait_until(lambda: tools.listed(bootstrap).get(group) == "Empty", WAIT_S, f"{group} to be empty", interval=0.5)
    assert tools.state(bootstrap, group) == ("Empty", 0)
    assert {p: lag for p, (_, lag) in tools.offsets(bootstrap, group).items()} == {p: 0 for p in all_partitions(topic, 2)}

    # Back to the start: the same records are delivered afresh.
    reset = tools.share_groups(bootstrap, "--reset-offsets", "--group", group, "--topic", topic, "--to-earliest",
                               "--execute")
    assert reset.returncode == 0, f"{reset.stdout}\n{reset.stderr[-3000:]}"
    # GROUP TOPIC PARTITION NEW-OFFSET
    assert sorted(tuple(w[1:]) for w in tools.rows(reset.stdout, "GROUP")) == [(topic, "0", "0"), (topic, "1", "0")]
    assert tools.offsets(bootstrap, group) == {p: (0, 10) for p in all_partitions(topic, 2)}
    again = consumers.start("java", "tool-again", group, topic)
    wait_accepted([again], topic, set(values))
    stop_cleanly(again)
    assert {d.delivery_count for d in lines.deliveries(again)} == {1}, "a reset starts the records' state afresh"

    wait_until(lambda: tools.listed(bootstrap).get(group) == "Empty", WAIT_S, f"{group} to be empty", interval=0.5)
    deleted = tools.share_groups(bootstrap, "--delete", "--group", group)
    assert deleted.returncode == 0 and f"Deletion of requested share groups ('{group}') was successful." in deleted.stdout, \
        f"{deleted.stdout}\n{deleted.stderr[-3000:]}"
    assert group not in tools.listed(bootstrap)
    gone = tools.share_groups(bootstrap, "--describe", "--group", group)
    assert "GroupIdNotFoundException" in gone.stdout + gone.stderr, f"{gone.stdout}\n{gone.stderr[-3000:]}"


def test_a_busy_group_refuses_a_reset_and_a_delete(bootstrap: str, consumers: Consumers) -> None:
    """Offsets are reset, and groups deleted, only when empty (Kafka: GROUP_NOT_EMPTY)."""
    topic = new_name("busy")
    confluent_create_topic(bootstrap, topic, 1)
    group = new_group(bootstrap, "g-busy")
    consumers.start("java", "busy-1", group, topic)
    wait_assigned(bootstrap, group, ["busy-1"], all_partitions(topic, 1))
    reset = tools.share_groups(bootstrap, "--reset-offsets", "--group", group, "--all-topics", "--to-earliest",
                               "--execute")
    assert reset.returncode != 0 and f"Share group '{group}' is not empty." in reset.stdout + reset.stderr, \
        f"exit {reset.returncode}:\n{reset.stdout}\n{reset.stderr[-3000:]}"
    deleted = tools.share_groups(bootstrap, "--delete", "--group", group)
    assert "GroupNotEmptyException" in deleted.stdout, f"{deleted.stdout}\n{deleted.stderr[-3000:]}"
    assert group in tools.listed(bootstrap)



@pytest.mark.java_clients
def test_a_share_consumer_cannot_join_a_classic_group(bootstrap: str, consumers: Consumers) -> None:
    """A group id is one kind of group: a share consumer on a live classic group's id is refused
    (Kafka: GROUP_ID_NOT_FOUND, "Group <id> is not a share group."), and so is the share tool."""
    from confluent_kafka import Consumer

    topic = new_name("kinds")
    confluent_create_topic(bootstrap, topic, 1)
    group = new_name("g-classic")
    classic = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest"})
    try:
        classic.subscribe([topic])
        wait_until(lambda: classic.poll(0.2) is None and classic.assignment(), WAIT_S, "the classic member's assignment")
        member = consumers.start("java", "share-on-classic", group, topic, f"idle-ms={IDLE_MS}")
        wait_done(member, WAIT_S + IDLE_MS / 1000)
        refused = [e for e in lines.errors(member) if "GroupIdNotFoundException" in e]
        assert refused and f"Group {group} is not a share group." in refused[0], member.report()
        assert not lines.deliveries(member)
        described = tools.share_groups(bootstrap, "--describe", "--group", group)
        assert "is not a share group" in described.stdout + described.stderr, described.stdout
    finally:
        classic.close()
