"""Writing and reading the coordinator records' schemas (Kafka's "coordinator-key" and
"coordinator-value" messages): the pieces the typed record modules share.

The encodings are those offsets_schema.py describes (int16-length strings in keys; compact
strings, bytes and arrays, 16-byte uuids and tagged-field sections in flexible values).
Reading uses offsets_schema.SchemaReader; a module that wants its own error subclasses it
and RecordWriter and sets ``error``.
"""

from __future__ import annotations

import struct
import uuid
from typing import Callable, ClassVar

from coordination.groups.offsets_schema import INT16, INT32, OffsetsSchemaError, SchemaReader, string_bytes

TAG_0 = 0  # the first tag of a schema; the only one of most coordinator records
_INT32_MAX = (1 << 31) - 1
_UUID_SIZE = 16


class RecordWriter:
    """One key or value being written; every field is checked against its type, so a value
    that does not fit its schema raises ``error``, never struct.error."""

    __slots__ = ("out",)
    error: ClassVar[type[OffsetsSchemaError]] = OffsetsSchemaError

    def __init__(self) -> None:
        self.out = bytearray()

    def sub(self, write: Callable[[RecordWriter], None]) -> bytes:
        """The bytes ``write`` writes to a fresh writer of this class (a tagged field's data)."""
        writer = type(self)()
        write(writer)
        return bytes(writer.out)

    def fixed(self, fmt: struct.Struct, value: int, field: str) -> None:
        try:
            self.out += fmt.pack(value)
        except struct.error:
            raise self.error(f"{field} {value!r} does not fit {fmt.size * 8} bits") from None

    def uvarint(self, value: int) -> None:
        while value >= 0x80:
            self.out.append((value & 0x7F) | 0x80)
            value >>= 7
        self.out.append(value)

    def uuid(self, value: uuid.UUID) -> None:
        self.out += value.bytes

    def _utf8(self, value: str, field: str) -> bytes:
        try:
            return string_bytes(value, field)
        except OffsetsSchemaError as exc:
            raise self.error(str(exc)) from None

    def string(self, value: str, field: str) -> None:
        """A non-flexible (key) string: int16 length."""
        raw = self._utf8(value, field)
        self.out += INT16.pack(len(raw))
        self.out += raw

    def compact_string(self, value: str | None, field: str) -> None:
        if value is None:
            self.uvarint(0)
            return
        raw = self._utf8(value, field)
        self.uvarint(len(raw) + 1)
        self.out += raw

    def compact_bytes(self, value: bytes, field: str) -> None:
        if len(value) >= _INT32_MAX:
            raise self.error(f"{field} of {len(value)} bytes is too long")
        self.uvarint(len(value) + 1)
        self.out += value

    def count(self, count: int, field: str) -> None:
        """A compact array's count (the elements follow)."""
        if count >= _INT32_MAX:
            raise self.error(f"{field} has {count} elements, too many")
        self.uvarint(count + 1)

    def int32_array(self, values: tuple[int, ...], field: str) -> None:
        self.count(len(values), field)
        for value in values:
            self.fixed(INT32, value, field)

    def tagged(self, fields: list[tuple[int, bytes]]) -> None:
        """A tagged-field section of (tag, data) in ascending tag order."""
        self.uvarint(len(fields))
        for tag, data in sorted(fields):
            self.uvarint(tag)
            self.uvarint(len(data))
            self.out += data

    def no_tags(self) -> None:
        self.out.append(0)


def read_tags(reader: SchemaReader, known: Callable[[SchemaReader], None] | None = None) -> None:
    """A tagged-field section: tag 0 to ``known`` (when given), which must read exactly its
    bytes; other tags skipped, as Kafka's generated readers skip unknown tags."""
    for _ in range(reader.uvarint("tagged field count")):
        tag = reader.uvarint("tag")
        raw = reader.take(reader.uvarint("tagged field size"), "tagged field")
        if tag == TAG_0 and known is not None:
            field_reader = type(reader)(raw, f"{reader.what} tag {tag}")
            known(field_reader)
            field_reader.finish()


def read_int32_array(reader: SchemaReader, field: str) -> tuple[int, ...]:
    # No preallocation from the count: a garbage count runs out of bytes, not of memory.
    return tuple(reader.int32(field) for _ in range(reader.array_count(field, True)))


def read_uuid(reader: SchemaReader, field: str) -> uuid.UUID:
    return uuid.UUID(bytes=reader.take(_UUID_SIZE, field))
