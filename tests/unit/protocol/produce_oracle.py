"""The Produce parity oracle: a Produce answer as kio builds and encodes it.

test_fast_parity.py holds broker/protocol/fast.py's ``encode_produce_response`` to these
bytes, for every version. It is how the handler built the answer before the fast encoder:
build() of kio's response entity, then kio's serialization.
"""

from __future__ import annotations

import datetime

from broker.partitions.partition_ops import AppendResult
from broker.protocol import codec
from broker.protocol.build import build


def kio_answer(version: int, topics: list[tuple[str, list[tuple[int, AppendResult]]]]) -> bytes:
    """The body of a Produce answer of ``version`` for ``topics``, encoded by kio."""
    def when(ms: int) -> datetime.datetime | None:
        return None if ms < 0 else datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.timezone.utc)

    return codec.encode_body(build(codec.response_class(0, version), {
        "responses": [{"name": name, "partition_responses": [
            {"index": index, "error_code": r.error_code, "base_offset": r.base_offset,
             "log_append_time": when(r.log_append_time), "log_start_offset": r.log_start_offset,
             "record_errors": (), "error_message": r.error_message} for index, r in parts]}
            for name, parts in topics],
        "throttle_time": 0,
    }))
