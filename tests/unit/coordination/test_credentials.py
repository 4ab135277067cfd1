"""SCRAM credential stores: ZooKeeperCredentials against a real ZooKeeper, LocalCredentials on real files.

The ZooKeeper tests check the znodes byte for byte against what Apache Kafka (ZooKeeper mode)
writes and reads: /config/users/<sanitized user> {"version":1,"config":{...}} and
/config/changes/config_change_<10 digits> {"version":2,"entity_path":"users/<sanitized user>"}.
Each test gets a fresh chroot; every client a test opens is closed by its fixture; every
wait is bounded.
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

from coordination.credentials import (
    CHANGES_PATH,
    FILE_NAME,
    USERS_PATH,
    CredentialStore,
    LocalCredentials,
    ZooKeeperCredentials,
    desanitize,
    sanitize,
)
from coordination.file_poller import INTERVAL as POLL_INTERVAL
from tests.unit.coordination.store_helpers import WAIT, MakeClient, next_call, queued, run_in_threads, znode_json

pytestmark = pytest.mark.timeout(60)

CRED_256 = "salt=c2FsdDI1Ng==,stored_key=c3RvcmVkMjU2,server_key=c2VydmVyMjU2,iterations=4096"
CRED_512 = "salt=c2FsdDUxMg==,stored_key=c3RvcmVkNTEy,server_key=c2VydmVyNTEy,iterations=4096"
ALICE = "alice@EXAMPLE.COM"
ALICE_ZNODE = "alice%40EXAMPLE.COM"

T = TypeVar("T")


def notifications(client: KazooClient) -> list[tuple[str, object]]:
    names = sorted(client.get_children(CHANGES_PATH))
    return [(name, znode_json(client, f"{CHANGES_PATH}/{name}")) for name in names]


# ----------------------------------------------------------------------------- names
def test_sanitize_is_kafkas_sanitizer() -> None:
    # Expected values: Kafka's Sanitizer.sanitize (java.net.URLEncoder, then "*" -> %2A and
    # "+" -> %20) run on a JDK 17; "~" is encoded, unlike Python's quote().
    cases = {
        "CN=Some characters !@#$%&*()_-+=';:,/~":
            "CN%3DSome%20characters%20%21%40%23%24%25%26%2A%28%29_-%2B%3D%27%3B%3A%2C%2F%7E",
        ALICE: ALICE_ZNODE,
        "bob smith*~": "bob%20smith%2A%7E",
        "Zoë/ü€😀": "Zo%C3%AB%2F%C3%BC%E2%82%AC%F0%9F%98%80",
        "<default>": "%3Cdefault%3E",
        "a.b-c_d": "a.b-c_d",
    }
    for name, expected in cases.items():
        assert sanitize(name) == expected
        assert desanitize(expected) == name
    assert desanitize("bob+smith") == "bob smith"  # URLDecoder reads "+" as a space


# ----------------------------------------------------------------------------- ZooKeeper
@pytest.mark.zookeeper
def test_zookeeper_set_all_delete_round_trip(make_client: MakeClient) -> None:
    client = make_client()
    store = ZooKeeperCredentials(client)
    assert store.all() == {}
    store.set(ALICE, "SCRAM-SHA-256", CRED_256)
    store.set(ALICE, "SCRAM-SHA-512", CRED_512)
    store.set("bob smith", "SCRAM-SHA-512", CRED_512)
    assert store.all() == {ALICE: {"SCRAM-SHA-256": CRED_256, "SCRAM-SHA-512": CRED_512},
                           "bob smith": {"SCRAM-SHA-512": CRED_512}}
    assert sorted(client.get_children(USERS_PATH)) == [ALICE_ZNODE, "bob%20smith"]
    assert znode_json(client, f"{USERS_PATH}/{ALICE_ZNODE}") == {
        "version": 1, "config": {"SCRAM-SHA-256": CRED_256, "SCRAM-SHA-512": CRED_512}}

    store.set(ALICE, "SCRAM-SHA-256", CRED_512)  # replaces
    assert store.all()[ALICE]["SCRAM-SHA-256"] == CRED_512
    assert store.delete(ALICE, "SCRAM-SHA-256") is True
    assert store.delete(ALICE, "SCRAM-SHA-256") is False
    assert store.delete("nobody", "SCRAM-SHA-256") is False
    assert client.exists(f"{USERS_PATH}/nobody") is None  # a delete of nothing writes nothing
    assert store.delete(ALICE, "SCRAM-SHA-512") is True
    assert store.all() == {"bob smith": {"SCRAM-SHA-512": CRED_512}}
    # As Kafka: the user's znode stays, with an empty config.
    assert znode_json(client, f"{USERS_PATH}/{ALICE_ZNODE}") == {"version": 1, "config": {}}

    with pytest.raises(ValueError):
        store.set(ALICE, "SCRAM-SHA-1", CRED_256)
    with pytest.raises(ValueError):
        store.set(ALICE, "producer_byte_rate", "1024")
    with pytest.raises(ValueError):
        store.set("", "SCRAM-SHA-256", CRED_256)
    with pytest.raises(ValueError):
        store.delete(".", "SCRAM-SHA-256")


@pytest.mark.zookeeper
def test_zookeeper_reads_kafkas_znodes_and_keeps_the_other_keys(make_client: MakeClient) -> None:
    raw = make_client()
    path = f"{USERS_PATH}/{ALICE_ZNODE}"
    # As Kafka's ConfigEntityZNode.encode writes it (Jackson, a Properties object: any key order).
    raw.create(path, ('{"version":1,"config":{"producer_byte_rate":"1024","SCRAM-SHA-256":"' + CRED_256 + '"}}').encode(),
               makepath=True)
    raw.create(f"{path}/clients/app", b'{"version":1,"config":{"consumer_byte_rate":"10"}}', makepath=True)
    raw.create(f"{USERS_PATH}/bob", b'{"version":1,"config":{"consumer_byte_rate":"2048"}}')
    raw.create(f"{USERS_PATH}/<default>", b'{"version":1,"config":{"producer_byte_rate":"1"}}')
    raw.create(f"{USERS_PATH}/empty", b"")  # Kafka reads null data as no config

    store = ZooKeeperCredentials(make_client())
    assert store.all() == {ALICE: {"SCRAM-SHA-256": CRED_256}}

    store.set(ALICE, "SCRAM-SHA-512", CRED_512)
    assert znode_json(raw, path) == {"version": 1, "config": {
        "producer_byte_rate": "1024", "SCRAM-SHA-256": CRED_256, "SCRAM-SHA-512": CRED_512}}
    assert store.delete(ALICE, "SCRAM-SHA-256") is True
    assert store.delete(ALICE, "SCRAM-SHA-512") is True
    assert znode_json(raw, path) == {"version": 1, "config": {"producer_byte_rate": "1024"}}
    assert znode_json(raw, f"{path}/clients/app") == {"version": 1, "config": {"consumer_byte_rate": "10"}}
    assert store.all() == {}

    store.set("bob", "SCRAM-SHA-256", CRED_256)  # a quota-only user gains a credential
    assert znode_json(raw, f"{USERS_PATH}/bob") == {"version": 1, "config": {
        "consumer_byte_rate": "2048", "SCRAM-SHA-256": CRED_256}}


@pytest.mark.zookeeper
def test_zookeeper_unreadable_znode_is_skipped_and_never_overwritten(make_client: MakeClient) -> None:
    raw = make_client()
    raw.create(f"{USERS_PATH}/eve", b"not json", makepath=True)
    store = ZooKeeperCredentials(make_client())
    store.set(ALICE, "SCRAM-SHA-256", CRED_256)
    assert store.all() == {ALICE: {"SCRAM-SHA-256": CRED_256}}
    with pytest.raises(ValueError, match="/config/users/eve"):
        store.set("eve", "SCRAM-SHA-256", CRED_256)
    assert raw.get(f"{USERS_PATH}/eve")[0] == b"not json"


@pytest.mark.zookeeper
def test_zookeeper_writes_kafkas_change_notifications(make_client: MakeClient) -> None:
    client = make_client()
    store = ZooKeeperCredentials(client)
    store.set(ALICE, "SCRAM-SHA-256", CRED_256)
    first = notifications(client)
    assert [doc for _, doc in first] == [{"version": 2, "entity_path": f"users/{ALICE_ZNODE}"}]
    assert re.fullmatch(r"config_change_\d{10}", first[0][0])
    assert client.get(f"{CHANGES_PATH}/{first[0][0]}")[1].ephemeralOwner == 0  # persistent

    assert store.delete(ALICE, "SCRAM-SHA-256") is True
    assert store.delete(ALICE, "SCRAM-SHA-256") is False  # nothing changed: no notification
    store.set("bob smith", "SCRAM-SHA-512", CRED_512)
    changes = notifications(client)
    assert [doc for _, doc in changes] == [{"version": 2, "entity_path": f"users/{ALICE_ZNODE}"},
                                           {"version": 2, "entity_path": f"users/{ALICE_ZNODE}"},
                                           {"version": 2, "entity_path": "users/bob%20smith"}]
    sequences = [int(name[len("config_change_"):]) for name, _ in changes]
    assert sequences == sorted(set(sequences))


@pytest.mark.zookeeper
def test_zookeeper_a_write_between_read_and_commit_is_not_lost(make_client: MakeClient) -> None:
    """Another writer changes the user's znode after the store read it and before it
    commits (once on an existing znode: BadVersion; once on a missing one: NodeExists):
    the store reads again, and neither write loses the other's keys."""
    raw = make_client()
    path = f"{USERS_PATH}/{ALICE_ZNODE}"
    interfere: list[Callable[[], object]] = []

    def call(fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        if getattr(fn, "__name__", "") == "_commit" and interfere:
            interfere.pop()()
        return fn(*args, **kwargs)

    store = ZooKeeperCredentials(make_client(), call)
    # Missing znode: someone (Kafka's kafka-configs, say) creates it first, with a quota.
    interfere.append(lambda: raw.create(path, b'{"version":1,"config":{"producer_byte_rate":"1024"}}', makepath=True))
    store.set(ALICE, "SCRAM-SHA-256", CRED_256)
    assert interfere == []
    assert znode_json(raw, path) == {"version": 1, "config": {"producer_byte_rate": "1024", "SCRAM-SHA-256": CRED_256}}
    # Existing znode: someone adds a key after our read.
    interfere.append(lambda: raw.set(path, orjson.dumps({"version": 1, "config": {
        "producer_byte_rate": "1024", "SCRAM-SHA-256": CRED_256, "consumer_byte_rate": "2048"}})))
    store.set(ALICE, "SCRAM-SHA-512", CRED_512)
    assert interfere == []
    assert znode_json(raw, path) == {"version": 1, "config": {
        "producer_byte_rate": "1024", "consumer_byte_rate": "2048", "SCRAM-SHA-256": CRED_256, "SCRAM-SHA-512": CRED_512}}
    # The same for a delete.
    interfere.append(lambda: raw.set(path, orjson.dumps({"version": 1, "config": {
        "SCRAM-SHA-256": CRED_256, "SCRAM-SHA-512": CRED_512, "request_percentage": "50"}})))
    assert store.delete(ALICE, "SCRAM-SHA-256") is True
    assert znode_json(raw, path) == {"version": 1, "config": {"SCRAM-SHA-512": CRED_512, "request_percentage": "50"}}
    # Only committed writes notified (the failed transactions rolled their notification back).
    assert len(notifications(raw)) == 3


@pytest.mark.zookeeper
def test_zookeeper_concurrent_writers_lose_nothing(make_client: MakeClient) -> None:
    stores = {"SCRAM-SHA-256": ZooKeeperCredentials(make_client()), "SCRAM-SHA-512": ZooKeeperCredentials(make_client())}
    rounds = 25
    start = threading.Barrier(len(stores))

    def run(mechanism: str) -> None:
        start.wait(WAIT)
        for i in range(rounds):
            stores[mechanism].set(ALICE, mechanism, f"{mechanism}-{i}")

    errors = run_in_threads(run, stores)  # each thread ended in time
    assert errors == []
    final = stores["SCRAM-SHA-256"].all()
    assert final == {ALICE: {m: f"{m}-{rounds - 1}" for m in stores}}
    # Every write committed exactly once, each with its notification.
    assert len(notifications(make_client())) == rounds * len(stores)


@pytest.mark.zookeeper
def test_zookeeper_watch_fires_on_another_clients_changes(make_client: MakeClient) -> None:
    watched = ZooKeeperCredentials(make_client())
    calls: queue.Queue[str] = queue.Queue()
    watched.watch(lambda: calls.put("changed"))
    assert queued(calls) == 1  # once at registration, not once per underlying watch

    other = ZooKeeperCredentials(make_client())
    other.set(ALICE, "SCRAM-SHA-256", CRED_256)  # a new user znode and a notification
    next_call(calls)
    queued(calls)
    other.set(ALICE, "SCRAM-SHA-512", CRED_512)  # an existing znode: only the notification says so
    next_call(calls)
    assert watched.all() == {ALICE: {"SCRAM-SHA-256": CRED_256, "SCRAM-SHA-512": CRED_512}}
    queued(calls)
    raw = make_client()
    raw.create(f"{USERS_PATH}/carol", b'{"version":1,"config":{}}')  # /config/users' children, no notification
    next_call(calls)

    second: queue.Queue[str] = queue.Queue()
    watched.watch(lambda: second.put("changed"))
    assert queued(second) == 1
    assert watched.delete(ALICE, "SCRAM-SHA-512") is True
    next_call(second)
    next_call(calls)

    watched.close()
    with pytest.raises(RuntimeError):
        watched.watch(lambda: None)


@pytest.mark.zookeeper
def test_zookeeper_requests_go_through_the_call_wrapper(make_client: MakeClient) -> None:
    seen: list[str] = []

    def call(fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        seen.append(getattr(fn, "__name__", repr(fn)))
        return fn(*args, **kwargs)

    store = ZooKeeperCredentials(make_client(), call)
    store.set(ALICE, "SCRAM-SHA-256", CRED_256)
    assert store.all() == {ALICE: {"SCRAM-SHA-256": CRED_256}}
    assert {"ensure_path", "get", "_commit", "once"} <= set(seen)


# ----------------------------------------------------------------------------- local file
def file_doc(directory: Path) -> object:
    return orjson.loads((directory / FILE_NAME).read_bytes())


def test_local_set_all_delete_round_trip(tmp_path: Path) -> None:
    store = LocalCredentials(str(tmp_path / "data"))  # the directory is created on first write
    assert store.all() == {}
    store.set(ALICE, "SCRAM-SHA-256", CRED_256)
    store.set(ALICE, "SCRAM-SHA-512", CRED_512)
    store.set("bob", "SCRAM-SHA-256", CRED_256)
    expected = {ALICE: {"SCRAM-SHA-256": CRED_256, "SCRAM-SHA-512": CRED_512}, "bob": {"SCRAM-SHA-256": CRED_256}}
    assert store.all() == expected
    assert file_doc(tmp_path / "data") == {"version": 1, "users": expected}
    assert LocalCredentials(str(tmp_path / "data")).all() == expected  # another instance reads the file

    assert store.delete("bob", "SCRAM-SHA-256") is True
    assert store.delete("bob", "SCRAM-SHA-256") is False
    assert file_doc(tmp_path / "data") == {"version": 1, "users": {ALICE: expected[ALICE]}}  # empty users dropped
    with pytest.raises(ValueError):
        store.delete(ALICE, "SCRAM-SHA-1")
    with pytest.raises(ValueError):
        store.set("", "SCRAM-SHA-256", CRED_256)


def test_local_file_is_private_whatever_the_umask(tmp_path: Path) -> None:
    store = LocalCredentials(str(tmp_path))
    old = os.umask(0)
    try:
        store.set(ALICE, "SCRAM-SHA-256", CRED_256)
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / FILE_NAME).stat().st_mode) == 0o600
    store.set("bob", "SCRAM-SHA-256", CRED_256)
    assert stat.S_IMODE((tmp_path / FILE_NAME).stat().st_mode) == 0o600


def test_local_writes_replace_the_file_atomically(tmp_path: Path) -> None:
    store = LocalCredentials(str(tmp_path))
    path = tmp_path / FILE_NAME
    store.set(ALICE, "SCRAM-SHA-256", CRED_256)
    inode = path.stat().st_ino
    store.set(ALICE, "SCRAM-SHA-512", CRED_512)
    assert path.stat().st_ino != inode  # a new file renamed over the old, never rewritten in place

    stop = threading.Event()
    bad: list[bytes] = []
    reads = [0]

    def read_all_the_time() -> None:
        while not stop.is_set():
            data = path.read_bytes()
            reads[0] += 1
            try:
                doc = orjson.loads(data)
                if not (isinstance(doc, dict) and doc.get("version") == 1 and ALICE in doc["users"]):
                    bad.append(data)
            except orjson.JSONDecodeError:
                bad.append(data)

    reader = threading.Thread(target=read_all_the_time, daemon=True)
    reader.start()
    try:
        for i in range(150):
            store.set(f"user-{i % 7}", "SCRAM-SHA-256", f"{CRED_256}-{i}" * (1 + i % 5))
    finally:
        stop.set()
        reader.join(WAIT)
    assert not reader.is_alive()
    assert reads[0] > 0
    assert bad == []
    assert sorted(os.listdir(tmp_path)) == [FILE_NAME, FILE_NAME + ".lock"]  # no tmp file left behind


def test_local_concurrent_writers_lose_nothing(tmp_path: Path) -> None:
    def run(prefix: str) -> None:
        store = LocalCredentials(str(tmp_path))  # one store each: the flock, not the mutex, must serialize
        for i in range(20):
            store.set(f"{prefix}-{i}", "SCRAM-SHA-512", CRED_512)

    errors = run_in_threads(run, ("a", "b", "c"))  # each thread ended in time
    assert errors == []
    assert sorted(LocalCredentials(str(tmp_path)).all()) == sorted(f"{p}-{i}" for p in "abc" for i in range(20))


def test_local_watch_fires_on_change_and_close_stops_it(tmp_path: Path) -> None:
    watched = LocalCredentials(str(tmp_path))
    calls: queue.Queue[str] = queue.Queue()
    watched.watch(lambda: calls.put("changed"))
    assert queued(calls) == 1

    writer = LocalCredentials(str(tmp_path))
    writer.set(ALICE, "SCRAM-SHA-256", CRED_256)  # the file appears
    next_call(calls)
    queued(calls)
    writer.set(ALICE, "SCRAM-SHA-256", CRED_512)  # same size, another inode
    next_call(calls)
    assert watched.all() == {ALICE: {"SCRAM-SHA-256": CRED_512}}

    thread = watched._file.thread
    assert thread is not None and thread.is_alive() and thread.daemon
    second: queue.Queue[str] = queue.Queue()
    watched.watch(lambda: second.put("changed"))
    assert watched._file.thread is thread  # one polling thread per store
    writer.delete(ALICE, "SCRAM-SHA-256")
    next_call(second)

    watched.close()
    assert watched._file.thread is None  # this file is no longer polled (the thread is the process's)
    writer.set(ALICE, "SCRAM-SHA-256", CRED_256)  # a change after the close
    time.sleep(4 * POLL_INTERVAL)
    assert queued(calls) == 0 and queued(second) == 0
    with pytest.raises(RuntimeError):
        watched.watch(lambda: None)


@pytest.mark.zookeeper
def test_both_stores_are_credential_stores(tmp_path: Path, make_client: MakeClient) -> None:
    stores: list[CredentialStore] = [LocalCredentials(str(tmp_path)), ZooKeeperCredentials(make_client())]
    for store in stores:
        calls: queue.Queue[str] = queue.Queue()
        store.watch(lambda: calls.put("changed"))
        store.set(ALICE, "SCRAM-SHA-256", CRED_256)
        assert store.all() == {ALICE: {"SCRAM-SHA-256": CRED_256}}
        assert store.delete(ALICE, "SCRAM-SHA-256") is True
        assert store.all() == {}
        assert queued(calls) >= 1
        store.close()
