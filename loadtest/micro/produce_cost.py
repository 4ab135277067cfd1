"""The CPU cost of a Produce request's codec in a worker, without sockets or other processes.

    python -m loadtest.micro.produce_cost [--partitions 1] [--version 9] [--rounds 2000]

At linger.ms=0 a producer sends a Produce per record or two (fixed-rate benchmark), and a
producer of 1,000 partitions sends Produces naming hundreds of them (many-partitions), so
what a worker spends on the request and its answer, apart from the append, counts. This
tool times, with timeit on one in-memory request of one small batch per partition (best
of 5 repeats):

* ``decode``: broker/protocol/produce_request.py's decode of the body, which the
  connection does before the handler runs; ``kio_decode``: guard.check_request plus
  kio's decode of the same body, which it replaced (for comparison);
* ``encode``: broker/protocol/fast.py's ``encode_produce_response`` of the answer;
  ``kio_encode``: build() of kio's response entity plus kio's serialization, which it
  replaced.

It prints each in µs per request and per partition. The append itself is measured by
loadtest/micro/bench_storage.py.
"""

from __future__ import annotations

import datetime
from typing import Any

from broker.partitions.partition_ops import AppendResult
from broker.protocol import codec, fast, produce_request
from broker.protocol.build import build
from loadtest.micro import codec_cost
from loadtest.micro.codec_cost import best_seconds

TOPIC = "produce-cost"
BATCH = bytes(61) + bytes(100)  # the size of a one-record batch of a 100-byte value; never parsed here


def kio_produce_request(version: int, partitions: int) -> Any:
    return build(codec.request_class(0, version), {
        "transactional_id": None, "acks": 1, "timeout": 30000,
        "topic_data": [{"name": TOPIC, "partition_data": [{"index": p, "records": BATCH} for p in range(partitions)]}],
    })


def kio_answer(version: int, topics: list[tuple[str, list[tuple[int, AppendResult]]]]) -> bytes:
    """The answer as the handler built it before fast.encode_produce_response: build()
    of kio's entity, then kio's serialization (the timed "kio_encode" step; the test
    suite's parity oracle, tests/unit/protocol/produce_oracle.py, is the same code)."""
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


def measure(partitions: int, version: int, rounds: int) -> dict[str, float]:
    """Seconds per request for each step."""
    body = codec.encode_body(kio_produce_request(version, partitions))
    decoded = produce_request.decode(version, body, 0)
    assert len(decoded.topic_data[0].partition_data) == partitions
    answer = [(TOPIC, [(p, AppendResult(0, 1000 * p, -1, 0)) for p in range(partitions)])]
    assert fast.encode_produce_response(version, answer) == kio_answer(version, answer)
    return {
        "decode": best_seconds(lambda: produce_request.decode(version, body, 0), rounds),
        "kio_decode": best_seconds(lambda: codec.decode_request(0, version, body, 0), rounds),
        "encode": best_seconds(lambda: fast.encode_produce_response(version, answer), rounds),
        "kio_encode": best_seconds(lambda: kio_answer(version, answer), rounds),
    }


def main(argv: list[str] | None = None) -> int:
    return codec_cost.main(argv, __doc__ or "", measure, "Produce", 1, 9, 2000)


if __name__ == "__main__":
    raise SystemExit(main())
