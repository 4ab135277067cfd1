"""ACL stores: ZooKeeperAcls against a real ZooKeeper, LocalAcls on real files.

The ZooKeeper tests check the znodes against what Apache Kafka's ZooKeeper-mode AclAuthorizer
writes and reads, with the paths spelt out here rather than taken from coordination/acls/zk_layout.py:
/kafka-acl/<Type>/<name> and /kafka-acl-extended/prefixed/<Type>/<name> holding
{"version":1,"acls":[{"principal","permissionType","operation","host"}]}, and the notifications
/kafka-acl-changes/acl_changes_<10 digits> ("TOPIC:orders") and
/kafka-acl-extended-changes/acl_changes_<10 digits> (a JSON event). Each test gets a fresh
chroot; every client a test opens is closed by its fixture; every wait is bounded.
"""

from __future__ import annotations

import os
import queue
import re
import stat
import threading
import time
from pathlib import Path
from typing import Any, Callable, TypeVar

import orjson
import pytest
from kazoo.client import KazooClient

from coordination.acls.model import AclBinding, Operation, PatternType, Permission, ResourceType
from coordination.acls.store import FILE_NAME, AclStore, LocalAcls, ZooKeeperAcls
from coordination.acls.zk_layout import decode_change_notification
from coordination.file_poller import INTERVAL as POLL_INTERVAL
from tests.unit.coordination.store_helpers import WAIT, MakeClient, next_call, queued, run_in_threads, znode_json

pytestmark = pytest.mark.timeout(60)

LITERAL_CHANGES = "/kafka-acl-changes"
EXTENDED_CHANGES = "/kafka-acl-extended-changes"

T = TypeVar("T")

L, P = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = Permission.ALLOW, Permission.DENY


def acl(rt: ResourceType, name: str, pt: PatternType, principal: str, op: Operation, perm: Permission = ALLOW,
        host: str = "*") -> AclBinding:
    return AclBinding(rt, name, pt, principal, host, op, perm)


# Several resource types, both pattern types; paths as Kafka names them.
SAMPLES: list[tuple[AclBinding, str]] = [
    (acl(ResourceType.TOPIC, "orders", L, "User:alice", Operation.READ), "/kafka-acl/Topic/orders"),
    (acl(ResourceType.TOPIC, "orders", L, "User:bob", Operation.WRITE, DENY, "10.0.0.1"), "/kafka-acl/Topic/orders"),
    (acl(ResourceType.TOPIC, "app-", P, "User:alice", Operation.DESCRIBE), "/kafka-acl-extended/prefixed/Topic/app-"),
    (acl(ResourceType.GROUP, "billing", L, "User:alice", Operation.READ), "/kafka-acl/Group/billing"),
    (acl(ResourceType.GROUP, "app-", P, "User:*", Operation.DELETE), "/kafka-acl-extended/prefixed/Group/app-"),
    (acl(ResourceType.CLUSTER, "kafka-cluster", L, "User:broker", Operation.CLUSTER_ACTION), "/kafka-acl/Cluster/kafka-cluster"),
    (acl(ResourceType.TRANSACTIONAL_ID, "tx-1", L, "User:alice", Operation.WRITE), "/kafka-acl/TransactionalId/tx-1"),
    (acl(ResourceType.TRANSACTIONAL_ID, "tx-", P, "User:bob", Operation.DESCRIBE),
     "/kafka-acl-extended/prefixed/TransactionalId/tx-"),
]
BINDINGS = [binding for binding, _ in SAMPLES]


def entries(client: KazooClient, path: str) -> list[dict[str, str]]:
    doc = znode_json(client, path)
    assert doc["version"] == 1 and set(doc) == {"version", "acls"}
    return sorted(doc["acls"], key=lambda e: (e["principal"], e["operation"]))


def changes(client: KazooClient, root: str) -> list[tuple[str, bytes]]:
    return [(name, client.get(f"{root}/{name}")[0]) for name in sorted(client.get_children(root))]


# ----------------------------------------------------------------------------- ZooKeeper
@pytest.mark.zookeeper
def test_zookeeper_add_all_remove_round_trip(make_client: MakeClient) -> None:
    client = make_client()
    store = ZooKeeperAcls(client)
    assert store.all() == []
    assert store.add(BINDINGS + BINDINGS[:2]) == BINDINGS  # duplicates in a batch count once
    assert store.add(BINDINGS[:3]) == []  # already present: not an error, not new
    assert store.all() == sorted(BINDINGS)
    assert ZooKeeperAcls(make_client()).all() == sorted(BINDINGS)  # another session reads the same

    for path in {path for _, path in SAMPLES}:
        assert client.exists(path) is not None, path
    assert entries(client, "/kafka-acl/Topic/orders") == [
        {"principal": "User:alice", "permissionType": "Allow", "operation": "Read", "host": "*"},
        {"principal": "User:bob", "permissionType": "Deny", "operation": "Write", "host": "10.0.0.1"}]
    assert entries(client, "/kafka-acl/Cluster/kafka-cluster") == [
        {"principal": "User:broker", "permissionType": "Allow", "operation": "ClusterAction", "host": "*"}]
    assert entries(client, "/kafka-acl-extended/prefixed/TransactionalId/tx-") == [
        {"principal": "User:bob", "permissionType": "Allow", "operation": "Describe", "host": "*"}]
    # KafkaZkClient.createAclPaths' nodes, for every resource type of both stores.
    for root in ("/kafka-acl", "/kafka-acl-extended/prefixed"):
        assert sorted(client.get_children(root)) == sorted(
            ["Topic", "Group", "Cluster", "TransactionalId", "DelegationToken", "User"])

    gone = [BINDINGS[0], BINDINGS[2], BINDINGS[5]]
    absent = acl(ResourceType.TOPIC, "orders", L, "User:carol", Operation.READ)
    assert store.remove(gone + [absent, acl(ResourceType.TOPIC, "a/b", L, "User:x", Operation.READ)]) == gone
    assert store.remove(gone) == []
    assert store.all() == sorted(set(BINDINGS) - set(gone))

    # A batch with one ACL Kafka would refuse writes nothing.
    bad = acl(ResourceType.CLUSTER, "other", L, "User:x", Operation.ALTER)
    fine = acl(ResourceType.TOPIC, "fine", L, "User:x", Operation.READ)
    with pytest.raises(ValueError, match="kafka-cluster"):
        store.add([fine, bad])
    with pytest.raises(ValueError):
        store.add([acl(ResourceType.TOPIC, "x", PatternType.MATCH, "User:x", Operation.READ)])
    assert client.exists("/kafka-acl/Topic/fine") is None


@pytest.mark.zookeeper
def test_zookeeper_reads_acl_znodes_as_kafka_writes_them(make_client: MakeClient) -> None:
    raw = make_client()
    # AclAuthorizer / ResourceZNode.encode, Kafka 3.x: Scala map order (up to 3.7) and Java HashMap order (3.8+).
    raw.create("/kafka-acl/Topic/orders",
               b'{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow","operation":"Read","host":"*"},'
               b'{"principal":"User:CN=bob,O=Org","permissionType":"Deny","operation":"Write","host":"10.0.0.1"}]}',
               makepath=True)
    raw.create("/kafka-acl-extended/prefixed/TransactionalId/tx-",
               b'{"acls":[{"host":"*","operation":"IdempotentWrite","permissionType":"Allow","principal":"User:carol"}],'
               b'"version":1}', makepath=True)
    raw.create("/kafka-acl/Cluster/kafka-cluster",
               b'{"version":1,"acls":[{"principal":"User:broker","permissionType":"Allow","operation":"All","host":"*"}]}',
               makepath=True)
    raw.create("/kafka-acl/Group/broken", b"not json", makepath=True)  # logged and skipped

    store = ZooKeeperAcls(make_client())
    kafkas = [
        acl(ResourceType.TOPIC, "orders", L, "User:alice", Operation.READ),
        acl(ResourceType.TOPIC, "orders", L, "User:CN=bob,O=Org", Operation.WRITE, DENY, "10.0.0.1"),
        acl(ResourceType.TRANSACTIONAL_ID, "tx-", P, "User:carol", Operation.IDEMPOTENT_WRITE),
        acl(ResourceType.CLUSTER, "kafka-cluster", L, "User:broker", Operation.ALL),
    ]
    assert store.all() == sorted(kafkas)

    new = acl(ResourceType.TOPIC, "orders", L, "User:dave", Operation.DESCRIBE)
    assert store.add([new, kafkas[0]]) == [new]  # Kafka's entries kept
    assert [e["principal"] for e in entries(raw, "/kafka-acl/Topic/orders")] == ["User:CN=bob,O=Org", "User:alice", "User:dave"]
    # An unreadable znode is never overwritten.
    with pytest.raises(ValueError, match="broken"):
        store.add([acl(ResourceType.GROUP, "broken", L, "User:x", Operation.READ)])
    assert raw.get("/kafka-acl/Group/broken")[0] == b"not json"


@pytest.mark.zookeeper
def test_zookeeper_removing_the_last_acl_deletes_the_znode(make_client: MakeClient) -> None:
    client = make_client()
    store = ZooKeeperAcls(client)
    a, b = BINDINGS[0], BINDINGS[1]  # /kafka-acl/Topic/orders
    prefixed = BINDINGS[4]  # /kafka-acl-extended/prefixed/Group/app-
    store.add([a, b, prefixed])
    assert store.remove([a]) == [a]
    assert [e["principal"] for e in entries(client, "/kafka-acl/Topic/orders")] == ["User:bob"]
    assert store.remove([b, prefixed]) == [b, prefixed]
    assert client.exists("/kafka-acl/Topic/orders") is None
    assert client.exists("/kafka-acl-extended/prefixed/Group/app-") is None
    assert client.exists("/kafka-acl/Topic") is not None  # the type nodes stay, as Kafka's
    assert store.all() == []
    assert store.add([a]) == [a]  # and the znode comes back
    assert entries(client, "/kafka-acl/Topic/orders")[0]["principal"] == "User:alice"


@pytest.mark.zookeeper
def test_zookeeper_writes_kafkas_change_notifications(make_client: MakeClient) -> None:
    client = make_client()
    store = ZooKeeperAcls(client)
    topic, group_prefix, txn = BINDINGS[0], BINDINGS[4], BINDINGS[6]
    store.add([topic, group_prefix, txn])
    literal = changes(client, LITERAL_CHANGES)
    assert [data for _, data in literal] == [b"TOPIC:orders", b"TRANSACTIONAL_ID:tx-1"]
    extended = changes(client, EXTENDED_CHANGES)
    assert [orjson.loads(data) for _, data in extended] == [
        {"version": 1, "resourceType": "GROUP", "name": "app-", "patternType": "PREFIXED"}]
    for root, found in ((LITERAL_CHANGES, literal), (EXTENDED_CHANGES, extended)):
        for name, data in found:
            assert re.fullmatch(r"acl_changes_\d{10}", name)
            assert client.get(f"{root}/{name}")[1].ephemeralOwner == 0  # persistent
            assert decode_change_notification(f"{root}/{name}", data)[2] in ("orders", "tx-1", "app-")

    assert store.add([topic]) == []  # nothing changed: nothing announced
    assert store.remove([BINDINGS[1]]) == []
    assert len(changes(client, LITERAL_CHANGES)) == 2
    assert store.remove([topic, group_prefix]) == [topic, group_prefix]
    assert [data for _, data in changes(client, LITERAL_CHANGES)] == [b"TOPIC:orders", b"TRANSACTIONAL_ID:tx-1", b"TOPIC:orders"]
    assert len(changes(client, EXTENDED_CHANGES)) == 2
    sequences = [int(name[len("acl_changes_"):]) for name, _ in changes(client, LITERAL_CHANGES)]
    assert sequences == sorted(set(sequences))


@pytest.mark.zookeeper
def test_zookeeper_watch_fires_on_another_clients_changes(make_client: MakeClient) -> None:
    watched = ZooKeeperAcls(make_client())
    calls: queue.Queue[str] = queue.Queue()
    watched.watch(lambda: calls.put("changed"))
    assert queued(calls) == 1  # once at registration, not once per underlying watch

    other = ZooKeeperAcls(make_client())
    assert queued(calls) == 0
    other.add([BINDINGS[0]])  # a literal change
    next_call(calls)
    queued(calls)
    other.add([BINDINGS[2]])  # a prefixed change
    next_call(calls)
    assert watched.all() == sorted([BINDINGS[0], BINDINGS[2]])
    queued(calls)
    other.remove([BINDINGS[0]])
    next_call(calls)

    watched.close()
    with pytest.raises(RuntimeError):
        watched.watch(lambda: None)


@pytest.mark.zookeeper
def test_zookeeper_a_write_between_read_and_commit_is_not_lost(make_client: MakeClient) -> None:
    """Another writer (a Kafka broker, say) changes the resource's znode after the store read
    it and before it commits: on a missing znode (NodeExists), on an existing one
    (BadVersion), and during a removal. The store reads again and keeps the other's ACL."""
    raw = make_client()
    path = "/kafka-acl/Topic/orders"
    theirs = b'{"version":1,"acls":[{"principal":"User:kafka","permissionType":"Allow","operation":"Alter","host":"*"}]}'
    theirs_too = (b'{"version":1,"acls":[{"principal":"User:kafka","permissionType":"Allow","operation":"Alter","host":"*"},'
                  b'{"principal":"User:alice","permissionType":"Allow","operation":"Read","host":"*"},'
                  b'{"principal":"User:kafka","permissionType":"Allow","operation":"Create","host":"*"}]}')
    interfere: list[Callable[[], object]] = []
    seen: list[str] = []

    def call(fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        seen.append(getattr(fn, "__name__", repr(fn)))
        if seen[-1] == "_commit" and interfere:
            interfere.pop()()
        return fn(*args, **kwargs)

    store = ZooKeeperAcls(make_client(), call)
    kafka_alter = acl(ResourceType.TOPIC, "orders", L, "User:kafka", Operation.ALTER)
    kafka_create = acl(ResourceType.TOPIC, "orders", L, "User:kafka", Operation.CREATE)
    alice, bob = BINDINGS[0], acl(ResourceType.TOPIC, "orders", L, "User:bob", Operation.READ)

    interfere.append(lambda: raw.create(path, theirs, makepath=True))
    assert store.add([alice]) == [alice]
    assert interfere == []
    assert store.all() == sorted([kafka_alter, alice])

    interfere.append(lambda: raw.set(path, theirs_too))
    assert store.add([bob]) == [bob]
    assert interfere == []
    assert store.all() == sorted([kafka_alter, kafka_create, alice, bob])

    interfere.append(lambda: raw.set(path, theirs))  # drops alice and bob, keeps kafka's
    assert store.remove([kafka_alter]) == [kafka_alter]
    assert interfere == []
    assert client_exists(raw, path) is False  # the other writer's set was empty once ours went
    assert store.all() == []
    # Only committed writes notified (the failed transactions rolled their notification back).
    assert len(changes(raw, LITERAL_CHANGES)) == 3
    assert {"ensure_path", "get", "_commit", "once"} <= set(seen)  # every request through ``call``


@pytest.mark.zookeeper
def test_zookeeper_a_commit_whose_answer_was_lost_counts_once(make_client: MakeClient) -> None:
    """The retrying call wrapper runs a commit again when the connection dropped before its
    answer came back, though it went through: the rerun fails (NodeExists, BadVersion), the
    store reads again, finds its change made, and reports it done, announced once."""
    def call(fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        if getattr(fn, "__name__", "") == "_commit":
            fn(*args, **kwargs)  # applied; its answer "lost"
        return fn(*args, **kwargs)

    client = make_client()
    store = ZooKeeperAcls(client, call)
    assert store.add([BINDINGS[0]]) == [BINDINGS[0]]  # create, then NodeExists
    assert store.add([BINDINGS[1]]) == [BINDINGS[1]]  # set_data, then BadVersion
    assert store.remove(BINDINGS[:2]) == BINDINGS[:2]  # delete, then NoNode
    assert store.all() == []
    assert [data for _, data in changes(client, LITERAL_CHANGES)] == [b"TOPIC:orders"] * 3


def client_exists(client: KazooClient, path: str) -> bool:
    return client.exists(path) is not None


@pytest.mark.zookeeper
def test_zookeeper_concurrent_adds_to_one_resource_lose_nothing(make_client: MakeClient) -> None:
    stores = [ZooKeeperAcls(make_client()), ZooKeeperAcls(make_client())]
    rounds = 15
    start = threading.Barrier(len(stores))

    def mine(i: int, n: int) -> AclBinding:
        return acl(ResourceType.GROUP, "shared", L, f"User:writer-{i}-{n}", Operation.READ)

    def run(i: int) -> None:
        start.wait(WAIT)
        for n in range(rounds):
            assert stores[i].add([mine(i, n)]) == [mine(i, n)]

    errors = run_in_threads(run, range(len(stores)))  # each thread ended in time
    assert errors == []
    assert stores[0].all() == sorted(mine(i, n) for i in range(len(stores)) for n in range(rounds))
    assert len(changes(make_client(), LITERAL_CHANGES)) == rounds * len(stores)  # each write committed once


# ----------------------------------------------------------------------------- local file
def test_local_add_all_remove_round_trip(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"  # created on first write
    store = LocalAcls(str(data_dir))
    assert store.all() == []
    assert store.add(BINDINGS + BINDINGS[:1]) == BINDINGS
    assert store.add(BINDINGS[:2]) == []
    assert store.all() == sorted(BINDINGS)
    assert LocalAcls(str(data_dir)).all() == sorted(BINDINGS)  # another instance reads the file
    doc = orjson.loads((data_dir / FILE_NAME).read_bytes())
    assert doc["version"] == 1 and len(doc["acls"]) == len(BINDINGS)
    assert {"resourceType": "TRANSACTIONAL_ID", "name": "tx-", "patternType": "PREFIXED", "principal": "User:bob",
            "host": "*", "operation": "Describe", "permissionType": "Allow"} in doc["acls"]

    assert store.remove([BINDINGS[0], BINDINGS[0], BINDINGS[7]]) == [BINDINGS[0], BINDINGS[7]]
    assert store.remove([BINDINGS[0]]) == []
    assert store.all() == sorted(BINDINGS[1:7])
    with pytest.raises(ValueError):
        store.add([acl(ResourceType.CLUSTER, "other", L, "User:x", Operation.ALTER)])
    assert store.all() == sorted(BINDINGS[1:7])


def test_local_file_is_private_and_replaced_atomically(tmp_path: Path) -> None:
    store = LocalAcls(str(tmp_path))
    old = os.umask(0)
    try:
        store.add(BINDINGS[:1])
    finally:
        os.umask(old)
    path = tmp_path / FILE_NAME
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    inode = path.stat().st_ino
    store.add(BINDINGS[1:2])
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert path.stat().st_ino != inode  # a new file renamed over the old
    # A stale, readable tmp file (a crash of this very thread's earlier write) is made private too.
    stale = tmp_path / f"{FILE_NAME}.{os.getpid()}.{threading.get_ident()}.tmp"
    stale.write_bytes(b"{}")
    stale.chmod(0o644)
    store.add(BINDINGS[2:3])
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert len(store.all()) == 3
    assert sorted(os.listdir(tmp_path)) == [FILE_NAME, FILE_NAME + ".lock"]  # no tmp file left behind


def test_local_concurrent_writers_lose_nothing(tmp_path: Path) -> None:
    def run(prefix: str) -> None:
        store = LocalAcls(str(tmp_path))  # one store each: the flock, not the mutex, must serialize
        for i in range(15):
            store.add([acl(ResourceType.TOPIC, "t", L, f"User:{prefix}-{i}", Operation.READ)])

    errors = run_in_threads(run, "abc")  # each thread ended in time
    assert errors == []
    assert len(LocalAcls(str(tmp_path)).all()) == 45


def test_local_watch_fires_on_change_and_close_stops_it(tmp_path: Path) -> None:
    watched = LocalAcls(str(tmp_path))
    calls: queue.Queue[str] = queue.Queue()
    watched.watch(lambda: calls.put("changed"))
    assert queued(calls) == 1

    writer = LocalAcls(str(tmp_path))
    writer.add(BINDINGS[:1])  # the file appears
    next_call(calls)
    queued(calls)
    writer.remove(BINDINGS[:1])
    next_call(calls)
    assert watched.all() == []

    thread = watched._file.thread
    assert thread is not None and thread.is_alive() and thread.daemon
    watched.close()
    assert watched._file.thread is None  # this file is no longer polled (the thread is the process's)
    writer.add(BINDINGS[:1])  # a change after the close
    time.sleep(4 * POLL_INTERVAL)
    assert queued(calls) == 0
    with pytest.raises(RuntimeError):
        watched.watch(lambda: None)


@pytest.mark.zookeeper
def test_both_stores_are_acl_stores(tmp_path: Path, make_client: MakeClient) -> None:
    stores: list[AclStore] = [LocalAcls(str(tmp_path)), ZooKeeperAcls(make_client())]
    for store in stores:
        calls: queue.Queue[str] = queue.Queue()
        store.watch(lambda: calls.put("changed"))
        assert store.add(BINDINGS[:3]) == BINDINGS[:3]
        assert store.remove(BINDINGS[1:]) == BINDINGS[1:3]
        assert store.all() == BINDINGS[:1]
        assert queued(calls) >= 1
        store.close()
