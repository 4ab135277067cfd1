"""A producer process of a workload run (started by loadtest.runner.run; not a user tool).

    python -m loadtest.runner.producer '<JSON config>'

Sends records of record_size bytes to the workload's topics (round robin) with the
workload's keys, at its share of the target rate or as fast as it can, until SIGTERM or
until it has had max_bytes acknowledged (a catch-up backlog). The first 8 bytes of every
value carry the send time (µs since the epoch, big-endian) so consumers can measure
end-to-end latency; the rest is random capital letters (compressible about as much as
text, as in Kafka's perf tool).

Every interval_s it prints a JSON line: {"event": "interval", "t": wall time, "sent",
"acked", "acked_bytes", "errors", "hist": publish latency histogram of the interval
(produce() to acknowledgement, librdkafka's Message.latency(), µs, HdrHistogram encoding)}.
At the end: {"event": "done", ...totals, "first_error"}.
"""

from __future__ import annotations

import json
import random
import signal
import sys
import threading
import time
from typing import Any

from confluent_kafka import KafkaError, Message, Producer

from loadtest.children import emit
from loadtest.runner.histogram import encode, new_histogram, record_us

FLUSH_TIMEOUT_S = 30.0


def producer_config(cfg: dict[str, Any], on_delivery: Any) -> dict[str, Any]:
    config: dict[str, Any] = {
        "bootstrap.servers": cfg["bootstrap"],
        "acks": cfg["acks"],
        "compression.type": cfg["compression"],
        "linger.ms": cfg["linger_ms"],
        "batch.size": cfg["batch_size"],
        "on_delivery": on_delivery,
        # A run must not stall on a queue librdkafka caps at 100,000 messages by default
        # when records are small and linger is long.
        "queue.buffering.max.messages": 1_000_000,
    }
    config.update(cfg.get("producer_config", {}))
    return config


class Keys:
    """Record keys by the workload's key distribution."""

    def __init__(self, distribution: str, count: int, index: int) -> None:
        self.distribution = distribution
        self.keys = [f"key-{i}".encode() for i in range(count)] if distribution != "none" else []
        self.next = index  # producers start at different keys
        self.random = random.Random(index)

    def key(self) -> bytes | None:
        if self.distribution == "none":
            return None
        if self.distribution == "random":
            return self.keys[self.random.randrange(len(self.keys))]
        self.next = (self.next + 1) % len(self.keys)
        return self.keys[self.next]


class Counters:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.sent = self.acked = self.acked_bytes = self.errors = 0
        self.first_error: str | None = None
        self.window = new_histogram()

    def on_delivery(self, err: KafkaError | None, msg: Message) -> None:
        # Runs inside poll()/flush() on this thread; the lock only guards against the
        # reporting thread swapping the window at the same moment.
        if err is not None:
            with self.lock:
                self.errors += 1
                self.first_error = self.first_error or str(err)
            return
        with self.lock:
            self.acked += 1
            self.acked_bytes += len(msg)
            record_us(self.window, (msg.latency() or 0.0) * 1e6)

    def report(self, event: str = "interval", **extra: Any) -> None:
        with self.lock:
            window, self.window = self.window, new_histogram()
            fields = {"sent": self.sent, "acked": self.acked, "acked_bytes": self.acked_bytes, "errors": self.errors}
        emit(event=event, t=time.time(), hist=encode(window), **fields, **extra)


def run(cfg: dict[str, Any]) -> None:
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda _s, _f: stop.set())
    signal.signal(signal.SIGINT, lambda _s, _f: stop.set())
    counters = Counters()
    producer = Producer(producer_config(cfg, counters.on_delivery))
    topics: list[str] = cfg["topics"]
    keys = Keys(cfg["key_distribution"], cfg["key_count"], cfg["index"])
    size = cfg["record_size"]
    body = bytes(random.Random(cfg["index"]).choices(range(65, 91), k=size - 8))
    rate = float(cfg["rate"])  # this process's records/s; 0 = unthrottled
    max_bytes = int(cfg.get("max_bytes") or 0)
    interval = float(cfg.get("interval_s", 1.0))

    def reporter() -> None:
        while not stop.wait(interval):
            counters.report()

    threading.Thread(target=reporter, daemon=True).start()
    emit(event="started", t=time.time(), pid_topics=len(topics))
    start = time.monotonic()
    sent = 0
    produce, poll, pack = producer.produce, producer.poll, int.to_bytes
    while not stop.is_set():
        if max_bytes and sent * size >= max_bytes:
            break
        if rate:
            due = int((time.monotonic() - start) * rate) - sent
            if due <= 0:
                poll(0.0005)  # serves delivery reports while it waits for the next slot
                continue
            burst = min(due, 1000)
        else:
            burst = 1000
        for _ in range(burst):
            value = pack(time.time_ns() // 1000, 8, "big") + body
            try:
                produce(topics[sent % len(topics)], value, keys.key())
            except BufferError:  # librdkafka's queue is full: let deliveries drain it
                poll(0.01)
                break
            sent += 1
        counters.sent = sent
        poll(0)
    remaining = producer.flush(FLUSH_TIMEOUT_S)
    counters.report(event="done", unflushed=remaining, first_error=counters.first_error)


def main() -> None:
    run(json.loads(sys.argv[1]))


if __name__ == "__main__":
    main()
