"""Transactions while the coordinator's broker is frozen or cut off (its coordinator a zombie
once another is elected), judged as Jepsen judges Kafka-compatible systems (the setup, the
workload and the judgement: tests/integration/txn_faults.py). One fault per test, while
transactions are in flight:

- SIGSTOP of the coordinator's broker for longer than its ZooKeeper session, then SIGCONT;
- a full network partition of the coordinator's broker, then its healing;
- that broker cut off from ZooKeeper and the other brokers only, the clients still reaching it;
- two faults drawn at random from those and the kill -9 ones of test_transactions_faults.py
  (kill -9 of the coordinator's whole broker among them).
"""

from __future__ import annotations

import os
import random
import time
from typing import Any

import pytest

from tests.integration.conftest import wait_until
from tests.integration.netns import Network, network  # noqa: F401  (fixture)
from tests.integration.netns_cluster import NetnsBroker, NetnsCluster, netns_cluster  # noqa: F401
from tests.integration.txn_faults import (
    FAULTS,
    all_in_sync,
    cut_the_coordinator_from_the_cluster,
    isolate_the_coordinators_broker,
    run_with_fault,
    stop_the_coordinators_broker,
)

pytestmark = [pytest.mark.integration, pytest.mark.zookeeper, pytest.mark.replication, pytest.mark.transactions,
              pytest.mark.timeout(300)]


def test_sigstop_of_the_coordinators_broker_past_its_session(netns_cluster: NetnsCluster, network: Network,  # noqa: F811
                                                             tmp_path: Any) -> None:
    run_with_fault(netns_cluster, tmp_path, lambda brokers: stop_the_coordinators_broker(netns_cluster, network, brokers))


def test_network_partition_of_the_coordinators_broker(netns_cluster: NetnsCluster, network: Network,  # noqa: F811
                                                      tmp_path: Any) -> None:
    run_with_fault(netns_cluster, tmp_path,
                   lambda brokers: isolate_the_coordinators_broker(netns_cluster, network, brokers))


def test_the_coordinators_broker_cut_off_from_zookeeper_and_brokers_but_not_clients(
        netns_cluster: NetnsCluster, network: Network, tmp_path: Any) -> None:  # noqa: F811
    run_with_fault(netns_cluster, tmp_path,
                   lambda brokers: cut_the_coordinator_from_the_cluster(netns_cluster, network, brokers))


def test_a_randomized_sequence_of_faults_during_transactions(netns_cluster: NetnsCluster, network: Network,  # noqa: F811
                                                             tmp_path: Any) -> None:
    """Two faults drawn from the seven (the three above, the three of test_transactions_faults.py,
    and kill -9 of the coordinator's whole broker; a seed printed for replay: CASTLE_NEMESIS_SEED), each
    undone and the replicas back in sync before the next, in one run judged as a whole."""
    seed = int(os.environ.get("CASTLE_NEMESIS_SEED", time.time_ns() % 1_000_000))
    chosen = random.Random(seed).sample(sorted(FAULTS), 2)

    def fault(brokers: list[NetnsBroker]) -> str:
        done = []
        for name in chosen:
            done.append(FAULTS[name](netns_cluster, network, brokers))
            wait_until(lambda: all_in_sync(netns_cluster), 60, f"every replica back in sync after {name}",
                       interval=0.5)
        return ", then ".join(done)

    run_with_fault(netns_cluster, tmp_path, fault, seed)
