"""Consumer throughput, after Kafka's kafka-consumer-perf-test.

    .venv/bin/python -m loadtest.consumer_perf --bootstrap 127.0.0.1:9092 --topic perf \\
        --num-records 1000000

One confluent_kafka.Consumer reads --num-records records and prints records/s, MiB/s
(1 MiB = 2**20 bytes, what Kafka's tool calls MB; keys and values are counted) and the
time to the first record. By default it assign()s every partition of the topic at the
log start, so no group coordinator is involved (groups are not implemented by Castle
yet); --group G subscribes through group G instead, and the time to the first record
then includes the join and rebalance.

Two rates are given, as Kafka's tool does: over the whole run (from assign/subscribe to
the last record) and over the fetch phase only (from the first record to the last).
Records are taken in batches of up to 1,000 (consume()), so "first record" is when the
first batch came back, within 1 ms of the record's arrival.

Client settings that differ from librdkafka's defaults, and why, are in consumer_config:
fetch.queue.backoff.ms is 10 ms (the default 1 s would idle a fast consumer).

--rewind: a broker that retains less than --num-records (librdkafka's mock keeps 5 MiB
per partition) would end the run early. With --rewind, a partition that reaches
its end is sought back to its log start and read again, until the count is reached.
The result says how many rewinds happened, since re-read records may come from warm
caches. --rewind also lowers fetch.wait.max.ms to 1 ms (see consumer_config) so a
rewind costs milliseconds, not a 500 ms long poll; it changes nothing while data is
there to fetch. Without --rewind, the run stops once no record arrived for --timeout-s.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

from loadtest.common import (
    MIB,
    add_broker_cpu_args,
    broker_cpu_from_args,
    client_cpu_seconds,
    format_broker_cpu,
    info,
    parse_client_config,
    print_json,
    topic_partitions,
)

BATCH = 1000  # records per consume() call: amortises the Python call overhead
# consume() returns when it has BATCH records OR when this timeout expires, whichever
# is first, so a partial batch (the end of the log, the last records before a rewind)
# waits the full timeout. Keep it short; an idle loop at 1 kHz costs next to nothing.
POLL_TIMEOUT_S = 0.001
REWIND_FETCH_WAIT_MS = 1
FETCH_QUEUE_BACKOFF_MS = 10


@dataclass
class ConsumeStats:
    records: int = 0
    bytes: int = 0
    rewinds: int = 0
    first_record_at: float | None = None
    last_record_at: float | None = None
    # Partitions that yielded a record since their last rewind: only those are
    # rewound, so an empty partition does not spin in seek-EOF-seek.
    fed: set[int | None] = field(default_factory=set)


def consumer_config(args: argparse.Namespace) -> dict[str, Any]:
    config: dict[str, Any] = {
        "bootstrap.servers": args.bootstrap,
        # confluent_kafka requires a group.id even when we only assign(); with no
        # commits and no subscribe() the group is never joined.
        "group.id": args.group or "loadtest-consumer-perf",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "enable.partition.eof": True,
        # Once its local queue holds queued.min.messages (100,000) records, librdkafka
        # stops fetching for fetch.queue.backoff.ms, 1,000 ms by default, and does not
        # resume early when the application drains the queue. A consumer that drains
        # 100,000 records in ~0.1 s would then idle ~0.9 s of every second.
        "fetch.queue.backoff.ms": FETCH_QUEUE_BACKOFF_MS,
    }
    if args.rewind:
        # At the end of the log the fetcher long-polls for up to fetch.wait.max.ms
        # (500 ms by default), and the seek back cannot start a new fetch before that
        # poll returns: ~1 s lost per rewind, which would swamp the measurement. While
        # there is data to return the broker answers at once, so this changes nothing
        # before the end of the log.
        config["fetch.wait.max.ms"] = REWIND_FETCH_WAIT_MS
    config.update(parse_client_config(args.client_config))
    return config


def start_reading(consumer: Consumer, args: argparse.Namespace, partitions: list[int]) -> None:
    if args.group:
        consumer.subscribe([args.topic])
    else:
        consumer.assign([TopicPartition(args.topic, p, OFFSET_BEGINNING) for p in partitions])


def handle_error(consumer: Consumer, msg: Any, args: argparse.Namespace, stats: ConsumeStats) -> None:
    err: KafkaError = msg.error()
    if err.code() != KafkaError._PARTITION_EOF:
        raise SystemExit(f"consume error: {err}")
    if args.rewind and msg.partition() in stats.fed:
        consumer.seek(TopicPartition(msg.topic(), msg.partition(), OFFSET_BEGINNING))
        stats.fed.discard(msg.partition())
        stats.rewinds += 1


def consume_all(consumer: Consumer, args: argparse.Namespace, stats: ConsumeStats) -> None:
    """Reads until --num-records records or --timeout-s without any record."""
    target, consume, fed = args.num_records, consumer.consume, stats.fed
    last_progress = time.perf_counter()
    while stats.records < target:
        batch = consume(num_messages=min(BATCH, target - stats.records), timeout=POLL_TIMEOUT_S)
        now = time.perf_counter()
        got = 0
        for msg in batch:
            if msg.error() is not None:
                handle_error(consumer, msg, args, stats)
                continue
            got += 1
            stats.bytes += len(msg.value() or b"") + len(msg.key() or b"")
            fed.add(msg.partition())
        if got:
            if stats.first_record_at is None:
                stats.first_record_at = now
            stats.records += got
            stats.last_record_at = last_progress = now
        elif now - last_progress > args.timeout_s:
            info(f"WARNING: no record for {args.timeout_s} s; stopping at {stats.records} of {target}")
            return


def summarize(args: argparse.Namespace, stats: ConsumeStats, started: float, partitions: int) -> dict[str, Any]:
    end = stats.last_record_at or time.perf_counter()
    total_s = end - started
    first = stats.first_record_at
    fetch_s = end - first if first is not None else 0.0

    def rate(per: float, seconds: float) -> float:
        return round(per / seconds, 3) if seconds > 0 else 0.0

    return {
        "tool": "consumer_perf",
        "bootstrap": args.bootstrap,
        "topic": args.topic,
        "partitions": partitions,
        "group": args.group,
        "records_wanted": args.num_records,
        "records": stats.records,
        "bytes": stats.bytes,
        "rewinds": stats.rewinds,
        "elapsed_s": round(total_s, 3),
        "first_record_ms": round((first - started) * 1e3, 3) if first is not None else None,
        "records_per_s": rate(stats.records, total_s),
        "mib_per_s": rate(stats.bytes / MIB, total_s),
        "fetch_records_per_s": rate(stats.records, fetch_s),
        "fetch_mib_per_s": rate(stats.bytes / MIB, fetch_s),
    }


def format_text(r: dict[str, Any]) -> str:
    first = f"{r['first_record_ms']:.1f} ms" if r["first_record_ms"] is not None else "never"
    lines = [
        f"{r['records']} records ({r['bytes'] / MIB:.2f} MiB) consumed in {r['elapsed_s']:.2f} s: "
        f"{r['records_per_s']:.1f} records/sec ({r['mib_per_s']:.2f} MiB/sec)",
        f"first record after {first}; from then on {r['fetch_records_per_s']:.1f} records/sec "
        f"({r['fetch_mib_per_s']:.2f} MiB/sec)",
        f"{r['partitions']} partition(s), {'group ' + r['group'] if r['group'] else 'assigned, no group'}, "
        f"{r['rewinds']} rewind(s), client CPU {r['client_cpu_s']:.2f} s",
    ]
    if "broker_cpu_s" in r:
        lines.append(format_broker_cpu(r))
    return "\n".join(lines)


def run(args: argparse.Namespace) -> dict[str, Any]:
    consumer = Consumer(consumer_config(args))
    partitions = topic_partitions(consumer, args.topic)  # connects before the clock starts
    broker_cpu = broker_cpu_from_args(args)
    stats = ConsumeStats()
    cpu0 = client_cpu_seconds()
    broker_cpu.start()
    started = time.perf_counter()
    start_reading(consumer, args, partitions)
    consume_all(consumer, args, stats)
    broker_cpu.stop()
    result = summarize(args, stats, started, len(partitions))
    result["client_cpu_s"] = round(client_cpu_seconds() - cpu0, 3)
    result.update(broker_cpu.as_dict(stats.records))
    consumer.close()
    return result


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bootstrap", required=True, help="HOST:PORT of the broker")
    p.add_argument("--topic", required=True)
    p.add_argument("--num-records", type=int, required=True)
    p.add_argument("--group", help="consume through this consumer group (subscribe) instead of assign()")
    p.add_argument("--rewind", action="store_true", help="at a partition's end, seek back to its start and go on")
    p.add_argument("--timeout-s", type=float, default=10.0, help="give up after this long without a record")
    p.add_argument("--client-config", action="append", default=[], metavar="KEY=VALUE", help="extra librdkafka setting")
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
    return 0 if result["records"] >= args.num_records else 1


if __name__ == "__main__":
    sys.exit(main())
