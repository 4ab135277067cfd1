"""One client connection: reads request frames, runs their handlers, answers in order.

The pieces, each in its own module:
    broker/protocol/frame_reader.py   cutting frames out of the byte stream (sans-I/O)
    broker/network/sequencer.py       responses in request order (P5)
    broker/network/socket_writer.py   sendmsg and os.sendfile on the raw socket
    broker/context.py         what handlers get and return
This module reads the socket (add_reader on the raw non-blocking fd), decodes each frame,
starts its handler, and applies flow control. A connection stays on the worker the kernel
gave it; partitions other workers own are reached over the rings (broker/links/mesh.py).

Backpressure: reading pauses while ``queued.max.requests`` requests are unanswered, or
their frames hold more than ``queued.max.request.bytes``, or more than OUTPUT_HIGH_WATER
bytes wait to be sent, and resumes below half of that. The byte bound is what keeps a
worker's memory flat under a producer that pipelines 1 MB Produce requests: 500 of
them would be 500 MB.

A protocol violation (bad size, unknown API, unparseable body, unsupported version of
anything but ApiVersions) closes this connection only.

Security (broker/security/): on a TLS listener the socket's bytes pass through a
TlsChannel (broker/network/tls_channel.py) both ways, and file ranges are encrypted in chunks
instead of sent with sendfile. On a SASL listener, until the client authenticated, only
ApiVersions, SaslHandshake and SaslAuthenticate are served (anything else closes the
connection, as Kafka does) and no frame above ``sasl.server.max.receive.size`` is read;
reading pauses while a token is checked; a failed authentication is answered, then the
connection closes (broker/security/connection_auth.py has the rules).
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import ssl
import time
from typing import TYPE_CHECKING, Any, Callable

from broker import dispatch
from broker.context import NO_RESPONSE, FileChunk, RawResponse, RequestContext, Response
from broker.listeners import Listener
from broker.network import eager, request_quota
from broker.network.sequencer import ResponseSequencer
from broker.network.socket_writer import Chunk, SocketWriter
from broker.network.tls_channel import TlsChannel, TlsSocketWriter
from broker.protocol import codec, framing
from broker.protocol.errors import ProtocolViolation, code_for_exception
from broker.protocol.frame_reader import FrameReader
from broker.security.connection_auth import SASL_AUTHENTICATE, ConnectionAuth
from broker.security.sasl_server import SaslAuthenticationFailed
from broker.security.tls import principal_of_certificate

if TYPE_CHECKING:
    from broker.process.node import WorkerNode

log = logging.getLogger(__name__)
request_log = logging.getLogger("castle.requests")

RECV_SIZE = 256 * 1024
OUTPUT_HIGH_WATER = 16 * 1024 * 1024


class Connection:
    def __init__(self, sock: socket.socket, node: "WorkerNode", connections: set["Connection"], listener: Listener) -> None:
        self.sock = sock
        self.fd = sock.fileno()
        self.node = node
        self.listener = listener
        self.loop = asyncio.get_running_loop()
        self.peer = _peer_name(sock)
        self.host = self.peer.rpartition(":")[0]
        self.client_software: tuple[str | None, str | None] = (None, None)
        self._connections = connections
        security = node.security
        self.auth = ConnectionAuth(listener, security.mechanisms(listener.name), security.reauth_ms, security.lookup,
                                   security.broker_secret, security.token_lookup)
        self._max_request = node.config.get_int("socket.request.max.bytes")
        self._reader = FrameReader(min(self._max_request, security.max_receive_size) if listener.sasl else self._max_request)
        self._tls: TlsChannel | None = None
        self._writer: SocketWriter
        if listener.tls:
            self._tls = TlsChannel(security.server_context(listener.name))
            self._writer = TlsSocketWriter(sock, self.loop, self._sent, self._write_failed, self._tls)
        else:
            self._writer = SocketWriter(sock, self.loop, self._sent, self._write_failed)
        self._authenticating = False  # a SASL token is being checked: read nothing more
        self._closing = False  # close once the answers queued so far are sent
        self._sequencer: ResponseSequencer[list[Chunk]] = ResponseSequencer(self._writer.queue)
        self._reading = False
        self._tasks: set[asyncio.Task[Any]] = set()
        self.closed = False
        self._last_read = time.monotonic()
        self._draining = False  # graceful stop: no new requests are read
        self._max_queued = node.config.get_int("queued.max.requests")
        self._max_queued_bytes = node.config.get_int("queued.max.request.bytes")
        self._queued_bytes = 0  # frames of unanswered requests
        self._on_close: list[Callable[[], None]] = []
        self._muted = False  # a quota's throttle: read nothing until _unmute runs
        self._unmute: asyncio.TimerHandle | None = None
        self._muted_until = 0.0
        connections.add(self)
        self._resume_reading()

    # ------------------------------------------------------------------ state
    @property
    def idle(self) -> bool:
        """No request in flight and nothing left to send (graceful shutdown waits for this)."""
        return self._sequencer.in_flight == 0 and self._writer.idle

    @property
    def last_active(self) -> float:
        """When a byte last went in or out (connections.max.idle.ms)."""
        return max(self._last_read, self._writer.last_active)

    def _pause_reading(self) -> None:
        if self._reading:
            self.loop.remove_reader(self.fd)
            self._reading = False

    def drain(self) -> None:
        """Graceful stop: read no further requests (and do not move); the ones in flight
        finish and are answered, after which the connection is idle and can be closed."""
        self._draining = True
        self._pause_reading()

    def _resume_reading(self) -> None:
        if not self._reading and not self.closed and not self._draining:
            self.loop.add_reader(self.fd, self._on_readable)
            self._reading = True

    def _over_limits(self) -> bool:
        return (self._authenticating or self._muted or self._closing or self._sequencer.in_flight >= self._max_queued or self._writer.out_bytes > OUTPUT_HIGH_WATER
                or self._queued_bytes > self._max_queued_bytes)

    def _under_low_water(self) -> bool:
        return (not self._authenticating and not self._muted and not self._closing and self._sequencer.in_flight < self._max_queued // 2 and self._writer.out_bytes <= OUTPUT_HIGH_WATER // 2
                and self._queued_bytes <= self._max_queued_bytes // 2)

    # ------------------------------------------------------------------ reading
    def _on_readable(self) -> None:
        if self._tls is not None:
            self._on_tls_readable(self._tls)
            return
        if self._reader.receiving_big:
            self._read_big_frame()
            return
        data = self._recv()
        if data:
            self._reader.feed(data)
            self._read_frames()

    def _recv(self) -> bytes | None:
        """What the socket has (up to RECV_SIZE); None when nothing now or the connection closed."""
        try:
            data = self.sock.recv(RECV_SIZE)
        except (BlockingIOError, InterruptedError):
            return None
        except OSError:
            self.close()
            return None
        if not data:
            self.close()
            return None
        self._last_read = time.monotonic()
        return data

    def _read_frames(self) -> None:
        reader = self._reader
        try:
            while True:
                frame = reader.next_frame()
                if frame is None:
                    if reader.receiving_big and self._tls is None:  # TLS fills it from its records
                        self._read_big_frame()
                    return
                self._handle_frame(frame)
                if self.closed:
                    return
                if self._over_limits():
                    self._pause_reading()
                    return
        except ProtocolViolation as exc:
            log.info("closing %s: %s", self.peer, exc)
            self.close()

    def _read_big_frame(self) -> None:
        """Drain what the socket has into the large frame's buffer: fewer loop turns."""
        reader = self._reader
        while True:
            with reader.big_space() as space:
                try:
                    received = self.sock.recv_into(space)
                except (BlockingIOError, InterruptedError):
                    return
                except OSError:
                    self.close()
                    return
            if not received:
                self.close()
                return
            self._last_read = time.monotonic()
            frame = reader.big_received(received)
            if frame is not None:
                break
        self._take_big_frame(frame)

    def _take_big_frame(self, frame: bytearray) -> None:
        try:
            # The buffer itself, not a copy: it is this frame's alone (a new one per frame),
            # and Produce keeps views into it until the records are in the log.
            self._handle_frame(frame)
            if not self.closed and self._over_limits():
                self._pause_reading()
        except ProtocolViolation as exc:
            log.info("closing %s: %s", self.peer, exc)
            self.close()

    # ------------------------------------------------------------------ TLS
    def _on_tls_readable(self, tls: TlsChannel) -> None:
        data = self._recv()
        if not data:
            return
        tls.received(data)
        writer = self._writer
        assert isinstance(writer, TlsSocketWriter)
        try:
            if not tls.established:
                done = tls.handshake()
                writer.send_handshake()
                if not done:
                    return
                if not self.listener.sasl:  # SSL: the client certificate names the principal
                    self.auth.principal = principal_of_certificate(tls.peer_certificate())
            self._read_tls_plaintext(tls)
        except ssl.SSLError as exc:
            log.info("closing %s: TLS: %s", self.peer, exc)
            writer.send_handshake()  # the alert, if the socket takes it now
            self.close()

    def _read_tls_plaintext(self, tls: TlsChannel) -> None:
        """Frames out of the TLS records received so far, large frames straight into
        their own buffers; stops when reading pauses (resuming comes back here). A
        close_notify from the peer closes the connection."""
        try:
            self._read_tls_records(tls)
        except EOFError:
            self.close()
        except ssl.SSLError as exc:
            log.info("closing %s: TLS: %s", self.peer, exc)
            self.close()

    def _read_tls_records(self, tls: TlsChannel) -> None:
        reader = self._reader
        while self._reading and not self.closed:
            if reader.receiving_big:
                with reader.big_space() as space:
                    count = tls.read_into(space)
                if not count:
                    break
                frame = reader.big_received(count)
                if frame is not None:
                    self._take_big_frame(frame)
                continue
            data = tls.read(RECV_SIZE)
            if not data:
                break
            reader.feed(data)
            self._read_frames()
        if tls.wants_to_send and not self.closed:
            writer = self._writer
            assert isinstance(writer, TlsSocketWriter)
            writer.send_handshake()

    # ------------------------------------------------------------------ requests
    def _handle_frame(self, frame: bytes | bytearray) -> None:
        auth = self.auth
        if not auth.authenticated or auth.raw_tokens or auth.expires:
            if auth.raw_tokens:
                self._handle_raw_token(frame)
                return
            api_key = framing.peek_api(frame)[0]
            if not auth.allowed(api_key):
                why = "authentication expired" if auth.authenticated else "not authenticated"
                raise ProtocolViolation(f"api key {api_key} on a {self.listener.protocol} connection: {why}")
        spec, header, request = decode_frame(frame)
        if header.api_key == SASL_AUTHENTICATE:
            self._authenticating = True  # answered in _finish
        seq = self._sequencer.take()
        self._queued_bytes += len(frame)
        self.node.stats["requests"] += 1
        ctx = RequestContext(self.node, self, header.api_key, header.api_version, header.correlation_id, header.client_id,
                             len(frame), time.perf_counter())
        if request is None:  # ApiVersions of a version we do not speak
            from broker.apis.api_versions import unsupported_version_response

            self._finish(seq, ctx, unsupported_version_response())
            return
        try:
            if spec.authorize is not None:
                refused = spec.authorize(ctx, request)
                if refused:
                    assert spec.error_response is not None
                    self._finish(seq, ctx, spec.error_response(request, header.api_version, refused))
                    return
            if self.node.quotas.table.request:  # request_percentage: timed (broker/network/request_quota.py)
                result = request_quota.handle(ctx, spec, request)
            else:
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
        if isinstance(exc, ProtocolViolation):  # a body only the coordinator process read
            log.info("closing %s: %s v%d: %s", self.peer, spec.name, version, exc)
            return _CLOSE
        code = code_for_exception(exc)
        if spec.error_response is None:
            log.error("closing %s: %s v%d failed", self.peer, spec.name, version, exc_info=exc)
            return _CLOSE
        try:
            return spec.error_response(request, version, int(code))
        except ProtocolViolation as violation:  # a coordinator API's body, decoded only now, is bad
            log.info("closing %s: %s v%d: %s", self.peer, spec.name, version, violation)
            return _CLOSE

    def _handle_raw_token(self, frame: bytes | bytearray) -> None:
        """After SaslHandshake v0 a frame is a bare SASL token, answered by a bare frame; a
        failure closes the connection without an answer, as Kafka does."""
        seq = self._sequencer.take()
        self._authenticating = True
        task = self.loop.create_task(self.auth.authenticate(bytes(frame)))
        self._tasks.add(task)

        def done(task: "asyncio.Task[tuple[bytes, bool]]") -> None:
            self._tasks.discard(task)
            if self.closed or task.cancelled():
                return
            exc = task.exception()
            if exc is not None:
                if not isinstance(exc, SaslAuthenticationFailed):
                    log.error("closing %s: SASL token failed", self.peer, exc_info=exc)
                else:
                    log.info("closing %s: authentication failed: %s", self.peer, exc)
                self.close()
                return
            token, _complete = task.result()
            self._authenticated_step()
            self._sequencer.finish(seq, [len(token).to_bytes(4, "big") + token])
            self._writer.schedule_flush()
            self._maybe_resume_reading()

        task.add_done_callback(done)

    def _authenticated_step(self) -> None:
        """A SASL token was answered: read again, at full frame size once authenticated."""
        self._authenticating = False
        if self.auth.authenticated:
            self._reader.set_limit(self._max_request)

    def close_after_answer(self) -> None:
        """Close once the answers queued so far are sent (a failed authentication); read no more."""
        self._closing = True
        self._pause_reading()

    def mute_after_answer(self, delay_ms: int) -> None:
        """Kafka's throttling of a client over its quota (KIP-219): the answer carrying
        throttle_time_ms goes out at once; then nothing is read from the connection for
        ``delay_ms``, so a client that ignores the hint is held back all the same."""
        if delay_ms <= 0 or self.closed:
            return
        until = self.loop.time() + delay_ms / 1000
        if until <= self._muted_until:
            return
        self._muted_until = until
        self._muted = True
        self._pause_reading()
        if self._unmute is not None:
            self._unmute.cancel()
        self._unmute = self.loop.call_at(until, self._unmuted)

    def _unmuted(self) -> None:
        self._unmute = None
        self._muted = False
        self._maybe_resume_reading()

    # ------------------------------------------------------------------ responses, in order
    def _finish(self, seq: int, ctx: RequestContext, result: Any) -> None:
        if result is _CLOSE:
            self.close()
            return
        if ctx.api_key == SASL_AUTHENTICATE:
            self._authenticated_step()
        self._queued_bytes -= ctx.frame_size
        spec = dispatch.REGISTRY.get(ctx.api_key)
        if spec is not None:
            elapsed = time.perf_counter() - ctx.started
            self.node.metrics.request_done(spec.name, ctx.api_version, elapsed)
            if request_log.isEnabledFor(logging.DEBUG):  # the request log: log.level=DEBUG
                request_log.debug("api=%s version=%d correlation_id=%d client_id=%s peer=%s bytes=%d ms=%.3f",
                                  spec.name, ctx.api_version, ctx.correlation_id, ctx.client_id, self.peer,
                                  ctx.frame_size, elapsed * 1000)
        self._sequencer.finish(seq, self._frame(ctx, result))
        self._writer.schedule_flush()
        self._maybe_resume_reading()

    def _sent(self) -> None:
        """Everything queued went out."""
        if self._closing and self._sequencer.in_flight == 0:
            self.close()
            return
        self._maybe_resume_reading()

    def _write_failed(self, exc: OSError) -> None:
        log.info("closing %s: %s", self.peer, exc)
        self.close()

    def _maybe_resume_reading(self) -> None:
        """Resume reading once under the low-water marks, answering first the whole frames
        already in the input buffer: the socket may hold nothing more, so no readable event
        would come for them (a pipelining client that sent everything would wait forever)."""
        if self._reading or self.closed or not self._under_low_water():
            return
        self._resume_reading()
        if self._reader.buffered:
            self._read_frames()
        if self._tls is not None and self._tls.established and not self.closed:
            self._read_tls_plaintext(self._tls)

    def _frame(self, ctx: RequestContext, result: Response) -> list[Chunk] | None:
        if result is NO_RESPONSE:
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

    # ------------------------------------------------------------------ closing
    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self._unmute is not None:
            self._unmute.cancel()
            self._unmute = None
        if self._reading:
            self.loop.remove_reader(self.fd)
            self._reading = False
        self._writer.close()
        for chunks in self._sequencer.drop_held():
            for chunk in chunks:
                if isinstance(chunk, FileChunk):
                    os.close(chunk.fd)
        for task in self._tasks:
            task.cancel()
        self.sock.close()
        self._connections.discard(self)
        callbacks, self._on_close = self._on_close, []
        for callback in callbacks:
            try:
                callback()
            except Exception:
                log.exception("a connection close callback failed")

    def on_close(self, callback: Callable[[], None]) -> None:
        """Run ``callback`` once this connection closes (a share session ends with it)."""
        if self.closed:
            callback()
        else:
            self._on_close.append(callback)


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


__all__ = ["Connection", "decode_frame"]
