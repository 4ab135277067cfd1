"""A cursor over a request body for the hand-written decoders (fetch_request.py,
produce_request.py): the few field kinds of Kafka's schemas, in both encodings.

Classic versions prefix strings with an int16 length and arrays and bytes with an int32;
flexible versions use an unsigned varint of length+1 (0 is null) and close every struct
with a tagged-field section. Every read checks that it stays inside the data; what does
not fit raises ProtocolViolation naming ``what`` (the API), so the connection closes, as
it does for bodies kio cannot decode. ``struct.error`` and ``IndexError`` can still come
out of the decoders' own struct calls; decode_guarded turns them into ProtocolViolation.
"""

from __future__ import annotations

import struct
import uuid
from typing import Callable, TypeVar

from broker.protocol.errors import ProtocolViolation
from broker.protocol.framing import read_uvarint

I16 = struct.Struct(">h")
I32 = struct.Struct(">i")
MAX_COUNT = 1 << 20  # no real request names a million topics or partitions
Body = TypeVar("Body")


def decode_guarded(what: str, versions: range, read: Callable[[int, bytes | bytearray | memoryview, int], Body],
                   version: int, data: bytes | bytearray | memoryview, position: int) -> Body:
    """``read(version, data, position)`` for a version in ``versions``, with the struct
    and index errors of a body that ends too soon turned into ProtocolViolation."""
    if version not in versions:
        raise ProtocolViolation(f"{what} v{version} is not decoded here")
    try:
        return read(version, data, position)
    except (struct.error, IndexError) as exc:
        raise ProtocolViolation(f"{what} v{version}: truncated body ({exc})") from None


class BodyReader:
    __slots__ = ("data", "position", "flexible", "what")

    def __init__(self, data: bytes | bytearray | memoryview, position: int, flexible: bool, what: str) -> None:
        self.data = data
        self.position = position
        self.flexible = flexible
        self.what = what

    def unpack(self, layout: struct.Struct) -> tuple[int, ...]:
        values = layout.unpack_from(self.data, self.position)
        self.position += layout.size
        return values

    def _length(self, classic: struct.Struct) -> int:
        """A length prefix: compact (uvarint N+1) in flexible versions, else ``classic``;
        -1 means null."""
        if self.flexible:
            position = self.position
            low = self.data[position]  # IndexError past the end: decode_guarded's truncation
            if low < 0x80:  # one byte, the usual case: no call
                self.position = position + 1
                return low - 1
            raw, self.position = read_uvarint(self.data, position)
            return raw - 1
        return self.unpack(classic)[0]

    def _nullable_length(self, classic: struct.Struct, kind: str) -> int:
        """A string's or bytes' length, -1 for null; any other negative is refused."""
        length = self._length(classic)
        if length < -1:
            raise ProtocolViolation(f"{self.what}: bad {kind} length {length}")
        return length

    def count(self) -> int:
        """An array's length; null arrays are refused."""
        value = self._length(I32)
        if value < 0 or value > MAX_COUNT:
            raise ProtocolViolation(f"{self.what}: bad array length {value}")
        return value

    def _take(self, length: int) -> bytes:
        end = self.position + length
        if end > len(self.data):
            raise ProtocolViolation(f"{self.what}: field runs past the frame")
        value = bytes(self.data[self.position:end])
        self.position = end
        return value

    def nullable_count(self) -> int:
        """A nullable array's length, -1 for null."""
        value = self._length(I32)
        if value < -1 or value > MAX_COUNT:
            raise ProtocolViolation(f"{self.what}: bad array length {value}")
        return value

    def nullable_bytes_view(self) -> memoryview | None:
        """Nullable bytes as a view of the data, not a copy (the data must be a memoryview)."""
        length = self._nullable_length(I32, "bytes")
        if length == -1:
            return None
        start = self.position
        self.skip(length)
        data = self.data
        assert isinstance(data, memoryview), "views are taken of memoryview data only"
        return data[start:self.position]

    def nullable_string(self) -> str | None:
        length = self._nullable_length(I16, "string")
        if length == -1:
            return None
        try:
            return self._take(length).decode()
        except UnicodeDecodeError as exc:
            raise ProtocolViolation(f"{self.what}: string is not UTF-8: {exc}") from None

    def string(self) -> str:
        value = self.nullable_string()
        if value is None:
            raise ProtocolViolation(f"{self.what}: null string where a name is required")
        return value

    def nullable_bytes(self) -> bytes | None:
        length = self._nullable_length(I32, "bytes")
        return None if length == -1 else self._take(length)

    def skip_string(self, nullable: bool) -> None:
        length = self._nullable_length(I16, "string")
        if length == -1:
            if nullable:
                return
            raise ProtocolViolation(f"{self.what}: null string where a name is required")
        self.skip(length)

    def uuid(self) -> uuid.UUID:
        return uuid.UUID(bytes=self._take(16))

    def skip(self, size: int) -> None:
        if size < 0 or self.position + size > len(self.data):
            raise ProtocolViolation(f"{self.what}: field runs past the frame")
        self.position += size

    def skip_tags(self) -> None:
        """A struct's tagged fields (flexible versions; none of them is read)."""
        if self.flexible:
            self.tagged_field(-1, 0)

    def tagged_field(self, wanted: int, size: int) -> int | None:
        """Read past a struct's tagged fields; where tag ``wanted``'s value starts, or None
        if it is absent. A value shorter than ``size`` bytes is refused."""
        data = self.data
        if self.position < len(data) and data[self.position] == 0:  # no tagged fields: the usual case
            self.position += 1
            return None
        found = None
        count, self.position = read_uvarint(data, self.position)
        for _ in range(count):
            tag, self.position = read_uvarint(data, self.position)
            length, self.position = read_uvarint(data, self.position)
            if tag == wanted:
                if length < size:
                    raise ProtocolViolation(f"{self.what}: tagged field {tag} is short")
                found = self.position
            self.skip(length)
        return found

    def skip_tags_from(self, position: int) -> int:
        """skip_tags starting at ``position``, for loops that keep their position in a
        local (they test for the usual empty section, one 0 byte, themselves); returns
        the position after the section."""
        self.position = position
        self.skip_tags()
        return self.position
