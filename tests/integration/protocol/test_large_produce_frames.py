"""Large Produce frames (64 KiB or more), received into a buffer of the frame's size
(broker/network/connection.py) and decoded by broker/protocol/produce_request.py, against a real
broker: the records arrive intact whatever way the frame is cut on the wire, another
producer's append while a frame is half received goes first and nothing mixes,
pipelined frames are each read to their boundary and answered in order, and a client
that hangs up, lies about lengths or sends a corrupt batch leaves the log as it was."""

from __future__ import annotations

import socket
import struct
import time
from typing import Any, Iterator

import pytest

from broker.protocol import codec
from broker.protocol.build import build
from storage.records import Record, decode_batch, encode_batch, iter_batches
from tests.integration.conftest import Broker, shared_broker
from tests.integration.kio_client import KioClient, decode_response, encode_request, read_frame
from tests.integration.protocol.test_protocol_raw import _create_topic, _fetch, _produce

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def broker(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    """One broker for the module: each test writes a topic of its own and leaves the broker serving."""
    yield from shared_broker(request, tmp_path_factory)

BIG = 200 * 1024  # well over LARGE_FRAME (64 KiB): received into a buffer of their own


def _batch(tag: bytes, count: int = 4, size: int = BIG // 4) -> bytes:
    now = int(time.time() * 1000)
    return encode_batch([Record(i, now, None, tag + bytes([65 + i]) * size, ()) for i in range(count)])


def _produce_frame(topic: str, records: bytes, correlation_id: int, version: int = 9) -> bytes:
    body = build(codec.request_class(0, version), {
        "transactional_id": None, "acks": 1, "timeout": 10_000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": records}]}]})
    return encode_request(0, version, correlation_id, body)


def _answer(sock: socket.socket, correlation_id: int, version: int = 9) -> Any:
    got, entity = decode_response(0, version, read_frame(sock))
    assert got == correlation_id
    return entity.responses[0].partition_responses[0]


def _connect(broker: Any) -> socket.socket:
    host, port = broker.bootstrap.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=10)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def _values(client: KioClient, topic: str, topic_id: Any) -> list[bytes]:
    values: list[bytes] = []
    offset = 0
    while True:
        fetched = _fetch(client, 12, topic, topic_id, offset).responses[0].partitions[0]
        if not fetched.records:
            return values
        for header, records in iter_batches(bytes(fetched.records)):
            values.extend(r.value for r in records)
            offset = header.next_offset


@pytest.mark.parametrize("broker", [{"workers": 1}], indirect=True)
@pytest.mark.parametrize("version", [3, 9, 10])
def test_a_large_produce_cut_anywhere_on_the_wire_arrives_whole(broker: Any, version: int) -> None:
    with KioClient(broker.bootstrap) as client:
        topic = f"cut-v{version}"
        topic_id = _create_topic(client, topic)
        sent: list[bytes] = []
        sock = _connect(broker)
        # Cuts inside the header, inside the records, and one byte at a time at the end.
        for correlation_id, cuts in enumerate([[3], [9, 30], [100, 70_000, 150_000], [-1, -2, -3]], start=1):
            records = _batch(b"%d" % correlation_id)
            frame = _produce_frame(topic, records, correlation_id, version)
            points = sorted({c % len(frame) for c in cuts})
            start = 0
            for point in [*points, len(frame)]:
                sock.sendall(frame[start:point])
                time.sleep(0.02)  # separate reads on the broker's side
                start = point
            assert _answer(sock, correlation_id, version).error_code == 0
            sent.extend(r.value for r in decode_batch(records)[1])
        sock.close()
        assert _values(client, topic, topic_id) == sent


@pytest.mark.parametrize("broker", [{"workers": 1}], indirect=True)
def test_an_append_from_another_connection_mid_frame_goes_first_and_nothing_mixes(broker: Any) -> None:
    with KioClient(broker.bootstrap) as client:
        topic_id = _create_topic(client, "interleaved")
        slow = _connect(broker)
        slow_records = _batch(b"slow")
        frame = _produce_frame("interleaved", slow_records, 1)
        slow.sendall(frame[:len(frame) // 2])
        time.sleep(0.2)  # the broker has received half of it
        quick = _batch(b"quick", count=2, size=1000)
        answer = _produce(client, 9, "interleaved", quick)
        assert answer.responses[0].partition_responses[0].base_offset == 0
        slow.sendall(frame[len(frame) // 2:])
        slow_answer = _answer(slow, 1)
        assert (slow_answer.error_code, slow_answer.base_offset) == (0, 2)
        slow.close()
        expected = [r.value for r in decode_batch(quick)[1]] + [r.value for r in decode_batch(slow_records)[1]]
        assert _values(client, "interleaved", topic_id) == expected


@pytest.mark.parametrize("broker", [{"workers": 1}], indirect=True)
def test_a_client_that_hangs_up_inside_the_records_leaves_the_log_as_it_was(broker: Any) -> None:
    workers = broker.worker_pids()
    with KioClient(broker.bootstrap) as client:
        topic_id = _create_topic(client, "hangup")
        first = _batch(b"first", count=1, size=100)
        assert _produce(client, 9, "hangup", first).responses[0].partition_responses[0].error_code == 0
        quitter = _connect(broker)
        frame = _produce_frame("hangup", _batch(b"never"), 1)
        quitter.sendall(frame[:len(frame) - 1000])
        time.sleep(0.2)
        quitter.close()
        after = _connect(broker)
        last = _batch(b"after")
        after.sendall(_produce_frame("hangup", last, 7))
        assert (_answer(after, 7).base_offset) == 1
        after.close()
        assert _values(client, "hangup", topic_id) == [b"first" + b"A" * 100] + [r.value for r in decode_batch(last)[1]]
    assert broker.worker_pids() == workers


@pytest.mark.parametrize("broker", [{"workers": 1}], indirect=True)
def test_a_large_corrupt_batch_is_refused_and_the_next_one_takes_its_offsets(broker: Any) -> None:
    with KioClient(broker.bootstrap) as client:
        topic_id = _create_topic(client, "corrupt-big")
        sock = _connect(broker)
        bad = bytearray(_batch(b"bad"))
        bad[-1] ^= 0xFF  # breaks the CRC-32C
        sock.sendall(_produce_frame("corrupt-big", bytes(bad), 1))
        assert _answer(sock, 1).error_code == 2  # CORRUPT_MESSAGE
        good = _batch(b"good")
        sock.sendall(_produce_frame("corrupt-big", good, 2))
        answer = _answer(sock, 2)
        assert (answer.error_code, answer.base_offset) == (0, 0)
        sock.close()
        assert _values(client, "corrupt-big", topic_id) == [r.value for r in decode_batch(good)[1]]


@pytest.mark.parametrize("broker", [{"workers": 1}], indirect=True)
def test_records_longer_than_the_frame_close_the_connection_only(broker: Any) -> None:
    workers = broker.worker_pids()
    with KioClient(broker.bootstrap) as client:
        _create_topic(client, "liar")
        frame = bytearray(_produce_frame("liar", _batch(b"liar"), 1, version=3))
        # v3: the records' int32 length sits right before them; claim more than the frame holds.
        records_at = len(frame) - len(_batch(b"liar"))
        struct.pack_into(">i", frame, records_at - 4, 10 * BIG)
        sock = _connect(broker)
        sock.sendall(bytes(frame))
        sock.settimeout(5)
        try:
            assert sock.recv(1) == b""  # closed, not answered and not left hanging
        except ConnectionResetError:
            pass  # closed with the unread rest of the frame in its buffer: a reset
        sock.close()
        assert _produce(client, 9, "liar", _batch(b"x", 1, 10)).responses[0].partition_responses[0].base_offset == 0
    assert broker.worker_pids() == workers


@pytest.mark.parametrize("broker", [{"workers": 1}], indirect=True)
def test_pipelined_large_and_small_frames_are_read_to_their_boundaries(broker: Any) -> None:
    """Each frame, large or small, is read to its boundary (a large one's buffer is
    never filled past it): the next is intact, and all are answered in order."""
    with KioClient(broker.bootstrap) as client:
        topic_id = _create_topic(client, "pipelined")
        batches = [_batch(b"a"), _batch(b"b"), _batch(b"c", count=1, size=10), _batch(b"d")]
        sock = _connect(broker)
        sock.sendall(b"".join(_produce_frame("pipelined", records, n) for n, records in enumerate(batches, start=1)))
        offsets = [_answer(sock, n).base_offset for n in range(1, len(batches) + 1)]
        sock.close()
        assert offsets == [0, 4, 8, 9]
        assert _values(client, "pipelined", topic_id) == [r.value for b in batches for r in decode_batch(b)[1]]
