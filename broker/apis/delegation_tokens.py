"""CreateDelegationToken (38) v1-3, RenewDelegationToken (39) v1-2, ExpireDelegationToken (40)
v1-2, DescribeDelegationToken (41) v1-3: the versions Kafka 4.4 serves (v0 went in 4.0).

Behaviour (Kafka 3.9's KafkaApis and DelegationTokenManagerZk):

* Token requests are refused with DELEGATION_TOKEN_REQUEST_NOT_ALLOWED on a PLAINTEXT
  connection, on SSL without a client certificate, and on a connection authenticated by a
  token (a token cannot beget tokens). Without ``delegation.token.secret.key`` they answer
  DELEGATION_TOKEN_AUTH_DISABLED.
* Create: the owner is the requester unless v3 names another, which needs CREATE_TOKENS on
  that owner's USER resource (else DELEGATION_TOKEN_AUTHORIZATION_FAILED); renewers must be
  User principals (INVALID_PRINCIPAL_TYPE). Max lifetime: the request's when positive, capped
  by ``delegation.token.max.lifetime.ms``; the expiry ``delegation.token.expiry.time.ms`` after
  issue, capped by the max.
* Renew and Expire find the token by its HMAC (DELEGATION_TOKEN_NOT_FOUND), allow only its
  owner and renewers (DELEGATION_TOKEN_OWNER_MISMATCH) and a token not yet expired
  (DELEGATION_TOKEN_EXPIRED). Renew moves the expiry to now + period (the default expiry time
  for a negative period), capped by the max. Expire with a negative period deletes the token
  at once (and answers now), else moves the expiry to now + period, capped by the max.
* Describe answers the tokens of the owners named (all when null, none when empty) that the
  caller owns or renews, or may DESCRIBE as DELEGATION_TOKEN resources, or whose owner's USER
  resource it may DESCRIBE_TOKENS.

Tokens live in the coordination backend (coordination/delegation_tokens.py); these handlers
read and change it on the admin thread, each change one atomic read-modify-write, and every
process's token cache (broker/security/delegation_tokens.py) follows it.
"""

from __future__ import annotations

import datetime
import hmac
from typing import Any

from broker.authorization import allowed
from broker.context import RequestContext, Response
from broker.dispatch import api
from broker.protocol import codec
from broker.protocol.build import build
from broker.protocol.errors import ErrorCode
from broker.protocol.token_requests import (
    CreateDelegationTokenRequest,
    DescribeDelegationTokenRequest,
    ExpireDelegationTokenRequest,
    RenewDelegationTokenRequest,
)
from broker.security.connection_auth import ANONYMOUS
from broker.security.delegation_tokens import new_token_id, now_ms, secret_key, token_hmac
from coordination.acls.model import Operation, ResourceType
from coordination.delegation_tokens import DELETE, TokenInfo, TokenStore

CREATE_KEY, RENEW_KEY, EXPIRE_KEY, DESCRIBE_KEY = 38, 39, 40, 41
ERROR_TIMESTAMP = -1  # DelegationTokenManager.ErrorTimestamp
USER_TYPE = "User"


def _ms(period: datetime.timedelta) -> int:
    return period // datetime.timedelta(milliseconds=1)


def _split(principal: str) -> tuple[str, str]:
    kind, _, name = principal.partition(":")
    return kind, name


def requests_allowed(ctx: RequestContext) -> bool:
    """Kafka's allowTokenRequests: not on PLAINTEXT, not over one-way SSL, not with a token."""
    connection = ctx.connection
    listener = connection.listener
    if connection.auth.token_authenticated:
        return False
    if not listener.sasl and not listener.tls:
        return False
    return not (listener.tls and not listener.sasl and connection.auth.principal == ANONYMOUS)


def _secret(ctx: RequestContext) -> bytes | None:
    return secret_key(ctx.node.config) if ctx.node.security.tokens is not None else None


def _store(ctx: RequestContext) -> TokenStore:
    store: TokenStore = ctx.node.cluster.delegation_tokens()
    return store


# ---------------------------------------------------------------------------- Create
def _create_answer(version: int, code: int, owner: str, requester: str, info: TokenInfo | None = None,
                   mac: bytes = b"") -> Any:
    owner_type, owner_name = _split(owner)
    requester_type, requester_name = _split(requester)
    return build(codec.response_class(CREATE_KEY, version), {
        "error_code": code, "principal_type": owner_type, "principal_name": owner_name,
        "token_requester_principal_type": requester_type, "token_requester_principal_name": requester_name,
        "issue_timestamp": info.issue_ms if info else ERROR_TIMESTAMP,
        "expiry_timestamp": info.expiry_ms if info else ERROR_TIMESTAMP,
        "max_timestamp": info.max_ms if info else ERROR_TIMESTAMP,
        "token_id": info.token_id if info else "", "hmac": mac, "throttle_time": 0})


def _create_error(request: Any, version: int, code: int) -> Any:
    return _create_answer(version, code, ":", ":")


@api(CREATE_KEY, "CreateDelegationToken", 1, 3, error_response=_create_error)
async def handle_create(ctx: RequestContext, request: CreateDelegationTokenRequest) -> Response:
    version = ctx.api_version
    requester = ctx.connection.auth.principal
    owner_name = getattr(request, "owner_principal_name", None)
    owner_type = getattr(request, "owner_principal_type", None)
    if owner_name and owner_type is None:
        return _create_answer(version, ErrorCode.invalid_request, f":{owner_name}", requester)
    owner = f"{owner_type}:{owner_name}" if owner_name else requester
    renewers = tuple(f"{r.principal_type}:{r.principal_name}" for r in request.renewers)
    if not requests_allowed(ctx):
        return _create_answer(version, ErrorCode.delegation_token_request_not_allowed, owner, requester)
    if owner != requester and not allowed(ctx, Operation.CREATE_TOKENS, ResourceType.USER, owner):
        return _create_answer(version, ErrorCode.delegation_token_authorization_failed, owner, requester)
    if any(r.principal_type != USER_TYPE for r in request.renewers):
        return _create_answer(version, ErrorCode.invalid_principal_type, owner, requester)
    secret = _secret(ctx)
    if secret is None:
        return _create_answer(version, ErrorCode.delegation_token_auth_disabled, owner, requester)
    config = ctx.node.config
    max_lifetime = config.get_int("delegation.token.max.lifetime.ms")
    requested = _ms(request.max_lifetime)
    issue = now_ms()
    max_ms = issue + (max_lifetime if requested <= 0 else min(requested, max_lifetime))
    expiry = min(max_ms, issue + config.get_int("delegation.token.expiry.time.ms"))
    info = TokenInfo(new_token_id(), owner, requester, renewers, issue, max_ms, expiry)
    await ctx.node.run_admin(lambda: _store(ctx).change(info.token_id, lambda _current: (info, None)))
    return _create_answer(version, 0, owner, requester, info, token_hmac(secret, info.token_id))


# ---------------------------------------------------------------------------- Renew, Expire
def _expiry_answer(key: int, version: int, code: int, expiry: int = ERROR_TIMESTAMP) -> Any:
    return build(codec.response_class(key, version), {"error_code": code, "expiry_timestamp": expiry, "throttle_time": 0})


def _renew_error(request: Any, version: int, code: int) -> Any:
    return _expiry_answer(RENEW_KEY, version, code)


def _expire_error(request: Any, version: int, code: int) -> Any:
    return _expiry_answer(EXPIRE_KEY, version, code)


def _token_id_of(store: TokenStore, secret: bytes, mac: bytes) -> str | None:
    """The id of the stored token whose HMAC is ``mac``. Blocks (reads the store)."""
    for token_id in store.all():
        if hmac.compare_digest(token_hmac(secret, token_id), mac):
            return token_id
    return None


async def _change_by_hmac(ctx: RequestContext, key: int, mac: bytes, period_ms: int, expire: bool) -> Response:
    version = ctx.api_version
    if not requests_allowed(ctx):
        return _expiry_answer(key, version, ErrorCode.delegation_token_request_not_allowed)
    secret = _secret(ctx)
    if secret is None:
        return _expiry_answer(key, version, ErrorCode.delegation_token_auth_disabled)
    principal = ctx.connection.auth.principal
    default_renew = ctx.node.config.get_int("delegation.token.expiry.time.ms")
    store = _store(ctx)

    def plan(current: TokenInfo | None) -> tuple[TokenInfo | str | None, tuple[int, int]]:
        now = now_ms()
        if current is None:
            return None, (ErrorCode.delegation_token_not_found, ERROR_TIMESTAMP)
        if not current.owner_or_renewer(principal):
            return None, (ErrorCode.delegation_token_owner_mismatch, ERROR_TIMESTAMP)
        if expire and period_ms < 0:  # expire now
            return DELETE, (0, now)
        if current.expired(now):
            return None, (ErrorCode.delegation_token_expired, ERROR_TIMESTAMP)
        period = default_renew if not expire and period_ms < 0 else period_ms
        expiry = min(current.max_ms, now + period)
        return TokenInfo(current.token_id, current.owner, current.requester, current.renewers, current.issue_ms,
                         current.max_ms, expiry), (0, expiry)

    def run() -> tuple[int, int]:
        token_id = _token_id_of(store, secret, mac)
        if token_id is None:
            return ErrorCode.delegation_token_not_found, ERROR_TIMESTAMP
        result: tuple[int, int] = store.change(token_id, plan)
        return result

    code, expiry = await ctx.node.run_admin(run)
    return _expiry_answer(key, version, code, expiry)


@api(RENEW_KEY, "RenewDelegationToken", 1, 2, error_response=_renew_error)
async def handle_renew(ctx: RequestContext, request: RenewDelegationTokenRequest) -> Response:
    return await _change_by_hmac(ctx, RENEW_KEY, bytes(request.hmac), _ms(request.renew_period), expire=False)


@api(EXPIRE_KEY, "ExpireDelegationToken", 1, 2, error_response=_expire_error)
async def handle_expire(ctx: RequestContext, request: ExpireDelegationTokenRequest) -> Response:
    return await _change_by_hmac(ctx, EXPIRE_KEY, bytes(request.hmac), _ms(request.expiry_time_period), expire=True)


# ---------------------------------------------------------------------------- Describe
def _describe_answer(version: int, code: int, tokens: list[dict[str, Any]]) -> Any:
    return build(codec.response_class(DESCRIBE_KEY, version), {"error_code": code, "tokens": tokens, "throttle_time": 0})


def _describe_error(request: Any, version: int, code: int) -> Any:
    return _describe_answer(version, code, [])


def _described(info: TokenInfo, mac: bytes) -> dict[str, Any]:
    owner_type, owner_name = _split(info.owner)
    requester_type, requester_name = _split(info.requester)
    return {"principal_type": owner_type, "principal_name": owner_name,
            "token_requester_principal_type": requester_type, "token_requester_principal_name": requester_name,
            "issue_timestamp": info.issue_ms, "expiry_timestamp": info.expiry_ms, "max_timestamp": info.max_ms,
            "token_id": info.token_id, "hmac": mac,
            "renewers": [dict(zip(("principal_type", "principal_name"), _split(r))) for r in info.renewers]}


@api(DESCRIBE_KEY, "DescribeDelegationToken", 1, 3, error_response=_describe_error)
async def handle_describe(ctx: RequestContext, request: DescribeDelegationTokenRequest) -> Response:
    version = ctx.api_version
    if not requests_allowed(ctx):
        return _describe_answer(version, ErrorCode.delegation_token_request_not_allowed, [])
    secret = _secret(ctx)
    if secret is None:
        return _describe_answer(version, ErrorCode.delegation_token_auth_disabled, [])
    if request.owners is not None and not request.owners:
        return _describe_answer(version, 0, [])
    owners = None if request.owners is None else [f"{o.principal_type}:{o.principal_name}" for o in request.owners]
    principal = ctx.connection.auth.principal
    stored = await ctx.node.run_admin(_store(ctx).all)

    def eligible(info: TokenInfo) -> bool:  # DelegationTokenManager.filterToken
        if owners is not None and not any(info.owner_or_renewer(owner) for owner in owners):
            return False
        return (info.owner_or_renewer(principal)
                or allowed(ctx, Operation.DESCRIBE, ResourceType.DELEGATION_TOKEN, info.token_id)
                or allowed(ctx, Operation.DESCRIBE_TOKENS, ResourceType.USER, info.owner))

    tokens = [_described(info, token_hmac(secret, info.token_id))
              for _, info in sorted(stored.items()) if eligible(info)]
    return _describe_answer(version, 0, tokens)
