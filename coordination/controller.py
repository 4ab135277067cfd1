"""The controller: elects partition leaders and records them in ZooKeeper.

The elected coordinator process is the controller too (one election, one epoch: the
coordinator epoch is the controller epoch written into every state znode). Each pass
compares every partition's state znode with the live brokers and writes what must
change, conditionally on the znode's version, so a leader's concurrent ISR change is
never overwritten: the loser re-reads and decides again on the next pass.

The rules are Kafka's (ZooKeeper mode, OfflinePartitionLeaderElectionStrategy):
- a partition whose leader is down gets the first live replica, in assignment order,
  that is in the ISR; its leader epoch goes up by one; the ISR keeps its live members;
- with none, it stays offline (leader -1, the ISR keeps its last member so that member
  is elected when it returns), unless unclean.leader.election.enable lets any live
  replica lead (its ISR then is that replica alone);
- a live leader's ISR loses the brokers that died (no new epoch: the leader stays).
"""

from __future__ import annotations

import logging
import time
from typing import Callable, Mapping, Protocol

from coordination.topics import TopicInfo
from coordination.znodes import PartitionState

log = logging.getLogger(__name__)

NO_LEADER = -1
UNKNOWN_TOPIC_OR_PARTITION = 3


class StateStore(Protocol):
    """What the controller needs of the ZooKeeper topic registry."""

    def refresh(self) -> bool: ...
    def all(self) -> list[TopicInfo]: ...
    def replicas(self, name: str) -> dict[int, list[int]]: ...
    def partition_states(self, name: str) -> dict[int, PartitionState]: ...
    def partition_state(self, topic: str, partition: int) -> PartitionState | None: ...
    def update_partition_state(self, topic: str, partition: int, state: PartitionState) -> PartitionState | None: ...
    def set_partition_state(self, topic: str, partition: int, leader: int, leader_epoch: int, isr: list[int],
                            controller_epoch: int | None = None) -> PartitionState: ...
    def add_replicas(self, name: str, wanted: Mapping[int, list[int]]) -> bool: ...
    def reassignments(self, name: str) -> dict[int, tuple[list[int], list[int]]]: ...
    def complete_reassignment(self, name: str, partition: int, target: list[int]) -> bool: ...


def elect(replicas: list[int], state: PartitionState, live: set[int], unclean: bool,
          controller_epoch: int) -> PartitionState | None:
    """The state the partition should have now, or None when it is right as it is."""
    leader_alive = state.leader in live
    live_isr = [b for b in state.isr if b in live]
    if leader_alive:
        if live_isr == state.isr:
            return None
        return PartitionState(state.leader, state.leader_epoch, live_isr, controller_epoch, state.zk_version)
    in_sync = [b for b in replicas if b in live and b in state.isr]
    if in_sync:
        return PartitionState(in_sync[0], state.leader_epoch + 1, [b for b in replicas if b in live_isr],
                              controller_epoch, state.zk_version)
    if unclean:
        alive = [b for b in replicas if b in live]
        if alive:
            return PartitionState(alive[0], state.leader_epoch + 1, [alive[0]], controller_epoch, state.zk_version)
    if state.leader == NO_LEADER:
        return None  # offline already: wait for an in-sync replica to come back
    last = [state.leader] if state.leader in state.isr or not state.isr else state.isr[-1:]
    return PartitionState(NO_LEADER, state.leader_epoch + 1, last, controller_epoch, state.zk_version)


def reassignment_step(replicas: list[int], adding: list[int], removing: list[int], state: PartitionState,
                      live: set[int], controller_epoch: int) -> PartitionState | list[int] | None:
    """A reassignment's next step (KIP-455): None while a replica being added is not in the
    ISR yet; a new state when the leader is leaving (a target replica in the ISR leads);
    else the target list, which completes it."""
    if any(b not in state.isr for b in adding):
        return None
    target = [b for b in replicas if b not in removing]
    if state.leader not in target:
        in_sync = [b for b in target if b in live and b in state.isr]
        if not in_sync:
            return None
        return PartitionState(in_sync[0], state.leader_epoch + 1, [b for b in state.isr if b in target],
                              controller_epoch, state.zk_version)
    return target


def widened(replicas: Mapping[int, list[int]], live: list[int], factor: int) -> dict[int, list[int]]:
    """Brokers to add to each partition so it has ``factor`` replicas (as far as the live
    brokers allow), taken round robin from the partition's place so they spread."""
    out: dict[int, list[int]] = {}
    for partition, assigned in sorted(replicas.items()):
        missing = factor - len(assigned)
        if missing <= 0:
            continue
        candidates = [b for b in live if b not in assigned]
        if not candidates:
            continue
        start = partition % len(candidates)
        rotated = candidates[start:] + candidates[:start]
        out[partition] = rotated[:missing]
    return out


class Controller:
    """``internal_topics``: name -> replication factor wanted (__consumer_offsets,
    __transaction_state): such a topic created with fewer replicas than wanted (fewer
    brokers were alive) gets more as brokers join."""

    def __init__(self, store: StateStore, live_brokers: Callable[[], set[int]],
                 unclean_allowed: Callable[[Mapping[str, str]], bool],
                 internal_topics: Mapping[str, int] | None = None,
                 rebalance: tuple[float, int] | None = None) -> None:
        """``rebalance``: (leader.imbalance.check.interval.seconds,
        leader.imbalance.per.broker.percentage) when auto.leader.rebalance.enable."""
        self._store = store
        self._live_brokers = live_brokers
        self._unclean_allowed = unclean_allowed
        self._internal_topics = dict(internal_topics or {})
        self._rebalance = rebalance
        self._next_rebalance = time.monotonic() + (rebalance[0] if rebalance else 0)

    def _move_replicas(self, topic: str, partition: int, replicas: list[int], adding: list[int], removing: list[int],
                       state: PartitionState, live: set[int], controller_epoch: int) -> int:
        step = reassignment_step(replicas, adding, removing, state, live, controller_epoch)
        if step is None:
            return 0
        store = self._store
        if isinstance(step, PartitionState):
            done = store.update_partition_state(topic, partition, step) is not None
            if done:
                log.warning("controller: %s-%d leader %d -> %d: its replicas move to %s", topic, partition, state.leader,
                            step.leader, [b for b in replicas if b not in removing])
            return int(done)
        if not store.complete_reassignment(topic, partition, step):
            return 0
        log.warning("controller: %s-%d now on %s (added %s, removed %s)", topic, partition, step, adding, removing)
        shrunk = [b for b in state.isr if b in step]
        if shrunk != state.isr:
            store.update_partition_state(topic, partition, PartitionState(state.leader, state.leader_epoch, shrunk,
                                                                          controller_epoch, state.zk_version))
        return 1

    def run_once(self, controller_epoch: int) -> int:
        """One pass over every partition; the number of state znodes written."""
        store = self._store
        store.refresh()
        live = self._live_brokers()
        written = 0
        for info in store.all():
            try:
                replicas = store.replicas(info.name)
            except Exception:
                continue  # deleted since all()
            factor = self._internal_topics.get(info.name)
            if factor is not None:
                grow = widened(replicas, sorted(live), factor)
                if grow and store.add_replicas(info.name, grow):
                    log.warning("controller: %s gets replicas on %s (its replication factor setting is %d)",
                                info.name, sorted({b for added in grow.values() for b in added}), factor)
                    written += 1
            states = store.partition_states(info.name)
            unclean = self._unclean_allowed(info.configs)
            for partition, (adding, removing) in sorted(store.reassignments(info.name).items()):
                state = states.get(partition)
                if state is not None:
                    written += self._move_replicas(info.name, partition, replicas[partition], adding, removing, state,
                                                   live, controller_epoch)
            for partition, assigned in sorted(replicas.items()):
                state = states.get(partition)
                if state is None:
                    # A topic from before states were written with it (or a lost write).
                    isr = [b for b in assigned if b in live]
                    store.set_partition_state(info.name, partition, isr[0] if isr else NO_LEADER, 0, isr or assigned[:1],
                                              controller_epoch)
                    written += 1
                    continue
                wanted = elect(assigned, state, live, unclean, controller_epoch)
                if wanted is None:
                    continue
                done = store.update_partition_state(info.name, partition, wanted)
                if done is None:
                    log.info("controller: %s-%d changed under us; deciding again next pass", info.name, partition)
                    continue
                written += 1
                if wanted.leader != state.leader:
                    log.warning("controller: %s-%d leader %d -> %d (epoch %d, ISR %s)", info.name, partition,
                                state.leader, wanted.leader, wanted.leader_epoch, wanted.isr)
        if self._rebalance is not None and time.monotonic() >= self._next_rebalance:
            self._next_rebalance = time.monotonic() + self._rebalance[0]
            moves = imbalanced(store, live, self._rebalance[1])
            if moves:
                elected = run_elections(store, live, moves, PREFERRED, controller_epoch)
                written += sum(1 for code in elected.values() if code == 0)
        return written


WRITE_ATTEMPTS = 5  # a state another writer keeps changing is decided again this many times


def write_decided(store: StateStore, topic: str, partition: int,
                  decide: Callable[[PartitionState], PartitionState | int | None]) -> PartitionState | int | None:
    """Read a partition's state now, ``decide`` what it should be, write that conditionally
    on the version read, and decide again when another writer got there first. The written
    state; ``decide``'s error code (UNKNOWN_TOPIC_OR_PARTITION without a state); None when
    there was nothing to write or the attempts ran out."""
    for _ in range(WRITE_ATTEMPTS):
        state = store.partition_state(topic, partition)
        if state is None:
            return UNKNOWN_TOPIC_OR_PARTITION
        wanted = decide(state)
        if wanted is None or isinstance(wanted, int):
            return wanted
        written = store.update_partition_state(topic, partition, wanted)
        if written is not None:
            return written
    return None


def fence_replica(store: StateStore, broker: int, others_alive: set[int],
                  unclean_allowed: Callable[[Mapping[str, str]], bool], controller_epoch: int,
                  only: set[tuple[str, int]] | None = None) -> int:
    """Treat ``broker`` as dead in every partition state (it lost its log), or in those of
    ``only`` (their logs were in a log dir that failed): out of each ISR, its leaderships
    to live in-sync replicas. The number of states written; a state changed meanwhile is
    read again (up to a few times)."""
    store.refresh()
    written = 0
    for info in store.all():
        try:
            replicas = store.replicas(info.name)
        except Exception:
            continue
        unclean = unclean_allowed(info.configs)
        for partition, assigned in replicas.items():
            if only is not None and (info.name, partition) not in only:
                continue

            def fenced(state: PartitionState, assigned: list[int] = assigned) -> PartitionState | None:
                if broker not in state.isr + [state.leader]:
                    return None
                return elect(assigned, state, others_alive, unclean, controller_epoch)

            written += isinstance(write_decided(store, info.name, partition, fenced), PartitionState)
    return written


PREFERRED, UNCLEAN = 0, 1  # ElectLeaders' election types
ELECTION_NOT_NEEDED, PREFERRED_LEADER_NOT_AVAILABLE, ELIGIBLE_LEADERS_NOT_AVAILABLE = 84, 80, 83


def elect_on_request(replicas: list[int], state: PartitionState, live: set[int], election_type: int,
                     controller_epoch: int) -> PartitionState | int:
    """ElectLeaders: the new state, or the error code Kafka's controller answers."""
    if election_type == PREFERRED:
        preferred = replicas[0]
        if state.leader == preferred:
            return ELECTION_NOT_NEEDED
        if preferred not in live or preferred not in state.isr:
            return PREFERRED_LEADER_NOT_AVAILABLE
        return PartitionState(preferred, state.leader_epoch + 1, list(state.isr), controller_epoch, state.zk_version)
    if state.leader in live:
        return ELECTION_NOT_NEEDED
    chosen = elect(replicas, state, live, True, controller_epoch)
    if chosen is None or chosen.leader < 0:
        return ELIGIBLE_LEADERS_NOT_AVAILABLE
    return chosen


def run_elections(store: StateStore, live: set[int], wanted: list[tuple[str, int]] | None, election_type: int,
                  controller_epoch: int) -> dict[tuple[str, int], int]:
    """ElectLeaders over ``wanted`` (None: every partition whose leader is not preferred):
    (topic, partition) -> error code (0: elected). A state changed meanwhile is read again."""
    store.refresh()
    if wanted is None:
        wanted = []
        for info in store.all():
            states = store.partition_states(info.name)
            for partition, replicas in store.replicas(info.name).items():
                state = states.get(partition)
                if state is not None and replicas and state.leader != replicas[0]:
                    wanted.append((info.name, partition))
    results: dict[tuple[str, int], int] = {}
    for topic, partition in wanted:
        try:
            assigned: list[int] | None = store.replicas(topic).get(partition)
        except Exception:
            assigned = None
        if not assigned:
            results[(topic, partition)] = UNKNOWN_TOPIC_OR_PARTITION
            continue

        def decide(state: PartitionState, assigned: list[int] = assigned) -> PartitionState | int:
            return elect_on_request(assigned, state, live, election_type, controller_epoch)

        outcome = write_decided(store, topic, partition, decide)
        if isinstance(outcome, PartitionState):
            log.info("controller: %s-%d led by %d by request (epoch %d)", topic, partition, outcome.leader,
                     outcome.leader_epoch)
            results[(topic, partition)] = 0
        else:
            results[(topic, partition)] = ELIGIBLE_LEADERS_NOT_AVAILABLE if outcome is None else outcome
    return results


def imbalanced(store: StateStore, live: set[int], percentage: int) -> list[tuple[str, int]]:
    """auto.leader.rebalance.enable: the partitions to give back to their preferred leader,
    for each broker whose share of not-led preferred partitions passes ``percentage``."""
    preferred_of: dict[int, list[tuple[str, int, bool]]] = {}
    for info in store.all():
        try:
            replicas = store.replicas(info.name)
        except Exception:
            continue
        states = store.partition_states(info.name)
        for partition, assigned in replicas.items():
            state = states.get(partition)
            if state is None or not assigned:
                continue
            preferred_of.setdefault(assigned[0], []).append((info.name, partition, state.leader == assigned[0]))
    out = []
    for broker, partitions in preferred_of.items():
        if broker not in live:
            continue
        not_led = [(t, p) for t, p, led in partitions if not led]
        if not_led and 100 * len(not_led) / len(partitions) > percentage:
            out.extend(not_led)
    return out
