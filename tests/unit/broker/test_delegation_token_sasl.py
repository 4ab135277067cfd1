"""SASL/SCRAM with a delegation token (``tokenauth=true``): the SaslServer against a real token
cache over a real token file, driven by a SCRAM client written out by hand (RFC 5802), since
the client-first carries Kafka's extension, which no Python SCRAM client sends."""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
from pathlib import Path
from typing import Iterator

import pytest

from broker.security.delegation_tokens import TokenCache, new_token_id, now_ms, token_hmac
from broker.security.sasl_server import SaslAuthenticationFailed, SaslServer, generic_failure_message
from broker.security.scram_credentials import MECHANISMS, MIN_ITERATIONS, salted_password
from coordination.delegation_tokens import DELETE, LocalTokens, TokenInfo

pytestmark = pytest.mark.timeout(60)

SECRET = b"the-cluster-secret"


def no_users(_user: str, _mechanism: str) -> None:
    return None


@pytest.fixture
def store(tmp_path: Path) -> Iterator[LocalTokens]:
    tokens = LocalTokens(str(tmp_path))
    yield tokens
    tokens.close()


def put(store: LocalTokens, info: TokenInfo) -> None:
    store.change(info.token_id, lambda _current: (info, None))


def live_token(owner: str = "User:alice") -> TokenInfo:
    now = now_ms()
    return TokenInfo(new_token_id(), owner, "User:admin", (), now, now + 600_000, now + 300_000)


def password(token_id: str) -> str:
    return base64.b64encode(token_hmac(SECRET, token_id)).decode("ascii")


def exchange(server: SaslServer, user: str, secret: str, extensions: str = ",tokenauth=true") -> bytes:
    """A whole SCRAM exchange as Kafka's ScramSaslClient runs it; the server-final's bytes."""
    mechanism = server.mechanism
    hf = MECHANISMS[mechanism]
    first_bare = f"n={user},r=fyko+d2lbbFgONRv9qkxdawL{extensions}"
    server_first = server.step(f"n,,{first_bare}".encode()).challenge.decode()
    fields = dict(part.split("=", 1) for part in server_first.split(","))
    salted = salted_password(mechanism, secret, base64.b64decode(fields["s"]), int(fields["i"]))
    client_key = hmac.new(salted, b"Client Key", hf).digest()
    without_proof = f"c=biws,r={fields['r']}"
    auth_message = f"{first_bare},{server_first},{without_proof}".encode()
    signature = hmac.new(hf(client_key).digest(), auth_message, hf).digest()
    proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, signature))).decode()
    step = server.step(f"{without_proof},p={proof}".encode())
    assert step.complete
    server_key = hmac.new(salted, b"Server Key", hf).digest()
    assert step.challenge.decode() == "v=" + base64.b64encode(hmac.new(server_key, auth_message, hf).digest()).decode()
    return step.challenge


@pytest.mark.parametrize("mechanism", sorted(MECHANISMS))
def test_a_token_authenticates_as_its_owner(store: LocalTokens, mechanism: str) -> None:
    info = live_token("User:alice")
    put(store, info)
    cache = TokenCache(SECRET, store)
    cache.start()
    try:
        server = SaslServer(mechanism, no_users, token_lookup=cache.lookup)
        exchange(server, info.token_id, password(info.token_id))
        assert server.complete and server.token_authenticated
        assert server.principal == "User:alice"
        assert server.credential_expiry_ms == info.expiry_ms
        # Kafka's credential for a token: SCRAM's minimum iterations.
        assert cache.lookup(info.token_id, mechanism).credentials[mechanism].iterations == MIN_ITERATIONS
    finally:
        cache.close()


def test_a_wrong_hmac_an_unknown_id_and_an_expired_token_fail_alike(store: LocalTokens) -> None:
    info, expired = live_token(), live_token()
    expired = TokenInfo(expired.token_id, expired.owner, expired.requester, (), 0, now_ms() + 600_000, now_ms() - 1)
    put(store, info)
    put(store, expired)
    cache = TokenCache(SECRET, store)
    cache.start()
    try:
        for user, secret in [(info.token_id, password("another")), ("no-such-token", password("no-such-token")),
                             (expired.token_id, password(expired.token_id))]:
            server = SaslServer("SCRAM-SHA-256", no_users, token_lookup=cache.lookup)
            with pytest.raises(SaslAuthenticationFailed) as failed:
                exchange(server, user, secret)
            assert failed.value.message == generic_failure_message("SCRAM-SHA-256")
            assert not server.complete
    finally:
        cache.close()


def test_a_token_is_not_a_user_without_the_extension(store: LocalTokens) -> None:
    """Without tokenauth=true the token id is looked up as a user name (and is none)."""
    info = live_token()
    put(store, info)
    cache = TokenCache(SECRET, store)
    cache.start()
    try:
        with pytest.raises(SaslAuthenticationFailed):
            exchange(SaslServer("SCRAM-SHA-512", no_users, token_lookup=cache.lookup), info.token_id,
                     password(info.token_id), extensions="")
    finally:
        cache.close()


def test_the_cache_follows_the_store(store: LocalTokens) -> None:
    cache = TokenCache(SECRET, store)
    cache.start()
    try:
        info = live_token()
        put(store, info)  # after the cache started: it hears of it through the watch
        deadline = time.monotonic() + 10
        while cache.lookup(info.token_id, "SCRAM-SHA-256") is None:
            assert time.monotonic() < deadline, "the cache did not see the new token within 10 s"
            time.sleep(0.05)
        store.change(info.token_id, lambda _current: (DELETE, None))
        while cache.lookup(info.token_id, "SCRAM-SHA-256") is not None:
            assert time.monotonic() < deadline, "the cache did not forget the deleted token within 10 s"
            time.sleep(0.05)
    finally:
        cache.close()


def test_hmac_and_token_id_are_kafkas() -> None:
    # DelegationTokenManager.createHmac: HmacSHA512 over the id's UTF-8, keyed with the secret's UTF-8.
    assert token_hmac(b"key", "id") == hmac.new(b"key", b"id", hashlib.sha512).digest()
    token_id = new_token_id()
    assert len(token_id) == 22 and "=" not in token_id and base64.urlsafe_b64decode(token_id + "==")
