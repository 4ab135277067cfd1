"""A worker's questions to the transaction coordinator about a producer's transaction
(KIP-890; Kafka's AddPartitionsToTxnManager).

Before a transactional batch opens a transaction on a partition, the partition's leader
asks the coordinator whether the partition is in the producer's ongoing transaction
(``verify_only``, transaction.version 1 clients, who add partitions themselves), or has it
added (transaction.version 2 clients, who leave that to the broker: Produce v12).

The question is AddPartitionsToTxn v5 (a batch of transactions, a broker's request). It
goes to the elected coordinator: over the rings when it runs in this broker's coordinator
process (the message names this broker as a proven broker, which only a worker can: the
rings are not reachable by clients), else over the Kafka protocol to the broker that runs
it, proving itself as a broker as replica fetchers do. Nothing is cached: every answer is
for one transaction, which may end the moment after.

Errors as the partition's Produce answer them are mapped by the caller; here every
failure is a per-partition Kafka error code.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Awaitable, Callable

from broker.links.mesh import Mesh
from broker.process.coordinator_link import CoordinatorLink
from broker.protocol.errors import ErrorCode, KafkaError
from storage.types import TopicPartition

if TYPE_CHECKING:
    from broker.security.inter_broker import ClientSecurity

log = logging.getLogger(__name__)

ADD_PARTITIONS_TO_TXN = 24
# v5, as Kafka's brokers send it: its answer may say TRANSACTION_ABORTABLE, which the
# Produce answer passes on to clients that know it (v11+) and turns into INVALID_TXN_STATE
# for the others.
VERSION = 5
CLIENT_ID = "castle-txn-verifier"
CALL_TIMEOUT = 30.0  # Kafka waits request.timeout.ms for the coordinator's answer

Finder = Callable[[], Awaitable[tuple[int, int, str, int]]]


class TxnVerifier:
    def __init__(self, node_id: int, mesh: Mesh, coordinator_endpoint: int, find_coordinator: Finder,
                 security: "ClientSecurity | None") -> None:
        self.node_id = node_id
        self.mesh = mesh
        self.coordinator_endpoint = coordinator_endpoint
        self.find_coordinator = find_coordinator
        self.security = security
        self.link = CoordinatorLink(node_id, mesh, coordinator_endpoint, CLIENT_ID, CALL_TIMEOUT, security)

    async def check(self, transactional_id: str, producer_id: int, producer_epoch: int,
                    partitions: list[TopicPartition], add: bool) -> dict[TopicPartition, int]:
        """Per partition: 0 when it is in the transaction (or was just added), else the
        coordinator's error code."""
        version = VERSION
        by_topic: dict[str, list[int]] = {}
        for tp in partitions:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        fields = {"transactions": [{
            "transactional_id": transactional_id, "producer_id": producer_id, "producer_epoch": producer_epoch,
            "verify_only": not add, "topics": [{"name": name, "partitions": ids} for name, ids in by_topic.items()]}]}
        try:
            code, node_id, host, port = await self.find_coordinator()
            if code:
                return {tp: code for tp in partitions}
            if node_id == self.node_id:
                answer = await self._ask_here(version, fields)
            else:
                answer = await self.link.client(host, port).call(ADD_PARTITIONS_TO_TXN, version, fields)
        except KafkaError as exc:
            return {tp: int(exc.code) for tp in partitions}
        if answer.error_code:
            # Kafka: a coordinator that refuses the broker (CLUSTER_AUTHORIZATION_FAILED)
            # must not reach the client as that; the batch is simply not verified.
            code = int(answer.error_code)
            if code == ErrorCode.cluster_authorization_failed:
                log.warning("the transaction coordinator refused this broker's verification: CLUSTER_ACTION")
                code = int(ErrorCode.invalid_txn_state)
            return {tp: code for tp in partitions}
        codes = {tp: int(ErrorCode.unknown_server_error) for tp in partitions}
        for txn in answer.results_by_transaction:
            if txn.transactional_id != transactional_id:
                continue
            for topic in txn.topic_results:
                for result in topic.results_by_partition:
                    tp = TopicPartition(topic.name, int(result.partition_index))
                    if tp in codes:
                        codes[tp] = int(result.partition_error_code)
        return codes

    async def _ask_here(self, version: int, fields: dict[str, Any]) -> Any:
        return await self.link.ask_here(ADD_PARTITIONS_TO_TXN, version, fields)


    def close(self) -> None:
        self.link.close()
