"""Brokers that reach each other only over an authenticated, encrypted listener.

Three real brokers on a real ZooKeeper, each with a PLAINTEXT listener for clients and an
INTERNAL listener mapped to SASL_SSL, named by inter.broker.listener.name: the followers'
fetches and the coordinator's offsets traffic go over TLS with SCRAM-SHA-512, the broker's
user bootstrapped into ZooKeeper offline before the first start (``castle users set
--broker-config``), as an operator would.
"""

from __future__ import annotations

import concurrent.futures
import os
import subprocess
from typing import Callable

import orjson
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.certs import make_pki
from tests.integration.conftest import Broker, castle_command, free_port, wait_until
from tests.integration.coordination.test_cluster import cluster_settings, zk

pytestmark = [pytest.mark.integration, pytest.mark.zookeeper, pytest.mark.security]

JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" '
        'password="broker-secret";')


def test_replication_and_offsets_travel_over_sasl_ssl_between_brokers(
        broker_factory: Callable[..., Broker], zk_connect: str, tmp_path: str) -> None:
    pki = make_pki(os.path.join(str(tmp_path), "pki"))
    empty = os.path.join(str(tmp_path), "empty.properties")
    with open(empty, "w"):
        pass
    made = subprocess.run(castle_command() + ["users", "set", "broker", "--password-stdin", "--mechanism", "SCRAM-SHA-512",
                                              "--broker-config", empty, "--override", f"zookeeper.connect={zk_connect}"],
                          input="broker-secret\n", capture_output=True, text=True, timeout=60)
    assert made.returncode == 0, made.stderr
    brokers = []
    internal = {}
    for node_id, workers in ((1, 2), (2, 1), (3, 1)):
        broker = broker_factory(workers=workers, start=False, overrides={
            **cluster_settings(zk_connect, node_id), "offsets.topic.replication.factor": 3,
            "offsets.topic.num.partitions": 3})
        internal[node_id] = free_port()
        broker.overrides.update({
            "listeners": f"PLAINTEXT://{broker.bootstrap},INTERNAL://127.0.0.1:{internal[node_id]}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SASL_SSL",
            "inter.broker.listener.name": "INTERNAL",
            "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
            "listener.name.internal.scram-sha-512.sasl.jaas.config": JAAS,
            "ssl.keystore.location": pki.server_keystore,
            "ssl.truststore.location": pki.ca,
        })
        brokers.append(broker)
    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        for started in [pool.submit(b.start) for b in brokers]:
            started.result()
    client = zk(zk_connect)
    try:
        wait_until(lambda: len(client.get_children("/brokers/ids")) == 3, 30, "three brokers registered")
        registration = orjson.loads(client.get("/brokers/ids/2")[0])
    finally:
        client.stop()
        client.close()
    # The registration carries both listeners and the map; host/port are the PLAINTEXT one's.
    assert registration["endpoints"] == [f"PLAINTEXT://{brokers[1].bootstrap}", f"INTERNAL://127.0.0.1:{internal[2]}"]
    assert registration["listener_security_protocol_map"] == {"PLAINTEXT": "PLAINTEXT", "INTERNAL": "SASL_SSL"}
    assert registration["port"] == brokers[1].port

    bootstrap = ",".join(b.bootstrap for b in brokers)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    # Clients on the PLAINTEXT listener are told only PLAINTEXT addresses.
    assert {(b.host, b.port) for b in admin.list_topics(timeout=10).brokers.values()} == \
        {("127.0.0.1", b.port) for b in brokers}
    futures = admin.create_topics([NewTopic("secured", 3, 3, config={"min.insync.replicas": "3"})], operation_timeout=30)
    futures["secured"].result(30)

    # min.insync.replicas=3: every acknowledged record reached both followers, over SASL_SSL.
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 5})
    failed: list[object] = []
    for i in range(600):
        producer.produce("secured", value=f"v{i}".encode(), partition=i % 3,
                         on_delivery=lambda err, _msg: failed.append(err) if err else None)
    assert producer.flush(60) == 0
    assert failed == []
    meta = admin.list_topics("secured", timeout=10).topics["secured"]
    assert all(sorted(p.isrs) == [1, 2, 3] for p in meta.partitions.values()), meta.partitions

    # A group's offsets land in replicated __consumer_offsets partitions, written by the
    # coordinator through their leaders, which for most groups are other brokers: over SASL_SSL.
    for group in ("g-a", "g-b", "g-c"):
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
        try:
            offsets = [TopicPartition("secured", p, 100 + p) for p in range(3)]
            committed = consumer.commit(offsets=offsets, asynchronous=False)
            assert committed is not None and all(tp.error is None for tp in committed), committed
            read_back = consumer.committed([TopicPartition("secured", p) for p in range(3)], timeout=30)
            assert [tp.offset for tp in read_back] == [100, 101, 102]
        finally:
            consumer.close()
