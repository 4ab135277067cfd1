"""Every advertised (API, version) against a real broker process, with requests built by
kio, plus the bad input a broker must survive: each closes only its own connection, the
worker keeps serving, and the log holds no partial batch."""

from __future__ import annotations

import socket
import struct
import time
import uuid
from typing import Any, Iterator

import pytest

from broker import apis, dispatch
from broker.protocol import codec
from broker.protocol.build import build
from storage.compression import COMPRESSION_ZSTD
from storage.records import Record, decode_batch, encode_batch
from tests.integration.conftest import Broker, partition_owned_by, shared_broker
from tests.integration.kio_client import KioClient, decode_response, encode_request, read_frame

pytestmark = pytest.mark.integration

apis.load_all()
ADVERTISED = {key: (lo, hi) for key, lo, hi in dispatch.supported_ranges()}


@pytest.fixture(scope="module")
def broker(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    """One broker for the module (one per parameter): each test keeps to topics of its own (the
    bad frames share a bystander that takes any record) and leaves the broker serving."""
    yield from shared_broker(request, tmp_path_factory)


def _req(api_key: int, version: int, data: dict[str, Any]) -> Any:
    return build(codec.request_class(api_key, version), data)


def _batch(values: list[bytes], compression: int = 0) -> bytes:
    now = int(time.time() * 1000)
    return encode_batch([Record(i, now, b"k%d" % i, v, ()) for i, v in enumerate(values)], compression=compression)


def _create_topic(client: KioClient, name: str) -> uuid.UUID:
    answer = client.call(3, 12, _req(3, 12, {"topics": [{"name": name, "topic_id": uuid.UUID(int=0)}],
                                                "allow_auto_topic_creation": True,
                                                "include_topic_authorized_operations": False}))
    assert answer.topics[0].error_code == 0
    return answer.topics[0].topic_id


def _produce(client: KioClient, version: int, topic: str, records: bytes, acks: int = 1, partition: int = 0) -> Any:
    return client.call(0, version, _req(0, version, {
        "transactional_id": None, "acks": acks, "timeout": 10_000,
        "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": records}]}]}))


def _fetch(client: KioClient, version: int, topic: str, topic_id: uuid.UUID, offset: int, max_wait: int = 0) -> Any:
    return client.call(1, version, _req(1, version, {
        "replica_id": -1, "max_wait": max_wait, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
        "session_id": 0, "session_epoch": -1, "forgotten_topics_data": (), "rack_id": "",
        "topics": [{"topic": topic, "topic_id": topic_id, "partitions": [
            {"partition": 0, "current_leader_epoch": -1, "fetch_offset": offset, "last_fetched_epoch": -1,
             "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}]}))


# ---------------------------------------------------------------------- ApiVersions
@pytest.mark.parametrize("version", range(ADVERTISED[18][0], ADVERTISED[18][1] + 1))
def test_api_versions_lists_exactly_the_registry(broker: Any, version: int) -> None:
    with KioClient(broker.bootstrap) as client:
        answer = client.call(18, version, _req(18, version, {"client_software_name": "t", "client_software_version": "1"}))
    assert answer.error_code == 0
    assert {(k.api_key, k.min_version, k.max_version) for k in answer.api_keys} == set(dispatch.supported_ranges())


def test_api_versions_of_an_unknown_version_falls_back_to_v0(broker: Any) -> None:
    """A too-new ApiVersions gets error 35 and our ranges in the v0 body (header v0); the
    client retries with a version we speak, on the same connection."""
    with KioClient(broker.bootstrap) as client:
        header = struct.pack(">hhih", 18, 9, 77, 1) + b"x" + b"\x00"
        body = b"\x02a\x02b\x00"
        client.sock.sendall(struct.pack(">i", len(header) + len(body)) + header + body)
        correlation_id, answer = decode_response(18, 0, read_frame(client.sock))
        assert correlation_id == 77 and answer.error_code == 35
        assert {(k.api_key, k.min_version, k.max_version) for k in answer.api_keys} == set(dispatch.supported_ranges())
        retry = client.call(18, 3, _req(18, 3, {"client_software_name": "t", "client_software_version": "1"}))
        assert retry.error_code == 0


# ---------------------------------------------------------------------- every version
@pytest.mark.parametrize("version", range(ADVERTISED[3][0], ADVERTISED[3][1] + 1))
def test_metadata_every_version(broker: Any, version: int) -> None:
    with KioClient(broker.bootstrap) as client:
        topic_id = _create_topic(client, f"meta-{version}")
        wanted = {"name": f"meta-{version}", "topic_id": uuid.UUID(int=0)}
        answer = client.call(3, version, _req(3, version, {"topics": [wanted], "allow_auto_topic_creation": False,
                                                             "include_cluster_authorized_operations": False,
                                                             "include_topic_authorized_operations": False}))
    assert [t.name for t in answer.topics] == [f"meta-{version}"]
    topic = answer.topics[0]
    # The broker leads, one node whatever its worker count.
    assert topic.error_code == 0 and len(topic.partitions) == 1 and topic.partitions[0].leader_id == 0
    if version >= 10:
        assert topic.topic_id == topic_id
    host, port = broker.bootstrap.rsplit(":", 1)
    assert (answer.brokers[0].node_id, answer.brokers[0].host, answer.brokers[0].port) == (0, host, int(port))
    assert [b.node_id for b in answer.brokers] == [0]


def _kio_versions(key: int) -> list[int]:
    """The advertised versions kio can encode (those Kafka 4.0 dropped: test_old_clients.py)."""
    return [v for v in range(ADVERTISED[key][0], ADVERTISED[key][1] + 1) if codec.request_class(key, v) is not None]


@pytest.mark.parametrize("version", _kio_versions(0))
def test_produce_every_version_then_fetch_it_back(broker: Any, version: int) -> None:
    with KioClient(broker.bootstrap) as client:
        topic = f"produce-{version}"
        topic_id = _create_topic(client, topic)
        for i in range(3):
            answer = _produce(client, version, topic, _batch([b"v%d-%d" % (version, i)]))
            part = answer.responses[0].partition_responses[0]
            assert (part.error_code, part.base_offset) == (0, i)
        fetched = _fetch(client, 12, topic, topic_id, 0)
    data = fetched.responses[0].partitions[0].records
    values = []
    position = 0
    while position < len(data):
        header, records = decode_batch(data, position)
        values += [r.value for r in records]
        position += header.size
    assert values == [b"v%d-%d" % (version, i) for i in range(3)]


@pytest.mark.parametrize("version", _kio_versions(1))
def test_fetch_every_version(broker: Any, version: int) -> None:
    with KioClient(broker.bootstrap) as client:
        topic = f"fetch-{version}"
        topic_id = _create_topic(client, topic)
        sent = _batch([b"a", b"b", b"c"])
        assert _produce(client, 9, topic, sent).responses[0].partition_responses[0].error_code == 0
        answer = _fetch(client, version, topic, topic_id, 1)
        part = answer.responses[0].partitions[0]
        assert (part.error_code, part.high_watermark) == (0, 3)
        # Whole batches: the batch holding offset 1 starts at 0 (clients skip what they did not ask for).
        assert decode_batch(part.records)[1][1].value == b"b"
        out_of_range = _fetch(client, version, topic, topic_id, 99).responses[0].partitions[0]
        assert out_of_range.error_code == 1  # OFFSET_OUT_OF_RANGE
        # Caught up (the fetch offset is the log end): no records, and the log's marks.
        at_end = _fetch(client, version, topic, topic_id, 3).responses[0].partitions[0]
        assert (at_end.error_code, at_end.high_watermark, at_end.last_stable_offset) == (0, 3, 3)
        assert not at_end.records
        if version >= 5:
            assert at_end.log_start_offset == 0


def test_zstd_is_refused_below_produce_v7_and_not_fetched_below_v10(broker: Any) -> None:
    with KioClient(broker.bootstrap) as client:
        topic_id = _create_topic(client, "zstd")
        zstd = _batch([b"z" * 100], compression=COMPRESSION_ZSTD)
        assert _produce(client, 6, "zstd", zstd).responses[0].partition_responses[0].error_code == 76
        assert _produce(client, 7, "zstd", zstd).responses[0].partition_responses[0].error_code == 0
        assert _fetch(client, 9, "zstd", topic_id, 0).responses[0].partitions[0].error_code == 76
        assert _fetch(client, 10, "zstd", topic_id, 0).responses[0].partitions[0].records


def test_long_poll_wakes_on_an_append_through_another_connection(broker: Any) -> None:
    with KioClient(broker.bootstrap) as waiter, KioClient(broker.bootstrap) as producer:
        topic_id = _create_topic(producer, "longpoll")
        started = time.monotonic()
        correlation_id = waiter.send(1, 12, _req(1, 12, {
            "replica_id": -1, "max_wait": 20_000, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "forgotten_topics_data": (), "rack_id": "",
            "topics": [{"topic": "longpoll", "topic_id": topic_id, "partitions": [
                {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0, "last_fetched_epoch": -1,
                 "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}]}))
        time.sleep(0.5)  # let the fetch park (it cannot be observed from outside)
        assert _produce(producer, 9, "longpoll", _batch([b"late"])).responses[0].partition_responses[0].error_code == 0
        got, answer = decode_response(1, 12, read_frame(waiter.sock))
    assert got == correlation_id
    assert decode_batch(answer.responses[0].partitions[0].records)[1][0].value == b"late"
    assert time.monotonic() - started < 15  # woken by the append, not by the 20 s deadline


@pytest.mark.parametrize("broker", [{"workers": 2, "num.partitions": 4}], indirect=True)
def test_a_woken_fetch_below_min_bytes_keeps_what_it_had_and_adds_what_came(broker: Any) -> None:
    """min_bytes needs two batches: the first append wakes the parked fetch below it, the
    second (on a partition of the other worker) completes it. The answer holds both
    batches, and the two partitions nobody wrote answer empty at high watermark 0."""
    topic = "longpoll-min-bytes"
    first = partition_owned_by(topic, 0, broker.workers, 4)
    second = partition_owned_by(topic, 1, broker.workers, 4)
    batch_a, batch_b = _batch([b"a" * 200]), _batch([b"b" * 200])
    with KioClient(broker.bootstrap) as waiter, KioClient(broker.bootstrap) as producer:
        topic_id = _create_topic(producer, topic)
        started = time.monotonic()
        correlation_id = waiter.send(1, 12, _req(1, 12, {
            "replica_id": -1, "max_wait": 20_000, "min_bytes": len(batch_a) + len(batch_b), "max_bytes": 1 << 20,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1, "forgotten_topics_data": (), "rack_id": "",
            "topics": [{"topic": topic, "topic_id": topic_id, "partitions": [
                {"partition": p, "current_leader_epoch": -1, "fetch_offset": 0, "last_fetched_epoch": -1,
                 "log_start_offset": -1, "partition_max_bytes": 1 << 20} for p in range(4)]}]}))
        for partition, batch in ((first, batch_a), (second, batch_b)):
            time.sleep(0.5)  # let the fetch park (again)
            answer = _produce(producer, 9, topic, batch, partition=partition)
            assert answer.responses[0].partition_responses[0].error_code == 0
        got, answer = decode_response(1, 12, read_frame(waiter.sock))
    assert got == correlation_id
    assert time.monotonic() - started < 15  # completed by the second append, not the deadline
    partitions = {p.partition_index: p for p in answer.responses[0].partitions}
    assert decode_batch(partitions[first].records)[1][0].value == b"a" * 200
    assert decode_batch(partitions[second].records)[1][0].value == b"b" * 200
    for p in set(range(4)) - {first, second}:
        assert partitions[p].error_code == 0 and partitions[p].high_watermark == 0 and not partitions[p].records


# ---------------------------------------------------------------------- bad input
def _raw(bootstrap: str) -> socket.socket:
    host, port = bootstrap.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=5)
    sock.settimeout(5)
    return sock


def _closed(sock: socket.socket) -> bool:
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def _with_size(frame: bytes) -> bytes:
    return struct.pack(">i", len(frame)) + frame


BAD_FRAMES = {
    "garbage": struct.pack(">i", 12) + b"\xde\xad\xbe\xef" * 3,
    "huge size": struct.pack(">i", 200 * 1024 * 1024) + b"\x00" * 16,
    "negative size": struct.pack(">i", -5),
    "unknown api key": struct.pack(">i", 10) + struct.pack(">hhih", 4242, 0, 1, -1),
    "unsupported produce version": struct.pack(">i", 10) + struct.pack(">hhih", 0, 1, 1, -1),
    "body cut short": struct.pack(">i", 14) + struct.pack(">hhih", 3, 4, 1, -1) + struct.pack(">i", 3),
    # A flexible FindCoordinator v5 whose coordinator_keys declares billions of entries:
    # kio's native reader would try to allocate them and abort the worker (broker/protocol/guard.py).
    "absurd array count": _with_size(struct.pack(">hhih", 10, 5, 1, -1) + b"\x00" + bytes.fromhex("e5faaab6bf5660447acc47be9664549cb8")),
    "absurd produce partition count": _with_size(struct.pack(">hhih", 0, 9, 1, -1) + b"\x00"
                                                 + b"\x00" + struct.pack(">hi", 1, 1000) + b"\x02\x01t" + b"\xff\xff\xff\xff\x0f"),
    # Produce and Fetch bodies go through our own decoders (broker/protocol/produce_request.py,
    # fetch_request.py), not kio.
    "produce v3 records longer than the frame": _with_size(
        struct.pack(">hhih", 0, 3, 1, -1) + struct.pack(">hhi", -1, 1, 5000) + struct.pack(">i", 1) + b"\x00\x01t"
        + struct.pack(">iii", 1, 0, 1 << 20) + b"\x00" * 61),
    "fetch v12 promising a million partitions": _with_size(
        struct.pack(">hhih", 1, 12, 1, -1) + b"\x00" + struct.pack(">iiiibii", -1, 500, 1, 1 << 20, 0, 0, -1)
        + b"\x02" + b"\x02t" + b"\xc1\x84\x3d" + struct.pack(">iiqiqi", 0, -1, 0, -1, -1, 1 << 20) + b"\x00"),
    "fetch v4 cut inside a partition": _with_size(
        struct.pack(">hhih", 1, 4, 1, -1) + struct.pack(">iiiib", -1, 500, 1, 1 << 20, 0)
        + struct.pack(">i", 1) + struct.pack(">h", 1) + b"t" + struct.pack(">i", 2) + struct.pack(">iqi", 0, 0, 1 << 20) + b"\x00\x00"),
}


@pytest.mark.parametrize("name", sorted(BAD_FRAMES))
def test_bad_frames_close_only_their_connection(broker: Any, name: str) -> None:
    workers_before = sorted(broker.worker_pids())
    with KioClient(broker.bootstrap) as bystander:
        _create_topic(bystander, "bystander")
        sock = _raw(broker.bootstrap)
        sock.sendall(BAD_FRAMES[name])
        assert _closed(sock)
        sock.close()
        # The same worker process (and every other) still serves.
        assert _produce(bystander, 9, "bystander", _batch([b"still here"])).responses[0].partition_responses[0].error_code == 0
    assert sorted(broker.worker_pids()) == workers_before


def test_truncated_frame_then_hangup_leaves_the_broker_serving(broker: Any) -> None:
    sock = _raw(broker.bootstrap)
    sock.sendall(struct.pack(">i", 1000) + b"\x00\x03\x00\x0c")  # promises 1000 bytes, sends 4
    sock.close()
    with KioClient(broker.bootstrap) as client:
        _create_topic(client, "after-truncation")


def test_corrupt_batch_is_refused_and_nothing_is_written(broker: Any) -> None:
    with KioClient(broker.bootstrap) as client:
        topic_id = _create_topic(client, "corrupt")
        good = _batch([b"one"])
        assert _produce(client, 9, "corrupt", good).responses[0].partition_responses[0].error_code == 0
        bad = bytearray(_batch([b"two", b"three"]))
        bad[-1] ^= 0xFF  # breaks the CRC-32C
        answer = _produce(client, 9, "corrupt", bytes(bad)).responses[0].partition_responses[0]
        assert answer.error_code == 2  # CORRUPT_MESSAGE
        truncated = _batch([b"four"])[:-3]
        assert _produce(client, 9, "corrupt", truncated).responses[0].partition_responses[0].error_code in (2, 87)
        fetched = _fetch(client, 12, "corrupt", topic_id, 0).responses[0].partitions[0]
        assert fetched.high_watermark == 1
        assert [r.value for r in decode_batch(fetched.records)[1]] == [b"one"]
        # The connection survived all of that.
        assert _produce(client, 9, "corrupt", _batch([b"five"])).responses[0].partition_responses[0].base_offset == 1


def test_produce_to_an_unknown_topic_answers_unknown_topic(broker: Any) -> None:
    with KioClient(broker.bootstrap) as client:
        answer = _produce(client, 9, "never-created", _batch([b"x"])).responses[0].partition_responses[0]
    assert answer.error_code == 3


def test_pipelined_requests_are_answered_in_order(broker: Any) -> None:
    with KioClient(broker.bootstrap) as client:
        topic_id = _create_topic(client, "pipelined")
        sent = [client.send(0, 9, _req(0, 9, {"transactional_id": None, "acks": 1, "timeout": 5000, "topic_data": [
            {"name": "pipelined", "partition_data": [{"index": 0, "records": _batch([b"%d" % i])}]}]})) for i in range(50)]
        fetch_id = client.send(1, 12, _req(1, 12, {
            "replica_id": -1, "max_wait": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "forgotten_topics_data": (), "rack_id": "",
            "topics": [{"topic": "pipelined", "topic_id": topic_id, "partitions": [
                {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0, "last_fetched_epoch": -1,
                 "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}]}))
        got = []
        for expected in sent:
            correlation_id, answer = decode_response(0, 9, read_frame(client.sock))
            got.append(correlation_id)
            assert answer.responses[0].partition_responses[0].base_offset == expected - sent[0]
        correlation_id, _answer = decode_response(1, 12, read_frame(client.sock))
        assert got == sent and correlation_id == fetch_id


def test_a_read_of_a_thousand_requests_is_answered_whole_and_in_order(broker: Any) -> None:
    """1,500 small Produce requests written at once: one read of the broker holds
    hundreds of them, and their answers leave together at the end of the loop turn. Every
    answer arrives once, in order, with consecutive offsets."""
    count = 1500
    with KioClient(broker.bootstrap) as client:
        _create_topic(client, "pipelined-many")
        frames = [encode_request(0, 9, 10_000 + i, _req(0, 9, {
            "transactional_id": None, "acks": 1, "timeout": 5000, "topic_data": [
                {"name": "pipelined-many", "partition_data": [{"index": 0, "records": _batch([b"%d" % i])}]}]}))
            for i in range(count)]
        client.sock.sendall(b"".join(frames))
        got = []
        for i in range(count):
            correlation_id, answer = decode_response(0, 9, read_frame(client.sock))
            partition = answer.responses[0].partition_responses[0]
            assert partition.error_code == 0 and partition.base_offset == i, (i, partition)
            got.append(correlation_id)
        client.sock.settimeout(0.5)
        with pytest.raises(socket.timeout):  # nothing more: no answer was sent twice
            client.sock.recv(1)
    assert got == list(range(10_000, 10_000 + count))


@pytest.mark.parametrize("broker", [{"queued.max.request.bytes": 100_000}], indirect=True)
def test_pipelined_requests_over_the_byte_bound_are_all_answered_in_order(broker: Any) -> None:
    """queued.max.request.bytes pauses reading while unanswered frames hold more than it;
    reading resumes as they are answered, so 40 pipelined 64 KiB Produce requests (26x the
    bound) are all written and answered, in order."""
    value = b"v" * 65536
    with KioClient(broker.bootstrap) as client:
        _create_topic(client, "pipelined-bytes")
        sent = [client.send(0, 9, _req(0, 9, {"transactional_id": None, "acks": 1, "timeout": 5000, "topic_data": [
            {"name": "pipelined-bytes", "partition_data": [{"index": 0, "records": _batch([value])}]}]}))
            for _ in range(40)]
        got = []
        for expected in sent:
            correlation_id, answer = decode_response(0, 9, read_frame(client.sock))
            got.append(correlation_id)
            partition = answer.responses[0].partition_responses[0]
            assert partition.error_code == 0 and partition.base_offset == expected - sent[0]
    assert got == sent
