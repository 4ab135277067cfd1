"""FindCoordinator (key 10), versions 0-6.

Behaviour: names the broker that hosts the elected group coordinator (its node id and
client listener), so clients see an ordinary broker; the worker asks its broker's
coordinator process, which knows the election (local backend or ZooKeeper). While no
coordinator is elected the answer is COORDINATOR_NOT_AVAILABLE (retriable). The same
process is the transaction coordinator (key type 1) of every transactional id, and the
share coordinator (key type 2, v6+: "groupId:topicId:partition", a share-partition) of every
share-partition; a SHARE key of another form is INVALID_REQUEST.
ACLs as Kafka checks them: DESCRIBE on each group (GROUP_AUTHORIZATION_FAILED) or
transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED); a SHARE key only for brokers
(CLUSTER_ACTION: CLUSTER_AUTHORIZATION_FAILED).

Version notes: v1 throttle time and error message; v3 flexible; v4 batches keys
(coordinator_keys, one answer per key); v5-6 are v4 (new error codes clients accept), v6
adds the SHARE key type.
"""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING, Any

from broker.authorization import allowed, group_allowed
from broker.context import RequestContext, Response
from broker.dispatch import api
from broker.protocol import codec
from broker.protocol.build import build
from broker.protocol.errors import ErrorCode, KafkaError
from coordination.acls.model import Operation, ResourceType

if TYPE_CHECKING:  # ~200 kio classes, for mypy only: none is imported at run time (requests.py)
    from broker.protocol.requests import FindCoordinatorRequest

KEY = 10
GROUP = 0
TRANSACTION = 1
SHARE = 2
SHARE_FROM = 6  # the first version with the SHARE key type


def _entry(key: str, code: int, node_id: int = -1, host: str = "", port: int = -1, message: str | None = None) -> dict[str, Any]:
    return {"key": key, "error_code": code, "error_message": message, "node_id": node_id, "host": host, "port": port}


def _answer(version: int, entries: list[dict[str, Any]]) -> Any:
    if version >= 4:
        return build(codec.response_class(KEY, version), {"throttle_time": 0, "coordinators": entries})
    # Before v4 the one coordinator's fields are the response's own, without the key (it is
    # the request's, and the response has no field for it).
    single = {field: value for field, value in entries[0].items() if field != "key"}
    return build(codec.response_class(KEY, version), {"throttle_time": 0, **single})


def _keys(request: Any, version: int) -> list[str]:
    return list(request.coordinator_keys) if version >= 4 else [request.key]


def _share_key(key: str) -> bool:
    """SharePartitionKey.validate: "groupId:topicId:partition", a non-empty group, a Kafka
    Uuid (22 characters of URL-safe base64) and a partition number."""
    parts = key.split(":")
    if len(parts) != 3 or not parts[0].strip():
        return False
    try:
        topic_id = base64.urlsafe_b64decode(parts[1] + "==")
        int(parts[2])
    except ValueError:
        return False
    return len(parts[1]) == 22 and len(topic_id) == 16


def _error(request: Any, version: int, code: int) -> Any:
    return _answer(version, [_entry(k, code) for k in _keys(request, version)] or [_entry("", code)])


@api(KEY, "FindCoordinator", 0, 6, error_response=_error)
async def handle_find_coordinator(ctx: RequestContext, request: FindCoordinatorRequest) -> Response:
    version = ctx.api_version
    keys = _keys(request, version)
    key_type = int(getattr(request, "key_type", GROUP))
    if key_type not in (GROUP, TRANSACTION, SHARE) or (key_type == SHARE and version < SHARE_FROM):
        return _answer(version, [_entry(k, ErrorCode.invalid_request, message=f"unknown key type {key_type}")
                                 for k in keys])
    if key_type == SHARE:
        if not ctx.node.security.is_broker(ctx.connection.auth.principal, ctx.connection.host):
            return _answer(version, [_entry(k, ErrorCode.cluster_authorization_failed,
                                            message="CLUSTER_AUTHORIZATION_FAILED") for k in keys])
    try:
        code, node_id, host, port = await ctx.node.find_coordinator(transactions=key_type == TRANSACTION,
                                                                    share=key_type == SHARE)
    except KafkaError as exc:
        code, node_id, host, port = int(exc.code), -1, "", -1
    if code:
        return _answer(version, [_entry(k, code, message=ErrorCode(code).name) for k in keys])
    # The coordinator process names its broker's inter-broker address; a client gets the
    # one on the listener it came in on.
    address = ctx.node.cluster.addresses(ctx.connection.listener.name).get(node_id)
    if address is None:
        return _answer(version, [_entry(k, ErrorCode.coordinator_not_available, message="COORDINATOR_NOT_AVAILABLE")
                                 for k in keys])
    host, port = address
    # Kafka's check: DESCRIBE on each group or transactional id asked for.
    if key_type == SHARE:
        return _answer(version, [_entry(k, 0, node_id, host, port) if _share_key(k)
                                 else _entry(k, ErrorCode.invalid_request, message="not a share-partition key")
                                 for k in keys])
    if key_type == TRANSACTION:
        def described(key: str) -> bool:
            return allowed(ctx, Operation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, key)
        refusal = ErrorCode.transactional_id_authorization_failed
    else:
        def described(key: str) -> bool:
            return group_allowed(ctx, Operation.DESCRIBE, key)
        refusal = ErrorCode.group_authorization_failed
    return _answer(version, [_entry(k, 0, node_id, host, port) if described(k)
                             else _entry(k, refusal, message="Authorization failed.") for k in keys])
