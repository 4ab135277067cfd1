"""Dynamic broker config stores (coordination/broker_config_store.py) on real files and a real
ZooKeeper, in Kafka 3.9's layout: /config/brokers/<id> and /config/brokers/<default>
{"version":1,"config":{...}}, each write announced by /config/changes/config_change_<seq>
{"version":2,"entity_path":"brokers/<id or <default>>"}; and the broker's reader following them."""

from __future__ import annotations

import queue
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from broker.config import load_config
from broker.dynamic_configs import DynamicBrokerConfigs
from coordination.broker_config_store import (
    BROKERS_PATH,
    FILE_NAME,
    BrokerConfigStore,
    LocalBrokerConfigs,
    ZooKeeperBrokerConfigs,
)
from coordination.credentials import CHANGES_PATH
from tests.unit.coordination.store_helpers import WAIT, MakeClient, next_call, run_in_threads, znode_json

pytestmark = pytest.mark.timeout(60)


def test_local_store_round_trip_on_a_real_file(tmp_path: Path) -> None:
    store = LocalBrokerConfigs(str(tmp_path))
    try:
        assert store.all() == {}
        store.update("", lambda c: {**c, "log.retention.ms": "60000"})
        store.update("0", lambda c: {**c, "log.segment.bytes": "1048576"})
        doc = orjson.loads((tmp_path / FILE_NAME).read_bytes())
        assert doc == {"version": 1, "brokers": {"<default>": {"log.retention.ms": "60000"},
                                                 "0": {"log.segment.bytes": "1048576"}}}
        assert LocalBrokerConfigs(str(tmp_path)).all() == {"": {"log.retention.ms": "60000"},
                                                           "0": {"log.segment.bytes": "1048576"}}
        assert store.update("0", lambda c: {}) == {} and set(store.all()) == {""}
    finally:
        store.close()


@pytest.mark.zookeeper
def test_zookeeper_store_writes_kafkas_znodes(make_client: MakeClient) -> None:
    client = make_client()
    store = ZooKeeperBrokerConfigs(client)
    try:
        store.update("", lambda c: {**c, "log.retention.ms": "60000"})
        store.update("0", lambda c: {**c, "message.max.bytes": "2000000"})
        assert znode_json(client, f"{BROKERS_PATH}/<default>") == {"version": 1, "config": {"log.retention.ms": "60000"}}
        assert znode_json(client, f"{BROKERS_PATH}/0") == {"version": 1, "config": {"message.max.bytes": "2000000"}}
        changes = sorted(client.get_children(CHANGES_PATH))
        assert [znode_json(client, f"{CHANGES_PATH}/{c}") for c in changes] == [
            {"version": 2, "entity_path": "brokers/<default>"}, {"version": 2, "entity_path": "brokers/0"}]
        assert store.all() == {"": {"log.retention.ms": "60000"}, "0": {"message.max.bytes": "2000000"}}
        store.update("", lambda c: {})
        assert znode_json(client, f"{BROKERS_PATH}/<default>") == {"version": 1, "config": {}}
        assert store.all() == {"0": {"message.max.bytes": "2000000"}} and store.get("") == {}
    finally:
        store.close()


@pytest.mark.zookeeper
def test_zookeeper_concurrent_writers_and_the_watch(make_client: MakeClient) -> None:
    stores = [ZooKeeperBrokerConfigs(make_client()) for _ in range(3)]
    calls: queue.Queue[str] = queue.Queue()
    stores[0].watch(lambda: calls.put("changed"))
    assert next_call(calls) == "changed"
    keys = ["log.retention.ms", "log.retention.bytes", "log.segment.bytes"]
    assert run_in_threads(lambda i: stores[i].update("", lambda c: {**c, keys[i]: "1048576"}), range(3)) == []
    assert stores[1].get("") == {key: "1048576" for key in keys}
    assert next_call(calls) == "changed"
    for store in stores:
        store.close()


def wait_for(check: Any, timeout: float = WAIT) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.02)
    raise AssertionError("not seen in time")


def reader_follows(writer: BrokerConfigStore, reader_store: BrokerConfigStore) -> None:
    """Another process of the broker (its own store object) hears of a write through the watch."""
    config = load_config(None, {"node.id": "3", "log.retention.ms": "7200000"})
    seen: queue.Queue[dict[str, Any]] = queue.Queue()
    reader = DynamicBrokerConfigs(reader_store, config, seen.put)
    reader.start()
    try:
        assert seen.get(timeout=WAIT)["log.retention.ms"] == 7200000
        writer.update("", lambda c: {**c, "log.retention.ms": "60000", "log.cleanup.policy": "compact"})
        wait_for(lambda: reader.effective()["log.retention.ms"] == 60000)
        assert reader.effective()["log.cleanup.policy"] == "compact"
        writer.update("3", lambda c: {**c, "log.retention.ms": "1000"})
        writer.update("4", lambda c: {**c, "log.retention.ms": "2000"})  # another broker's: not ours
        wait_for(lambda: reader.effective()["log.retention.ms"] == 1000)
        # A value this broker cannot parse (written by hand) is ignored: the next one down wins.
        writer.update("3", lambda c: {**c, "log.retention.ms": "soon"})
        wait_for(lambda: reader.effective()["log.retention.ms"] == 60000)
        writer.update("", lambda c: {})
        writer.update("3", lambda c: {})
        wait_for(lambda: reader.effective()["log.retention.ms"] == 7200000)
    finally:
        reader.close()


def test_reader_follows_another_process_local(tmp_path: Path) -> None:
    first, second = LocalBrokerConfigs(str(tmp_path)), LocalBrokerConfigs(str(tmp_path))
    try:
        reader_follows(first, second)
    finally:
        first.close()
        second.close()


@pytest.mark.zookeeper
def test_reader_follows_another_process_zookeeper(make_client: MakeClient) -> None:
    first, second = ZooKeeperBrokerConfigs(make_client()), ZooKeeperBrokerConfigs(make_client())
    try:
        reader_follows(first, second)
    finally:
        first.close()
        second.close()
