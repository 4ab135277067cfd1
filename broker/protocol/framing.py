"""Frames and headers: ours, not kio's (P2), because real clients depend on two quirks.

A frame on the wire::

    size            int32    bytes that follow (the broker refuses > socket.request.max.bytes)
    header ...               request header v1 (non-flexible APIs) or v2 (flexible ones)
    body ...                 the request, decoded by kio

Request header v1 / v2::

    request_api_key      int16
    request_api_version  int16
    correlation_id       int32
    client_id            int16 length + UTF-8, -1 = null   (NOT a compact string, even in v2)
    tagged_fields        uvarint count, then (uvarint tag, uvarint size, bytes)   (v2 only)

Response header v0 is ``correlation_id int32``; v1 adds an empty tagged-field section
(one zero byte). ApiVersions responses always use v0, whatever the request version, so a
client that does not yet know our versions can read the answer.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from broker.protocol.errors import ProtocolViolation

SIZE = struct.Struct(">i")
HEADER_FIXED = struct.Struct(">hhih")  # api_key, api_version, correlation_id, client_id length
RESPONSE_HEADER_V0 = struct.Struct(">ii")  # frame size, correlation_id
API_PEEK = struct.Struct(">hhi")
assert SIZE.size == 4 and HEADER_FIXED.size == 10 and RESPONSE_HEADER_V0.size == 8 and API_PEEK.size == 8

API_VERSIONS_KEY = 18


class RequestHeader(NamedTuple):
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body_offset: int  # where the body starts in the frame


def read_uvarint(data: bytes | bytearray | memoryview, position: int) -> tuple[int, int]:
    """Unsigned LEB128 varint -> (value, next position)."""
    result = 0
    shift = 0
    while True:
        if position >= len(data):
            raise ProtocolViolation("truncated varint")
        byte = data[position]
        position += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, position
        shift += 7
        if shift > 28:
            raise ProtocolViolation("varint too long")


def parse_request_header(frame: bytes | bytearray | memoryview, flexible: bool) -> RequestHeader:
    """Parse the header; ``flexible`` says whether the (api_key, version) uses header v2."""
    if len(frame) < HEADER_FIXED.size:
        raise ProtocolViolation(f"a {len(frame)}-byte frame cannot hold a request header")
    api_key, api_version, correlation_id, client_id_length = HEADER_FIXED.unpack_from(frame, 0)
    position = HEADER_FIXED.size
    client_id = None
    if client_id_length >= 0:
        end = position + client_id_length
        if end > len(frame):
            raise ProtocolViolation("client id runs past the frame")
        try:
            client_id = bytes(frame[position:end]).decode()
        except UnicodeDecodeError:
            raise ProtocolViolation("client id is not UTF-8") from None
        position = end
    elif client_id_length != -1:
        raise ProtocolViolation(f"client id length {client_id_length}")
    if flexible and position < len(frame) and frame[position] == 0:
        position += 1  # no tagged fields: the usual case
    elif flexible:
        count, position = read_uvarint(frame, position)
        for _ in range(count):
            _tag, position = read_uvarint(frame, position)
            size, position = read_uvarint(frame, position)
            position += size
            if position > len(frame):
                raise ProtocolViolation("tagged field runs past the frame")
    return RequestHeader(api_key, api_version, correlation_id, client_id, position)


def peek_api(frame: bytes | bytearray | memoryview) -> tuple[int, int, int]:
    """(api_key, api_version, correlation_id) before we know the header version."""
    if len(frame) < 8:
        raise ProtocolViolation(f"a {len(frame)}-byte frame cannot hold a request header")
    api_key, api_version, correlation_id = API_PEEK.unpack_from(frame, 0)
    return api_key, api_version, correlation_id


def response_prefix(correlation_id: int, body_size: int, flexible_header: bool) -> bytes:
    """Frame size + response header, for a body of ``body_size`` bytes."""
    if flexible_header:
        return RESPONSE_HEADER_V0.pack(body_size + 5, correlation_id) + b"\0"
    return RESPONSE_HEADER_V0.pack(body_size + 4, correlation_id)
