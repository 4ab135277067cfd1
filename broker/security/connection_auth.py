"""Who is on the other end of one connection, and the SASL exchange that says so.

A connection starts with a principal: ``User:ANONYMOUS`` on PLAINTEXT, the client
certificate's distinguished name on SSL (set once the TLS handshake completes). On a SASL
listener it is unauthenticated until SaslHandshake and SaslAuthenticate succeed; until then
the connection serves only ApiVersions, SaslHandshake and SaslAuthenticate, and reads no
frame larger than ``sasl.server.max.receive.size`` (broker/network/connection.py enforces both).

SaslHandshake v0 means the tokens that follow travel as bare size-prefixed frames, without
SaslAuthenticate around them (``raw_tokens``); v1 means SaslAuthenticate requests.

Re-authentication (KIP-368): with ``connections.max.reauth.ms`` > 0 a successful
SaslAuthenticate (v1+) tells the client how long its session lasts; the client
authenticates again on the same connection before then, with the same mechanism and the
same principal. A connection whose session has expired is closed on its next request
other than SaslHandshake or SaslAuthenticate. A delegation token's session ends with the
token's expiry too (Kafka's SaslServerAuthenticator: the credential's lifetime), so its
client authenticates again, with the token as renewed, before then.
"""

from __future__ import annotations

import asyncio
import time
from typing import Callable

from broker.listeners import Listener
from broker.security.broker_proof import MECHANISM as BROKER_MECHANISM
from broker.security.broker_proof import BrokerProofServer
from broker.security.delegation_tokens import TokenLookup, now_ms
from broker.security.sasl_server import SaslAuthenticationFailed, SaslServer
from broker.security.scram_credentials import ScramCredential

ANONYMOUS = "User:ANONYMOUS"
API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 17, 36
BEFORE_AUTHENTICATION = frozenset({API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE})
REAUTHENTICATION = frozenset({SASL_HANDSHAKE, SASL_AUTHENTICATE})

Lookup = Callable[[str, str], ScramCredential | None]


class HandshakeRefused(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code  # ILLEGAL_SASL_STATE or UNSUPPORTED_SASL_MECHANISM


class ConnectionAuth:
    def __init__(self, listener: Listener, mechanisms: tuple[str, ...], reauth_ms: int, lookup: Lookup,
                 broker_secret: bytes | None = None, token_lookup: TokenLookup | None = None) -> None:
        self.listener = listener
        self.mechanisms = mechanisms  # enabled on this listener
        self.principal = ANONYMOUS
        self.authenticated = not listener.sasl
        self.mechanism: str | None = None  # of the last successful authentication
        self.token_authenticated = False  # by a delegation token: it may not ask for tokens
        self.raw_tokens = False  # after SaslHandshake v0: bare tokens, no SaslAuthenticate
        self._reauth_ms = reauth_ms
        self._lookup = lookup
        self._server: SaslServer | BrokerProofServer | None = None
        self._broker_secret = broker_secret  # CASTLE-BROKER (broker/security/broker_proof.py), on any listener
        self._expires_at: float | None = None  # monotonic; None: never
        self._lifetime_ms = 0  # what the last SaslAuthenticate told the client
        self._token_lookup = token_lookup  # None: delegation tokens are disabled

    @property
    def in_progress(self) -> bool:
        return self._server is not None

    @property
    def expires(self) -> bool:
        """The session has an end (KIP-368)."""
        return self._expires_at is not None

    def expired(self) -> bool:
        return self._expires_at is not None and time.monotonic() >= self._expires_at

    def allowed(self, api_key: int) -> bool:
        """May a request of ``api_key`` be served now?"""
        if not self.authenticated:
            return api_key in BEFORE_AUTHENTICATION
        return not self.expired() or api_key in REAUTHENTICATION

    def handshake(self, mechanism: str, version: int) -> None:
        """SaslHandshake: start an exchange with ``mechanism``. Raises HandshakeRefused."""
        if mechanism == BROKER_MECHANISM and self._broker_secret is not None and self._server is None:
            if self.mechanism is not None and self.mechanism != mechanism:
                raise HandshakeRefused("illegal_sasl_state", "re-authentication must use the same mechanism")
            self._server = BrokerProofServer(self._broker_secret)
            self.raw_tokens = version == 0
            return
        if not self.listener.sasl:
            raise HandshakeRefused("illegal_sasl_state", f"listener {self.listener.name} is not a SASL listener")
        if self._server is not None:
            raise HandshakeRefused("illegal_sasl_state", "an authentication is already in progress")
        if mechanism not in self.mechanisms:
            raise HandshakeRefused("unsupported_sasl_mechanism", f"unsupported SASL mechanism {mechanism}")
        if self.authenticated and mechanism != self.mechanism:
            raise HandshakeRefused("illegal_sasl_state", "re-authentication must use the same mechanism")
        self._server = SaslServer(mechanism, self._lookup, token_lookup=self._token_lookup)
        self.raw_tokens = version == 0

    async def authenticate(self, token: bytes) -> tuple[bytes, bool]:
        """One SASL token in: (the token to answer, whether authentication is complete).
        Raises SaslAuthenticationFailed (the connection answers it and closes)."""
        server = self._server
        if server is None:
            raise SaslAuthenticationFailed("Unexpected SASL token: send SaslHandshake first")
        try:
            step = server.step(token)
            if step.check is not None:  # PBKDF2 (PLAIN): slow on purpose, never on the loop
                await asyncio.get_running_loop().run_in_executor(None, step.check)
        except BaseException:
            self._server = None
            raise
        if not step.complete:
            return step.challenge, False
        self._server = None
        self.raw_tokens = False
        principal = server.principal
        if self.mechanism is not None and principal != self.principal:  # a re-authentication
            raise SaslAuthenticationFailed("Cannot change principals during re-authentication")
        self.principal = principal
        self.mechanism = server.mechanism
        self.authenticated = True
        token_expiry = server.credential_expiry_ms if isinstance(server, SaslServer) else None
        self.token_authenticated = token_expiry is not None
        lifetimes = [self._reauth_ms] if self._reauth_ms > 0 else []
        if token_expiry is not None:
            lifetimes.append(max(0, token_expiry - now_ms()))
        self._lifetime_ms = min(lifetimes) if lifetimes else 0
        self._expires_at = time.monotonic() + self._lifetime_ms / 1000 if lifetimes else None
        return step.challenge, True

    @property
    def session_lifetime_ms(self) -> int:
        """What SaslAuthenticate v1+ tells the client (0: no re-authentication needed)."""
        return self._lifetime_ms
