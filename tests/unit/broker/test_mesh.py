"""The mesh (broker/links/mesh.py) between two endpoints of real shared rings, on one uvloop
loop: calls are answered in order, large messages travel in fragments, a full ring waits
in a backlog, and a peer that is down or dies fails calls with a retriable error instead
of leaving them hanging. Also the codec's round trips (broker/links/peer_codec.py)."""

from __future__ import annotations

import asyncio
import os
import time
import uuid

import pytest

from broker.links import peer_codec as codec
from broker.links.mesh import Mesh, Op
from broker.links.rings import SharedRings
from broker.partitions.partition_ops import (
    AppendItem,
    AppendResult,
    CommitItem,
    DeleteItem,
    EpochEndResult,
    EpochItem,
    MarkerItem,
    OffsetItem,
    OffsetResult,
    PartitionState,
    ReadItem,
    ReadResult,
)
from broker.protocol.errors import ErrorCode, KafkaError, ProtocolViolation
from storage.types import TopicPartition

RING = 64 * 1024


def run(coroutine):
    import uvloop

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(coroutine)


@pytest.fixture
def shared():
    rings = SharedRings(1, ring_bytes=RING, coordinator_ring_bytes=RING)  # endpoints 0 and 1
    yield rings
    rings.close()


def _echo(body: memoryview) -> list[bytes]:
    return [b"echo:", bytes(body)]


def _join(body: memoryview) -> bytes:
    return bytes(body)


def test_calls_are_answered_in_order_fragmented_and_through_a_full_ring(shared):
    async def scenario():
        a, b = Mesh(shared, 0), Mesh(shared, 1)
        b.handlers[Op.SERVE] = _echo
        a.start()
        b.start()
        try:
            # 200 calls of up to 40 KiB: far more than the 64 KiB ring holds at once, and
            # some larger than a record (16 KiB), so fragments and the backlog both work.
            bodies = [os.urandom((i * 7919) % 40_000) for i in range(200)]
            futures = [a.call(1, Op.SERVE, [body], _join) for body in bodies]
            answers = await asyncio.wait_for(asyncio.gather(*futures), 10)
            assert answers == [b"echo:" + body for body in bodies]
        finally:
            a.close()
            b.close()

    run(scenario())


def test_a_failing_handler_answers_its_error_code(shared):
    async def scenario():
        a, b = Mesh(shared, 0), Mesh(shared, 1)

        def refuse(_body: memoryview) -> list[bytes]:
            raise KafkaError(ErrorCode.policy_violation, "no")

        b.handlers[Op.SERVE] = refuse
        a.start()
        b.start()
        try:
            with pytest.raises(KafkaError) as refused:
                await asyncio.wait_for(a.call(1, Op.SERVE, [b"x"], _join), 5)
            assert refused.value.code == ErrorCode.policy_violation
            with pytest.raises(KafkaError) as unknown:  # no handler for the op
                await asyncio.wait_for(a.call(1, Op.FIND, [], _join), 5)
            assert unknown.value.code == ErrorCode.invalid_request
        finally:
            a.close()
            b.close()

    run(scenario())


def test_a_peer_that_is_down_or_dies_fails_calls_with_a_retriable_error(shared):
    async def scenario():
        a = Mesh(shared, 0)
        a.start()
        try:
            # Down (never started): refused at once, or parked when the call may wait.
            with pytest.raises(KafkaError) as down:
                a.call(1, Op.SERVE, [b"x"], _join)
            assert down.value.code == ErrorCode.not_leader_or_follower
            parked = a.call(1, Op.SERVE, [b"late"], _join, timeout=10, wait_for_peer=True)
            b = Mesh(shared, 1)
            b.handlers[Op.SERVE] = _echo
            b.start()
            assert await asyncio.wait_for(parked, 5) == b"echo:late"

            # In flight when the peer dies: the supervisor marks it down and wakes us.
            b.handlers[Op.SERVE] = lambda _body: asyncio.get_running_loop().create_future()  # never answers
            in_flight = a.call(1, Op.SERVE, [b"x"], _join)
            await asyncio.sleep(0.05)
            started = time.monotonic()
            b.close()  # as a dying process would look after the supervisor's mark_down
            with pytest.raises(KafkaError) as lost:
                await asyncio.wait_for(in_flight, 5)
            assert lost.value.code == ErrorCode.not_leader_or_follower
            assert time.monotonic() - started < 1.0

            # Its replacement drops what was sent to its predecessor and serves new calls.
            stale = b"sent to nobody"
            shared.ring(0, 1).try_push([stale], len(stale), 0, a.generation)
            served: list[bytes] = []
            replacement = Mesh(shared, 1)
            replacement.handlers[Op.SERVE] = lambda body: served.append(bytes(body)) or [b"ok"]
            replacement.start()
            assert await asyncio.wait_for(a.call(1, Op.SERVE, [b"new"], _join), 5) == b"ok"
            assert served == [b"new"]
            replacement.close()
        finally:
            a.close()

    run(scenario())


def test_an_unanswered_call_times_out(shared):
    async def scenario():
        a, b = Mesh(shared, 0), Mesh(shared, 1)
        b.handlers[Op.SERVE] = lambda _body: asyncio.get_running_loop().create_future()
        a.start()
        b.start()
        try:
            with pytest.raises(KafkaError) as late:
                await asyncio.wait_for(a.call(1, Op.SERVE, [b"x"], _join, timeout=0.3), 5)
            assert late.value.code == ErrorCode.request_timed_out
        finally:
            a.close()
            b.close()

    run(scenario())


def test_notes_arrive_without_an_answer(shared):
    async def scenario():
        a, b = Mesh(shared, 0), Mesh(shared, 1)
        got: list[list[TopicPartition]] = []
        b.notes[Op.APPENDED] = lambda body: got.append(codec.decode_tps(body))
        a.start()
        b.start()
        try:
            tps = [TopicPartition("t", 3), TopicPartition("t", 1), TopicPartition("u", 0)]
            parts = codec.encode_tps(tps)
            a.note(1, Op.APPENDED, parts)
            for _ in range(100):
                if got:
                    break
                await asyncio.sleep(0.01)
            assert got == [tps]
        finally:
            a.close()
            b.close()

    run(scenario())


# ---------------------------------------------------------------------- the codec
TPS = [TopicPartition("alpha", 0), TopicPartition("alpha", 7), TopicPartition("β-topic", 2), TopicPartition("alpha", 1)]


def test_append_round_trip_keeps_batches_as_views_of_the_message():
    items = [AppendItem(tp, os.urandom(61 + i), 3 + i) for i, tp in enumerate(TPS)]
    parts = codec.encode_append(items, 17)
    message = memoryview(b"".join(parts))
    assert [bytes(p) for p in parts[-len(items):]] == [i.records for i in items]  # batches are parts of their own
    decoded, epoch = codec.decode_append(message)
    assert epoch == 17
    assert [(i.tp, bytes(i.records), i.version) for i in decoded] == [(i.tp, i.records, i.version) for i in items]
    assert all(isinstance(i.records, memoryview) and i.records.obj is message.obj for i in decoded)
    results = [AppendResult(0, 5, -1, 0, None, 3, 8), AppendResult(ErrorCode.corrupt_message, error_message="bad crc")]
    assert codec.decode_append_results(b"".join(codec.encode_append_results(results))) == results


def test_verified_append_round_trip_carries_a_guard_per_item():
    items = [AppendItem(tp, os.urandom(61 + i), 12) for i, tp in enumerate(TPS)]
    guards = [1, 2**40, 7, 3]
    decoded, got = codec.decode_append_verified(memoryview(b"".join(codec.encode_append_verified(items, guards))))
    assert got == guards
    assert [(i.tp, bytes(i.records), i.version) for i in decoded] == [(i.tp, i.records, i.version) for i in items]
    short = b"".join(codec.encode_append_verified(items, guards[:3]))
    with pytest.raises(ProtocolViolation):
        codec.decode_append_verified(short)


def test_read_offsets_states_serve_and_find_round_trip():
    reads = [ReadItem(tp, 10 * i, 1 << 20, i % 2 == 0) for i, tp in enumerate(TPS)]
    assert codec.decode_read(b"".join(codec.encode_read(reads, 1))) == (reads, 1)
    assert codec.decode_read(b"".join(codec.encode_read(reads, None)))[1] is None
    followers = [ReadItem(tp, 3, 1024, False, 2, 5, 4) for tp in TPS]  # replica 2, current epoch 5, last fetched 4
    assert codec.decode_read(b"".join(codec.encode_read(followers, None))) == (followers, None)
    results = [ReadResult(0, 5, 0, 5), ReadResult(0, 9, 1, 9, "/data/t-0/00000000000000000000.log", 77, 4096, 300, 3),
               ReadResult(ErrorCode.offset_out_of_range, 1, 1, 1), ReadResult(0, 7, 0, 9, leader_epoch=6,
                                                                               diverging_epoch=4, diverging_end_offset=7)]
    assert codec.decode_read_results(b"".join(codec.encode_read_results(results))) == results
    offsets = [OffsetItem(tp, -2 + i) for i, tp in enumerate(TPS)]
    assert codec.decode_offset_items(b"".join(codec.encode_offset_items(offsets)), OffsetItem) == offsets
    deletes = [DeleteItem(tp, 40) for tp in TPS]
    assert codec.decode_offset_items(b"".join(codec.encode_offset_items(deletes)), DeleteItem) == deletes
    answers = [OffsetResult(0, 4, 1_700_000_000_000, 0), OffsetResult(3)]
    assert codec.decode_offset_results(b"".join(codec.encode_offset_results(answers))) == answers
    states = [PartitionState(0, 10, 12), PartitionState(-1, -1, -1)]
    assert codec.decode_states(b"".join(codec.encode_states(states))) == states
    assert codec.decode_states(b"".join(codec.encode_states([]))) == []
    commits = [CommitItem(tp, 100 + i) for i, tp in enumerate(TPS)]
    assert codec.decode_commit_wait(b"".join(codec.encode_commit_wait(commits, 30_000))) == (commits, 30_000)
    assert codec.decode_codes(b"".join(codec.encode_codes([0, 20, 7]))) == [0, 20, 7]
    epochs = [EpochItem(tp, 3, i) for i, tp in enumerate(TPS)]
    assert codec.decode_epoch_items(b"".join(codec.encode_epoch_items(epochs))) == epochs
    ends = [EpochEndResult(0, 2, 140), EpochEndResult(ErrorCode.fenced_leader_epoch)]
    assert codec.decode_epoch_results(b"".join(codec.encode_epoch_results(ends))) == ends
    body = uuid.uuid4().bytes
    served = codec.decode_serve(b"".join(codec.encode_serve(11, 9, None, "/127.0.0.1", "User:CN=alice,O=Castle",
                                                            "CLIENT", body)))
    key, version, client_id, host, principal, listener, rest = served
    assert (key, version, client_id, host, principal, listener, bytes(rest)) == (
        11, 9, None, "/127.0.0.1", "User:CN=alice,O=Castle", "CLIENT", body)
    assert codec.decode_found(b"".join(codec.encode_found(0, 3, "broker-3", 9092))) == (0, 3, "broker-3", 9092)


def test_transactional_reads_and_markers_round_trip():
    """read_committed items, the last stable offsets and aborted transactions of their
    answers, and WriteTxnMarkers' items (a topic's partitions in two runs, both results)."""
    reads = [ReadItem(tp, 10 * i, 1 << 20, False, -1, -1, -1, i % 2) for i, tp in enumerate(TPS)]
    assert codec.decode_read(b"".join(codec.encode_read(reads, 3))) == (reads, 3)
    aborted = tuple((1_000 + i, 7 * i) for i in range(130))  # more than one varint byte's worth, were it Kafka's
    results = [ReadResult(0, 9, 0, 12, "/data/t-0/00000000000000000000.log", 77, 0, 900, -1, -1, -1, 4, aborted),
               ReadResult(0, 5, 0, 5, last_stable_offset=5),
               ReadResult(0, 9, 1, 9, "/data/t-1/00000000000000000000.log", 78, 61, 300, last_stable_offset=9,
                          aborted=((2**62, 0),)),
               ReadResult(ErrorCode.offset_out_of_range, 1, 1, 1)]
    decoded = codec.decode_read_results(b"".join(codec.encode_read_results(results)))
    assert decoded == results
    assert decoded[0].aborted[129] == (1_129, 903) and decoded[3].last_stable_offset == -1
    markers = [MarkerItem(tp, 4_000_000_000 + i, 32_766 - i, i % 2 == 0, 2**31 - 1 - i) for i, tp in enumerate(TPS)]
    assert codec.decode_markers(b"".join(codec.encode_markers(markers, 30_000))) == (markers, 30_000)
    assert codec.decode_markers(b"".join(codec.encode_markers([], 5))) == ([], 5)


def test_an_aborted_list_for_an_item_that_is_not_there_is_a_protocol_violation():
    import struct

    from broker.protocol.errors import ProtocolViolation

    message = bytearray(b"".join(codec.encode_read_results([ReadResult(0, 1, 0, 1, aborted=((5, 0),))])))
    # The aborted list (u32 item index, u32 pairs) names item 0 of 1; make it name item 1.
    at = message.rindex(struct.pack("<II", 0, 1))
    message[at:at + 4] = struct.pack("<I", 1)
    with pytest.raises(ProtocolViolation):
        codec.decode_read_results(bytes(message))
    for cut in range(len(message)):
        with pytest.raises(ProtocolViolation):
            codec.decode_read_results(bytes(message[:cut]))


def test_a_truncated_message_is_a_protocol_violation_not_a_crash():
    from broker.protocol.errors import ProtocolViolation

    message = b"".join(codec.encode_read([ReadItem(TPS[0], 1, 2, False)], None))
    for cut in range(len(message)):
        with pytest.raises(ProtocolViolation):
            codec.decode_read(message[:cut])


def test_waiting_for_a_peer_that_restarts(shared):
    """wait_up: a caller waits for the successor of a process the supervisor reaped (down),
    and is woken as soon as it serves; without a successor, it gives up at its timeout."""
    async def scenario():
        a = Mesh(shared, 0)
        a.start()
        try:
            assert not a.is_up(1)
            started = time.monotonic()
            assert not await a.wait_up(1, 0.2)
            assert 0.15 < time.monotonic() - started < 2
            waiting = asyncio.ensure_future(a.wait_up(1, 5))
            await asyncio.sleep(0.1)
            assert not waiting.done()
            b = Mesh(shared, 1)
            b.handlers[Op.SERVE] = _echo
            started = time.monotonic()
            b.start()
            assert await asyncio.wait_for(waiting, 5) is True
            assert time.monotonic() - started < 1.0
            assert a.is_up(1) and await a.wait_up(1, 0.01)
            assert await a.call(1, Op.SERVE, [b"x"], _join) == b"echo:x"
            b.close()
        finally:
            a.close()

    run(scenario())
