"""Producer throughput and latency, after Kafka's kafka-producer-perf-test.

    .venv/bin/python -m loadtest.producer_perf --bootstrap 127.0.0.1:9092 --topic perf \\
        --num-records 1000000 --record-size 100 --acks 1 --linger-ms 5 --compression none

One confluent_kafka.Producer sends --num-records records of --record-size bytes, as fast
as it can (or at --throughput records/s), and waits for every delivery report. It prints
records/s, MiB/s (1 MiB = 2**20 bytes, what Kafka's tool calls MB), and the latency of
each record: from the produce() call to the broker's acknowledgement, as librdkafka
measures it (Message.latency()), in ms: avg, p50, p95, p99, p99.9, max. The percentiles
are exact: every latency is kept and sorted at the end.

With --broker-pids / --broker-pid-tree it also reports the CPU seconds the broker
processes used during the run, and per million records.

Like Kafka's tool, every record carries the same payload of random capital letters
(compressible about as much as text) and no key; librdkafka's sticky partitioner then
fills one partition's batch at a time. Records/s counts acknowledged records only; the
clock starts after a metadata round trip, so connection set-up is not in it.
Progress (every --report-interval-s) goes to stderr; the result goes to stdout.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from array import array
from typing import Any

from confluent_kafka import KafkaError, Message, Producer

from loadtest.common import (
    MIB,
    add_broker_cpu_args,
    broker_cpu_from_args,
    client_cpu_seconds,
    ensure_topic,
    format_broker_cpu,
    info,
    parse_client_config,
    percentile,
    print_json,
    topic_partitions,
)


class DeliveryStats:
    """Filled by the delivery callback, which librdkafka runs inside poll()/flush()."""

    def __init__(self) -> None:
        self.latencies = array("d")  # seconds, one per acknowledged record
        self.acked = 0
        self.errors = 0
        self.first_error: str | None = None
        # Current reporting window (reset by take_window).
        self._window_acked = 0
        self._window_latency_sum = 0.0
        self._window_latency_max = 0.0

    def on_delivery(self, err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            self.errors += 1
            if self.first_error is None:
                self.first_error = str(err)
            return
        latency = msg.latency() or 0.0
        self.latencies.append(latency)
        self.acked += 1
        self._window_acked += 1
        self._window_latency_sum += latency
        if latency > self._window_latency_max:
            self._window_latency_max = latency

    def take_window(self) -> tuple[int, float, float]:
        """(records, avg latency s, max latency s) since the previous call."""
        n, total, peak = self._window_acked, self._window_latency_sum, self._window_latency_max
        self._window_acked, self._window_latency_sum, self._window_latency_max = 0, 0.0, 0.0
        return n, (total / n if n else 0.0), peak


class Reporter:
    """Prints a progress line every interval, like Kafka's tool does every 5 s."""

    def __init__(self, stats: DeliveryStats, record_size: int, interval_s: float) -> None:
        self._stats, self._record_size, self._interval = stats, record_size, interval_s
        self._last = time.perf_counter()

    def maybe_report(self, now: float) -> None:
        if self._interval <= 0 or now - self._last < self._interval:
            return
        n, avg, peak = self._stats.take_window()
        rate = n / (now - self._last)
        info(
            f"{n} records acked, {rate:.1f} records/sec ({rate * self._record_size / MIB:.2f} MiB/sec), "
            f"{avg * 1e3:.1f} ms avg latency, {peak * 1e3:.1f} ms max latency"
        )
        self._last = now


def make_payload(size: int, seed: int = 0) -> bytes:
    """Random capital letters, as Kafka's tool fills its payload (same compressibility)."""
    rng = random.Random(seed)
    return bytes(rng.randrange(65, 91) for _ in range(size))


def producer_config(args: argparse.Namespace, stats: DeliveryStats) -> dict[str, Any]:
    config: dict[str, Any] = {
        "bootstrap.servers": args.bootstrap,
        "acks": args.acks,
        "linger.ms": args.linger_ms,
        "compression.type": args.compression,
        "on_delivery": stats.on_delivery,
    }
    if args.batch_size is not None:
        config["batch.size"] = args.batch_size
    config.update(parse_client_config(args.client_config))
    return config


def produce_all(producer: Producer, args: argparse.Namespace, stats: DeliveryStats) -> float:
    """Sends every record and waits for all delivery reports; returns the elapsed seconds."""
    payload, topic, n = make_payload(args.record_size), args.topic, args.num_records
    produce, poll = producer.produce, producer.poll  # bound once: this loop is the hot path
    reporter = Reporter(stats, args.record_size, args.report_interval_s)
    rate = args.throughput
    start = time.perf_counter()
    for i in range(n):
        while True:
            try:
                produce(topic, payload)
                break
            except BufferError:
                # Local queue full (queue.buffering.max.*): serve delivery reports,
                # which frees room, then try the same record again.
                poll(0.001)
        poll(0)
        if i & 1023 == 0:
            now = time.perf_counter()
            reporter.maybe_report(now)
        if rate > 0:
            _throttle(poll, start, i + 1, rate)
    undelivered = producer.flush(args.flush_timeout_s)
    elapsed = time.perf_counter() - start
    if undelivered:
        info(f"WARNING: {undelivered} records still undelivered after --flush-timeout-s {args.flush_timeout_s}")
    return elapsed


def _throttle(poll: Any, start: float, sent: int, rate: float) -> None:
    """Hold back when ahead of the --throughput schedule, serving callbacks meanwhile.

    poll() returns early whenever it served a delivery report, hence the loop.
    """
    while (ahead := sent / rate - (time.perf_counter() - start)) > 0.001:
        poll(ahead)


def latency_summary_ms(latencies: array) -> dict[str, float]:
    ordered = sorted(latencies)
    if not ordered:
        return {}
    ms = 1e3
    return {
        "avg": round(sum(ordered) / len(ordered) * ms, 3),
        "p50": round(percentile(ordered, 50) * ms, 3),
        "p95": round(percentile(ordered, 95) * ms, 3),
        "p99": round(percentile(ordered, 99) * ms, 3),
        "p99_9": round(percentile(ordered, 99.9) * ms, 3),
        "max": round(ordered[-1] * ms, 3),
    }


def format_text(r: dict[str, Any]) -> str:
    lat = r["latency_ms"]
    lines = [
        f"{r['records_acked']} records sent, {r['records_per_s']:.1f} records/sec ({r['mib_per_s']:.2f} MiB/sec), "
        f"{lat.get('avg', 0):.2f} ms avg latency, {lat.get('max', 0):.2f} ms max latency, "
        f"{lat.get('p50', 0):.2f} ms 50th, {lat.get('p95', 0):.2f} ms 95th, "
        f"{lat.get('p99', 0):.2f} ms 99th, {lat.get('p99_9', 0):.2f} ms 99.9th.",
        f"elapsed {r['elapsed_s']:.2f} s, {r['partitions']} partition(s), acks={r['acks']}, "
        f"linger.ms={r['linger_ms']}, compression={r['compression']}, client CPU {r['client_cpu_s']:.2f} s",
    ]
    if r["errors"]:
        lines.append(f"ERRORS: {r['errors']} records failed; first: {r['first_error']}")
    if "broker_cpu_s" in r:
        lines.append(format_broker_cpu(r))
    return "\n".join(lines)


def run(args: argparse.Namespace) -> dict[str, Any]:
    if args.partitions:
        info(ensure_topic(args.bootstrap, args.topic, args.partitions))
    stats = DeliveryStats()
    producer = Producer(producer_config(args, stats))
    # Fetching the topic's metadata first connects to the broker (and auto-creates
    # the topic where allowed) before the clock starts.
    partitions = topic_partitions(producer, args.topic)
    broker_cpu = broker_cpu_from_args(args)
    cpu0 = client_cpu_seconds()
    broker_cpu.start()
    elapsed = produce_all(producer, args, stats)
    broker_cpu.stop()
    result: dict[str, Any] = {
        "tool": "producer_perf",
        "bootstrap": args.bootstrap,
        "topic": args.topic,
        "partitions": len(partitions),
        "records": args.num_records,
        "record_size": args.record_size,
        "acks": args.acks,
        "linger_ms": args.linger_ms,
        "compression": args.compression,
        "batch_size": args.batch_size,
        "elapsed_s": round(elapsed, 3),
        "records_acked": stats.acked,
        "records_per_s": round(stats.acked / elapsed, 1),
        "mib_per_s": round(stats.acked * args.record_size / elapsed / MIB, 3),
        "latency_ms": latency_summary_ms(stats.latencies),
        "errors": stats.errors,
        "first_error": stats.first_error,
        "client_cpu_s": round(client_cpu_seconds() - cpu0, 3),
    }
    result.update(broker_cpu.as_dict(stats.acked))
    return result


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bootstrap", required=True, help="HOST:PORT of the broker")
    p.add_argument("--topic", required=True)
    p.add_argument("--num-records", type=int, required=True)
    p.add_argument("--record-size", type=int, default=100, help="value bytes per record (default 100)")
    p.add_argument("--acks", choices=["0", "1", "all"], default="1")
    p.add_argument("--linger-ms", type=float, default=5.0)
    p.add_argument("--compression", choices=["none", "gzip", "snappy", "lz4", "zstd"], default="none")
    p.add_argument("--batch-size", type=int, help="librdkafka batch.size in bytes (default: librdkafka's)")
    p.add_argument("--throughput", type=float, default=-1, help="records/s to aim at; -1 = as fast as possible")
    p.add_argument("--partitions", type=int, help="create the topic with this many partitions if it does not exist")
    p.add_argument("--client-config", action="append", default=[], metavar="KEY=VALUE", help="extra librdkafka setting")
    p.add_argument("--report-interval-s", type=float, default=5.0, help="progress line period on stderr; 0 = none")
    p.add_argument("--flush-timeout-s", type=float, default=120.0, help="how long to wait for the last deliveries")
    p.add_argument("--json", action="store_true", help="print the result as one JSON object")
    add_broker_cpu_args(p)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    result = run(args)
    if args.json:
        print_json(result)
    else:
        print(format_text(result), flush=True)
    return 1 if result["errors"] or result["records_acked"] < args.num_records else 0


if __name__ == "__main__":
    sys.exit(main())
