"""Castle's own small Kafka client for the admin APIs confluent-kafka's AdminClient lacks.

confluent-kafka 2.16 (librdkafka) has no ListTransactions, DescribeTransactions,
DescribeProducers, nor a way to send WriteTxnMarkers, which ``castle transactions`` needs,
so those commands talk to the brokers over the Kafka protocol themselves, as Kafka's Java
Admin does: Metadata for the brokers and the partitions' leaders, FindCoordinator for a
transactional id's coordinator, then each request to the broker that answers it. The
connections are broker/partitions/remote_partition.py's (kio encodes and decodes the
bodies); any Kafka broker answers the same.

Security follows the librdkafka settings the other commands take (``--property``,
``--command-config``): ``security.protocol`` PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL;
``sasl.mechanism`` PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 with ``sasl.username`` and
``sasl.password``; ``ssl.ca.location``, ``ssl.certificate.location``,
``ssl.key.location``, ``ssl.key.password``, ``ssl.endpoint.identification.algorithm``
(``https``, the default, checks the host name; ``none`` does not). Other librdkafka
settings do not concern these connections and are ignored.

Every call runs under the command's deadline (Session): a broker that does not answer in
the time left is "no answer" (exit 1, one line), as for the AdminClient commands.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Callable, Mapping, TypeVar

from broker.admin.session import AdminError, Session, UsageError
from broker.partitions.remote_partition import RemotePartitionClient
from broker.protocol.errors import ErrorCode, KafkaError
from broker.security.inter_broker import ClientSecurity

T = TypeVar("T")

METADATA, FIND_COORDINATOR = 3, 10
TRANSACTION_KEY_TYPE = 1
CLIENT_ID = "castle-admin"
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
# Answers that say "ask again shortly": the coordinator is being elected, loading, or moved.
RETRIABLE = frozenset({int(ErrorCode.coordinator_not_available), int(ErrorCode.coordinator_load_in_progress),
                       int(ErrorCode.not_coordinator)})
RETRY_BACKOFF = 0.1


@dataclass(frozen=True)
class Node:
    node_id: int
    host: str
    port: int


@dataclass(frozen=True)
class PartitionInfo:
    partition: int
    leader: int  # -1: none
    replicas: tuple[int, ...]


def client_security(settings: Mapping[str, str]) -> ClientSecurity | None:
    """The connections' TLS and SASL from librdkafka's settings; UsageError when wrong."""
    protocol = settings.get("security.protocol", "plaintext").upper()
    if protocol not in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"):
        raise UsageError(f"security.protocol={protocol}: expected PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL")
    context = _tls_context(settings) if protocol in ("SSL", "SASL_SSL") else None
    if not protocol.startswith("SASL"):
        return ClientSecurity(context, None) if context is not None else None
    mechanism = (settings.get("sasl.mechanism") or settings.get("sasl.mechanisms") or "GSSAPI").upper()
    if mechanism not in SASL_MECHANISMS:
        raise UsageError(f"sasl.mechanism={mechanism}: this command speaks {', '.join(SASL_MECHANISMS)}")
    return ClientSecurity(context, mechanism, settings.get("sasl.username", ""), settings.get("sasl.password", ""))


def _tls_context(settings: Mapping[str, str]) -> ssl.SSLContext:
    try:
        context = ssl.create_default_context(cafile=settings.get("ssl.ca.location") or None)
        certificate = settings.get("ssl.certificate.location")
        if certificate:
            context.load_cert_chain(certificate, settings.get("ssl.key.location") or None,
                                    settings.get("ssl.key.password") or None)
    except (OSError, ssl.SSLError) as exc:
        raise UsageError(f"TLS settings: {exc}") from None
    algorithm = settings.get("ssl.endpoint.identification.algorithm", "https").lower()
    if algorithm not in ("https", "none"):
        raise UsageError(f"ssl.endpoint.identification.algorithm={algorithm}: expected https or none")
    context.check_hostname = algorithm == "https"
    return context


def _address(text: str) -> tuple[str, int]:
    host, _, port = text.strip().rpartition(":")
    if not host or not port.isdigit():
        raise UsageError(f"--bootstrap-server {text!r}: expected HOST:PORT")
    return host.strip("[]"), int(port)


class AdminWire:
    """One command's connections (one per broker, opened on first use), on one event loop."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.security = client_security(session.settings)
        self.bootstrap = [_address(part) for part in session.bootstrap.split(",") if part.strip()]
        self._loop = asyncio.new_event_loop()
        self._clients: dict[tuple[str, int], RemotePartitionClient] = {}
        self._brokers: dict[int, Node] | None = None

    def __enter__(self) -> AdminWire:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        for client in self._clients.values():
            self._loop.run_until_complete(client.close())
        self._clients.clear()
        self._loop.close()

    # ------------------------------------------------------------------ calls
    def call(self, node: Node | tuple[str, int], api_key: int, version: int, fields: dict[str, Any],
             answer_class: type | None = None) -> Any:
        """One request to one broker, its decoded answer; AdminError (Unreachable when no
        answer came in the time left)."""
        address = (node.host, node.port) if isinstance(node, Node) else node
        client = self._clients.get(address)
        if client is None:
            client = self._clients[address] = RemotePartitionClient(*address, CLIENT_ID, timeout=self.session.remaining(),
                                                                    security=self.security)
        client.timeout = self.session.remaining()
        try:
            return self._loop.run_until_complete(client.call(api_key, version, fields, answer_class))
        except KafkaError as exc:
            if exc.code in (ErrorCode.network_exception, ErrorCode.request_timed_out):
                raise self.session.unreachable(str(exc)) from None
            raise AdminError(f"{exc} ({ErrorCode(exc.code).name.upper()})", int(exc.code)) from None

    def call_any(self, api_key: int, version: int, fields: dict[str, Any]) -> Any:
        """The request to the first bootstrap broker that answers."""
        last: AdminError | None = None
        for address in self.bootstrap:
            try:
                return self.call(address, api_key, version, fields)
            except AdminError as exc:
                if exc.kafka_code is not None:
                    raise
                last = exc
        raise last if last is not None else self.session.unreachable()

    def until_settled(self, attempt: Callable[[], tuple[int, T]]) -> tuple[int, T]:
        """``attempt()`` again while it answers a retriable coordinator error and time is left."""
        while True:
            code, value = attempt()
            if code not in RETRIABLE or self.session.deadline - time.monotonic() < 2 * RETRY_BACKOFF:
                return code, value
            time.sleep(RETRY_BACKOFF)

    # ------------------------------------------------------------------ metadata
    def _metadata(self, topics: list[str] | None) -> Any:
        return self.call_any(METADATA, 12, {
            "topics": None if topics is None else [{"name": t, "topic_id": None} for t in topics],
            "allow_auto_topic_creation": False, "include_topic_authorized_operations": False})

    def brokers(self) -> dict[int, Node]:
        if self._brokers is None:
            answer = self._metadata([])
            self._brokers = {int(b.node_id): Node(int(b.node_id), b.host, int(b.port)) for b in answer.brokers}
        return self._brokers

    def broker(self, node_id: int) -> Node:
        node = self.brokers().get(node_id)
        if node is None:
            raise AdminError(f"broker {node_id} is not in the cluster (brokers: "
                             f"{', '.join(map(str, sorted(self.brokers()))) or 'none'})")
        return node

    def partitions(self, topics: list[str] | None) -> dict[str, list[PartitionInfo]]:
        """The partitions of the named topics (None: every topic, internal ones too); a
        topic that fails (unknown, not authorized) raises AdminError naming it."""
        answer = self._metadata(topics)
        if self._brokers is None:
            self._brokers = {int(b.node_id): Node(int(b.node_id), b.host, int(b.port)) for b in answer.brokers}
        out: dict[str, list[PartitionInfo]] = {}
        for topic in answer.topics:
            if topic.error_code:
                code = ErrorCode(topic.error_code)
                raise AdminError(f"topic '{topic.name}': {code.name.upper()}", int(code))
            out[topic.name] = sorted((PartitionInfo(int(p.partition_index), int(p.leader_id),
                                                    tuple(int(r) for r in p.replica_nodes)) for p in topic.partitions),
                                     key=lambda p: p.partition)
        return out

    def leader(self, topic: str, partition: int) -> Node:
        partitions = {p.partition: p for p in self.partitions([topic]).get(topic, [])}
        found = partitions.get(partition)
        if found is None:
            raise AdminError(f"topic '{topic}' has no partition {partition}", int(ErrorCode.unknown_topic_or_partition))
        if found.leader < 0:
            raise AdminError(f"{topic}-{partition} has no leader", int(ErrorCode.leader_not_available))
        return self.broker(found.leader)

    def transaction_coordinator(self, transactional_id: str) -> tuple[int, Node | None]:
        """(error code, the coordinator) of a transactional id (FindCoordinator v4, key type 1)."""
        answer = self.call_any(FIND_COORDINATOR, 4, {"key_type": TRANSACTION_KEY_TYPE,
                                                     "coordinator_keys": [transactional_id]})
        (found,) = answer.coordinators
        if found.error_code:
            return int(found.error_code), None
        return 0, Node(int(found.node_id), found.host, int(found.port))
