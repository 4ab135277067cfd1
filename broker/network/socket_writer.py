"""Writing a connection's responses: buffers with sendmsg (writev), file ranges with
os.sendfile, on a raw non-blocking socket, waiting for writability with add_writer.

Why not an asyncio transport: a transport's fd refuses add_writer, and os.sendfile needs to
wait for writability when the socket buffer is full (uvloop has no loop.sendfile).

Writes happen once per loop turn (``schedule_flush``), for whatever was answered in it: a
pipelining producer gets many answers per turn, and one sendmsg per answer cost a syscall
and, on loopback, the receiver's TCP work each (strace of a worker at ~9,600 small Produce
requests a second counted 48,757 sendmsg against 728 recv). Two or more file ranges go out
under TCP_CORK, so that a Fetch over 1,000 partitions leaves in full segments; the cork is
cleared at every exit (all sent, or the socket full), so nothing waits for the 200 ms timer.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
from collections import deque
from typing import Callable

from broker.context import FileChunk

log = logging.getLogger(__name__)

MAX_IOV = 64
Chunk = bytes | FileChunk


class SocketWriter:
    def __init__(self, sock: socket.socket, loop: asyncio.AbstractEventLoop, on_sent: Callable[[], None],
                 on_error: Callable[[OSError], None]) -> None:
        self._sock = sock
        self._fd = sock.fileno()
        self._loop = loop
        self._on_sent = on_sent  # everything queued went out
        self._on_error = on_error  # the socket failed: the connection closes
        self._out: deque[bytes | FileChunk | memoryview] = deque()
        self.out_bytes = 0
        self._out_files = 0  # FileChunks queued: two or more are sent corked
        # TCP_CORK is TCP's: on another socket (a Unix socketpair) setting it fails, and
        # that failure would close the connection.
        self._can_cork = sock.family in (socket.AF_INET, socket.AF_INET6)
        self._writing = False  # waiting for writability
        self._flush_scheduled = False
        self._closed = False
        self.last_active = time.monotonic()

    @property
    def idle(self) -> bool:
        return not self._out

    def queue(self, chunks: list[Chunk]) -> None:
        for chunk in chunks:
            if isinstance(chunk, FileChunk):
                size = chunk.length
                if not size:
                    # An empty piece (a non-flexible Fetch answer ends with its records)
                    # would make flush spin: sendmsg sends 0 bytes and pops nothing.
                    os.close(chunk.fd)
                    continue
                self._out_files += 1
            else:
                size = len(chunk)
                if not size:
                    continue
            self._out.append(chunk)
            self.out_bytes += size

    def schedule_flush(self) -> None:
        """Write at the end of this loop turn, once (a writable socket flushes by itself)."""
        if not self._flush_scheduled and not self._writing and not self._closed:
            self._flush_scheduled = True
            self._loop.call_soon(self._scheduled_flush)

    def _scheduled_flush(self) -> None:
        self._flush_scheduled = False
        if not self._closed:
            self.flush()

    def flush(self) -> None:
        out = self._out
        if out:
            self.last_active = time.monotonic()
        corked = self._out_files > 1 and self._can_cork
        try:
            if corked:
                self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 1)
            while out:
                head = out[0]
                if isinstance(head, FileChunk):
                    self._file_sent(head, os.sendfile(self._fd, head.fd, head.position, head.length))
                    continue
                buffers: list[bytes | memoryview] = []
                for item in out:
                    if isinstance(item, FileChunk) or len(buffers) == MAX_IOV:
                        break
                    buffers.append(item)
                sent = self._sock.sendmsg(buffers)
                self.out_bytes -= sent
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
                self._loop.add_writer(self._fd, self.flush)
                self._writing = True
            return
        except OSError as exc:
            self._on_error(exc)
            return
        if corked:
            self._uncork()
        if self._writing:
            self._loop.remove_writer(self._fd)
            self._writing = False
        self._on_sent()

    def _file_sent(self, head: FileChunk, count: int) -> None:
        """``count`` more bytes of the queue's first piece, a file range, went out; the range
        is dropped (its fd closed) once it is all sent."""
        if count == 0:
            raise ConnectionError("file ended before the promised length")
        head.position += count
        head.length -= count
        self.out_bytes -= count
        if head.length == 0:
            self._out.popleft()
            os.close(head.fd)
            self._out_files -= 1

    def _uncork(self) -> None:
        try:
            self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 0)
        except OSError:
            pass  # the peer is gone: the next write says so

    def close(self) -> None:
        """Stop writing and close the files still queued (the socket is the caller's)."""
        if self._closed:
            return
        self._closed = True
        if self._writing:
            self._loop.remove_writer(self._fd)
            self._writing = False
        for chunk in self._out:
            if isinstance(chunk, FileChunk):
                os.close(chunk.fd)
        self._out.clear()
