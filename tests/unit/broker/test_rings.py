"""The shared-memory rings (broker/links/rings.py): records go in and come out whole and in
order, across the end of the data, and a full ring refuses rather than overwrites."""

from __future__ import annotations

import os

import pytest

from broker.links.rings import MORE, RECORD, Ring, SharedRings, default_ring_bytes


@pytest.fixture
def shared():
    rings = SharedRings(2, ring_bytes=64 * 1024, coordinator_ring_bytes=64 * 1024)
    yield rings
    rings.close()


def _drain(ring: Ring) -> list[tuple[int, bytes]]:
    records = [(flags, bytes(payload)) for flags, _generation, payload in ring.drain()]
    ring.release()
    return records


def test_records_come_out_whole_and_in_order_across_the_end_of_the_ring(shared):
    producer, consumer = shared.ring(0, 1), shared.ring(0, 1)
    sent = []
    for i in range(400):  # ~10 laps of a 64 KiB ring
        payload = os.urandom(1 + (i * 7919) % 1500)
        assert producer.try_push([payload[:3], memoryview(payload)[3:]], len(payload), 0, 2)
        sent.append(payload)
        if i % 5 == 4:
            assert [p for _f, p in _drain(consumer)] == sent
            sent = []
    assert [p for _f, p in _drain(consumer)] == sent
    assert not consumer.has_records()


def test_a_full_ring_refuses_and_takes_the_record_once_space_is_released(shared):
    producer, consumer = shared.ring(1, 0), shared.ring(1, 0)
    record = b"x" * (producer.max_record - 64)
    pushed = 0
    while producer.try_push([record], len(record), 0, 2):
        pushed += 1
    assert 0 < pushed <= 4
    while producer.try_push([b"z"], 1, 0, 2):
        pushed += 1
    assert not producer.try_push([b"y"], 1, 0, 2)
    producer.want_space()
    drained = consumer.drain()
    assert len(drained) == pushed
    del drained
    assert consumer.release() is True  # the producer asked to be told
    assert producer.try_push([b"y"], 1, MORE, 2)
    assert _drain(consumer) == [(MORE, b"y")]


def test_discard_drops_what_waits_and_generations_start_down(shared):
    producer, consumer = shared.ring(2, 1), shared.ring(2, 1)
    producer.try_push([b"old"], 3, 0, 2)
    consumer.discard()
    assert not consumer.has_records()
    assert [shared.generation(e) for e in range(shared.endpoints)] == [1, 1, 1]
    shared.set_generation(1, 2)
    shared.mark_down(1)
    assert shared.generation(1) == 3
    shared.mark_down(1)  # already down: unchanged
    assert shared.generation(1) == 3


def test_records_are_sixteen_byte_aligned_and_sizes_scale_with_workers():
    assert RECORD.size == 16
    assert default_ring_bytes(2) == 8 * 1024 * 1024
    assert default_ring_bytes(128) == 1024 * 1024
    assert default_ring_bytes(17) == 4 * 1024 * 1024
