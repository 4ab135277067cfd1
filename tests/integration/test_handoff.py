"""Connection handoff (broker/handoff.py): a connection whose Produce requests all go to
one other worker moves to that worker once, mid-stream, without losing or reordering a
request: the client writes its requests back to back and never notices."""

from __future__ import annotations

import threading

import pytest

from tests.integration.conftest import partition_owned_by, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

REQUESTS_PER_PHASE = 150
VALUE_SIZE = 8 * 1024  # 150 requests of ~8 KiB: more than one recv, so the move is mid-stream


def _produce_frames(topic: str, plan: list[int], first_correlation_id: int) -> list[bytes]:
    from broker.protocol import codec
    from broker.protocol.build import build
    from storage.records import Record, encode_batch
    from tests.integration.kio_client import encode_request

    frames = []
    for index, partition in enumerate(plan):
        value = (b"req-%06d-" % index).ljust(VALUE_SIZE, b"x")
        data = [{"index": partition, "records": encode_batch([Record(0, 1_700_000_000_000, None, value, ())])}]
        body = build(codec.request_class(0, 9), {"transactional_id": None, "acks": 1, "timeout": 10_000,
                                                 "topic_data": [{"name": topic, "partition_data": data}]})
        frames.append(encode_request(0, 9, first_correlation_id + index, body))
    return frames


def _handoffs(broker) -> tuple[int, int]:
    stats = broker.stats()
    return sum(s["handoffs_out"] for s in stats), sum(s["handoffs_in"] for s in stats)


@pytest.mark.parametrize("broker", [{"workers": 2}], indirect=True)
def test_pipelined_connection_moves_to_the_owner_once_in_order(broker):
    """Phase one writes only to worker 0's partition, phase two only to worker 1's, all in
    one burst. Wherever the kernel put the connection, one phase belongs to the other
    worker, so exactly one handoff happens; every answer still comes in request order
    with the next offset of its partition, and the logs hold the records in that order."""
    from tests.integration.clients import confluent_consume, confluent_create_topic
    from tests.integration.kio_client import KioClient, decode_response, read_frame

    topic = "handoff-pipelined"
    confluent_create_topic(broker.bootstrap, topic, 4)
    by_worker = [partition_owned_by(topic, w, 2, 4) for w in range(2)]
    plan = [by_worker[0]] * REQUESTS_PER_PHASE + [by_worker[1]] * REQUESTS_PER_PHASE
    frames = _produce_frames(topic, plan, 1)
    before = wait_until(lambda: _handoffs(broker) if len(broker.stats()) == 2 else None, 10, "stats files")

    with KioClient(broker.bootstrap, timeout=30) as client:
        sender = threading.Thread(target=client.sock.sendall, args=(b"".join(frames),))
        sender.start()
        next_offset = {p: 0 for p in by_worker}
        for index, partition in enumerate(plan):
            correlation_id, answer = decode_response(0, 9, read_frame(client.sock))
            assert correlation_id == index + 1, "answers out of request order"
            (part,) = answer.responses[0].partition_responses
            assert (part.index, part.error_code) == (partition, 0), part
            assert part.base_offset == next_offset[partition], f"request {index}: reordered or lost"
            next_offset[partition] += 1
        sender.join(30)
        assert not sender.is_alive()

    def moved() -> tuple[int, int] | None:
        # Each worker writes its own stats file on its own schedule: wait for both sides.
        out, into = _handoffs(broker)
        return (out - before[0], into - before[1]) if out > before[0] and into > before[1] else None

    assert wait_until(moved, 10, "the stats to count the handoff") == (1, 1)
    # The owners pre-faulted new log pages for the ~2.4 MB appended, and say how long it took.
    # Waited for, like the handoff: a worker's stats file may have been written after its
    # handoff counted and before its phase's appends (the connection started there).
    populated = 2 * REQUESTS_PER_PHASE * VALUE_SIZE
    wait_until(lambda: sum(s["page_populate_bytes"] for s in broker.stats()) >= populated, 10, "the stats to count the pre-faulted pages")
    assert all(s["page_populate_seconds"] >= 0 for s in broker.stats())
    for worker, partition in enumerate(by_worker):
        got = confluent_consume(broker.bootstrap, topic, [partition], REQUESTS_PER_PHASE)
        values = [g.value[:10] for g in sorted(got, key=lambda g: g.offset)]
        start = worker * REQUESTS_PER_PHASE
        assert values == [b"req-%06d" % i for i in range(start, start + REQUESTS_PER_PHASE)]


@pytest.mark.parametrize("broker", [{"workers": 2, "connection.handoff.enable": "false"}], indirect=True)
def test_handoff_can_be_switched_off(broker):
    """With connection.handoff.enable=false the same burst is served where it landed:
    the requests for the other worker's partition are forwarded, none moves."""
    from tests.integration.clients import confluent_create_topic
    from tests.integration.kio_client import KioClient, decode_response, read_frame

    topic = "handoff-off"
    confluent_create_topic(broker.bootstrap, topic, 4)
    by_worker = [partition_owned_by(topic, w, 2, 4) for w in range(2)]
    plan = [by_worker[0]] * 20 + [by_worker[1]] * 20
    with KioClient(broker.bootstrap, timeout=30) as client:
        client.sock.sendall(b"".join(_produce_frames(topic, plan, 1)))
        for index in range(len(plan)):
            correlation_id, answer = decode_response(0, 9, read_frame(client.sock))
            assert correlation_id == index + 1
            assert answer.responses[0].partition_responses[0].error_code == 0
    def counted() -> list | None:
        stats = broker.stats()
        return stats if sum(x["produce_requests"] for x in stats) >= len(plan) else None

    wait_until(counted, 10, "the stats to count the requests")
    assert _handoffs(broker) == (0, 0)


@pytest.mark.parametrize("broker", [{"workers": 2}], indirect=True)
def test_a_failed_handoff_keeps_the_connection_forwarding(broker):
    """When the handoff cannot be sent (here: the workers' handoff sockets are gone from
    run.dir, so sendmsg fails), the connection stays where it is and every request is still
    answered, in order, through forwarding."""
    import os

    from broker.handoff import handoff_path
    from tests.integration.clients import confluent_create_topic
    from tests.integration.kio_client import KioClient, decode_response, read_frame

    topic = "handoff-fails"
    confluent_create_topic(broker.bootstrap, topic, 4)
    for index in range(2):
        os.unlink(handoff_path(broker.run_dir, index))
    by_worker = [partition_owned_by(topic, w, 2, 4) for w in range(2)]
    plan = [by_worker[0]] * 40 + [by_worker[1]] * 40
    with KioClient(broker.bootstrap, timeout=30) as client:
        sender = threading.Thread(target=client.sock.sendall, args=(b"".join(_produce_frames(topic, plan, 1)),))
        sender.start()
        next_offset = {p: 0 for p in by_worker}
        for index, partition in enumerate(plan):
            correlation_id, answer = decode_response(0, 9, read_frame(client.sock))
            assert correlation_id == index + 1
            (part,) = answer.responses[0].partition_responses
            assert (part.error_code, part.base_offset) == (0, next_offset[partition])
            next_offset[partition] += 1
        sender.join(30)

    def counted() -> list | None:
        stats = broker.stats()
        return stats if sum(x["produce_requests"] for x in stats) >= len(plan) else None

    wait_until(counted, 10, "the stats to count the requests")
    assert _handoffs(broker) == (0, 0)
    assert "connection stays: handoff to worker" in broker.stderr(), "no handoff was attempted"
