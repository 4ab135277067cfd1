"""The broker's CPU per small Produce request, over a real socket to a running broker.

    python -m loadtest.micro.request_cost --bootstrap 127.0.0.1:9092 --broker-pid-tree PID \\
        [--requests 30000] [--window 1] [--records 2] [--record-size 1024] [--rounds 3]

At linger.ms=0 a producer sends a Produce per record or two (the fixed-rate workload
sends ~5,000 a second for 10,240 records), so what a broker spends per request, not per
byte, decides its CPU there and, on a busy machine, its latency. The runner's fixed-rate
workload measures that with librdkafka's timing and batching mixed in; this tool holds
everything else still: one raw connection to the partition's leader sends the same
one-batch Produce (v9, acks=1; ``--records`` records of ``--record-size`` bytes) again
and again, ``--window`` requests in flight, and the broker's CPU is read from /proc of all
its processes (``--broker-pid-tree``: the supervisor) before and after each round.

``--window 1`` waits for each answer before sending the next request, so the broker goes
idle and is woken for every request, as at a low rate; a wider window keeps it busy and
shows the work of the request itself. Each round checks its last answer: no error, and
offsets that moved by exactly the records sent. It prints µs of broker CPU per request
and requests/s per round, and the median.

``--floor`` measures loadtest.micro.answer_floor instead of a broker: a uvloop server, started
here, that answers every request without decoding it or writing anything. Its figure is
what this machine charges any Python server per request; a broker's cost above it is its
own work.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import socket
import struct
import subprocess
import sys
import time
from contextlib import contextmanager
from statistics import median
from typing import Any, Callable, Iterator

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic
from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer

from broker.protocol.build import build
from loadtest.common import CLOCK_TICKS, info, proc_cpu_ticks, process_tree
from storage.records import Record, encode_batch

PRODUCE = 0
VERSION = 9
_SIZE = struct.Struct(">i")


class BrokerCpu:
    """CPU seconds of a broker's processes between start() and stop(): of ``pids``, or of
    ``tree_root`` and its descendants, listed again at stop() (a worker forked meanwhile
    counts from zero; one reaped by its parent moves into the parent's cutime/cstime)."""

    def __init__(self, pids: list[int] | None = None, tree_root: int | None = None) -> None:
        self.pids = pids or []
        self.tree_root = tree_root
        self._start: dict[int, int] = {}
        self.seconds = 0.0

    def _snapshot(self) -> dict[int, int]:
        ticks = {}
        for pid in process_tree(self.tree_root) if self.tree_root is not None else self.pids:
            try:
                ticks[pid] = proc_cpu_ticks(pid)
            except OSError:
                pass  # gone already
        return ticks

    def start(self) -> None:
        self._start = self._snapshot()
        if not self._start:
            raise SystemExit(f"no broker process found (pids={self.pids}, tree={self.tree_root})")

    def stop(self) -> None:
        self.seconds = (sum(self._snapshot().values()) - sum(self._start.values())) / CLOCK_TICKS


def client_cpu_seconds() -> float:
    """CPU of this process (the client): shows when the client is the limit."""
    t = os.times()
    return t.user + t.system


def ensure_topic(bootstrap: str, topic: str, timeout_s: float) -> str:
    """Create ``topic`` with one partition unless it exists; returns what happened."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    if topic in admin.list_topics(timeout=timeout_s).topics:
        return f"topic {topic!r} exists"
    try:
        admin.create_topics([NewTopic(topic, 1, 1)], request_timeout=timeout_s)[topic].result(timeout=timeout_s + 5)
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise
        return f"topic {topic!r} exists (created concurrently)"
    return f"created topic {topic!r}"


def produce_frame(topic: str, partition: int, batch: bytes, correlation_id: int) -> bytes:
    """A whole Produce v9 request frame (size prefix included), encoded by kio."""
    request_type = load_request_schema(PRODUCE, VERSION)
    body = build(request_type, {"transactional_id": None, "acks": 1, "timeout": 10_000, "topic_data": [
        {"name": topic, "partition_data": [{"index": partition, "records": batch}]}]})
    client_id = b"request-cost"
    header = struct.pack(">hhih", PRODUCE, VERSION, correlation_id, len(client_id)) + client_id + b"\x00"
    buffer = io.BytesIO()
    entity_writer(request_type)(buffer, body)
    frame = header + buffer.getvalue()
    return _SIZE.pack(len(frame)) + frame


def decode_produce_answer(frame: bytes) -> tuple[int, int]:
    """(error code, base offset) of the one partition a produce_frame request named."""
    entity, _size = entity_reader(load_response_schema(PRODUCE, VERSION))(frame, 5)  # header v1: id + tags
    answer = entity.responses[0].partition_responses[0]
    return int(answer.error_code), int(answer.base_offset)


class FrameReader:
    """Whole response frames from a blocking socket."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buffer = bytearray()

    def next(self) -> bytes:
        while True:
            if len(self.buffer) >= 4:
                (size,) = _SIZE.unpack_from(self.buffer)
                if len(self.buffer) >= 4 + size:
                    frame = bytes(self.buffer[4:4 + size])
                    del self.buffer[:4 + size]
                    return frame
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                raise ConnectionError("the broker closed the connection")
            self.buffer += chunk


def leader_address(bootstrap: str, topic: str, timeout_s: float) -> str:
    """host:port of the broker (with worker listeners: the worker) that leads partition 0."""
    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic=topic, timeout=timeout_s)
    partition = metadata.topics[topic].partitions[0]
    broker = metadata.brokers[partition.leader]
    return f"{broker.host}:{broker.port}"


@contextmanager
def floor_server(topic: str, records: int, timeout_s: float) -> Iterator[tuple[str, int]]:
    """loadtest.micro.answer_floor in a child process: (its address, its PID), stopped by PID after."""
    child = subprocess.Popen([sys.executable, "-m", "loadtest.micro.answer_floor", "--topic", topic,
                              "--records", str(records)], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        port = child.stdout.readline().strip()  # the server prints its port once it listens
        if not port.isdigit():
            raise SystemExit(f"loadtest.micro.answer_floor did not start (exit code {child.poll()})")
        yield f"127.0.0.1:{port}", child.pid
    finally:
        child.terminate()
        try:
            child.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait(timeout=timeout_s)


def run_round(sock: socket.socket, reader: FrameReader, frame: bytes, requests: int, window: int,
              records: int, cpu: BrokerCpu) -> dict[str, Any]:
    """Send ``requests`` copies of ``frame`` with ``window`` in flight; check the last answer."""
    first_error, first_offset = decode_produce_answer(_send_and_read(sock, reader, frame))
    if first_error:
        raise SystemExit(f"Produce answered error code {first_error}")
    cpu.start()
    client_before, started = client_cpu_seconds(), time.perf_counter()
    sent = answered = 0
    last = b""
    while answered < requests:
        while sent - answered < window and sent < requests:
            sock.sendall(frame)
            sent += 1
        last = reader.next()
        answered += 1
    elapsed = time.perf_counter() - started
    cpu.stop()
    error, offset = decode_produce_answer(last)
    if error or offset != first_offset + records * requests:
        raise SystemExit(f"last answer: error {error}, base offset {offset}; expected 0 and "
                         f"{first_offset + records * requests}")
    return {"requests": requests, "seconds": round(elapsed, 3), "requests_per_s": round(requests / elapsed),
            "broker_cpu_s": round(cpu.seconds, 3), "broker_cpu_us_per_request": round(cpu.seconds / requests * 1e6, 1),
            "client_cpu_s": round(client_cpu_seconds() - client_before, 3)}


def _send_and_read(sock: socket.socket, reader: FrameReader, frame: bytes) -> bytes:
    sock.sendall(frame)
    return reader.next()


def measure(args: argparse.Namespace, address: str,
            new_cpu: Callable[[], BrokerCpu]) -> tuple[list[dict[str, Any]], int]:
    """(The rounds against ``address``, each with a fresh CPU account; the batch's size)."""
    now = int(time.time() * 1000)
    batch = encode_batch([Record(i, now, None, b"x" * args.record_size, ()) for i in range(args.records)])
    frame = produce_frame(args.topic, 0, batch, correlation_id=1)
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=args.timeout_s) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        reader = FrameReader(sock)
        for _ in range(args.warmup):
            _send_and_read(sock, reader, frame)
        rounds = [run_round(sock, reader, frame, args.requests, args.window, args.records, new_cpu())
                  for _ in range(args.rounds)]
    return rounds, len(batch)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m loadtest.micro.request_cost", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--bootstrap", help="HOST:PORT of any broker of the cluster")
    target.add_argument("--floor", action="store_true", help="measure loadtest.micro.answer_floor, started here, instead")
    parser.add_argument("--broker-pid-tree", type=int,
                        help="the broker's root PID: its CPU and its descendants' is measured (with --bootstrap)")
    parser.add_argument("--topic", default="request-cost")
    parser.add_argument("--requests", type=int, default=30_000, help="requests per round")
    parser.add_argument("--window", type=int, default=1, help="requests in flight")
    parser.add_argument("--records", type=int, default=2, help="records in each request's batch")
    parser.add_argument("--record-size", type=int, default=1024, help="value bytes per record")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=2_000, help="requests sent before the first round")
    parser.add_argument("--timeout-s", type=float, default=30.0, help="socket and metadata timeout")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args(argv)
    if min(args.requests, args.window, args.records, args.rounds) < 1 or args.record_size < 0 or args.warmup < 0:
        parser.error("--requests, --window, --records and --rounds must be at least 1; sizes not negative")
    if args.bootstrap and args.broker_pid_tree is None:
        parser.error("--bootstrap needs --broker-pid-tree (whose CPU to measure)")

    if args.floor:
        with floor_server(args.topic, args.records, args.timeout_s) as (address, pid):
            rounds, batch_bytes = measure(args, address, lambda: BrokerCpu(pids=[pid]))
    else:
        info(ensure_topic(args.bootstrap, args.topic, args.timeout_s))
        address = leader_address(args.bootstrap, args.topic, args.timeout_s)
        rounds, batch_bytes = measure(args, address, lambda: BrokerCpu(tree_root=args.broker_pid_tree))
    result = {"leader": address, "floor": args.floor, "window": args.window, "records": args.records,
              "record_size": args.record_size,
              "batch_bytes": batch_bytes, "rounds": rounds,
              "broker_cpu_us_per_request_median": median(r["broker_cpu_us_per_request"] for r in rounds),
              "requests_per_s_median": median(r["requests_per_s"] for r in rounds)}
    if args.json:
        print(json.dumps(result, sort_keys=True), flush=True)
    else:
        for r in rounds:
            print(f"{r['requests']} requests, window {args.window}: {r['broker_cpu_us_per_request']:.1f} µs broker CPU "
                  f"per request, {r['requests_per_s']:,} requests/s")
        print(f"median: {result['broker_cpu_us_per_request_median']:.1f} µs per request "
              f"({batch_bytes}-byte batch of {args.records} × {args.record_size} B, "
              f"{'the answer floor' if args.floor else 'leader'} {address})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
