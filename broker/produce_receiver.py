"""Receive one large Produce frame with each partition's records going straight into
its log, where that log lives in this worker (storage/landing.py says why).

The connection (broker/connection.py) starts a receiver when a Produce frame of
LARGE_FRAME bytes or more begins, hands it whatever of the frame it has already read,
and calls ``advance`` whenever the socket is readable. The receiver reads exactly the
frame, never past it (the next frame, and a handoff at the boundary, are the
connection's business), and follows the stream parser (broker/protocol/produce_stream.py):
header fields are read in small exact pieces; each partition's records are received
into the room its log opened at its end, or into a buffer of their own when the log is
not here or cannot take them there now.

A landed partition's view goes into the request as its records, and the owner's append
commits it in place. That must happen in the same synchronous step as the dispatch: a
handler that waits would hold views into a map that a roll may close. A produce handler
waits only for other workers or for the coordinator's internal topic, so when any
partition of the frame is not written here (or is internal), every landing is revoked
before dispatch and the request carries buffers only. ``finish`` closes the landings
after the dispatch, committed or not.
"""

from __future__ import annotations

import socket
from typing import TYPE_CHECKING

from broker.apis.metadata import INTERNAL_TOPICS
from broker.memory import receive_buffer
from broker.protocol import produce_stream
from broker.protocol.framing import RequestHeader
from broker.protocol.produce_request import ProduceRequest, ProduceTopic
from storage.landing import Landing
from storage.types import TopicPartition

if TYPE_CHECKING:
    from broker.node import WorkerNode

SKIP_CHUNK = 64 * 1024
# Header fields are asked for a few bytes at a time; reading this much at once (never past
# the frame) costs a short copy of the record bytes that come along, where one recv per
# field cost 3% of a worker's samples under 1 KiB produce load (py-spy).
FIELD_READ = 512


class PeerClosed(Exception):
    """The client closed the connection (or the socket failed) inside the frame."""


class _Target:
    """Where one partition's records are being received: a landing's view, or a buffer."""

    __slots__ = ("view", "filled", "landing")

    def __init__(self, view: memoryview, landing: Landing | None) -> None:
        self.view = view
        self.filled = 0
        self.landing = landing


class ProduceReceiver:
    def __init__(self, sock: socket.socket, node: "WorkerNode", frame_size: int, already: memoryview,
                 land: bool = True) -> None:
        self.sock = sock
        self.node = node
        self.frame_size = frame_size
        self._pending = already  # bytes of the frame read but not yet used
        self._unread = frame_size - len(already)  # bytes of the frame still in the socket
        self._land = land
        self._stream = produce_stream.read_frame(frame_size)
        self._event: produce_stream.Event = next(self._stream)
        self._piece = bytearray()  # a Need being gathered
        self._targets: list[_Target] = []
        self._target: _Target | None = None  # the Records being received
        self._all_written_here = True
        self._result: produce_stream.StreamedProduce | None = None

    # ------------------------------------------------------------------ reading
    def advance(self) -> bool:
        """Read what the socket has, up to the end of the frame; True once the frame is
        whole. Raises ProtocolViolation (a malformed frame) or PeerClosed."""
        while self._result is None:
            event = self._event
            if isinstance(event, produce_stream.Records):
                if not self._receive_records(event):
                    return False
                reply: bytes | None = None
            elif isinstance(event, produce_stream.Need):
                if not self._gather(event.size):
                    return False
                reply, self._piece = bytes(self._piece), bytearray()
            else:
                if not self._skip(event):
                    return False
                reply = None
            try:
                self._event = self._stream.send(reply)
            except StopIteration as done:
                self._result = done.value
        return True

    def _gather(self, size: int) -> bool:
        piece = self._piece
        while len(piece) < size:
            want = size - len(piece)
            if self._pending:
                taken = self._pending[:want]
                piece += taken
                self._pending = self._pending[len(taken):]
                continue
            data = self._recv(max(want, FIELD_READ))
            if data is None:
                return False
            piece += data[:want]
            self._pending = data[want:]
        return True

    def _skip(self, event: produce_stream.Skip) -> bool:
        while event.size:
            if self._pending:
                taken = min(event.size, len(self._pending))
                self._pending = self._pending[taken:]
            else:
                data = self._recv(min(event.size, SKIP_CHUNK))
                if data is None:
                    return False  # self._event already holds what is left to skip
                taken = len(data)
            event = produce_stream.Skip(event.size - taken)
            self._event = event
        return True

    def _receive_records(self, event: produce_stream.Records) -> bool:
        target = self._target
        if target is None:
            target = self._target = self._target_for(event)
        while target.filled < event.size:
            view = target.view
            if self._pending:
                count = min(event.size - target.filled, len(self._pending))
                view[target.filled:target.filled + count] = self._pending[:count]
                self._pending = self._pending[count:]
                target.filled += count
                continue
            received = self._recv_into(view[target.filled:])
            if received is None:
                return False
            target.filled += received
        self._targets.append(target)
        self._target = None
        return True

    def _recv(self, size: int) -> memoryview | None:
        """Up to ``size`` bytes of the frame, never past its end (None: none yet)."""
        buffer = memoryview(bytearray(min(size, self._unread)))
        received = self._recv_into(buffer)
        return None if received is None else buffer[:received]

    def _recv_into(self, view: memoryview) -> int | None:
        """recv_into ``view`` (which the caller keeps inside the frame): the byte count,
        or None when the socket has nothing yet."""
        try:
            received = self.sock.recv_into(view)
        except (BlockingIOError, InterruptedError):
            return None
        except OSError as exc:
            raise PeerClosed(str(exc)) from None
        if not received:
            raise PeerClosed("closed inside a Produce frame")
        self._unread -= received
        return received

    # ------------------------------------------------------------------ where records go
    def _target_for(self, event: produce_stream.Records) -> _Target:
        tp = TopicPartition(event.topic, event.partition)
        node = self.node
        here = event.topic not in INTERNAL_TOPICS and node.owns(tp)
        if not here:
            self._all_written_here = False
        elif self._land and event.size > 0:
            partition_log = node.logs.get_log(tp)
            if partition_log is not None:
                landing = partition_log.open_landing(event.size, self._revoked)
                if landing is not None:
                    return _Target(landing.records, landing)
        return _Target(memoryview(receive_buffer(event.size)), None)

    def _landed(self) -> list[_Target]:
        """The targets (whole, and the one being received) that hold a landing."""
        return [t for t in (*self._targets, self._target) if t is not None and t.landing is not None]

    def _revoked(self, landing: Landing) -> None:
        """The log takes its end back: move what was received out into a buffer."""
        for target in self._landed():
            if target.landing is landing:
                _move_to_buffer(target)
                return

    # ------------------------------------------------------------------ the request
    def request(self) -> tuple[RequestHeader, ProduceRequest]:
        """The whole frame's request, once ``advance`` returned True. Landings are kept
        only if the handler will append everything in the dispatching step."""
        result = self._result
        assert result is not None, "the frame is not whole yet"
        if not self._all_written_here:
            for target in self._landed():
                landing = target.landing
                assert landing is not None
                _move_to_buffer(target)
                landing.close()
        records = iter(self._targets)
        topics = [ProduceTopic(name, [(index, next(records).view if present else None) for index, present in partitions])
                  for name, partitions in result.layout]
        return result.header, ProduceRequest(result.transactional_id, result.acks, result.timeout_ms, topics)

    def finish(self) -> int:
        """Close every landing (after the dispatch, or when the connection closes);
        return how many were committed in place."""
        committed = 0
        for target in self._landed():
            landing = target.landing
            assert landing is not None
            committed += landing.committed
            landing.close()
            target.landing = None
        self._targets = []
        self._target = None
        return committed


def _move_to_buffer(target: _Target) -> None:
    buffer = receive_buffer(len(target.view))
    buffer[:target.filled] = target.view[:target.filled]
    target.view = memoryview(buffer)
    target.landing = None
