"""A worker's client of the share coordinator (KIP-932; Kafka's DefaultStatePersister): what a
share-partition leader reads and writes of its share-partitions' durable state.

Each call is Kafka's request (InitializeShareGroupState, ReadShareGroupState,
WriteShareGroupState v1, DeleteShareGroupState, ReadShareGroupStateSummary v1) for one
share-partition, sent to the elected coordinator: over the rings when it runs in this
broker's coordinator process (the message names this broker as a proven broker, which only
a worker can: the rings are not reachable by clients), else over the Kafka protocol to the
broker that runs it, proving itself as a broker (as broker/process/txn_verifier.py does).

The answers are the coordinator's, as ints (and PersistedState for reads). Where the
coordinator is moving (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE,
COORDINATOR_LOAD_IN_PROGRESS, its process restarting, a broker unreachable), the call looks
for it again and retries with a growing backoff, as Kafka's persister does, for up to
RETRY_SECONDS; after that the last error is the answer.

A read over the wire learns no leader epoch or delivery complete count
(ReadShareGroupState's answer has neither): the PersistedState carries the leader epoch
asked with (the coordinator recorded it) and delivery_complete_count -1.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import TYPE_CHECKING, Any, Awaitable, Callable

from broker.links.mesh import Mesh
from broker.process.coordinator_link import CoordinatorLink
from broker.protocol.errors import ErrorCode, KafkaError
from coordination.share.persisted import PersistedState
from coordination.share.records import NO_DELIVERY_COMPLETE_COUNT, StateBatch

if TYPE_CHECKING:
    from broker.security.inter_broker import ClientSecurity

log = logging.getLogger(__name__)

INITIALIZE, READ, WRITE, DELETE, READ_SUMMARY = 83, 84, 85, 86, 87
VERSIONS = {INITIALIZE: 0, READ: 0, WRITE: 1, DELETE: 0, READ_SUMMARY: 1}
CLIENT_ID = "castle-share-persister"
CALL_TIMEOUT = 30.0
RESTART_WAIT = 5.0  # how long a call waits for this broker's coordinator process to come back
RETRY_SECONDS = 15.0  # how long a call keeps looking for a coordinator that moves or restarts
LAST_ATTEMPT_SECONDS = 1.0  # the least an attempt is given, even at the window's end
FIRST_BACKOFF, MAX_BACKOFF = 0.05, 1.0
RETRIABLE = frozenset({int(ErrorCode.not_coordinator), int(ErrorCode.coordinator_not_available),
                       int(ErrorCode.coordinator_load_in_progress), int(ErrorCode.network_exception),
                       int(ErrorCode.request_timed_out), int(ErrorCode.not_leader_or_follower)})

Finder = Callable[[], Awaitable[tuple[int, int, str, int]]]


class SharePersister:
    """``node.share_persister`` of every worker."""

    def __init__(self, node_id: int, mesh: Mesh, coordinator_endpoint: int, find_coordinator: Finder,
                 security: "ClientSecurity | None", retry_seconds: float = RETRY_SECONDS) -> None:
        self.node_id = node_id
        self.mesh = mesh
        self.coordinator_endpoint = coordinator_endpoint
        self.find_coordinator = find_coordinator  # the elected coordinator's (error, node id, host, port)
        self.security = security
        self.retry_seconds = retry_seconds
        self.link = CoordinatorLink(node_id, mesh, coordinator_endpoint, CLIENT_ID, CALL_TIMEOUT, security)

    # ------------------------------------------------------------------ the contract
    async def initialize(self, group_id: str, topic_id: uuid.UUID, partition: int, state_epoch: int,
                         start_offset: int) -> int:
        answer = await self._partition_answer(INITIALIZE, group_id, topic_id, {
            "partition": partition, "state_epoch": state_epoch, "start_offset": start_offset})
        return _code(answer)

    async def read(self, group_id: str, topic_id: uuid.UUID, partition: int, leader_epoch: int) -> PersistedState:
        answer = await self._partition_answer(READ, group_id, topic_id,
                                              {"partition": partition, "leader_epoch": leader_epoch})
        if isinstance(answer, int) or answer.error_code:
            return PersistedState(_code(answer))
        batches = tuple(StateBatch(int(b.first_offset), int(b.last_offset), int(b.delivery_state),
                                   int(b.delivery_count)) for b in answer.state_batches)
        return PersistedState(0, int(answer.state_epoch), leader_epoch, int(answer.start_offset),
                              NO_DELIVERY_COMPLETE_COUNT, batches)

    async def write(self, group_id: str, topic_id: uuid.UUID, partition: int, state_epoch: int, leader_epoch: int,
                    start_offset: int, delivery_complete_count: int, batches: tuple[StateBatch, ...]) -> int:
        answer = await self._partition_answer(WRITE, group_id, topic_id, {
            "partition": partition, "state_epoch": state_epoch, "leader_epoch": leader_epoch,
            "start_offset": start_offset, "delivery_complete_count": delivery_complete_count,
            "state_batches": [{"first_offset": b.first_offset, "last_offset": b.last_offset,
                               "delivery_state": b.delivery_state, "delivery_count": b.delivery_count}
                              for b in batches]})
        return _code(answer)

    async def delete(self, group_id: str, topic_id: uuid.UUID, partition: int) -> int:
        return _code(await self._partition_answer(DELETE, group_id, topic_id, {"partition": partition}))

    async def summary(self, group_id: str, topic_id: uuid.UUID, partition: int, leader_epoch: int) -> PersistedState:
        answer = await self._partition_answer(READ_SUMMARY, group_id, topic_id,
                                              {"partition": partition, "leader_epoch": leader_epoch})
        if isinstance(answer, int) or answer.error_code:
            return PersistedState(_code(answer))
        return PersistedState(0, int(answer.state_epoch), int(answer.leader_epoch), int(answer.start_offset),
                              int(answer.delivery_complete_count))

    def close(self) -> None:
        self.link.close()

    # ------------------------------------------------------------------ inside
    async def _partition_answer(self, api_key: int, group_id: str, topic_id: uuid.UUID,
                                partition: dict[str, Any]) -> Any:
        """The answer's one partition result, or an error code (int) when none came."""
        fields = {"group_id": group_id, "topics": [{"topic_id": topic_id, "partitions": [partition]}]}
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.retry_seconds
        backoff = FIRST_BACKOFF
        while True:
            # Each attempt is bounded by what is left of the window too: a find or a call to a
            # coordinator that hangs, then dies, must not answer after the window closed.
            try:
                result = await asyncio.wait_for(self._once(api_key, fields),
                                                max(deadline - loop.time(), LAST_ATTEMPT_SECONDS))
            except asyncio.TimeoutError:
                return int(ErrorCode.coordinator_not_available)
            code = _code(result)
            if code not in RETRIABLE or loop.time() + backoff > deadline:
                return result
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, MAX_BACKOFF)

    async def _once(self, api_key: int, fields: dict[str, Any]) -> Any:
        version = VERSIONS[api_key]
        try:
            code, node_id, host, port = await self.find_coordinator()
            if code:
                return code
            if node_id == self.node_id:
                answer = await self._ask_here(api_key, version, fields)
            else:
                answer = await self.link.client(host, port).call(api_key, version, fields)
        except KafkaError as exc:
            # PeerUnavailable (this broker's coordinator process is restarting) is one: it is
            # looked for again.
            return int(ErrorCode.coordinator_not_available) if exc.code == ErrorCode.not_leader_or_follower \
                else int(exc.code)
        except (OSError, asyncio.TimeoutError) as exc:
            log.info("share persister: the share coordinator is unreachable: %s", exc)
            return int(ErrorCode.coordinator_not_available)
        for topic in answer.results:
            for result in topic.partitions:
                return result
        return int(ErrorCode.unknown_server_error)  # an answer without results: the request was refused

    async def _ask_here(self, api_key: int, version: int, fields: dict[str, Any]) -> Any:
        if not self.mesh.is_up(self.coordinator_endpoint):
            await self.mesh.wait_up(self.coordinator_endpoint, RESTART_WAIT)
        return await self.link.ask_here(api_key, version, fields)



def _code(answer: Any) -> int:
    return answer if isinstance(answer, int) else int(answer.error_code)
