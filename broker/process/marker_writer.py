"""The transaction coordinator's markers, written where each partition lives.

A partition this broker leads gets its marker from its owning worker over the rings
(``RemotePartitionOps.write_markers``); a partition another broker leads, over the Kafka
protocol (WriteTxnMarkers, ``RemotePartitionClient.write_txn_markers``), as Kafka's
TransactionMarkerChannelManager sends them: one request per broker with all its partitions.
Each partition's error code comes back; the coordinator retries the ones that failed
(coordination/transactions/coordinator.py).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Awaitable, Callable

from broker.links.remote_ops import RemotePartitionOps
from broker.partitions.partition_ops import MarkerItem
from broker.partitions.placement import owner_index
from broker.partitions.remote_partition import RemotePartitionClient
from broker.protocol.errors import ErrorCode, KafkaError
from storage.types import TopicPartition

log = logging.getLogger(__name__)

# (leader broker, host, port) of a partition; a negative leader or port: no leader now.
Locate = Callable[[TopicPartition], tuple[int, str, int]]
MARKER_TIMEOUT_MS = 30_000  # request.timeout.ms, what Kafka's marker requests wait


class WorkerMarkerWriter:
    def __init__(self, links: list[RemotePartitionOps], node_id: int, locate: Locate,
                 remote_client: Callable[[str, int], RemotePartitionClient]) -> None:
        self.links = links
        self.node_id = node_id
        self.locate = locate
        self.remote_client = remote_client

    async def write(self, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
                    partitions: list[TopicPartition], transaction_version: int = 0) -> dict[TopicPartition, int]:
        codes: dict[TopicPartition, int] = {}
        local: dict[int, list[MarkerItem]] = {}
        remote: dict[tuple[str, int], list[TopicPartition]] = {}
        for tp in partitions:
            leader, host, port = self.locate(tp)
            if leader == self.node_id:
                local.setdefault(owner_index(tp, len(self.links)), []).append(
                    MarkerItem(tp, producer_id, producer_epoch, commit, coordinator_epoch, transaction_version))
            elif leader < 0 or port < 0:
                codes[tp] = int(ErrorCode.not_leader_or_follower)  # retried once a leader is known
            else:
                remote.setdefault((host, port), []).append(tp)
        calls: list[Awaitable[dict[TopicPartition, int]]] = [
            self._local(self.links[index], items) for index, items in local.items()]
        calls += [self._remote(host, port, tps, producer_id, producer_epoch, commit, coordinator_epoch, transaction_version)
                  for (host, port), tps in remote.items()]
        for answered in await asyncio.gather(*calls):
            codes.update(answered)
        return codes

    @staticmethod
    async def _local(link: RemotePartitionOps, items: list[MarkerItem]) -> dict[TopicPartition, int]:
        try:
            codes = await link.write_markers(items, MARKER_TIMEOUT_MS)
        except KafkaError as exc:  # the worker is down or restarting: every item is retried
            return {item.tp: int(exc.code) for item in items}
        return {item.tp: int(code) for item, code in zip(items, codes)}

    async def _remote(self, host: str, port: int, partitions: list[TopicPartition], producer_id: int,
                      producer_epoch: int, commit: bool, coordinator_epoch: int, transaction_version: int
                      ) -> dict[TopicPartition, int]:
        try:
            return await self.remote_client(host, port).write_txn_markers(producer_id, producer_epoch, commit,
                                                                          coordinator_epoch, partitions,
                                                                          transaction_version)
        except KafkaError as exc:
            return {tp: int(exc.code) for tp in partitions}
        except OSError as exc:
            log.info("transaction markers to %s:%d failed: %s", host, port, exc)
            return {tp: int(ErrorCode.network_exception) for tp in partitions}
