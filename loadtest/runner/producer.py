"""A producer process of a workload run (started by loadtest.runner.run; not a user tool).

    python -m loadtest.runner.producer '<JSON config>'

Sends records of record_size bytes to the workload's topics (round robin) with the
workload's keys, at its share of the target rate or as fast as it can, until SIGTERM or
until it has sent max_bytes (a catch-up backlog). The first 8 bytes of every value carry
the send time (µs since the epoch, big-endian; one per burst of up to 64 records) so
consumers can measure end-to-end latency; the rest is random capital letters
(compressible about as much as text, as in Kafka's perf tool).

Every interval_s it prints a JSON line: {"event": "interval", "t": wall time, "sent",
"acked", "acked_bytes", "errors", "queue_full" and "queue_full_s" (times librdkafka's
local queue was full and seconds waited for room, so far), "hist": publish latency histogram of the interval
(produce() to acknowledgement, librdkafka's Message.latency(), µs, HdrHistogram encoding)}.
At the end: {"event": "done", ...totals, "first_error"}.

A transactional producer (cfg "transactional_id") calls init_transactions, then commits
every transaction_interval_ms from the start of each transaction, as Kafka's
ProducerPerformance does with --transaction-duration-ms: the commit blocks the producing
thread, as it would an application's. Its records count as acknowledged ("acked", and
their publish latencies) only once their transaction committed; its lines add
"transactions" (committed), "commit_s" (time spent in commit_transaction),
"aborted_transactions" and "aborted_records". A delivery error aborts the transaction.
Its publish latency stays librdkafka's produce-to-acknowledgement; the wait for the commit
shows in commit_s, and in a read_committed consumer's end-to-end latency.

Every second it also prints librdkafka's own split of the publish latency, per broker
connection, from its statistics: {"event": "client_stats", "t", "brokers": {node id:
{"queue": [...], "outbuf": [...], "rtt": [...]}}, "throttle_ms_max"}, each [p50, p99, max,
count, out of range] in µs over the last second (client_split); throttle_ms_max is the
longest throttle time a broker answered in that second (a client quota reached). queue is
librdkafka's int_latency (produce() until the record is put in a request), outbuf its
outbuf_latency (a request waiting to be written to the socket), rtt the request's round
trip (written to the socket until its answer was read: the broker's time plus both
kernels' and the client's broker thread's). What is left of a publish latency is the
application's: the acknowledgement waiting for poll() to run the delivery callback.
"""

from __future__ import annotations

import json
import queue
import random
import signal
import sys
import threading
import time
from array import array
from typing import Any

import numpy as np
from confluent_kafka import KafkaError, KafkaException, Message, Producer

from loadtest.children import emit
from loadtest.runner.histogram import encode, new_histogram, record_us

FLUSH_TIMEOUT_S = 30.0
BURST = 64
MIN_WAIT_S = 0.001
CLIENT_STATS_MS = 1000
TXN_TIMEOUT_S = 60.0  # init_transactions, commit_transaction, abort_transaction (retried within it)
RETRY_PAUSE_S = 0.05
# librdkafka's statistics names for the three parts of a publish latency it measures.
CLIENT_SPLIT = {"queue": "int_latency", "outbuf": "outbuf_latency", "rtt": "rtt"}


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
        "statistics.interval.ms": CLIENT_STATS_MS,
        "stats_cb": emit_client_stats,
    }
    if cfg.get("transactional_id"):
        config["transactional.id"] = cfg["transactional_id"]
    elif cfg.get("idempotent"):
        config["enable.idempotence"] = True
    config.update(cfg.get("producer_config", {}))
    return config


def client_split(statistics: dict[str, Any]) -> dict[str, dict[str, list[int]]]:
    """Per broker connection that carried requests in the statistics window: the three
    latencies librdkafka measures, each [p50, p99, max, count, out of range] in µs
    (bootstrap and internal connections, node id < 0, are left out). librdkafka's
    histograms have a top (500 ms for the round trip): a longer value is only counted
    as out of range, and is in none of the other four figures."""
    brokers = {}
    for broker in statistics.get("brokers", {}).values():
        rtt = broker.get("rtt", {})
        if broker.get("nodeid", -1) < 0 or not (rtt.get("cnt") or rtt.get("outofrange")):
            continue
        brokers[str(broker["nodeid"])] = {
            part: [broker[name][q] for q in ("p50", "p99", "max", "cnt", "outofrange")] for part, name in CLIENT_SPLIT.items()}
    return brokers


def brokers_section(statistics_json: str) -> dict[str, Any]:
    """{"brokers": ...} of librdkafka's statistics, decoded alone: with 1,000 partitions
    the whole document is ~800 KB a second (its "topics" part), ~9 ms of the producing
    thread to decode, while the brokers part is a small fraction of it."""
    at = statistics_json.find('"brokers":')
    if at < 0:
        return json.loads(statistics_json)
    brokers, _ = json.JSONDecoder().raw_decode(statistics_json, at + len('"brokers":'))
    return {"brokers": brokers}


def throttle_ms_max(statistics: dict[str, Any]) -> int:
    """The longest throttle_time_ms a broker answered in the statistics window (ms; 0 when
    no answer was throttled): a client quota that was reached shows here, on any broker."""
    return max((broker.get("throttle", {}).get("max", 0) for broker in statistics.get("brokers", {}).values()
                if broker.get("nodeid", -1) >= 0), default=0)


def emit_client_stats(statistics_json: str) -> None:
    """librdkafka's stats_cb (runs in the producing thread, inside poll)."""
    statistics = brokers_section(statistics_json)
    brokers = client_split(statistics)
    if brokers:
        emit(event="client_stats", t=time.time(), brokers=brokers, throttle_ms_max=throttle_ms_max(statistics))


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
    """Delivery reports, kept as cheap as possible: the callback runs once per record in
    the producing thread (inside poll), so it only appends the latency to an array.

    The array changes hands only in the producing thread (``hand_over``, called between
    polls when the reporter asks for it): the reporting thread turns it into a histogram
    with numpy, and an array being read by numpy cannot grow. When the reporter swapped
    it out itself, a callback that had already looked the array up could append to it
    while numpy held its buffer; the BufferError, raised inside poll(), reached the
    producer as confluent-kafka's SystemError and killed the run (many-partitions)."""

    def __init__(self, record_size: int) -> None:
        self.record_size = record_size
        self.sent = self.acked = self.errors = 0
        # librdkafka's local queue was full (BufferError): how often and how long the
        # producing thread waited for deliveries to make room. A broker whose answers
        # come late fills the queue and so slows the producer while it sits idle.
        self.queue_full = 0
        self.queue_full_s = 0.0
        self.first_error: str | None = None
        self.latencies = array("d")  # seconds, since the last hand-over
        # Transactional: the delivered records of the open transaction, counted (moved to
        # latencies) when it commits.
        self.transactional = False
        self.pending = array("d")
        self.transactions = self.aborted_transactions = self.aborted_records = 0
        self.commit_s = 0.0
        self.wanted = threading.Event()  # the reporter asks for this interval's latencies
        self.handed: queue.SimpleQueue[array] = queue.SimpleQueue()

    def on_delivery(self, err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            self.errors += 1
            self.first_error = self.first_error or str(err)
            return
        (self.pending if self.transactional else self.latencies).append(msg.latency() or 0.0)

    def committed(self, seconds: float) -> None:
        """Producing thread only: the open transaction committed."""
        self.latencies.extend(self.pending)
        self.pending = array("d")
        self.transactions += 1
        self.commit_s += seconds

    def aborted(self, seconds: float) -> None:
        """Producing thread only: the open transaction was aborted; its records never count."""
        self.aborted_records += len(self.pending)
        self.pending = array("d")
        self.aborted_transactions += 1
        self.commit_s += seconds

    def hand_over(self) -> None:
        """Producing thread only: pass the latencies so far to the reporter."""
        self.wanted.clear()
        taken, self.latencies = self.latencies, array("d")
        self.handed.put(taken)

    def report_interval(self, wait_s: float) -> None:
        """Reporting thread: ask for the latencies and emit them; nothing if the producing
        thread does not answer within ``wait_s`` (they stay for the next interval)."""
        self.wanted.set()
        try:
            taken = self.handed.get(timeout=wait_s)
        except queue.Empty:
            return
        self.emit(taken, "interval")

    def emit(self, taken: array, event: str, **extra: Any) -> None:
        self.acked += len(taken)
        fields = {"sent": self.sent, "acked": self.acked, "acked_bytes": self.acked * self.record_size,
                  "errors": self.errors, "queue_full": self.queue_full, "queue_full_s": self.queue_full_s}
        if self.transactional:
            fields.update(transactions=self.transactions, commit_s=self.commit_s,
                          aborted_transactions=self.aborted_transactions, aborted_records=self.aborted_records)
        emit(event=event, t=time.time(), hist=encode(histogram_of_seconds(taken)), **fields, **extra)


def histogram_of_seconds(latencies: array) -> Any:
    """An HdrHistogram of latencies in seconds, recorded in µs: values are rounded to the
    histogram's own 3 significant digits and recorded once per distinct value with its
    count (a million pure-Python record_value calls would cost a core-second)."""
    histogram = new_histogram()
    if not latencies:
        return histogram
    us = np.maximum(np.frombuffer(latencies, dtype=np.float64) * 1e6, 1.0)
    scale = 10.0 ** np.maximum(np.floor(np.log10(us)) - 2, 0)
    values, counts = np.unique(np.round(us / scale) * scale, return_counts=True)
    for value, count in zip(values.tolist(), counts.tolist()):
        record_us(histogram, value, count)
    return histogram


class Transactions:
    """A transactional producer's transactions: one open at a time, committed once it is
    interval_s old (in the producing thread, which it blocks)."""

    def __init__(self, producer: Producer, counters: Counters, interval_s: float) -> None:
        self.producer = producer
        self.counters = counters
        self.interval_s = interval_s
        self.began = 0.0
        counters.transactional = True

    def start(self) -> None:
        self.producer.init_transactions(TXN_TIMEOUT_S)
        self.begin()

    def begin(self) -> None:
        self.producer.begin_transaction()
        self.began = time.monotonic()

    def due_in(self) -> float:
        """Seconds until the open transaction is to commit (<= 0: now)."""
        return self.began + self.interval_s - time.monotonic()

    def end(self) -> None:
        """Commit the open transaction (it flushes its records first); abort it when the
        commit says it must (a record failed). A retriable failure is retried until
        TXN_TIMEOUT_S; any other failure ends the process, as it would end the run."""
        started = time.monotonic()
        deadline = started + TXN_TIMEOUT_S
        while True:
            try:
                self.producer.commit_transaction(max(1.0, deadline - time.monotonic()))
            except KafkaException as exc:
                error: KafkaError = exc.args[0]
                if error.txn_requires_abort():
                    self.counters.first_error = self.counters.first_error or str(error)
                    self.producer.abort_transaction(TXN_TIMEOUT_S)
                    self.counters.aborted(time.monotonic() - started)
                    return
                if error.retriable() and time.monotonic() < deadline:
                    time.sleep(RETRY_PAUSE_S)  # a failure that came back at once must not spin
                    continue
                raise
            self.counters.committed(time.monotonic() - started)
            return


def run(cfg: dict[str, Any]) -> None:
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda _s, _f: stop.set())
    signal.signal(signal.SIGINT, lambda _s, _f: stop.set())
    size = cfg["record_size"]
    counters = Counters(size)
    producer = Producer(producer_config(cfg, counters.on_delivery))
    txn = (Transactions(producer, counters, float(cfg.get("transaction_interval_ms", 100)) / 1000)
           if cfg.get("transactional_id") else None)
    topics: list[str] = cfg["topics"]
    keys = Keys(cfg["key_distribution"], cfg["key_count"], cfg["index"])
    body = bytes(random.Random(cfg["index"]).choices(range(65, 91), k=size - 8))
    rate = float(cfg["rate"])  # this process's records/s; 0 = unthrottled
    max_records = int(cfg.get("max_bytes") or 0) // size
    interval = float(cfg.get("interval_s", 1.0))

    def reporter() -> None:
        while not stop.wait(interval):
            counters.report_interval(wait_s=interval)

    reporting = threading.Thread(target=reporter, daemon=True)
    reporting.start()
    # Connect and learn the partitions first, so the rate schedule does not start with a
    # debt of the connection time that it would then pay off in a burst.
    for topic in topics:
        producer.list_topics(topic, timeout=30)
    if txn is not None:
        txn.start()
    emit(event="started", t=time.time(), topics=len(topics))
    start = time.monotonic()
    sent = 0
    produce, poll = producer.produce, producer.poll
    keyed = keys.distribution != "none"
    one_topic = topics[0] if len(topics) == 1 else None
    wanted = counters.wanted
    while not stop.is_set():
        if wanted.is_set():
            counters.hand_over()
        if max_records and sent >= max_records:
            break
        if txn is not None and txn.due_in() <= 0:
            txn.end()
            txn.begin()
        if rate:
            elapsed = time.monotonic() - start
            due = int(elapsed * rate) - sent
            if due <= 0:
                # Serve delivery reports until the next record is due (or the next
                # commit). At least 1 ms: librdkafka's timeout is whole milliseconds, and
                # a shorter one (it was 0.5 ms, truncated to 0) made this loop spin a whole
                # core, which on a small machine starved the broker under test of CPU.
                wait = (sent + 1) / rate - elapsed
                if txn is not None:
                    wait = min(wait, txn.due_in())
                poll(max(MIN_WAIT_S, wait))
                continue
            burst = min(due, BURST)
        else:
            burst = BURST
        if max_records:
            burst = min(burst, max_records - sent)
        # One send time per burst: at most BURST records (well under a millisecond of
        # sending) share it, and the value object is built once for them.
        value = (time.time_ns() // 1000).to_bytes(8, "big") + body
        for _ in range(burst):
            topic = one_topic or topics[sent % len(topics)]
            try:
                if keyed:
                    produce(topic, value, keys.key())
                else:
                    produce(topic, value)
            except BufferError:  # librdkafka's queue is full: let deliveries drain it
                waited = time.monotonic()
                poll(0.01)
                counters.queue_full += 1
                counters.queue_full_s += time.monotonic() - waited
                break
            sent += 1
            poll(0)
        counters.sent = sent
    stop.set()
    reporting.join(timeout=2 * interval + 1)
    while not counters.handed.empty():  # a hand-over the reporter did not take
        counters.emit(counters.handed.get(), "interval")
    if txn is not None:  # the records of the open transaction were produced in the run
        txn.end()
    remaining = producer.flush(FLUSH_TIMEOUT_S)
    counters.sent = sent
    counters.emit(counters.latencies, "done", unflushed=remaining, first_error=counters.first_error)


def main() -> None:
    run(json.loads(sys.argv[1]))


if __name__ == "__main__":
    main()
