"""A consumer process of a workload run (started by loadtest.runner.run; not a user tool).

    python -m loadtest.runner.consumer '<JSON config>'

A member of the workload's consumer group: subscribes to its topics from the earliest
offset, commits in the background (enable.auto.commit, every second), and reads until
SIGTERM. Events (JSON lines): {"event": "assigned", "partitions": n} on every
assignment, then every interval_s {"event": "interval", "t", "consumed", "bytes",
"errors", "hist"}, where hist is the end-to-end latency of the interval: now minus the send
time the producer wrote into the first 8 bytes of the value, in µs (producer and
consumer share this machine's clock). To keep that cheap at a million records per
second, at most SAMPLES_PER_BATCH records of each batch are timed, evenly spread, each
counted for the records it stands for.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
import time
from typing import Any

from confluent_kafka import Consumer, KafkaError

from loadtest.children import emit
from loadtest.runner.histogram import encode, new_histogram, record_us

SAMPLES_PER_BATCH = 64
BATCH = 10_000


def consumer_config(cfg: dict[str, Any]) -> dict[str, Any]:
    config: dict[str, Any] = {
        "bootstrap.servers": cfg["bootstrap"],
        "group.id": cfg["group"],
        "auto.offset.reset": "earliest",
        "enable.auto.commit": True,
        "auto.commit.interval.ms": 1000,
        "enable.partition.eof": False,
    }
    config.update(cfg.get("consumer_config", {}))
    return config


def run(cfg: dict[str, Any]) -> None:
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda _s, _f: stop.set())
    signal.signal(signal.SIGINT, lambda _s, _f: stop.set())
    consumer = Consumer(consumer_config(cfg))
    consumer.subscribe(cfg["topics"], on_assign=lambda _c, parts: emit(event="assigned", t=time.time(), partitions=len(parts)))
    interval = float(cfg.get("interval_s", 1.0))
    consumed = nbytes = errors = 0
    first_error: str | None = None
    window = new_histogram()
    next_report = time.monotonic() + interval

    def report(event: str = "interval", **extra: Any) -> None:
        emit(event=event, t=time.time(), consumed=consumed, bytes=nbytes, errors=errors, hist=encode(window), **extra)

    emit(event="started", t=time.time())
    while not stop.is_set():
        messages = consumer.consume(BATCH, 0.1)
        if messages:
            now_us = time.time_ns() // 1000
            good = [m for m in messages if m.error() is None]
            if len(good) != len(messages):
                for m in messages:
                    err = m.error()
                    if err is not None and err.code() != KafkaError._PARTITION_EOF:
                        errors += 1
                        first_error = first_error or str(err)
            consumed += len(good)
            nbytes += sum(map(len, good))
            stride = max(1, len(good) // SAMPLES_PER_BATCH)
            for m in good[::stride]:
                record_us(window, now_us - int.from_bytes(m.value()[:8], "big"), stride)
        if time.monotonic() >= next_report:
            report()
            window = new_histogram()
            next_report += interval
    report()
    window = new_histogram()
    consumer.close()
    report(event="done", first_error=first_error)


def main() -> None:
    run(json.loads(sys.argv[1]))


if __name__ == "__main__":
    main()
