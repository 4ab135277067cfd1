"""ShareFetch (key 78) and ShareAcknowledge (key 79), version 1: share groups' reads (KIP-932).

Any worker takes the request; each share partition's part goes to the partition's owner
(broker/partitions/share_partitions.py, over the rings as a Fetch's reads do), which applies
the acknowledgements, persists them, and acquires records for the member. The records go
from the segment file to the socket with sendfile, as a Fetch's, with the acquired offset
ranges beside them (a batch may hold records the member did not acquire: the client keeps
only the acquired ones, as from Kafka).

Order within a ShareFetch is Kafka's: the share session first (broker/apis/share_sessions.py:
epoch 0 opens one and may carry no acknowledgements, INVALID_REQUEST otherwise; a later epoch
continues it, adding the request's partitions and dropping the forgotten ones; -1 closes it
after its acknowledgements and gives back every record the member still holds in it), then
the acknowledgements, then the fetch from every partition of the session. A fetch that
acquired nothing waits up to max_wait_ms for an append to one of its partitions (the Fetch
purgatory) and tries once more.

Errors: a missing group or member id is INVALID_REQUEST for the whole request; READ on the
group else GROUP_AUTHORIZATION_FAILED; per partition, an unknown topic id UNKNOWN_TOPIC_ID, a
partition the topic lacks UNKNOWN_TOPIC_OR_PARTITION, READ on the topic else
TOPIC_AUTHORIZATION_FAILED, a partition not led here NOT_LEADER_OR_FOLLOWER with its leader
(KIP-951); acknowledgements of records the member does not hold INVALID_RECORD_STATE,
malformed ones INVALID_REQUEST (in acknowledge_error_code), and the state unchanged.

Version notes: v1 is the first version Kafka 4.x serves (v0 was KIP-932's early access).
v2 (acquire modes, RENEW acknowledgements) is not served.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import TYPE_CHECKING, Any

from kio.static.protocol import Entity

from broker.apis.metadata import current_leader, leader_endpoints
from broker.apis.share_sessions import FINAL_EPOCH, INITIAL_EPOCH, SharePartitionKey, ShareSession
from broker.authorization import group_allowed, topic_allowed
from broker.context import FileChunk, RawResponse, RequestContext, WorkerServices
from broker.dispatch import api
from broker.links.forwarding import on_owners
from broker.partitions.partition_ops import ShareAck, ShareAckItem, ShareFetchItem, ShareFetchResult
from broker.protocol import codec, share_fetch_response
from broker.protocol.build import build
from broker.protocol.errors import ErrorCode, KafkaError
from broker.protocol.share_fetch_response import SharePartitionOut
from coordination.acls.model import Operation
from storage.types import TopicPartition

if TYPE_CHECKING:  # ~200 kio classes, for mypy only: none is imported at run time (requests.py)
    from broker.protocol.requests import ShareAcknowledgeRequest, ShareFetchRequest

FETCH_KEY = 78
ACK_KEY = 79
E = ErrorCode
ACK_TYPES = frozenset({0, 1, 2, 3})  # gap, accept, release, reject (RENEW is v2's)
NO_TOPIC = uuid.UUID(int=0)  # a null topic id: no topic has it

# A requested partition once resolved: its key, and its TopicPartition or the error code
# that answers it without asking any owner.
Resolved = tuple[SharePartitionKey, "TopicPartition | None", int]


def _resolve(ctx: RequestContext, keys: list[SharePartitionKey]) -> list[Resolved]:
    node = ctx.node
    check = node.security.authorizer_on
    out: list[Resolved] = []
    for topic_id, partition in keys:
        info = node.registry.by_id(topic_id)
        if info is None and node.registry.refresh():
            info = node.registry.by_id(topic_id)
        if info is None:
            out.append(((topic_id, partition), None, int(E.unknown_topic_id)))
        elif check and not topic_allowed(ctx, Operation.READ, info.name):
            out.append(((topic_id, partition), None, int(E.topic_authorization_failed)))
        elif not 0 <= partition < info.partitions:
            out.append(((topic_id, partition), None, int(E.unknown_topic_or_partition)))
        else:
            out.append(((topic_id, partition), TopicPartition(info.name, partition), 0))
    return out


def _acks_of(batches: Any) -> tuple[ShareAck, ...]:
    return tuple((int(b.first_offset), int(b.last_offset), tuple(int(t) for t in b.acknowledge_types))
                 for b in batches)


def _well_formed(acks: tuple[ShareAck, ...]) -> bool:
    """Kafka's checks of a partition's acknowledgement batches before anything is applied
    (KafkaApis.validateAcknowledgementBatches): a malformed list fails that partition's
    acknowledgements with INVALID_REQUEST, nothing else."""
    previous = -1
    for first, last, types in acks:
        if first > last or first < previous or not types:
            return False
        if len(types) != 1 and len(types) != last - first + 1:
            return False
        if any(t not in ACK_TYPES for t in types):
            return False
        previous = last
    return True


def _requested(request: ShareFetchRequest | ShareAcknowledgeRequest) -> dict[SharePartitionKey, tuple[ShareAck, ...]]:
    """The request's partitions and their acknowledgements, in request order."""
    out: dict[SharePartitionKey, tuple[ShareAck, ...]] = {}
    for topic in request.topics:
        for p in topic.partitions:
            out[(topic.topic_id or NO_TOPIC, int(p.partition_index))] = _acks_of(p.acknowledgement_batches)
    return out


def _leader(ctx: RequestContext, code: int, tp: TopicPartition | None) -> tuple[int, int]:
    if tp is None or code not in (E.not_leader_or_follower, E.fenced_leader_epoch):
        return -1, -1
    return current_leader(ctx.node, tp.topic, tp.partition) or (-1, -1)


def _lock_timeout(ctx: RequestContext, group_id: str) -> int:
    settings_of = getattr(ctx.node, "share_settings", None)
    if settings_of is None:
        return ctx.node.config.get_int("group.share.record.lock.duration.ms")
    return int(settings_of(group_id).record_lock_duration_ms)


def _empty_fetch(code: int, message: str | None = None) -> RawResponse:
    pieces = share_fetch_response.encode(code, 0, [], [], message)
    return RawResponse(list(pieces), sum(len(p) for p in pieces))


@api(FETCH_KEY, "ShareFetch", 1, 1)
async def handle_share_fetch(ctx: RequestContext, request: ShareFetchRequest) -> RawResponse:
    node = ctx.node
    group_id, member_id = request.group_id, request.member_id
    if not group_id or not member_id:
        return _empty_fetch(int(E.invalid_request), "a share fetch needs a group id and a member id")
    if node.security.authorizer_on and not group_allowed(ctx, Operation.READ, group_id):
        return _empty_fetch(int(E.group_authorization_failed))
    requested = _requested(request)
    epoch = int(request.share_session_epoch)
    sessions = node.share_sessions
    try:
        if epoch == INITIAL_EPOCH:
            if any(requested.values()):
                raise KafkaError(E.invalid_request, "a share session's first fetch carries no acknowledgements")
            session = sessions.open(group_id, member_id)
            _end_with_connection(ctx, session)
        else:
            session = sessions.current(group_id, member_id, epoch)
    except KafkaError as exc:
        return _empty_fetch(int(exc.code), str(exc))
    malformed = {key for key, acks in requested.items() if not _well_formed(acks)}
    closing = epoch == FINAL_EPOCH
    fresh = set(requested) - set(session.partitions)
    if not closing:
        session.add(list(requested))
        session.forget([(t.topic_id or NO_TOPIC, int(p)) for t in request.forgotten_topics_data for p in t.partitions])
    keys = list(requested) if closing else list(session.partitions)
    resolved = _resolve(ctx, keys)
    max_records = max(1, int(request.max_records)) if int(request.max_records) > 0 else 500
    fetching = [r for r in resolved if r[1] is not None]
    per_partition = max(1, int(request.max_bytes) // max(1, len(fetching)))
    items = [ShareFetchItem(tp, str(key[0]), group_id, member_id, not closing, per_partition, max_records,
                            () if key in malformed else requested.get(key, ()), node.index, key in fresh)
             for key, tp, _code in resolved if tp is not None]
    results = await on_owners(node, items, lambda ops, part: ops.share_fetch(part), ShareFetchResult) if items else []
    if malformed:
        results = [r._replace(ack_error_code=int(E.invalid_request)) if key in malformed else r
                   for (key, _tp, _c), r in zip([x for x in resolved if x[1] is not None], results)]
    if not closing and items and not any(r.acquired for r in results):
        results = await _wait_and_fetch_again(ctx, request, items, results)
    if closing:
        await _release(ctx, session, resolved)
        sessions.close(session)
    return _respond(ctx, group_id, resolved, results, requested, closing)


async def _wait_and_fetch_again(ctx: RequestContext, request: ShareFetchRequest, items: list[ShareFetchItem],
                                results: list[ShareFetchResult]) -> list[ShareFetchResult]:
    """Nothing acquired: park until an append to one of the partitions or max_wait_ms, then
    fetch once more (only fetch: the acknowledgements were applied)."""
    node = ctx.node
    max_wait = max(0.0, request.max_wait.total_seconds())
    if max_wait <= 0 or any(r.error_code for r in results):
        return results
    deadline = time.monotonic() + max_wait
    watch = node.purgatory.watch([item.tp for item in items])
    try:
        # Ask again after the watch exists: an append between the first fetch and the
        # watch would otherwise be missed until the deadline.
        again = [item._replace(acks=(), fresh=False) for item in items]
        fresh = await on_owners(node, again, lambda ops, part: ops.share_fetch(part), ShareFetchResult)
        while not any(r.acquired for r in fresh) and not node.purgatory.closed:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not await watch.wait(remaining):
                break
            watch.rearm()
            fresh = await on_owners(node, again, lambda ops, part: ops.share_fetch(part), ShareFetchResult)
    finally:
        watch.cancel()
    # Keep the first round's acknowledgement answers.
    return [f._replace(ack_error_code=r.ack_error_code) for f, r in zip(fresh, results)]


async def _release(ctx: RequestContext, session: ShareSession, resolved: list[Resolved]) -> None:
    """A closed session: what its member still holds in its partitions is available again."""
    closing = {key for key, _tp, _code in resolved}
    await _release_keys(ctx.node, session, list(session.partitions) + [k for k in closing if k not in session.partitions])


async def _release_keys(node: WorkerServices, session: ShareSession, keys: list[SharePartitionKey]) -> None:
    items = []
    for topic_id, partition in keys:
        info = node.registry.by_id(topic_id)
        if info is not None and 0 <= partition < info.partitions:
            items.append(ShareAckItem(TopicPartition(info.name, partition), str(topic_id), session.group_id,
                                      session.member_id, (), True))
    if items:
        await on_owners(node, items, lambda ops, part: ops.share_acknowledge(part), int)


def _end_with_connection(ctx: RequestContext, session: ShareSession) -> None:
    """A share session lives as long as the connection that opened it (as Kafka's since 4.1):
    once it closes, the records its member holds here are available again at once, not at
    the end of their locks."""
    node = ctx.node

    def closed() -> None:
        if node.share_sessions.sessions.get((session.group_id, session.member_id)) is session:
            node.share_sessions.close(session)
            task = asyncio.ensure_future(_release_keys(node, session, list(session.partitions)))
            _background.add(task)
            task.add_done_callback(_background.discard)

    ctx.connection.on_close(closed)


_background: set[asyncio.Task[None]] = set()


def _respond(ctx: RequestContext, group_id: str, resolved: list[Resolved], results: list[ShareFetchResult],
             requested: dict[SharePartitionKey, tuple[ShareAck, ...]], closing: bool) -> RawResponse:
    node = ctx.node
    topics: dict[uuid.UUID, list[SharePartitionOut]] = {}
    chunks: list[FileChunk | None] = []
    result_iter = iter(results)
    for key, tp, code in resolved:
        result = next(result_iter) if tp is not None else ShareFetchResult(code, code if key in requested else 0)
        fd = node.segment_files.dup_fd(result.path, result.inode) if result.length else None
        acquired = result.acquired if fd is not None else ()
        # A partition with nothing to say is left out of a session's later answers, as Kafka's.
        if not (acquired or result.error_code or key in requested):
            continue
        leader = _leader(ctx, result.error_code, tp)
        ack_code = result.ack_error_code if requested.get(key) else 0
        topics.setdefault(key[0], []).append(SharePartitionOut(
            key[1], result.error_code, ack_code, *leader, result.length if fd is not None else 0, acquired))
        chunks.append(FileChunk(fd, result.position, result.length) if fd is not None else None)
        if fd is not None and tp is not None:
            node.metrics.sent(tp.topic, result.length)
    leaders = [p.leader_id for ps in topics.values() for p in ps if p.leader_id >= 0]
    endpoints = leader_endpoints(node, ctx.connection.listener.name, leaders) if leaders else []
    pieces = share_fetch_response.encode(0, _lock_timeout(ctx, group_id), list(topics.items()), endpoints)
    body: list[bytes | FileChunk] = [pieces[0]]
    size = len(pieces[0])
    for chunk, piece in zip(chunks, pieces[1:]):
        if chunk is not None:
            body.append(chunk)
            size += chunk.length
        body.append(piece)
        size += len(piece)
    return RawResponse(body, size)


# ---------------------------------------------------------------------- ShareAcknowledge

def _ack_answer(version: int, code: int, message: str | None = None,
                topics: list[dict[str, Any]] | None = None, endpoints: list[tuple[int, str, int]] | None = None) -> Entity:
    return build(codec.response_class(ACK_KEY, version), {
        "throttle_time": 0, "error_code": code, "error_message": message, "responses": topics or [],
        "node_endpoints": [{"node_id": n, "host": h, "port": p, "rack": None} for n, h, p in endpoints or []]})


@api(ACK_KEY, "ShareAcknowledge", 1, 1)
async def handle_share_acknowledge(ctx: RequestContext, request: ShareAcknowledgeRequest) -> Entity:
    node = ctx.node
    version = ctx.api_version
    group_id, member_id = request.group_id, request.member_id
    if not group_id or not member_id:
        return _ack_answer(version, int(E.invalid_request), "a share acknowledge needs a group id and a member id")
    if node.security.authorizer_on and not group_allowed(ctx, Operation.READ, group_id):
        return _ack_answer(version, int(E.group_authorization_failed))
    epoch = int(request.share_session_epoch)
    requested = _requested(request)
    malformed = {key for key, acks in requested.items() if not _well_formed(acks)}
    try:
        if epoch == INITIAL_EPOCH:
            raise KafkaError(E.invalid_share_session_epoch, "a share acknowledge cannot open a share session")
        session = node.share_sessions.current(group_id, member_id, epoch)
    except KafkaError as exc:
        return _ack_answer(version, int(exc.code), str(exc))
    resolved = [(key, None, int(E.invalid_request)) if key in malformed else (key, tp, code)
                for key, tp, code in _resolve(ctx, list(requested))]
    items = [ShareAckItem(tp, str(key[0]), group_id, member_id, requested[key])
             for key, tp, _code in resolved if tp is not None]
    codes = await on_owners(node, items, lambda ops, part: ops.share_acknowledge(part), int) if items else []
    if epoch == FINAL_EPOCH:
        await _release(ctx, session, resolved)
        node.share_sessions.close(session)
    code_iter = iter(codes)
    topics: dict[uuid.UUID, list[dict[str, Any]]] = {}
    leaders: list[int] = []
    for key, tp, code in resolved:
        answer = next(code_iter) if tp is not None else code
        leader_id, leader_epoch = _leader(ctx, answer, tp)
        if leader_id >= 0:
            leaders.append(leader_id)
        topics.setdefault(key[0], []).append({"partition_index": key[1], "error_code": answer, "error_message": None,
                                             "current_leader": {"leader_id": leader_id, "leader_epoch": leader_epoch}})
    endpoints = leader_endpoints(node, ctx.connection.listener.name, leaders) if leaders else []
    return _ack_answer(version, 0, None, [{"topic_id": t, "partitions": ps} for t, ps in topics.items()], endpoints)
