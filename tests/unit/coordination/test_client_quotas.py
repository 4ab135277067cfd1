"""Client quota stores: ZooKeeperQuotas against a real ZooKeeper (Kafka's znodes, shared with
the SCRAM credentials of /config/users), LocalQuotas on a real file."""

from __future__ import annotations

import queue
from pathlib import Path

import pytest

from coordination.client_quotas import LocalQuotas, ZooKeeperQuotas, entity
from coordination.credentials import CHANGES_PATH, USERS_PATH, ZooKeeperCredentials
from tests.unit.coordination.store_helpers import MakeClient, next_call, znode_json

pytestmark = pytest.mark.timeout(60)

CRED_256 = "salt=c2FsdDI1Ng==,stored_key=c3RvcmVkMjU2,server_key=c2VydmVyMjU2,iterations=4096"
ALICE = "alice@EXAMPLE.COM"
ALICE_ZNODE = "alice%40EXAMPLE.COM"


@pytest.mark.zookeeper
def test_zookeeper_quotas_land_in_kafkas_znodes(make_client: MakeClient) -> None:
    raw = make_client()
    store = ZooKeeperQuotas(make_client())
    store.alter(entity([("user", ALICE)]), {"producer_byte_rate": 1048576.0, "request_percentage": 50.0})
    store.alter(entity([("user", ALICE), ("client-id", "app/1")]), {"consumer_byte_rate": 2048.0})
    store.alter(entity([("user", None), ("client-id", None)]), {"producer_byte_rate": 10.0})
    store.alter(entity([("client-id", None)]), {"controller_mutation_rate": 2.5})
    store.alter(entity([("ip", "10.0.0.1")]), {"connection_creation_rate": 30.0})
    store.alter(entity([("ip", None)]), {"connection_creation_rate": 5.0})

    assert znode_json(raw, f"{USERS_PATH}/{ALICE_ZNODE}") == {"version": 1, "config": {
        "producer_byte_rate": "1048576", "request_percentage": "50.0"}}
    assert znode_json(raw, f"{USERS_PATH}/{ALICE_ZNODE}/clients/app%2F1") == {
        "version": 1, "config": {"consumer_byte_rate": "2048"}}
    assert znode_json(raw, f"{USERS_PATH}/<default>/clients/<default>") == {
        "version": 1, "config": {"producer_byte_rate": "10"}}
    assert znode_json(raw, "/config/clients/<default>") == {"version": 1, "config": {"controller_mutation_rate": "2.5"}}
    assert znode_json(raw, "/config/ips/10.0.0.1") == {"version": 1, "config": {"connection_creation_rate": "30"}}
    paths = [znode_json(raw, f"{CHANGES_PATH}/{name}")["entity_path"] for name in sorted(raw.get_children(CHANGES_PATH))]
    assert paths == [f"users/{ALICE_ZNODE}", f"users/{ALICE_ZNODE}/clients/app%2F1", "users/<default>/clients/<default>",
                     "clients/<default>", "ips/10.0.0.1", "ips/<default>"]
    assert store.all() == {
        entity([("user", ALICE)]): {"producer_byte_rate": 1048576.0, "request_percentage": 50.0},
        entity([("user", ALICE), ("client-id", "app/1")]): {"consumer_byte_rate": 2048.0},
        entity([("user", None), ("client-id", None)]): {"producer_byte_rate": 10.0},
        entity([("client-id", None)]): {"controller_mutation_rate": 2.5},
        entity([("ip", "10.0.0.1")]): {"connection_creation_rate": 30.0},
        entity([("ip", None)]): {"connection_creation_rate": 5.0},
    }


@pytest.mark.zookeeper
def test_zookeeper_quotas_and_scram_credentials_share_the_users_znode(make_client: MakeClient) -> None:
    raw = make_client()
    quotas, credentials = ZooKeeperQuotas(make_client()), ZooKeeperCredentials(make_client())
    path = f"{USERS_PATH}/{ALICE_ZNODE}"
    credentials.set(ALICE, "SCRAM-SHA-256", CRED_256)
    quotas.alter(entity([("user", ALICE)]), {"producer_byte_rate": 1024.0})
    assert znode_json(raw, path) == {"version": 1, "config": {"SCRAM-SHA-256": CRED_256, "producer_byte_rate": "1024"}}
    quotas.alter(entity([("user", ALICE)]), {"producer_byte_rate": None})
    assert znode_json(raw, path) == {"version": 1, "config": {"SCRAM-SHA-256": CRED_256}}
    quotas.alter(entity([("user", ALICE)]), {"consumer_byte_rate": 7.0})
    assert credentials.delete(ALICE, "SCRAM-SHA-256") is True
    assert znode_json(raw, path) == {"version": 1, "config": {"consumer_byte_rate": "7"}}
    assert credentials.all() == {}
    assert quotas.all() == {entity([("user", ALICE)]): {"consumer_byte_rate": 7.0}}


@pytest.mark.zookeeper
def test_zookeeper_watch_fires_on_a_change(make_client: MakeClient) -> None:
    store = ZooKeeperQuotas(make_client())
    calls: queue.Queue[str] = queue.Queue()
    store.watch(lambda: calls.put("changed"))
    assert next_call(calls) == "changed"  # at registration
    ZooKeeperQuotas(make_client()).alter(entity([("client-id", "c")]), {"producer_byte_rate": 1.0})
    assert next_call(calls) == "changed"
    store.close()


def test_local_store_round_trip_and_watch(tmp_path: Path) -> None:
    store = LocalQuotas(str(tmp_path))
    calls: queue.Queue[str] = queue.Queue()
    store.watch(lambda: calls.put("changed"))
    assert next_call(calls) == "changed"
    store.alter(entity([("user", "u"), ("client-id", None)]), {"producer_byte_rate": 100.0, "request_percentage": 1.5})
    assert next_call(calls) == "changed"
    other = LocalQuotas(str(tmp_path))  # another process's view of the same file
    assert other.all() == {entity([("client-id", None), ("user", "u")]): {"producer_byte_rate": 100.0,
                                                                          "request_percentage": 1.5}}
    other.alter(entity([("user", "u"), ("client-id", None)]), {"producer_byte_rate": None, "request_percentage": None})
    assert store.all() == {}
    store.close()
    other.close()
