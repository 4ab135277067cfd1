"""Brokers sharing one real ZooKeeper (a throwaway server per module, a chroot per test).

Topics spread over the live brokers, Metadata from any broker names every broker and each
partition's leader, a broker answers NOT_LEADER_OR_FOLLOWER for partitions it does not
hold, a second broker with the same node.id is refused, and a group survives the loss of
the coordinator process (kill -9, found by its process title).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid
from typing import Any, Callable

import pytest
from kazoo.client import KazooClient
from kio.schema.errors import ErrorCode

from tests.integration.conftest import Broker, round_trip, start_cluster_broker, wait_until
from tests.integration.coordination.test_group_protocol import request
from tests.integration.coordination.test_groups import MemberProcess, consumed_values, create_topic, produce, wait_for_split
from tests.integration.kio_client import KioClient
from tests.integration.protocol.test_protocol_raw import _batch

pytestmark = [pytest.mark.integration, pytest.mark.zookeeper]

SESSION_MS = 4000


def cluster_settings(zk_connect: str, node_id: int) -> dict[str, Any]:
    return {"zookeeper.connect": zk_connect, "node.id": node_id, "zookeeper.session.timeout.ms": SESSION_MS,
            "group.initial.rebalance.delay.ms": 0, "group.min.session.timeout.ms": 1000,
            "offsets.topic.num.partitions": 4}


def zk(zk_connect: str) -> KazooClient:
    client = KazooClient(hosts=zk_connect)
    client.start(timeout=10)
    return client


def metadata(bootstrap: str, topic: str) -> Any:
    with KioClient(bootstrap) as client:
        return client.call(3, 12, request(3, 12, topics=[{"name": topic, "topic_id": uuid.UUID(int=0)}], allow_auto_topic_creation=False,
                                          include_topic_authorized_operations=False))


def leaders(answer: Any) -> dict[int, tuple[int, int]]:
    """partition -> (the broker that leads it, error code)."""
    (topic,) = answer.topics
    return {p.partition_index: (p.leader_id, p.error_code) for p in topic.partitions}


def node_ids(broker_ids: Any) -> set[int]:
    """Each broker is one node, whatever its worker count (DESIGN.md, non-negotiable 9)."""
    return set(broker_ids)


@pytest.fixture
def cluster(broker_factory: Callable[..., Broker], zk_connect: str) -> Callable[..., Broker]:
    def start(node_id: int, **extra: Any) -> Broker:
        return start_cluster_broker(broker_factory, zk_connect, node_id, workers=2,
                                    settings={**cluster_settings(zk_connect, node_id), **extra})

    return start


def test_topics_spread_over_brokers_and_metadata_names_every_leader(cluster: Any, zk_connect: str) -> None:
    one, two = cluster(1), cluster(2)
    create_topic(one.bootstrap, "spread", 4)
    # Broker two learns of the topic through its ZooKeeper watches, a moment later, as a
    # Kafka broker's metadata cache does (LEADER_NOT_AVAILABLE meanwhile, retriable).
    def settled(bootstrap: str) -> Any:
        found = metadata(bootstrap, "spread")
        known = {b.node_id for b in found.brokers} == node_ids({1, 2})
        partitions = found.topics[0].partitions
        return found if known and len(partitions) == 4 and all(p.error_code == 0 for p in partitions) else None

    answer = wait_until(lambda: settled(two.bootstrap), 10, "both brokers listed, every partition led")
    assert {(b.node_id, b.port) for b in answer.brokers} == {(1, one.port), (2, two.port)}
    assert {b.node_id for b in metadata(one.bootstrap, "spread").brokers} == node_ids({1, 2})
    for b in answer.brokers:
        assert round_trip(b.host, b.port), f"node {b.node_id} at {b.host}:{b.port} does not answer"
    for p in answer.topics[0].partitions:  # the holder leads, and is its only replica
        assert list(p.replica_nodes) == [p.leader_id] and list(p.isr_nodes) == [p.leader_id]
    placed = leaders(answer)
    assert sorted(placed) == [0, 1, 2, 3] and {error for _leader, error in placed.values()} == {0}
    assert sorted(leader for leader, _ in placed.values()) == [1, 1, 2, 2], "round robin over both brokers"
    assert leaders(wait_until(lambda: settled(one.bootstrap), 10, "broker one's view")) == placed

    client = zk(zk_connect)
    try:
        assert sorted(client.get_children("/brokers/ids")) == ["1", "2"]
        stored = json.loads(client.get("/brokers/topics/spread")[0])
        assert {int(p): r for p, r in stored["partitions"].items()} == {p: [leader] for p, (leader, _) in placed.items()}

        def states() -> dict[int, int]:
            out = {}
            for p in range(4):
                if client.exists(f"/brokers/topics/spread/partitions/{p}/state"):
                    out[p] = json.loads(client.get(f"/brokers/topics/spread/partitions/{p}/state")[0])["leader"]
            return out

        wait_until(lambda: states() == {p: leader for p, (leader, _) in placed.items()}, 10, "partition states written")
    finally:
        client.stop()
        client.close()

    # Every record reaches its leader through a real client, and comes back.
    sent = produce(one.bootstrap, "spread", 4, 200, "spread")
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": two.bootstrap, "group.id": "spread-reader", "enable.auto.commit": False})
    consumer.assign([TopicPartition("spread", p, 0) for p in range(4)])
    got: list[str] = []
    deadline = time.monotonic() + 30
    while len(got) < 200 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            got.append(message.value().decode())
    consumer.commit(asynchronous=False)
    consumer.close()
    assert sorted(got) == sorted(sent)

    # Admin clients ask every broker for its groups and merge the answers: the group comes
    # from the broker whose coordinator runs it, once; the other answers an empty list.
    from tests.integration.broker.test_one_node import _confluent_groups, _kafka_python_groups

    for lister in (_confluent_groups, _kafka_python_groups):
        assert lister(f"{one.bootstrap},{two.bootstrap}").count("spread-reader") == 1, lister.__name__

    # The broker that does not hold a partition says so.
    foreign = next(p for p, (leader, _) in placed.items() if leader == 2)
    with KioClient(one.bootstrap) as raw:
        answer = raw.call(0, 9, request(0, 9, transactional_id=None, acks=1, timeout=5000, topic_data=[
            {"name": "spread", "partition_data": [{"index": foreign, "records": _batch([b"wrong broker"])}]}]))
        assert answer.responses[0].partition_responses[0].error_code == ErrorCode.not_leader_or_follower

    # An explicit replica assignment is honoured (kafka-python's admin: confluent-kafka
    # 2.16 refuses a NewTopic with an assignment on the client side).
    from kafka.admin import KafkaAdminClient
    from kafka.admin import NewTopic as KafkaNewTopic
    from kafka.errors import InvalidReplicationAssignmentError

    admin = KafkaAdminClient(bootstrap_servers=one.bootstrap)
    try:
        admin.create_topics([KafkaNewTopic("by-hand", -1, -1, replica_assignments={0: [2], 1: [2], 2: [1]})])
        wait_until(lambda: leaders(metadata(one.bootstrap, "by-hand")) == {0: (2, 0), 1: (2, 0), 2: (1, 0)}, 10,
                   "the assignment as given")
        with pytest.raises(InvalidReplicationAssignmentError):
            admin.create_topics([KafkaNewTopic("nowhere", -1, -1, replica_assignments={0: [9]})])
    finally:
        admin.close()

    # While broker 2 is down its partitions have no leader.
    two.stop()
    wait_until(lambda: {b.node_id for b in metadata(one.bootstrap, "spread").brokers} == node_ids({1}), 10, "broker 2 gone")
    down = leaders(metadata(one.bootstrap, "spread"))
    for partition, (leader, _error) in placed.items():
        expected = (1, 0) if leader == 1 else (-1, ErrorCode.leader_not_available)
        assert down[partition] == expected


def test_a_second_broker_with_the_same_id_is_refused(cluster: Any, broker_factory: Callable[..., Broker],
                                                      zk_connect: str) -> None:
    first = cluster(7)
    twin = broker_factory(workers=1, overrides=cluster_settings(zk_connect, 7), start=False)
    with open(twin.stderr_path, "ab") as err:
        process = subprocess.Popen(twin.command(), stdin=subprocess.DEVNULL, stdout=err, stderr=err, start_new_session=True)
    try:
        code = process.wait(SESSION_MS / 1000 + 30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)
    assert code != 0
    assert "broker id 7 is already registered" in twin.stderr()
    with KioClient(first.bootstrap) as client:  # the first one is unharmed
        assert client.call(3, 12, request(3, 12, topics=None, allow_auto_topic_creation=False,
                                          include_topic_authorized_operations=False)).brokers[0].node_id == 7


def test_group_carries_on_after_the_coordinator_process_is_killed(cluster: Any, zk_connect: str, tmp_path: Any) -> None:
    brokers = {1: cluster(1), 2: cluster(2)}
    bootstrap = ",".join(b.bootstrap for b in brokers.values())
    create_topic(brokers[1].bootstrap, "failover", 4)
    client = zk(zk_connect)
    started: list[MemberProcess] = []
    try:
        wait_until(lambda: client.exists("/consumers/coordinator"), 20, "a coordinator elected")
        group = [MemberProcess("confluent", bootstrap, "g-failover", "failover") for _ in range(2)]
        started += group
        wait_for_split(group, 4)
        first = produce(bootstrap, "failover", 4, 200, "before")
        wait_until(lambda: set(consumed_values(group)) >= first, 30, "the first records consumed")
        elected = json.loads(client.get("/consumers/coordinator")[0])["brokerid"]
        # Operators can read the group in ZooKeeper: its members, and who owns what.
        wait_until(lambda: client.exists("/consumers/g-failover/owners/failover")
                   and len(client.get_children("/consumers/g-failover/owners/failover")) == 4, 10, "the group mirrored")
        members = set(client.get_children("/consumers/g-failover/ids"))
        assert len(members) == 2
        owners = {client.get(f"/consumers/g-failover/owners/failover/{p}")[0].decode() for p in range(4)}
        assert len(owners) == 2 and all(any(o.startswith(m[:8]) for m in members) for o in owners)
        # The other broker's coordinator process is not elected: it answers NOT_COORDINATOR,
        # and its FindCoordinator names the elected one.
        other = brokers[3 - elected]
        with KioClient(other.bootstrap) as raw:
            found = raw.call(10, 6, request(10, 6, key_type=0, coordinator_keys=["g-failover"])).coordinators[0]
            assert (found.error_code, found.node_id, found.port) == (0, elected, brokers[elected].port)
            answer = raw.call(12, 4, request(12, 4, group_id="g-failover", generation_id=1, member_id="m",
                                             group_instance_id=None))
            assert answer.error_code == ErrorCode.not_coordinator
        victim = brokers[elected].coordinator_pid()
        assert victim is not None
        epoch_at_kill = int(client.get("/consumers/coordinator_epoch")[0])
        registration = client.get(f"/brokers/ids/{elected}")[1]
        subprocess.run(["kill", "-9", str(victim)], check=True)
        # The supervisor starts another coordinator process, which resumes the dead one's
        # ZooKeeper session (broker/process/session_file.py) and wins again with a new epoch, at
        # once: the other broker never gets the election, which it would after the session
        # timeout, and the broker's registration never went away.
        wait_until(lambda: int(client.get("/consumers/coordinator_epoch")[0]) > epoch_at_kill, 40, "a new election")
        assert int(client.get("/consumers/coordinator_epoch")[0]) == epoch_at_kill + 1
        assert json.loads(client.get("/consumers/coordinator")[0])["brokerid"] == elected
        assert client.get(f"/brokers/ids/{elected}")[1].czxid == registration.czxid
        assert brokers[elected].coordinator_pid() not in (None, victim)
        second = produce(bootstrap, "failover", 4, 200, "after")
        wait_until(lambda: set(consumed_values(group)) >= first | second, 60, "every record consumed after the failover")
        # Carried on from the committed offsets: nothing before them is read again.
        got = consumed_values(group)
        assert set(got) == first | second
        assert len(got) == len(set(got)), "no record consumed twice"
        # A new member of the group starts at the committed offsets, wherever the coordinator is now.
        late = MemberProcess("kafka-python", bootstrap, "g-failover", "failover")
        started.append(late)
        for member in group:
            member.stop()
        third = produce(bootstrap, "failover", 4, 40, "late")
        wait_until(lambda: set(consumed_values([late])) >= third, 60, "the late member reads the new records")
        assert set(consumed_values([late])) == third
    finally:
        for member in started:
            member.stop(timeout=15)
        client.stop()
        client.close()


def heartbeat_error(bootstrap: str) -> int:
    with KioClient(bootstrap) as raw:
        answer = raw.call(12, 4, request(12, 4, group_id="probe", generation_id=1, member_id="m", group_instance_id=None))
        return int(answer.error_code)


def test_coordinator_stops_serving_while_its_session_is_suspended(cluster: Any, zookeeper_server: Any) -> None:
    """ZooKeeper stops answering (SIGSTOP): once the coordinator's session is SUSPENDED it
    answers NOT_COORDINATOR (it cannot know whether it is still elected); when the session
    comes back it serves again."""
    import signal as signals

    broker = cluster(1)
    wait_until(lambda: heartbeat_error(broker.bootstrap) == ErrorCode.unknown_member_id, 20, "the coordinator serving")
    zookeeper_server.proc.send_signal(signals.SIGSTOP)
    try:
        wait_until(lambda: heartbeat_error(broker.bootstrap) == ErrorCode.not_coordinator, SESSION_MS / 1000 * 3,
                   "the coordinator to stop serving")
    finally:
        zookeeper_server.proc.send_signal(signals.SIGCONT)
    wait_until(lambda: heartbeat_error(broker.bootstrap) == ErrorCode.unknown_member_id, 30, "the coordinator serving again")


def test_coordinator_campaigns_again_after_its_session_is_lost(cluster: Any, zk_connect: str) -> None:
    """The coordinator process is paused (SIGSTOP) for longer than its ZooKeeper session:
    the session expires and its ephemeral nodes go. When it resumes it sees LOST, resigns,
    registers the broker again, campaigns again (a new epoch), reloads the offsets, and the
    group goes on from its committed offsets."""
    import signal as signals

    broker = cluster(1)
    create_topic(broker.bootstrap, "lost", 2)
    client = zk(zk_connect)
    member = MemberProcess("confluent", broker.bootstrap, "g-lost", "lost")
    try:
        wait_until(lambda: member.assignment() == [0, 1], 30, "the member assigned")
        first = produce(broker.bootstrap, "lost", 2, 50, "before")
        wait_until(lambda: set(consumed_values([member])) >= first, 30, "the first records consumed")
        epoch_before = int(client.get("/consumers/coordinator_epoch")[0])
        coordinator = broker.coordinator_pid()
        assert coordinator is not None
        os.kill(coordinator, signals.SIGSTOP)
        try:
            wait_until(lambda: not client.exists("/consumers/coordinator"), SESSION_MS / 1000 * 4, "the session expired")
        finally:
            os.kill(coordinator, signals.SIGCONT)
        wait_until(lambda: client.exists("/consumers/coordinator")
                   and int(client.get("/consumers/coordinator_epoch")[0]) > epoch_before, 40, "a new election")
        wait_until(lambda: client.exists("/brokers/ids/1"), 20, "the broker registered again")
        assert broker.coordinator_pid() == coordinator, "the same process, not a restart"
        second = produce(broker.bootstrap, "lost", 2, 50, "after")
        wait_until(lambda: set(consumed_values([member])) >= first | second, 60, "the records after the outage consumed")
        assert set(consumed_values([member])) == first | second
    finally:
        member.stop(timeout=15)
        client.stop()
        client.close()


def test_a_group_commits_again_at_once_after_its_coordinator_process_is_killed(cluster: Any, zk_connect: str,
                                                                               tmp_path: Any) -> None:
    """Three confluent-kafka members (session.timeout.ms 6000, heartbeats every 3 s) commit
    every 50 ms; the elected coordinator process is killed -9. Requests that come while it
    is down wait for its successor, which resumes the ZooKeeper session, loads the group
    Stable and serves within a second or so: every member commits again within 3 s of the
    kill, and no member's session times out (no rebalance)."""
    import logging
    import threading

    from confluent_kafka import Consumer, KafkaException, TopicPartition

    brokers = {1: cluster(1), 2: cluster(2)}
    bootstrap = ",".join(b.bootstrap for b in brokers.values())
    create_topic(brokers[1].bootstrap, "kept", 4)
    killed_at = [float("inf")]
    committed: set[str] = set()
    after_kill: dict[str, float] = {}
    timed_out: list[str] = []
    reassigned: list[str] = []  # assignment changes after the kill: a rebalance
    stop = threading.Event()

    class SessionTimeouts(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if "session timed out" in record.getMessage():
                timed_out.append(record.getMessage())

    rdkafka_log = logging.getLogger(f"rdkafka-{uuid.uuid4().hex[:6]}")
    rdkafka_log.propagate = False
    rdkafka_log.setLevel(logging.DEBUG)
    rdkafka_log.addHandler(SessionTimeouts())
    rdkafka_log.addHandler(logging.FileHandler(str(tmp_path / "rdkafka.log")))  # for a failure's post-mortem

    def member(name: str) -> None:
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "g-kept", "enable.auto.commit": False,
                             "session.timeout.ms": 6000, "client.id": name, "debug": "cgrp"}, logger=rdkafka_log)
        def on_assign(_consumer: Any, partitions: list[Any]) -> None:
            if time.monotonic() >= killed_at[0]:
                reassigned.append(f"{name}: {[p.partition for p in partitions]}")

        consumer.subscribe(["kept"], on_assign=on_assign)
        try:
            while not stop.is_set():
                consumer.poll(0.05)
                assignment = consumer.assignment()
                if not assignment:
                    continue
                sent_at = time.monotonic()
                try:
                    consumer.commit(offsets=[TopicPartition("kept", tp.partition, 0) for tp in assignment],
                                    asynchronous=False)
                except KafkaException:
                    continue
                committed.add(name)
                if sent_at >= killed_at[0]:
                    after_kill.setdefault(name, time.monotonic() - killed_at[0])
                time.sleep(0.05)
        finally:
            consumer.close()

    names = [f"kept-{i}" for i in range(3)]
    threads = [threading.Thread(target=member, args=(name,), daemon=True) for name in names]
    for thread in threads:
        thread.start()
    client = zk(zk_connect)
    try:
        wait_until(lambda: committed == set(names), 60, "every member committing")
        time.sleep(4)  # a heartbeat or two of each member in the stable group
        elected = json.loads(client.get("/consumers/coordinator")[0])["brokerid"]
        victim = brokers[elected].coordinator_pid()
        assert victim is not None
        killed_at[0] = time.monotonic()
        os.kill(victim, 9)
        wait_until(lambda: set(after_kill) == set(names), 15, "every member committing after the kill")
        time.sleep(7)  # past a session timeout: a member whose heartbeats failed has said so by now
        slowest = max(after_kill.values())
        print(f"every member committed again within {slowest:.3f} s of the kill: {sorted(after_kill.values())}")
        assert slowest < 3.0, f"the group committed again {slowest:.2f} s after the kill ({tmp_path / 'rdkafka.log'})"
        assert not timed_out, timed_out
        assert not reassigned, reassigned  # the successor loaded the group Stable: no rebalance
    finally:
        stop.set()
        for thread in threads:
            thread.join(30)
        client.stop()
        client.close()
