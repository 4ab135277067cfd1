"""How a worker asks the elected coordinator a broker's question (the transaction verifier,
the share persister): a Kafka request, sent over the rings when the coordinator runs in this
broker's coordinator process (the message names this broker as a proven broker, which only a
worker can: the rings are not reachable by clients), else over the Kafka protocol to the
broker that runs it, as a proven broker (RemotePartitionClient, one kept per broker)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from broker.coordinator.forwarded import Forwarded
from broker.links.mesh import Mesh, Op
from broker.partitions.remote_partition import RemotePartitionClient
from broker.protocol import codec
from broker.protocol.build import build
from broker.security.broker_proof import PRINCIPAL_PREFIX

if TYPE_CHECKING:
    from broker.security.inter_broker import ClientSecurity


class CoordinatorLink:
    def __init__(self, node_id: int, mesh: Mesh, coordinator_endpoint: int, client_id: str, timeout: float,
                 security: "ClientSecurity | None") -> None:
        self.node_id = node_id
        self.mesh = mesh
        self.coordinator_endpoint = coordinator_endpoint
        self.client_id = client_id
        self.timeout = timeout
        self.security = security
        self._clients: dict[tuple[str, int], RemotePartitionClient] = {}

    async def ask_here(self, api_key: int, version: int, fields: dict[str, Any]) -> Any:
        """The request to this broker's coordinator process, over the rings: its decoded answer."""
        request_class = codec.request_class(api_key, version)
        assert request_class is not None  # the callers' fixed versions
        body = codec.encode_body(build(request_class, fields))
        forwarded = Forwarded(api_key, version, self.client_id, "/127.0.0.1", f"{PRINCIPAL_PREFIX}{self.node_id}", "",
                              body)
        answer: bytes = await self.mesh.call(self.coordinator_endpoint, Op.SERVE, forwarded.parts(), bytes,
                                             self.timeout)
        entity, _size = codec.reader_for(codec.response_class(api_key, version))(answer, 0)
        return entity

    def client(self, host: str, port: int) -> RemotePartitionClient:
        """A connection to the broker at host:port, as a proven broker."""
        found = self._clients.get((host, port))
        if found is None:
            found = self._clients[(host, port)] = RemotePartitionClient(host, port, self.client_id, self.timeout,
                                                                        security=self.security)
        return found

    def close(self) -> None:
        for client in self._clients.values():
            client.close_now()
        self._clients.clear()
