"""Cost of the request-length guard (broker/protocol/guard.py) beside kio's decode.

    python -m loadtest.micro.bench_guard [--rounds N]

Prints microseconds per call for a Produce v9 request (16 KiB of records per partition,
1 and 6 partitions) and a Fetch v12 request of 6 partitions: the guard's walk, and kio's
native decode that follows it.
"""

from __future__ import annotations

import argparse
import time
from typing import Any, Callable

from broker.protocol.build import build
from broker.protocol.codec import encode_body, reader_for, request_class
from broker.protocol.guard import check_request


def _per_call(fn: Callable[[], Any], rounds: int) -> float:
    started = time.perf_counter()
    for _ in range(rounds):
        fn()
    return (time.perf_counter() - started) / rounds * 1e6


def cases() -> list[tuple[str, Any, bytes]]:
    produce = request_class(0, 9)
    fetch = request_class(1, 12)
    out = []
    for partitions in (1, 6):
        body = encode_body(build(produce, {"transactional_id": None, "acks": 1, "timeout": 1000, "topic_data": [
            {"name": "t", "partition_data": [{"index": p, "records": b"x" * 16384} for p in range(partitions)]}]}))
        out.append((f"Produce v9, {partitions} partition(s)", produce, body))
    body = encode_body(build(fetch, {
        "replica_id": -1, "max_wait": 500, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0, "session_id": 0,
        "session_epoch": -1, "rack_id": "", "forgotten_topics_data": [], "topics": [{"topic": "t", "partitions": [
            {"partition": p, "current_leader_epoch": -1, "fetch_offset": 5, "last_fetched_epoch": -1,
             "log_start_offset": -1, "partition_max_bytes": 1 << 20} for p in range(6)]}]}))
    out.append(("Fetch v12, 6 partitions", fetch, body))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20000)
    args = parser.parse_args(argv)
    for name, cls, body in cases():
        guard = _per_call(lambda: check_request(cls, body, 0), args.rounds)
        reader = reader_for(cls)
        decode = _per_call(lambda: reader(body, 0), args.rounds)
        print(f"{name:32s} guard {guard:6.2f} us   kio decode {decode:6.2f} us")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
