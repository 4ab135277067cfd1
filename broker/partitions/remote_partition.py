"""A Kafka client for one partition held by another broker of the cluster.

The coordinator process writes and reads partitions of __consumer_offsets. When another
broker holds the partition, the coordinator reaches it over the Kafka protocol, as any
client would, with a client id that carries its coordinator epoch
(``castle-coordinator/<epoch>``) so the receiving broker can fence a deposed coordinator
(coordination/fence.py compares the epoch with the current one).

One ``RemotePartitionClient`` is one TCP connection to one broker, opened on the first
call and opened again on the call after a failure. Requests are pipelined: each gets a
correlation id, and one reader task matches answers to callers. Framing (ours, bodies by
kio; all three APIs are used at flexible versions)::

    request   size            int32   bytes that follow
              api_key         int16
              api_version     int16
              correlation_id  int32
              client_id       int16 length + UTF-8 (stays int16 in header v2)
              tagged fields   0x00    (header v2: flexible versions only)
              body            kio
    response  size            int32
              correlation_id  int32
              tagged fields   0x00    (header v1: flexible versions; ApiVersions answers
                                       always use header v0)
              body            kio

Versions: Produce v9, ListOffsets v7, Fetch v12, WriteTxnMarkers v1. Fetch stays at v12
because v13+ names topics by id, which would cost a Metadata round trip first; v12 names
them. WriteTxnMarkers v1 is what Kafka 4.0's coordinator sends (v2 only adds KIP-890's
transaction version).

Failures never raise: every call returns the Kafka error code a client would surface.
    refused, reset, closed by the peer, an unreadable answer  NETWORK_EXCEPTION (13)
    no answer within ``timeout`` (connect included)            REQUEST_TIMED_OUT (7)
A timed-out call closes the connection, as Java's NetworkClient does, so that a late
answer can never be taken for another request's (other calls in flight on it fail too).
Reads (ListOffsets, Fetch) are idempotent and are tried once more on a fresh connection
when a connection opened by an earlier call fails: the broker may have closed it while
it sat idle (a restart). Produce is never retried here: the broker may have appended the
batch before the connection broke, and the coordinator answers its own client with the
error, who retries as Kafka clients do. Nor is WriteTxnMarkers: the transaction
coordinator retries the partitions whose markers failed, as Kafka's marker channel does.

Security: with a ClientSecurity (broker/security/inter_broker.py) the connection is TLS
and/or authenticates with SASL before its first request: SaslHandshake v1, then
SaslAuthenticate v2 tokens until the mechanism completes (a refusal is
SASL_AUTHENTICATION_FAILED to every caller waiting for the connection).

Receiving: the connection is an asyncio BufferedProtocol. Answers are cut from what the
transport reads as a worker cuts requests (broker/protocol/frame_reader.py), and a large one,
a follower's Fetch answer, is received straight into a buffer of its own size: its record
bytes are copied once, from the socket, before the log takes them. With asyncio's streams
each answer was copied twice more (into the StreamReader's buffer, then out of it), and a
64 KiB buffer limit paused the transport ~25 times per 3 MiB answer.

Works on uvloop and on the default asyncio loop (transports and ``asyncio.timeout`` only).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import re
import ssl
import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Sequence, cast

from broker.protocol import codec, replica_fetch
from broker.protocol.build import build
from broker.protocol.errors import ErrorCode, KafkaError, ProtocolViolation
from broker.protocol.frame_reader import FrameReader
from broker.security.broker_proof import MECHANISM as BROKER_MECHANISM
from broker.security.broker_proof import BrokerProofClient
from broker.security.sasl_client import SaslClient, SaslClientError
from storage.batch import LOG_OVERHEAD, LOG_OVERHEAD_STRUCT, MAGIC_V2, MIN_BATCH_LENGTH, parse_header
from storage.types import TopicPartition

if TYPE_CHECKING:
    from broker.security.inter_broker import ClientSecurity

COORDINATOR_CLIENT_PREFIX = "castle-coordinator/"
# An epoch in a client id: decimal, no sign, no leading zero, at most a Java long.
_EPOCH_DIGITS = re.compile(r"0|[1-9][0-9]{0,18}")
_MAX_EPOCH = (1 << 63) - 1

PRODUCE, FETCH, LIST_OFFSETS, API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 0, 1, 2, 18, 17, 36
WRITE_TXN_MARKERS = 27
PRODUCE_VERSION, FETCH_VERSION, LIST_OFFSETS_VERSION, WRITE_TXN_MARKERS_VERSION = 9, 12, 7, 2
EARLIEST_TIMESTAMP, LATEST_TIMESTAMP = -2, -1

READ_CHUNK = 1 << 20
MAX_READ_CHUNK = 64 << 20
# A response larger than this is garbage, not an answer: the largest we ask for is one
# MAX_READ_CHUNK fetch; the slack covers the response's own fields.
MAX_RESPONSE_SIZE = MAX_READ_CHUNK + (1 << 20)

# What one read may take while no large answer is being received (as a worker's recv).
RECEIVE_CHUNK = 256 * 1024
SIZE = struct.Struct(">i")
REQUEST_HEADER = struct.Struct(">hhih")  # api_key, api_version, correlation_id, client_id length
CORRELATION_ID = struct.Struct(">i")


# ---------------------------------------------------------------------- client ids


def coordinator_client_id(epoch: int) -> str:
    """The client id the coordinator elected with ``epoch`` uses towards other brokers."""
    if not 0 <= epoch <= _MAX_EPOCH:
        raise ValueError(f"coordinator epoch {epoch} out of range")
    return f"{COORDINATOR_CLIENT_PREFIX}{epoch}"


def epoch_from_client_id(client_id: str | None) -> int | None:
    """The coordinator epoch in ``client_id``; None for any other or malformed client id
    (strict: exactly what ``coordinator_client_id`` writes, so one epoch has one id)."""
    if client_id is None or not client_id.startswith(COORDINATOR_CLIENT_PREFIX):
        return None
    digits = client_id[len(COORDINATOR_CLIENT_PREFIX):]
    if not _EPOCH_DIGITS.fullmatch(digits):  # [0-9], not str.isdigit: no "²", no "١"
        return None
    epoch = int(digits)
    return epoch if epoch <= _MAX_EPOCH else None


# ---------------------------------------------------------------------- framing
def encode_request(api_key: int, version: int, correlation_id: int, client_id: str, body: Any) -> bytes:
    """One whole request frame, size prefix included."""
    client = client_id.encode()
    header = REQUEST_HEADER.pack(api_key, version, correlation_id, len(client)) + client
    if codec.is_flexible(api_key, version):
        header += b"\x00"  # no tagged fields
    payload = body if isinstance(body, bytes) else codec.encode_body(body)  # bytes: encoded by hand
    return SIZE.pack(len(header) + len(payload)) + header + payload


def response_header_size(api_key: int, version: int) -> int:
    """Bytes before the body: correlation id, plus the tagged-fields byte of header v1."""
    if api_key != API_VERSIONS and codec.is_flexible(api_key, version):
        return CORRELATION_ID.size + 1
    return CORRELATION_ID.size


# ---------------------------------------------------------------------- connection
@dataclass(frozen=True, slots=True)
class Decoder:
    """How an answer's body is read: ``read(frame, position)`` gives the answer. kio's
    reader for most; a hand-written one where kio's copy costs (a follower's Fetch)."""

    name: str
    read: Callable[[bytes | bytearray, int], Any]

    def __call__(self, frame: bytes | bytearray, position: int) -> Any:
        return self.read(frame, position)


@functools.cache
def kio_decoder(cls: type) -> Decoder:
    reader = codec.reader_for(cls)
    # kio reads read-only buffers only: a large answer arrives in a bytearray of its own
    # (the follower's Fetch, read by hand, keeps views of it; the rare large kio answer is copied).
    return Decoder(cls.__name__, lambda frame, position: reader(bytes(frame) if isinstance(frame, bytearray) else frame,
                                                                position)[0])


# A follower's Fetch answer: record bytes stay views of the frame (broker/protocol/replica_fetch.py).
REPLICA_FETCH_DECODER = Decoder("FetchResponse", replica_fetch.decode)


@dataclass(slots=True)
class _Pending:
    future: asyncio.Future[Any]
    decode: "Decoder"
    header_size: int


class _Connection(asyncio.BufferedProtocol):
    """One open socket: frames are written in call order; answers are cut from the bytes as
    they arrive and resolve the caller's future by correlation id. Any failure closes it and
    fails every call in flight with NETWORK_EXCEPTION."""

    def __init__(self) -> None:
        loop = asyncio.get_running_loop()
        self.transport: asyncio.Transport | None = None
        self.pending: dict[int, _Pending] = {}
        self.closed = False
        self._frames = FrameReader(MAX_RESPONSE_SIZE)
        self._chunk = bytearray(RECEIVE_CHUNK)
        self._writable: asyncio.Future[None] | None = None  # set while the transport is paused
        self._lost: asyncio.Future[None] = loop.create_future()

    def send(self, correlation_id: int, frame: bytes, answer: "type | Decoder | None",
             header_size: int) -> asyncio.Future[Any] | None:
        """Queue ``frame``; the future of its answer, or None when none will come (acks=0)."""
        if self.closed or self.transport is None:
            raise KafkaError(ErrorCode.network_exception, "connection closed")
        future: asyncio.Future[Any] | None = None
        if answer is not None:
            future = asyncio.get_running_loop().create_future()
            # Registered before the write: the answer cannot overtake it.
            decode = answer if isinstance(answer, Decoder) else kio_decoder(answer)
            self.pending[correlation_id] = _Pending(future, decode, header_size)
        self.transport.write(frame)
        return future

    async def drain(self) -> bool:
        """Wait until the transport takes writes again; False if the connection closed.
        Not raising keeps one path for the caller: its future already holds the error."""
        if self._writable is not None:
            await asyncio.shield(self._writable)
        return not self.closed

    # ------------------------------------------------------------------ protocol callbacks
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's TLS transport is no asyncio.Transport subclass, though it is one in all but name.
        self.transport = cast(asyncio.Transport, transport)

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._frames.receiving_big:
            return self._frames.big_space()
        return memoryview(self._chunk)

    def buffer_updated(self, nbytes: int) -> None:
        if self.closed:
            return
        frames = self._frames
        try:
            if frames.receiving_big:
                frame = frames.big_received(nbytes)
                if frame is not None:
                    self._answer(frame)
                return
            with memoryview(self._chunk) as chunk:
                frames.feed(chunk[:nbytes])
            while not self.closed:
                small = frames.next_frame()
                if small is None:
                    return
                self._answer(small)
        except ProtocolViolation as exc:
            self.close(repr(exc))

    def eof_received(self) -> bool:
        return False  # the transport closes; connection_lost fails what waits

    def connection_lost(self, exc: Exception | None) -> None:
        self.close("closed by the peer" if exc is None else repr(exc))
        if not self._lost.done():
            self._lost.set_result(None)

    def pause_writing(self) -> None:
        if self._writable is None:
            self._writable = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        self._release_writers()

    # ------------------------------------------------------------------ answers
    def _answer(self, frame: bytes | bytearray) -> None:
        if len(frame) < CORRELATION_ID.size:
            raise ProtocolViolation(f"response of {len(frame)} bytes")
        (correlation_id,) = CORRELATION_ID.unpack_from(frame)
        # Popped here only, even for a caller that gave up (its future is then cancelled):
        # an id we never sent means the stream is out of step.
        pending = self.pending.pop(correlation_id, None)
        if pending is None:
            raise ProtocolViolation(f"answer to correlation id {correlation_id}, which is not in flight")
        if pending.future.done():
            return
        try:
            entity = pending.decode(frame, pending.header_size)
        except Exception as exc:  # kio raises several types on malformed input
            raise ProtocolViolation(f"cannot decode {pending.decode.name}: {exc!r}") from None
        pending.future.set_result(entity)

    def _release_writers(self) -> None:
        waiter, self._writable = self._writable, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def close(self, reason: str = "closed") -> None:
        if self.closed:
            return
        self.closed = True
        for pending in self.pending.values():
            if not pending.future.done():
                pending.future.set_exception(KafkaError(ErrorCode.network_exception, reason))
        self.pending.clear()
        self._release_writers()
        if self.transport is not None:
            self.transport.close()
        elif not self._lost.done():
            self._lost.set_result(None)

    async def wait_closed(self) -> None:
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.shield(self._lost)


# ---------------------------------------------------------------------- the client
class RemotePartitionClient:
    """One connection to one broker (host, port), opened lazily, re-opened after a
    failure; requests pipelined with correlation ids; every call has a timeout.

    Used from one event loop (its connection and lock belong to the loop that opened them)."""

    def __init__(self, host: str, port: int, client_id: str, timeout: float = 30.0,
                 security: "ClientSecurity | None" = None) -> None:
        self.host = host
        self.port = port
        self.client_id = client_id
        self.timeout = timeout
        self.security = security
        self._connection: _Connection | None = None
        self._connecting: asyncio.Lock | None = None
        self._next_correlation_id = 0
        self._closed = False

    # ------------------------------------------------------------------ API
    async def produce(self, topic: str, partition: int, batch: bytes, acks: int = -1) -> int:
        """Append ``batch`` (Produce v9); the partition's error code. With acks=0 the broker
        sends no answer: 0 means the request was written."""
        body = {"transactional_id": None, "acks": acks, "timeout": int(self.timeout * 1000),
                "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": batch}]}]}
        try:
            answer = await self._call(PRODUCE, PRODUCE_VERSION, body, expect_answer=acks != 0, idempotent=False)
            if answer is None:
                return 0
            return int(_partition_of(answer.responses, "name", "partition_responses", "index", topic, partition).error_code)
        except KafkaError as exc:
            return int(exc.code)

    async def write_txn_markers(self, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
                                partitions: Sequence[TopicPartition], transaction_version: int = 0
                                ) -> dict[TopicPartition, int]:
        """One transaction's COMMIT (or ABORT) marker on each of ``partitions``, which this
        broker leads (WriteTxnMarkers v2, with the transaction's version); the error code of
        each partition. The connection must be a broker's (ClientSecurity's proof or
        inter-broker SASL): the broker refuses anyone else with CLUSTER_AUTHORIZATION_FAILED."""
        by_topic: dict[str, list[int]] = {}
        for tp in partitions:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        body = {"markers": [{"producer_id": producer_id, "producer_epoch": producer_epoch, "transaction_result": commit,
                             "coordinator_epoch": coordinator_epoch, "transaction_version": transaction_version,
                             "topics": [{"name": name, "partition_indexes": indexes} for name, indexes in by_topic.items()]}]}
        codes = {tp: int(ErrorCode.unknown_server_error) for tp in partitions}  # left out of the answer: a broken broker
        try:
            answer = await self._call(WRITE_TXN_MARKERS, WRITE_TXN_MARKERS_VERSION, body, idempotent=False)
        except KafkaError as exc:
            return {tp: int(exc.code) for tp in partitions}
        for marker in answer.markers:
            for topic in marker.topics:
                for data in topic.partitions:
                    tp = TopicPartition(topic.name, int(data.partition_index))
                    if tp in codes:
                        codes[tp] = int(data.error_code)
        return codes

    async def high_watermark(self, topic: str, partition: int) -> tuple[int, int, int]:
        """(error, log start offset, high watermark), by ListOffsets v7 for the earliest
        (-2) and the latest (-1) offset; two pipelined requests, as Kafka refuses a
        partition named twice in one."""
        earliest, latest = await asyncio.gather(self._list_offset(topic, partition, EARLIEST_TIMESTAMP),
                                                self._list_offset(topic, partition, LATEST_TIMESTAMP))
        error = earliest[0] or latest[0]
        if error:
            return error, -1, -1
        return 0, earliest[1], latest[1]

    async def fetch(self, topic: str, partition: int, offset: int, max_bytes: int = READ_CHUNK) -> tuple[int, int, bytes]:
        """(error, high watermark, record bytes) of one Fetch v12 from ``offset``: the raw
        batches as the broker sent them; the last may be cut short at ``max_bytes``."""
        body = {"replica_id": -1, "max_wait": 0, "min_bytes": 1, "max_bytes": max_bytes, "isolation_level": 0,
                "session_id": 0, "session_epoch": -1, "forgotten_topics_data": (), "rack_id": "",
                "topics": [{"topic": topic, "partitions": [
                    {"partition": partition, "current_leader_epoch": -1, "fetch_offset": offset,
                     "last_fetched_epoch": -1, "log_start_offset": -1, "partition_max_bytes": max_bytes}]}]}
        try:
            answer = await self._call(FETCH, FETCH_VERSION, body)
            if answer.error_code:
                return int(answer.error_code), -1, b""
            data = _partition_of(answer.responses, "topic", "partitions", "partition_index", topic, partition)
        except KafkaError as exc:
            return int(exc.code), -1, b""
        if data.error_code:
            return int(data.error_code), int(data.high_watermark), b""
        return 0, int(data.high_watermark), data.records or b""

    async def read_all(self, topic: str, partition: int, max_bytes: int = READ_CHUNK) -> tuple[int, bytes]:
        """Every batch from the log start to the high watermark (as it was when the read
        began), concatenated; (error, b"") on failure. Batches come whole, so the first
        may hold records below the log start offset (after DeleteRecords): callers that
        care skip them, as WorkerTopicLog.read_partition does."""
        error, log_start, high_watermark = await self.high_watermark(topic, partition)
        if error:
            return error, b""
        chunks: list[bytes] = []
        offset = max(0, log_start)
        chunk = max_bytes
        while offset < high_watermark:
            error, fetched_high_watermark, data = await self.fetch(topic, partition, offset, chunk)
            if error:
                return error, b""
            try:
                length, next_offset = complete_batches(data, offset, high_watermark)
            except KafkaError as exc:
                return int(exc.code), b""
            if next_offset > offset:
                chunks.append(data[:length])
                offset = next_offset
                continue
            if not data and fetched_high_watermark <= offset:
                break  # the log ends below the watermark we started with: nothing left
            # No whole batch fitted (or none came): a broker may cut a batch larger than
            # max_bytes. Ask for more, up to a bound, rather than loop forever.
            if chunk >= MAX_READ_CHUNK:
                return int(ErrorCode.corrupt_message), b""
            chunk = min(chunk * 2, MAX_READ_CHUNK)
        return 0, b"".join(chunks)

    async def call(self, api_key: int, version: int, fields: dict[str, Any], answer_class: type | None = None) -> Any:
        """Any request kio knows, decoded answer back (the admin CLI's). ``answer_class``:
        an entity to decode the answer as instead of kio's (one kio cannot read)."""
        return await self._call(api_key, version, fields, idempotent=False, answer_class=answer_class)

    async def fetch_as_replica(self, body: bytes) -> Any:
        """A follower's Fetch v15, its body encoded by broker/protocol/replica_fetch.py: the
        answer as that module decodes it, or KafkaError as for every call."""
        return await self._call(1, replica_fetch.VERSION, body, answer_class=REPLICA_FETCH_DECODER)

    async def close(self) -> None:
        """Close the connection; later calls answer NETWORK_EXCEPTION without connecting."""
        self._closed = True
        connection, self._connection = self._connection, None
        if connection is not None:
            connection.close()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.timeout):
                    await connection.wait_closed()

    def close_now(self) -> None:
        """Close the connection without waiting (a process that is stopping)."""
        self._closed = True
        connection, self._connection = self._connection, None
        if connection is not None:
            connection.close()

    # ------------------------------------------------------------------ calls
    async def log_end(self, topic: str, partition: int) -> tuple[int, int]:
        """(error, the leader's log end offset): ListOffsets latest with a replica id other
        than a consumer's (-2, Kafka's debugging id) answers the log end, not the high watermark."""
        return await self._list_offset(topic, partition, LATEST_TIMESTAMP, replica_id=-2)

    async def _list_offset(self, topic: str, partition: int, timestamp: int, replica_id: int = -1) -> tuple[int, int]:
        body = {"replica_id": replica_id, "isolation_level": 0, "topics": [{"name": topic, "partitions": [
            {"partition_index": partition, "current_leader_epoch": -1, "timestamp": timestamp}]}]}
        try:
            answer = await self._call(LIST_OFFSETS, LIST_OFFSETS_VERSION, body)
            data = _partition_of(answer.topics, "name", "partitions", "partition_index", topic, partition)
        except KafkaError as exc:
            return int(exc.code), -1
        return int(data.error_code), int(data.offset)

    async def _call(self, api_key: int, version: int, fields: dict[str, Any] | bytes, *, expect_answer: bool = True,
                    idempotent: bool = True, answer_class: "type | Decoder | None" = None) -> Any:
        """Send one request and return the decoded answer (None when ``expect_answer`` is
        False); raises KafkaError with the code to surface. One deadline covers the
        connect, the write, the answer and the one retry of an idempotent request."""
        if self._closed:
            raise KafkaError(ErrorCode.network_exception, "client closed")
        request_class = codec.request_class(api_key, version)
        assert request_class is not None, f"kio has no api {api_key} v{version}"  # our fixed versions
        body = fields if isinstance(fields, bytes) else build(request_class, fields)
        if answer_class is None and expect_answer:
            answer_class = codec.response_class(api_key, version)
        header_size = response_header_size(api_key, version)
        connection: _Connection | None = None
        try:
            async with asyncio.timeout(self.timeout):
                attempts = 2 if idempotent else 1
                while True:
                    attempts -= 1
                    connection, reused = await self._connect()
                    self._next_correlation_id = (self._next_correlation_id + 1) & 0x7FFFFFFF
                    correlation_id = self._next_correlation_id
                    frame = encode_request(api_key, version, correlation_id, self.client_id, body)
                    try:
                        future = connection.send(correlation_id, frame, answer_class, header_size)
                        written = await connection.drain()
                        if future is not None:
                            return await future
                        if not written:
                            raise KafkaError(ErrorCode.network_exception, "write failed")
                        return None
                    except KafkaError as exc:
                        if exc.code != ErrorCode.network_exception or not reused or attempts <= 0:
                            raise
        except TimeoutError:
            if connection is not None:
                connection.close("request timed out")
            raise KafkaError(ErrorCode.request_timed_out, f"no answer from {self.host}:{self.port} "
                                                          f"within {self.timeout} s") from None

    async def _connect(self) -> tuple[_Connection, bool]:
        """The open connection, or a new one; True when it was opened by an earlier call."""
        connection = self._connection
        if connection is not None and not connection.closed:
            return connection, True
        if self._connecting is None:
            self._connecting = asyncio.Lock()
        async with self._connecting:  # concurrent callers share one connect
            connection = self._connection
            if connection is not None and not connection.closed:
                return connection, True
            if self._closed:
                raise KafkaError(ErrorCode.network_exception, "client closed")
            security = self.security
            tls = security.ssl_context if security is not None else None
            try:
                _transport, connection = await asyncio.get_running_loop().create_connection(
                    _Connection, self.host, self.port, ssl=tls, server_hostname=self.host if tls is not None else None)
            except (OSError, ssl.SSLError) as exc:
                raise KafkaError(ErrorCode.network_exception, f"cannot connect to {self.host}:{self.port}: {exc}") from None
            if security is not None and (security.mechanism is not None or security.proof is not None):
                try:
                    await self._authenticate(connection, security)
                except BaseException:
                    connection.close("authentication failed")
                    raise
            self._connection = connection
            return connection, False

    async def _authenticate(self, connection: _Connection, security: "ClientSecurity") -> None:
        """SaslHandshake v1 and SaslAuthenticate v2 on a new connection, before anything else:
        Kafka's SASL as configured, else the broker's proof (CASTLE-BROKER)."""
        client: SaslClient | BrokerProofClient
        if security.mechanism is not None:
            mechanism = security.mechanism
            client = SaslClient(security.mechanism, security.username, security.password)
        else:
            assert security.proof is not None
            mechanism = BROKER_MECHANISM
            client = BrokerProofClient(*security.proof)
        handshake = await self._exchange(connection, SASL_HANDSHAKE, 1, {"mechanism": mechanism})
        if handshake.error_code:
            raise KafkaError(ErrorCode(int(handshake.error_code)), f"{self.host}:{self.port} refused SASL mechanism {mechanism}")
        token: bytes | None = client.first()
        while token is not None:
            answer = await self._exchange(connection, SASL_AUTHENTICATE, 2, {"auth_bytes": token})
            if answer.error_code:
                raise KafkaError(ErrorCode(int(answer.error_code)), f"{self.host}:{self.port}: {answer.error_message}")
            try:
                token = client.step(bytes(answer.auth_bytes))
            except SaslClientError as exc:
                raise KafkaError(ErrorCode.sasl_authentication_failed, f"{self.host}:{self.port}: {exc}") from None

    async def _exchange(self, connection: _Connection, api_key: int, version: int, fields: dict[str, Any]) -> Any:
        request_class = codec.request_class(api_key, version)
        assert request_class is not None
        self._next_correlation_id = (self._next_correlation_id + 1) & 0x7FFFFFFF
        frame = encode_request(api_key, version, self._next_correlation_id, self.client_id, build(request_class, fields))
        future = connection.send(self._next_correlation_id, frame, codec.response_class(api_key, version),
                                 response_header_size(api_key, version))
        await connection.drain()
        assert future is not None
        return await future


def _partition_of(topics: Any, topic_field: str, partitions_field: str, index_field: str, topic: str,
                  partition: int) -> Any:
    """The answer's entry for (topic, partition); a broker that leaves it out has broken
    the protocol, which a client sees as UNKNOWN_SERVER_ERROR."""
    for entry in topics:
        if getattr(entry, topic_field) == topic:
            for data in getattr(entry, partitions_field):
                if getattr(data, index_field) == partition:
                    return data
    raise KafkaError(ErrorCode.unknown_server_error, f"the answer has no {topic}-{partition}")


def complete_batches(data: bytes, offset: int, high_watermark: int) -> tuple[int, int]:
    """(bytes of the whole batches at the start of ``data`` that begin below
    ``high_watermark``, the offset after the last of them — ``offset`` when there is
    none). A batch cut short at max_bytes ends the scan: it is fetched again whole.
    Raises KafkaError(CORRUPT_MESSAGE) on a batch no broker would send."""
    position = 0
    next_offset = offset
    while len(data) - position >= LOG_OVERHEAD:
        _base_offset, batch_length = LOG_OVERHEAD_STRUCT.unpack_from(data, position)
        if batch_length < MIN_BATCH_LENGTH:
            raise KafkaError(ErrorCode.corrupt_message, f"batchLength {batch_length} at byte {position}")
        end = position + LOG_OVERHEAD + batch_length
        if end > len(data):
            break
        header = parse_header(data, position)
        if header.magic != MAGIC_V2:
            raise KafkaError(ErrorCode.corrupt_message, f"magic {header.magic} at byte {position}")
        if header.base_offset >= high_watermark:
            break
        next_offset = max(next_offset, header.next_offset)
        position = end
    return position, next_offset
