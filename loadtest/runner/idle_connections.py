"""Hold many idle Kafka-protocol connections open: the "many connections" workload.

A broker that serves a producer well with ten connections may not with thousands more
open beside it: per-connection memory, an O(connections) scan somewhere, a listen
backlog, file-descriptor limits. This tool opens ``count`` (5,000 or more) plain TCP
connections to a Kafka-protocol broker and holds them, idle, while the benchmark's
producer runs. Each connection does what a client does before it goes quiet:

1. connect (bounded concurrency: ``concurrency`` connections, default 200, are in their
   connect + handshake phase at any time);
2. ApiVersions (v3 by default, as librdkafka and the Java client send first): the
   response must carry our correlation id and error code 0. A broker that answers
   UNSUPPORTED_VERSION (35) is asked again on the same connection, as clients do, with
   the highest ApiVersions version its answer lists (v0 if it lists none) and the
   connection counts as established (``api_versions_retries`` in the reports);
3. Metadata (v4 by default; v1..v12 accepted) for no topics (or ``--topic``, which must
   then answer with error code 0 and is not auto-created): our correlation id and at
   least one broker;

and then sends nothing more. While held, a connection the broker closes (EOF or reset)
is counted as ``closed_by_peer``; bytes the broker sends unasked are counted too.

The reference broker for comparison is librdkafka's mock cluster (loadtest/mock_broker.py).
Two things about it, seen with librdkafka 2.16: it answers ApiVersions v3 with
UNSUPPORTED_VERSION and lists v0-v2 (so every connection takes the retry above), and
its listen() backlog is 5: with 200 connects at once most overflow the accept queue and
wait for SYN-ACK retransmissions (1, 3, 7, 15 s...), so some exceed a 10 s timeout.
Against it use ``--concurrency 4`` (which is also fast) or longer timeouts.

Note: Castle, like Kafka, closes a connection idle for longer than
``connections.max.idle.ms`` (default 600000 ms = 10 minutes). Holding idle connections
for longer than that measures the broker's reaper, not idle load: keep a run shorter,
or start the broker with a larger value (``-1``: never).

File descriptors: at start the soft RLIMIT_NOFILE is raised to the hard limit; a count
that cannot fit (or exceeds the local port range toward one address) fails at once with
a message saying so. The broker needs as many descriptors on its side, spread over its
worker processes.

Library use (from the benchmark runner's own process or any other)::

    pool = IdleConnections("127.0.0.1:9092", 5000)
    report = await pool.establish()          # {"event": "established", "open": ...}
    ...                                      # pool.open / pool.closed_by_peer while held
    await pool.close()

or as a child process, stopped by PID (what a benchmark runner does beside producers)::

    with IdleConnectionsChild("127.0.0.1:9092", 5000) as child:
        established = child.wait_established(timeout=120)
        ...                                  # run the producer
        summary = child.stop()               # SIGTERM, then the final summary line

CLI::

    python -m loadtest.runner.idle_connections --bootstrap 127.0.0.1:9092 --count 5000 --hold-s 60 --json

Progress goes to stderr. Stdout gets one line when all connections are established or
failed (``{"event": "established", "open": N, "failed": F, "errors": {...}, "seconds": S}``),
one every ``--report-interval-s`` while holding (``{"event": "held", "open": N,
"closed_by_peer": C, ...}``), and a final ``{"event": "summary", ...}`` when the hold
time is over or on SIGTERM/SIGINT, after closing every connection; the exit code is then
0. ``--hold-s 0`` (the default) holds until signalled. Without ``--json`` the same lines
are written as text. Exit code 2: the count cannot fit the limits; 1: not a single
connection could be established.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import io
import json
import os
import queue
import resource
import signal
import struct
import subprocess
import sys
import threading
import time
import typing
import uuid
from collections import Counter
from typing import IO, Any, Callable

from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer

API_VERSIONS = 18
METADATA = 3
MAX_FRAME = 64 << 20  # a larger size prefix means we are not talking to a Kafka broker
FD_MARGIN = 64  # descriptors kept free for the process itself (stdio, event loop, imports)
MODULE = "loadtest.runner.idle_connections"


class CapacityError(Exception):
    """``count`` connections cannot fit this process's limits."""


class HandshakeError(Exception):
    """A response that does not say yes (wrong correlation id, an error code, no brokers)."""


# --------------------------------------------------------------------------- limits


def raise_nofile_limit() -> tuple[int, int]:
    """Raise the soft RLIMIT_NOFILE to the hard limit; returns the new (soft, hard)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard
    if hard == resource.RLIM_INFINITY:
        with open("/proc/sys/fs/nr_open") as handle:
            target = int(handle.read())
    if soft == resource.RLIM_INFINITY or soft >= target:
        return soft, hard
    resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return target, hard


def open_descriptors() -> int:
    try:
        return len(os.listdir("/proc/self/fd"))
    except OSError:
        return 16


def local_port_range() -> tuple[int, int] | None:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as handle:
            low, high = (int(x) for x in handle.read().split())
            return low, high
    except (OSError, ValueError):
        return None


def check_capacity(count: int, addresses: list[tuple[str, int]]) -> dict[str, int]:
    """Raise RLIMIT_NOFILE and fail with a clear message if ``count`` cannot fit."""
    soft, hard = raise_nofile_limit()
    in_use = open_descriptors()
    available = soft - in_use - FD_MARGIN
    if count > available:
        raise CapacityError(
            f"{count} connections need {count} file descriptors, but RLIMIT_NOFILE allows {soft} "
            f"(hard limit {hard}; {in_use} in use, {FD_MARGIN} kept free): at most {max(available, 0)} here. "
            f"Raise the hard limit (ulimit -Hn, limits.conf, systemd LimitNOFILE) or split the count over processes.")
    ports = local_port_range()
    per_address = -(-count // max(len(addresses), 1))
    if ports is not None and per_address > ports[1] - ports[0] + 1:
        raise CapacityError(
            f"{per_address} connections to one address need as many local ports, but "
            f"net.ipv4.ip_local_port_range is {ports[0]}-{ports[1]} ({ports[1] - ports[0] + 1} ports): "
            f"widen it or give several --bootstrap addresses.")
    return {"nofile_soft": soft, "nofile_hard": hard, "available": available}


def parse_bootstrap(bootstrap: str) -> list[tuple[str, int]]:
    addresses = []
    for item in bootstrap.split(","):
        item = item.strip()
        if not item:
            continue
        if "://" in item:
            item = item.split("://", 1)[1]
        host, sep, port = item.rpartition(":")
        if not sep or not port.isdigit():
            raise ValueError(f"bootstrap address {item!r} is not host:port")
        addresses.append((host.strip("[]") or "127.0.0.1", int(port)))
    if not addresses:
        raise ValueError("no bootstrap address")
    return addresses


# --------------------------------------------------------------------------- protocol


def _entity(cls: type, values: dict[str, Any]) -> Any:
    """An instance of kio entity ``cls`` from the values it has fields for."""
    kwargs = {}
    for f in dataclasses.fields(cls):
        if f.init and f.name in values:
            kwargs[f.name] = values[f.name]
    return cls(**kwargs)


def _topic_class(request_cls: type) -> type:
    hint = typing.get_type_hints(request_cls)["topics"]
    for arg in typing.get_args(hint) or (hint,):  # tuple[Topic, ...] | None
        if typing.get_origin(arg) is tuple:
            return typing.get_args(arg)[0]
    raise TypeError(f"cannot find the topic entity of {request_cls}")


UNSUPPORTED_VERSION = 35


def advertised_api_versions_max(frame: bytes) -> int | None:
    """The highest ApiVersions version an UNSUPPORTED_VERSION answer lists, if readable.

    KIP-511 says the answer is in v0 format (int32 count, then int16 key, min, max); some
    brokers (librdkafka's mock) answer in the flexible format of the version asked for
    (unsigned varint count + 1, then key, min, max and a tagged-field byte per entry)."""
    body = frame[6:]  # after correlation id and error code
    if len(body) >= 4:
        (count,) = struct.unpack_from(">i", body, 0)
        if 0 <= count and 4 + 6 * count <= len(body):
            for i in range(count):
                key, _low, high = struct.unpack_from(">hhh", body, 4 + 6 * i)
                if key == API_VERSIONS:
                    return high
    if body and body[0] < 0x80:
        count = body[0] - 1
        if count >= 0 and 1 + 7 * count <= len(body):
            for i in range(count):
                key, _low, high = struct.unpack_from(">hhh", body, 1 + 7 * i)
                if key == API_VERSIONS:
                    return high
    return None


class Requests:
    """The request bodies, encoded once by kio; the header is made per connection."""

    def __init__(self, api_versions_version: int, metadata_version: int, topic: str | None, client_id: str) -> None:
        if not 0 <= api_versions_version <= 3:
            raise ValueError("ApiVersions version must be 0..3")
        if not 1 <= metadata_version <= 12:
            raise ValueError("Metadata version must be 1..12 (v0 cannot ask for no topics)")
        self.api_versions_version = api_versions_version
        self.metadata_version = metadata_version
        self.topic = topic
        self.client_id = client_id.encode()
        self._av: dict[int, tuple[bytes, bool, type]] = {}
        for version in range(0, api_versions_version + 1):
            av_cls = load_request_schema(API_VERSIONS, version)
            body = self._encode(_entity(av_cls, {"client_software_name": "castle-idle-connections",
                                                 "client_software_version": "1.0"}))
            self._av[version] = (body, bool(av_cls.__flexible__), load_response_schema(API_VERSIONS, version))
        md_cls = load_request_schema(METADATA, metadata_version)
        topics: tuple[Any, ...] = ()
        if topic:
            topics = (_entity(_topic_class(md_cls), {"name": topic, "topic_id": uuid.UUID(int=0)}),)
        self.metadata_body = self._encode(_entity(md_cls, {
            "topics": topics, "allow_auto_topic_creation": False,
            "include_cluster_authorized_operations": False, "include_topic_authorized_operations": False}))
        self.md_flexible = bool(md_cls.__flexible__)
        self.md_response = load_response_schema(METADATA, metadata_version)

    @staticmethod
    def _encode(entity: Any) -> bytes:
        buffer = io.BytesIO()
        entity_writer(type(entity))(buffer, entity)
        return buffer.getvalue()

    def _frame(self, api_key: int, version: int, flexible: bool, correlation_id: int, body: bytes) -> bytes:
        header = struct.pack(">hhih", api_key, version, correlation_id, len(self.client_id)) + self.client_id
        if flexible:
            header += b"\x00"  # no tagged fields
        return struct.pack(">i", len(header) + len(body)) + header + body

    def api_versions(self, correlation_id: int, version: int | None = None) -> bytes:
        version = self.api_versions_version if version is None else version
        body, flexible, _response = self._av[version]
        return self._frame(API_VERSIONS, version, flexible, correlation_id, body)

    def metadata(self, correlation_id: int) -> bytes:
        return self._frame(METADATA, self.metadata_version, self.md_flexible, correlation_id, self.metadata_body)

    def check_api_versions(self, frame: bytes, correlation_id: int, version: int | None = None) -> int | None:
        """None if the answer says yes; the version to ask again with if it is
        UNSUPPORTED_VERSION to a version above 0; HandshakeError otherwise."""
        version = self.api_versions_version if version is None else version
        # ApiVersions responses always have header v0, and error_code first in the body in
        # every version: readable even when a broker answers UNSUPPORTED_VERSION in v0.
        if len(frame) < 6:
            raise HandshakeError("api_versions: short response")
        got, error_code = struct.unpack_from(">ih", frame, 0)
        if got != correlation_id:
            raise HandshakeError("api_versions: wrong correlation id")
        if error_code == UNSUPPORTED_VERSION and version > 0:
            advertised = advertised_api_versions_max(frame)
            return 0 if advertised is None or advertised < 0 else min(advertised, version - 1)
        if error_code != 0:
            raise HandshakeError(f"api_versions v{version}: error_code {error_code}")
        try:
            entity_reader(self._av[version][2])(frame, 4)
        except Exception:
            raise HandshakeError("api_versions: undecodable response") from None
        return None

    def check_metadata(self, frame: bytes, correlation_id: int) -> None:
        if len(frame) < 4:
            raise HandshakeError("metadata: short response")
        (got,) = struct.unpack_from(">i", frame, 0)
        if got != correlation_id:
            raise HandshakeError("metadata: wrong correlation id")
        try:
            entity: Any = entity_reader(self.md_response)(frame, 5 if self.md_flexible else 4)[0]
        except Exception:
            raise HandshakeError("metadata: undecodable response") from None
        if not entity.brokers:
            raise HandshakeError("metadata: no brokers")
        for topic in entity.topics:
            if int(topic.error_code) != 0:
                raise HandshakeError(f"metadata: topic error_code {int(topic.error_code)}")


# --------------------------------------------------------------------------- connections


class _Connection(asyncio.Protocol):
    """One connection: answers one outstanding request at a time, then sits idle."""

    def __init__(self, pool: IdleConnections) -> None:
        self.pool = pool
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.waiter: asyncio.Future[bytes] | None = None
        self.held = False
        self.closing = False  # we close it: not the broker's doing
        self.lost = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = typing.cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        if self.waiter is None:
            self.pool._unasked(len(data))
            return
        self.buffer += data
        if len(self.buffer) < 4:
            return
        (size,) = struct.unpack_from(">i", self.buffer, 0)
        if not 0 <= size <= MAX_FRAME:
            self._resolve(exception=HandshakeError(f"bad frame size {size}"))
            return
        if len(self.buffer) >= 4 + size:
            frame = bytes(self.buffer[4:4 + size])
            extra = len(self.buffer) - 4 - size
            self.buffer.clear()
            if extra:
                self.pool._unasked(extra)
            self._resolve(result=frame)

    def _resolve(self, result: bytes | None = None, exception: BaseException | None = None) -> None:
        waiter, self.waiter = self.waiter, None
        if waiter is None or waiter.done():
            return
        if exception is not None:
            waiter.set_exception(exception)
        else:
            waiter.set_result(typing.cast(bytes, result))

    def eof_received(self) -> bool:
        return False  # close our side too; connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        if self.waiter is not None:
            self._resolve(exception=ConnectionError("closed by the broker") if exc is None else exc)
        if self.held and not self.closing:
            self.pool._peer_closed(self, exc)

    async def call(self, data: bytes, timeout: float) -> bytes:
        assert self.transport is not None
        if self.lost:
            raise ConnectionError("closed by the broker")
        self.waiter = asyncio.get_running_loop().create_future()
        self.transport.write(data)
        return await asyncio.wait_for(self.waiter, timeout)

    def close(self) -> None:
        self.closing = True
        if self.transport is not None:
            self.transport.close()


def _describe(stage: str, exc: BaseException) -> str:
    if isinstance(exc, HandshakeError):
        return str(exc)
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError)):
        return f"{stage}: timeout"
    errno = getattr(exc, "errno", None)
    return f"{stage}: {type(exc).__name__}" + (f" (errno {errno})" if errno else "")


class IdleConnections:
    """``count`` connections to ``bootstrap`` (``host:port[,host:port...]``, used in turn),
    each through ApiVersions and Metadata, then held idle until ``close()``.

    Counters: ``open`` (held now), ``failed`` (never established) with ``errors``
    (reason -> count), ``closed_by_peer`` (held, then closed by the broker) with
    ``closed_by_peer_reasons``, ``unasked_bytes`` (sent by the broker while idle)."""

    def __init__(self, bootstrap: str, count: int, concurrency: int = 200, *, connect_timeout: float = 10.0,
                 request_timeout: float = 10.0, api_versions_version: int = 3, metadata_version: int = 4,
                 topic: str | None = None, client_id: str = "castle-idle-connections") -> None:
        if count < 0 or concurrency < 1:
            raise ValueError("count must be >= 0 and concurrency >= 1")
        self.addresses = parse_bootstrap(bootstrap)
        self.count = count
        self.concurrency = concurrency
        self.connect_timeout = connect_timeout
        self.request_timeout = request_timeout
        self.requests = Requests(api_versions_version, metadata_version, topic, client_id)
        self.held: set[_Connection] = set()
        self._pending: set[_Connection] = set()
        self.failed = 0
        self.errors: Counter[str] = Counter()
        self.closed_by_peer = 0
        self.closed_by_peer_reasons: Counter[str] = Counter()
        self.unasked_bytes = 0
        self.api_versions_retries: Counter[int] = Counter()  # version asked again with -> connections
        self.establish_seconds: float | None = None
        self._next = 0
        self._held_since: float | None = None

    @property
    def open(self) -> int:
        return len(self.held)

    @property
    def attempted(self) -> int:
        return self._next

    # ------------------------------------------------------------------ establish
    async def establish(self, progress: Callable[[IdleConnections, float], None] | None = None,
                        progress_interval: float = 1.0) -> dict[str, Any]:
        """Open every connection (at most ``concurrency`` at a time in connect + handshake);
        returns the "established" report. Cancelling it closes the half-open ones."""
        started = time.monotonic()
        workers = [asyncio.create_task(self._worker()) for _ in range(min(self.concurrency, self.count))]
        reporter = None
        if progress is not None:
            async def report() -> None:
                while True:
                    await asyncio.sleep(progress_interval)
                    progress(self, time.monotonic() - started)
            reporter = asyncio.create_task(report())
        try:
            await asyncio.gather(*workers)
        finally:
            for task in workers:
                task.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
            if reporter is not None:
                reporter.cancel()
                await asyncio.gather(reporter, return_exceptions=True)
            self.establish_seconds = time.monotonic() - started
            self._held_since = time.monotonic()
        return self.established_report()

    async def _worker(self) -> None:
        while self._next < self.count:
            index = self._next
            self._next += 1
            await self._open_one(index)

    async def _open_one(self, index: int) -> None:
        loop = asyncio.get_running_loop()
        host, port = self.addresses[index % len(self.addresses)]
        correlation_id = (2 * index + 1) % 0x7FFFFFFF
        connection: _Connection | None = None
        stage = "connect"
        try:
            _transport, opened = await asyncio.wait_for(
                loop.create_connection(lambda: _Connection(self), host, port), self.connect_timeout)
            connection = opened
            self._pending.add(opened)
            stage = "api_versions"
            frame = await opened.call(self.requests.api_versions(correlation_id), self.request_timeout)
            retry_version = self.requests.check_api_versions(frame, correlation_id)
            if retry_version is not None:
                self.api_versions_retries[retry_version] += 1
                frame = await opened.call(self.requests.api_versions(correlation_id, retry_version), self.request_timeout)
                if self.requests.check_api_versions(frame, correlation_id, retry_version) is not None:
                    raise HandshakeError(f"api_versions v{retry_version}: error_code {UNSUPPORTED_VERSION}")
            stage = "metadata"
            frame = await opened.call(self.requests.metadata(correlation_id + 1), self.request_timeout)
            self.requests.check_metadata(frame, correlation_id + 1)
            if opened.lost:
                raise ConnectionError("closed by the broker")
        except asyncio.CancelledError:
            if connection is not None:
                connection.close()
                self._pending.discard(connection)
            raise
        except Exception as exc:
            self.failed += 1
            self.errors[_describe(stage, exc)] += 1
            if connection is not None:
                connection.close()
                self._pending.discard(connection)
            return
        self._pending.discard(opened)
        opened.held = True
        self.held.add(opened)

    # ------------------------------------------------------------------ while held
    def _peer_closed(self, connection: _Connection, exc: Exception | None) -> None:
        self.held.discard(connection)
        self.closed_by_peer += 1
        self.closed_by_peer_reasons["eof" if exc is None else type(exc).__name__] += 1

    def _unasked(self, size: int) -> None:
        self.unasked_bytes += size

    async def close(self, timeout: float = 10.0) -> None:
        """Close every connection we hold (or are still opening) and wait for the closes."""
        connections = list(self.held) + list(self._pending)
        for connection in connections:
            connection.close()
        deadline = time.monotonic() + timeout
        while any(not c.lost for c in connections) and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        self.held.clear()
        self._pending.clear()

    # ------------------------------------------------------------------ reports
    def established_report(self) -> dict[str, Any]:
        return {"event": "established", "requested": self.count, "open": self.open, "failed": self.failed,
                "errors": dict(self.errors), "closed_by_peer": self.closed_by_peer,
                "seconds": round(self.establish_seconds or 0.0, 3),
                "api_versions_retries": {f"v{k}": v for k, v in sorted(self.api_versions_retries.items())},
                "bootstrap": ",".join(f"{h}:{p}" for h, p in self.addresses), "pid": os.getpid()}

    def held_report(self) -> dict[str, Any]:
        held_for = 0.0 if self._held_since is None else time.monotonic() - self._held_since
        return {"event": "held", "open": self.open, "closed_by_peer": self.closed_by_peer,
                "closed_by_peer_reasons": dict(self.closed_by_peer_reasons), "unasked_bytes": self.unasked_bytes,
                "held_s": round(held_for, 1)}

    def summary(self, open_at_stop: int, stopped_by: str) -> dict[str, Any]:
        held_for = 0.0 if self._held_since is None else time.monotonic() - self._held_since
        return {"event": "summary", "requested": self.count, "attempted": self.attempted,
                "established": open_at_stop + self.closed_by_peer, "failed": self.failed, "errors": dict(self.errors),
                "open_at_stop": open_at_stop, "closed_by_peer": self.closed_by_peer,
                "closed_by_peer_reasons": dict(self.closed_by_peer_reasons), "unasked_bytes": self.unasked_bytes,
                "establish_seconds": round(self.establish_seconds or 0.0, 3), "held_s": round(held_for, 1),
                "stopped_by": stopped_by}


# --------------------------------------------------------------------------- CLI


def _emit(record: dict[str, Any], as_json: bool) -> None:
    if as_json:
        line = json.dumps(record, sort_keys=False)
    else:
        event = record["event"]
        if event == "established":
            line = (f"established: {record['open']} open, {record['failed']} failed of {record['requested']} "
                    f"in {record['seconds']:.2f} s" + (f"; errors {record['errors']}" if record["errors"] else ""))
        elif event == "held":
            line = f"held {record['held_s']:.0f} s: {record['open']} open, {record['closed_by_peer']} closed by the broker"
        else:
            line = (f"summary: {record['established']} established, {record['failed']} failed, "
                    f"{record['closed_by_peer']} closed by the broker, {record['open_at_stop']} open at stop "
                    f"(held {record['held_s']:.0f} s, stopped by {record['stopped_by']})")
    try:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()
    except BrokenPipeError:
        # Nobody reads our output any more: go on (connections are still closed cleanly),
        # writing to /dev/null from now on, and without a traceback at exit.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def _progress(pool: IdleConnections, elapsed: float) -> None:
    print(f"idle_connections: {pool.open}/{pool.count} open, {pool.failed} failed ({elapsed:.1f} s)",
          file=sys.stderr, flush=True)


async def _run(args: argparse.Namespace) -> int:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    signalled: list[str] = []

    def on_signal(sig: signal.Signals) -> None:
        signalled.append(sig.name)
        stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal, sig)

    pool = IdleConnections(args.bootstrap, args.count, args.concurrency, connect_timeout=args.connect_timeout_s,
                           request_timeout=args.request_timeout_s, api_versions_version=args.api_versions_version,
                           metadata_version=args.metadata_version, topic=args.topic)
    quiet = args.quiet
    if not quiet:
        print(f"idle_connections: opening {args.count} connections to {args.bootstrap} "
              f"({args.concurrency} at a time), pid {os.getpid()}", file=sys.stderr, flush=True)
    establishing = asyncio.create_task(pool.establish(None if quiet else _progress))
    stopping = asyncio.create_task(stop.wait())
    await asyncio.wait({establishing, stopping}, return_when=asyncio.FIRST_COMPLETED)
    if not establishing.done():
        establishing.cancel()
    try:
        report = await establishing
    except asyncio.CancelledError:
        report = pool.established_report()
        report["interrupted"] = True
    _emit(report, args.json)

    stopped_by = "signal " + signalled[0] if signalled else ""
    if not stopped_by and pool.open == 0 and args.count > 0:
        stopped_by = "nothing established"
    held_from = time.monotonic()
    next_report = held_from + args.report_interval_s
    while not stopped_by:
        now = time.monotonic()
        if args.hold_s > 0 and now - held_from >= args.hold_s:
            stopped_by = "hold elapsed"
            break
        wake = next_report if args.hold_s <= 0 else min(next_report, held_from + args.hold_s)
        await asyncio.wait({stopping}, timeout=max(0.0, wake - now))
        if stop.is_set():
            stopped_by = "signal " + signalled[0]
            break
        if time.monotonic() >= next_report:
            _emit(pool.held_report(), args.json)
            next_report += args.report_interval_s
    stopping.cancel()
    open_at_stop = pool.open
    await pool.close()
    _emit(pool.summary(open_at_stop, stopped_by), args.json)
    if not quiet:
        print(f"idle_connections: closed, stopped by {stopped_by}", file=sys.stderr, flush=True)
    return 1 if stopped_by == "nothing established" else 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=f"python -m {MODULE}", description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap", default="127.0.0.1:9092", help="host:port[,host:port...] (used in turn)")
    parser.add_argument("--count", type=int, default=5000, help="connections to open and hold (default 5000)")
    parser.add_argument("--concurrency", type=int, default=200, help="connections in connect + handshake at once")
    parser.add_argument("--hold-s", type=float, default=0.0, help="hold this long, then close and exit; 0: until SIGTERM/SIGINT")
    parser.add_argument("--report-interval-s", type=float, default=5.0, help="a 'held' line this often")
    parser.add_argument("--connect-timeout-s", type=float, default=10.0)
    parser.add_argument("--request-timeout-s", type=float, default=10.0)
    parser.add_argument("--api-versions-version", type=int, default=3, choices=range(0, 4))
    parser.add_argument("--metadata-version", type=int, default=4, choices=range(1, 13))
    parser.add_argument("--topic", default=None, help="ask Metadata for this topic (must exist) instead of none")
    parser.add_argument("--json", action="store_true", help="JSON lines on stdout")
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")
    parser.add_argument("--no-uvloop", action="store_true", help="the stdlib event loop even if uvloop is installed")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.concurrency < 1 or args.count < 0 or args.report_interval_s <= 0:
        print("idle_connections: --count must be >= 0, --concurrency >= 1, --report-interval-s > 0", file=sys.stderr)
        return 2
    try:
        addresses = parse_bootstrap(args.bootstrap)
        check_capacity(args.count, addresses)
    except (CapacityError, ValueError) as exc:
        print(f"idle_connections: {exc}", file=sys.stderr, flush=True)
        return 2
    if not args.no_uvloop:
        try:
            import uvloop
        except ImportError:
            pass
        else:
            return uvloop.run(_run(args))
    return asyncio.run(_run(args))


# --------------------------------------------------------------------------- as a child process


class IdleConnectionsChild:
    """This module's CLI as a child process (``--json``), for a benchmark runner: start it,
    wait for its "established" line, run the workload, ``stop()`` it by PID (SIGTERM) and
    get its summary. Its stdout is read by a thread; ``events`` holds every line so far."""

    def __init__(self, bootstrap: str, count: int, *, concurrency: int = 200, hold_s: float = 0.0,
                 report_interval_s: float = 5.0, extra_args: list[str] | None = None,
                 stderr: int | IO[Any] | None = None, python: str = sys.executable) -> None:
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        self.command = [python, "-m", MODULE, "--json", "--bootstrap", bootstrap, "--count", str(count),
                        "--concurrency", str(concurrency), "--hold-s", str(hold_s),
                        "--report-interval-s", str(report_interval_s)] + list(extra_args or [])
        self.env = dict(os.environ)
        self.env["PYTHONPATH"] = root + (os.pathsep + self.env["PYTHONPATH"] if self.env.get("PYTHONPATH") else "")
        self.stderr = stderr
        self.process: subprocess.Popen[str] | None = None
        self.events: list[dict[str, Any]] = []
        self._lines: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self._reader: threading.Thread | None = None

    @property
    def pid(self) -> int:
        assert self.process is not None, "not started"
        return self.process.pid

    def start(self) -> IdleConnectionsChild:
        self.process = subprocess.Popen(self.command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                        stderr=self.stderr, text=True, env=self.env, start_new_session=True)
        self._reader = threading.Thread(target=self._read, name=f"idle-connections-{self.process.pid}", daemon=True)
        self._reader.start()
        return self

    def _read(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        for line in self.process.stdout:
            line = line.strip()
            if not line:
                continue
            try:
                record = json.loads(line)
            except ValueError:
                record = {"event": "text", "line": line}
            self.events.append(record)
            self._lines.put(record)
        self._lines.put(None)  # EOF: the child exited (or closed stdout)

    def wait_for(self, event: str, timeout: float) -> dict[str, Any]:
        """The next line of kind ``event``; TimeoutError, or RuntimeError if the child exits first."""
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"no {event!r} line from idle_connections (pid {self.pid}) within {timeout} s")
            try:
                record = self._lines.get(timeout=remaining)
            except queue.Empty:
                continue
            if record is None:
                self._lines.put(None)  # keep reporting EOF to later waits
                code = self.process.wait(5) if self.process is not None else None
                raise RuntimeError(f"idle_connections (pid {self.pid}) exited with {code} before a {event!r} line")
            if record.get("event") == event:
                return record

    def wait_established(self, timeout: float = 300.0) -> dict[str, Any]:
        return self.wait_for("established", timeout)

    def stop(self, timeout: float = 30.0) -> dict[str, Any]:
        """SIGTERM by PID, wait for the summary and the exit (SIGKILL after ``timeout``)."""
        assert self.process is not None, "not started"
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            summary = self.wait_for("summary", timeout)
        except (TimeoutError, RuntimeError):
            self.kill()
            raise
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise
        summary["exit_code"] = self.process.returncode
        return summary

    def wait_done(self, timeout: float = 60.0) -> dict[str, Any]:
        """Without signalling (``--hold-s`` ran out): the summary and the exit code."""
        assert self.process is not None, "not started"
        try:
            summary = self.wait_for("summary", timeout)
            self.process.wait(timeout)
        except (TimeoutError, RuntimeError, subprocess.TimeoutExpired):
            self.kill()
            raise
        summary["exit_code"] = self.process.returncode
        return summary

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)

    def __enter__(self) -> IdleConnectionsChild:
        return self.start()

    def __exit__(self, *exc_info: Any) -> None:
        self.kill()
        if self._reader is not None:
            self._reader.join(5)


if __name__ == "__main__":
    sys.exit(main())
