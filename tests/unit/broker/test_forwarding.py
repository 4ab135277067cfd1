"""on_owners (broker/links/forwarding.py) with two real owners in one process: worker 0's
Owner called directly, and worker 1's Owner reached through a real RemotePartitionOps over
real shared rings (two Mesh endpoints on one uvloop loop), each over its own real logs.
Requests are split by owner and the answers merged back in request order; partitions of
another broker are refused without being sent; an owner that fails fails only its items."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from broker.links.forwarding import on_owners
from broker.links.mesh import Mesh, Op
from broker.links.remote_ops import RemotePartitionOps, serve_partition_ops
from broker.links.rings import SharedRings
from broker.partitions.partition_ops import (
    VERIFICATION_NEEDED,
    AppendItem,
    AppendResult,
    MarkerItem,
    PartitionOps,
    ProducerInfo,
    ProducersResult,
    ReadItem,
    ReadResult,
)
from broker.protocol.errors import ErrorCode
from storage.errors import LogDirOfflineError
from storage.records import Record, encode_batch
from storage.types import TopicPartition
from tests.unit.broker.partition_world import World, batch, values_at

RING = 256 * 1024
TOPIC = "split"
PARTITIONS = 6
ELSEWHERE = TopicPartition("another-brokers", 0)


def run(coroutine: Any) -> Any:
    import uvloop

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(coroutine)


class TwoWorkers:
    """The Router of worker 0: even partitions are its own, odd ones worker 1's."""

    index = 0

    def __init__(self, base: str) -> None:
        tps = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
        self.worlds = [World(f"{base}/w{w}", owned={tp for tp in tps if self.owner_of(tp) == w}, index=w)
                       for w in (0, 1)]
        for world in self.worlds:
            world.topic(TOPIC, PARTITIONS)
        self.rings = SharedRings(2, ring_bytes=RING, coordinator_ring_bytes=RING)
        self.meshes: list[Mesh] = []
        self.remote: PartitionOps | None = None

    def start(self, serve: bool = True, timeout: float = 5) -> None:
        """On the loop: worker 1 serves its Owner over the rings (unless it is down)."""
        ours = Mesh(self.rings, 0)
        ours.start()
        self.meshes.append(ours)
        if serve:
            theirs = Mesh(self.rings, 1)
            serve_partition_ops(theirs, self.worlds[1].owner)
            theirs.start()
            self.meshes.append(theirs)
        self.remote = RemotePartitionOps(ours, 1, timeout=timeout)

    def holds(self, tp: TopicPartition) -> bool:
        return tp.topic == TOPIC

    def owner_of(self, tp: TopicPartition) -> int:
        return tp.partition % 2

    def ops_for(self, worker: int) -> PartitionOps:
        if worker == 0:
            return self.worlds[0].owner
        assert self.remote is not None
        return self.remote

    def close(self) -> None:
        for mesh in self.meshes:
            mesh.close()
        self.rings.close()
        for world in self.worlds:
            world.close()


@pytest.fixture
def workers(tmp_path):
    built = TwoWorkers(str(tmp_path))
    yield built
    built.close()


def tp(partition: int) -> TopicPartition:
    return TopicPartition(TOPIC, partition)


async def append(router: TwoWorkers, items: list[AppendItem]) -> list[AppendResult]:
    return await asyncio.wait_for(on_owners(router, items, lambda ops, part: ops.append(part), AppendResult), 5)


async def append_confirmed(router: TwoWorkers, items: list[AppendItem]) -> list[AppendResult]:
    """Append; the transactional batches an owner holds back for verification go again with
    their guards, as the broker does once the transaction coordinator confirmed them."""
    results = await append(router, items)
    guards = {id(item.records): result.base_offset for item, result in zip(items, results)
              if result.error_code == VERIFICATION_NEEDED}
    held = [item for item in items if id(item.records) in guards]
    if held:
        again = iter(await asyncio.wait_for(on_owners(router, held, lambda ops, part: ops.append_verified(
            part, [guards[id(item.records)] for item in part]), AppendResult), 5))
        results = [next(again) if id(item.records) in guards else result for item, result in zip(items, results)]
    return results


def test_items_are_split_by_owner_and_answered_in_request_order(workers):
    async def scenario() -> None:
        workers.start()
        # Interleaved owners, one partition twice, and one another broker holds.
        order = [1, 0, 3, 2, 1, 5, 4]
        items = [AppendItem(tp(p), batch(i + 1, f"r{i}-".encode()), 9) for i, p in enumerate(order)]
        items.insert(3, AppendItem(ELSEWHERE, batch(), 9))
        results = await append(workers, items)
        codes = [r.error_code for r in results]
        assert codes == [0, 0, 0, ErrorCode.not_leader_or_follower, 0, 0, 0, 0]
        # Partition 1 got two appends, in request order: 1 record, then 5.
        assert [(r.base_offset, r.record_count) for r in results] == [
            (0, 1), (0, 2), (0, 3), (-1, 0), (0, 4), (1, 5), (0, 6), (0, 7)]
        # Each landed in its owner's logs, and only there.
        for p in range(PARTITIONS):
            owner, other = workers.worlds[p % 2], workers.worlds[1 - p % 2]
            assert owner.logs.get_log(tp(p)) is not None and other.logs.get_log(tp(p)) is None

        reads = [ReadItem(tp(p), 0, 1 << 20, False) for p in (5, 0, 1)] + [ReadItem(ELSEWHERE, 0, 100, False)]
        answers = await asyncio.wait_for(
            on_owners(workers, reads, lambda ops, part: ops.read(part, 0), ReadResult), 5)
        assert [a.error_code for a in answers] == [0, 0, 0, ErrorCode.not_leader_or_follower]
        assert values_at(answers[0].path, answers[0].position, answers[0].length)[0] == (0, b"r5-0")
        assert values_at(answers[1].path, answers[1].position, answers[1].length)[0] == (0, b"r1-0")
        assert [v for _o, v in values_at(answers[2].path, answers[2].position, answers[2].length)] == [
            b"r0-0", b"r4-0", b"r4-1", b"r4-2", b"r4-3", b"r4-4"]
        assert answers[2].path.startswith(workers.worlds[1].logs.config.log_dirs[0])
        # Worker 1's owner noted worker 0 waiting on its partitions (a long poll's wakeup).
        assert workers.worlds[1].owner.remote_watchers == {tp(5): {0}, tp(1): {0}}

    run(scenario())


def test_pipelined_requests_reach_an_owner_in_request_order(workers):
    async def scenario() -> None:
        workers.start()
        # Started together: each call is sent before the first await, so the second
        # request's append to partition 1 cannot overtake the first's.
        first = asyncio.ensure_future(append(workers, [AppendItem(tp(0), batch(1), 9),
                                                       AppendItem(tp(1), batch(1, b"first"), 9)]))
        second = asyncio.ensure_future(append(workers, [AppendItem(tp(1), batch(1, b"second"), 9)]))
        one, two = await asyncio.gather(first, second)
        assert (one[1].base_offset, two[0].base_offset) == (0, 1)

    run(scenario())


def test_all_local_items_take_one_call_and_a_failure_there_fails_them_all(workers):
    async def scenario() -> None:
        workers.start(serve=False)  # worker 1 is down, and not needed
        results = await append(workers, [AppendItem(tp(2), batch(2), 9), AppendItem(tp(4), batch(1), 9)])
        assert [(r.error_code, r.base_offset) for r in results] == [(0, 0), (0, 0)]
        calls: list[int] = []

        def broken(ops: PartitionOps, part: list[AppendItem]) -> Any:
            calls.append(len(part))
            raise LogDirOfflineError("the disk went away")

        failed = await on_owners(workers, [AppendItem(tp(0), batch(), 9), AppendItem(tp(2), batch(), 9)],
                                 broken, AppendResult)
        assert calls == [2], "one call for every item"
        assert [r.error_code for r in failed] == [ErrorCode.kafka_storage_error] * 2

    run(scenario())


def test_an_owner_that_is_down_fails_only_its_own_partitions(workers):
    async def scenario() -> None:
        workers.start(serve=False)  # worker 1 is restarting
        items = [AppendItem(tp(p), batch(), 9) for p in (0, 1, 2, 3)]
        results = await append(workers, items)
        assert [r.error_code for r in results] == [0, ErrorCode.not_leader_or_follower,
                                                   0, ErrorCode.not_leader_or_follower]
        assert workers.worlds[0].logs.get_log(tp(0)).log_end_offset == 1
        assert workers.worlds[1].logs.get_log(tp(1)).log_end_offset == 0

    run(scenario())


def test_an_owner_whose_call_fails_fails_only_its_own_partitions(workers):
    async def scenario() -> None:
        workers.start()

        def remote_refuses(ops: PartitionOps, part: list[AppendItem]) -> Any:
            if ops is workers.remote:
                raise ValueError("cannot encode")
            return ops.append(part)

        results = await on_owners(workers, [AppendItem(tp(1), batch(), 9), AppendItem(tp(0), batch(), 9)],
                                  remote_refuses, AppendResult)
        assert [r.error_code for r in results] == [ErrorCode.unknown_server_error, 0]

    run(scenario())


def test_an_owner_that_does_not_answer_in_time_fails_only_its_own_partitions(workers):
    async def scenario() -> None:
        workers.start(timeout=0.3)
        loop = asyncio.get_running_loop()
        workers.meshes[1].handlers[Op.APPEND] = lambda _body: loop.create_future()  # stuck
        items = [AppendItem(tp(0), batch(), 9), AppendItem(tp(3), batch(), 9), AppendItem(tp(2), batch(), 9)]
        results = await append(workers, items)
        assert [r.error_code for r in results] == [0, ErrorCode.request_timed_out, 0]

    run(scenario())


def test_markers_and_read_committed_reads_cross_the_rings(workers):
    """WriteTxnMarkers' op on two owners, one over the rings; then read_committed reads from
    both come back with their last stable offsets and aborted transactions."""
    producer = 11

    def open_transaction(partition: int) -> AppendItem:
        records = [Record(i, 1_000 + i, None, b"t%d" % i) for i in range(2)]
        return AppendItem(tp(partition), encode_batch(records, producer_id=producer, producer_epoch=0, base_sequence=0,
                                                      is_transactional=True), 9)

    async def scenario() -> None:
        workers.start()
        # A transaction's first batch waits for the coordinator (KIP-890): VERIFICATION_NEEDED
        # with a guard, then appended with it, over the rings for the other owner's partitions.
        items = [open_transaction(p) for p in (0, 1, 2, 3)]
        first = await append(workers, items)
        assert [r.error_code for r in first] == [VERIFICATION_NEEDED] * 4
        guards = {item.tp: r.base_offset for item, r in zip(items, first)}
        verified = await asyncio.wait_for(on_owners(
            workers, items, lambda ops, part: ops.append_verified(part, [guards[i.tp] for i in part]), AppendResult), 5)
        assert [(r.error_code, r.base_offset) for r in verified] == [(0, 0)] * 4
        markers = [MarkerItem(tp(p), producer, 0, p < 2, 3) for p in (0, 1, 2, 3)] + [MarkerItem(ELSEWHERE, producer, 0,
                                                                                                True, 3)]
        codes = await asyncio.wait_for(on_owners(workers, markers, lambda ops, part: ops.write_markers(part, 5_000),
                                                 int), 5)
        assert codes == [0, 0, 0, 0, ErrorCode.not_leader_or_follower]
        reads = [ReadItem(tp(p), 0, 1 << 20, False, -1, -1, -1, 1) for p in (0, 1, 2, 3)]
        answers = await asyncio.wait_for(on_owners(workers, reads, lambda ops, part: ops.read(part, None),
                                                   ReadResult), 5)
        assert [(a.error_code, a.last_stable_offset, a.aborted) for a in answers] == [
            (0, 3, ()), (0, 3, ()), (0, 3, ((producer, 0),)), (0, 3, ((producer, 0),))]
        assert [v for _o, v in values_at(answers[3].path, answers[3].position, answers[3].length)][:2] == [b"t0", b"t1"]

    run(scenario())


def test_producer_states_cross_the_rings(workers):
    """DescribeProducers' op on two owners, one over the rings: each partition's producers
    (an open transaction's first offset, the coordinator epoch of a marker), partitions in
    request order, an empty one, and one another broker holds."""

    def transactional(partition: int, producer: int, sequence: int, count: int, timestamp: int) -> AppendItem:
        records = [Record(i, timestamp + i, None, b"t") for i in range(count)]
        return AppendItem(tp(partition), encode_batch(records, producer_id=producer, producer_epoch=2,
                                                      base_sequence=sequence, is_transactional=True), 9)

    async def scenario() -> None:
        workers.start()
        written = await append_confirmed(workers, [AppendItem(tp(1), batch(3), 9), transactional(1, 21, 0, 2, 5_000),
                                         transactional(0, 21, 0, 4, 6_000), transactional(1, 22, 7, 1, 7_000)])
        assert [r.error_code for r in written] == [0] * 4
        codes = await asyncio.wait_for(on_owners(workers, [MarkerItem(tp(0), 21, 2, True, 9)],
                                                 lambda ops, part: ops.write_markers(part, 5_000), int), 5)
        assert codes == [0]
        asked = [(tp(1),), (ELSEWHERE,), (tp(3),), (tp(0),)]  # on_owners' items hold their partition first
        answers = await asyncio.wait_for(on_owners(workers, asked, lambda ops, part: ops.describe_producers(
            [item[0] for item in part]), ProducersResult), 5)
        assert answers == [
            ProducersResult(0, (ProducerInfo(21, 2, 1, 5_001, -1, 3), ProducerInfo(22, 2, 7, 7_000, -1, 5))),
            ProducersResult(ErrorCode.not_leader_or_follower),
            ProducersResult(0, ()),
            # Committed: no open transaction, the marker's coordinator epoch, its timestamp.
            ProducersResult(0, (ProducerInfo(21, 2, 3, answers[3].producers[0].last_timestamp, 9, -1),)),
        ]
        assert answers[3].producers[0].last_timestamp > 6_003, "the marker's append time"

    run(scenario())
