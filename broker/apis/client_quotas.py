"""DescribeClientQuotas (key 48) and AlterClientQuotas (key 49), v0-1.

Behaviour (Kafka's ClientQuotasImage.describe and ClientQuotaControlManager):

Describe filters entities by components: MATCH_TYPE_EXACT (0) a named entity of the type,
MATCH_TYPE_DEFAULT (1) the type's default, MATCH_TYPE_SPECIFIED (2) any entity having the
type; with ``strict`` an entity matches only if it has no other types. An empty type, a type
named twice, a match string where none belongs (or none where one does), an ip component
beside a user or client-id one: INVALID_REQUEST; a type other than user, client-id and ip:
UNSUPPORTED_VERSION; all answered as the response's error, without entries.

Alter answers each entry on its own: the entity must have known types, each at most once,
no empty name, ip alone (a valid address, or null for the default); the keys must be the
entity's (user and client-id: producer_byte_rate, consumer_byte_rate, request_percentage,
controller_mutation_rate; ip: connection_creation_rate), the values above 0 and whole for
the integer ones. Anything refused is INVALID_REQUEST and leaves that entity as it was;
the entity's accepted changes are written at once. ``validate_only`` checks and writes
nothing.

Quotas are kept by the coordination backend (coordination/client_quotas.py); workers see
a change through the store's watch (broker/quotas/book.py). Store calls run on the admin thread.
"""

from __future__ import annotations

import ipaddress
from typing import TYPE_CHECKING, Any

from broker.authorization import on_cluster
from broker.context import RequestContext, Response
from broker.dispatch import api
from broker.protocol import codec
from broker.protocol.build import build
from broker.protocol.errors import ErrorCode
from coordination.acls.model import Operation
from coordination.client_quotas import CLIENT_ID, ENTITY_TYPES, IP, IP_KEYS, USER, USER_CLIENT_KEYS, Entity, entity

if TYPE_CHECKING:  # ~200 kio classes, for mypy only: none is imported at run time (requests.py)
    from broker.protocol.requests import AlterClientQuotasRequest, DescribeClientQuotasRequest

DESCRIBE_KEY = 48
ALTER_KEY = 49
MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2
INT_MAX = 2**31 - 1
LONG_MAX = 2**63 - 1


class Refused(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


# ----------------------------------------------------------------------------- describe
def _describe_answer(version: int, code: int, message: str | None, entries: list[dict[str, Any]] | None) -> Any:
    return build(codec.response_class(DESCRIBE_KEY, version),
                 {"throttle_time": 0, "error_code": code, "error_message": message, "entries": entries})


def _describe_error(request: Any, version: int, code: int) -> Any:
    return _describe_answer(version, code, None, None)


def describe_filter(components: Any) -> tuple[dict[str, str | None], set[str]]:
    """The exact (and default) matches and the types that must merely be present."""
    exact: dict[str, str | None] = {}
    present: set[str] = set()
    for component in components:
        kind = component.entity_type
        if not kind:
            raise Refused(ErrorCode.invalid_request, "Invalid empty entity type.")
        if kind in exact or kind in present:
            raise Refused(ErrorCode.invalid_request, f"Entity type {kind} cannot appear more than once in the filter.")
        if kind not in ENTITY_TYPES:
            raise Refused(ErrorCode.unsupported_version, f"Unsupported entity type {kind}")
        if component.match_type == MATCH_EXACT:
            if component.match is None:
                raise Refused(ErrorCode.invalid_request,
                              "Request specified MATCH_TYPE_EXACT, but set match string to null.")
            exact[kind] = component.match
        elif component.match_type == MATCH_DEFAULT:
            if component.match is not None:
                raise Refused(ErrorCode.invalid_request,
                              "Request specified MATCH_TYPE_DEFAULT, but also specified a match string.")
            exact[kind] = None
        elif component.match_type == MATCH_SPECIFIED:
            if component.match is not None:
                raise Refused(ErrorCode.invalid_request,
                              "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.")
            present.add(kind)
        else:
            raise Refused(ErrorCode.invalid_request, f"Unknown match type {component.match_type}")
    named = set(exact) | present
    if IP in named and (USER in named or CLIENT_ID in named):
        raise Refused(ErrorCode.invalid_request, "Invalid entity filter component combination. IP filter component "
                                                 "should not be used with user or clientId filter component.")
    return exact, present


def matches(quota_entity: Entity, exact: dict[str, str | None], present: set[str], strict: bool) -> bool:
    names = dict(quota_entity)
    if strict and len(names) != len(exact) + len(present):
        return False
    return (all(kind in names and names[kind] == value for kind, value in exact.items())
            and all(kind in names for kind in present))


@api(DESCRIBE_KEY, "DescribeClientQuotas", 0, 1, error_response=_describe_error,
     authorize=on_cluster(Operation.DESCRIBE_CONFIGS))
async def handle_describe(ctx: RequestContext, request: DescribeClientQuotasRequest) -> Response:
    try:
        exact, present = describe_filter(request.components)
    except Refused as refused:
        return _describe_answer(ctx.api_version, refused.code, str(refused), None)
    stored = await ctx.node.run_admin(ctx.node.cluster.client_quotas().all)
    entries = [{"entity": [{"entity_type": kind, "entity_name": name} for kind, name in quota_entity],
                "values": [{"key": key, "value": value} for key, value in sorted(quotas.items())]}
               for quota_entity, quotas in sorted(stored.items(), key=lambda item: repr(item[0]))
               if matches(quota_entity, exact, present, request.strict)]
    return _describe_answer(ctx.api_version, 0, None, entries)


# ----------------------------------------------------------------------------- alter
def _alter_error(request: Any, version: int, code: int) -> Any:
    return build(codec.response_class(ALTER_KEY, version), {"throttle_time": 0, "entries": [
        {"error_code": code, "error_message": None, "entity": _entity_out(entry.entity)} for entry in request.entries]})


def _entity_out(entity_data: Any) -> list[dict[str, Any]]:
    return [{"entity_type": e.entity_type, "entity_name": e.entity_name} for e in entity_data]


def checked_entity(entity_data: Any) -> tuple[Entity, dict[str, str]]:
    """The entity and the keys (name -> ConfigDef type) it may carry, or Refused."""
    pairs: dict[str, str | None] = {}
    if not entity_data:
        raise Refused(ErrorCode.invalid_request, "Invalid empty client quota entity")
    for item in entity_data:
        kind, name = item.entity_type, item.entity_name
        if kind in pairs:
            raise Refused(ErrorCode.invalid_request, f"Invalid client quota entity, duplicate entity entry {kind}")
        if kind not in ENTITY_TYPES:
            raise Refused(ErrorCode.invalid_request, f"Unhandled client quota entity type: {kind}")
        if name is not None and not name:
            raise Refused(ErrorCode.invalid_request, f"Empty {kind} not supported")
        pairs[kind] = name
    if IP in pairs:
        if len(pairs) > 1:
            raise Refused(ErrorCode.invalid_request,
                          "Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId")
        address = pairs[IP]
        if address is not None:
            try:
                ipaddress.ip_address(address)
            except ValueError:
                raise Refused(ErrorCode.invalid_request, f"{address} is not a valid IP or resolvable host.") from None
        return entity(pairs.items()), IP_KEYS
    return entity(pairs.items()), USER_CLIENT_KEYS


def checked_value(keys: dict[str, str], key: str, value: float) -> None:
    kind = keys.get(key)
    if kind is None:
        raise Refused(ErrorCode.invalid_request, f"Invalid configuration key {key}")
    if not value > 0.0:
        raise Refused(ErrorCode.invalid_request, f"Quota {key} must be greater than 0")
    if kind == "DOUBLE":
        return
    if value > (INT_MAX if kind == "INT" else LONG_MAX):
        raise Refused(ErrorCode.invalid_request,
                      f"Proposed value for {key} is too large for {'an INT' if kind == 'INT' else 'a LONG'}.")
    if abs(value % 1.0) > 1e-6:
        raise Refused(ErrorCode.invalid_request, f"{key} cannot be a fractional value.")


def checked_changes(entry: Any) -> tuple[Entity, dict[str, float | None]]:
    quota_entity, keys = checked_entity(entry.entity)
    changes: dict[str, float | None] = {}
    for op in entry.ops:
        if op.key in changes:
            raise Refused(ErrorCode.invalid_request, f"Duplicate quota key {op.key} not updating quota for this entity")
        if op.remove:
            changes[op.key] = None  # Kafka removes an unknown key without complaint: nothing is there
        else:
            checked_value(keys, op.key, float(op.value))
            changes[op.key] = float(op.value)
    return quota_entity, changes


@api(ALTER_KEY, "AlterClientQuotas", 0, 1, error_response=_alter_error, authorize=on_cluster(Operation.ALTER_CONFIGS))
async def handle_alter(ctx: RequestContext, request: AlterClientQuotasRequest) -> Response:
    store = ctx.node.cluster.client_quotas()
    results: list[dict[str, Any]] = []
    for entry in request.entries:
        out: dict[str, Any] = {"error_code": 0, "error_message": None, "entity": _entity_out(entry.entity)}
        results.append(out)
        try:
            quota_entity, changes = checked_changes(entry)
        except Refused as refused:
            out["error_code"], out["error_message"] = refused.code, str(refused)
            continue
        if not request.validate_only and changes:
            await ctx.node.run_admin(lambda e=quota_entity, c=changes: store.alter(e, c))  # type: ignore[misc]
    return build(codec.response_class(ALTER_KEY, ctx.api_version), {"throttle_time": 0, "entries": results})
