"""TLS on a connection's raw socket, in user space: ``ssl.SSLObject`` over two memory BIOs.

Why not ``ssl.SSLSocket`` or an asyncio transport: a connection drives its raw
non-blocking socket with add_reader/add_writer (broker/network/connection.py), and an SSLSocket
would hide how many ciphertext bytes a read or a write needs. With memory BIOs the
connection keeps doing the socket I/O itself: what arrives is fed in, plaintext is read
out (large frames straight into their own buffers), and ciphertext waits in one pending
buffer until the socket takes it.

Fetch over TLS loses sendfile: the record bytes must be encrypted in user space (Kafka
does the same; it never uses transferTo on TLS). ``TlsSocketWriter`` reads each file
range in FILE_CHUNK pieces into one reused buffer (os.preadv), encrypts a piece, and
reads the next only once the socket took the previous piece's ciphertext: memory per
connection stays at one chunk whatever the fetch size. Linux kernel TLS would keep
sendfile, but Python 3.11 exposes it neither on SSLObject nor on asyncio (3.12 adds
ssl.OP_ENABLE_KTLS for SSLSocket only); not tried.

A TLS connection is never handed to another worker: its TLS state lives in this process.
"""

from __future__ import annotations

import asyncio
import os
import socket
import ssl
import time
from typing import Callable

from broker.context import FileChunk
from broker.network.socket_writer import SocketWriter

FILE_CHUNK = 256 * 1024  # bytes of a file range read and encrypted at a time
PLAIN_BATCH = 256 * 1024  # small buffers encrypted together, at most this much at once


class TlsChannel:
    """One server-side TLS session over memory BIOs (no I/O of its own)."""

    __slots__ = ("_incoming", "_outgoing", "ssl", "established")

    def __init__(self, context: ssl.SSLContext) -> None:
        self._incoming = ssl.MemoryBIO()
        self._outgoing = ssl.MemoryBIO()
        self.ssl = context.wrap_bio(self._incoming, self._outgoing, server_side=True)
        self.established = False

    def received(self, data: bytes) -> None:
        """Ciphertext the socket gave."""
        self._incoming.write(data)

    def handshake(self) -> bool:
        """Step the handshake with what was received; True once it is complete. Raises
        ssl.SSLError when the peer is refused (bad certificate, not TLS, no shared version)."""
        try:
            self.ssl.do_handshake()
        except ssl.SSLWantReadError:
            return False
        self.established = True
        return True

    def read_into(self, buffer: memoryview) -> int:
        """Plaintext into ``buffer``; 0 when no whole record is buffered yet. Raises
        EOFError when the peer closed the TLS session (close_notify: SSLObject.read returns
        nothing rather than raising, while "no data yet" is SSLWantReadError)."""
        try:
            count: int = self.ssl.read(len(buffer), buffer)  # type: ignore[assignment]  # with a buffer: a count
        except ssl.SSLWantReadError:
            return 0
        except ssl.SSLZeroReturnError:
            raise EOFError("TLS session closed by the peer") from None
        if count == 0 and len(buffer):
            raise EOFError("TLS session closed by the peer")
        return count

    def read(self, size: int) -> bytes:
        try:
            data = self.ssl.read(size)
        except ssl.SSLWantReadError:
            return b""
        except ssl.SSLZeroReturnError:
            raise EOFError("TLS session closed by the peer") from None
        if not data and size:
            raise EOFError("TLS session closed by the peer")
        return data

    def encrypt(self, data: bytes | memoryview) -> None:
        self.ssl.write(data)

    @property
    def wants_to_send(self) -> bool:
        return self._outgoing.pending > 0

    def ciphertext(self) -> bytes:
        """What TLS wants sent (records, handshake messages, session tickets)."""
        return self._outgoing.read()

    def peer_certificate(self) -> bytes | None:
        """The client's certificate (DER), when it sent one that verified."""
        return self.ssl.getpeercert(binary_form=True)


class TlsSocketWriter(SocketWriter):
    """SocketWriter's queue and flow control, with every byte encrypted before it is sent;
    file ranges are read in bounded chunks (no sendfile)."""

    def __init__(self, sock: socket.socket, loop: asyncio.AbstractEventLoop, on_sent: Callable[[], None],
                 on_error: Callable[[OSError], None], channel: TlsChannel) -> None:
        super().__init__(sock, loop, on_sent, on_error)
        self._channel = channel
        self._pending = memoryview(b"")  # ciphertext the socket has not taken yet
        self._chunk = bytearray(FILE_CHUNK)

    @property
    def idle(self) -> bool:
        return not self._out and not self._pending

    def send_handshake(self) -> None:
        """Queue what the TLS layer produced by itself (handshake, alerts) and send it."""
        self._take_ciphertext()
        if not self._writing:
            self.flush()

    def _take_ciphertext(self) -> None:
        produced = self._channel.ciphertext()
        if produced:
            self._pending = memoryview(bytes(self._pending) + produced) if self._pending else memoryview(produced)

    def flush(self) -> None:
        out = self._out
        if out or self._pending:
            self.last_active = time.monotonic()
        try:
            while True:
                while self._pending:
                    sent = self._sock.send(self._pending)
                    self._pending = self._pending[sent:]
                if not out:
                    break
                self._encrypt_next()
                self._take_ciphertext()
        except (BlockingIOError, InterruptedError):
            if not self._writing:
                self._loop.add_writer(self._fd, self.flush)
                self._writing = True
            return
        except (OSError, ssl.SSLError) as exc:
            self._on_error(exc if isinstance(exc, OSError) else OSError(str(exc)))
            return
        if self._writing:
            self._loop.remove_writer(self._fd)
            self._writing = False
        self._on_sent()

    def _encrypt_next(self) -> None:
        """Encrypt the next piece of the queue: one file chunk, or small buffers together."""
        out = self._out
        head = out[0]
        if isinstance(head, FileChunk):
            view = memoryview(self._chunk)[:min(FILE_CHUNK, head.length)]
            count = os.preadv(head.fd, [view], head.position)
            if count:
                self._channel.encrypt(view[:count])
            self._file_sent(head, count)
            return
        pieces: list[bytes | memoryview] = []
        size = 0
        while out and not isinstance(out[0], FileChunk) and size < PLAIN_BATCH:
            piece = out.popleft()
            assert not isinstance(piece, FileChunk)
            pieces.append(piece)
            size += len(piece)
        self._channel.encrypt(pieces[0] if len(pieces) == 1 else b"".join(pieces))
        self.out_bytes -= size
