"""``castle transactions`` on a ZooKeeper cluster of two brokers: the one elected
coordinator lists a transaction, the other broker lists none (an admin client asks both and
merges, so the id appears once, under the coordinator's node id); describe reaches the
coordinator through FindCoordinator; describe-producers asks each partition's leader (one
per broker), or with --broker-id its follower, which answers from its own copy of the log as
Kafka's followers do; find-hanging finds nothing to abort in a transaction its coordinator
knows, searching every partition a broker holds (internal topics included)."""

from __future__ import annotations

import json
import subprocess
from typing import Any, Callable

import pytest

from tests.integration.conftest import Broker, castle_command, wait_until
from tests.integration.coordination.test_transactions_cluster import _start

pytestmark = [pytest.mark.integration, pytest.mark.transactions, pytest.mark.zookeeper, pytest.mark.timeout(240)]

TOPIC = "txn-admin-cluster"


def castle(bootstrap: str, *args: str) -> Any:
    done = subprocess.run(castle_command() + ["transactions", *args, "--bootstrap-server", bootstrap, "--timeout", "20",
                                              "--json"], capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 0, f"castle transactions {' '.join(args)} exited {done.returncode}: {done.stderr}"
    return json.loads(done.stdout)


def test_the_views_of_a_transaction_on_two_brokers(broker_factory: Callable[..., Broker], zk_connect: str) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    one = _start(broker_factory, zk_connect, 1)
    two = _start(broker_factory, zk_connect, 2)
    bootstrap = f"{one.bootstrap},{two.bootstrap}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    # Partition 0 led by broker 1, partition 1 by broker 2; each follows the other's.
    admin.create_topics([NewTopic(TOPIC, num_partitions=2, replica_assignment=[[1, 2], [2, 1]])])[TOPIC].result(
        timeout=30)
    wait_until(lambda: sorted(p.leader for p in admin.list_topics(TOPIC, timeout=10).topics[TOPIC].partitions.values())
               == [1, 2], 30, "a leader for each partition")

    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "cluster-admin-tx"})
    producer.init_transactions(60)
    producer.begin_transaction()
    producer.produce(TOPIC, value=b"p0", partition=0)
    producer.produce(TOPIC, value=b"p1", partition=1)
    assert producer.flush(30) == 0  # open on both brokers' partitions, not committed

    described = castle(bootstrap, "describe", "--transactional-id", "cluster-admin-tx")
    assert described["state"] == "Ongoing" and described["coordinator"] in (1, 2)
    assert described["partitions"] == [{"topic": TOPIC, "partition": 0}, {"topic": TOPIC, "partition": 1}]
    # Asked of either broker first, the list is the same: one row, from the coordinator.
    for first in (one.bootstrap, two.bootstrap):
        listed = castle(first + "," + bootstrap, "list")["transactions"]
        assert [(t["transactional_id"], t["coordinator"], t["state"]) for t in listed] == [
            ("cluster-admin-tx", described["coordinator"], "Ongoing")]
        assert listed[0]["producer_id"] == described["producer_id"]

    for partition in (0, 1):  # led by broker 1 and broker 2
        (state,) = castle(bootstrap, "describe-producers", "--topic", TOPIC, "--partition", str(partition))["producers"]
        assert (state["producer_id"], state["current_transaction_start_offset"]) == (described["producer_id"], 0)
        follower = str(2 - partition)
        wait_until(lambda: castle(bootstrap, "describe-producers", "--topic", TOPIC, "--partition", str(partition),
                                  "--broker-id", follower)["producers"] == [state], 20,
                   f"broker {follower}'s copy of partition {partition}")
    for broker_id in ("1", "2"):
        assert castle(bootstrap, "find-hanging", "--broker-id", broker_id, "--max-transaction-timeout", "0")[
            "hanging"] == [], "open, but its coordinator will end it"

    producer.commit_transaction(60)
    done = wait_until(lambda: (found := castle(bootstrap, "describe", "--transactional-id", "cluster-admin-tx"))[
        "state"] == "CompleteCommit" and found, 20, "CompleteCommit")
    assert done["partitions"] == []
