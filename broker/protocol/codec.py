"""Message bodies through kio (sans-I/O): bytes in, typed entities out, and back.

Requests are decoded by kio (behind guard.check_request) except Produce and Fetch, which
have their own decoders (produce_request.py, fetch_request.py, registered with
``@api(..., decode=...)``). Responses are serialized by kio except where
broker/protocol/fast.py writes the same bytes faster (tested for parity).
"""

from __future__ import annotations

import functools
import io
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer

from broker.protocol.errors import ProtocolViolation
from broker.protocol.guard import check_request


@functools.cache
def request_class(api_key: int, version: int) -> Any | None:
    """kio's request entity for (api_key, version), or None if Kafka defines no such version."""
    try:
        return load_request_schema(api_key, version)
    except Exception:
        return None


@functools.cache
def response_class(api_key: int, version: int) -> Any:
    return load_response_schema(api_key, version)


@functools.cache
def reader_for(cls: type) -> Any:
    """kio's native decoder of entity class ``cls``, built once per class: called as
    ``reader(buffer, offset)``, it answers ``(entity, size)``. It trusts the lengths it
    reads; decode_request runs the guard first (broker/protocol/guard.py)."""
    return entity_reader(cls)


@functools.cache
def _writer(cls: type) -> Any:
    return entity_writer(cls)


@functools.cache  # asked twice per request (header in, header out): a C-level lookup after the first
def is_flexible(api_key: int, version: int) -> bool:
    cls = request_class(api_key, version)
    if cls is None:
        # An ApiVersions request newer than kio knows is flexible (v3+ are), and its
        # header must still be parsed to answer UNSUPPORTED_VERSION.
        return api_key == 18 and version >= 3
    return bool(cls.__flexible__)


def decode_request(api_key: int, version: int, frame: bytes | memoryview, offset: int) -> Any:
    cls = request_class(api_key, version)
    if cls is None:
        raise ProtocolViolation(f"no schema for api {api_key} v{version}")
    check_request(cls, frame, offset)  # kio's reader aborts the process on absurd lengths
    try:
        entity, _size = reader_for(cls)(frame, offset)
    except Exception as exc:  # kio raises several types on malformed input
        raise ProtocolViolation(f"cannot decode api {api_key} v{version}: {exc!r}") from None
    return entity


def encode_body(entity: Any) -> bytes:
    buffer = io.BytesIO()
    entity_class: type = type(entity)
    _writer(entity_class)(buffer, entity)
    return buffer.getvalue()


def encode_request(entity: Any) -> bytes:
    """A request body (tests and the benchmark build raw requests with it)."""
    return encode_body(entity)
