"""SaslHandshake (key 17) v0-1 and SaslAuthenticate (key 36) v0-2: the SASL exchange.

Behaviour (Kafka's SaslServerAuthenticator): SaslHandshake names a mechanism of
``sasl.enabled.mechanisms`` and answers the enabled list (UNSUPPORTED_SASL_MECHANISM for
another; ILLEGAL_SASL_STATE on a listener without SASL, during an exchange, or when a
re-authentication changes mechanism). After v0 the tokens travel as bare frames
(broker/network/connection.py handles them); after v1 each token is a SaslAuthenticate.
SaslAuthenticate answers the mechanism's next token; a failure answers
SASL_AUTHENTICATION_FAILED with a message that never tells whether the user exists, and
the connection closes after that answer. v1 adds session_lifetime_ms (KIP-368:
``connections.max.reauth.ms``, 0 when sessions do not expire); v2 is flexible.

The connection reads nothing else while a token is being checked (PLAIN's PBKDF2 runs on
a thread), so no request can overtake the principal it would be authorized as.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from broker.context import RequestContext, Response
from broker.dispatch import api
from broker.protocol import codec
from broker.protocol.build import build
from broker.protocol.errors import ErrorCode
from broker.security.connection_auth import HandshakeRefused
from broker.security.sasl_server import SaslAuthenticationFailed

if TYPE_CHECKING:  # ~200 kio classes, for mypy only: none is imported at run time (requests.py)
    from broker.protocol.requests import SaslAuthenticateRequest, SaslHandshakeRequest

HANDSHAKE_KEY = 17
AUTHENTICATE_KEY = 36

log = logging.getLogger(__name__)


def _handshake_answer(version: int, code: int, mechanisms: tuple[str, ...]) -> Any:
    return build(codec.response_class(HANDSHAKE_KEY, version), {"error_code": code, "mechanisms": list(mechanisms)})


def _handshake_error(request: Any, version: int, code: int) -> Any:
    return _handshake_answer(version, code, ())


@api(HANDSHAKE_KEY, "SaslHandshake", 0, 1, error_response=_handshake_error)
def handle_sasl_handshake(ctx: RequestContext, request: SaslHandshakeRequest) -> Response:
    auth = ctx.connection.auth
    try:
        auth.handshake(request.mechanism, ctx.api_version)
    except HandshakeRefused as exc:
        # Kafka's SaslServerAuthenticator fails the connection after this answer.
        log.info("%s: SaslHandshake refused: %s", ctx.connection.peer, exc)
        if ctx.connection.listener.sasl and not auth.authenticated:
            ctx.connection.close_after_answer()
        return _handshake_answer(ctx.api_version, int(getattr(ErrorCode, exc.code)), auth.mechanisms)
    return _handshake_answer(ctx.api_version, 0, auth.mechanisms)


def _authenticate_answer(version: int, code: int, message: str | None, token: bytes, lifetime_ms: int = 0) -> Any:
    return build(codec.response_class(AUTHENTICATE_KEY, version), {
        "error_code": code, "error_message": message, "auth_bytes": token, "session_lifetime": lifetime_ms})


def _authenticate_error(request: Any, version: int, code: int) -> Any:
    return _authenticate_answer(version, code, None, b"")


@api(AUTHENTICATE_KEY, "SaslAuthenticate", 0, 2, error_response=_authenticate_error)
async def handle_sasl_authenticate(ctx: RequestContext, request: SaslAuthenticateRequest) -> Response:
    auth = ctx.connection.auth
    if not auth.in_progress:
        ctx.connection.close_after_answer()
        return _authenticate_answer(ctx.api_version, ErrorCode.illegal_sasl_state,
                                    "SaslAuthenticate without a SaslHandshake first", b"")
    try:
        token, complete = await auth.authenticate(bytes(request.auth_bytes))
    except SaslAuthenticationFailed as exc:
        log.info("%s: authentication failed: %s", ctx.connection.peer, exc)
        ctx.connection.close_after_answer()
        return _authenticate_answer(ctx.api_version, ErrorCode.sasl_authentication_failed, str(exc), b"")
    lifetime = auth.session_lifetime_ms if complete else 0
    return _authenticate_answer(ctx.api_version, 0, None, token, lifetime)
