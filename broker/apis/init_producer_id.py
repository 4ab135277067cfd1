"""InitProducerId (key 22), versions 0-5.

Behaviour: a request with a transactional id goes to the transaction coordinator (the
coordinator process, broker/coordinator/transactions.py), with the body as the client sent
it; the idempotent path is answered here. A null transactional_id gets a fresh producer id (from the block this worker reserved in the
topic registry, so ids are unique across workers and restarts) with epoch 0. A request
carrying its current producer id and epoch (v3+, KIP-360) gets the same id with the
epoch bumped, or a fresh id with epoch 0 when the epoch would pass 32766; Kafka's
broker instead always hands a non-transactional producer a fresh id, and clients accept
either. Giving only one of producer id and epoch is INVALID_REQUEST, as in Kafka.
transaction_timeout is ignored on the idempotent path.

Version notes: v1 is v0; v2 is flexible; v3 adds producer_id and producer_epoch to the
request (KIP-360); v4 is v3 (the client may get PRODUCER_FENCED); v5 is v4 (the client may
get TRANSACTION_ABORTABLE, KIP-890: Kafka 4.x clients send it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from broker.authorization import any_allowed, cluster_allowed
from broker.context import RequestContext, Response
from broker.coordinator.forwarded import RequestBody
from broker.dispatch import api
from broker.links.mesh import PeerUnavailable
from broker.protocol import codec
from broker.protocol.build import build
from broker.protocol.errors import ErrorCode
from coordination.acls.model import Operation, ResourceType

if TYPE_CHECKING:  # ~200 kio classes, for mypy only: none is imported at run time (requests.py)
    from broker.protocol.requests import InitProducerIdRequest

KEY = 22

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
# Kafka bumps no further than Short.MAX_VALUE - 1, then hands out a new producer id.
MAX_EPOCH = 32766


def _answer(version: int, code: int, producer_id: int = NO_PRODUCER_ID, epoch: int = NO_PRODUCER_EPOCH) -> Any:
    return build(codec.response_class(KEY, version),
                 {"throttle_time": 0, "error_code": code, "producer_id": producer_id, "producer_epoch": epoch})


def _error(request: Any, version: int, code: int) -> Any:
    return _answer(version, code)


async def _to_transaction_coordinator(ctx: RequestContext, request: InitProducerIdRequest) -> Response:
    forwarded = RequestBody(KEY, ctx.api_version, codec.encode_body(request))
    try:
        return await ctx.node.to_coordinator(ctx, forwarded)
    except PeerUnavailable:
        return _answer(ctx.api_version, ErrorCode.coordinator_not_available)


def _idempotent_writer(ctx: RequestContext, request: Any) -> int:
    """Kafka's check for an idempotent producer: IDEMPOTENT_WRITE on the cluster, or WRITE on
    some topic (KIP-679); a transactional id's WRITE is checked by the coordinator."""
    if request.transactional_id is not None:
        return 0
    if cluster_allowed(ctx, Operation.IDEMPOTENT_WRITE) or any_allowed(ctx, Operation.WRITE, ResourceType.TOPIC):
        return 0
    return int(ErrorCode.cluster_authorization_failed)


@api(KEY, "InitProducerId", 0, 5, error_response=_error, authorize=_idempotent_writer)
async def handle_init_producer_id(ctx: RequestContext, request: InitProducerIdRequest) -> Response:
    version = ctx.api_version
    if request.transactional_id is not None:
        return await _to_transaction_coordinator(ctx, request)
    # The fields exist from v3; older requests have neither.
    producer_id = getattr(request, "producer_id", NO_PRODUCER_ID)
    epoch = getattr(request, "producer_epoch", NO_PRODUCER_EPOCH)
    if (producer_id == NO_PRODUCER_ID) != (epoch == NO_PRODUCER_EPOCH):
        return _answer(version, ErrorCode.invalid_request)
    if producer_id >= 0 and 0 <= epoch < MAX_EPOCH:
        return _answer(version, ErrorCode.none, producer_id, epoch + 1)
    return _answer(version, ErrorCode.none, await ctx.node.next_producer_id(), 0)
