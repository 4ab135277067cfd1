"""One client connection: a raw non-blocking socket driven by add_reader/add_writer.

Why not an asyncio transport: Fetch sends file ranges with os.sendfile on the socket fd,
and must wait for writability when the socket buffer is full; a transport's fd refuses
add_writer (DESIGN.md, measured facts). So the connection owns its socket and does both
small writes (sendmsg of queued buffers) and sendfile itself.

Ordering (P5): each request takes the next sequence number when its frame is read;
handlers may finish out of order (forwarded or long-polling ones), but their responses
are queued for the socket strictly in sequence. acks=0 Produce takes a slot and writes
nothing.

Handoff (broker/handoff.py): a connection whose Produce requests all go to one other
worker is passed to that worker once. From the request that asks for it, the connection
reads only up to the next frame boundary, lets what is in flight finish, and then hands
its socket over with nothing of the client's stream left in this process.

Backpressure: reading pauses while ``queued.max.requests`` requests are unanswered, or
their frames hold more than ``queued.max.request.bytes``, or more than OUTPUT_HIGH_WATER
bytes wait to be sent, and resumes below half of that. The byte bound is what keeps a
worker's memory flat under a producer that pipelines 1 MB Produce requests: 500 of
them would be 500 MB.

A protocol violation (bad size, unknown API, unparseable body, unsupported version of
anything but ApiVersions) closes this connection only.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from broker import dispatch, eager
from broker.memory import receive_buffer
from broker.protocol import codec, framing
from broker.protocol.errors import ErrorCode, ProtocolViolation, code_for_exception

if TYPE_CHECKING:
    from broker.node import WorkerNode

log = logging.getLogger(__name__)
request_log = logging.getLogger("castle.requests")

RECV_SIZE = 256 * 1024
LARGE_FRAME = 64 * 1024
OUTPUT_HIGH_WATER = 16 * 1024 * 1024
MAX_IOV = 64


@dataclass(slots=True)
class FileChunk:
    """A range of a file to send with os.sendfile; ``fd`` is ours to close when done."""

    fd: int
    position: int
    length: int


class RawResponse:
    """A response built by hand: buffers and file ranges, already framed except for the
    response header (Fetch's zero-copy path)."""

    __slots__ = ("chunks", "size")

    def __init__(self, chunks: list[bytes | FileChunk], size: int) -> None:
        self.chunks = chunks
        self.size = size

    def release(self) -> None:
        for chunk in self.chunks:
            if isinstance(chunk, FileChunk):
                os.close(chunk.fd)


@dataclass(slots=True)
class RequestContext:
    node: "WorkerNode"
    connection: "Connection"
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    frame_size: int = 0  # counted in the connection's queued request bytes until answered
    started: float = 0.0  # time.perf_counter() when the frame was taken, for the latency metric


class Connection:
    def __init__(self, sock: socket.socket, node: "WorkerNode", connections: set["Connection"],
                 may_hand_off: bool = True) -> None:
        self.sock = sock
        self.fd = sock.fileno()
        self.node = node
        self.loop = asyncio.get_running_loop()
        self.peer = _peer_name(sock)
        self._connections = connections
        self._inbuf = bytearray()
        self._big: bytearray | None = None  # a large frame being received in place
        self._big_filled = 0
        self._next_seq = 0
        self._next_to_send = 0
        self._finished: dict[int, list[bytes | FileChunk] | None] = {}
        self._out: deque[bytes | FileChunk | memoryview] = deque()
        self._out_bytes = 0
        self._out_files = 0  # FileChunks in _out: two or more are sent corked (_flush)
        self._reading = False
        self._writing = False
        self._flush_scheduled = False
        self._tasks: set[asyncio.Task[Any]] = set()
        self.closed = False
        self.last_active = time.monotonic()  # last byte in or out (connections.max.idle.ms)
        self._may_hand_off = may_hand_off and bool(node.config["connection.handoff.enable"])
        self._handoff_to: int | None = None
        self._draining = False  # graceful stop: no new requests are read
        self._max_request = int(node.config["socket.request.max.bytes"])
        self._max_queued = int(node.config["queued.max.requests"])
        self._max_queued_bytes = int(node.config["queued.max.request.bytes"])
        self._queued_bytes = 0  # frames of unanswered requests
        connections.add(self)
        self._resume_reading()

    # ------------------------------------------------------------------ state
    @property
    def idle(self) -> bool:
        """No request in flight and nothing left to send (graceful shutdown waits for this)."""
        return self._next_to_send == self._next_seq and not self._out

    def _pause_reading(self) -> None:
        if self._reading:
            self.loop.remove_reader(self.fd)
            self._reading = False

    def drain(self) -> None:
        """Graceful stop: read no further requests (and do not move); the ones in flight
        finish and are answered, after which the connection is idle and can be closed."""
        self._draining = True
        self._may_hand_off = False
        self._handoff_to = None
        self._pause_reading()

    def _resume_reading(self) -> None:
        if not self._reading and not self.closed and not self._draining:
            self.loop.add_reader(self.fd, self._on_readable)
            self._reading = True

    def _over_limits(self) -> bool:
        return (self._next_seq - self._next_to_send >= self._max_queued or self._out_bytes > OUTPUT_HIGH_WATER
                or self._queued_bytes > self._max_queued_bytes)

    def _under_low_water(self) -> bool:
        return (self._next_seq - self._next_to_send < self._max_queued // 2 and self._out_bytes <= OUTPUT_HIGH_WATER // 2
                and self._queued_bytes <= self._max_queued_bytes // 2)

    # ------------------------------------------------------------------ handoff
    def request_handoff(self, target: int) -> None:
        """Move this connection to worker ``target`` as soon as it is at a clean boundary
        (at most once per connection; a connection that was handed over stays put)."""
        if self._may_hand_off and not self.closed and target != self.node.index:
            self._may_hand_off = False
            self._handoff_to = target

    def _bytes_to_boundary(self) -> int:
        """How many bytes complete the partial frame in the input buffer (0: none is partial)."""
        buf = self._inbuf
        if len(buf) < 4:
            return 4 - len(buf) if buf else 0
        return 4 + max(0, int.from_bytes(buf[0:4], "big", signed=True)) - len(buf)

    def _maybe_hand_off(self) -> None:
        if self._handoff_to is None or self.closed or self._inbuf or self._big is not None or not self.idle:
            return
        target, self._handoff_to = self._handoff_to, None
        self._pause_reading()
        if not self.node.hand_off(target, self.sock):
            self._resume_reading()
            return
        # The other worker holds the socket now. close() only drops this process's fd (no
        # shutdown), and with the connection idle it has nothing else to release.
        self.close()

    # ------------------------------------------------------------------ reading
    def _on_readable(self) -> None:
        if self._big is not None:
            self._read_big_frame()
            return
        want = RECV_SIZE
        if self._handoff_to is not None:
            want = min(RECV_SIZE, self._bytes_to_boundary())
            if want == 0:
                self._pause_reading()
                self._maybe_hand_off()
                return
        try:
            data = self.sock.recv(want)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self.close()
            return
        if not data:
            self.close()
            return
        self.last_active = time.monotonic()
        self._inbuf += data
        try:
            self._read_frames()
        except ProtocolViolation as exc:
            log.info("closing %s: %s", self.peer, exc)
            self.close()
        self._maybe_hand_off()

    def _read_frames(self) -> None:
        buf = self._inbuf
        position = 0
        available = len(buf)
        while available - position >= 4:
            size = int.from_bytes(buf[position:position + 4], "big", signed=True)
            if size < 0 or size > self._max_request:
                raise ProtocolViolation(f"frame of {size} bytes (socket.request.max.bytes is {self._max_request})")
            if available - position - 4 < size:
                if size >= LARGE_FRAME:
                    # Receive the rest straight into the frame's own buffer: no re-copying
                    # of a growing inbuf for large Produce requests. Not zeroed first
                    # (broker/memory.py): it is read only once recv_into has filled it.
                    self._big = receive_buffer(size)
                    have = available - position - 4
                    self._big[:have] = buf[position + 4:available]
                    self._big_filled = have
                    position = available
                break
            frame = bytes(buf[position + 4:position + 4 + size])
            position += 4 + size
            self._handle_frame(frame)
            if self.closed:
                return
            if self._over_limits():
                self._pause_reading()
                break
        if position:
            del buf[:position]

    def _read_big_frame(self) -> None:
        big = self._big
        assert big is not None
        with memoryview(big) as view:
            while self._big_filled < len(big):  # drain what the socket has: fewer loop turns
                try:
                    received = self.sock.recv_into(view[self._big_filled:])
                except (BlockingIOError, InterruptedError):
                    return
                except OSError:
                    self.close()
                    return
                if not received:
                    self.close()
                    return
                self._big_filled += received
                self.last_active = time.monotonic()
        self._big = None
        try:
            # The buffer itself, not a copy: it is this frame's alone (a new one per frame),
            # and Produce keeps views into it until the records are in the log.
            self._handle_frame(big)
            if not self.closed and self._over_limits():
                self._pause_reading()
        except ProtocolViolation as exc:
            log.info("closing %s: %s", self.peer, exc)
            self.close()

    def _handle_frame(self, frame: bytes | bytearray) -> None:
        spec, header, request = decode_frame(frame)
        seq = self._next_seq
        self._next_seq += 1
        self._queued_bytes += len(frame)
        self.node.stats["requests"] += 1
        ctx = RequestContext(self.node, self, header.api_key, header.api_version, header.correlation_id, header.client_id,
                             len(frame), time.perf_counter())
        if request is None:  # ApiVersions of a version we do not speak
            from broker.apis.api_versions import unsupported_version_response

            self._finish(seq, ctx, unsupported_version_response())
            return
        try:
            result = spec.handle(ctx, request)
            if spec.is_async:
                finished, result = eager.start(self.loop, result)
                if not finished:
                    self._tasks.add(result)
                    result.add_done_callback(lambda t, seq=seq, ctx=ctx, request=request:
                                             self._task_done(t, seq, ctx, spec, request))
                    return
        except asyncio.CancelledError:
            self.close()  # as for a cancelled task (_task_done)
            return
        except Exception as exc:
            self._finish(seq, ctx, self._error_answer(spec, request, header.api_version, exc))
            return
        self._finish(seq, ctx, result)

    def _task_done(self, task: asyncio.Task[Any], seq: int, ctx: RequestContext, spec: dispatch.HandlerSpec,
                   request: Any) -> None:
        self._tasks.discard(task)
        if self.closed:
            if not task.cancelled() and task.exception() is None and isinstance(task.result(), RawResponse):
                task.result().release()
            return
        if task.cancelled():
            self.close()
            return
        exc = task.exception()
        if exc is not None:
            self._finish(seq, ctx, self._error_answer(spec, request, ctx.api_version, exc))
        else:
            self._finish(seq, ctx, task.result())

    def _error_answer(self, spec: dispatch.HandlerSpec, request: Any, version: int, exc: BaseException) -> Any:
        code = code_for_exception(exc)
        if spec.error_response is None:
            log.error("closing %s: %s v%d failed", self.peer, spec.name, version, exc_info=exc)
            return _CLOSE
        return spec.error_response(request, version, int(code))

    # ------------------------------------------------------------------ responses, in order
    def _finish(self, seq: int, ctx: RequestContext, result: Any) -> None:
        if result is _CLOSE:
            self.close()
            return
        self._queued_bytes -= ctx.frame_size
        spec = dispatch.REGISTRY.get(ctx.api_key)
        if spec is not None:
            elapsed = time.perf_counter() - ctx.started
            self.node.metrics.request_done(spec.name, ctx.api_version, elapsed)
            if request_log.isEnabledFor(logging.DEBUG):  # the request log: log.level=DEBUG
                request_log.debug("api=%s version=%d correlation_id=%d client_id=%s peer=%s bytes=%d ms=%.3f",
                                  spec.name, ctx.api_version, ctx.correlation_id, ctx.client_id, self.peer,
                                  ctx.frame_size, elapsed * 1000)
        framed = self._frame(ctx, result)
        if seq == self._next_to_send and not self._finished:
            # Answered in order with nothing held back: the usual case, queued at once.
            self._next_to_send += 1
            if framed is not None:
                self._queue_chunks(framed)
        else:
            self._finished[seq] = framed
            while self._next_to_send in self._finished:
                chunks = self._finished.pop(self._next_to_send)
                self._next_to_send += 1
                if chunks is not None:
                    self._queue_chunks(chunks)
        self._schedule_flush()
        self._maybe_resume_reading()
        self._maybe_hand_off()

    def _queue_chunks(self, chunks: list[bytes | FileChunk]) -> None:
        for chunk in chunks:
            if isinstance(chunk, FileChunk):
                size = chunk.length
                if not size:
                    # An empty piece (a non-flexible Fetch answer ends with its records)
                    # would make _flush spin: sendmsg sends 0 bytes and pops nothing.
                    os.close(chunk.fd)
                    continue
                self._out_files += 1
            else:
                size = len(chunk)
                if not size:
                    continue
            self._out.append(chunk)
            self._out_bytes += size

    def _schedule_flush(self) -> None:
        """Write at the end of this loop turn, once, whatever was answered in it.

        A pipelining producer gets many answers per turn (a recv holds many requests), and
        one sendmsg per answer cost a syscall, and on loopback the receiver's TCP work,
        each: strace of a worker at ~9,600 small Produce requests a second counted 48,757
        sendmsg against 728 recv (issue 5, fixed-rate benchmark). Waiting for a writable
        socket already flushes from the writer callback."""
        if not self._flush_scheduled and not self._writing and not self.closed:
            self._flush_scheduled = True
            self.loop.call_soon(self._scheduled_flush)

    def _scheduled_flush(self) -> None:
        self._flush_scheduled = False
        if not self.closed:
            self._flush()

    def _maybe_resume_reading(self) -> None:
        """Resume reading once under the low-water marks, answering first the whole frames
        already in the input buffer: the socket may hold nothing more, so no readable event
        would come for them (a pipelining client that sent everything would wait forever)."""
        if self._reading or self.closed or not self._under_low_water():
            return
        self._resume_reading()
        if self._inbuf:
            try:
                self._read_frames()
            except ProtocolViolation as exc:
                log.info("closing %s: %s", self.peer, exc)
                self.close()

    def _frame(self, ctx: RequestContext, result: Any) -> list[bytes | FileChunk] | None:
        if result is dispatch.NO_RESPONSE:
            return None
        # ApiVersions answers with header v0 always; others use v1 when the API version is flexible.
        flexible_header = ctx.api_key != framing.API_VERSIONS_KEY and codec.is_flexible(ctx.api_key, ctx.api_version)
        if isinstance(result, RawResponse):
            return [framing.response_prefix(ctx.correlation_id, result.size, flexible_header), *result.chunks]
        if isinstance(result, (bytes, bytearray)):
            body = bytes(result)
        else:
            body = codec.encode_body(result)
        return [framing.response_prefix(ctx.correlation_id, len(body), flexible_header) + body]

    # ------------------------------------------------------------------ writing
    def _flush(self) -> None:
        out = self._out
        if out:
            self.last_active = time.monotonic()
        # A Fetch over many partitions is a file range and a few header bytes per
        # partition: one sendfile and one sendmsg each. With TCP_NODELAY every one of them
        # left as its own small segment (at 1,000 partitions the two calls were 20% of a
        # worker's time). Corked, the kernel packs them into full segments; uncorking at
        # every exit (done, or the socket full) sends the rest at once, never late.
        corked = self._out_files > 1
        try:
            if corked:
                self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 1)
            while out:
                head = out[0]
                if isinstance(head, FileChunk):
                    sent = os.sendfile(self.fd, head.fd, head.position, head.length)
                    if sent == 0:
                        raise ConnectionError("file ended before the promised length")
                    head.position += sent
                    head.length -= sent
                    self._out_bytes -= sent
                    if head.length == 0:
                        out.popleft()
                        os.close(head.fd)
                        self._out_files -= 1
                    continue
                buffers: list[bytes | memoryview] = []
                for item in out:
                    if isinstance(item, FileChunk) or len(buffers) == MAX_IOV:
                        break
                    buffers.append(item)
                sent = self.sock.sendmsg(buffers)
                self._out_bytes -= sent
                while sent:
                    first = out[0]
                    assert not isinstance(first, FileChunk)
                    if sent >= len(first):
                        sent -= len(first)
                        out.popleft()
                    else:
                        out[0] = memoryview(first)[sent:]
                        sent = 0
        except (BlockingIOError, InterruptedError):
            if corked:
                self._uncork()
            if not self._writing:
                self.loop.add_writer(self.fd, self._flush)
                self._writing = True
            return
        except OSError as exc:
            log.info("closing %s: %s", self.peer, exc)
            self.close()
            return
        if corked:
            self._uncork()
        if self._writing:
            self.loop.remove_writer(self.fd)
            self._writing = False
        self._maybe_resume_reading()
        self._maybe_hand_off()

    def _uncork(self) -> None:
        try:
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 0)
        except OSError:
            pass  # the peer is gone: the next write says so

    # ------------------------------------------------------------------ closing
    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self._reading:
            self.loop.remove_reader(self.fd)
        if self._writing:
            self.loop.remove_writer(self.fd)
        for chunk in self._out:
            if isinstance(chunk, FileChunk):
                os.close(chunk.fd)
        for chunks in self._finished.values():
            for chunk in chunks or ():
                if isinstance(chunk, FileChunk):
                    os.close(chunk.fd)
        self._out.clear()
        self._finished.clear()
        for task in self._tasks:
            task.cancel()
        self.sock.close()
        self._connections.discard(self)


_CLOSE = object()


def decode_frame(frame: bytes | bytearray) -> tuple[dispatch.HandlerSpec, framing.RequestHeader, Any]:
    """Header and body of one request frame (sans-I/O). The request is None for an
    ApiVersions request of a version we do not speak (answered UNSUPPORTED_VERSION);
    anything else we cannot answer raises ProtocolViolation (the connection closes)."""
    api_key, api_version, _correlation_id = framing.peek_api(frame)
    spec = dispatch.REGISTRY.get(api_key)
    if spec is None:
        raise ProtocolViolation(f"unknown api key {api_key}")
    header = framing.parse_request_header(frame, codec.is_flexible(api_key, api_version))
    if not spec.min_version <= api_version <= spec.max_version:
        if api_key == framing.API_VERSIONS_KEY:
            return spec, header, None
        raise ProtocolViolation(f"{spec.name} v{api_version} is not supported")
    if spec.decode is not None:
        return spec, header, spec.decode(api_version, frame, header.body_offset)
    # kio's entities keep bytes fields as slices of what they are given: give it bytes.
    return spec, header, codec.decode_request(api_key, api_version, bytes(frame), header.body_offset)


def _peer_name(sock: socket.socket) -> str:
    try:
        host, port = sock.getpeername()[:2]
        return f"{host}:{port}"
    except OSError:
        return "?"


__all__ = ["Connection", "FileChunk", "RawResponse", "RequestContext", "ErrorCode"]
