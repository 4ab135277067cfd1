"""Locust users that load Castle (or any Kafka-protocol broker) through confluent-kafka.

Run it headless (200 users, 20 more each second, for 60 s, stats to out_*.csv):

    .venv/bin/locust -f loadtest/locustfile.py --headless -u 200 -r 20 -t 60s --csv out \\
        --host 127.0.0.1:9092 --castle-topic load --castle-record-size 1024

or with the web UI (then open http://127.0.0.1:8089; the options below are in its form):

    .venv/bin/locust -f loadtest/locustfile.py --host 127.0.0.1:9092

The bootstrap servers come from locust's own --host: "host:port", "kafka://host:port", or a
comma-separated list of either. Every other setting is a --castle-* option (or its CASTLE_*
environment variable), listed with its default in _add_arguments below and in the README
(locust's --help does not show them: it answers before it imports the locustfile).

Users. ProducerUser (weight 3) and ConsumerUser (weight 1): `-u 200` starts 150 producers and
50 consumers. Name classes on the command line to run only those
(`locust -f loadtest/locustfile.py ProducerUser ...`), or pick them in the web UI with
--class-picker. Consumers beyond the topic's partition count get no partition (Kafka's rule
for a group) and stay idle.

* ProducerUser produces records to --castle-topic at --castle-rate records/s per user (0: as
  fast as it can): key "key-<n>" with n drawn uniformly from --castle-key-count keys (0: no
  key), a value of --castle-record-size bytes (slices of a pseudo-text pool, compressible
  about like text), and two headers: "user" (the locust user's id) and "seq" (its sequence
  number). All producer users of one locust process share one confluent_kafka.Producer.
* ConsumerUser is one member of the consumer group --castle-group (each user its own
  Consumer), subscribed to the topic, reading from --castle-offset-reset when the group has
  no committed offset, committing asynchronously every --castle-commit-interval seconds
  (and every --castle-commit-every records if set) when it has read something new.

At test start the topic is created (--castle-partitions, --castle-replication-factor) unless
it exists; an existing topic is used as it is.

Events (locust request events; Type / Name in the stats, Name is the topic):

* produce: one per record, when its delivery report arrives. Response time = the
  acknowledgement latency librdkafka measured (Message.latency(): from produce() to the
  broker's ack, so it includes linger.ms batching and time in librdkafka's queue); length =
  bytes of key + value. A failed delivery (or a produce() call refused at once, e.g.
  MSG_SIZE_TOO_LARGE) is a failure whose message is the Kafka error.
* consume: one per non-empty batch returned by Consumer.consume() (up to
  --castle-consume-batch records). Response time = end-to-end latency of the batch: the time
  now minus the CreateTime timestamp of the OLDEST record in the batch, i.e. fetch latency as
  the application sees it: the producer's linger and ack, the broker's append, the fetch,
  librdkafka's prefetch queue and this user's polling interval (at most ~10 ms when idle).
  It compares two wall clocks: meaningful when producer and consumer machines share a clock
  (one machine, or NTP-synchronised ones); records with a LogAppendTime timestamp measure from
  the broker's append instead. Length = bytes of keys + values in the batch. Request count
  counts batches, not records. A consume error (other than _PARTITION_EOF) is a failure.
* commit: one per asynchronous commit, when its on_commit callback is served. Response
  time = from the commit() call to the callback, which is served from this user's next
  consume() call (so it includes up to one polling interval); length 0. A commit error, or
  an error on one of its partitions, is a failure; "nothing to commit" (_NO_OFFSET) is not
  reported.
* admin (Name "create topic <topic>"): only when creating the topic at test start failed or
  got no answer in ADMIN_TIMEOUT_S; the test goes on.

Design: locust runs every user as a greenlet on one OS thread (gevent), so nothing here may
block in librdkafka: produce() is followed by poll(0); a full local queue (BufferError)
polls, sleeps a few ms in gevent and retries; consumers call consume(timeout=0) and sleep
~10 ms in gevent when nothing arrived; one background greenlet per process polls the shared
producer so delivery reports keep flowing while producers wait. At the end: producers are
flushed at test stop (polling, at most FLUSH_TIMEOUT_S, then what is left is purged and
reported as failures); each consumer commits what it read (at most FINAL_COMMIT_TIMEOUT_S)
and closes in gevent's thread pool (Consumer.close() blocks while it leaves the group; the
user waits at most CLOSE_TIMEOUT_S for it). So stopping a test never hangs on the broker.
"""

from __future__ import annotations

import itertools
import logging
import os
import random
import time
from typing import Any

import gevent
from confluent_kafka import TIMESTAMP_NOT_AVAILABLE, Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from locust import User, events, task
from locust.env import Environment
from locust.runners import MasterRunner

from loadtest.common import key_values

log = logging.getLogger("castle.locust")

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
COMPRESSIONS = ["none", "gzip", "snappy", "lz4", "zstd"]
ACKS = ["0", "1", "all"]

IDLE_SLEEP_S = 0.01  # consumer: nothing returned by consume(timeout=0) -> sleep this long
BUFFER_FULL_SLEEP_S = 0.005  # producer: librdkafka's queue is full -> poll, sleep this long, retry
PRODUCER_POLL_INTERVAL_S = 0.005  # background greenlet serving the shared producer's delivery reports
FLUSH_TIMEOUT_S = 10.0  # test stop: wait this long at most for outstanding delivery reports
FINAL_COMMIT_TIMEOUT_S = 2.0  # consumer stop: wait this long at most for the last commit
CLOSE_TIMEOUT_S = 5.0  # consumer stop: wait this long at most for Consumer.close()
COMMIT_TIMEOUT_S = 30.0  # a commit whose callback never came is reported failed after this long
ADMIN_TIMEOUT_S = 10.0  # test start: topic creation


# --------------------------------------------------------------------------- options
@events.init_command_line_parser.add_listener
def _add_arguments(parser: Any) -> None:
    group = parser.add_argument_group("Castle / Kafka", "Bootstrap servers come from --host (host:port[,host:port], kafka:// allowed)")
    group.add_argument("--castle-topic", env_var="CASTLE_TOPIC", default="castle-locust", help="Topic to produce to and consume from")
    group.add_argument("--castle-partitions", env_var="CASTLE_PARTITIONS", type=int, default=12,
                       help="Partitions of the topic when the test creates it (at test start, if missing)")
    group.add_argument("--castle-replication-factor", env_var="CASTLE_REPLICATION_FACTOR", type=int, default=1,
                       help="Replication factor of the topic when the test creates it")
    group.add_argument("--castle-record-size", env_var="CASTLE_RECORD_SIZE", type=int, default=1024, help="Bytes of each record's value")
    group.add_argument("--castle-key-count", env_var="CASTLE_KEY_COUNT", type=int, default=1000,
                       help="Keys are key-<n>, n uniform in [0, this); 0: records without key")
    group.add_argument("--castle-rate", env_var="CASTLE_RATE", type=float, default=100.0,
                       help="Records per second per producer user; 0: as fast as possible")
    group.add_argument("--castle-acks", env_var="CASTLE_ACKS", choices=ACKS, default="all", help="Producer acks")
    group.add_argument("--castle-compression", env_var="CASTLE_COMPRESSION", choices=COMPRESSIONS, default="none",
                       help="Producer compression.type")
    group.add_argument("--castle-linger-ms", env_var="CASTLE_LINGER_MS", type=float, default=5.0, help="Producer linger.ms")
    group.add_argument("--castle-group", env_var="CASTLE_GROUP", default="castle-locust", help="Consumer group id")
    group.add_argument("--castle-offset-reset", env_var="CASTLE_OFFSET_RESET", choices=["latest", "earliest"], default="latest",
                       help="Consumer auto.offset.reset (where a group without committed offsets starts)")
    group.add_argument("--castle-consume-batch", env_var="CASTLE_CONSUME_BATCH", type=int, default=500,
                       help="Most records one consume() call returns (one consume event)")
    group.add_argument("--castle-commit-interval", env_var="CASTLE_COMMIT_INTERVAL", type=float, default=1.0,
                       help="Seconds between a consumer's asynchronous commits")
    group.add_argument("--castle-commit-every", env_var="CASTLE_COMMIT_EVERY", type=int, default=0,
                       help="Also commit after this many records read (0: by time only)")
    group.add_argument("--castle-producer-config", env_var="CASTLE_PRODUCER_CONFIG", default="",
                       help="Extra librdkafka producer settings, key=value,key=value")
    group.add_argument("--castle-consumer-config", env_var="CASTLE_CONSUMER_CONFIG", default="",
                       help="Extra librdkafka consumer settings, key=value,key=value")


def bootstrap_servers(environment: Environment) -> str:
    """locust's --host as librdkafka's bootstrap.servers: kafka:// prefixes and paths dropped."""
    host = (environment.host or DEFAULT_BOOTSTRAP).strip()
    servers = []
    for item in host.split(","):
        item = item.strip()
        if "://" in item:
            item = item.split("://", 1)[1]
        item = item.rstrip("/")
        if item:
            servers.append(item)
    return ",".join(servers) or DEFAULT_BOOTSTRAP


def extra_config(text: str) -> dict[str, str]:
    """--castle-producer-config / --castle-consumer-config: key=value,key=value."""
    return key_values(item for item in text.split(",") if item.strip())


def _options(environment: Environment) -> Any:
    return environment.parsed_options


class KafkaRequestError(Exception):
    """The exception of a failed request event; its text (what locust groups failures by) is the Kafka error."""


def kafka_error(err: KafkaError | BaseException) -> KafkaRequestError:
    if isinstance(err, KafkaError):
        return KafkaRequestError(f"{err.name()}: {err.str()}")
    if isinstance(err, KafkaException) and err.args and isinstance(err.args[0], KafkaError):
        return kafka_error(err.args[0])
    return KafkaRequestError(str(err))


def _fire(environment: Environment, request_type: str, name: str, response_time: float, length: int,
          exception: Exception | None = None) -> None:
    environment.events.request.fire(request_type=request_type, name=name, response_time=response_time,
                                    response_length=length, exception=exception, context={})


# --------------------------------------------------------------------------- topic
def ensure_topic(environment: Environment) -> None:
    """Create the topic; TOPIC_ALREADY_EXISTS (it existed, or another locust worker made it) is fine.

    A failure (broker unreachable, creation refused) is logged and reported as a failed
    request event of type "admin", so it shows in the failures and the exit code; the test
    goes on (producers may still auto-create the topic). CreateTopics alone, no Metadata
    first: a Metadata request naming the topic can make a broker auto-create it (with its
    default partition count), and the call is asynchronous: its future (completed by a
    librdkafka thread) is polled from gevent, so the web UI and other greenlets keep running.
    An existing topic is left as it is, whatever its partition count."""
    options = _options(environment)
    topic = options.castle_topic
    started = time.monotonic()
    admin = AdminClient({"bootstrap.servers": bootstrap_servers(environment), "socket.timeout.ms": int(ADMIN_TIMEOUT_S * 1000)})
    error: BaseException | None = None
    try:
        future = admin.create_topics([NewTopic(topic, options.castle_partitions, options.castle_replication_factor)],
                                     operation_timeout=ADMIN_TIMEOUT_S, request_timeout=ADMIN_TIMEOUT_S)[topic]
        deadline = time.monotonic() + ADMIN_TIMEOUT_S + 1
        try:
            while not future.done() and time.monotonic() < deadline:
                gevent.sleep(0.02)
        except gevent.GreenletExit:  # the test was stopped (e.g. --run-time) while waiting: still say so
            error = KafkaRequestError(f"CreateTopics: no answer before the test stopped ({time.monotonic() - started:.1f} s)")
            _fire(environment, "admin", f"create topic {topic}", (time.monotonic() - started) * 1000.0, 0, error)
            raise
        if not future.done():
            error = KafkaRequestError(f"CreateTopics: no answer in {ADMIN_TIMEOUT_S:.0f} s")
        else:
            error = future.exception()
            if error is None:
                log.info("created topic %s with %d partitions", topic, options.castle_partitions)
            elif isinstance(error, KafkaException) and error.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS:
                log.info("topic %s exists", topic)
                error = None
    except KafkaException as exc:
        error = exc
    if error is not None:
        error = kafka_error(error)
        log.error("creating topic %s: %s", topic, error)
        _fire(environment, "admin", f"create topic {topic}", (time.monotonic() - started) * 1000.0, 0, error)


# --------------------------------------------------------------------------- shared producer
# One Producer per locust process, shared by all its producer users. A librdkafka handle
# runs a thread per broker plus a few of its own, and keeps its own queue and batches: 150
# producer users with a handle each would be hundreds of OS threads competing with the
# gevent loop, and 150 half-empty batches per partition instead of full ones. One handle
# is also how an application produces (one producer per process), and its delivery reports
# carry their own latency (Message.latency()), so sharing costs the measurement nothing.
class SharedProducer:
    producer: Producer | None = None
    poller: gevent.Greenlet | None = None
    environment: Environment | None = None

    @classmethod
    def get(cls, environment: Environment) -> Producer:
        if cls.producer is None:
            options = _options(environment)
            config: dict[str, Any] = {
                "bootstrap.servers": bootstrap_servers(environment),
                "client.id": f"castle-locust-producer-{os.getpid()}",
                "acks": options.castle_acks,
                "compression.type": options.castle_compression,
                "linger.ms": options.castle_linger_ms,
                "on_delivery": cls.on_delivery,
                "error_cb": _log_client_error,
            }
            config.update(extra_config(options.castle_producer_config))
            cls.environment = environment
            cls.producer = Producer(config)
            cls.poller = gevent.spawn(cls._poll_forever)
        return cls.producer

    @classmethod
    def _poll_forever(cls) -> None:
        while cls.producer is not None:
            cls.producer.poll(0)
            gevent.sleep(PRODUCER_POLL_INTERVAL_S)

    @classmethod
    def on_delivery(cls, err: KafkaError | None, msg: Message) -> None:
        environment = cls.environment
        if environment is None:
            return
        latency = msg.latency()
        response_time = latency * 1000.0 if latency is not None and latency >= 0 else 0.0
        length = len(msg.key() or b"") + len(msg.value() or b"")
        _fire(environment, "produce", msg.topic() or "", response_time, length, None if err is None else kafka_error(err))

    @classmethod
    def close(cls) -> None:
        """Wait (in gevent) for outstanding delivery reports, at most FLUSH_TIMEOUT_S; purge the rest."""
        producer = cls.producer
        if producer is None:
            return
        if cls.poller is not None:
            cls.poller.kill(block=True)
            cls.poller = None
        deadline = time.monotonic() + FLUSH_TIMEOUT_S
        while len(producer) > 0 and time.monotonic() < deadline:
            producer.poll(0)
            gevent.sleep(PRODUCER_POLL_INTERVAL_S)
        if len(producer) > 0:
            log.warning("%d records not acknowledged %.0f s after the test stopped: purged (reported as failures)",
                        len(producer), FLUSH_TIMEOUT_S)
            producer.purge(in_queue=True, in_flight=True, blocking=False)
            producer.flush(1.0)  # serves the purged records' reports (errors); bounded
        producer.poll(0)
        cls.producer = None
        cls.environment = None


_last_logged: dict[str, float] = {}
LOG_REPEAT_S = 10.0  # the same client error is logged at most once in this many seconds (per process)


def _log_client_error(err: KafkaError) -> None:
    """error_cb of every client: librdkafka's own errors (broker down, ...), not tied to a record."""
    text = str(kafka_error(err))
    now = time.monotonic()
    if now - _last_logged.get(text, float("-inf")) >= LOG_REPEAT_S:
        _last_logged[text] = now
        log.warning("librdkafka: %s", text)


# --------------------------------------------------------------------------- payload
_WORDS = [b"castle", b"kafka", b"record", b"batch", b"offset", b"partition", b"topic", b"broker", b"segment",
          b"index", b"consumer", b"producer", b"group", b"commit", b"leader", b"replica", b"{", b"}", b"\"id\":",
          b"\"value\":", b"0", b"1", b"2", b"3", b"4", b"5", b"6", b"7", b"8", b"9", b"true", b"false", b"null"]
_pool: bytes = b""
POOL_SIZE = 1 << 20


def payload(size: int) -> bytes:
    """``size`` bytes of pseudo-text (a random slice of a 1 MiB pool built once per process)."""
    global _pool
    if not _pool:
        rnd = random.Random(42)
        _pool = b" ".join(rnd.choice(_WORDS) for _ in range(POOL_SIZE // 4))[:POOL_SIZE]
    if size <= 0:
        return b""
    if size > len(_pool):
        return (_pool * (size // len(_pool) + 1))[:size]
    start = random.randrange(len(_pool) - size + 1)
    return _pool[start:start + size]


_user_ids = itertools.count(1)


# --------------------------------------------------------------------------- users
class KafkaUser(User):
    abstract = True
    host = DEFAULT_BOOTSTRAP  # shown in the web UI's form when --host is not given

    def __init__(self, environment: Environment) -> None:
        super().__init__(environment)
        self.user_id = f"{os.getpid()}-{next(_user_ids)}"
        self.options = _options(environment)
        self.topic: str = self.options.castle_topic


class ProducerUser(KafkaUser):
    """Produces keyed records with headers at --castle-rate records/s (0: flat out) through the shared producer."""

    weight = 3

    def wait_time(self) -> float:
        rate = self.options.castle_rate
        if rate <= 0:
            return 0.0
        # constant throughput: the next task starts 1/rate s after the previous one started
        now = time.perf_counter()
        self._next_at = max(getattr(self, "_next_at", now), now - 1.0) + 1.0 / rate
        return max(0.0, self._next_at - now)

    def on_start(self) -> None:
        self.seq = 0
        self.user_id_bytes = self.user_id.encode()
        self.producer = SharedProducer.get(self.environment)

    @task
    def produce(self) -> None:
        key_count = self.options.castle_key_count
        key = f"key-{random.randrange(key_count)}".encode() if key_count > 0 else None
        value = payload(self.options.castle_record_size)
        self.seq += 1
        headers: list[tuple[str, str | bytes | None]] = [("user", self.user_id_bytes), ("seq", str(self.seq).encode())]
        producer = self.producer
        while True:
            try:
                producer.produce(self.topic, value=value, key=key, headers=headers)
                break
            except BufferError:  # librdkafka's local queue is full: let it drain, without blocking gevent
                producer.poll(0)
                gevent.sleep(BUFFER_FULL_SLEEP_S)
            except KafkaException as exc:  # refused at once (e.g. MSG_SIZE_TOO_LARGE): no delivery report will come
                _fire(self.environment, "produce", self.topic, 0.0, len(key or b"") + len(value), kafka_error(exc))
                return
        producer.poll(0)


_live_consumers: dict[int, Consumer] = {}  # by id(): consumers not yet closed (test_stop closes leftovers)
_abandoned: list[Consumer] = []  # consumers whose close() did not return in time: kept alive, never freed mid-close


def close_consumer(consumer: Consumer) -> None:
    """Consumer.close() in gevent's thread pool, waited for at most CLOSE_TIMEOUT_S.

    close() leaves the group and waits for librdkafka's threads; against a slow or dead
    broker it can block for the session timeout, and in this thread it would stop every
    greenlet. confluent-kafka releases the GIL while it waits."""
    _live_consumers.pop(id(consumer), None)
    job = gevent.get_hub().threadpool.spawn(consumer.close)
    try:
        job.get(timeout=CLOSE_TIMEOUT_S)
    except gevent.Timeout:
        log.warning("Consumer.close() did not return in %.0f s; left to finish in the background", CLOSE_TIMEOUT_S)
        _abandoned.append(consumer)
    except Exception as exc:
        log.warning("Consumer.close(): %s", exc)


class ConsumerUser(KafkaUser):
    """One member of --castle-group, with its own Consumer; reports batches and commits."""

    weight = 1

    def wait_time(self) -> float:
        return 0.0  # consume() below sleeps in gevent when nothing arrived

    def on_start(self) -> None:
        self.consumer: Consumer | None = None
        self.closing = False
        self.uncommitted = 0  # records read since the last commit call
        self.last_commit = time.monotonic()
        self.commit_started: float | None = None  # the commit in flight (at most one)
        options = self.options
        config: dict[str, Any] = {
            "bootstrap.servers": bootstrap_servers(self.environment),
            "group.id": options.castle_group,
            "client.id": f"castle-locust-consumer-{self.user_id}",
            "enable.auto.commit": False,
            "auto.offset.reset": options.castle_offset_reset,
            "on_commit": self.on_commit,
            "error_cb": self.on_error,
        }
        config.update(extra_config(options.castle_consumer_config))
        consumer = Consumer(config)
        _live_consumers[id(consumer)] = consumer
        self.consumer = consumer
        consumer.subscribe([self.topic])

    # -- callbacks: served from consume() in this user's greenlet
    def on_commit(self, err: KafkaError | None, partitions: list[TopicPartition]) -> None:
        if self.closing or self.commit_started is None:
            return  # a late answer to a commit already reported as timed out, or served during close
        started, self.commit_started = self.commit_started, None
        if err is not None and err.code() == KafkaError._NO_OFFSET:
            return
        response_time = (time.monotonic() - started) * 1000.0
        if err is None:
            failed = [p for p in partitions if p.error is not None]
            if failed:
                err = failed[0].error
        _fire(self.environment, "commit", self.topic, response_time, 0, None if err is None else kafka_error(err))

    def on_error(self, err: KafkaError) -> None:
        if not self.closing:
            _log_client_error(err)

    # -- the task
    @task
    def consume(self) -> None:
        assert self.consumer is not None
        try:
            messages = self.consumer.consume(num_messages=self.options.castle_consume_batch, timeout=0)
        except KafkaException as exc:
            _fire(self.environment, "consume", self.topic, 0.0, 0, kafka_error(exc))
            gevent.sleep(IDLE_SLEEP_S)
            return
        if messages:
            self.report(messages)
        self.maybe_commit()
        if not messages:
            gevent.sleep(IDLE_SLEEP_S)

    def report(self, messages: list[Message]) -> None:
        oldest: int | None = None
        length = 0
        records = 0
        for msg in messages:
            err = msg.error()
            if err is not None:
                if err.code() != KafkaError._PARTITION_EOF:
                    _fire(self.environment, "consume", msg.topic() or self.topic, 0.0, 0, kafka_error(err))
                continue
            records += 1
            length += len(msg.key() or b"") + len(msg.value() or b"")
            kind, stamp = msg.timestamp()
            if kind != TIMESTAMP_NOT_AVAILABLE and (oldest is None or stamp < oldest):
                oldest = stamp
        if records:
            latency = max(0.0, time.time() * 1000.0 - oldest) if oldest is not None else 0.0
            _fire(self.environment, "consume", self.topic, latency, length)
            self.uncommitted += records

    def maybe_commit(self) -> None:
        now = time.monotonic()
        if self.commit_started is not None:
            if now - self.commit_started < COMMIT_TIMEOUT_S:
                return  # one commit in flight at a time
            _fire(self.environment, "commit", self.topic, (now - self.commit_started) * 1000.0, 0,
                  KafkaRequestError(f"no commit callback in {COMMIT_TIMEOUT_S:.0f} s"))
            self.commit_started = None
        every = self.options.castle_commit_every
        due = now - self.last_commit >= self.options.castle_commit_interval or (every > 0 and self.uncommitted >= every)
        if due and self.uncommitted:
            self.commit()

    def commit(self) -> None:
        assert self.consumer is not None
        self.last_commit = time.monotonic()
        try:
            self.consumer.commit(asynchronous=True)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError._NO_OFFSET:
                _fire(self.environment, "commit", self.topic, 0.0, 0, kafka_error(exc))
            return
        self.commit_started = self.last_commit
        self.uncommitted = 0

    def on_stop(self) -> None:
        consumer = getattr(self, "consumer", None)
        if consumer is None:
            return
        try:
            # Commit what was read (bounded); records that arrive meanwhile are reported as usual.
            deadline = time.monotonic() + FINAL_COMMIT_TIMEOUT_S
            if self.uncommitted and self.commit_started is None:
                self.commit()
            while self.commit_started is not None and time.monotonic() < deadline:
                messages = consumer.consume(num_messages=self.options.castle_consume_batch, timeout=0)
                if messages:
                    self.report(messages)
                else:
                    gevent.sleep(IDLE_SLEEP_S)
        except KafkaException as exc:
            log.warning("final commit: %s", kafka_error(exc))
        finally:
            self.closing = True
            self.consumer = None
            close_consumer(consumer)


# --------------------------------------------------------------------------- test lifecycle
@events.test_start.add_listener
def _on_test_start(environment: Environment, **_: Any) -> None:
    ensure_topic(environment)
    if not isinstance(environment.runner, MasterRunner) and any(issubclass(c, ProducerUser) for c in environment.user_classes):
        SharedProducer.get(environment)  # connect before the first user produces


@events.test_stop.add_listener
def _on_test_stop(environment: Environment, **_: Any) -> None:
    # Users have stopped (their on_stop ran) by now; close what is left.
    for consumer in list(_live_consumers.values()):
        close_consumer(consumer)
    SharedProducer.close()
