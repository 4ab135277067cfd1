"""Cutting request frames out of a connection's byte stream, with no I/O of its own.

A frame is a 4-byte big-endian size and that many bytes. Small frames are cut from an input
buffer that the connection feeds with what ``recv`` returned. A frame of LARGE_FRAME bytes
or more is received straight into a buffer of its own size (``big_space()`` is where the
next bytes go, for ``recv_into``): a 1 MiB Produce request is then not re-copied as the
input buffer grows, and the buffer itself is the frame (Produce keeps views of it until
its records are in the log). That buffer is not zeroed (``receive_buffer``): nothing reads
it before it is full; under 1 KiB produce load on warmed memory the zero-fill of
``bytearray(size)`` was 5.8% of the workers' samples (perf, tenth round in
`git show 0858314:docs/BENCHMARKS.md`).

Both ends use it: a worker's client connections (broker/network/connection.py) and a
broker's own client of other brokers (broker/partitions/remote_partition.py), whose
followers receive each Fetch answer straight into its frame.

A size below 0 or above ``socket.request.max.bytes`` is a ProtocolViolation: the
connection closes, as Kafka's does, before anything of that size is allocated.
"""

from __future__ import annotations

import ctypes
from typing import Callable

from broker.protocol.errors import ProtocolViolation

LARGE_FRAME = 64 * 1024


def _uninitialized_bytearray_maker() -> Callable[[int], bytearray] | None:
    """CPython's PyByteArray_FromStringAndSize(NULL, n): a bytearray of n bytes, not zeroed."""
    try:
        make = ctypes.pythonapi.PyByteArray_FromStringAndSize
    except AttributeError:  # not CPython
        return None
    make.argtypes = (ctypes.c_void_p, ctypes.c_ssize_t)
    make.restype = ctypes.py_object
    return lambda size: make(None, size)


_MAKE_UNINITIALIZED = _uninitialized_bytearray_maker()


def receive_buffer(size: int) -> bytearray:
    """A bytearray of ``size`` bytes whose contents are undefined: only for buffers the
    caller fills completely before reading any of it."""
    if _MAKE_UNINITIALIZED is None:
        return bytearray(size)
    return _MAKE_UNINITIALIZED(size)


class FrameReader:
    __slots__ = ("_max_request", "_inbuf", "_position", "_big", "_big_filled")

    def __init__(self, max_request: int) -> None:
        self._max_request = max_request
        self._inbuf = bytearray()
        self._position = 0  # bytes of _inbuf already cut into frames
        self._big: bytearray | None = None
        self._big_filled = 0

    def set_limit(self, max_request: int) -> None:
        """A new largest frame (a SASL connection reads small frames until it authenticated)."""
        self._max_request = max_request

    # ------------------------------------------------------------------ small frames
    def feed(self, data: bytes | bytearray | memoryview) -> None:
        self._compact()
        self._inbuf += data

    @property
    def buffered(self) -> bool:
        """Bytes wait in the input buffer (maybe whole frames not taken yet)."""
        return len(self._inbuf) > self._position

    def next_frame(self) -> bytes | None:
        """The next whole frame in the input buffer, or None: more bytes are needed (and
        if the frame is large, ``receiving_big`` is now true)."""
        buf = self._inbuf
        position = self._position
        available = len(buf) - position
        if available < 4:
            return None
        size = int.from_bytes(buf[position:position + 4], "big", signed=True)
        if size < 0 or size > self._max_request:
            raise ProtocolViolation(f"frame of {size} bytes (socket.request.max.bytes is {self._max_request})")
        if available - 4 < size:
            if size >= LARGE_FRAME:
                big = receive_buffer(size)
                have = available - 4
                big[:have] = buf[position + 4:]
                self._big, self._big_filled = big, have
                self._position = len(buf)
                self._compact()
            return None
        self._position = position + 4 + size
        return bytes(buf[position + 4:position + 4 + size])

    def _compact(self) -> None:
        if self._position:
            del self._inbuf[:self._position]
            self._position = 0

    # ------------------------------------------------------------------ large frames
    @property
    def receiving_big(self) -> bool:
        return self._big is not None

    def big_space(self) -> memoryview:
        """Where the large frame's next bytes go (release the view after the recv_into)."""
        assert self._big is not None
        return memoryview(self._big)[self._big_filled:]

    def big_received(self, count: int) -> bytearray | None:
        """``count`` more bytes landed in ``big_space()``; the frame once it is whole."""
        assert self._big is not None
        self._big_filled += count
        if self._big_filled < len(self._big):
            return None
        frame, self._big = self._big, None
        return frame
