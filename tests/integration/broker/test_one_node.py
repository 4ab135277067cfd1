"""One broker is one node (DESIGN.md, non-negotiable 9): a broker with two workers shows
clients exactly one node in Metadata, DescribeCluster and kcat -L; every admin client
lists each group once; explicit replica assignments and a replication factor equal to
the brokers Metadata shows are accepted. One broker start covers all of it."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import time
from typing import Any

import pytest

from tests.integration.conftest import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

GROUPS = ["one-node-a", "one-node-b"]


def _join_and_commit(bootstrap: str, group: str, topic: str) -> None:
    """A member joins ``group``, consumes a record, commits, and leaves."""
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "session.timeout.ms": 6000})
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                consumer.commit(message=message, asynchronous=False)
                return
        raise AssertionError(f"group {group} read nothing from {topic} in 60 s")
    finally:
        consumer.close()


def _confluent_groups(bootstrap: str) -> list[str]:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})  # held: a collected client cancels its futures
    result = admin.list_consumer_groups().result(timeout=30)
    assert not result.errors, result.errors
    return [g.group_id for g in result.valid]


def _kafka_python_groups(bootstrap: str) -> list[str]:
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        return [group["group_id"] for group in admin.list_groups()]
    finally:
        admin.close()


def _aiokafka_groups(bootstrap: str) -> list[str]:
    async def run() -> list[str]:
        from aiokafka.admin import AIOKafkaAdminClient

        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        await admin.start()
        try:
            return [entry[0] for entry in await admin.list_consumer_groups()]
        finally:
            await admin.close()

    return asyncio.run(run())


@pytest.mark.parametrize("broker", [{"workers": 2}], indirect=True)
def test_a_two_worker_broker_is_one_node_to_every_client(broker: Any) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic
    from kafka.admin import KafkaAdminClient
    from kafka.admin import NewTopic as KafkaPythonNewTopic

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    metadata = admin.list_topics(timeout=10)
    assert sorted(metadata.brokers) == [0]
    assert (metadata.brokers[0].host, metadata.brokers[0].port) == ("127.0.0.1", broker.port)
    cluster = admin.describe_cluster().result(timeout=10)
    assert [n.id for n in cluster.nodes] == [0] and cluster.controller.id == 0

    # Assignments over the brokers Metadata shows, and a replication factor of their count.
    brokers = sorted(metadata.brokers)
    futures = admin.create_topics([
        NewTopic("one-node-assigned", num_partitions=4, replica_assignment=[[b] for b in brokers] * 4),
        NewTopic("one-node-factor", num_partitions=4, replication_factor=len(brokers)),
    ], operation_timeout=10)
    for future in futures.values():
        future.result(timeout=30)
    kafka_python = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        kafka_python.create_topics([KafkaPythonNewTopic("one-node-kafka-python", num_partitions=-1, replication_factor=-1,
                                                        replica_assignments={p: brokers for p in range(3)})], timeout_ms=10000)
    finally:
        kafka_python.close()
    described = admin.list_topics(timeout=10).topics
    for topic, partitions in (("one-node-assigned", 4), ("one-node-factor", 4), ("one-node-kafka-python", 3)):
        assert sorted(described[topic].partitions) == list(range(partitions)), topic
        assert {(p.leader, tuple(p.replicas), tuple(p.isrs)) for p in described[topic].partitions.values()} == {(0, (0,), (0,))}

    # Every partition of a topic leads from node 0, whichever worker writes it: kcat -L
    # shows one broker.
    if shutil.which("kcat") is not None:
        listing = subprocess.run(["kcat", "-L", "-b", broker.bootstrap], capture_output=True, text=True, timeout=30)
        assert listing.returncode == 0, listing.stderr
        assert " 1 brokers:" in listing.stdout, listing.stdout
        assert f"broker 0 at 127.0.0.1:{broker.port}" in listing.stdout
        assert "leader 0," in listing.stdout and "leader 1" not in listing.stdout

    # Groups: each admin client asks every broker it sees and merges; each group once.
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for partition in range(4):
        producer.produce("one-node-factor", value=b"x", partition=partition)
    assert producer.flush(30) == 0
    for group in GROUPS:
        _join_and_commit(broker.bootstrap, group, "one-node-factor")
    for lister in (_confluent_groups, _kafka_python_groups, _aiokafka_groups):
        def both_listed(lister: Any = lister) -> list[str] | None:
            found: list[str] = lister(broker.bootstrap)
            return found if set(GROUPS) <= set(found) else None

        listed = wait_until(both_listed, 30, f"{lister.__name__} to list both groups")
        assert sorted(g for g in listed if g in GROUPS) == GROUPS, (lister.__name__, listed)
