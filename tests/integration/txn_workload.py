"""A transactional workload, run as a client process (in the client's network namespace):

    python -m tests.integration.txn_workload run --bootstrap B --topic txn --out ctp-out --group ctp ...
    ... read-back | coordinator

``run``: producer threads (confluent-kafka transactional producers, one transactional id each)
write, in every transaction, one unique value to each partition of ``--topic`` ("p1-t7-2" is
producer 1's transaction 7 on partition 2) and commit, or abort one in ``--abort-ratio``; a
consume-transform-produce thread reads ``--topic`` (read_committed, its partitions assigned,
from the group's committed offsets) and in each transaction writes one output per input to
``--out`` (same partition) and sends the consumer's positions to the transaction. Until SIGTERM
or ``--seconds``; then the producers stop and the stage drains what they wrote. Stdout, one
JSON object a line, for tests/integration/txn_checker.py:

    {"type": "begin", "txn": "p1-t7", "writes": {"txn/0": ["p1-t7-0"], ...}, "sources": {...}}
    {"type": "end", "txn": "p1-t7", "outcome": "committed" | "aborted" | "indeterminate", "error": "...", "at": 1.5e9}

A transaction ends "committed" only when commit_transaction returned, "aborted" only when
abort_transaction returned; any other end (an error neither call recovered from, a timeout)
is "indeterminate", and the producer is replaced: the new one's init_transactions fences it.

``read-back``: once no transaction is open (the last stable offset is the high watermark of
every partition, or ``--seconds`` passed), every partition of ``--topics`` read from offset 0
to its end by read_committed and by read_uncommitted, and the group's committed offsets:

    {"type": "final", "topic": "txn", "partition": 0, "committed": [[0, "p0-t0-0"], ...], "uncommitted": [...]}
    {"type": "offsets", "offsets": {"txn/0": 12, ...}}

``coordinator``: the node id FindCoordinator (key type 1) names for a transactional id.
"""

from __future__ import annotations

import argparse
import functools
import json
import random
import signal
import sys
import threading
import time
import uuid
from typing import Any, Callable

stop = threading.Event()
producers_done = threading.Event()
_emit_lock = threading.Lock()
COMMITTED, ABORTED, INDETERMINATE = "committed", "aborted", "indeterminate"


def emit(**event: Any) -> None:
    with _emit_lock:
        sys.stdout.write(json.dumps(event) + "\n")
        sys.stdout.flush()


def note(text: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {threading.current_thread().name}: {text}", file=sys.stderr, flush=True)


def key(topic: str, partition: int) -> str:
    return f"{topic}/{partition}"


# ---------------------------------------------------------------------- one transaction
def make_producer(args: argparse.Namespace, transactional_id: str) -> Any:
    from confluent_kafka import Producer

    return Producer({"bootstrap.servers": args.bootstrap, "transactional.id": transactional_id,
                     "transaction.timeout.ms": args.txn_timeout_ms, "message.timeout.ms": args.txn_timeout_ms - 1000,
                     "linger.ms": 2, "request.timeout.ms": 5000, "retry.backoff.ms": 100,
                     "reconnect.backoff.max.ms": 500, "topic.metadata.refresh.interval.ms": 1000})


def init(args: argparse.Namespace, transactional_id: str, give_up: Callable[[], bool]) -> Any:
    """A producer whose init_transactions returned (retried, with new producers), or None once
    ``give_up()``."""
    from confluent_kafka import KafkaException

    while not give_up():
        producer = make_producer(args, transactional_id)
        try:
            producer.init_transactions(args.call_timeout)
            return producer
        except KafkaException as exc:
            note(f"init_transactions({transactional_id}): {exc.args[0]}")
            del producer
            time.sleep(0.5)
    return None


def transact(producer: Any, body: Callable[[Any], None], abort: bool, call_timeout: float) -> tuple[str, str, bool]:
    """Run one transaction: (outcome, error, the producer is still usable)."""
    from confluent_kafka import KafkaException

    committing = False
    try:
        producer.begin_transaction()
        body(producer)
        if abort:
            producer.flush(call_timeout)  # the aborted records reach the logs, then the markers hide them
            producer.abort_transaction(call_timeout)
            return ABORTED, "", True
        committing = True
        deadline = time.monotonic() + 2 * call_timeout
        while True:
            try:
                producer.commit_transaction(call_timeout)
                return COMMITTED, "", True
            except KafkaException as exc:
                error = exc.args[0]
                # A retriable commit error (a timeout): the outcome is pending, the call may be repeated.
                if not error.retriable() or error.fatal() or error.txn_requires_abort() or time.monotonic() > deadline:
                    raise
                note(f"commit_transaction retried: {error}")
    except KafkaException as exc:
        error = exc.args[0]
        text = f"{'commit' if committing else 'transaction'}: {error.name()}: {error.str()}"
        if error.fatal() or not error.txn_requires_abort():
            return INDETERMINATE, text, False
        try:
            producer.abort_transaction(call_timeout)
            return ABORTED, text + "; aborted", True
        except KafkaException as second:
            return INDETERMINATE, text + f"; abort: {second.args[0].name()}", False


# ---------------------------------------------------------------------- the roles
def produce_loop(args: argparse.Namespace, index: int) -> None:
    rng = random.Random(f"{args.seed}-{index}")
    producer, number = None, 0
    while not stop.is_set():
        if producer is None:
            producer = init(args, f"jepsen-p{index}", stop.is_set)
            if producer is None:
                return
        txn = f"p{index}-t{number}"
        number += 1
        writes = {p: f"{txn}-{p}" for p in range(args.partitions)}
        emit(type="begin", txn=txn, writes={key(args.topic, p): [v] for p, v in writes.items()})

        def body(producer: Any) -> None:
            for p, value in writes.items():
                producer.produce(args.topic, value=value.encode(), partition=p)

        outcome, error, usable = transact(producer, body, rng.random() < args.abort_ratio, args.call_timeout)
        emit(type="end", txn=txn, outcome=outcome, error=error, at=time.time())
        if error:
            note(f"{txn} {outcome}: {error}")
        if not usable:
            del producer
            producer = None


def rewind(consumer: Any, call_timeout: float) -> None:
    """Back to the group's committed offsets (after a transaction that did not commit)."""
    from confluent_kafka import OFFSET_BEGINNING, KafkaException

    deadline = time.monotonic() + 6 * call_timeout
    while True:
        try:
            committed = consumer.committed(consumer.assignment(), timeout=call_timeout)
            break
        except KafkaException as exc:
            note(f"committed(): {exc.args[0]}")
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
    for tp in committed:
        if tp.offset < 0:
            tp.offset = OFFSET_BEGINNING
        consumer.seek(tp)


def transform_loop(args: argparse.Namespace) -> None:
    from confluent_kafka import Consumer, TopicPartition

    rng = random.Random(f"{args.seed}-ctp")
    consumer = Consumer({"bootstrap.servers": args.bootstrap, "group.id": args.group, "enable.auto.commit": False,
                         "isolation.level": "read_committed", "auto.offset.reset": "earliest",
                         "topic.metadata.refresh.interval.ms": 1000})
    consumer.assign([TopicPartition(args.topic, p) for p in range(args.partitions)])  # from the committed offsets
    producer, number, idle_since = None, 0, time.monotonic()
    drain_deadline: list[float] = []

    def drained() -> bool:
        """The producers stopped, and nothing came for a while (or the drain took too long)."""
        if not producers_done.is_set():
            return False
        drain_deadline[:] = drain_deadline or [time.monotonic() + args.drain_seconds]
        return time.monotonic() - idle_since > args.idle_seconds or time.monotonic() > drain_deadline[0]

    try:
        while not drained():
            if producer is None:
                producer = init(args, "jepsen-ctp", drained)
                if producer is None:
                    return
            messages = [m for m in consumer.consume(num_messages=50, timeout=0.5) if m.error() is None]
            if not messages:
                continue
            idle_since = time.monotonic()
            txn = f"c-t{number}"
            number += 1
            outputs = [(int(m.partition() or 0), f"{txn}|{m.partition()}@{m.offset()}", int(m.offset() or 0),
                        (m.value() or b"").decode()) for m in messages]
            writes: dict[str, list[str]] = {}
            for p, output, _o, _v in outputs:
                writes.setdefault(key(args.out, p), []).append(output)
            emit(type="begin", txn=txn, writes=writes,
                 sources={output: [key(args.topic, p), o, v] for p, output, o, v in outputs})

            def body(producer: Any) -> None:
                for p, output, _o, _v in outputs:
                    producer.produce(args.out, value=output.encode(), partition=p)
                positions = [tp for tp in consumer.position(consumer.assignment()) if tp.offset >= 0]
                producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), args.call_timeout)

            outcome, error, usable = transact(producer, body, rng.random() < args.abort_ratio, args.call_timeout)
            emit(type="end", txn=txn, outcome=outcome, error=error, at=time.time())
            if error:
                note(f"{txn} {outcome}: {error}")
            if not usable:
                del producer
                producer = None
            if outcome != COMMITTED:
                if producer is None:  # the next producer's init ends the old one's transaction first
                    producer = init(args, "jepsen-ctp", drained)
                    if producer is None:
                        return
                rewind(consumer, args.call_timeout)
    finally:
        consumer.close()


def run(args: argparse.Namespace) -> int:
    failures: list[str] = []

    def guard(work: Callable[[], None]) -> Callable[[], None]:
        def wrapped() -> None:
            try:
                work()
            except BaseException as exc:  # noqa: BLE001 - reported in the exit code
                failures.append(f"{threading.current_thread().name}: {exc!r}")
                note(f"died: {exc!r}")
        return wrapped

    producers = [threading.Thread(target=guard(functools.partial(produce_loop, args, i)), name=f"p{i}", daemon=True)
                 for i in range(args.producers)]
    stage = threading.Thread(target=guard(lambda: transform_loop(args)), name="ctp", daemon=True)
    for thread in producers + [stage]:
        thread.start()
    stop.wait(args.seconds)
    stop.set()
    for thread in producers:
        thread.join(4 * args.call_timeout)
    producers_done.set()
    stage.join(args.drain_seconds + 4 * args.call_timeout)
    alive = [t.name for t in producers + [stage] if t.is_alive()]
    note(f"done; still running: {alive}; failures: {failures}")
    return 1 if failures or alive else 0


# ---------------------------------------------------------------------- after the run
def _read(bootstrap: str, topic: str, partitions: int, isolation: str, deadline: float) -> dict[int, list[list[Any]]]:
    """Every record from offset 0 until each partition reports its end (partition EOF: the high
    watermark, or the last stable offset for read_committed)."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{uuid.uuid4().hex}",
                         "enable.auto.commit": False, "isolation.level": isolation, "enable.partition.eof": True})
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        out: dict[int, list[list[Any]]] = {p: [] for p in range(partitions)}
        ended: set[int] = set()
        while len(ended) < partitions:
            if time.monotonic() > deadline:
                raise SystemExit(f"read-back {topic} ({isolation}): no end of {set(out) - ended} in time")
            message = consumer.poll(0.5)
            if message is None:
                continue
            error, partition = message.error(), int(message.partition() or 0)
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    ended.add(partition)
                continue
            ended.discard(partition)
            out[partition].append([message.offset(), (message.value() or b"").decode()])
        return out
    finally:
        consumer.close()


def _ends(bootstrap: str, topic: str, partitions: int, isolation: str) -> list[int]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"ends-{uuid.uuid4().hex}",
                         "isolation.level": isolation})
    try:
        return [consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=5)[1] for p in range(partitions)]
    finally:
        consumer.close()


def read_back(args: argparse.Namespace) -> int:
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    deadline = time.monotonic() + args.seconds
    for topic in args.topics:
        # A transaction still open (one the coordinator has not aborted yet) holds the LSO back.
        while True:
            try:
                stable, high = (_ends(args.bootstrap, topic, args.partitions, level)
                                for level in ("read_committed", "read_uncommitted"))
                if stable == high:
                    break
                note(f"{topic}: last stable offsets {stable} below the high watermarks {high}")
            except KafkaException as exc:
                note(f"{topic} ends: {exc.args[0]}")
            if time.monotonic() > deadline:
                raise SystemExit(f"{topic}: a transaction still open after {args.seconds} s")
            time.sleep(1)
    for topic in args.topics:
        committed = _read(args.bootstrap, topic, args.partitions, "read_committed", deadline)
        uncommitted = _read(args.bootstrap, topic, args.partitions, "read_uncommitted", deadline)
        for p in range(args.partitions):
            emit(type="final", topic=topic, partition=p, committed=committed[p], uncommitted=uncommitted[p])
    consumer = Consumer({"bootstrap.servers": args.bootstrap, "group.id": args.group,
                         "isolation.level": "read_committed", "enable.auto.commit": False})
    try:
        found = consumer.committed([TopicPartition(args.topics[0], p) for p in range(args.partitions)], timeout=30)
        emit(type="offsets", offsets={key(tp.topic, tp.partition): tp.offset for tp in found if tp.offset >= 0})
    finally:
        consumer.close()
    return 0


def coordinator(args: argparse.Namespace) -> int:
    """FindCoordinator v4, key type 1 (TRANSACTION): the node id of the transaction coordinator."""
    from kio.index import load_request_schema

    from broker.protocol.build import build
    from tests.integration.kio_client import KioClient

    deadline = time.monotonic() + args.seconds
    while time.monotonic() < deadline:
        for bootstrap in args.bootstrap.split(","):
            try:
                with KioClient(bootstrap, timeout=3) as client:
                    answer = client.call(10, 4, build(load_request_schema(10, 4),
                                                      {"key_type": 1, "coordinator_keys": [args.transactional_id]}))
                found = answer.coordinators[0]
                if found.error_code == 0:
                    emit(node_id=found.node_id)
                    return 0
            except OSError:
                continue
        time.sleep(0.3)
    return 1


COMMANDS = {"run": run, "read-back": read_back, "coordinator": coordinator}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="txn_workload")
    parser.add_argument("command", choices=sorted(COMMANDS))
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", default="txn")
    parser.add_argument("--out", default="ctp-out")
    parser.add_argument("--topics", nargs="*", default=["txn", "ctp-out"])
    parser.add_argument("--group", default="ctp")
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--producers", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=30.0, help="run: how long; read-back: wait at most")
    parser.add_argument("--abort-ratio", type=float, default=0.2)
    parser.add_argument("--txn-timeout-ms", type=int, default=10000)
    parser.add_argument("--call-timeout", type=float, default=10.0)
    parser.add_argument("--drain-seconds", type=float, default=30.0)
    parser.add_argument("--idle-seconds", type=float, default=3.0)
    parser.add_argument("--seed", default="0")
    parser.add_argument("--transactional-id", default="jepsen-p0")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    return COMMANDS[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
