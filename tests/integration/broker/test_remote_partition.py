"""broker/partitions/remote_partition.py against a real broker process: produce, list offsets, fetch
and read a whole partition back over the Kafka protocol, as the coordinator does towards
a partition another broker holds; failures come back as error codes, never exceptions.

Each async test runs its own loop (``asyncio.run`` or uvloop's) inside a plain pytest
function; every wait is bounded by the client's timeout or ``asyncio.timeout``.
"""

from __future__ import annotations

import asyncio
import socket
import time
from typing import Any, Awaitable, Callable

import pytest
import uvloop

from broker.partitions.remote_partition import (
    COORDINATOR_CLIENT_PREFIX,
    RemotePartitionClient,
    complete_batches,
    coordinator_client_id,
    epoch_from_client_id,
)
from broker.protocol.build import build
from storage.records import Record, encode_batch, iter_batches
from tests.integration.conftest import free_port, shared_broker
from tests.integration.kio_client import KioClient

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]
# Two partitions on two workers: whichever worker the connection lands on, one of them is
# forwarded to the other.
TWO_PARTITIONS = pytest.mark.parametrize("broker", [{"num.partitions": 2}], indirect=True)


@pytest.fixture(scope="module")
def broker(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """One broker for the tests that each keep to a topic of their own; the test that restarts
    its broker starts one of its own."""
    yield from shared_broker(request, tmp_path_factory)

UNKNOWN_TOPIC_OR_PARTITION, REQUEST_TIMED_OUT, NETWORK_EXCEPTION, CORRUPT_MESSAGE = 3, 7, 13, 2
LOOPS = {"asyncio": None, "uvloop": uvloop.new_event_loop}


def run(main: Callable[[], Awaitable[Any]], loop: str = "asyncio", limit: float = 60.0) -> Any:
    async def bounded() -> Any:
        async with asyncio.timeout(limit):
            return await main()

    with asyncio.Runner(loop_factory=LOOPS[loop]) as runner:
        return runner.run(bounded())


def create_topic(bootstrap: str, topic: str) -> None:
    """Auto-created by a Metadata v4 request (num.partitions=2)."""
    from kio.index import load_request_schema

    with KioClient(bootstrap) as client:
        answer = client.call(3, 4, build(load_request_schema(3, 4), {"topics": [{"name": topic}],
                                                                     "allow_auto_topic_creation": True}))
    assert answer.topics[0].error_code == 0, answer


def client_for(broker: Any, timeout: float = 10.0) -> RemotePartitionClient:
    return RemotePartitionClient(broker.host, broker.port, coordinator_client_id(3), timeout=timeout)


def make_batches(count: int, prefix: bytes, value_size: int = 100) -> list[list[Record]]:
    """``count`` batches of 1..5 records each, with keys, values and a header."""
    now = int(time.time() * 1000)
    batches = []
    for b in range(count):
        batches.append([Record(i, now + i, b"%s-%d-%d" % (prefix, b, i), (b"v%d-%d-" % (b, i)).ljust(value_size, b"x"),
                               (("h", b"%d" % b),)) for i in range(1 + b % 5)])
    return batches


def contents(data: bytes) -> list[tuple[int, bytes | None, bytes | None, tuple[Any, ...]]]:
    return [(r.offset, r.key, r.value, r.headers) for _header, records in iter_batches(data) for r in records]


def expected(batches: list[list[Record]], first_offset: int = 0) -> list[tuple[int, bytes | None, bytes | None, tuple[Any, ...]]]:
    out, offset = [], first_offset
    for records in batches:
        for r in records:
            out.append((offset, r.key, r.value, r.headers))
            offset += 1
    return out


# ---------------------------------------------------------------------- client ids
def test_client_id_carries_the_epoch() -> None:
    for epoch in (0, 1, 7, 1234567, 2**31 - 1, 2**63 - 1):
        client_id = coordinator_client_id(epoch)
        assert client_id == f"{COORDINATOR_CLIENT_PREFIX}{epoch}"
        assert epoch_from_client_id(client_id) == epoch
    for garbage in (None, "", "rdkafka", "castle-coordinator", "castle-coordinator/", "castle-coordinator/-1",
                    "castle-coordinator/+1", "castle-coordinator/01", "castle-coordinator/1x", "castle-coordinator/ 1",
                    "castle-coordinator/1 ", "castle-coordinator/1.0", "castle-coordinator/\u00b2",
                    "castle-coordinator/\uff11", "castle-coordinator/\u0661", "Castle-Coordinator/1",
                    "xcastle-coordinator/1", "castle-coordinator//1", "castle-coordinator/1/2",
                    f"castle-coordinator/{2**63}", "castle-coordinator/" + "9" * 5000):
        assert epoch_from_client_id(garbage) is None, garbage
    for bad in (-1, 2**63):
        with pytest.raises(ValueError):
            coordinator_client_id(bad)


def test_only_complete_batches_advance_the_offset() -> None:
    """A fetch answer may end in a batch cut at max_bytes: the scan stops before it."""
    now = int(time.time() * 1000)
    first = encode_batch([Record(10, now, b"k", b"a" * 50), Record(11, now, b"k", b"b" * 50)], base_offset=10)
    second = encode_batch([Record(12, now, b"k", b"c" * 50)], base_offset=12)
    assert complete_batches(first + second, 10, 100) == (len(first) + len(second), 13)
    for cut in (1, 11, 12, 60, len(second) - 1):
        assert complete_batches(first + second[:cut], 10, 100) == (len(first), 12)
    assert complete_batches(first[:40], 10, 100) == (0, 10)
    assert complete_batches(b"", 10, 100) == (0, 10)
    assert complete_batches(first + second, 10, 12) == (len(first), 12)  # the watermark ends the read


# ---------------------------------------------------------------------- a real broker
@TWO_PARTITIONS
@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_produce_then_read_all_returns_the_same_batches(broker: Any, loop: str) -> None:
    topic = f"remote-{loop}"
    create_topic(broker.bootstrap, topic)
    batches = make_batches(12, b"k")
    encoded = [encode_batch(records) for records in batches]

    async def main() -> None:
        client = client_for(broker)
        try:
            assert await client.high_watermark(topic, 0) == (0, 0, 0)
            assert await client.read_all(topic, 0) == (0, b"")
            # Pipelined on one connection: all in flight at once, answered in order.
            errors = await asyncio.gather(*(client.produce(topic, 0, batch) for batch in encoded[:6]))
            assert errors == [0] * 6
            for batch in encoded[6:]:
                assert await client.produce(topic, 0, batch, acks=1) == 0
            total = sum(len(records) for records in batches)
            assert await client.high_watermark(topic, 0) == (0, 0, total)

            error, data = await client.read_all(topic, 0)
            assert error == 0
            assert contents(data) == expected(batches)
            # Bytes as produced, but for baseOffset and partitionLeaderEpoch (set on append).
            got = [bytes(data[p + 16: p + h.size]) for p, h in _positions(data)]
            assert got == [batch[16:] for batch in encoded]

            # A fetch from the middle returns whole batches from the one holding the offset.
            error, high_watermark, middle = await client.fetch(topic, 0, 7)
            assert (error, high_watermark) == (0, total)
            assert contents(middle)[0][0] <= 7 and contents(middle)[-1][0] == total - 1

            # The other partition is untouched (and owned by the other worker).
            assert await client.high_watermark(topic, 1) == (0, 0, 0)
        finally:
            await client.close()
        assert await client.produce(topic, 0, encoded[0]) == NETWORK_EXCEPTION  # closed for good

    run(main, loop)


@TWO_PARTITIONS
def test_read_all_with_a_small_chunk_walks_batch_by_batch(broker: Any) -> None:
    """Batches larger than max_bytes still come whole (one per fetch), and read_all
    returns every one of them."""
    topic = "remote-small-chunks"
    create_topic(broker.bootstrap, topic)
    batches = make_batches(5, b"big", value_size=4000)

    async def main() -> None:
        client = client_for(broker)
        try:
            for records in batches:
                assert await client.produce(topic, 1, encode_batch(records)) == 0
            error, data = await client.read_all(topic, 1, max_bytes=1000)
            assert error == 0 and contents(data) == expected(batches)
        finally:
            await client.close()

    run(main)


@TWO_PARTITIONS
def test_unknown_partition_is_an_error_code(broker: Any) -> None:
    topic = "remote-two-partitions"
    create_topic(broker.bootstrap, topic)
    batch = encode_batch(make_batches(1, b"x")[0])

    async def main() -> None:
        client = client_for(broker)
        try:
            assert await client.produce(topic, 7, batch) == UNKNOWN_TOPIC_OR_PARTITION
            assert (await client.high_watermark(topic, 7))[0] == UNKNOWN_TOPIC_OR_PARTITION
            assert (await client.fetch(topic, 7, 0))[0] == UNKNOWN_TOPIC_OR_PARTITION
            assert (await client.read_all(topic, 7))[0] == UNKNOWN_TOPIC_OR_PARTITION
            assert (await client.read_all("remote-no-such-topic", 0))[0] == UNKNOWN_TOPIC_OR_PARTITION
            assert await client.produce(topic, 0, batch) == 0  # the connection is still good
        finally:
            await client.close()

    run(main)


def test_nothing_listening_answers_network_exception_quickly() -> None:
    port = free_port()
    batch = encode_batch(make_batches(1, b"x")[0])

    async def main() -> None:
        client = RemotePartitionClient("127.0.0.1", port, coordinator_client_id(1), timeout=10.0)
        started = time.monotonic()
        assert await client.produce("t", 0, batch) == NETWORK_EXCEPTION
        assert (await client.high_watermark("t", 0))[0] == NETWORK_EXCEPTION
        assert (await client.fetch("t", 0, 0))[0] == NETWORK_EXCEPTION
        assert await client.read_all("t", 0) == (NETWORK_EXCEPTION, b"")
        assert time.monotonic() - started < 5.0  # refused at once, not after the timeout
        await client.close()

    for loop in LOOPS:
        run(main, loop)


def test_a_silent_peer_times_out() -> None:
    """A socket that accepts (the kernel's backlog) but never answers: REQUEST_TIMED_OUT
    after the client's timeout, for each call."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        port = silent.getsockname()[1]

        async def main() -> None:
            client = RemotePartitionClient("127.0.0.1", port, coordinator_client_id(1), timeout=0.5)
            try:
                started = time.monotonic()
                assert await client.produce("t", 0, encode_batch(make_batches(1, b"x")[0])) == REQUEST_TIMED_OUT
                assert (await client.high_watermark("t", 0))[0] == REQUEST_TIMED_OUT
                assert await client.read_all("t", 0) == (REQUEST_TIMED_OUT, b"")
                assert 1.4 < time.monotonic() - started < 5.0
            finally:
                await client.close()

        run(main)


GARBAGE = {
    "a negative size": (-1).to_bytes(4, "big", signed=True),
    "a size past any answer": (0x7FFFFFFF).to_bytes(4, "big"),
    "an answer to a request never sent": (8).to_bytes(4, "big") + (999_999).to_bytes(4, "big") + bytes(4),
    # Received into a buffer of its own (a large answer), then unreadable as a Fetch answer.
    "a large answer that does not decode": (200_000).to_bytes(4, "big") + b"\xff" * 200_000,
}


@pytest.mark.parametrize("loop", sorted(LOOPS))
@pytest.mark.parametrize("garbage", sorted(GARBAGE))
def test_a_peer_answering_garbage_fails_the_call_with_network_exception(garbage: str, loop: str) -> None:
    """The peer reads the request, answers ``garbage`` and keeps the connection open: the
    client must see the garbage itself, close, and answer NETWORK_EXCEPTION (not wait for
    its timeout, REQUEST_TIMED_OUT)."""
    import threading

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        server.settimeout(20)
        done = threading.Event()

        def answer() -> None:
            peer, _address = server.accept()
            with peer:
                peer.settimeout(20)
                size = int.from_bytes(peer.recv(4, socket.MSG_WAITALL), "big")
                peer.recv(size, socket.MSG_WAITALL)
                peer.sendall(GARBAGE[garbage])
                done.wait(20)  # open until the client is through

        thread = threading.Thread(target=answer, daemon=True)
        thread.start()

        async def main() -> int:
            client = RemotePartitionClient("127.0.0.1", server.getsockname()[1], coordinator_client_id(1), timeout=15.0)
            try:
                return (await client.fetch("t", 0, 0))[0]  # one request: a fresh connection's call is not retried
            finally:
                await client.close()

        try:
            assert run(main, loop) == NETWORK_EXCEPTION
        finally:
            done.set()
            thread.join(25)


def test_client_recovers_after_the_broker_restarts(broker_factory: Any) -> None:
    broker = broker_factory(overrides={"num.partitions": 2})
    topic = "remote-restart"
    create_topic(broker.bootstrap, topic)
    batches = make_batches(4, b"r")
    encoded = [encode_batch(records) for records in batches]

    async def main() -> None:
        client = client_for(broker, timeout=15.0)
        idle = client_for(broker, timeout=15.0)
        try:
            assert await client.produce(topic, 0, encoded[0]) == 0
            assert (await idle.high_watermark(topic, 0))[0] == 0
            # On a thread, so this loop sees the old broker close both connections.
            await asyncio.to_thread(broker.restart)
            assert await client.produce(topic, 0, encoded[1]) == 0
            first_two = len(batches[0]) + len(batches[1])
            assert await idle.high_watermark(topic, 0) == (0, 0, first_two)
            # On this loop's thread: the loop is blocked while the broker goes away and
            # comes back, so the next call writes on a connection the peer has closed.
            # A read is retried once on a fresh connection...
            broker.restart()
            assert await idle.high_watermark(topic, 0) == (0, 0, first_two)
            assert await client.produce(topic, 0, encoded[2]) == 0  # its old one was closed meanwhile
            # ... a produce is not (it may have been appended): the caller sees the error.
            broker.restart()
            assert await client.produce(topic, 0, encoded[3]) == NETWORK_EXCEPTION
            assert await client.produce(topic, 0, encoded[3]) == 0
            error, data = await idle.read_all(topic, 0)
            assert error == 0 and contents(data) == expected(batches)
        finally:
            await client.close()
            await idle.close()

    run(main, limit=90.0)


def _positions(data: bytes) -> list[tuple[int, Any]]:
    from storage.batch import iter_headers

    return list(iter_headers(memoryview(data)))
