"""Transactions under kill -9, judged as Jepsen judges Kafka-compatible systems (the setup, the
workload and the judgement: tests/integration/txn_faults.py). One fault per test, while
transactions are in flight:

- kill -9 of the broker leading a partition of the topic (every process of it), then its restart;
- kill -9 of the elected coordinator process (the one FindCoordinator names; its supervisor
  starts another, which wins the election again and finishes what the dead one had prepared);
- kill -9 of the leader of a __transaction_state partition, then of the group's __consumer_offsets
  partition (the coordinator writes both as a client of the leading broker).

The coordinator's broker frozen or cut off, and faults drawn at random:
test_transactions_faults_zombie.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.netns import Network, network  # noqa: F401  (fixture)
from tests.integration.netns_cluster import NetnsBroker, NetnsCluster, netns_cluster  # noqa: F401
from tests.integration.txn_faults import (
    kill_a_leader,
    kill_the_coordinator,
    kill_the_leaders_of_the_coordinators_partitions,
    run_with_fault,
)

pytestmark = [pytest.mark.integration, pytest.mark.zookeeper, pytest.mark.replication, pytest.mark.transactions,
              pytest.mark.timeout(300)]


def test_kill_9_of_a_partition_leader_during_transactions(netns_cluster: NetnsCluster, network: Network,  # noqa: F811
                                                          tmp_path: Any) -> None:
    run_with_fault(netns_cluster, tmp_path, lambda brokers: kill_a_leader(netns_cluster, network, brokers))


def test_kill_9_of_the_transaction_coordinator_process(netns_cluster: NetnsCluster, network: Network,  # noqa: F811
                                                       tmp_path: Any) -> None:
    """Twice, a few seconds apart: one kill may well fall between two EndTxns."""
    def fault(brokers: list[NetnsBroker]) -> str:
        return ", then ".join(kill_the_coordinator(netns_cluster, network, brokers) for _round in range(2))

    run_with_fault(netns_cluster, tmp_path, fault)


def test_kill_9_of_the_leaders_of_the_transaction_state_and_the_groups_offsets(
        netns_cluster: NetnsCluster, network: Network, tmp_path: Any) -> None:  # noqa: F811
    run_with_fault(netns_cluster, tmp_path,
                   lambda brokers: kill_the_leaders_of_the_coordinators_partitions(netns_cluster, network, brokers))
