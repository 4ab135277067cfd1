"""Check a request body's declared lengths before kio's native reader sees it.

Why: kio's reader (Rust) allocates an array's storage from the count the client declares,
before reading any element; a frame that declares 2^31 elements makes it ask for
gigabytes, the allocation fails, and Rust aborts the whole process (found by fuzzing:
"memory allocation of 185747680200 bytes failed", a worker killed by 20 random bytes).
An abort cannot be caught, so every count and length is checked here first, walking the
same schema kio will read (the kio entity's fields and their ``kafka_type``), and a body
that declares more than it holds is a ProtocolViolation: the connection is closed, the
worker lives.

The walk reads only lengths and skips values. Encodings (Kafka's protocol guide)::

    non-flexible  string: int16 length (-1 null)   bytes/records: int32 length (-1 null)
                  array:  int32 count (-1 null)
    flexible      string, bytes, records: uvarint length+1 (0 null)
                  array:  uvarint count+1 (0 null)
                  each entity ends with tagged fields: uvarint count, then per field
                  uvarint tag, uvarint size, <size> bytes

Every element takes at least one byte, so a count larger than the bytes left is a lie.
Tagged fields are skipped by their size (the only tagged request fields of the APIs we
serve, Fetch's cluster_id and replica_state, hold no arrays).
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from typing import Any

from broker.protocol.errors import ProtocolViolation
from broker.protocol.framing import read_uvarint

FIXED_SIZES = {"bool": 1, "int8": 1, "int16": 2, "int32": 4, "timedelta_i32": 4, "int64": 8, "timedelta_i64": 8,
               "float64": 8, "uuid": 16, "uint16": 2, "uint32": 4, "uint64": 8}
VARIABLE = frozenset({"string", "bytes", "records"})

# A step: (is_array, kind) with kind a kafka_type string, a nested entity class, or an
# int: the total size of a run of fixed-size fields, skipped at once.
Step = tuple[bool, Any]


def check_request(cls: Any, buf: bytes | memoryview, offset: int) -> None:
    """Raise ProtocolViolation if the body of ``cls`` at ``offset`` declares more than
    ``buf`` holds (or ends early); return quietly otherwise."""
    try:
        _entity(cls, buf, offset, len(buf))
    except _Short as exc:
        raise ProtocolViolation(f"cannot decode {cls.__name__}: {exc}") from None


class _Short(Exception):
    pass


@functools.cache
def _plan(cls: Any) -> tuple[bool, tuple[Step, ...]]:
    hints = typing.get_type_hints(cls)
    steps: list[Step] = []
    for field in dataclasses.fields(cls):
        if not field.init or "tag" in field.metadata:
            continue
        hint = hints[field.name]
        is_array, inner = _unwrap(hint)
        if dataclasses.is_dataclass(inner) and not is_array and _nullable(hint):
            steps.append((False, _NullableStruct(inner)))
        elif dataclasses.is_dataclass(inner):
            steps.append((is_array, inner))
        else:
            kind = field.metadata["kafka_type"]
            if kind not in FIXED_SIZES and kind not in VARIABLE:
                raise TypeError(f"{cls.__name__}.{field.name}: unknown kafka_type {kind!r}")
            if not is_array and kind in FIXED_SIZES and steps and steps[-1][0] is False and isinstance(steps[-1][1], int):
                steps[-1] = (False, steps[-1][1] + FIXED_SIZES[kind])  # runs of fixed fields: one skip
            elif not is_array and kind in FIXED_SIZES:
                steps.append((False, FIXED_SIZES[kind]))
            else:
                steps.append((is_array, kind))
    return bool(cls.__flexible__), tuple(steps)


@dataclasses.dataclass(frozen=True)
class _NullableStruct:
    """A struct field that may be null: an int8 marker (-1 null, 1 present) before it."""

    entity: Any


def _nullable(hint: Any) -> bool:
    return typing.get_origin(hint) in (typing.Union, types.UnionType) and type(None) in typing.get_args(hint)


def _unwrap(hint: Any) -> tuple[bool, Any]:
    """(is an array, element type) of a field's type hint, Optional removed."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        real = [a for a in typing.get_args(hint) if a is not type(None)]
        return _unwrap(real[0])
    if origin is tuple:
        (inner, _ellipsis) = typing.get_args(hint)
        return True, _unwrap(inner)[1]
    return False, hint


def _signed(buf: bytes | memoryview, position: int, end: int, size: int) -> tuple[int, int]:
    if position + size > end:
        raise _Short("a length runs past the end")
    return int.from_bytes(buf[position:position + size], "big", signed=True), position + size


def _count(buf: bytes | memoryview, position: int, end: int, flexible: bool, size: int) -> tuple[int, int]:
    """A declared array count or byte length (-1: null), checked against the bytes left."""
    if flexible:
        raw, position = read_uvarint(buf, position)
        count = raw - 1
    else:
        count, position = _signed(buf, position, end, size)
        if count < -1:
            raise _Short(f"negative length {count}")
    if count > end - position:
        raise _Short(f"declares {count} but {end - position} bytes are left")
    return count, position


def _value(kind: str, buf: bytes | memoryview, position: int, end: int, flexible: bool) -> int:
    fixed = FIXED_SIZES.get(kind)
    if fixed is not None:
        position += fixed
        if position > end:
            raise _Short(f"{kind} runs past the end")
        return position
    length, position = _count(buf, position, end, flexible, 2 if kind == "string" else 4)
    return position + max(0, length)


def _entity(cls: Any, buf: bytes | memoryview, position: int, end: int) -> int:
    flexible, steps = _plan(cls)
    for is_array, kind in steps:
        if kind.__class__ is int:  # a run of fixed-size fields
            position += kind
            if position > end:
                raise _Short("the body ends early")
            continue
        if is_array:
            count, position = _count(buf, position, end, flexible, 4)
            for _ in range(max(0, count)):
                position = _entity(kind, buf, position, end) if isinstance(kind, type) else \
                    _value(kind, buf, position, end, flexible)
        elif isinstance(kind, type):
            position = _entity(kind, buf, position, end)
        elif isinstance(kind, _NullableStruct):
            marker, position = _signed(buf, position, end, 1)
            if marker >= 0:
                position = _entity(kind.entity, buf, position, end)
        else:
            position = _value(kind, buf, position, end, flexible)
    if flexible:
        tags, position = read_uvarint(buf, position)
        if tags > end - position:
            raise _Short(f"declares {tags} tagged fields but {end - position} bytes are left")
        for _ in range(tags):
            _tag, position = read_uvarint(buf, position)
            size, position = read_uvarint(buf, position)
            position += size
            if position > end:
                raise _Short("a tagged field runs past the end")
    return position
