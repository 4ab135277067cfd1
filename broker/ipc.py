"""Local IPC between the workers of one broker: calls and notes over Unix sockets.

The supervisor creates one listening Unix socket per worker slot (in a private runtime
dir) before forking, and keeps it across restarts of that worker, so peers always know
where to connect. Each worker accepts on its own socket and connects lazily to the
others. A message on the wire::

    size     uint32        bytes that follow
    payload  pickle (protocol 5) of a tuple:
               ("call", id, op, args)   ask the peer to run ops[op](*args)
               ("ret",  id, result)     the answer
               ("err",  id, code, msg)  the op failed with a Kafka error code
               ("note", op, args)       one-way (appends for long-poll, registry changes)

pickle is safe here: both ends are our own processes, and the socket dir is 0700.
"""

from __future__ import annotations

import asyncio
import copyreg
import io
import itertools
import logging
import os
import pickle
import socket
import struct
from typing import Any, Awaitable, Callable

from broker.protocol.errors import ErrorCode, KafkaError, code_for_exception

log = logging.getLogger(__name__)

SIZE = struct.Struct(">I")
assert SIZE.size == 4

Op = Callable[..., Any]


def socket_path(runtime_dir: str, index: int) -> str:
    return os.path.join(runtime_dir, f"worker-{index}.sock")


def bind_unix(path: str, kind: socket.SocketKind) -> socket.socket:
    """A Unix socket bound at ``path`` (a stale file there is replaced), inheritable: the
    supervisor binds worker sockets so that they outlive worker restarts."""
    if os.path.exists(path):
        os.unlink(path)
    sock = socket.socket(socket.AF_UNIX, kind)
    sock.bind(path)
    sock.set_inheritable(True)
    return sock


def make_listener(runtime_dir: str, index: int) -> socket.socket:
    """Bind and listen (done by the supervisor; the socket outlives worker restarts)."""
    sock = bind_unix(socket_path(runtime_dir, index), socket.SOCK_STREAM)
    sock.listen(64)
    return sock


# Produce records arrive as views into their request's buffer (broker/protocol/
# produce_request.py); pickle refuses memoryviews, so a forwarded one goes as bytes.
_REDUCERS = copyreg.dispatch_table.copy()
_REDUCERS[memoryview] = lambda view: (bytes, (view.tobytes(),))


def _pack(message: tuple[Any, ...]) -> bytes:
    out = io.BytesIO()
    out.write(bytes(SIZE.size))
    pickler = pickle.Pickler(out, protocol=5)
    pickler.dispatch_table = _REDUCERS
    pickler.dump(message)
    size = out.tell() - SIZE.size
    out.seek(0)
    out.write(SIZE.pack(size))
    return out.getvalue()


async def _read_message(reader: asyncio.StreamReader) -> tuple[Any, ...]:
    (size,) = SIZE.unpack(await reader.readexactly(4))
    data: tuple[Any, ...] = pickle.loads(await reader.readexactly(size))
    return data


class IpcServer:
    """Runs the ops peers ask for. Ops may be plain functions or coroutine functions."""

    def __init__(self, listener: socket.socket, ops: dict[str, Op], notes: dict[str, Op]) -> None:
        self._listener = listener
        self._ops = ops
        self._notes = notes
        self._server: asyncio.AbstractServer | None = None
        self._tasks: set[asyncio.Task[Any]] = set()

    async def start(self) -> None:
        self._listener.setblocking(False)
        self._server = await asyncio.start_unix_server(self._serve, sock=self._listener)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                message = await _read_message(reader)
                if message[0] == "note":
                    self._run_note(message[1], message[2])
                    continue
                _kind, call_id, op, args = message
                self._call(writer, call_id, op, args)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    def _run_note(self, op: str, args: tuple[Any, ...]) -> None:
        try:
            result = self._notes[op](*args)
            if asyncio.iscoroutine(result):
                task = asyncio.ensure_future(result)
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
        except Exception:
            log.exception("note %s failed", op)

    def _call(self, writer: asyncio.StreamWriter, call_id: int, op: str, args: tuple[Any, ...]) -> None:
        """Run the op; a plain function is answered at once, a coroutine in a task. Most
        ops (appends, reads) are plain: a task per call cost a measurable share of a
        small forwarded Produce (issue 5, fixed-rate benchmark)."""
        try:
            result = self._ops[op](*args)
        except Exception as exc:
            self._reply(writer, ("err", call_id, int(code_for_exception(exc)), str(exc)))
            return
        if asyncio.iscoroutine(result):
            task = asyncio.ensure_future(self._answer(writer, call_id, result))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        else:
            self._reply(writer, ("ret", call_id, result))

    async def _answer(self, writer: asyncio.StreamWriter, call_id: int, pending: Awaitable[Any]) -> None:
        try:
            reply: tuple[Any, ...] = ("ret", call_id, await pending)
        except Exception as exc:
            reply = ("err", call_id, int(code_for_exception(exc)), str(exc))
        self._reply(writer, reply)

    @staticmethod
    def _reply(writer: asyncio.StreamWriter, reply: tuple[Any, ...]) -> None:
        if not writer.is_closing():
            writer.write(_pack(reply))

    def close(self) -> None:
        if self._server is not None:
            self._server.close()


class PeerUnavailable(KafkaError):
    def __init__(self, index: int, why: str) -> None:
        # Retriable for clients: the partition's owner is restarting.
        super().__init__(ErrorCode.not_leader_or_follower, f"worker {index} is unavailable: {why}")


class PeerLink:
    """Our connection to one peer worker, for calls and notes.

    Messages leave in the order ``call``/``note`` are called (both send before returning),
    so appends forwarded for requests pipelined on one client connection reach the owner
    in request order. Messages made while not connected wait in a backlog, in order,
    behind the one connect attempt."""

    def __init__(self, index: int, path: str) -> None:
        self.index = index
        self._path = path
        self._writer: asyncio.StreamWriter | None = None
        self._reader_task: asyncio.Task[None] | None = None
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self._ids = itertools.count(1)
        self._backlog: list[tuple[int | None, bytes]] = []
        self._connect_task: asyncio.Task[None] | None = None
        self._sent: set[int] = set()  # ids of the calls written to the current connection

    def _send(self, call_id: int | None, data: bytes) -> None:
        writer = self._writer
        if writer is not None and not writer.is_closing() and not self._backlog:
            writer.write(data)
            if call_id is not None:
                self._sent.add(call_id)
            return
        self._backlog.append((call_id, data))
        if self._connect_task is None:
            self._connect_task = asyncio.ensure_future(self._connect())

    async def _connect(self) -> None:
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_unix_connection(self._path), 5)
        except (OSError, asyncio.TimeoutError) as exc:
            self._connect_task = None
            backlog, self._backlog = self._backlog, []
            for call_id, _data in backlog:
                future = self._pending.pop(call_id, None) if call_id is not None else None
                if future is not None and not future.done():
                    future.set_exception(PeerUnavailable(self.index, repr(exc)))
            return  # a note to a restarting peer is moot: it re-reads state on start
        self._connect_task = None
        self._writer = writer
        sent: set[int] = set()
        self._sent = sent
        self._reader_task = asyncio.ensure_future(self._read_replies(reader, writer, sent))
        backlog, self._backlog = self._backlog, []
        for call_id, data in backlog:
            writer.write(data)
            if call_id is not None:
                sent.add(call_id)

    async def _read_replies(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, sent: set[int]) -> None:
        try:
            while True:
                message = await _read_message(reader)
                sent.discard(message[1])
                future = self._pending.pop(message[1], None)
                if future is None or future.done():
                    continue
                if message[0] == "ret":
                    future.set_result(message[2])
                else:
                    future.set_exception(KafkaError(ErrorCode(message[2]), message[3]))
        except (asyncio.IncompleteReadError, ConnectionError, OSError):
            pass
        finally:
            writer.close()
            if self._writer is writer:
                self._writer = None
            # The calls written to this connection are lost (not backlogged ones, nor
            # ones written to a newer connection).
            for call_id in sent:
                future = self._pending.pop(call_id, None)
                if future is not None and not future.done():
                    future.set_exception(PeerUnavailable(self.index, "connection lost"))
            sent.clear()

    def call(self, op: str, *args: Any, timeout: float = 30.0) -> Awaitable[Any]:
        """Send now; await the result (REQUEST_TIMED_OUT after ``timeout`` s).

        The future itself is returned, with a timer for the timeout, rather than a
        coroutine around asyncio.wait_for: that was a task and a timer per forwarded call.
        """
        call_id = next(self._ids)
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        self._pending[call_id] = future
        timer = loop.call_later(timeout, self._expire, call_id, op)
        future.add_done_callback(lambda _f: timer.cancel())
        self._send(call_id, _pack(("call", call_id, op, args)))
        return future

    def _expire(self, call_id: int, op: str) -> None:
        self._sent.discard(call_id)
        future = self._pending.pop(call_id, None)
        if future is not None and not future.done():
            future.set_exception(KafkaError(ErrorCode.request_timed_out, f"worker {self.index} did not answer {op}"))

    def note(self, op: str, *args: Any) -> None:
        self._send(None, _pack(("note", op, args)))

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
        if self._reader_task is not None:
            self._reader_task.cancel()
        if self._connect_task is not None:
            self._connect_task.cancel()


class Peers:
    """Links to every other worker of this broker."""

    def __init__(self, runtime_dir: str, me: int, count: int) -> None:
        self.me = me
        self.links = {i: PeerLink(i, socket_path(runtime_dir, i)) for i in range(count) if i != me}

    def call(self, index: int, op: str, *args: Any, timeout: float = 30.0) -> Awaitable[Any]:
        return self.links[index].call(op, *args, timeout=timeout)

    async def broadcast_call(self, op: str, *args: Any, timeout: float = 30.0) -> dict[int, Any]:
        """Call ``op`` on every peer; a peer that fails gives its exception as its result."""
        indexes = list(self.links)
        results = await asyncio.gather(*(self.links[i].call(op, *args, timeout=timeout) for i in indexes),
                                       return_exceptions=True)
        return dict(zip(indexes, results))

    def note(self, index: int, op: str, *args: Any) -> None:
        self.links[index].note(op, *args)

    def close(self) -> None:
        for link in self.links.values():
            link.close()

