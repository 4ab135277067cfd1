"""Delegation tokens on a broker process (KIP-48): their HMACs, the SCRAM credentials a token
authenticates with, and the removal of expired tokens.

A token is its information (coordination/delegation_tokens.py: kept in ZooKeeper or a file)
and its HMAC, HmacSHA512(delegation.token.secret.key, UTF-8 tokenId), which is never stored:
every broker of a cluster has the same secret and computes it (Kafka's DelegationTokenManager).
The HMAC is the token's password: a client authenticates with SASL/SCRAM, user name = token
id, password = base64(HMAC), and the extension ``tokenauth=true``; the connection's principal
becomes the token's owner.

Each process keeps a :class:`TokenCache`, the SCRAM credentials of every live token, which the
store's watch keeps fresh through a StoreFollower thread (a connection's lookup never waits).
As in Kafka (DelegationTokenManager.prepareScramCredentials) the credential is made from the
base64 HMAC with SCRAM's minimum iteration count and a random salt; that costs PBKDF2 once per
token and mechanism, on the follower's thread, so a token is derived once and kept while its
id stays in the store.

Unlike Kafka, which lets a token in until the periodic check deletes it, a token past its
expiry authenticates no new connection (the check only tidies the store). Expired tokens are
deleted every ``delegation.token.expiry.check.interval.ms`` by the process that asks for it
(one per broker: the first worker); deleting one twice from two brokers is harmless.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import hmac
import logging
import threading
import time
import uuid
from typing import Callable

from broker.config import BrokerConfig
from broker.security.scram_credentials import MECHANISMS, MIN_ITERATIONS, ScramCredential, from_password
from coordination.delegation_tokens import DELETE, TokenInfo, TokenStore
from coordination.store_follower import StoreFollower

log = logging.getLogger(__name__)


def secret_key(config: BrokerConfig) -> bytes | None:
    """The secret tokens are signed with (delegation.token.master.key is its deprecated name);
    None when neither is set: tokens are disabled (Kafka's tokenAuthEnabled)."""
    key = config.get_str("delegation.token.secret.key") or config.get_str("delegation.token.master.key")
    return key.encode("utf-8") if key else None


def token_hmac(secret: bytes, token_id: str) -> bytes:
    """Kafka's DelegationTokenManager.createHmac: HmacSHA512 of the token id's UTF-8."""
    return hmac.new(secret, token_id.encode("utf-8"), hashlib.sha512).digest()


def new_token_id() -> str:
    """A random UUID in URL-safe base64 without padding (Kafka's CoreUtils.generateUuidAsBase64)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode("ascii")


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclasses.dataclass(frozen=True)
class TokenCredential:
    """What SCRAM needs to authenticate a token, and whom it authenticates."""

    credentials: dict[str, ScramCredential]  # by SCRAM mechanism
    owner: str  # a principal, "User:alice"
    expiry_ms: int


TokenLookup = Callable[[str, str], "TokenCredential | None"]


def _credentials(secret: bytes, token_id: str) -> dict[str, ScramCredential]:
    password = base64.b64encode(token_hmac(secret, token_id)).decode("ascii")
    return {mechanism: from_password(mechanism, password, MIN_ITERATIONS) for mechanism in MECHANISMS}


class TokenCache:
    """The live tokens of one process, for SCRAM (``lookup``); follows ``store``."""

    def __init__(self, secret: bytes, store: TokenStore) -> None:
        self._secret = secret
        self._store = store
        self._tokens: dict[str, tuple[TokenInfo, dict[str, ScramCredential]]] = {}
        self._follower = StoreFollower(self._reload, "castle-delegation-tokens", "delegation tokens")
        self._expirer: threading.Thread | None = None
        self._closed = threading.Event()

    def start(self) -> None:
        """Read the store now, and again whenever it changes."""
        self._reload()
        self._follower.start(self._store.watch)

    def _reload(self) -> None:
        known = self._tokens
        fresh: dict[str, tuple[TokenInfo, dict[str, ScramCredential]]] = {}
        for token_id, info in self._store.all().items():
            previous = known.get(token_id)
            # The credentials depend on the id alone (and the secret): derived once per token.
            credentials = previous[1] if previous is not None else _credentials(self._secret, token_id)
            fresh[token_id] = (info, credentials)
        self._tokens = fresh  # one assignment: the event loop sees the old table or the new one

    def lookup(self, token_id: str, mechanism: str) -> TokenCredential | None:
        """The token's credential for ``mechanism``; None when there is no such live token. In
        memory, for the event loop."""
        entry = self._tokens.get(token_id)
        if entry is None:
            return None
        info, credentials = entry
        credential = credentials.get(mechanism)
        if credential is None or info.expired(now_ms()):
            return None
        return TokenCredential({mechanism: credential}, info.owner, info.expiry_ms)

    def expire_periodically(self, interval_ms: int) -> None:
        """Delete expired tokens from the store every ``interval_ms`` (a daemon thread)."""
        def run() -> None:
            while not self._closed.wait(interval_ms / 1000):
                try:
                    remove_expired(self._store, now_ms())
                except Exception as exc:
                    log.warning("cannot delete expired delegation tokens: %s", exc)

        self._expirer = threading.Thread(target=run, name="castle-token-expiry", daemon=True)
        self._expirer.start()

    def close(self) -> None:
        self._closed.set()
        self._follower.close()


def remove_expired(store: TokenStore, now: int) -> list[str]:
    """Delete every token expired at ``now`` (Kafka's expireTokens); the ids deleted. Blocks."""
    removed = []
    for token_id, info in store.all().items():
        if not info.expired(now):
            continue

        def plan(current: TokenInfo | None) -> tuple[str | None, bool]:
            # Renewed meanwhile, by another broker: keep it.
            if current is None or not current.expired(now):
                return None, False
            return DELETE, True

        if store.change(token_id, plan):
            log.info("Delegation token expired for token: %s for owner: %s", token_id, info.owner)
            removed.append(token_id)
    return removed


def start_delegation_tokens(config: BrokerConfig, store: TokenStore, expirer: bool) -> "TokenCache | None":
    """The token cache connections authenticate with (None while tokens are disabled); with
    ``expirer``, this process also deletes expired tokens."""
    secret = secret_key(config)
    if secret is None:
        return None
    cache = TokenCache(secret, store)
    cache.start()
    if expirer:
        cache.expire_periodically(config.get_int("delegation.token.expiry.check.interval.ms"))
    return cache
