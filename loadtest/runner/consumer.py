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

With read_to_end (a read of a backlog), it also tells when it has reached the end of every
partition it holds: {"event": "caught_up", "t", "consumed", "bytes", "t_first", "t_last"}
(wall times of its first and latest record), once per assignment.
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
        "enable.partition.eof": bool(cfg.get("read_to_end")),
        # Once its local queue holds queued.min.messages (100,000) records, librdkafka
        # stops fetching for fetch.queue.backoff.ms (1,000 ms by default) and does not
        # resume early when the application drains the queue: a fast reader would be
        # held to ~100,000 records a second by that pause, whatever the broker.
        "fetch.queue.backoff.ms": 10,
    }
    config.update(cfg.get("consumer_config", {}))
    return config


def run(cfg: dict[str, Any]) -> None:
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda _s, _f: stop.set())
    signal.signal(signal.SIGINT, lambda _s, _f: stop.set())
    consumer = Consumer(consumer_config(cfg))
    held: set[tuple[str | None, int | None]] = set()  # the current assignment
    at_end: set[tuple[str | None, int | None]] = set()  # partitions of it read to their end
    told = False  # caught_up sent for this assignment

    def on_assign(_consumer: Any, partitions: list[Any]) -> None:
        nonlocal told
        held.clear()
        held.update((p.topic, p.partition) for p in partitions)
        at_end.clear()
        told = False
        emit(event="assigned", t=time.time(), partitions=len(partitions))

    consumer.subscribe(cfg["topics"], on_assign=on_assign)
    interval = float(cfg.get("interval_s", 1.0))
    consumed = nbytes = errors = 0
    t_first = t_last = None
    first_error: str | None = None
    window = new_histogram()
    next_report = time.monotonic() + interval

    def report(event: str = "interval", **extra: Any) -> None:
        """Emit the counters and this interval's latencies; the next interval starts empty."""
        nonlocal window
        emit(event=event, t=time.time(), consumed=consumed, bytes=nbytes, errors=errors, hist=encode(window), **extra)
        window = new_histogram()

    emit(event="started", t=time.time())
    while not stop.is_set():
        # Take what is already fetched; wait (up to 100 ms) only when there is nothing.
        # consume(BATCH, 0.1) waited for BATCH records or the whole 100 ms, so at
        # 10,000 records/s each record aged ~50 ms in librdkafka's queue before it was
        # timed: that was the tool's batching, not the broker's latency.
        messages = consumer.consume(BATCH, 0)
        if not messages:
            first = consumer.poll(0.1)
            messages = [first] if first is not None else []
        if messages:
            now_us = time.time_ns() // 1000
            good = [m for m in messages if m.error() is None]
            if len(good) != len(messages):
                for m in messages:
                    err = m.error()
                    if err is None:
                        continue
                    if err.code() == KafkaError._PARTITION_EOF:
                        at_end.add((m.topic(), m.partition()))
                    else:
                        errors += 1
                        first_error = first_error or str(err)
            if good:
                t_last = now_us / 1e6
                t_first = t_first or t_last
            consumed += len(good)
            nbytes += sum(map(len, good))
            stride = max(1, len(good) // SAMPLES_PER_BATCH)
            for m in good[::stride]:
                record_us(window, now_us - int.from_bytes((m.value() or b"")[:8], "big"), stride)
        if held and not told and at_end >= held:
            told = True
            emit(event="caught_up", t=time.time(), consumed=consumed, bytes=nbytes, t_first=t_first, t_last=t_last)
        if time.monotonic() >= next_report:
            report()
            next_report += interval
    report()
    consumer.close()
    report(event="done", first_error=first_error)


def main() -> None:
    run(json.loads(sys.argv[1]))


if __name__ == "__main__":
    main()
