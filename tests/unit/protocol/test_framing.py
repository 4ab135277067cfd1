"""Request framing and decoding, sans-I/O: the quirks real clients depend on, and a
fuzzer proving that no input makes the decoder fail other than by ProtocolViolation."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.protocol.metadata import ApiVersionsRequest as KafkaPythonApiVersionsRequest

from broker import apis, dispatch
from broker.network.connection import decode_frame
from broker.protocol import framing
from broker.protocol.errors import ProtocolViolation

apis.load_all()


def _frame(api_key: int, version: int, correlation_id: int, client_id: bytes | None, rest: bytes, flexible: bool) -> bytes:
    header = struct.pack(">hhi", api_key, version, correlation_id)
    header += struct.pack(">h", -1) if client_id is None else struct.pack(">h", len(client_id)) + client_id
    if flexible:
        header += b"\x00"
    return header + rest


def test_flexible_header_keeps_the_int16_client_id() -> None:
    # ApiVersions v3 is flexible: the client id is still an int16-length string, then tags.
    body = b"\x07castle\x040.1\x00"  # compact strings (length + 1) "castle", "0.1"; no tags
    frame = _frame(18, 3, 7, b"my-client", body, flexible=True)
    spec, header, request = decode_frame(frame)
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (18, 3, 7, "my-client")
    assert request.client_software_name == "castle" and request.client_software_version == "0.1"


def test_null_client_id_and_tagged_fields_are_skipped() -> None:
    tags = b"\x02" + b"\x01\x03abc" + b"\x05\x00"  # two tagged fields: tag 1 (3 bytes), tag 5 (empty)
    frame = struct.pack(">hhih", 18, 3, 1, -1) + tags + b"\x01\x01\x00"
    header = framing.parse_request_header(frame, flexible=True)
    assert header.client_id is None
    assert header.body_offset == len(frame) - 3


def test_unsupported_api_versions_version_is_answered_not_closed() -> None:
    frame = _frame(18, 99, 5, b"x", b"", flexible=True)
    spec, header, request = decode_frame(frame)
    assert spec.api_key == 18 and request is None and header.correlation_id == 5


def test_kafka_python_api_versions_v4_bytes_decode() -> None:
    # An independent encoder (kafka-python) builds the request our decoder reads.
    encoded = bytes(KafkaPythonApiVersionsRequest(version=4, client_software_name="kafka-python",
                                                  client_software_version="3.0").encode())
    frame = _frame(18, 4, 9, b"kp", encoded, flexible=True)
    _spec, header, request = decode_frame(frame)
    assert header.api_version == 4 and request.client_software_name == "kafka-python"


@pytest.mark.parametrize("frame, why", [
    (b"", "cannot hold"),
    (b"\x00\x12\x00\x00", "cannot hold"),
    (struct.pack(">hhih", 999, 0, 1, -1), "unknown api key"),
    (struct.pack(">hhih", 0, 99, 1, -1), "not supported"),  # Produce v99: above our ceiling
    (struct.pack(">hhih", 3, 12, 1, 50) + b"short", "client id"),
    (struct.pack(">hhih", 3, 4, 1, -1) + b"\x00\x00\x00\x05", "cannot decode"),  # 5 topics promised, none given
])
def test_malformed_frames_are_protocol_violations(frame: bytes, why: str) -> None:
    with pytest.raises(ProtocolViolation, match=why):
        decode_frame(frame)


api_keys = st.sampled_from(sorted(dispatch.REGISTRY) + [999, -1])


@settings(max_examples=600, deadline=None)
@given(api_key=api_keys, version=st.integers(-2, 20), client_id=st.one_of(st.none(), st.binary(max_size=20)),
       flexible=st.booleans(), rest=st.binary(max_size=200))
def test_fuzzed_frames_decode_or_violate(api_key: int, version: int, client_id: bytes | None, flexible: bool, rest: bytes) -> None:
    frame = _frame(api_key, version, 1, client_id, rest, flexible)
    try:
        decode_frame(frame)
    except ProtocolViolation:
        pass


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=300))
def test_random_bytes_decode_or_violate(data: bytes) -> None:
    try:
        decode_frame(data)
    except ProtocolViolation:
        pass
