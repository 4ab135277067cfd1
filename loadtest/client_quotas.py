"""Client quotas set and read over the wire, on any Kafka-protocol broker (Castle, Kafka).

AlterClientQuotas and DescribeClientQuotas v1, encoded by kio: neither confluent-kafka nor
kafka-python has an admin call for client quotas, and a benchmark toggling quotas between
runs must do it the same way on every broker it compares. An entity is a dict of entity
type to name, None naming the default (``{"user": None}`` is ``/config/users/<default>``).
"""

from __future__ import annotations

import dataclasses
import io
import socket
import struct
import typing
from types import TracebackType
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer

ALTER_CLIENT_QUOTAS, DESCRIBE_CLIENT_QUOTAS = 49, 48
VERSION = 1  # both APIs' flexible version: Kafka 2.6+ and Castle
MATCH_ANY = 2  # DescribeClientQuotas: any name, default included

Entity = dict[str, "str | None"]
EntityKey = tuple[tuple[str, "str | None"], ...]  # sorted (type, name) pairs: a dict key


class QuotaError(RuntimeError):
    """The broker refused an AlterClientQuotas entry or a DescribeClientQuotas."""


def entity_key(entity: Entity) -> EntityKey:
    return tuple(sorted(entity.items()))


def entity_text(entity: Entity) -> str:
    """Kafka's own spelling in kafka-configs' output: user=<default>, client-id=bench."""
    return ", ".join(f"{kind}={'<default>' if name is None else name}" for kind, name in sorted(entity.items()))


def _build(cls: type, fields: dict[str, Any]) -> Any:
    """A kio entity of ``cls`` with nested dicts turned into its nested entity classes."""
    hints = typing.get_type_hints(cls)
    values = {}
    for f in dataclasses.fields(cls):
        value = fields[f.name]
        args = typing.get_args(hints[f.name])
        if isinstance(value, list) and args and isinstance(args[0], type) and dataclasses.is_dataclass(args[0]):
            value = tuple(_build(args[0], item) for item in value)
        values[f.name] = value
    return cls(**values)


class QuotaClient:
    """One connection to a broker for its client quotas (closed with ``with``)."""

    def __init__(self, bootstrap: str, timeout: float = 30.0, client_id: str = "castle-bench-quotas") -> None:
        host, _, port = bootstrap.split(",")[0].rpartition(":")
        self.sock = socket.create_connection((host.strip("[]"), int(port)), timeout=timeout)
        self.client_id = client_id.encode()
        self._correlation = 0

    def __enter__(self) -> QuotaClient:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None) -> None:
        self.sock.close()

    def _call(self, api_key: int, body: dict[str, Any]) -> Any:
        self._correlation += 1
        buffer = io.BytesIO()
        request_cls = load_request_schema(api_key, VERSION)
        entity_writer(request_cls)(buffer, _build(request_cls, body))
        # Request header v2 (both APIs are flexible at v1): no tagged fields.
        header = struct.pack(">hhih", api_key, VERSION, self._correlation, len(self.client_id)) + self.client_id + b"\x00"
        frame = header + buffer.getvalue()
        self.sock.sendall(struct.pack(">i", len(frame)) + frame)
        answer = self._read_frame()
        (correlation,) = struct.unpack_from(">i", answer, 0)
        if correlation != self._correlation:
            raise QuotaError(f"answer to request {correlation}, expected {self._correlation}")
        # Response header v1: the correlation id and an empty tagged-field count.
        entity, _ = entity_reader(load_response_schema(api_key, VERSION))(answer, 5)
        return entity

    def _read_frame(self) -> bytes:
        def exactly(size: int) -> bytes:
            data = bytearray()
            while len(data) < size:
                chunk = self.sock.recv(size - len(data))
                if not chunk:
                    raise ConnectionError("the broker closed the connection")
                data += chunk
            return bytes(data)

        (size,) = struct.unpack(">i", exactly(4))
        return exactly(size)

    def alter(self, entity: Entity, values: dict[str, float | None]) -> None:
        """Set each key to its value, or remove it where the value is None."""
        answer = self._call(ALTER_CLIENT_QUOTAS, {"validate_only": False, "entries": [{
            "entity": [{"entity_type": kind, "entity_name": name} for kind, name in entity.items()],
            "ops": [{"key": key, "value": 0.0 if value is None else float(value), "remove": value is None}
                    for key, value in values.items()]}]})
        for entry in answer.entries:
            if int(entry.error_code):
                raise QuotaError(f"AlterClientQuotas {entity_text(entity)}: error {int(entry.error_code)} "
                                 f"{entry.error_message or ''}".rstrip())

    def describe(self, entity_types: tuple[str, ...] = ("user", "client-id")) -> dict[EntityKey, dict[str, float]]:
        """Every quota of the entities naming any of ``entity_types`` (their defaults too)."""
        out: dict[EntityKey, dict[str, float]] = {}
        for kind in entity_types:
            answer = self._call(DESCRIBE_CLIENT_QUOTAS, {"strict": False, "components": [
                {"entity_type": kind, "match_type": MATCH_ANY, "match": None}]})
            if int(answer.error_code):
                raise QuotaError(f"DescribeClientQuotas {kind}: error {int(answer.error_code)} {answer.error_message}")
            for entry in answer.entries or ():
                key = tuple(sorted((e.entity_type, e.entity_name) for e in entry.entity))
                out[key] = {value.key: float(value.value) for value in entry.values}
        return out
