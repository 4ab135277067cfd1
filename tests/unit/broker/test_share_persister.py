"""A worker's SharePersister (broker/process/share_persister.py) reaching the share
coordinator in its own broker's coordinator process, over real shared rings: the request
Kafka-encoded, served by the coordinator process's half of the share-state APIs
(broker/coordinator/share_state.py) with a real ShareStateCoordinator, the answer decoded
back; the coordinator's errors come through as they are, and a coordinator that is not
serving yet is waited for within the retry budget."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any, cast

import pytest
from kio.schema.errors import ErrorCode

from broker import apis
from broker.context import CoordinatorContext
from broker.coordinator.api import SERVED
from broker.coordinator.forwarded import Forwarded
from broker.links.mesh import Mesh, Op, Parts
from broker.links.rings import SharedRings
from broker.process.share_persister import SharePersister
from broker.security.broker_proof import PRINCIPAL_PREFIX
from coordination.share.persisted import PersistedState
from coordination.share.records import StateBatch
from coordination.share.state_coordinator import ShareStateCoordinator, entries_of

RING = 256 * 1024
TOPIC = uuid.UUID(int=42)
NODE = 3


class ListLog:
    partitions = 4

    def __init__(self) -> None:
        self.batches: list[bytes] = []

    async def append(self, partition: int, batch: bytes) -> int:
        self.batches.append(batch)
        return 0


def run(coroutine: Any) -> Any:
    import uvloop

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(coroutine)


@pytest.fixture
def shared() -> Any:
    rings = SharedRings(1, ring_bytes=RING, coordinator_ring_bytes=RING)  # a worker (0), the coordinator (1)
    yield rings
    rings.close()


def coordinator_side(mesh: Mesh, share: ShareStateCoordinator) -> None:
    """What CoordinatorProcess._serve_call does with a SERVE: the API's coordinator half."""
    apis.load_all()

    def context_for(forwarded: Forwarded, version: int) -> CoordinatorContext:
        return CoordinatorContext(cast(Any, None), forwarded.api_key, version, forwarded.client_id,
                                  forwarded.client_host, lambda _t, _p: True,
                                  from_broker=lambda: forwarded.principal.startswith(PRINCIPAL_PREFIX),
                                  share_state=share)

    def serve(body: memoryview) -> "asyncio.Future[Parts]":
        forwarded = Forwarded.of_message(body)

        async def answer() -> Parts:
            return [await SERVED[forwarded.api_key].answer(forwarded, context_for)]

        return asyncio.ensure_future(answer())

    mesh.handlers[Op.SERVE] = serve


def test_a_persister_over_the_rings(shared: SharedRings) -> None:
    log = ListLog()
    share = ShareStateCoordinator(log, lambda topic_id, partition: topic_id == TOPIC and partition < 2, 2)

    async def scenario() -> tuple[Any, ...]:
        worker, coordinator = Mesh(shared, 0), Mesh(shared, 1)
        coordinator_side(coordinator, share)
        worker.start()
        coordinator.start()

        async def here() -> tuple[int, int, str, int]:
            return 0, NODE, "127.0.0.1", 9092

        persister = SharePersister(NODE, worker, 1, here, None, retry_seconds=3)
        try:
            not_yet = asyncio.ensure_future(persister.initialize("g", TOPIC, 0, 1, 10))
            await asyncio.sleep(0.2)
            share.active = True  # elected meanwhile: the call retried NOT_COORDINATOR until now
            initialized = await not_yet
            read = await persister.read("g", TOPIC, 0, 4)
            written = await persister.write("g", TOPIC, 0, 1, 4, 12, 3, (StateBatch(12, 20, 0, 2),
                                                                         StateBatch(15, 16, 2, 2)))
            fenced = await persister.write("g", TOPIC, 0, 1, 3, 12, 3, ())
            unknown = await persister.read("g", TOPIC, 0 + 5, 4)
            after = await persister.read("g", TOPIC, 0, 4)
            summary = await persister.summary("g", TOPIC, 0, -1)
            deleted = await persister.delete("g", TOPIC, 0)
            gone = await persister.read("g", TOPIC, 0, 4)
            return initialized, read, written, fenced, unknown, after, summary, deleted, gone
        finally:
            persister.close()
            worker.close()
            coordinator.close()

    initialized, read, written, fenced, unknown, after, summary, deleted, gone = run(scenario())
    assert (initialized, written, deleted) == (0, 0, 0)
    assert read == PersistedState(0, 1, 4, 10, -1, ())
    assert fenced == ErrorCode.fenced_leader_epoch
    assert unknown.error_code == ErrorCode.invalid_request  # never initialized
    assert after == PersistedState(0, 1, 4, 12, -1, (StateBatch(12, 14, 0, 2), StateBatch(15, 16, 2, 2),
                                                     StateBatch(17, 20, 0, 2)))
    assert summary == PersistedState(0, 1, 4, 12, 3, ())
    assert gone.error_code == ErrorCode.invalid_request
    # What the coordinator wrote replays to nothing (the tombstone last).
    entries, _next = entries_of(b"".join(log.batches), 0)
    assert entries[-1][1] is None and len(entries) == 4  # snapshot, read's update, write's update, tombstone


def test_a_coordinator_that_never_serves_ends_in_its_error(shared: SharedRings) -> None:
    share = ShareStateCoordinator(ListLog(), lambda _t, _p: True)
    share.loading = True

    async def scenario() -> PersistedState:
        worker, coordinator = Mesh(shared, 0), Mesh(shared, 1)
        coordinator_side(coordinator, share)
        worker.start()
        coordinator.start()

        async def here() -> tuple[int, int, str, int]:
            return 0, NODE, "", -1

        persister = SharePersister(NODE, worker, 1, here, None, retry_seconds=0.5)
        try:
            return await asyncio.wait_for(persister.read("g", TOPIC, 0, 0), 5)
        finally:
            persister.close()
            worker.close()
            coordinator.close()

    assert run(scenario()).error_code == ErrorCode.coordinator_load_in_progress
