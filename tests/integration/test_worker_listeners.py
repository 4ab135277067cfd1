"""Each worker's own listener, advertised as a node that leads the partitions the worker
owns (broker/worker_listeners.py): clients that follow Metadata never cause a forward, a
client on the wrong node is still served, the port survives a worker restart, and bad
settings stop the broker with a message."""

from __future__ import annotations

import os
import signal
import socket
from typing import Any

import pytest

from broker.placement import WORKER_NODE_STRIDE, owner_index, worker_node_id
from broker.protocol import codec
from broker.protocol.build import build
from storage.types import TopicPartition
from tests.integration.clients import assert_same, confluent_consume, confluent_produce, make_records
from tests.integration.conftest import (
    free_port,
    partition_owned_by,
    pid_alive,
    port_in_use,
    round_trip,
    serve_until_exit,
    wait_until,
)
from tests.integration.kio_client import decode_response, encode_request, read_frame

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

PARTITIONS = 6


def _req(api_key: int, version: int, data: dict[str, Any]) -> Any:
    return build(codec.request_class(api_key, version), data)


def cluster_metadata(bootstrap: str, topic: str | None = None) -> Any:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    return admin.list_topics(topic, timeout=10)


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})  # held until the answer: a destroyed handle fails it
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(10)


def worker_nodes(bootstrap: str) -> dict[int, tuple[str, int]]:
    return {b.id: (b.host, b.port) for b in cluster_metadata(bootstrap).brokers.values() if b.id >= WORKER_NODE_STRIDE}


@pytest.mark.parametrize("broker", [{"workers": 2}, {"workers": 3}], indirect=True, ids=["2-workers", "3-workers"])
def test_each_worker_is_a_node_leading_what_it_owns(broker: Any) -> None:
    topic = "routed"
    create_topic(broker.bootstrap, topic, PARTITIONS)
    metadata = cluster_metadata(broker.bootstrap, topic)
    nodes = {b.id: (b.host, b.port) for b in metadata.brokers.values()}
    expected_ids = {0} | {worker_node_id(0, i) for i in range(broker.workers)}
    assert set(nodes) == expected_ids
    assert nodes[0] == ("127.0.0.1", broker.port)
    ports = [nodes[worker_node_id(0, i)][1] for i in range(broker.workers)]
    assert len(set(ports)) == broker.workers and broker.port not in ports
    for port in ports:
        assert round_trip("127.0.0.1", port), f"worker port {port} does not answer"
    for p, partition in metadata.topics[topic].partitions.items():
        owner = worker_node_id(0, owner_index(TopicPartition(topic, p), broker.workers))
        assert (partition.leader, list(partition.replicas), list(partition.isrs)) == (owner, [owner], [owner])


@pytest.mark.parametrize("broker", [{"workers": 2}], indirect=True)
def test_clients_that_follow_metadata_are_never_forwarded(broker: Any) -> None:
    topic = "no-forwards"
    create_topic(broker.bootstrap, topic, PARTITIONS)
    records = make_records(600, PARTITIONS, "direct")
    confluent_produce(broker.bootstrap, topic, records)
    got = confluent_consume(broker.bootstrap, topic, range(PARTITIONS), len(records))
    assert_same(records, got)

    def settled() -> list[dict[str, Any]] | None:
        stats = broker.stats()
        appended = sum(s["records_appended"] for s in stats)
        return stats if len(stats) == 2 and appended == len(records) else None

    stats = wait_until(settled, 10, "both workers' stats count every record")
    assert all(s["records_appended"] > 0 for s in stats), stats  # both workers wrote their own partitions
    assert [s["forwards"] for s in stats] == [0, 0], stats


@pytest.mark.parametrize("broker", [{"workers": 2}], indirect=True)
def test_a_request_on_the_wrong_worker_node_is_forwarded(broker: Any) -> None:
    """A client with stale metadata (or none) reaches a worker that does not own the
    partition: it is served all the same, through the owner."""
    topic = "wrong-node"
    create_topic(broker.bootstrap, topic, PARTITIONS)
    nodes = worker_nodes(broker.bootstrap)
    partition = partition_owned_by(topic, 0, 2, PARTITIONS)
    _host, other_port = nodes[worker_node_id(0, 1)]
    records = [r._replace(partition=partition) for r in make_records(50, 1, "stale")]
    confluent_produce(f"127.0.0.1:{other_port}", topic, records)  # bootstraps from worker 1's node
    got = confluent_consume(broker.bootstrap, topic, [partition], len(records))
    assert_same(records, got)
    with socket.create_connection(("127.0.0.1", other_port), timeout=5) as raw:
        raw.settimeout(10)
        raw.sendall(encode_request(2, 1, 7, _req(2, 1, {"replica_id": -1, "topics": [
            {"name": topic, "partitions": [{"partition_index": partition, "timestamp": -1}]}]})))
        _cid, answer = decode_response(2, 1, read_frame(raw))
    listed = answer.topics[0].partitions[0]
    assert (listed.error_code, listed.offset) == (0, len(records))


@pytest.mark.parametrize("broker", [{"workers": 2, "worker.listeners.enable": "false"},
                                    {"workers": 1}], indirect=True, ids=["turned-off", "one-worker"])
def test_without_worker_listeners_the_broker_leads_everything(broker: Any) -> None:
    topic = "one-node"
    create_topic(broker.bootstrap, topic, 3)
    metadata = cluster_metadata(broker.bootstrap, topic)
    assert [(b.id, b.port) for b in metadata.brokers.values()] == [(0, broker.port)]
    assert {p.leader for p in metadata.topics[topic].partitions.values()} == {0}


@pytest.mark.parametrize("broker", [{"workers": 2}], indirect=True)
def test_a_restarted_worker_keeps_its_port(broker: Any) -> None:
    topic = "restart-port"
    create_topic(broker.bootstrap, topic, PARTITIONS)
    before = worker_nodes(broker.bootstrap)
    victim = next(pid for pid in broker.worker_pids() if "worker 1" in open(f"/proc/{pid}/cmdline").read())
    os.kill(victim, signal.SIGKILL)
    wait_until(lambda: not pid_alive(victim), 10, "worker 1 gone")
    _host, port = before[worker_node_id(0, 1)]
    # Made while no worker accepts on it: the supervisor's socket keeps it in the backlog.
    waiting = socket.create_connection(("127.0.0.1", port), timeout=5)
    try:
        wait_until(lambda: len(broker.worker_pids()) == 2 and victim not in broker.worker_pids(), 30,
                   "worker 1 restarted")
        assert worker_nodes(broker.bootstrap) == before
        waiting.settimeout(15)
        waiting.sendall(encode_request(18, 0, 1, _req(18, 0, {})))
        _cid, answer = decode_response(18, 0, read_frame(waiting))
        assert answer.error_code == 0
    finally:
        waiting.close()
    records = make_records(200, PARTITIONS, "after-restart")
    confluent_produce(broker.bootstrap, topic, records)
    assert_same(records, confluent_consume(broker.bootstrap, topic, range(PARTITIONS), len(records)))


def consecutive_free_ports(count: int) -> int:
    for _ in range(50):
        base = free_port()
        if base + count > 65535:
            continue
        held = []
        try:
            for port in range(base, base + count):
                sock = socket.socket()
                held.append(sock)
                sock.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
        finally:
            for sock in held:
                sock.close()
    raise RuntimeError("no run of free ports")


def test_a_configured_port_base(broker_factory: Any) -> None:
    base = consecutive_free_ports(2)
    configured = broker_factory(workers=2, overrides={"worker.listeners.port.base": base})
    nodes = worker_nodes(configured.bootstrap)
    assert nodes == {worker_node_id(0, 0): ("127.0.0.1", base), worker_node_id(0, 1): ("127.0.0.1", base + 1)}


def test_a_worker_port_in_use_stops_the_start(tmp_path: Any) -> None:
    with port_in_use() as taken:
        done = serve_until_exit(tmp_path, f"worker.listeners.port.base={taken}", workers=2)
    assert done.returncode == 1
    assert f"cannot listen on 127.0.0.1:{taken} for worker 0" in done.stderr


def test_a_port_base_that_runs_past_65535_stops_the_start(tmp_path: Any) -> None:
    done = serve_until_exit(tmp_path, "worker.listeners.port.base=65535", workers=2)
    assert done.returncode == 1
    assert "worker 1's port 65536 (worker.listeners.port.base + 1) is past 65535" in done.stderr


def test_a_node_id_that_would_collide_with_worker_nodes_stops_the_start(tmp_path: Any) -> None:
    done = serve_until_exit(tmp_path, f"node.id={WORKER_NODE_STRIDE}", workers=2)
    assert done.returncode == 1
    assert f"node.id {WORKER_NODE_STRIDE} must be below {WORKER_NODE_STRIDE}" in done.stderr


@pytest.mark.parametrize("broker", [{"workers": 2}], indirect=True)
def test_admin_sees_worker_nodes_as_this_broker(broker: Any) -> None:
    from confluent_kafka.admin import AdminClient, ConfigResource

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    cluster = admin.describe_cluster().result(timeout=10)
    assert sorted(n.id for n in cluster.nodes) == [0, worker_node_id(0, 0), worker_node_id(0, 1)]
    assert cluster.controller.id == 0
    resource = ConfigResource(ConfigResource.Type.BROKER, str(worker_node_id(0, 1)))
    described = admin.describe_configs([resource])[resource].result(timeout=10)
    assert described["num.partitions"].value == "1"
