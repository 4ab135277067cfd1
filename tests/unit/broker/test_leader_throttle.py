"""The leader's replication throttle on Owner.read (real logs and registry, tests/unit/broker/
partition_world.py): Kafka's shouldLeaderThrottle gives a follower no bytes of a listed
partition while the broker's leader rate is over, unless that follower is in the ISR."""

from __future__ import annotations

import pytest

from broker.dynamic_configs import LEADER_REPLICATION_RATE
from broker.partitions.partition_ops import AppendItem, ReadItem, ReadResult
from broker.partitions.replication_throttle import LEADER_REPLICAS, ReplicationThrottles
from broker.quotas.replication_rates import LEADER, ReplicationRates
from storage.config import LONG_MAX
from storage.types import TopicPartition
from tests.unit.broker.partition_world import NODE, World, batch

BOUND = 1000


@pytest.fixture
def world(tmp_path):
    built = World(str(tmp_path))
    yield built
    built.close()


@pytest.fixture
def rates():
    shared = ReplicationRates(1, ((11, 1000), (11, 1000), (11, 1000)))
    yield shared
    shared.close()


def throttle_leader(world: World, rates: ReplicationRates, bound: int) -> None:
    """What the worker does when leader.replication.throttled.rate changes."""
    def configs_of(topic: str):
        info = world.registry.get(topic)
        return None if info is None else info.configs

    throttles = ReplicationThrottles(NODE, rates, configs_of)
    settings = {LEADER_REPLICATION_RATE: bound}
    throttles.set_rates(lambda name: settings.get(name, LONG_MAX))
    world.owner.leader_throttle = throttles.leader


def fetch(world: World, tp: TopicPartition, replica: int) -> ReadResult:
    (result,) = world.owner.read([ReadItem(tp, 0, 1 << 20, False, replica, -1, -1)], None)
    return result


def test_an_out_of_sync_follower_gets_no_bytes_of_a_listed_partition_while_the_rate_is_over(world, rates):
    # Partition 0 lists this broker (the leader); partition 1 lists another broker only.
    listed, unlisted = world.topic("moving", partitions=2, replicas=[NODE, 2], isr=[NODE],
                                   configs={LEADER_REPLICAS: f"0:{NODE},1:3"})
    for tp in (listed, unlisted):
        (appended,) = world.owner.append([AppendItem(tp, batch(5), 9)])
        assert appended.error_code == 0
    throttle_leader(world, rates, BOUND)
    assert fetch(world, listed, 2).length > 0, "under the rate, the listed partition flows"
    rates.record(LEADER, 10 * BOUND)  # another worker's follower traffic, say
    held = fetch(world, listed, 2)
    assert held.error_code == 0 and held.length == 0 and held.log_end_offset == 5
    assert fetch(world, unlisted, 2).length > 0, "a partition the list does not name keeps flowing"
    assert world.replication.led[listed].followers[2].log_end_offset == 0, "the fetch still counts as progress"

    # Consumers are not followers: never held by the replication throttle.
    (consumer,) = world.owner.read([ReadItem(listed, 0, 1 << 20, False)], None)
    assert consumer.error_code == 0


def test_a_follower_in_the_isr_is_never_held(world, rates):
    (tp,) = world.topic("in-sync", replicas=[NODE, 2], isr=[NODE, 2], configs={LEADER_REPLICAS: "*"})
    world.owner.append([AppendItem(tp, batch(3), 9)])
    throttle_leader(world, rates, BOUND)
    rates.record(LEADER, 10 * BOUND)
    assert fetch(world, tp, 2).length > 0


def test_no_leader_rate_means_no_throttle(world, rates):
    (tp,) = world.topic("free", replicas=[NODE, 2], isr=[NODE], configs={LEADER_REPLICAS: "*"})
    world.owner.append([AppendItem(tp, batch(3), 9)])
    throttle_leader(world, rates, LONG_MAX)
    assert world.owner.leader_throttle is None
    rates.record(LEADER, 10 * BOUND)
    assert fetch(world, tp, 2).length > 0
