"""Client-metrics subscriptions in Kafka's ZooKeeper layout (/config/client-metrics/<name>, a
/config/changes notification per write), followed by a reader in another session, and in
the local file."""

from __future__ import annotations

import time
from pathlib import Path

import orjson
import pytest

from broker.telemetry.subscriptions import Subscriptions
from coordination.client_metrics_store import CLIENT_METRICS_PATH, local_client_metrics, zookeeper_client_metrics
from coordination.credentials import CHANGES_PATH
from tests.unit.coordination.store_helpers import WAIT, MakeClient, znode_json


@pytest.mark.zookeeper
def test_zookeeper_store_writes_kafkas_znodes_and_another_session_follows(make_client: MakeClient) -> None:
    client = make_client()
    store = zookeeper_client_metrics(client)
    follower = Subscriptions(zookeeper_client_metrics(make_client()))
    follower.start()
    try:
        store.update("producers", lambda c: {**c, "metrics": "org.apache.kafka.producer.", "interval.ms": "1000"})
        znode = f"{CLIENT_METRICS_PATH}/producers"
        assert znode_json(client, znode) == {"version": 1, "config": {"interval.ms": "1000",
                                                                      "metrics": "org.apache.kafka.producer."}}
        changes = sorted(client.get_children(CHANGES_PATH))
        assert [znode_json(client, f"{CHANGES_PATH}/{c}") for c in changes] == [
            {"version": 2, "entity_path": "client-metrics/producers"}]
        deadline = time.monotonic() + WAIT
        while "producers" not in follower.table and time.monotonic() < deadline:
            time.sleep(0.02)
        assert follower.table["producers"].interval_ms == 1000
        store.update("producers", lambda c: {})
        deadline = time.monotonic() + WAIT
        while follower.table and time.monotonic() < deadline:
            time.sleep(0.02)
        assert follower.table == {} and store.all() == {}
    finally:
        follower.close()
        follower.store.close()
        store.close()


def test_local_file_layout(tmp_path: Path) -> None:
    store = local_client_metrics(str(tmp_path))
    try:
        store.update("all", lambda c: {"metrics": "*"})
        assert orjson.loads((tmp_path / "client-metrics.json").read_bytes()) == {
            "version": 1, "client-metrics": {"all": {"metrics": "*"}}}
        assert store.all() == {"all": {"metrics": "*"}}
    finally:
        store.close()
