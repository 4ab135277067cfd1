"""This process's end of the rings (broker/links/rings.py): calls to the other processes of the
broker, their answers, one-way notes, and the calls they make to us.

A message is one MESSAGE header and an op's body (broker/links/peer_codec.py)::

    kind     u8    CALL, REPLY, FAIL (an error code and a message), NOTE (no answer)
    op       u8    Op
    call id  u64   ours for a CALL; echoed by its REPLY or FAIL; 0 for a NOTE

Calls leave in the order they are made (a ring is FIFO, and a message that does not fit
waits in a backlog that every later message to that peer joins), so requests pipelined on
one client connection reach each owner in request order. Whatever is pushed during one
turn of the event loop shares one doorbell per peer, rung at the end of the turn.

A call's handler on the receiving side runs synchronously inside the doorbell callback and
gets its body as a view of the ring: it reads (or, for an append, copies into the segment)
before it returns, and keeps no view; the space is given back to the sender right after.
A handler that must wait (a group request on the coordinator) copies its body first.

Failures, never hangs:
    a peer that dies (or restarts) with our calls in flight  NOT_LEADER_OR_FOLLOWER, as soon
        as its generation changes (the supervisor wakes everyone when it reaps a process)
    a peer that is down when we call                          the same at once, or, for calls
        that may wait (the coordinator's start), sent when it is up again; wait_up() lets a
        caller wait for a restarting peer first, within its own bound
    no answer within the call's timeout                       REQUEST_TIMED_OUT
A periodic sweep (every SWEEP_SECONDS) checks generations and deadlines as a backstop.
"""

from __future__ import annotations

import asyncio
import enum
import itertools
import logging
import struct
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Sequence, TypeVar

from broker.links.rings import FIRST, FRAGMENT, MORE, Ring, SharedRings, clear_doorbell, ring_doorbell
from broker.protocol.errors import ErrorCode, KafkaError, code_for_exception

log = logging.getLogger(__name__)

T = TypeVar("T")
Buffer = bytes | bytearray | memoryview
Parts = Sequence[Buffer]
# A call's handler: the reply's parts, or an awaitable of them.
Handler = Callable[[memoryview], "Parts | Awaitable[Parts]"]
NoteHandler = Callable[[memoryview], None]

MESSAGE = struct.Struct("=BB6xQ")
assert MESSAGE.size == 16
FAILURE = struct.Struct("<hH")  # error code, message length (UTF-8 follows)

CALL, REPLY, FAIL, NOTE = 1, 2, 3, 4
SWEEP_SECONDS = 0.25
BACKLOG_RETRY_SECONDS = 0.001


class Op(enum.IntEnum):
    APPEND = 1
    READ = 2
    LIST_OFFSETS = 3
    DELETE_RECORDS = 4
    PARTITION_STATE = 5
    SYNC_REGISTRY = 6
    APPENDED = 7  # note: a partition a parked long-poll of ours watches was appended to
    SERVE = 8  # a group or offset request for the coordinator
    FIND = 9  # where the elected coordinator is
    EPOCH = 10  # note: the epoch this broker's coordinator process was just elected with
    WAIT_COMMITTED = 11  # acks=all: answered once the high watermark passes the appends
    EPOCH_END = 12  # OffsetForLeaderEpoch
    WRITE_MARKERS = 13  # WriteTxnMarkers: answered once the markers are committed
    DESCRIBE_PRODUCERS = 14  # DescribeProducers: each partition's producer state
    APPEND_VERIFIED = 15  # transactional appends the transaction coordinator verified (their guards)
    SHARE_FETCH = 16  # ShareFetch: acknowledge, then acquire records of share partitions
    SHARE_ACK = 17  # ShareAcknowledge, or a closed share session's release
    DESCRIBE_LOG_DIRS = 35  # DescribeLogDirs: every partition log a worker keeps, and where
    LOG_DIR_FAILED = 36  # note: a worker found this log dir failed (all take it offline)
    ALTER_LOG_DIRS = 34  # AlterReplicaLogDirs: start moving partition logs between log dirs


class PeerUnavailable(KafkaError):
    def __init__(self, peer: int, why: str) -> None:
        # Retriable for clients: the partition's owner is restarting.
        super().__init__(ErrorCode.not_leader_or_follower, f"process {peer} of this broker is unavailable: {why}")


@dataclass(slots=True)
class _Pending:
    future: "asyncio.Future[Any]"
    decode: Callable[[memoryview], Any]
    peer: int
    generation: int  # the peer's generation the call was sent to (odd: not sent yet)
    deadline: float
    what: Op


@dataclass(slots=True)
class _Outgoing:
    """A message not yet (wholly) in its ring: its records, and how many are in."""

    call_id: int  # of a CALL (dropped if the call is over before it starts), else 0
    records: list[tuple[list[Buffer], int, int]]  # (parts, size, flags)
    generation: int  # the peer's generation it is meant for (odd: a parked call)
    sent: int = 0


@dataclass(slots=True)
class _Peer:
    inbound: Ring
    outbound: Ring
    doorbell: int
    generation: int = -1  # as last seen
    backlog: deque[_Outgoing] = field(default_factory=deque)
    parked: list[_Outgoing] = field(default_factory=list)  # calls waiting for the peer to be up
    partial: tuple[int, bytearray] | None = None  # a fragmented message being reassembled


class Mesh:
    def __init__(self, shared: SharedRings, me: int) -> None:
        self.me = me
        self._shared = shared
        self._doorbell = shared.doorbells[me]
        self._peers = {peer: _Peer(shared.ring(peer, me), shared.ring(me, peer), shared.doorbells[peer])
                       for peer in range(shared.endpoints) if peer != me}
        self.handlers: dict[int, Handler] = {}
        self.notes: dict[int, NoteHandler] = {}
        self._pending: dict[int, _Pending] = {}
        self._ids = itertools.count(1)
        self._id_base = 0
        self.generation = 0
        self._bells: set[int] = set()
        self._bells_scheduled = False
        self._retry: asyncio.TimerHandle | None = None
        self._sweeper: asyncio.TimerHandle | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._up_waiters: dict[int, list[asyncio.Future[None]]] = {}

    # ------------------------------------------------------------------ life
    def start(self) -> None:
        """Serve: drop what was sent to our predecessor, announce our generation."""
        self._loop = asyncio.get_running_loop()
        for peer in self._peers.values():
            peer.inbound.discard()
        current = self._shared.generation(self.me)
        self.generation = current + 1 if current % 2 else current + 2
        self._id_base = self.generation << 40  # a reply meant for a predecessor matches none of ours
        self._shared.set_generation(self.me, self.generation)
        clear_doorbell(self._doorbell)
        self._loop.add_reader(self._doorbell, self._wake)
        for index, peer in self._peers.items():
            peer.generation = self._shared.generation(index)
            ring_doorbell(peer.doorbell)  # peers notice us, and send what they parked for us
        self._sweeper = self._loop.call_later(SWEEP_SECONDS, self._sweep)

    def close(self) -> None:
        """Stop serving: our generation turns odd and every peer fails its calls to us now."""
        if self._loop is None:
            return
        self._loop.remove_reader(self._doorbell)
        for handle in (self._retry, self._sweeper):
            if handle is not None:
                handle.cancel()
        self._shared.set_generation(self.me, self.generation + 1)
        for peer in self._peers.values():
            ring_doorbell(peer.doorbell)
        for call_id in list(self._pending):
            self._fail(call_id, PeerUnavailable(self.me, "this process is stopping"))
        for task in list(self._tasks):
            task.cancel()
        self._loop = None

    # ------------------------------------------------------------------ sending
    def call(self, peer: int, op: Op, parts: Parts, decode: Callable[[memoryview], T],
             timeout: float = 30.0, wait_for_peer: bool = False) -> "asyncio.Future[T]":
        """Send a call now; its future resolves to ``decode(reply body)``. A peer that is
        down fails the call at once (PeerUnavailable), unless ``wait_for_peer``: then it is
        sent when the peer is up, within ``timeout``."""
        loop = self._loop
        if loop is None:
            raise PeerUnavailable(self.me, "this process is not serving")
        generation = self._shared.generation(peer)
        if generation % 2 and not wait_for_peer:
            raise PeerUnavailable(peer, "restarting")
        call_id = self._id_base | next(self._ids)
        future: asyncio.Future[T] = loop.create_future()
        self._pending[call_id] = _Pending(future, decode, peer, generation, time.monotonic() + timeout, op)
        outgoing = self._outgoing(peer, CALL, op, call_id, parts, generation)
        if generation % 2:
            self._peers[peer].parked.append(outgoing)
        else:
            self._send(peer, outgoing)
        return future

    def is_up(self, peer: int) -> bool:
        return self._shared.generation(peer) % 2 == 0

    async def wait_up(self, peer: int, timeout: float) -> bool:
        """Wait until ``peer`` serves (a process the supervisor is restarting); False if it
        does not within ``timeout``."""
        if self.is_up(peer):
            return True
        assert self._loop is not None, "the mesh is started"
        future: asyncio.Future[None] = self._loop.create_future()
        waiters = self._up_waiters.setdefault(peer, [])
        waiters.append(future)
        try:
            await asyncio.wait_for(future, timeout)
            return True
        except TimeoutError:
            return self.is_up(peer)
        finally:
            if future in waiters:
                waiters.remove(future)

    def note(self, peer: int, op: Op, parts: Parts) -> None:
        """A one-way message; dropped when the peer is down (it re-reads state at start)."""
        generation = self._shared.generation(peer)
        if self._loop is not None and generation % 2 == 0:
            self._send(peer, self._outgoing(peer, NOTE, op, 0, parts, generation))

    def _outgoing(self, peer: int, kind: int, op: int, call_id: int, parts: Parts, generation: int) -> _Outgoing:
        header = MESSAGE.pack(kind, op, call_id)
        total = MESSAGE.size + sum(len(part) for part in parts)
        max_record = self._peers[peer].outbound.max_record
        call = call_id if kind == CALL else 0
        if total <= max_record:
            return _Outgoing(call, [([header, *parts], total, 0)], generation)
        # Larger than a record: copied once more into one buffer, sent in fragments.
        whole = memoryview(b"".join([header, *parts]))
        records: list[tuple[list[Buffer], int, int]] = []
        for start in range(0, total, max_record):
            piece = whole[start:start + max_record]
            flags = FRAGMENT | (FIRST if start == 0 else 0) | (MORE if start + max_record < total else 0)
            records.append(([piece], len(piece), flags))
        return _Outgoing(call, records, generation)

    def _send(self, index: int, outgoing: _Outgoing) -> None:
        peer = self._peers[index]
        peer.backlog.append(outgoing)
        if len(peer.backlog) == 1:
            self._push_backlog(index, peer)

    def _push_backlog(self, index: int, peer: _Peer) -> None:
        ring = peer.outbound
        backlog = peer.backlog
        pushed = False
        current = self._shared.generation(index)
        while backlog:
            outgoing = backlog[0]
            if outgoing.generation != current or (
                    outgoing.sent == 0 and outgoing.call_id and outgoing.call_id not in self._pending):
                # Meant for a process that is gone (its call fails: _peer_changed), or a
                # call that timed out before it started: never send the rest.
                backlog.popleft()
                continue
            while outgoing.sent < len(outgoing.records):
                parts, size, flags = outgoing.records[outgoing.sent]
                if not ring.try_push(parts, size, flags, self.generation):
                    break
                outgoing.sent += 1
                pushed = True
            if outgoing.sent < len(outgoing.records):
                ring.want_space()  # the peer rings us when it frees space; a timer retries too
                self._schedule_retry()
                break
            backlog.popleft()
        if pushed:
            self._bell(index)

    def _schedule_retry(self) -> None:
        if self._retry is None and self._loop is not None:
            self._retry = self._loop.call_later(BACKLOG_RETRY_SECONDS, self._retry_backlogs)

    def _retry_backlogs(self) -> None:
        self._retry = None
        for index, peer in self._peers.items():
            if peer.backlog:
                self._push_backlog(index, peer)

    def _bell(self, index: int) -> None:
        self._bells.add(index)
        if not self._bells_scheduled and self._loop is not None:
            self._bells_scheduled = True
            self._loop.call_soon(self._ring_bells)

    def _ring_bells(self) -> None:
        self._bells_scheduled = False
        bells, self._bells = self._bells, set()
        for index in bells:
            ring_doorbell(self._peers[index].doorbell)

    # ------------------------------------------------------------------ receiving
    def _wake(self) -> None:
        clear_doorbell(self._doorbell)
        self._check_generations()
        for index, peer in self._peers.items():
            ring = peer.inbound
            if not ring.has_records():
                continue
            for flags, generation, payload in ring.drain():
                try:
                    self._record(index, peer, flags, generation, payload)
                except Exception:
                    log.exception("a message from process %d failed", index)
            if ring.release():
                self._bell(index)
        self._retry_backlogs()

    def _record(self, index: int, peer: _Peer, flags: int, generation: int, payload: memoryview) -> None:
        if not flags & FRAGMENT:
            peer.partial = None  # a message whose sender died before its last piece
            self._message(index, payload)
            return
        if flags & FIRST:
            peer.partial = (generation, bytearray(payload))
        elif peer.partial is None or peer.partial[0] != generation:
            return  # the rest of a message whose beginning went to our predecessor
        else:
            peer.partial[1].extend(payload)
        if not flags & MORE:
            whole = peer.partial[1]
            peer.partial = None
            self._message(index, memoryview(whole))

    def _message(self, index: int, payload: memoryview) -> None:
        kind, op, call_id = MESSAGE.unpack_from(payload)
        body = payload[MESSAGE.size:]
        if kind == REPLY or kind == FAIL:
            pending = self._pending.pop(call_id, None)
            if pending is None or pending.future.done():
                return  # answered too late (timed out), or meant for our predecessor
            if kind == FAIL:
                code, length = FAILURE.unpack_from(body)
                message = bytes(body[FAILURE.size:FAILURE.size + length]).decode(errors="replace")
                pending.future.set_exception(KafkaError(ErrorCode(code), message))
                return
            try:
                pending.future.set_result(pending.decode(body))
            except Exception as exc:
                pending.future.set_exception(exc)
        elif kind == NOTE:
            self.notes[op](body)
        elif kind == CALL:
            self._serve(index, op, call_id, body)
        else:
            log.error("unknown message kind %d from process %d", kind, index)

    def _serve(self, index: int, op: int, call_id: int, body: memoryview) -> None:
        handler = self.handlers.get(op)
        try:
            if handler is None:
                raise KafkaError(ErrorCode.invalid_request, f"no handler for op {op}")
            answer = handler(body)
        except Exception as exc:
            self._reply_failure(index, op, call_id, exc)
            return
        if isinstance(answer, Sequence):
            self._reply(index, op, call_id, answer)
            return
        assert self._loop is not None
        task = self._loop.create_task(self._answer_later(index, op, call_id, answer))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _answer_later(self, index: int, op: int, call_id: int, pending: Awaitable[Parts]) -> None:
        try:
            parts = await pending
        except Exception as exc:
            self._reply_failure(index, op, call_id, exc)
            return
        self._reply(index, op, call_id, parts)

    def _reply(self, index: int, op: int, call_id: int, parts: Parts, kind: int = REPLY) -> None:
        generation = self._shared.generation(index)
        if generation % 2 == 0:
            self._send(index, self._outgoing(index, kind, op, call_id, parts, generation))

    def _reply_failure(self, index: int, op: int, call_id: int, exc: BaseException) -> None:
        message = str(exc).encode()[:1024]
        body = FAILURE.pack(int(code_for_exception(exc)), len(message)) + message
        self._reply(index, op, call_id, [body], FAIL)

    # ------------------------------------------------------------------ failures
    def _check_generations(self) -> None:
        for index, peer in self._peers.items():
            generation = self._shared.generation(index)
            if generation != peer.generation:
                peer.generation = generation
                self._peer_changed(index, peer, generation)

    def _peer_changed(self, index: int, peer: _Peer, generation: int) -> None:
        """The peer died or came back: what was sent to an older generation is lost (its
        backlog entries are dropped as they come up, in _push_backlog)."""
        peer.partial = None
        for call_id, pending in list(self._pending.items()):
            if pending.peer == index and pending.generation % 2 == 0 and pending.generation != generation:
                self._fail(call_id, PeerUnavailable(index, "it stopped while the call was in flight"))
        if generation % 2 == 0:
            for waiter in self._up_waiters.pop(index, []):
                if not waiter.done():
                    waiter.set_result(None)
        if generation % 2 == 0 and peer.parked:
            parked, peer.parked = peer.parked, []
            for outgoing in parked:
                waiting = self._pending.get(outgoing.call_id)
                if waiting is not None:
                    waiting.generation = generation
                    outgoing.generation = generation
                    self._send(index, outgoing)

    def _fail(self, call_id: int, exc: Exception) -> None:
        pending = self._pending.pop(call_id, None)
        if pending is not None and not pending.future.done():
            pending.future.set_exception(exc)

    def _sweep(self) -> None:
        loop = self._loop
        if loop is None:
            return
        self._check_generations()
        now = time.monotonic()
        for call_id, pending in list(self._pending.items()):
            if now > pending.deadline:
                self._fail(call_id, KafkaError(ErrorCode.request_timed_out,
                                               f"process {pending.peer} did not answer {pending.what.name}"))
        for peer in self._peers.values():
            if peer.parked:
                peer.parked = [o for o in peer.parked if o.call_id in self._pending]
        self._retry_backlogs()
        self._sweeper = loop.call_later(SWEEP_SECONDS, self._sweep)

