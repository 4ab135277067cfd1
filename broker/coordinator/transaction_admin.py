"""The operator's views of transactions: DescribeTransactions (65) v0, ListTransactions
(66) v0-2 (what kafka-transactions.sh describe, list and find-hanging send).

Behaviour: served by the coordinator process from the transaction coordinator's memory
(coordination/transactions/views.py has Kafka's rules). Kafka's KafkaApis checks:
DescribeTransactions answers TRANSACTIONAL_ID_AUTHORIZATION_FAILED for an id the principal
may not DESCRIBE, and leaves out of each description the topics it may not DESCRIBE;
ListTransactions needs no permission and lists only the ids the principal may DESCRIBE.
Per id: TRANSACTIONAL_ID_NOT_FOUND when the coordinator holds none, NOT_COORDINATOR when
this broker's coordinator process is not the elected one, COORDINATOR_LOAD_IN_PROGRESS
while it loads. ListTransactions on a broker that coordinates nothing answers an empty
list (admin clients ask every broker and merge); state filters naming no Kafka state are
returned in unknown_state_filters; an invalid id pattern is INVALID_REGULAR_EXPRESSION.

Version notes: DescribeTransactions has only v0. ListTransactions v1 adds duration_filter
(KIP-994: transactions running longer than that many ms), v2 transactional_id_pattern
(a regular expression the whole id must match).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.static.protocol import Entity

from broker.context import CoordinatorContext
from broker.coordinator.api import coordinator_api
from broker.coordinator.transactions import transaction_coordinator
from broker.protocol import codec
from broker.protocol.build import build
from broker.protocol.errors import ErrorCode
from coordination.acls.model import Operation, ResourceType
from coordination.transactions.views import InvalidPattern, ListFilters, TxnDescription

if TYPE_CHECKING:  # ~200 kio classes, for mypy only: none is imported at run time (requests.py)
    from broker.protocol.requests import DescribeTransactionsRequest, ListTransactionsRequest

DESCRIBE_TRANSACTIONS = 65
LIST_TRANSACTIONS = 66


def _describable(ctx: CoordinatorContext, transactional_id: str) -> bool:
    return ctx.allowed(Operation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, transactional_id)


# ---------------------------------------------------------------------- DescribeTransactions
def _state_entry(transactional_id: str, description: TxnDescription, topics: list[dict[str, Any]]) -> dict[str, Any]:
    return {"error_code": description.error_code, "transactional_id": transactional_id,
            "transaction_state": description.state, "transaction_timeout": description.timeout_ms,
            "transaction_start_time": description.start_ms, "producer_id": description.producer_id,
            "producer_epoch": description.producer_epoch, "topics": topics}


def _describe_answer(version: int, states: list[dict[str, Any]]) -> Entity:
    return build(codec.response_class(DESCRIBE_TRANSACTIONS, version), {"throttle_time": 0,
                                                                        "transaction_states": states})


def _describe_error(request: DescribeTransactionsRequest, version: int, code: int) -> Entity:
    return _describe_answer(version, [_state_entry(t, TxnDescription(code), []) for t in request.transactional_ids])


def _topics(ctx: CoordinatorContext, description: TxnDescription) -> list[dict[str, Any]]:
    """The description's partitions by topic, only the topics the principal may DESCRIBE."""
    by_topic: dict[str, list[int]] = {}
    for tp in description.partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return [{"topic": topic, "partitions": partitions} for topic, partitions in by_topic.items()
            if ctx.allowed(Operation.DESCRIBE, ResourceType.TOPIC, topic)]


@coordinator_api(DESCRIBE_TRANSACTIONS, "DescribeTransactions", 0, 0, error_response=_describe_error)
def serve_describe_transactions(ctx: CoordinatorContext, request: DescribeTransactionsRequest) -> Entity:
    coordinator = transaction_coordinator(ctx)
    states = []
    for transactional_id in request.transactional_ids:
        if not _describable(ctx, transactional_id):
            description = TxnDescription(int(ErrorCode.transactional_id_authorization_failed))
        else:
            description = coordinator.describe(transactional_id)
        states.append(_state_entry(transactional_id, description, _topics(ctx, description)))
    return _describe_answer(ctx.api_version, states)


# ---------------------------------------------------------------------- ListTransactions
def _list_answer(version: int, code: int, unknown: list[str], listings: list[dict[str, Any]]) -> Entity:
    return build(codec.response_class(LIST_TRANSACTIONS, version), {
        "throttle_time": 0, "error_code": code, "unknown_state_filters": unknown, "transaction_states": listings})


def _list_error(request: ListTransactionsRequest, version: int, code: int) -> Entity:
    return _list_answer(version, code, [], [])


@coordinator_api(LIST_TRANSACTIONS, "ListTransactions", 0, 2, error_response=_list_error)
def serve_list_transactions(ctx: CoordinatorContext, request: ListTransactionsRequest) -> Entity:
    version = ctx.api_version
    try:
        filters = ListFilters(frozenset(request.state_filters), frozenset(int(p) for p in request.producer_id_filters),
                              int(getattr(request, "duration_filter", -1)),
                              getattr(request, "transactional_id_pattern", None))
    except InvalidPattern:
        return _list_error(request, version, int(ErrorCode.invalid_regular_expression))
    code, listings = transaction_coordinator(ctx).list_transactions(filters)
    if code:
        return _list_error(request, version, code)
    return _list_answer(version, 0, filters.unknown_states(), [
        {"transactional_id": t.transactional_id, "producer_id": t.producer_id, "transaction_state": t.state}
        for t in listings if _describable(ctx, t.transactional_id)])
