"""A coordinator API's request from the client's frame to the coordinator process's typed
request and back (broker/coordinator/): the worker keeps the body undecoded, the rings carry
it with who sent it, the coordinator process decodes it once; a bad body gets a Kafka error
(the worker then closes the connection, as Kafka does), never a crash."""

from __future__ import annotations

import asyncio
import io
import struct
from typing import Any

import pytest
from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer

from broker import apis, dispatch
from broker.context import CoordinatorContext
from broker.coordinator.api import SERVED, Reader
from broker.coordinator.forwarded import Forwarded, RequestBody
from broker.network.connection import decode_frame
from broker.protocol import codec, offsets_legacy
from broker.protocol.build import build
from broker.protocol.errors import KafkaError, ProtocolViolation
from tests.unit.coordination.test_coordinator_offsets import FileOffsetsLog, coordinator

JOIN, HEARTBEAT, COMMIT, FETCH = 11, 12, 8, 9
apis.load_all()


def body_of(api_key: int, version: int, **fields: Any) -> bytes:
    buffer = io.BytesIO()
    cls = load_request_schema(api_key, version)
    entity_writer(cls)(buffer, build(cls, fields))
    return buffer.getvalue()


def frame_of(api_key: int, version: int, body: bytes, client_id: str = "client-1") -> bytes:
    """A request frame as a client sends it, less the size prefix."""
    header = struct.pack(">hhih", api_key, version, 7, len(client_id)) + client_id.encode()
    if codec.is_flexible(api_key, version):
        header += b"\x00"  # no tagged fields
    return header + body


def worker_reads(frame: bytes) -> tuple[dispatch.HandlerSpec, RequestBody]:
    """What the worker's connection keeps of the frame (its decode_frame, as for any request)."""
    spec, _header, kept = decode_frame(bytearray(frame))
    assert isinstance(kept, RequestBody)
    return spec, kept


def over_the_rings(kept: RequestBody, api_key: int) -> Forwarded:
    sent = Forwarded(api_key, kept.api_version, "client-1", "/127.0.0.1", "User:alice", "CLIENT", kept.body)
    received = Forwarded.of_message(memoryview(b"".join(bytes(part) for part in sent.parts())))
    assert received == sent
    return received


def answered(api_key: int, version: int, forwarded: Forwarded, tmp_path: Any) -> Any:
    """The coordinator process's answer, decoded as the client would."""
    offsets_log = FileOffsetsLog(str(tmp_path))
    groups = coordinator(offsets_log)
    contexts: list[CoordinatorContext] = []

    def context_for(request: Forwarded, as_version: int) -> CoordinatorContext:
        context = CoordinatorContext(groups, request.api_key, as_version, request.client_id, request.client_host,
                                     lambda _topic, _partition: True)
        contexts.append(context)
        return context

    try:
        body = asyncio.run(SERVED[api_key].answer(forwarded, context_for))
    finally:
        offsets_log.close()
    assert contexts[0].client_id == "client-1" and contexts[0].client_host == "/127.0.0.1"
    response, _size = entity_reader(load_response_schema(api_key, contexts[0].api_version))(body, 0)
    return response


def test_the_worker_keeps_the_body_undecoded() -> None:
    body = body_of(JOIN, 9, group_id="g", session_timeout=10_000, rebalance_timeout=10_000, member_id="",
                   group_instance_id=None, protocol_type="consumer", reason=None,
                   protocols=[{"name": "range", "metadata": b"meta"}])
    _spec, kept = worker_reads(frame_of(JOIN, 9, body))
    assert kept == RequestBody(JOIN, 9, body)


def test_frame_in_typed_request_out() -> None:
    fields: dict[str, Any] = dict(group_id="g", session_timeout=10_000, rebalance_timeout=30_000, member_id="m-1",
                                  group_instance_id="i-1", protocol_type="consumer", reason="why",
                                  protocols=[{"name": "range", "metadata": b"meta"}])
    _spec, kept = worker_reads(frame_of(JOIN, 9, body_of(JOIN, 9, **fields)))
    request, version = Reader(JOIN, {})(kept.api_version, over_the_rings(kept, JOIN).body)
    assert version == 9 and isinstance(request, load_request_schema(JOIN, 9))
    assert (request.group_id, request.member_id, request.group_instance_id) == ("g", "m-1", "i-1")
    assert request.rebalance_timeout.total_seconds() == 30 and bytes(request.protocols[0].metadata) == b"meta"


def test_a_legacy_version_is_read_as_the_kio_version_that_answers_for_it() -> None:
    body = struct.pack(">h", 1) + b"g" + struct.pack(">i", 1) + struct.pack(">h", 1) + b"t" + struct.pack(">i", 1)
    body += struct.pack(">iq", 0, 42) + struct.pack(">h", 2) + b"md"  # OffsetCommit v0: one partition, offset 42
    _spec, kept = worker_reads(frame_of(COMMIT, 0, body))
    legacy = {v: (as_version, offsets_legacy.decode_offset_commit) for v, as_version in offsets_legacy.COMMIT_AS.items()}
    request, version = Reader(COMMIT, legacy)(0, over_the_rings(kept, COMMIT).body)
    assert version == 2 and isinstance(request, load_request_schema(COMMIT, 2))
    assert request.group_id == "g" and request.generation_id_or_member_epoch == -1
    assert [(t.name, p.partition_index, p.committed_offset) for t in request.topics for p in t.partitions] == [("t", 0, 42)]


def test_the_coordinator_process_answers_what_it_decoded(tmp_path: Any) -> None:
    body = body_of(JOIN, 9, group_id="g", session_timeout=10_000, rebalance_timeout=10_000, member_id="",
                   group_instance_id=None, protocol_type="consumer", reason=None,
                   protocols=[{"name": "range", "metadata": b"meta"}])
    _spec, kept = worker_reads(frame_of(JOIN, 9, body))
    answer = answered(JOIN, 9, over_the_rings(kept, JOIN), tmp_path)
    # v4+: a first join gets its member id, made of the client id, and joins again with it.
    assert answer.error_code == ErrorCode.member_id_required and answer.member_id.startswith("client-1-")
    heartbeat = body_of(HEARTBEAT, 4, group_id="g", generation_id=1, member_id="nobody", group_instance_id=None)
    _spec, kept = worker_reads(frame_of(HEARTBEAT, 4, heartbeat))
    assert answered(HEARTBEAT, 4, over_the_rings(kept, HEARTBEAT), tmp_path).error_code == ErrorCode.unknown_member_id


def test_a_legacy_commit_is_answered_in_its_own_layout(tmp_path: Any) -> None:
    body = struct.pack(">h", 1) + b"g" + struct.pack(">i", 1) + struct.pack(">h", 1) + b"t" + struct.pack(">i", 1)
    body += struct.pack(">iq", 3, 42) + struct.pack(">h", -1)
    _spec, kept = worker_reads(frame_of(COMMIT, 0, body))
    answer = answered(COMMIT, 0, over_the_rings(kept, COMMIT), tmp_path)  # read as v2, whose answer v0 shares
    assert [(t.name, p.partition_index, p.error_code) for t in answer.topics for p in t.partitions] == [("t", 3, 0)]


@pytest.mark.parametrize("api_key,version,body", [
    (JOIN, 9, b"\x02g"),  # cut inside the group id's first field
    (HEARTBEAT, 4, b""),  # empty
    (COMMIT, 0, b"\x00\x01g\x7f\xff\xff\xff"),  # legacy: an absurd topic count
    (FETCH, 8, b"\xff" * 40),  # garbage
])
def test_a_bad_body_gets_a_kafka_error_not_a_crash(api_key: int, version: int, body: bytes, tmp_path: Any) -> None:
    spec, kept = worker_reads(frame_of(api_key, version, body))
    with pytest.raises(KafkaError) as refused:
        answered(api_key, version, over_the_rings(kept, api_key), tmp_path)
    assert refused.value.code == ErrorCode.invalid_request
    # The worker, asked for an "everything failed" answer for it, cannot read it either: it
    # raises ProtocolViolation, and the connection closes.
    assert spec.error_response is not None
    with pytest.raises(ProtocolViolation):
        spec.error_response(kept, version, int(ErrorCode.coordinator_not_available))


def test_the_worker_builds_the_failure_answer_from_the_body_only_when_it_must() -> None:
    body = body_of(COMMIT, 9, group_id="g", generation_id_or_member_epoch=1, member_id="m", group_instance_id=None,
                   topics=[{"name": "t", "partitions": [{"partition_index": p, "committed_offset": 1,
                                                        "committed_leader_epoch": -1, "committed_metadata": ""}
                                                       for p in (0, 1)]}])
    spec, kept = worker_reads(frame_of(COMMIT, 9, body))
    assert spec.error_response is not None
    answer = spec.error_response(kept, 9, int(ErrorCode.coordinator_not_available))
    assert [(p.partition_index, p.error_code) for t in answer.topics for p in t.partitions] == [
        (0, ErrorCode.coordinator_not_available), (1, ErrorCode.coordinator_not_available)]
