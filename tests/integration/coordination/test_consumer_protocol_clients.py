"""The consumer group protocol (KIP-848) with three real clients: Kafka's Java consumer
(tests/java/castle/GroupConsumer.java), franz-go (tests/go/groupconsumer) and confluent-kafka
(tests/integration/confluent_group_consumer.py), each with ``group.protocol=consumer``: the
group coordinator assigns the partitions (ConsumerGroupHeartbeat), the members commit with
their member epoch (OffsetCommit/OffsetFetch v9 and up).

Two members split a topic and read each record once; a member that leaves hands its partitions
over at its committed offsets; the range assignor co-partitions; a Java member's broker-side
regex subscription takes a topic created after it subscribed; a Java and a librdkafka member
share one group; a static Java member that comes back gets its partitions back. Each time
ConsumerGroupDescribe (through librdkafka's DescribeConsumerGroups) must show what the members
printed, and OffsetFetch (the admin's) the committed offsets at the end offsets.

The group coordinator does not serve the protocol yet, so the module is skipped; with
``CASTLE_KIP848_AGAINST_KAFKA=<version>`` (e.g. 4.4.0) the same tests run against Apache Kafka
itself (loadtest/kafka_peer.py, one broker for the module), which is how they were checked.
"""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Iterator, Protocol

import pytest

from tests.go_clients import go_present, start_go  # noqa: F401  (go_present: the fixture needs() asks for)
from tests.integration import group_consumer_lines as lines
from tests.integration.clients import confluent_create_topic
from tests.integration.confluent_group_consumer import ConfluentGroupConsumer
from tests.integration.conftest import Broker, wait_until
from tests.java_clients import start_java

AGAINST_KAFKA = os.environ.get("CASTLE_KIP848_AGAINST_KAFKA", "")

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

PARTITIONS = 4
RECORDS = 200  # 50 a partition
WAIT_S = 90.0  # a member's start (a JVM), then the heartbeats that carry the assignment
# Once Castle has the consumer protocol's heartbeat interval, the 1 s of KAFKA_SETTINGS belongs here too.
CASTLE_SETTINGS = {"group.initial.rebalance.delay.ms": 0, "offsets.topic.num.partitions": 4,
                   "group.consumer.heartbeat.interval.ms": 1000}
# Kafka's default heartbeat interval of the consumer protocol is 5 s; each step of a handover
# waits for one, so the tests ask for 1 s (and lower the floor that guards it).
KAFKA_SETTINGS = {"group.consumer.heartbeat.interval.ms": "1000", "group.consumer.min.heartbeat.interval.ms": "1000",
                  "group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "4"}


class Member(Protocol):
    """A Java or Go member (tests/client_process.py) or a confluent-kafka one, alike to a test."""

    name: str

    def stdout(self) -> str: ...

    def report(self, tail: int = 6000) -> str: ...

    def stop(self, timeout: float = ...) -> object: ...


# ---------------------------------------------------------------------- the broker
@pytest.fixture(scope="module")
def kafka_peer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Apache Kafka's bootstrap when the module runs against it, else ''."""
    if not AGAINST_KAFKA:
        yield ""
        return
    from loadtest.kafka_peer import KafkaPeer

    peer = KafkaPeer(str(tmp_path_factory.mktemp("kafka") / "kafka.log"), version=AGAINST_KAFKA, partitions=1,
                     overrides=KAFKA_SETTINGS)
    try:
        peer.wait_ready()
        yield peer.bootstrap
    finally:
        peer.stop()


@pytest.fixture
def bootstrap(request: pytest.FixtureRequest, kafka_peer: str) -> str:
    if kafka_peer:
        return kafka_peer
    make: Callable[..., Broker] = request.getfixturevalue("broker_factory")
    return make(workers=2, overrides=CASTLE_SETTINGS).bootstrap


# ---------------------------------------------------------------------- the members
class Members:
    """Starts members of one kind and stops every one still running when the test ends."""

    def __init__(self, bootstrap: str, log_dir: Path) -> None:
        self.bootstrap = bootstrap
        self.log_dir = log_dir
        self.started: list[Member] = []

    def start(self, kind: str, name: str, group: str, subscription: str, configs: dict[str, str] | None = None) -> Member:
        """``subscription`` is ``topics=a,b`` or ``pattern=<regex>`` (Java and Go only); ``configs``
        Kafka's consumer configs (``group.remote.assignor``, ``group.instance.id``)."""
        configs = {"group.protocol": "consumer", "client.id": name, **(configs or {})}
        words = [f"bootstrap={self.bootstrap}", f"group={group}", subscription, *(f"{k}={v}" for k, v in configs.items())]
        member: Member
        if kind == "java":
            member = start_java("castle.GroupConsumer", words, self.log_dir, name)
        elif kind == "go":
            member = start_go("groupconsumer", words, self.log_dir, name)
        else:
            what, _, value = subscription.partition("=")
            assert what == "topics", "the confluent member takes topics only"
            member = ConfluentGroupConsumer(self.bootstrap, group, value.split(","), name,
                                            protocol=configs.pop("group.protocol"), configs=configs)
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
def members(bootstrap: str, tmp_path: Path) -> Iterator[Members]:
    started = Members(bootstrap, tmp_path)
    yield started
    started.stop_all()


def needs(request: pytest.FixtureRequest, kind: str) -> None:
    """Java: a failure without a JDK and Maven (CI has them); Go: a skip without ``go``."""
    if kind == "java":
        from tests.java_clients import ensure_classes, missing_tools

        missing = missing_tools()
        if missing:
            pytest.fail(f"Kafka's Java clients need {', '.join(missing)} on PATH")
        ensure_classes()
    elif kind == "go":
        request.getfixturevalue("go_present")

KINDS = [pytest.param("java", marks=pytest.mark.java_clients), pytest.param("go", marks=pytest.mark.go_clients),
         "confluent"]


# ---------------------------------------------------------------------- Kafka, as an admin sees it
def new_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def produce(bootstrap: str, topic: str, count: int, tag: str, partitions: int = PARTITIONS) -> set[str]:
    """``count`` records spread evenly over the partitions; key and value ``<tag>-<i>``, no spaces."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    failures: list[str] = []
    values = set()
    for i in range(count):
        value = f"{tag}-{i}"
        values.add(value)
        producer.produce(topic, key=value.encode(), value=value.encode(), partition=i % partitions,
                         on_delivery=lambda err, _msg: failures.append(str(err)) if err else None)
    assert producer.flush(30) == 0, "records still unacknowledged"
    assert not failures, failures
    return values


def end_offsets(bootstrap: str, topic: str, partitions: int = PARTITIONS) -> dict[str, int]:
    from confluent_kafka import Consumer, TopicPartition

    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": new_name("ends")})
    try:
        return {f"{topic}:{p}": reader.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
                for p in range(partitions)}
    finally:
        reader.close()


def committed(bootstrap: str, group: str, topic: str, partitions: int = PARTITIONS) -> dict[str, int]:
    """The group's committed offsets as an admin reads them (OffsetFetch)."""
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    request = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in range(partitions)])
    answer = admin.list_consumer_group_offsets([request], request_timeout=30)[group].result(timeout=30)
    return {f"{tp.topic}:{tp.partition}": tp.offset for tp in answer.topic_partitions}


def describe(bootstrap: str, group: str) -> Any:
    """The group as DescribeConsumerGroups reports it (librdkafka asks ConsumerGroupDescribe first)."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    return admin.describe_consumer_groups([group], request_timeout=30)[group].result(timeout=30)


# ---------------------------------------------------------------------- what the members printed
def all_partitions(topic: str, partitions: int = PARTITIONS) -> set[str]:
    return {f"{topic}:{p}" for p in range(partitions)}


def wait_split(group_members: list[Member], expected: set[str]) -> list[set[str]]:
    """Until every member holds a nonempty share of ``expected`` (``topic:partition`` words), the
    shares disjoint and together all of it; the shares."""
    def split() -> list[set[str]] | None:
        closed = [m.name for m in group_members if lines.done(m.stdout()) is not None]
        if closed:  # a client that gave up (e.g. Java's UnsupportedVersionException) never joins
            raise AssertionError(f"{closed} closed while joining")
        shares = [lines.owned(m.stdout()) for m in group_members]
        union = set().union(*shares)
        if all(shares) and sum(len(s) for s in shares) == len(union) and union == expected:
            return shares
        return None

    try:
        return wait_until(split, WAIT_S, f"{len(group_members)} members to split {sorted(expected)}", interval=0.2)
    except AssertionError as exc:
        raise AssertionError(f"no split ({exc}):\n" + "\n".join(f"== {m.name}\n{m.report()}" for m in group_members)) from None


def wait_read(group_members: list[Member], values: set[str]) -> None:
    def read() -> bool:
        return values <= {r.value for m in group_members for r in lines.records(m.stdout())}

    try:
        wait_until(read, WAIT_S, f"{len(values)} records to be read", interval=0.2)
    except AssertionError:
        got = {r.value for m in group_members for r in lines.records(m.stdout())}
        raise AssertionError(f"{len(values - got)} records never read:\n"
                             + "\n".join(f"== {m.name}\n{m.report()}" for m in group_members)) from None


def assert_read_once(group_members: list[Member], topic: str, values: set[str]) -> None:
    """Every record of ``topic`` read by exactly one member, once, and nothing else of it read."""
    seen: dict[tuple[int, int], str] = {}
    for member in group_members:
        for record in lines.records(member.stdout()):
            if record.topic != topic:
                continue
            place = (record.partition, record.offset)
            assert place not in seen, f"{topic}:{place[0]} offset {place[1]} read by {seen[place]} and by {member.name}"
            seen[place] = member.name
            assert record.key == record.value
    read = {r.value for m in group_members for r in lines.records(m.stdout()) if r.topic == topic}
    assert read == values, f"missing {sorted(values - read)[:10]}, unexpected {sorted(read - values)[:10]}"


def assert_described(bootstrap: str, group: str, group_members: list[Member], assignor: str = "uniform",
                     instances: dict[str, str] | None = None) -> None:
    """The broker runs the group as a consumer-protocol group with ``assignor``, its members (by
    client id) holding what they printed (and with ``instances``, these static instance ids); and
    franz-go says it chose the protocol (it falls back to the classic one, otherwise silently,
    when the broker does not serve it)."""
    from confluent_kafka import ConsumerGroupType

    for member in group_members:
        if "PROTOCOL" in member.stdout():
            assert "PROTOCOL consumer\n" in member.stdout(), member.report()
    printed = {m.name: lines.owned(m.stdout()) for m in group_members}

    def as_printed() -> Any:
        description = describe(bootstrap, group)
        held = {m.client_id: {f"{tp.topic}:{tp.partition}" for tp in m.assignment.topic_partitions}
                for m in description.members}
        return description if held == printed else None

    description = wait_until(as_printed, 30, f"the description of {group} to show the members' assignments",
                             interval=0.5)
    assert description.type == ConsumerGroupType.CONSUMER
    assert description.partition_assignor == assignor
    if instances is not None:
        assert {m.client_id: m.group_instance_id for m in description.members} == instances


def stop_cleanly(member: Member) -> int:
    member.stop()
    count = lines.done(member.stdout())
    assert count is not None, f"{member.name} did not close cleanly:\n{member.report()}"
    return count


# ---------------------------------------------------------------------- the tests
@pytest.mark.parametrize("kind", KINDS)
def test_two_members_split_a_topic_and_read_each_record_once(request: pytest.FixtureRequest, kind: str,
                                                             bootstrap: str, members: Members) -> None:
    needs(request, kind)
    topic, group = new_name(f"split-{kind}"), new_name(f"g-{kind}")
    confluent_create_topic(bootstrap, topic, PARTITIONS)
    first = members.start(kind, f"{kind}-1", group, f"topics={topic}")
    second = members.start(kind, f"{kind}-2", group, f"topics={topic}")
    shares = wait_split([first, second], all_partitions(topic))
    assert_described(bootstrap, group, [first, second])

    values = produce(bootstrap, topic, RECORDS, "split")
    wait_read([first, second], values)
    for member, share in zip((first, second), shares):
        assert {f"{r.topic}:{r.partition}" for r in lines.records(member.stdout())} <= share, \
            f"{member.name} read outside its share {sorted(share)}"
    assert sum(stop_cleanly(m) for m in (first, second)) == RECORDS
    assert_read_once([first, second], topic, values)
    assert committed(bootstrap, group, topic) == end_offsets(bootstrap, topic)


@pytest.mark.parametrize("kind", KINDS)
def test_a_member_that_leaves_hands_its_partitions_over_at_its_commits(request: pytest.FixtureRequest, kind: str,
                                                                       bootstrap: str, members: Members) -> None:
    needs(request, kind)
    topic, group = new_name(f"leave-{kind}"), new_name(f"g-{kind}")
    confluent_create_topic(bootstrap, topic, PARTITIONS)
    stays = members.start(kind, f"{kind}-stays", group, f"topics={topic}")
    leaves = members.start(kind, f"{kind}-leaves", group, f"topics={topic}")
    _, left_share = wait_split([stays, leaves], all_partitions(topic))
    assert_described(bootstrap, group, [stays, leaves])
    before = produce(bootstrap, topic, RECORDS // 2, "before")
    wait_read([stays, leaves], before)

    stop_cleanly(leaves)
    wait_until(lambda: lines.owned(stays.stdout()) == all_partitions(topic), WAIT_S,
               f"{stays.name} to take over {sorted(left_share)}")
    after = produce(bootstrap, topic, RECORDS // 2, "after")
    wait_read([stays], after)
    took_over = {f"{r.topic}:{r.partition}" for r in lines.records(stays.stdout()) if r.value.startswith("after-")}
    assert left_share <= took_over, "the partitions handed over are read by the member that stayed"

    wait_until(lambda: committed(bootstrap, group, topic) == end_offsets(bootstrap, topic), 30,
               "the committed offsets to reach the end offsets")
    stop_cleanly(stays)
    assert_read_once([stays, leaves], topic, before | after)
    assert committed(bootstrap, group, topic) == end_offsets(bootstrap, topic)


@pytest.mark.java_clients
def test_java_pattern_subscription_takes_a_topic_created_later(request: pytest.FixtureRequest, bootstrap: str,
                                                               members: Members) -> None:
    needs(request, "java")
    prefix = new_name("pat")
    old, new = f"{prefix}-old", f"{prefix}-new"
    confluent_create_topic(bootstrap, old, 2)
    confluent_create_topic(bootstrap, f"other-{prefix}", 1)  # does not match: never assigned
    group = new_name("g-pattern")
    member = members.start("java", "java-pattern", group, f"pattern={prefix}-.*")
    wait_until(lambda: lines.owned(member.stdout()) == all_partitions(old, 2), WAIT_S,
               f"the member to be assigned {old}")
    assert_described(bootstrap, group, [member])

    confluent_create_topic(bootstrap, new, 2)
    wait_until(lambda: lines.owned(member.stdout()) == all_partitions(old, 2) | all_partitions(new, 2), WAIT_S,
               f"the member to be assigned {new}, created after it subscribed")
    values = produce(bootstrap, new, 20, "new", partitions=2)
    wait_read([member], values)
    stop_cleanly(member)
    assert_read_once([member], new, values)
    assert not any(p.startswith("other-") for p in lines.ever_assigned(member.stdout()))


@pytest.mark.java_clients
def test_java_and_confluent_members_share_one_group(request: pytest.FixtureRequest, bootstrap: str,
                                                    members: Members) -> None:
    needs(request, "java")
    topic, group = new_name("mixed"), new_name("g-mixed")
    confluent_create_topic(bootstrap, topic, PARTITIONS)
    java = members.start("java", "java-member", group, f"topics={topic}")
    confluent = members.start("confluent", "confluent-member", group, f"topics={topic}")
    wait_split([java, confluent], all_partitions(topic))
    assert_described(bootstrap, group, [java, confluent])

    values = produce(bootstrap, topic, RECORDS, "mixed")
    wait_read([java, confluent], values)
    assert all(lines.records(m.stdout()) for m in (java, confluent)), "both members read"
    assert sum(stop_cleanly(m) for m in (java, confluent)) == RECORDS
    assert_read_once([java, confluent], topic, values)
    assert committed(bootstrap, group, topic) == end_offsets(bootstrap, topic)


@pytest.mark.parametrize("kind", KINDS)
def test_the_range_assignor_gives_each_member_the_same_partitions_of_every_topic(
        request: pytest.FixtureRequest, kind: str, bootstrap: str, members: Members) -> None:
    needs(request, kind)
    first_topic, second_topic, group = new_name(f"range-{kind}"), new_name(f"range-{kind}"), new_name(f"g-{kind}")
    for topic in (first_topic, second_topic):
        confluent_create_topic(bootstrap, topic, 2)
    subscription = f"topics={first_topic},{second_topic}"
    first = members.start(kind, f"{kind}-1", group, subscription, {"group.remote.assignor": "range"})
    second = members.start(kind, f"{kind}-2", group, subscription, {"group.remote.assignor": "range"})
    shares = wait_split([first, second], all_partitions(first_topic, 2) | all_partitions(second_topic, 2))
    assert_described(bootstrap, group, [first, second], assignor="range")
    for share in shares:  # range co-partitions: partition i of every topic to one member
        assert {int(word.rsplit(":", 1)[1]) for word in share} in ({0}, {1}), shares

    values = {topic: produce(bootstrap, topic, 20, topic, partitions=2) for topic in (first_topic, second_topic)}
    wait_read([first, second], values[first_topic] | values[second_topic])
    for member in (first, second):
        stop_cleanly(member)
    for topic in (first_topic, second_topic):
        assert_read_once([first, second], topic, values[topic])


STATIC_HOLD_S = 6.0  # several heartbeats of the member that stays: time enough to be handed what it must not get


@pytest.mark.java_clients
def test_a_static_member_that_comes_back_gets_its_partitions_back(request: pytest.FixtureRequest, bootstrap: str,
                                                                  members: Members) -> None:
    """A static member (group.instance.id) that closes leaves with epoch -2: the coordinator keeps
    its partitions for it (until the session timeout) instead of handing them to the others, and
    a member started with the same instance id takes them back where the first one committed."""
    needs(request, "java")
    topic, group = new_name("static"), new_name("g-static")
    confluent_create_topic(bootstrap, topic, PARTITIONS)
    stays = members.start("java", "java-static-1", group, f"topics={topic}", {"group.instance.id": "static-1"})
    bounces = members.start("java", "java-static-2", group, f"topics={topic}", {"group.instance.id": "static-2"})
    stays_share, bounced_share = wait_split([stays, bounces], all_partitions(topic))
    assert_described(bootstrap, group, [stays, bounces],
                     instances={"java-static-1": "static-1", "java-static-2": "static-2"})
    before = produce(bootstrap, topic, RECORDS // 2, "before")
    wait_read([stays, bounces], before)

    stop_cleanly(bounces)
    time.sleep(STATIC_HOLD_S)
    assert lines.owned(stays.stdout()) == stays_share, "a static member's partitions wait for it"
    back = members.start("java", "java-static-2b", group, f"topics={topic}", {"group.instance.id": "static-2"})
    wait_until(lambda: lines.owned(back.stdout()) == bounced_share, WAIT_S,
               f"the member back with instance id static-2 to hold {sorted(bounced_share)}")
    assert_described(bootstrap, group, [stays, back],
                     instances={"java-static-1": "static-1", "java-static-2b": "static-2"})
    after = produce(bootstrap, topic, RECORDS // 2, "after")
    wait_read([stays, back], after)
    for member in (stays, back):
        stop_cleanly(member)
    assert_read_once([stays, bounces, back], topic, before | after)
    assert committed(bootstrap, group, topic) == end_offsets(bootstrap, topic)
