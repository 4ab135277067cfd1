"""The coordination backend interface, its session states and (from coordination/errors.py) its errors; which backend a
broker opens is coordination/open_backend.py's choice.

One interface for every process of a broker. The coordinator process registers the
broker, campaigns and mirrors groups through it; each worker opens its own backend and
reads it only through a ``ClusterSnapshot`` (coordination/snapshot.py), which keeps what
the backend's watches report in memory so that a worker's loop never waits on it.

Two implementations, the same interface:

* ``ZooKeeperBackend`` (coordination/zookeeper.py) when ``zookeeper.connect`` is set: a
  cluster of brokers registers, elects the group coordinator and keeps the topic registry
  in ZooKeeper (layout: coordination/znodes.py).
* ``LocalBackend`` (coordination/local.py) otherwise: one machine, one broker; the
  election is an exclusive flock, the registry a JSON file.

Every method blocks (network round trips, flock, fsync): call them from an executor
thread, never from an event loop. Callbacks (state listeners, watches) run on the
backend's own threads; they must only hand the news over, e.g.
``loop.call_soon_threadsafe(queue.put_nowait, item)``, and return. Blocking in one stalls
every other callback of that backend (kazoo delivers them all on one thread), and calling
back into the backend from a callback can deadlock.

Session states passed to listeners:

* ``CONNECTED``: connected; after a ``LOST`` this is a *new* session.
* ``SUSPENDED``: the connection dropped; the session (and our ephemeral znodes) may still
  be alive. A coordinator should stop taking decisions until CONNECTED or LOST.
* ``LOST``: the session is gone and with it the broker registration and the coordinator
  znode. The caller must ``reregister()`` and, if it wants to lead, ``campaign()`` again;
  a coordinator that sees LOST is deposed (its writes are fenced from now on).

Fencing: ``campaign`` returns a new epoch, one higher than any before it, persisted in
ZooKeeper (/consumers/coordinator_epoch) or on disk (``<data_dir>/coordinator_epoch``).
Brokers compare the epoch a coordinator stamps on its requests with ``current_epoch()``
and refuse an older one, so a deposed coordinator that has not noticed yet cannot write.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Callable, Literal, Mapping, Protocol

# The backend's errors live in coordination/errors.py (which the stores' ZooKeeper calls import
# without this interface); they are named here too, where callers of the backend look for them.
from coordination.errors import BrokerIdInUse as BrokerIdInUse
from coordination.errors import CoordinationError as CoordinationError
from coordination.errors import CoordinationUnavailable as CoordinationUnavailable
from coordination.errors import NotCoordinator as NotCoordinator
from coordination.topics import TopicInfo
from coordination.znodes import Endpoints, PartitionState

if TYPE_CHECKING:
    from coordination.acls.store import AclStore
    from coordination.broker_config_store import BrokerConfigStore
    from coordination.client_metrics_store import ClientMetricsStore
    from coordination.client_quotas import QuotaStore
    from coordination.credentials import CredentialStore
    from coordination.delegation_tokens import TokenStore
    from coordination.feature_store import FeatureStore
    from coordination.group_config_store import GroupConfigStore

SessionState = Literal["CONNECTED", "SUSPENDED", "LOST"]
CONNECTED: SessionState = "CONNECTED"
SUSPENDED: SessionState = "SUSPENDED"
LOST: SessionState = "LOST"

# What a callback returns is ignored (a call_soon_threadsafe handle, say).
StateListener = Callable[[SessionState], object]
SessionCredentials = tuple[int, bytes]  # a ZooKeeper session's id and password
Watcher = Callable[[], object]


class TopicRegistry(Protocol):
    """What brokers need of a topic registry; LocalTopicRegistry's interface, plus
    ``replicas`` and a placement on ``create`` (``assignment``: partition -> replicas;
    ``brokers``: the brokers it may go to). Changes raise
    coordination.topics.TopicRegistryError(code, message)."""

    @property
    def snapshot_generation(self) -> int:
        """Bumped whenever the snapshot is replaced, by whichever refresh() replaced it."""
        ...

    def refresh(self) -> bool: ...
    def get(self, name: str) -> TopicInfo | None: ...
    def by_id(self, topic_id: uuid.UUID) -> TopicInfo | None: ...
    def all(self) -> list[TopicInfo]: ...
    def create(self, name: str, partitions: int, configs: Mapping[str, str], topic_id: uuid.UUID | None = None,
               validate_only: bool = False, assignment: Mapping[int, list[int]] | None = None,
               brokers: list[int] | None = None, replication_factor: int = 1) -> TopicInfo: ...
    def delete(self, name: str) -> TopicInfo: ...
    def set_partitions(self, name: str, count: int, validate_only: bool = False,
                       assignment: Mapping[int, list[int]] | None = None) -> TopicInfo: ...
    def set_configs(self, name: str, update: Callable[[dict[str, str]], dict[str, str]]) -> TopicInfo: ...
    def allocate_producer_ids(self, count: int) -> int: ...
    def replicas(self, name: str) -> dict[int, list[int]]: ...
    def partition_states(self, name: str) -> dict[int, PartitionState]: ...


class CoordinationBackend(Protocol):
    node_id: int

    # ------------------------------------------------------------ life cycle
    def start(self, timeout: float = 30.0) -> None:
        """Connect (ZooKeeper: create the chroot and the persistent roots); raises
        CoordinationUnavailable after ``timeout`` seconds."""

    def close(self) -> None:
        """End the session: our ephemeral znodes go at once, the flock is released, and
        a ``campaign`` blocked in another thread raises CoordinationUnavailable."""

    def add_state_listener(self, fn: StateListener) -> None:
        """``fn(state)`` on every session state change, from the backend's thread."""

    def session_credentials(self) -> SessionCredentials | None:
        """What another process of this broker needs to resume the session (ZooKeeper),
        keeping its ephemeral znodes; None without a session (the local backend)."""

    # ------------------------------------------------------------ cluster and brokers
    def cluster_id(self, proposed: str) -> str:
        """Store ``proposed`` as the cluster id unless one exists; return the stored one."""

    def check_log_dirs(self, node_id: int, directory_ids: list[str],
                       unclean_allowed: Callable[[Mapping[str, str]], bool]) -> bool:
        """Before the broker serves: fence it out of every ISR if its log dirs are not the
        ones the cluster recorded (a lost disk); True when they were not."""
        ...

    def register_broker(self, node_id: int, endpoints: Endpoints, protocol_map: Mapping[str, str] | None = None,
                        wait_for_stale: float = 0.0) -> None:
        """Announce this broker (every listener's address) for the session's life;
        BrokerIdInUse if the id is taken."""

    def reregister(self) -> None:
        """Register again what ``register_broker`` registered (after LOST)."""

    def broker_secret(self) -> bytes:
        """The cluster's secret (created once, like the cluster id) with which brokers prove
        to each other that they are brokers (broker/security/broker_proof.py)."""
        ...

    def acls(self) -> "AclStore":
        """The ACL store (Kafka's /kafka-acl znodes; a file locally); one per backend."""
        ...

    def credentials(self) -> "CredentialStore":
        """The SCRAM credential store (/config/users in ZooKeeper; a file locally); one per backend."""
        ...

    def group_configs(self) -> "GroupConfigStore":
        """The groups' config overrides (Kafka's /config/groups znodes; a file locally); one per backend."""
        ...

    def client_metrics(self) -> "ClientMetricsStore":
        """Client-metrics subscriptions (Kafka's /config/client-metrics znodes; a file locally); one per backend."""

    def features(self) -> "FeatureStore":
        """The finalized feature levels (Kafka's /feature znode; a file locally); one per backend."""

    def broker_configs(self) -> "BrokerConfigStore":
        """Dynamic broker configs (Kafka's /config/brokers znodes; a file locally); one per backend."""

    def client_quotas(self) -> "QuotaStore":
        """The client quotas (Kafka's /config/users, /config/clients, /config/ips; a file locally); one per backend."""
        ...

    def delegation_tokens(self) -> "TokenStore":
        """Delegation tokens (Kafka's /delegation_token znodes; a file locally); one per backend."""
        ...

    def live_brokers(self) -> dict[int, Endpoints]:
        """node id -> listener name -> (host, port), of every registered broker."""

    def watch_brokers(self, fn: Watcher) -> None:
        """``fn()`` once now and whenever the set of live brokers changes."""

    # ------------------------------------------------------------ election
    def campaign(self, node_id: int, timeout: float | None = None) -> int:
        """Block until this process is the coordinator; return its new epoch (the same
        one again if it already is). Raises TimeoutError after ``timeout`` seconds, and
        CoordinationUnavailable when closed meanwhile or when ZooKeeper stays unreachable
        past the retry deadline (the caller campaigns again)."""

    def resign(self) -> None:
        """Stop being the coordinator (if we are) so another campaign can win."""

    def coordinator(self) -> tuple[int, int] | None:
        """(broker id, epoch) of the current coordinator, or None if there is none."""

    def current_epoch(self) -> int:
        """The latest coordinator epoch ever granted (0 before the first election)."""

    def watch_coordinator(self, fn: Watcher) -> None:
        """``fn()`` once now and whenever the coordinator changes (elected or gone)."""

    # ------------------------------------------------------------ registry and group mirror
    def topics(self) -> TopicRegistry:
        """The topic registry of this backend (one object per backend)."""

    def watch_topics(self, fn: Watcher) -> None:
        """``fn()`` once now and whenever a topic may have changed; the next
        ``topics().refresh()`` loads it."""

    def write_group_members(self, group: str, members: Mapping[str, bytes]) -> None:
        """Replace the mirror of ``group``'s members (member id -> JSON). Coordinator only."""

    def write_group_owners(self, group: str, owners: Mapping[tuple[str, int], str]) -> None:
        """Replace the mirror of who owns which partition. Coordinator only."""

    def delete_group(self, group: str) -> None:
        """Remove the group's mirror. Coordinator only."""
