"""Fetch (key 1), versions 0-16.

The request body is decoded by broker/protocol/fetch_request.py into plain tuples, not
by kio (a 1,000-partition request is decoded ~130 times a second).

Behaviour: record bytes go from the segment file to the socket with os.sendfile and
never enter Python: the owner of each partition (this worker, or another over the rings) says
where the bytes lie (path, inode, position, length) and this worker sends that range
(broker/network/segment_files.py opens it). Any worker answers any partition's fetch. With
min_bytes not reached and max_wait_ms > 0 the request parks in the purgatory until an
append to one of its partitions (in any worker) or the deadline: no polling.
Fetch sessions (KIP-227) are declined the way Kafka allows: we answer session_id 0, so
clients keep sending full requests; an incremental request (epoch > 0) for a session
we never gave answers FETCH_SESSION_ID_NOT_FOUND. zstd data is never sent below v10
(UNSUPPORTED_COMPRESSION_TYPE for that partition).

Transactions (v4+): a read_committed fetch (isolation_level 1) reads below the last stable
offset, still by sendfile, and is answered the aborted transactions (producer id, first
offset) that may start in the bytes sent, so the consumer drops their batches (as Kafka, it
also gets the aborted transactions' batches and the control batches). Its aborted list is
empty, never null; a read_uncommitted fetch's is null, as Kafka answers it. Every answer
carries the owner's last stable offset (-1 with an error, as Kafka).

Byte limits (KIP-74, as Kafka's ReplicaManager.readFromLog): partitions are filled in request
order, each with at most min(partition_max_bytes, what is left of max_bytes) of whole
batches; only the first partition with data may go over, by its first batch, so a consumer
always progresses. The owners read each partition with min(partition_max_bytes, max_bytes)
(they may be other workers, read in parallel); ResponseBudget then cuts the answers in
order. A range that fits costs nothing more; one that does not is cut at a batch boundary
found from the batches' length prefixes (storage/batch_cut.py): a few bytes read per batch
up to the cut, the record bytes still leave by sendfile. Whole batches only: Kafka may end
a partition with a partial batch, which clients drop, so the answers are the same records.

Fetch v0-v3 (Kafka 3.9 served them, 4.0 does not): their clients read message sets of
magic 0 (v0-1) or 1 (v2-3), so those answers are down-converted in memory
(storage/legacy_records.py: control batches and headers dropped, a compressed batch one
wrapper of the same codec, zstd UNSUPPORTED_COMPRESSION_TYPE), at most
LEGACY_FETCH_MAX_BYTES a response; v0-v2 have no max_bytes of their own.

Version notes: v4 isolation_level, last_stable_offset, aborted transactions; v5
log_start_offset; v7 sessions and top-level error_code; v9 current_leader_epoch;
v10 zstd; v11 rack_id and preferred_read_replica (-1); v12 flexible, diverging_epoch and
current_leader; v13 topic ids instead of names; v15 replica_state replaces replica_id; v16
node_endpoints (the leaders named in current_leader).
"""

from __future__ import annotations

import functools
import os
import time
import uuid

from broker.apis.metadata import current_leader, leader_endpoints
from broker.authorization import topic_allowed
from broker.context import FileChunk, RawResponse, RequestContext, WorkerServices
from broker.dispatch import api
from broker.links.forwarding import on_owners
from broker.partitions.partition_ops import ReadItem, ReadResult
from broker.partitions.replication_throttle import ReplicaThrottle
from broker.protocol import fast, fetch_request
from broker.protocol.errors import ErrorCode
from broker.protocol.fetch_request import FetchRequest
from broker.quotas.shared_counters import FETCH
from coordination.acls.model import Operation
from storage.batch import HEADER_SIZE
from storage.batch_cut import whole_batches_within
from storage.errors import StorageError
from storage.legacy_records import down_convert, fetch_magic
from storage.types import TopicPartition, partitions_of

KEY = 1
# Fetch v0-v3 read what they send into memory (down-conversion): at most this much a response.
LEGACY_FETCH_MAX_BYTES = 32 * 1024 * 1024
ZERO_UUID = uuid.UUID(int=0)


# One requested partition: (topic index, partition, error code, read item or None); None
# when the partition is answered with the error alone. Plain tuples, and ReadItems made by
# tuple.__new__ (one C call, not the NamedTuple's Python constructor): at 1,000 partitions
# per Fetch an object per partition was a measurable share of resolve.
Wanted = tuple[int, int, int, "ReadItem | None"]
_read_item = functools.partial(tuple.__new__, ReadItem)
# The same for each partition's answer: every field given, in FetchPartitionOut's order.
_partition_out = functools.partial(tuple.__new__, fast.FetchPartitionOut)


def resolve(ctx: RequestContext, request: FetchRequest) -> tuple[list[tuple[str, uuid.UUID]], list[Wanted]]:
    """The request's topics as (name, topic id), and one Wanted per requested partition in
    request order: a read item for each partition to read, an error code for the others
    (unknown topic or partition, or refused by authorization). Reads nothing yet."""
    node = ctx.node
    version = ctx.api_version
    refuse_zstd = version < 10
    replica_id = request.replica_id
    isolation = 1 if request.isolation_level == 1 else 0  # Kafka knows no other level
    # Only brokers fetch as replicas (reading past the high watermark, moving it): a live
    # broker's id, on a connection that proved it is a broker (or, with an authorizer, has
    # CLUSTER_ACTION); else every partition is refused, as Kafka refuses an unauthorized follower.
    refused = 0
    if replica_id >= 0 and (replica_id not in node.cluster.live_brokers()
                            or not node.security.is_broker(ctx.connection.auth.principal, ctx.connection.host)):
        refused = ErrorCode.topic_authorization_failed
    check_topics = node.security.authorizer_on and replica_id < 0  # a consumer: READ on each topic
    # No partition may send more than the whole response may (Kafka reads each with
    # min(partition_max_bytes, what is left of max_bytes)): owners need not find the end
    # of 20 MB of batches for a 1 MB response.
    response_max = max(0, request.max_bytes)
    topics: list[tuple[str, uuid.UUID]] = []
    wanted: list[Wanted] = []
    add = wanted.append
    for topic in request.topics:
        if topic.topic_id is not None:  # v13+ names topics by id
            info = node.registry.by_id(topic.topic_id)
            if info is None and node.registry.refresh():
                info = node.registry.by_id(topic.topic_id)
            missing = ErrorCode.unknown_topic_id
            topics.append((info.name if info else "", topic.topic_id))
        else:
            info = node.topic(topic.topic)
            missing = ErrorCode.unknown_topic_or_partition
            topics.append((topic.topic, info.topic_id if info else ZERO_UUID))
        index = len(topics) - 1
        denied = check_topics and info is not None and not topic_allowed(ctx, Operation.READ, info.name)
        if info is None or refused or denied:
            code = refused or (ErrorCode.topic_authorization_failed if denied else missing)
            for partition, *_rest in topic.partitions:
                add((index, partition, code, None))
            continue
        count = info.partitions
        tps = partitions_of(info.name, count)
        for partition, fetch_offset, max_bytes, leader_epoch, last_fetched_epoch in topic.partitions:
            if 0 <= partition < count:
                limit = (max_bytes if max_bytes < response_max else response_max) if max_bytes > 0 else 0
                add((index, partition, 0, _read_item((tps[partition], fetch_offset, limit, refuse_zstd, replica_id,
                                                      leader_epoch, last_fetched_epoch, isolation))))
            else:
                add((index, partition, ErrorCode.unknown_topic_or_partition, None))
    return topics, wanted


async def _read_again(node: WorkerServices, items: list[ReadItem], results: list[ReadResult],
                      appended: set[TopicPartition]) -> list[ReadResult]:
    """After a wakeup: read again only the partitions appended to since the last read.
    The others were read after the watch was registered and no append has touched them
    since, so their answers (empty, or bytes still below min_bytes) stand. At 1,000
    partitions a wakeup used to read all 1,000 again for one appended batch. A fetch
    answered at its deadline still reads every partition afresh, as Kafka does."""
    again = [i for i, item in enumerate(items) if item[0] in appended]
    if not again:
        return results
    fresh = await on_owners(node, [items[i] for i in again], lambda ops, part: ops.read(part, node.index), ReadResult)
    merged = list(results)
    for i, result in zip(again, fresh):
        merged[i] = result
    return merged


def _session_error(ctx: RequestContext, request: FetchRequest) -> int:
    if ctx.api_version >= 7 and request.session_epoch > 0:
        return ErrorCode.fetch_session_id_not_found
    return 0


@api(KEY, "Fetch", fetch_request.VERSIONS[0], fetch_request.VERSIONS[-1], decode=fetch_request.decode)
async def handle_fetch(ctx: RequestContext, request: FetchRequest) -> RawResponse:
    node = ctx.node
    node.stats["fetch_requests"] += 1
    session_error = _session_error(ctx, request)
    if session_error:
        return respond(ctx, session_error, [], [], [])
    topics, wanted = resolve(ctx, request)
    items = [w[3] for w in wanted if w[3] is not None]
    tps = [item[0] for item in items]
    max_wait = request.max_wait_ms / 1000
    deadline = time.monotonic() + max(0.0, max_wait)
    min_bytes = max(1, request.min_bytes)
    watch = node.purgatory.watch(tps) if items and max_wait > 0 else None
    try:
        watcher = node.index if watch is not None else None
        results = await on_owners(node, items, lambda ops, part: ops.read(part, watcher), ReadResult) if items else []
        while True:
            available = sum(r.length for r in results)
            remaining = deadline - time.monotonic()
            if (watch is None or available >= min_bytes or remaining <= 0 or node.purgatory.closed
                    or any(r.error_code for r in results)):
                break
            if not await watch.wait(remaining):
                results = await on_owners(node, items, lambda ops, part: ops.read(part, None), ReadResult)
                break
            if node.purgatory.closed:
                # Shutdown woke us: answer with what was read. Reading again would ask
                # owners that may have stopped already.
                break
            results = await _read_again(node, items, results, watch.rearm())
    finally:
        if watch is not None:
            watch.cancel()
    consumer = request.replica_id < 0
    max_bytes = request.max_bytes
    if consumer and node.quotas.table.fetch:
        most = node.quotas.most_in_window(FETCH, ctx.connection.auth.principal, ctx.client_id)
        if most is not None:
            max_bytes = min(max_bytes, most)
    return respond(ctx, 0, topics, wanted, results, max_bytes,
                   request.isolation_level == 1 and consumer, consumer,
                   None if consumer else node.replication_throttles.leader)


def respond(ctx: RequestContext, error_code: int, topics: list[tuple[str, uuid.UUID]], wanted: list[Wanted],
            results: list[ReadResult], max_bytes: int = 0, read_committed: bool = False,
            consumer: bool = False, leader_throttle: ReplicaThrottle | None = None) -> RawResponse:
    """The answer to the owners' ``results`` (one per read item of ``wanted``), the
    records as file ranges within ``max_bytes`` (loadtest/micro/fetch_cost.py times it).
    ``read_committed``: a consumer's isolation_level 1, answered the aborted transactions.
    ``consumer``: a client's fetch, held to its consumer_byte_rate (a follower's is not).
    ``leader_throttle``: a follower's fetch on a broker with a leader replication rate: the
    bytes sent of the partitions it throttles count towards that rate (Kafka's
    sizeOfThrottledPartitions, in sync or not)."""
    node = ctx.node
    out_topics = [fast.FetchTopicOut(name, topic_id, []) for name, topic_id in topics]
    chunks: list[FileChunk | bytes] = []
    legacy_magic = fetch_magic(ctx.api_version) if ctx.api_version < 4 else None
    sent: list[tuple[str, int]] = []  # counted once known to go (a throttled answer goes without)
    budget = ResponseBudget(max_bytes if legacy_magic is None else min(max_bytes, LEGACY_FETCH_MAX_BYTES))
    result_iter = iter(results)
    throttled_bytes = 0
    for topic_index, partition, error, item in wanted:
        if item is None:
            out_topics[topic_index].partitions.append(fast.FetchPartitionOut(partition, error, -1, -1, -1, 0))
            continue
        r = next(result_iter)
        code = r.error_code
        length = r.length
        partition_max = item[2]
        if length and budget.exhausted(partition_max):
            length = 0  # not one batch fits what is left: this partition waits for the next fetch
        fd = node.segment_files.dup_fd(r.path, r.inode) if length else None
        if fd is not None:
            length = budget.take(fd, r.position, length, partition_max)
            if not length:
                os.close(fd)
                fd = None
        if fd is None:
            length = 0
        elif legacy_magic is not None:
            converted, code = _down_converted(fd, r.position, length, legacy_magic, item.offset)
            if converted:
                chunks.append(converted)
            length = len(converted)
        else:
            chunks.append(FileChunk(fd, r.position, length))
        if length:
            sent.append((topics[topic_index][0], length))
            if leader_throttle is not None and leader_throttle.throttled(item[0]):
                throttled_bytes += length
        leader, leader_epoch = _leader_hint(node, code, item[0]) if code and ctx.api_version >= 12 else (-1, -1)
        out_topics[topic_index].partitions.append(_partition_out((
            partition, code, r.high_watermark, r.last_stable_offset, r.log_start_offset, length, r.diverging_epoch,
            r.diverging_end_offset, leader, leader_epoch, r.aborted if read_committed and not code else None)))
    endpoints: list[tuple[int, str, int]] = []
    if ctx.api_version >= 16:  # KIP-951: where the leaders named in current_leader listen
        endpoints = leader_endpoints(node, ctx.connection.listener.name, (p.current_leader_id for t in out_topics for p in t.partitions
                                            if p.current_leader_id >= 0))
    if throttled_bytes:
        leader_throttle.record(throttled_bytes)  # type: ignore[union-attr]
    throttle_ms = 0
    if consumer and node.quotas.table.fetch:
        throttle_ms = _consumer_quota(ctx, chunks, out_topics)
        if not chunks:
            sent.clear()
    for topic_name, length in sent:
        node.metrics.sent(topic_name, length)
    pieces = fast.encode_fetch_response(ctx.api_version, error_code, 0, out_topics, endpoints, throttle_ms)
    body: list[bytes | FileChunk] = [pieces[0]]
    size = len(pieces[0])
    for chunk, piece in zip(chunks, pieces[1:]):
        body.append(chunk)
        body.append(piece)
        size += (chunk.length if isinstance(chunk, FileChunk) else len(chunk)) + len(piece)
    return RawResponse(body, size)


def _consumer_quota(ctx: RequestContext, chunks: list[FileChunk | bytes], out_topics: list[fast.FetchTopicOut]) -> int:
    """Kafka's consumer_byte_rate on a Fetch answer: the records' size is recorded (nearly
    all of the response's); over the quota, as Kafka does, the answer goes without records
    (their size taken back: they were not sent), carries the throttle time, and the
    connection is muted that long. ``chunks`` and ``out_topics`` are emptied then."""
    node = ctx.node
    principal = ctx.connection.auth.principal
    sent = sum(chunk.length if isinstance(chunk, FileChunk) else len(chunk) for chunk in chunks)
    throttle_ms = node.quotas.throttle_ms(FETCH, principal, ctx.client_id, sent)
    if not throttle_ms:
        return 0
    node.stats["quota_throttled_fetch"] += 1
    if sent:
        node.quotas.unrecord(FETCH, principal, ctx.client_id, sent)
        for chunk in chunks:
            if isinstance(chunk, FileChunk):
                os.close(chunk.fd)
        chunks.clear()
        for topic in out_topics:
            topic.partitions[:] = [p._replace(records_length=0, aborted=None if p.aborted is None else ())
                                   for p in topic.partitions]
    ctx.connection.mute_after_answer(throttle_ms)
    return throttle_ms


class ResponseBudget:
    """What is left of a Fetch response's max_bytes, spent partition by partition in
    request order (Kafka's readFromLog): each partition sends whole batches within
    min(its partition_max_bytes, what is left); the first partition with data sends at
    least its first batch, however large."""

    __slots__ = ("left", "first")

    def __init__(self, max_bytes: int) -> None:
        self.left = max(0, max_bytes)
        self.first = True  # no partition has sent data yet

    def exhausted(self, partition_max: int) -> bool:
        """Nothing can fit, known without reading: saves opening the file of every
        partition after the response is full."""
        return not self.first and min(partition_max, self.left) < HEADER_SIZE

    def take(self, fd: int, position: int, length: int, partition_max: int) -> int:
        """How much of the owner's range (whole batches at ``position``) goes, and spend it.
        A range that fits costs no syscall; a cut reads the batches' length prefixes."""
        limit = min(partition_max, self.left)
        if length > limit:
            length = whole_batches_within(fd, position, length, limit, at_least_one=self.first)
        if length:
            self.left = max(0, self.left - length)
            self.first = False
        return length


def _leader_hint(node: WorkerServices, code: int, tp: TopicPartition) -> tuple[int, int]:
    """KIP-951: who leads ``tp`` now, with a NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH
    answer, so the client need not ask Metadata first."""
    if code not in (ErrorCode.not_leader_or_follower, ErrorCode.fenced_leader_epoch):
        return -1, -1
    return current_leader(node, tp.topic, tp.partition) or (-1, -1)


def _down_converted(fd: int, position: int, length: int, magic: int, fetch_offset: int) -> tuple[bytes, int]:
    """Fetch v0-v3: the stored v2 batches as a message set of ``magic`` (Kafka 3.x's
    down-conversion; the one read of record bytes into Python memory, bounded by
    LEGACY_FETCH_MAX_BYTES a response) and the partition's error code."""
    try:
        data = os.pread(fd, length, position)
    finally:
        os.close(fd)
    try:
        return down_convert(data, magic, first_offset=fetch_offset, max_bytes=length), 0
    except StorageError as exc:  # zstd has no legacy form: UNSUPPORTED_COMPRESSION_TYPE
        return b"", exc.kafka_error_code
