"""Writing a quota's throttle time into an answer already encoded: Kafka's
AbstractResponse.maybeSetThrottleTimeMs, on bytes.

A handler answers with a kio entity, bytes it encoded (Produce, the coordinator process's
answers) or a RawResponse (Fetch). A quota is decided once the handler is done (its time is
known only then), so the field is written into the encoded body. Where it lies comes from
Kafka's schemas (kio's classes): in every response that has it, throttle_time_ms follows
only fixed-size fields (first of all but OffsetDelete's, after its error_code), except
Produce's, which follows the variable list of partition answers; Produce's is found by
reading the body (kio), only when there is something to write.

The value written is the larger of the one there and the new one: a byte-rate quota the
handler applied (Produce, Fetch) and the request quota give their maximum, as in Kafka.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import struct
from typing import Any

from broker.protocol import codec

PRODUCE, FETCH = 0, 1
_I32 = struct.Struct(">i")
# Sizes of the fixed-size kio field types that can come before throttle_time_ms.
_FIXED = {"int8": 1, "int16": 2, "int32": 4, "int64": 8, "error_code": 2, "bool": 1, "uint16": 2,
          "timedelta_i32": 4, "float64": 8, "uuid": 16}
# Versions kio has no schema for (Kafka 4.0 dropped them) that Castle still answers, with
# Kafka 3.9's layouts: Fetch v1-3 start with throttle_time_ms; ListOffsets v0-1, Metadata
# v0-2, OffsetCommit and OffsetFetch v0-2 have none. Produce v1-2 end with it.
_LEGACY = {(FETCH, 1): 0, (FETCH, 2): 0, (FETCH, 3): 0}


@functools.cache
def offset(api_key: int, version: int) -> int | None:
    """Where throttle_time_ms starts in the body of ``api_key`` v``version`` (None: it has
    none, or it follows a field of variable size: Produce's)."""
    if (api_key, version) in _LEGACY:
        return _LEGACY[api_key, version]
    try:
        cls = codec.response_class(api_key, version)
    except Exception:
        return None
    at = 0
    for field in dataclasses.fields(cls):
        if field.name == "throttle_time":
            return at
        size = _FIXED.get(field.metadata.get("kafka_type", ""))
        if size is None:
            return None
        at += size
    return None


def written(api_key: int, version: int, body: bytes, throttle_ms: int) -> bytes:
    """``body`` with throttle_time_ms at least ``throttle_ms`` (unchanged when it has no such field)."""
    at = offset(api_key, version)
    if at is not None:
        if len(body) < at + 4 or _I32.unpack_from(body, at)[0] >= throttle_ms:
            return body
        patched = bytearray(body)
        _I32.pack_into(patched, at, throttle_ms)
        return bytes(patched)
    if api_key == PRODUCE and version >= 1:
        return _produce_written(version, body, throttle_ms)
    return body


def _produce_written(version: int, body: bytes, throttle_ms: int) -> bytes:
    if version <= 2:  # no schema in kio; not flexible: the field is the body's last four bytes
        if _I32.unpack_from(body, len(body) - 4)[0] >= throttle_ms:
            return body
        return body[:-4] + _I32.pack(throttle_ms)
    cls = codec.response_class(PRODUCE, version)
    answer, _size = codec.reader_for(cls)(body, 0)
    if answer.throttle_time >= datetime.timedelta(milliseconds=throttle_ms):
        return body
    return codec.encode_body(dataclasses.replace(answer, throttle_time=datetime.timedelta(milliseconds=throttle_ms)))


def raw_written(api_key: int, version: int, chunks: list[Any], throttle_ms: int) -> None:
    """A RawResponse's chunks (Fetch) changed in place: the field is in the first buffer."""
    at = offset(api_key, version)
    first = chunks[0] if chunks else None
    if at is None or not isinstance(first, bytes) or len(first) < at + 4:
        return
    chunks[0] = written(api_key, version, first, throttle_ms)
