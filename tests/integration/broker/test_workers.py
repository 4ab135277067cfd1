"""Several workers, one writer per partition: many connections (spread by SO_REUSEPORT
over the workers) produce to the same partition at once; the partition reads back as
one gap-free offset sequence holding every record exactly once, and the per-worker
stats prove that more than one worker took produce requests (forwarding to the owner over
the shared-memory rings)."""

from __future__ import annotations

import threading

import pytest

from tests.integration.clients import confluent_consume
from tests.integration.conftest import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

PRODUCERS = 20
PER_PRODUCER = 500
PARTITION = 1


# Clients reach whichever worker the kernel picks on the shared port, which is what
# exercises forwarding.
@pytest.mark.parametrize("broker", [{"workers": 2, "num.partitions": 3}, {"workers": 4, "num.partitions": 3}],
                         indirect=True, ids=["2-workers", "4-workers"])
def test_many_connections_one_partition_single_writer(broker):
    from confluent_kafka import Producer

    topic = "single-writer"
    before = {s["worker"]: s["produce_requests"] for s in broker.stats()}
    acked: list[list[tuple[int, int, bytes]]] = [[] for _ in range(PRODUCERS)]
    errors: list[str] = []
    start = threading.Barrier(PRODUCERS)

    def produce(index: int) -> None:
        producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 1, "batch.num.messages": 20,
                             "enable.idempotence": index % 2 == 0, "acks": "all", "compression.type": "lz4",
                             "client.id": f"p{index}"})

        def done(err, msg) -> None:
            if err is not None:
                errors.append(f"producer {index}: {err}")
            else:
                acked[index].append((msg.partition(), msg.offset(), msg.value()))

        producer.list_topics(topic, timeout=10)  # connect (auto-creating the topic) before the race
        start.wait(30)
        for j in range(PER_PRODUCER):
            producer.produce(topic, value=f"p{index}-{j}".encode(), key=f"p{index}".encode(), partition=PARTITION,
                             on_delivery=done)
            if j % 50 == 0:
                producer.poll(0)
        if producer.flush(60) != 0:
            errors.append(f"producer {index}: records left after flush")

    threads = [threading.Thread(target=produce, args=(i,)) for i in range(PRODUCERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(90)
    assert not any(t.is_alive() for t in threads), "a producer thread hung"
    assert not errors, errors[:5]

    total = PRODUCERS * PER_PRODUCER
    all_acked = [a for per in acked for a in per]
    assert len(all_acked) == total
    assert {partition for partition, _o, _v in all_acked} == {PARTITION}
    assert sorted(o for _p, o, _v in all_acked) == list(range(total)), "acked offsets are not one gap-free sequence"

    got = confluent_consume(broker.bootstrap, topic, [PARTITION], total)
    assert sorted(g.offset for g in got) == list(range(total)), "offsets read back are not 0..N-1"
    values = [g.value for g in sorted(got, key=lambda g: g.offset)]
    assert len(set(values)) == total, "a record is present twice"
    assert set(values) == {f"p{i}-{j}".encode() for i in range(PRODUCERS) for j in range(PER_PRODUCER)}
    by_offset = {g.offset: g.value for g in got}
    for per in acked:
        for _p, offset, value in per:
            assert by_offset[offset] == value, f"offset {offset} holds {by_offset[offset]!r}, acked for {value!r}"
    # Each producer's records keep their order within the partition.
    for i in range(PRODUCERS):
        mine = [v for v in values if v.startswith(f"p{i}-".encode())]
        assert mine == [f"p{i}-{j}".encode() for j in range(PER_PRODUCER)], f"producer {i}: order changed"

    # Which workers took produce requests (stats files are rewritten every 0.5 s).
    def served() -> dict[int, int]:
        now = {s["worker"]: s["produce_requests"] - before.get(s["worker"], 0) for s in broker.stats()}
        return now if sum(now.values()) >= PRODUCERS else {}

    per_worker = wait_until(served, 10, "stats files to count the produce requests")
    assert len(per_worker) == broker.workers
    assert sum(1 for count in per_worker.values() if count > 0) >= 2, f"produce requests per worker: {per_worker}"


@pytest.mark.parametrize("broker", [{"workers": 2}, {"workers": 4}], indirect=True, ids=["2-workers", "4-workers"])
def test_pipelined_requests_keep_partition_order_across_owners(broker):
    """One connection, requests written back to back: one spanning a partition of every
    worker, then one per partition. Whichever worker holds the connection, some requests
    are local-only, some forwarded, some mixed; each partition's log must still take the
    batches in request order, and each answer's base offset must say so."""

    from broker.partitions.placement import owner_index
    from broker.protocol import codec
    from broker.protocol.build import build
    from storage.records import Record, encode_batch
    from storage.types import TopicPartition
    from tests.integration.clients import confluent_create_topic
    from tests.integration.kio_client import KioClient, decode_response, encode_request, read_frame

    topic = "pipelined-raw"
    partitions = 3 * broker.workers
    confluent_create_topic(broker.bootstrap, topic, partitions)
    one_per_worker = [next(p for p in range(partitions) if owner_index(TopicPartition(topic, p), broker.workers) == w)
                      for w in range(broker.workers)]
    rounds = 40
    plan: list[list[int]] = []  # the partitions of each request, in send order
    for _ in range(rounds):
        plan.append(list(one_per_worker))
        plan.extend([p] for p in one_per_worker)
    expected: dict[int, list[bytes]] = {p: [] for p in one_per_worker}
    frames = []
    for index, request_partitions in enumerate(plan):
        data = []
        for p in request_partitions:
            value = b"req-%d" % index
            expected[p].append(value)
            data.append({"index": p, "records": encode_batch([Record(0, 1_700_000_000_000, None, value, ())])})
        body = build(codec.request_class(0, 9), {"transactional_id": None, "acks": 1, "timeout": 10_000,
                                                 "topic_data": [{"name": topic, "partition_data": data}]})
        frames.append(encode_request(0, 9, index + 1, body))
    with KioClient(broker.bootstrap) as client:
        client.sock.sendall(b"".join(frames))  # all in flight at once
        next_offset = {p: 0 for p in one_per_worker}
        for index, request_partitions in enumerate(plan):
            correlation_id, answer = decode_response(0, 9, read_frame(client.sock))
            assert correlation_id == index + 1
            for part in answer.responses[0].partition_responses:
                assert part.error_code == 0, part
                assert part.base_offset == next_offset[part.index], (
                    f"request {index}: partition {part.index} appended at {part.base_offset}, "
                    f"expected {next_offset[part.index]} (reordered)")
                next_offset[part.index] += 1
    for p in one_per_worker:
        got = confluent_consume(broker.bootstrap, topic, [p], len(expected[p]))
        assert [g.value for g in sorted(got, key=lambda g: g.offset)] == expected[p], f"partition {p}"


def test_each_worker_froze_what_it_keeps_for_its_life(broker_factory):
    """The imported modules, the config and the logs sit in the garbage collector's permanent
    generation in every worker (broker/process/gc_freeze.py): full collections skip them, where
    walking them stalled a worker's loop for 58-214 ms under load."""
    broker = broker_factory(workers=2)
    stats = wait_until(lambda: (found := broker.stats()) and len(found) == 2 and found, 10, "both workers' stats")
    for worker in stats:
        # ~70,000 objects come from the supervisor's imports alone.
        assert worker["gc_frozen_objects"] > 30_000, worker
