"""Declared lengths are checked before kio's native reader allocates for them.

kio's reader aborts the process (Rust OOM) when a request declares an array of billions
of entries; an abort cannot be caught, so these tests run the decoder in a child process
where a crash shows as its exit status, and check that absurd lengths are refused as
ProtocolViolation while real requests still decode.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from broker import apis, dispatch
from broker.protocol.build import build
from broker.protocol.codec import decode_request, encode_body, request_class
from broker.protocol.errors import ProtocolViolation
from broker.protocol.guard import check_request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

# Bodies that made kio abort with "memory allocation of … bytes failed" (found by fuzzing).
ABORTING_BODIES = [
    (10, 5, "e5faaab6bf5660447acc47be9664549cb8"),
    (0, 10, "567620" "7b14de8ad8e8d07aeaffa0fd4a93544bdec12fdc9fab4845"),
    (15, 6, "8e819a9124ff8b7d2c28717ab80125027681719 3db3ae53b1c5e6ae2".replace(" ", "")),
]


@pytest.mark.parametrize("api_key, version, body", ABORTING_BODIES)
def test_absurd_lengths_are_protocol_violations(api_key: int, version: int, body: str) -> None:
    with pytest.raises(ProtocolViolation):
        decode_request(api_key, version, bytes.fromhex(body), 0)


FUZZ = """
import random, sys
from broker import apis, dispatch
from broker.protocol.codec import decode_request
from broker.protocol.errors import ProtocolViolation
apis.load_all()
rng = random.Random(int(sys.argv[1]))
specs = sorted(dispatch.REGISTRY.values(), key=lambda s: s.api_key)
for _ in range(int(sys.argv[2])):
    spec = rng.choice(specs)
    body = rng.randbytes(rng.randint(0, 300))
    try:
        decode_request(spec.api_key, rng.randint(spec.min_version, spec.max_version), body, 0)
    except ProtocolViolation:
        pass
print("survived")
"""


@pytest.mark.parametrize("seed", [1, 2])
def test_random_bodies_for_every_api_never_abort_the_process(seed: int) -> None:
    result = subprocess.run([sys.executable, "-c", FUZZ, str(seed), "15000"], cwd=ROOT, capture_output=True, text=True,
                            timeout=240)
    assert result.returncode == 0 and "survived" in result.stdout, result.stderr[-2000:]


def _minimal(cls: type) -> object:
    """A request of ``cls`` with every field at its simplest value (empty arrays)."""
    import dataclasses
    import typing

    values = {}
    for field in dataclasses.fields(cls):
        if not field.init:
            continue
        if field.default is not dataclasses.MISSING or field.default_factory is not dataclasses.MISSING:
            continue
        hint = typing.get_type_hints(cls)[field.name]
        origin = typing.get_origin(hint)
        kind = field.metadata.get("kafka_type")
        if type(None) in typing.get_args(hint):
            values[field.name] = None  # nullable: the null encoding
        elif origin is tuple:
            values[field.name] = ()
        elif dataclasses.is_dataclass(hint):
            values[field.name] = _minimal(hint)
        elif kind in ("string",):
            values[field.name] = "x"
        elif kind in ("bytes", "records"):
            values[field.name] = b"x"
        elif kind == "uuid":
            import uuid

            values[field.name] = uuid.UUID(int=1)
        elif kind == "bool":
            values[field.name] = True
        elif kind in ("timedelta_i32", "timedelta_i64"):
            values[field.name] = 5
        else:
            values[field.name] = 1
    return build(cls, values)


def test_every_advertised_request_version_passes_the_guard() -> None:
    apis.load_all()
    for spec in dispatch.REGISTRY.values():
        for version in range(spec.min_version, spec.max_version + 1):
            cls = request_class(spec.api_key, version)
            if cls is None:  # a version Kafka 4.0 dropped: only a hand-written decoder reads it
                assert spec.decode is not None, (spec.name, version)
                continue
            body = encode_body(_minimal(cls))
            check_request(cls, body, 0)
            decode_request(spec.api_key, version, body, 0)


@pytest.mark.parametrize("cursor", [None, {"topic_name": "t", "partition_index": 3}])
def test_a_nullable_struct_is_read_after_its_marker(cursor: dict[str, object] | None) -> None:
    """DescribeTopicPartitions' Cursor: an int8 (-1 null, 1 present) before the struct."""
    cls = request_class(75, 0)
    body = encode_body(build(cls, {"topics": [{"name": "t"}], "response_partition_limit": 5, "cursor": cursor}))
    check_request(cls, body, 0)
    assert decode_request(75, 0, body, 0).cursor == (None if cursor is None else build(type(
        decode_request(75, 0, body, 0).cursor), cursor))
    with pytest.raises(ProtocolViolation):  # the struct cut short
        check_request(cls, body[:-3], 0)
