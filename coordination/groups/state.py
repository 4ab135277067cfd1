"""The states of a classic consumer group and the transitions allowed between them.

Kafka's ClassicGroupState, with the same names (DescribeGroups and ListGroups report
them as these strings, and clients and tools match on them)::

    Empty ──join──▶ PreparingRebalance ──all joined / timeout──▶ CompletingRebalance
      ▲                 ▲      │                                        │
      │   last member   │      └──no member left──▶ Empty               │ leader's SyncGroup
      │   leaves/expires│                                               ▼
      └─────────────────┴──────────── join / leave / expiry ◀──────── Stable
    any state ──group deleted, or its offsets partition moved away──▶ Dead

Empty                no members; offsets may still be kept (a group of simple consumers
                     that only commits, or one whose consumers all left).
PreparingRebalance   a rebalance is under way: JoinGroup requests are parked until every
                     known member has rejoined or the rebalance timeout passes.
CompletingRebalance  join answers went out; waiting for the leader's SyncGroup with the
                     assignment (the other members' SyncGroups are parked meanwhile).
Stable               assignment delivered; heartbeats keep members alive.
Dead                 no members, no metadata: the group is being removed.
"""

from __future__ import annotations

import enum


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"

    @property
    def wire_name(self) -> str:
        return self.value

    @classmethod
    def from_wire(cls, name: str) -> "GroupState | None":
        """ListGroups' states filter matches names case-insensitively, as Kafka does."""
        for state in cls:
            if state.value.lower() == name.lower():
                return state
        return None


VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.PREPARING_REBALANCE: frozenset({GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.DEAD: frozenset({GroupState.STABLE, GroupState.PREPARING_REBALANCE, GroupState.COMPLETING_REBALANCE,
                                GroupState.EMPTY, GroupState.DEAD}),
}


class IllegalTransition(RuntimeError):
    """A bug in the coordinator: a transition the state table does not allow."""


def check_transition(current: GroupState, target: GroupState) -> None:
    if current not in VALID_PREVIOUS[target]:
        raise IllegalTransition(f"group cannot go from {current.value} to {target.value}")
