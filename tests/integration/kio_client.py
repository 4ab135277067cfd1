"""A raw Kafka client built on kio, for versions no real client sends and for bad input.

Requests are encoded by kio (an implementation independent of our framing code); the
response header is skipped by the rule clients use (v0 for ApiVersions, v1 when the
request version is flexible) and the body decoded by kio.
"""

from __future__ import annotations

import io
import socket
import struct
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer


def encode_request(api_key: int, version: int, correlation_id: int, body: Any, client_id: str = "kio-tests") -> bytes:
    flexible = load_request_schema(api_key, version).__flexible__
    client = client_id.encode()
    header = struct.pack(">hhih", api_key, version, correlation_id, len(client)) + client
    if flexible:
        header += b"\x00"
    buffer = io.BytesIO()
    entity_writer(type(body))(buffer, body)
    frame = header + buffer.getvalue()
    return struct.pack(">i", len(frame)) + frame


def read_frame(sock: socket.socket) -> bytes:
    def exactly(n: int) -> bytes:
        data = bytearray()
        while len(data) < n:
            chunk = sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("broker closed the connection")
            data += chunk
        return bytes(data)

    (size,) = struct.unpack(">i", exactly(4))
    return exactly(size)


def decode_response(api_key: int, version: int, frame: bytes) -> tuple[int, Any]:
    flexible_header = api_key != 18 and load_request_schema(api_key, version).__flexible__
    (correlation_id,) = struct.unpack_from(">i", frame, 0)
    offset = 5 if flexible_header else 4
    entity, _size = entity_reader(load_response_schema(api_key, version))(frame, offset)
    return correlation_id, entity


class KioClient:
    def __init__(self, bootstrap: str, timeout: float = 10.0, client_id: str = "kio-tests") -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.sock.settimeout(timeout)
        self.client_id = client_id
        self._next = 0

    def send(self, api_key: int, version: int, body: Any) -> int:
        self._next += 1
        self.sock.sendall(encode_request(api_key, version, self._next, body, self.client_id))
        return self._next

    def call(self, api_key: int, version: int, body: Any) -> Any:
        correlation_id = self.send(api_key, version, body)
        got, entity = decode_response(api_key, version, read_frame(self.sock))
        assert got == correlation_id
        return entity

    def closed_by_peer(self, timeout: float = 5.0) -> bool:
        """True once the broker closed this connection (read returns EOF or reset)."""
        self.sock.settimeout(timeout)
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True
        except socket.timeout:
            return False

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> "KioClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
