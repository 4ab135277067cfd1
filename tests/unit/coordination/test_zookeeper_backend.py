"""ZooKeeperBackend and ZooKeeperTopicRegistry against a real ZooKeeper (no mocks).

Each test gets a fresh chroot on the module's server; every backend a test opens is a
separate KazooClient (its own session), closed by the fixture even when the test fails.
Every wait is bounded.
"""

from __future__ import annotations

import queue
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Iterator

import orjson
import pytest
from kazoo.client import KazooClient
from kio.schema.errors import ErrorCode

from coordination.backend import BrokerIdInUse, CoordinationUnavailable, NotCoordinator
from coordination.open_backend import open_backend
from coordination.topics import TopicRegistryError
from coordination.znodes import GroupMemberZNode, PartitionState, new_cluster_id
from coordination.zookeeper import ZooKeeperBackend, split_connect
from storage.checkpoint import uuid_to_base64url
from tests.zookeeper_server import ZooKeeperServer, expire_session

pytestmark = [pytest.mark.zookeeper, pytest.mark.timeout(60)]

SESSION_TIMEOUT = 4.0
WAIT = 10.0

MakeBackend = Callable[..., ZooKeeperBackend]


@pytest.fixture
def make_backend(zk_connect: str) -> Iterator[MakeBackend]:
    made: list[ZooKeeperBackend] = []

    def make(node_id: int = 1, start: bool = True) -> ZooKeeperBackend:
        backend = ZooKeeperBackend(zk_connect, node_id, session_timeout=SESSION_TIMEOUT, retry_deadline=WAIT)
        made.append(backend)
        if start:
            backend.start(WAIT)
        return backend

    yield make
    for backend in made:
        try:
            backend.close()
        except Exception:
            pass


@pytest.fixture
def raw(zookeeper_server: ZooKeeperServer, zk_connect: str) -> Iterator[KazooClient]:
    """A plain kazoo client inside the test's chroot, to look at the znodes directly."""
    hosts, chroot = split_connect(zk_connect)
    bare = KazooClient(hosts=hosts)
    bare.start(WAIT)
    bare.ensure_path(chroot)
    bare.stop()
    bare.close()
    client = KazooClient(hosts=zk_connect)
    client.start(WAIT)
    yield client
    client.stop()
    client.close()


def znode_json(client: KazooClient, path: str) -> dict:
    data, _ = client.get(path)
    doc = orjson.loads(data)
    assert isinstance(doc, dict)
    return doc


def next_item(items: queue.Queue, timeout: float = WAIT) -> object:
    try:
        return items.get(timeout=timeout)
    except queue.Empty:
        raise AssertionError(f"nothing arrived within {timeout} s") from None


def drain(items: queue.Queue) -> None:
    while True:
        try:
            items.get_nowait()
        except queue.Empty:
            return


def wait_until(condition: Callable[[], object], what: str, timeout: float = WAIT) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.02)


# ----------------------------------------------------------------------------- connection
def test_factory_picks_zookeeper_only_when_connect_is_set(zk_connect: str, tmp_path) -> None:
    backend = open_backend(zk_connect, str(tmp_path), 3)
    assert isinstance(backend, ZooKeeperBackend)
    assert split_connect("h1:1,h2:2/a/b/") == ("h1:1,h2:2", "/a/b")
    assert split_connect("h1:1/") == ("h1:1", "")


def test_start_creates_the_chroot_and_the_roots(zookeeper_server: ZooKeeperServer, zk_connect: str) -> None:
    nested = zk_connect + "/deeper/still"
    backend = ZooKeeperBackend(nested, 1, session_timeout=SESSION_TIMEOUT)
    try:
        backend.start(WAIT)
    finally:
        backend.close()
    bare = KazooClient(hosts=zookeeper_server.address)
    bare.start(WAIT)
    try:
        _, chroot = split_connect(nested)
        for root in ("/brokers/ids", "/brokers/topics", "/config/topics", "/consumers", "/cluster"):
            assert bare.exists(chroot + root) is not None, root
    finally:
        bare.stop()
        bare.close()


def test_start_times_out_without_a_server() -> None:
    backend = ZooKeeperBackend("127.0.0.1:1/nowhere", 1, session_timeout=SESSION_TIMEOUT)
    started = time.monotonic()
    with pytest.raises(CoordinationUnavailable):
        backend.start(1.0)
    assert time.monotonic() - started < 5.0
    backend.close()


def test_cluster_id_is_created_once(make_backend: MakeBackend, raw: KazooClient) -> None:
    first, second = make_backend(1), make_backend(2)
    proposed = new_cluster_id()
    assert len(proposed) == 22
    assert first.cluster_id(proposed) == proposed
    assert second.cluster_id(new_cluster_id()) == proposed
    assert znode_json(raw, "/cluster/id") == {"version": "1", "id": proposed}


# ----------------------------------------------------------------------------- brokers
def test_broker_registration_and_duplicate_id_refused(make_backend: MakeBackend, raw: KazooClient) -> None:
    first, second = make_backend(1), make_backend(1)
    first.register_broker(1, {"PLAINTEXT": ("127.0.0.1", 9092)})
    doc = znode_json(raw, "/brokers/ids/1")
    assert doc["version"] == 5 and doc["host"] == "127.0.0.1" and doc["port"] == 9092
    assert doc["endpoints"] == ["PLAINTEXT://127.0.0.1:9092"]
    assert doc["listener_security_protocol_map"] == {"PLAINTEXT": "PLAINTEXT"}
    assert doc["jmx_port"] == -1 and doc["rack"] is None and doc["timestamp"].isdigit()
    assert raw.exists("/brokers/ids/1").ephemeralOwner == first.session_id()

    with pytest.raises(BrokerIdInUse, match="broker id 1 is already registered"):
        second.register_broker(1, {"PLAINTEXT": ("127.0.0.2", 9093)})
    # Registering again from the owning session is not a conflict (a retried create).
    first.register_broker(1, {"PLAINTEXT": ("127.0.0.1", 9092)})

    # With a grace period, the second broker takes the id once the first session ends.
    closer = threading.Timer(0.3, first.close)
    closer.start()
    try:
        second.register_broker(1, {"PLAINTEXT": ("127.0.0.2", 9093)}, wait_for_stale=WAIT)
    finally:
        closer.join(WAIT)
    assert second.live_brokers() == {1: {"PLAINTEXT": ("127.0.0.2", 9093)}}


def test_live_brokers_and_the_watch_fire_on_join_and_leave(make_backend: MakeBackend) -> None:
    watcher = make_backend(1)
    watcher.register_broker(1, {"PLAINTEXT": ("127.0.0.1", 9001)})
    events: queue.Queue = queue.Queue()
    watcher.watch_brokers(lambda: events.put("changed"))
    next_item(events)  # called once at registration
    assert watcher.live_brokers() == {1: {"PLAINTEXT": ("127.0.0.1", 9001)}}

    joiner = make_backend(2)
    joiner.register_broker(2, {"PLAINTEXT": ("127.0.0.1", 9002)})
    next_item(events)
    assert watcher.live_brokers() == {1: {"PLAINTEXT": ("127.0.0.1", 9001)}, 2: {"PLAINTEXT": ("127.0.0.1", 9002)}}

    drain(events)
    joiner.close()  # the session ends: the ephemeral registration goes at once
    next_item(events)
    assert watcher.live_brokers() == {1: {"PLAINTEXT": ("127.0.0.1", 9001)}}


# ----------------------------------------------------------------------------- election
def test_one_winner_then_the_loser_takes_over_when_the_winner_closes(make_backend: MakeBackend,
                                                                     raw: KazooClient) -> None:
    first, second = make_backend(1), make_backend(2)
    changes: queue.Queue = queue.Queue()
    second.watch_coordinator(lambda: changes.put("changed"))
    next_item(changes)
    assert second.coordinator() is None and second.current_epoch() == 0

    assert first.campaign(1, timeout=WAIT) == 1
    next_item(changes)
    assert first.is_coordinator()
    assert second.coordinator() == (1, 1)
    doc = znode_json(raw, "/consumers/coordinator")
    assert doc["version"] == 1 and doc["brokerid"] == 1 and doc["timestamp"].isdigit()
    assert raw.get("/consumers/coordinator_epoch")[0] == b"1"
    assert raw.exists("/consumers/coordinator").ephemeralOwner == first.session_id()
    assert first.campaign(1, timeout=WAIT) == 1  # already the coordinator: the same epoch

    with ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(second.campaign, 2, WAIT * 2)
        time.sleep(0.5)
        assert not waiting.done(), "the second campaign must wait while the first coordinator lives"
        closed_at = time.monotonic()
        first.close()
        assert waiting.result(WAIT) == 2
        took = time.monotonic() - closed_at
    assert took < 3.0, f"the takeover took {took:.2f} s (it should follow the node's deletion, not a poll)"
    assert second.coordinator() == (2, 2)
    assert second.current_epoch() == 2


def test_campaign_times_out_and_close_wakes_a_waiting_campaign(make_backend: MakeBackend) -> None:
    first, second = make_backend(1), make_backend(2)
    assert first.campaign(1) == 1
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        second.campaign(2, timeout=0.5)
    assert time.monotonic() - started < 3.0
    with ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(second.campaign, 2)
        time.sleep(0.3)
        second.close()
        with pytest.raises(CoordinationUnavailable):
            waiting.result(WAIT)
    assert first.coordinator() == (1, 1)


def test_resign_lets_another_win_and_never_deletes_someone_elses_node(make_backend: MakeBackend) -> None:
    first, second = make_backend(1), make_backend(2)
    assert first.campaign(1) == 1
    second.resign()  # not ours: must leave the coordinator alone
    assert second.coordinator() == (1, 1)
    with ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(second.campaign, 2, WAIT)
        time.sleep(0.3)
        first.resign()
        assert waiting.result(WAIT) == 2
    assert not first.is_coordinator()
    assert first.coordinator() == (2, 2)


def test_session_expiry_deposes_the_coordinator(make_backend: MakeBackend, zookeeper_server: ZooKeeperServer) -> None:
    first, second = make_backend(1), make_backend(2)
    states: queue.Queue = queue.Queue()
    first.add_state_listener(states.put)
    assert first.campaign(1) == 1
    first.write_group_members("g", {"m": b"{}"})  # allowed while coordinator

    with ThreadPoolExecutor(2) as pool:
        waiting = pool.submit(second.campaign, 2, WAIT * 2)
        time.sleep(0.2)
        client_id = first.client.client_id
        assert client_id is not None
        expire_session(zookeeper_server.address, client_id[0], client_id[1])
        seen = []
        deadline = time.monotonic() + WAIT
        while "LOST" not in seen and time.monotonic() < deadline:
            try:
                seen.append(states.get(timeout=max(0.01, deadline - time.monotonic())))
            except queue.Empty:
                break
        assert "LOST" in seen, f"the expired session reported only {seen}"
        assert waiting.result(WAIT) == 2

        assert not first.is_coordinator()
        with pytest.raises(NotCoordinator):
            first.write_group_members("g", {"m": b"{}"})
        # kazoo reconnects with a new session; the deposed node campaigns again and waits.
        wait_until(lambda: first.client.connected, "the new session")
        again = pool.submit(first.campaign, 1, WAIT * 2)
        time.sleep(0.3)
        assert not again.done()
        second.resign()
        assert again.result(WAIT) == 3
    assert second.coordinator() == (1, 3)


def test_a_deposed_coordinator_is_fenced_even_before_it_notices(make_backend: MakeBackend,
                                                                raw: KazooClient) -> None:
    first, second = make_backend(1), make_backend(2)
    assert first.campaign(1) == 1
    # Simulate the election another process wins while we are partitioned away: our
    # coordinator znode vanishes and the epoch moves on, and we have not heard yet.
    raw.delete("/consumers/coordinator")
    assert second.campaign(2, timeout=WAIT) == 2
    assert first.is_coordinator()  # still believes it
    with pytest.raises(NotCoordinator):
        first.write_group_owners("g", {("t", 0): "m"})
    assert not first.is_coordinator()
    assert not raw.exists("/consumers/g")


def test_the_epoch_never_goes_backwards(make_backend: MakeBackend, raw: KazooClient) -> None:
    raw.create("/consumers/coordinator_epoch", b"41", makepath=True)
    backend = make_backend(1)
    assert backend.current_epoch() == 41
    assert backend.campaign(1) == 42
    backend.resign()
    assert backend.coordinator() is None
    assert backend.current_epoch() == 42
    assert backend.campaign(1) == 43
    assert backend.coordinator() == (1, 43)
    # Both znodes were written by one transaction: one zxid.
    assert raw.exists("/consumers/coordinator").czxid == raw.exists("/consumers/coordinator_epoch").mzxid


def test_concurrent_campaigns_have_one_winner_per_epoch(make_backend: MakeBackend) -> None:
    backends = {node_id: make_backend(node_id) for node_id in (1, 2, 3)}
    guard = threading.Lock()
    holders = [0]
    problems: list[str] = []
    wins: list[tuple[int, int]] = []

    def run(node_id: int) -> int:
        backend = backends[node_id]
        epoch = backend.campaign(node_id, timeout=WAIT * 2)
        with guard:
            holders[0] += 1
            if holders[0] != 1:
                problems.append(f"{holders[0]} coordinators at epoch {epoch}")
            wins.append((epoch, node_id))
        seen = backend.coordinator()
        if seen != (node_id, epoch):
            problems.append(f"node {node_id} won epoch {epoch} but coordinator() says {seen}")
        time.sleep(0.1)
        with guard:
            holders[0] -= 1
        backend.resign()
        return epoch

    with ThreadPoolExecutor(3) as pool:
        futures = [pool.submit(run, node_id) for node_id in backends]
        epochs = sorted(f.result(WAIT * 3) for f in futures)
    assert problems == []
    assert epochs == [1, 2, 3]
    assert sorted(node for _, node in wins) == [1, 2, 3]


def test_state_listener_hears_lost_on_close(make_backend: MakeBackend) -> None:
    backend = make_backend(1)
    states: queue.Queue = queue.Queue()
    backend.add_state_listener(states.put)
    backend.close()
    assert next_item(states) == "LOST"


# ----------------------------------------------------------------------------- group mirror
def test_group_mirror_replaces_what_is_there(make_backend: MakeBackend, raw: KazooClient) -> None:
    backend = make_backend(1)
    with pytest.raises(NotCoordinator):
        backend.write_group_members("g", {})
    backend.campaign(1)
    member = GroupMemberZNode.encode("client-a", "/127.0.0.1", 10000, 30000, subscription=["t"])
    backend.write_group_members("g", {"m1": member, "m2": member})
    assert sorted(raw.get_children("/consumers/g/ids")) == ["m1", "m2"]
    assert znode_json(raw, "/consumers/g/ids/m1")["client_id"] == "client-a"
    backend.write_group_members("g", {"m2": b'{"x":1}', "m/3": member})
    assert sorted(raw.get_children("/consumers/g/ids")) == ["m%2F3", "m2"]
    assert raw.get("/consumers/g/ids/m2")[0] == b'{"x":1}'

    backend.write_group_owners("g", {("t", 0): "m1", ("t", 1): "m2", ("u", 0): "m2"})
    assert sorted(raw.get_children("/consumers/g/owners")) == ["t", "u"]
    assert raw.get("/consumers/g/owners/t/1")[0] == b"m2"
    backend.write_group_owners("g", {("t", 1): "m1", ("v", 2): "m1"})
    assert sorted(raw.get_children("/consumers/g/owners")) == ["t", "v"]
    assert raw.get_children("/consumers/g/owners/t") == ["1"]
    assert raw.get("/consumers/g/owners/t/1")[0] == b"m1"

    # A group named like the election znodes cannot collide with them.
    backend.write_group_members("coordinator", {"m": member})
    assert raw.exists("/consumers/%63oordinator/ids/m") is not None
    assert backend.coordinator() == (1, 1)

    backend.delete_group("g")
    assert raw.exists("/consumers/g") is None


# ----------------------------------------------------------------------------- topic registry
def test_topic_registry_round_trips_and_places_partitions_over_live_brokers(make_backend: MakeBackend,
                                                                           raw: KazooClient) -> None:
    backends = [make_backend(node_id) for node_id in (1, 2, 3)]
    for node_id, backend in zip((1, 2, 3), backends):
        backend.register_broker(node_id, {"PLAINTEXT": ("127.0.0.1", 9000 + node_id)})
    writer, reader = backends[0].topics(), backends[1].topics()
    assert reader.refresh() is False or reader.all() == []

    info = writer.create("orders", 6, {"retention.ms": "60000"})
    assert info.partitions == 6 and dict(info.configs) == {"retention.ms": "60000"}
    assert writer.get("orders") == info  # read-your-writes
    doc = znode_json(raw, "/brokers/topics/orders")
    assert doc["version"] == 3 and doc["topic_id"] == uuid_to_base64url(info.topic_id)
    assert doc["adding_replicas"] == {} and doc["removing_replicas"] == {}
    assert sorted(doc["partitions"], key=int) == [str(p) for p in range(6)]
    assert znode_json(raw, "/config/topics/orders") == {"version": 1, "config": {"retention.ms": "60000"}}

    # Round robin over the live brokers from some first broker, one replica each.
    replicas = writer.replicas("orders")
    ids = [1, 2, 3]
    start = ids.index(replicas[0][0])
    assert replicas == {p: [ids[(p + start) % 3]] for p in range(6)}

    assert wait_refreshed(reader, lambda: reader.get("orders") == info)
    assert reader.by_id(info.topic_id) == info
    assert reader.refresh() is False  # nothing changed: no re-read

    with pytest.raises(TopicRegistryError) as refused:
        reader.create("orders", 1, {})
    assert refused.value.code == ErrorCode.topic_already_exists

    grown = writer.set_partitions("orders", 9)
    assert grown.partitions == 9
    assert writer.replicas("orders") == {p: [ids[(p + start) % 3]] for p in range(9)}
    with pytest.raises(TopicRegistryError) as refused:
        writer.set_partitions("orders", 9)
    assert refused.value.code == ErrorCode.invalid_partitions

    changed = writer.set_configs("orders", lambda current: {**current, "cleanup.policy": "compact"})
    assert dict(changed.configs) == {"retention.ms": "60000", "cleanup.policy": "compact"}
    assert wait_refreshed(reader, lambda: reader.get("orders") is not None and reader.get("orders").partitions == 9
                          and reader.get("orders").configs.get("cleanup.policy") == "compact")

    # A change made behind the registry's back arrives through the watches.
    raw.set("/config/topics/orders", b'{"version":1,"config":{"retention.ms":"1"}}')
    assert wait_refreshed(reader, lambda: dict(reader.get("orders").configs) == {"retention.ms": "1"})

    state = writer.set_partition_state("orders", 2, leader=3, leader_epoch=0, isr=[3])
    assert (state.leader, state.leader_epoch, state.isr, state.controller_epoch) == (3, 0, [3], 0)
    assert reader.partition_state("orders", 2) == state
    assert znode_json(raw, "/brokers/topics/orders/partitions/2/state") == {
        "controller_epoch": 0, "leader": 3, "version": 1, "leader_epoch": 0, "isr": [3]}
    with pytest.raises(TopicRegistryError):
        writer.set_partition_state("orders", 99, leader=1, leader_epoch=0, isr=[1])

    deleted = reader.delete("orders")
    assert deleted.topic_id == info.topic_id
    assert raw.exists("/brokers/topics/orders") is None and raw.exists("/config/topics/orders") is None
    assert wait_refreshed(writer, lambda: writer.get("orders") is None)
    assert writer.all() == [] and writer.by_id(info.topic_id) is None
    with pytest.raises(TopicRegistryError) as refused:
        writer.delete("orders")
    assert refused.value.code == ErrorCode.unknown_topic_or_partition


def wait_refreshed(registry, condition: Callable[[], bool], timeout: float = WAIT) -> bool:
    deadline = time.monotonic() + timeout
    while True:
        registry.refresh()
        if condition():
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)


def test_topic_registry_refusals_assignment_and_producer_ids(make_backend: MakeBackend, raw: KazooClient) -> None:
    first, second = make_backend(1), make_backend(2)
    registry = first.topics()
    with pytest.raises(TopicRegistryError) as refused:
        registry.create("no-brokers", 1, {})
    assert refused.value.code == ErrorCode.invalid_replication_factor
    first.register_broker(1, {"PLAINTEXT": ("127.0.0.1", 9001)})
    second.register_broker(2, {"PLAINTEXT": ("127.0.0.1", 9002)})

    for name, code in (("bad/name", ErrorCode.invalid_topic_exception), ("..", ErrorCode.invalid_topic_exception)):
        with pytest.raises(TopicRegistryError) as refused:
            registry.create(name, 1, {})
        assert refused.value.code == code
    with pytest.raises(TopicRegistryError) as refused:
        registry.create("zero", 0, {})
    assert refused.value.code == ErrorCode.invalid_partitions

    checked = registry.create("dry", 3, {}, validate_only=True)
    assert checked.partitions == 3 and raw.exists("/brokers/topics/dry") is None

    topic_id = uuid.uuid4()
    placed = registry.create("placed", 0, {}, topic_id=topic_id, assignment={0: [2, 1], 1: [1, 2]})
    assert placed.topic_id == topic_id and placed.partitions == 2
    assert registry.replicas("placed") == {0: [2, 1], 1: [1, 2]}
    assert registry.set_partitions("placed", 3).partitions == 3
    assert len(registry.replicas("placed")[2]) == 2  # the replication factor is kept
    for assignment in ({0: [1], 2: [2]}, {0: [1, 1]}, {0: [1], 1: [1, 2]}, {0: [7]}):
        with pytest.raises(TopicRegistryError) as refused:
            registry.create("badly-placed", 0, {}, assignment=assignment)
        assert refused.value.code == ErrorCode.invalid_replica_assignment, assignment
    only = registry.create("pinned", 4, {}, brokers=[2])
    assert set(b for r in registry.replicas(only.name).values() for b in r) == {2}

    # Producer ids: blocks from two processes never overlap.
    blocks = [first.topics().allocate_producer_ids(1000), second.topics().allocate_producer_ids(1000),
              first.topics().allocate_producer_ids(10)]
    assert blocks == [0, 1000, 2000]
    doc = znode_json(raw, "/latest_producer_id_block")
    assert doc == {"version": 1, "broker": 1, "block_start": "2000", "block_end": "2009"}


def test_topic_registry_notices_everything_after_a_session_loss(make_backend: MakeBackend,
                                                                zookeeper_server: ZooKeeperServer,
                                                                raw: KazooClient) -> None:
    backend = make_backend(1)
    backend.register_broker(1, {"PLAINTEXT": ("127.0.0.1", 9001)})
    registry = backend.topics()
    registry.create("before", 1, {})
    states: queue.Queue = queue.Queue()
    backend.add_state_listener(states.put)
    client_id = backend.client.client_id
    expire_session(zookeeper_server.address, client_id[0], client_id[1])
    deadline = time.monotonic() + WAIT
    while next_item(states, max(0.01, deadline - time.monotonic())) != "LOST":
        pass
    # Changed while our watches were gone: a full reload must pick it up.
    raw.set("/config/topics/before", b'{"version":1,"config":{"retention.ms":"5"}}')
    wait_until(lambda: backend.client.connected, "the new session")
    assert wait_refreshed(registry, lambda: dict(registry.get("before").configs) == {"retention.ms": "5"})
    backend.reregister()
    assert backend.live_brokers() == {1: {"PLAINTEXT": ("127.0.0.1", 9001)}}
    assert (backend.live_registrations()[1].host, backend.live_registrations()[1].port) == ("127.0.0.1", 9001)


def test_the_registry_serves_its_snapshot_while_zookeeper_is_unreachable(make_backend: MakeBackend) -> None:
    backend = make_backend(1)
    backend.register_broker(1, {"PLAINTEXT": ("127.0.0.1", 9001)})
    registry = backend.topics()
    info = registry.create("kept", 2, {})
    backend.close()
    started = time.monotonic()
    assert registry.refresh() is False
    assert time.monotonic() - started < 1.0
    assert registry.get("kept") == info and registry.replicas("kept") == {0: [1], 1: [1]}


# ----------------------------------------------------------------------------- codecs
def test_znode_codecs_read_what_kafka_writes() -> None:
    from coordination.znodes import (
        BrokerIdZNode,
        ClusterIdZNode,
        CoordinatorEpochZNode,
        CoordinatorZNode,
        TopicConfigZNode,
        TopicPartitionStateZNode,
        TopicZNode,
        from_znode_name,
        znode_name,
    )

    kafka_broker = (b'{"features":{},"listener_security_protocol_map":{"SSL":"SSL"},"endpoints":["SSL://k1:9093"],'
                    b'"rack":null,"jmx_port":-1,"port":-1,"host":null,"version":5,"timestamp":"1700000000000"}')
    registration = BrokerIdZNode.decode(7, kafka_broker)
    assert (registration.host, registration.port, registration.timestamp_ms) == ("k1", 9093, 1700000000000)
    assert registration.endpoints == {"SSL": ("k1", 9093)}
    assert BrokerIdZNode.decode(1, BrokerIdZNode.encode({"PLAINTEXT": ("h", 1)}, None, 5)).timestamp_ms == 5

    # One broker is one node: one endpoint per listener, whatever the worker count.
    doc = orjson.loads(BrokerIdZNode.encode({"PLAINTEXT": ("h", 9092)}, None, 5))
    assert doc["endpoints"] == ["PLAINTEXT://h:9092"] and doc["listener_security_protocol_map"] == {"PLAINTEXT": "PLAINTEXT"}
    ipv6 = orjson.loads(BrokerIdZNode.encode({"PLAINTEXT": ("::1", 9092)}, None, 5))
    assert ipv6["endpoints"] == ["PLAINTEXT://[::1]:9092"]
    # Several listeners: every endpoint and the map; host and port are the PLAINTEXT protocol's.
    both = orjson.loads(BrokerIdZNode.encode({"INTERNAL": ("h", 9093), "SASL_SSL": ("h", 9094)},
                                             {"INTERNAL": "PLAINTEXT", "SASL_SSL": "SASL_SSL"}, 5))
    assert both["endpoints"] == ["INTERNAL://h:9093", "SASL_SSL://h:9094"]
    assert both["listener_security_protocol_map"] == {"INTERNAL": "PLAINTEXT", "SASL_SSL": "SASL_SSL"}
    assert (both["host"], both["port"]) == ("h", 9093)
    secured = orjson.loads(BrokerIdZNode.encode({"SASL_SSL": ("h", 9094)}, None, 5))
    assert (secured["host"], secured["port"]) == (None, -1)

    topic_id = uuid.uuid4()
    encoded = TopicZNode.encode(topic_id, {1: [2], 0: [1, 2]})
    assert orjson.loads(encoded)["partitions"] == {"0": [1, 2], "1": [2]}
    decoded = TopicZNode.decode("t", encoded)
    assert decoded.topic_id == topic_id and decoded.replicas == {0: [1, 2], 1: [2]}
    legacy = TopicZNode.decode("t", b'{"version":1,"partitions":{"0":[1]}}')  # Kafka < 2.8: no topic id
    assert legacy.topic_id is None and legacy.replicas == {0: [1]}
    with pytest.raises(ValueError, match="/brokers/topics/t"):
        TopicZNode.decode("t", b'{"version":3,"partitions":{"1":[1]}}')

    state = TopicPartitionStateZNode.decode("t", 0, b'{"controller_epoch":3,"leader":1,"version":1,'
                                                    b'"leader_epoch":4,"isr":[1,2]}')
    assert state == PartitionState(1, 4, [1, 2], 3)
    assert TopicConfigZNode.decode("t", None) == {}
    assert TopicConfigZNode.decode("t", b'{"version":1,"config":{"retention.ms":"5"}}') == {"retention.ms": "5"}
    assert ClusterIdZNode.decode(b'{"version":"1","id":"abc"}') == "abc"
    assert CoordinatorZNode.decode(b'{"version":1,"brokerid":4,"timestamp":"1"}') == 4
    assert CoordinatorEpochZNode.decode(b"12") == 12
    with pytest.raises(ValueError):
        CoordinatorEpochZNode.decode(b"twelve")

    for name in ("g", "a/b", "coordinator", "coordinator_epoch", ".", "..", "", "%", "%63oordinator", "é"):
        encoded_name = znode_name(name)
        assert "/" not in encoded_name and encoded_name not in ("coordinator", "coordinator_epoch", ".", "..", "")
        assert from_znode_name(encoded_name) == name


# ---------------------------------------------------------------------- a successor resumes the session
_HOLDER = """
import sys, time
from coordination.zookeeper import ZooKeeperBackend
backend = ZooKeeperBackend(sys.argv[1], 1, session_timeout=float(sys.argv[2]))
backend.start(10)
backend.register_broker(1, {"PLAINTEXT": ("127.0.0.1", 9001)})
epoch = backend.campaign(1, timeout=10)
session_id, password = backend.session_credentials()
print(epoch, session_id, password.hex(), flush=True)
time.sleep(600)
"""


def _killed_holder(zk_connect: str) -> tuple[int, int, bytes]:
    """A process that registered broker 1 and won the election, killed with SIGKILL
    (its session lives on until it times out): (epoch, session id, password)."""
    import os
    import signal
    import subprocess
    import sys

    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, zk_connect, str(SESSION_TIMEOUT)],
                              stdout=subprocess.PIPE, text=True,
                              cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(__file__)))))
    try:
        line = holder.stdout.readline() if holder.stdout is not None else ""
        epoch, session_id, password = line.split()
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(10)
    return int(epoch), int(session_id), bytes.fromhex(password)


def test_a_successor_resumes_the_dead_processs_session_and_wins_again_with_a_new_epoch(
        zk_connect: str, raw: KazooClient, make_backend: MakeBackend) -> None:
    epoch, session_id, password = _killed_holder(zk_connect)
    _, registered = raw.get("/brokers/ids/1")
    successor = ZooKeeperBackend(zk_connect, 1, session_timeout=SESSION_TIMEOUT, retry_deadline=WAIT,
                                 resume=(session_id, password))
    try:
        successor.start(WAIT)
        assert successor.session_id() == session_id
        successor.register_broker(1, {"PLAINTEXT": ("127.0.0.1", 9001)})  # its own node: no BrokerIdInUse, no wait
        assert raw.get("/brokers/ids/1")[1].czxid == registered.czxid  # never gone: the broker never looked dead
        assert successor.campaign(1, timeout=WAIT) == epoch + 1  # the dead one's writes are fenced
        assert successor.coordinator() == (1, epoch + 1)
        other = make_backend(2)
        with pytest.raises(TimeoutError):
            other.campaign(2, timeout=0.5)  # still held, by the resumed session
    finally:
        successor.close()


def test_resuming_an_expired_session_starts_a_new_one(zookeeper_server: ZooKeeperServer, zk_connect: str) -> None:
    epoch, session_id, password = _killed_holder(zk_connect)
    expire_session(zookeeper_server.address, session_id, password)
    successor = ZooKeeperBackend(zk_connect, 1, session_timeout=SESSION_TIMEOUT, retry_deadline=WAIT,
                                 resume=(session_id, password))
    try:
        successor.start(WAIT)
        wait_until(lambda: successor.session_id() not in (None, session_id), "a new session")
        successor.register_broker(1, {"PLAINTEXT": ("127.0.0.1", 9001)}, wait_for_stale=WAIT)
        assert successor.campaign(1, timeout=WAIT) == epoch + 1
    finally:
        successor.close()
