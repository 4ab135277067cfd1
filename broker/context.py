"""What an API handler gets and what it returns, typed; API modules import this, never the
transport (broker/network/connection.py) or the worker (broker/process/node.py).

A handler is ``handle(ctx: RequestContext, request: <its request type>) -> Response`` (or
a coroutine of one). ``ctx.node`` offers the worker's services through narrow interfaces
(the anchor is Redpanda's request_context.h): topics, partition routing, fetch services,
the coordinator process, and the broker's identity and counters. broker.process.node.WorkerNode
implements all of them; mypy checks that it does wherever a context is made.
Coordinator-side API functions get a CoordinatorContext instead.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Awaitable, Callable, Protocol, TypeVar, Union

from kio.static.protocol import Entity

from broker.links.forwarding import Router

T = TypeVar("T")

if TYPE_CHECKING:
    from broker.apis.share_sessions import ShareSessions
    from broker.config import BrokerConfig
    from broker.coordinator.forwarded import RequestBody
    from broker.dynamic_configs import DynamicBrokerConfigs
    from broker.listeners import Listener
    from broker.logger_levels import BrokerLoggers
    from broker.network.segment_files import SegmentFiles
    from broker.partitions.purgatory import FetchPurgatory
    from broker.partitions.replication_throttle import ReplicationThrottles
    from broker.partitions.share_partitions import ShareSettings
    from broker.process.metrics import WorkerMetrics
    from broker.process.share_persister import SharePersister
    from broker.quotas.book import QuotaBook
    from broker.security.broker_security import BrokerSecurity
    from broker.security.connection_auth import ConnectionAuth
    from broker.telemetry.service import WorkerTelemetry
    from coordination.acls.model import Operation, ResourceType
    from coordination.backend import TopicRegistry
    from coordination.finalized_features import FinalizedFeatures
    from coordination.group_configs import GroupConfigs
    from coordination.groups.coordinator import GroupCoordinator
    from coordination.share.state_coordinator import ShareStateCoordinator
    from coordination.snapshot import ClusterSnapshot
    from coordination.topics import TopicInfo
    from coordination.transactions.coordinator import TransactionCoordinator
    from storage.manager import LogManager
    from storage.types import TopicPartition


@dataclass(slots=True)
class FileChunk:
    """A range of a file to send with os.sendfile; ``fd`` is ours to close when done."""

    fd: int
    position: int
    length: int


class RawResponse:
    """A response built by hand: buffers and file ranges, already framed except for the
    response header (Fetch's zero-copy path)."""

    __slots__ = ("chunks", "size")

    def __init__(self, chunks: list[bytes | FileChunk], size: int) -> None:
        self.chunks = chunks
        self.size = size

    def release(self) -> None:
        for chunk in self.chunks:
            if isinstance(chunk, FileChunk):
                os.close(chunk.fd)


class NoResponse:
    """acks=0 Produce: the request takes its place in the order and nothing is written."""

    def __repr__(self) -> str:
        return "NO_RESPONSE"


NO_RESPONSE = NoResponse()

# A kio response entity, a body already encoded (Produce, ApiVersions, the coordinator's
# answers), a RawResponse (Fetch), or NO_RESPONSE.
Response = Union[Entity, bytes, RawResponse, NoResponse]


# ---------------------------------------------------------------------- the worker's services
class ConnectionHandle(Protocol):
    peer: str
    host: str  # the peer's address, as ACLs name hosts
    listener: "Listener"
    auth: "ConnectionAuth"
    # (client_software_name, client_software_version) from ApiVersions v3+, else None each.
    client_software: tuple[str | None, str | None]

    def close_after_answer(self) -> None: ...

    def mute_after_answer(self, delay_ms: int) -> None:
        """A quota's throttle (KIP-219): answers go out now, no request is read for ``delay_ms``."""
        ...

    def on_close(self, callback: Callable[[], None]) -> None:
        """Run ``callback`` when the connection closes."""
        ...


class TopicServices(Protocol):
    @property
    def registry(self) -> "TopicRegistry": ...

    def topic(self, name: str) -> "TopicInfo | None":
        """The topic, refreshing the registry once if it is not known yet."""
        ...

    async def registry_changed(self) -> None:
        """After this worker changed the registry: every worker syncs before we answer."""
        ...

    async def run_admin(self, change: Callable[[], T]) -> T:
        """A change to the topic registry, run off the event loop (it may wait on
        ZooKeeper); the snapshot has loaded it when this returns."""
        ...

    async def next_producer_id(self) -> int: ...


class FetchServices(Protocol):
    @property
    def purgatory(self) -> "FetchPurgatory": ...

    @property
    def segment_files(self) -> "SegmentFiles": ...


class ShareServices(Protocol):
    @property
    def share_sessions(self) -> "ShareSessions": ...

    def share_settings(self, group_id: str) -> "ShareSettings":
        """A share group's share partition settings (its group configs, else the broker's)."""
        ...


class CoordinatorAccess(Protocol):
    async def to_coordinator(self, ctx: "RequestContext", request: "RequestBody") -> bytes:
        """A coordinator API's request, undecoded, to the coordinator process: its encoded answer."""
        ...

    async def find_coordinator(self, transactions: bool = False, share: bool = False) -> tuple[int, int, str, int]: ...

    async def check_transaction(self, transactional_id: str, producer_id: int, producer_epoch: int,
                                partitions: list[TopicPartition], add: bool) -> dict[TopicPartition, int]:
        """Ask the transaction coordinator whether ``partitions`` are in the producer's
        transaction (``add``: have them added); an error code per partition
        (broker/process/txn_verifier.py)."""
        ...

    @property
    def share_persister(self) -> "SharePersister":
        """The share coordinator's client (broker/process/share_persister.py)."""
        ...


class BrokerIdentity(Protocol):
    @property
    def node_id(self) -> int: ...

    @property
    def cluster_id(self) -> str: ...

    @property
    def config(self) -> "BrokerConfig": ...

    @property
    def cluster(self) -> "ClusterSnapshot": ...

    @property
    def logs(self) -> "LogManager": ...

    @property
    def count(self) -> int:
        """How many workers this broker runs (each writes its own partitions)."""
        ...

    @property
    def stats(self) -> dict[str, int]: ...

    @property
    def metrics(self) -> "WorkerMetrics": ...

    @property
    def security(self) -> "BrokerSecurity": ...

    @property
    def group_configs(self) -> "GroupConfigs": ...

    @property
    def telemetry(self) -> "WorkerTelemetry": ...

    @property
    def features(self) -> "FinalizedFeatures":
        """The cluster's finalized feature levels (coordination/finalized_features.py)."""
        ...

    @property
    def dynamic_configs(self) -> "DynamicBrokerConfigs": ...

    @property
    def loggers(self) -> "BrokerLoggers": ...

    @property
    def quotas(self) -> "QuotaBook": ...

    @property
    def replication_throttles(self) -> "ReplicationThrottles": ...


class WorkerServices(BrokerIdentity, TopicServices, Router, FetchServices, ShareServices, CoordinatorAccess, Protocol):
    """Everything a handler may use of the worker that serves its connection."""


@dataclass(slots=True)
class RequestContext:
    node: WorkerServices
    connection: ConnectionHandle
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    frame_size: int = 0  # counted in the connection's queued request bytes until answered
    started: float = 0.0  # time.perf_counter() when the frame was taken, for the latency metric


async def _no_high_watermark(_topic: str, _partition: int) -> int:
    return -1


@dataclass(slots=True)
class CoordinatorContext:
    """What a coordinator-side API function gets (the worker's RequestContext's twin)."""

    coordinator: "GroupCoordinator"
    api_key: int
    api_version: int
    client_id: str | None
    client_host: str
    topic_exists: Callable[[str, int], bool]
    # Kafka's authorizer for the requester (principal and host bound): always True without one.
    allowed: Callable[["Operation", "ResourceType", str], bool] = lambda _op, _type, _name: True
    # The transaction coordinator (the same process serves groups and transactions).
    transactions: "TransactionCoordinator | None" = None
    # A broker sent it (a proven broker, the inter-broker user, or CLUSTER_ACTION): what
    # Kafka requires of the broker-only versions (AddPartitionsToTxn v4+).
    from_broker: Callable[[], bool] = lambda: False
    # The share coordinator (KIP-932's share-partition state; the same process).
    share_state: "ShareStateCoordinator | None" = None
    # A partition's high watermark, asked of its leader (-1: not known).
    high_watermark: Callable[[str, int], Awaitable[int]] = _no_high_watermark
