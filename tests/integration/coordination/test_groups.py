"""Consumer groups of real clients against a real broker (local coordination backend).

Each member is its own process (tests/integration/group_member.py) so it can be killed
with SIGKILL. Brokers here allow short sessions (group.min.session.timeout.ms=1000) and
start rebalances at once (group.initial.rebalance.delay.ms=0); members use
session.timeout.ms=6000 and heartbeat.interval.ms=500.
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
import time
from typing import Any

import pytest

from loadtest.children import ChildProcess
from tests.integration.conftest import shared_broker, wait_until

ROOT_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

GROUP_BROKER = {"group.initial.rebalance.delay.ms": 0, "group.min.session.timeout.ms": 1000,
                "offsets.topic.num.partitions": 4}
CLIENTS = ["confluent", "kafka-python", "aiokafka"]
MEMBER_LOGS = tempfile.mkdtemp(prefix="castle-members-")  # members' stderr files
atexit.register(shutil.rmtree, MEMBER_LOGS, True)


class MemberProcess(ChildProcess):
    """One group member process (tests/integration/group_member.py); its JSON lines are
    collected by ChildProcess's reader thread, its stderr goes to a file."""

    def __init__(self, client: str, bootstrap: str, group: str, topic: str, seconds: float = 90) -> None:
        super().__init__([sys.executable, "-m", "tests.integration.group_member", client, bootstrap, group, topic, str(seconds)],
                         f"member-{client}", tempfile.mkdtemp(prefix="member-", dir=MEMBER_LOGS))

    def assignment(self) -> list[int] | None:
        found = [e["partitions"] for e in self.snapshot() if e["event"] == "assigned"]
        return found[-1] if found else None

    def records(self) -> list[tuple[int, int, str]]:
        return [(e["partition"], e["offset"], e["value"]) for e in self.snapshot() if e["event"] == "record"]

    def committed(self) -> dict[int, int]:
        out: dict[int, int] = {}
        for event in self.snapshot():
            if event["event"] == "committed":
                out.update({int(p): o for p, o in event["offsets"].items()})
        return out

    def stderr(self) -> str:
        return self.stderr_tail(40)


@pytest.fixture(scope="module")
def broker(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """One broker per distinct setting for the tests that each keep to topics and groups of
    their own; the test that restarts its broker starts one of its own."""
    yield from shared_broker(request, tmp_path_factory)


@pytest.fixture
def members(request: pytest.FixtureRequest) -> Any:
    started: list[MemberProcess] = []
    request.node._castle_members = started  # a failing test's report shows their stderr (conftest)

    def start(*args: Any, **kwargs: Any) -> MemberProcess:
        member = MemberProcess(*args, **kwargs)
        started.append(member)
        return member

    yield start
    for member in started:
        member.stop(timeout=15)


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        future.result(15)


def produce(bootstrap: str, topic: str, partitions: int, count: int, tag: str) -> set[str]:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    values = set()
    for i in range(count):
        value = f"{tag}-{i}"
        producer.produce(topic, value=value.encode(), partition=i % partitions)
        values.add(value)
    assert producer.flush(30) == 0
    return values


def consumed_values(group: list[MemberProcess]) -> list[str]:
    return [value for member in group for _p, _o, value in member.records()]


def wait_for_split(group: list[MemberProcess], partitions: int, timeout: float = 40) -> None:
    def split() -> bool:
        assignments = [m.assignment() for m in group]
        if any(a is None for a in assignments):
            return False
        flat = sorted(p for a in assignments for p in a or ())
        return flat == list(range(partitions)) and all(len(a or ()) == partitions // len(group) for a in assignments)

    wait_until(split, timeout, f"{len(group)} members to split {partitions} partitions")


@pytest.mark.integration
@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize("broker", [GROUP_BROKER], indirect=True)
def test_three_members_share_six_partitions_and_read_each_record_once(broker: Any, members: Any, client: str) -> None:
    topic = f"six-{client}"
    create_topic(broker.bootstrap, topic, 6)
    group = [members(client, broker.bootstrap, f"g-{client}", topic) for _ in range(3)]
    wait_for_split(group, 6)
    assert sorted(tuple(m.assignment() or ()) for m in group) == [(0, 1), (2, 3), (4, 5)]  # the range assignor
    sent = produce(broker.bootstrap, topic, 6, 600, client)
    wait_until(lambda: len(consumed_values(group)) >= 600, 40, "every record consumed")
    time.sleep(0.5)  # a duplicate, if any, would arrive right behind
    got = consumed_values(group)
    assert sorted(got) == sorted(sent), "each record exactly once"
    for member in group:
        owned = set(member.assignment() or ())
        assert {p for p, _o, _v in member.records()} <= owned


@pytest.mark.integration
@pytest.mark.parametrize("broker", [GROUP_BROKER], indirect=True)
def test_killed_member_partitions_move_to_the_others(broker: Any, members: Any) -> None:
    create_topic(broker.bootstrap, "moving", 6)
    group = [members("confluent", broker.bootstrap, "g-kill", "moving") for _ in range(3)]
    wait_for_split(group, 6)
    first = produce(broker.bootstrap, "moving", 6, 300, "before")
    wait_until(lambda: len(consumed_values(group)) >= 300, 30, "the first records consumed")
    victim, survivors = group[0], group[1:]
    victim_partitions = set(victim.assignment() or ())
    victim.kill()
    killed_at = time.monotonic()
    second = produce(broker.bootstrap, "moving", 6, 300, "after")
    # Session timeout (6 s) + a rebalance: the survivors take the victim's partitions.
    wait_for_split(survivors, 6, timeout=30)
    moved_after = time.monotonic() - killed_at
    wait_until(lambda: set(consumed_values(group)) >= first | second, 30, "every record consumed after the move")
    got = consumed_values(group)
    assert set(got) == first | second, "nothing skipped"
    # Duplicates only where the victim had not committed: offsets at or after its last commit.
    committed = victim.committed()
    seen: dict[tuple[int, int], int] = {}
    for member in group:
        for partition, offset, _value in member.records():
            seen[(partition, offset)] = seen.get((partition, offset), 0) + 1
    for (partition, offset), count in seen.items():
        if count > 1:
            assert partition in victim_partitions and offset >= committed.get(partition, 0), (partition, offset)
    print(f"partitions moved {moved_after:.1f} s after the kill")


@pytest.mark.integration
def test_committed_offsets_survive_a_broker_restart(broker_factory: Any, members: Any) -> None:
    broker = broker_factory(overrides=GROUP_BROKER)
    create_topic(broker.bootstrap, "durable", 3)
    first = produce(broker.bootstrap, "durable", 3, 150, "old")
    member = members("confluent", broker.bootstrap, "g-durable", "durable")
    wait_until(lambda: set(consumed_values([member])) >= first, 40, "the first records consumed")
    wait_until(lambda: sum(member.committed().values()) == 150, 10, "every offset committed")
    member.stop()
    broker.restart()
    second = produce(broker.bootstrap, "durable", 3, 60, "new")
    resumed = members("kafka-python", broker.bootstrap, "g-durable", "durable")
    wait_until(lambda: set(consumed_values([resumed])) >= second, 40, "the new records consumed")
    time.sleep(0.5)
    assert sorted(consumed_values([resumed])) == sorted(second), "resumed exactly at the committed offsets"
    assert {(p, o) for p, o, _ in resumed.records()} == {(p, 50 + i) for p in range(3) for i in range(20)}



# Kafka's defaults for the join phase (group.initial.rebalance.delay.ms=3000): the members'
# session (6 s) is longer than anything that must happen here.
DEFAULT_DELAY_BROKER = {"offsets.topic.num.partitions": 4, "group.initial.rebalance.delay.ms": 3000}


def describe_state(bootstrap: str, group: str) -> str:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    return str(admin.describe_consumer_groups([group])[group].result(15).state.name)


@pytest.mark.integration
@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize("broker", [DEFAULT_DELAY_BROKER], indirect=True)
def test_a_group_grows_shrinks_and_empties_without_waiting_for_sessions(broker: Any, members: Any, client: str) -> None:
    """Three members form a group, a fourth joins, one closes, the rest close: each change
    converges once the members have rejoined, and the emptied group is Empty, and
    deletable, as soon as the last one has closed."""
    from confluent_kafka.admin import AdminClient

    topic, group_id = f"grow-{client}", f"g-grow-{client}"
    create_topic(broker.bootstrap, topic, 12)
    started = time.monotonic()
    group = [members(client, broker.bootstrap, group_id, topic) for _ in range(3)]
    wait_for_split(group, 12)
    formed = time.monotonic() - started

    started = time.monotonic()
    group.append(members(client, broker.bootstrap, group_id, topic))
    wait_for_split(group, 12)
    grown = time.monotonic() - started

    leaving, group = group[0], group[1:]
    held_by_leaving = set(leaving.assignment() or ())
    started = time.monotonic()
    assert leaving.stop() == 0 and leaving.snapshot("closed"), "closed cleanly (LeaveGroup sent)"
    wait_for_split(group, 12)
    handed_over = time.monotonic() - started
    assert held_by_leaving <= {p for m in group for p in m.assignment() or ()}

    for member in group:
        assert member.stop() == 0 and member.snapshot("closed")
    closed_at = time.monotonic()
    wait_until(lambda: describe_state(broker.bootstrap, group_id) == "EMPTY", 15, "the group described as Empty")
    emptied = time.monotonic() - closed_at
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.delete_consumer_groups([group_id])[group_id].result(15)  # raises unless deleted
    assert describe_state(broker.bootstrap, group_id) == "DEAD", "gone"
    print(f"{client}: three formed in {formed:.2f} s (member processes starting included), a fourth joined in "
          f"{grown:.2f} s, a close handed over in {handed_over:.2f} s, Empty {emptied:.2f} s after the last close")
