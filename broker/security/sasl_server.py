"""A sans-I/O SASL server for Kafka's password mechanisms: PLAIN (RFC 4616), SCRAM-SHA-256/512 (RFC 5802/7677).

The connection feeds it the tokens of SaslAuthenticate (or of the raw, pre-KIP-152 frames) and
sends back what it answers; it owns no socket and no event loop. Credentials come from a fast
in-memory ``lookup(user, mechanism)``; SCRAM's messages are scramp's (parsing, nonce and proof
checks); what is written here is Kafka's policy around them (which credential PLAIN checks,
the error messages, the state machine).

Delegation tokens (KIP-48) authenticate with SCRAM and the client-first extension
``tokenauth=true``: the user name is the token id, the credential the token's (``token_lookup``,
broker/security/delegation_tokens.py), the principal the token's owner. scramp refuses
extensions, and the proof covers the client-first message as sent, so that exchange is run
here (RFC 5802's checks, the same as for old librdkafka clients below).

Work that must not run on the event loop is handed back, not done: PLAIN has to run PBKDF2 on
the password it received, so its step returns ``check``, a blocking callable the caller runs in
a thread before treating the exchange as done. SCRAM needs no such step: the server never runs
PBKDF2 (the client did), only a few HMACs.

Failures raise :class:`SaslAuthenticationFailed`, whose ``message`` is what Kafka would put in
the SaslAuthenticate error (never whether the user exists) and whose ``reason`` is for the
broker's log only.
"""

from __future__ import annotations

import base64
import enum
import hmac
import secrets
from dataclasses import dataclass
from typing import Any, Callable

from scramp import ScramException, ScramMechanism

from broker.security.delegation_tokens import TokenCredential, TokenLookup, now_ms
from broker.security.scram_credentials import MECHANISMS, MIN_ITERATIONS, ScramCredential, password_matches

PLAIN = "PLAIN"
SCRAM_SHA_256 = "SCRAM-SHA-256"
SCRAM_SHA_512 = "SCRAM-SHA-512"
SUPPORTED_MECHANISMS = (PLAIN, SCRAM_SHA_256, SCRAM_SHA_512)

# PLAIN checks the password against the user's strongest SCRAM credential.
_PLAIN_CREDENTIAL_ORDER = (SCRAM_SHA_512, SCRAM_SHA_256)

# Kafka's messages. A mechanism that raises a plain SaslException gets the generic one
# (SaslServerAuthenticator.handleSaslToken deliberately names only the phase and mechanism);
# PlainSaslServer raises SaslAuthenticationException with these two, passed to the client as is.
INVALID_USERNAME_OR_PASSWORD = "Authentication failed: Invalid username or password"
AUTHZID_MISMATCH = "Authentication failed: Client requested an authorization id that is different from username"
CREDENTIALS_NOT_VERIFIED = "Authentication failed: credentials for user could not be verified"

# The connection already bounds a frame at 512 KiB; a SCRAM message is a few hundred bytes.
# scramp walks stringprep tables per character of the user name (SASLprep) on the event loop,
# so an absurd message is refused before it gets there.
MAX_SCRAM_MESSAGE_BYTES = 8192


def generic_failure_message(mechanism: str, reauthentication: bool = False) -> str:
    """Kafka's answer when the mechanism failed without a client-safe message of its own."""
    phase = "re-authentication" if reauthentication else "authentication"
    return f"Authentication failed during {phase} due to invalid credentials with SASL mechanism {mechanism}"


class SaslAuthenticationFailed(Exception):
    """The exchange failed. ``message`` is safe to send to the client; ``reason`` is for the log only."""

    def __init__(self, message: str, reason: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.reason = reason or message


class IllegalSaslState(SaslAuthenticationFailed):
    """A token arrived when none was expected (after completion or failure): Kafka's ILLEGAL_SASL_STATE."""


class UnsupportedMechanism(ValueError):
    """The mechanism is not one this server implements: Kafka's UNSUPPORTED_SASL_MECHANISM."""


@dataclass(frozen=True)
class SaslStep:
    """What one token produced.

    ``challenge``: the bytes to send back (may be empty). ``complete``: no further token is
    expected. ``check``: when not None, a BLOCKING verification (PBKDF2) that the caller must run
    off the event loop, in a thread, before treating the step as done; it raises
    :class:`SaslAuthenticationFailed`. The exchange is authenticated only when ``complete`` and
    the check (if any) returned.
    """

    challenge: bytes
    complete: bool
    check: Callable[[], None] | None = None


class _State(enum.Enum):
    INITIAL = "initial"
    SCRAM_FINAL = "awaiting client-final"
    PLAIN_CHECK = "awaiting the password check"
    COMPLETE = "complete"
    FAILED = "failed"


Lookup = Callable[[str, str], "ScramCredential | None"]


class SaslServer:
    """One SASL exchange on one connection, server side.

    ``lookup(user, mechanism)`` returns the user's credential for that SCRAM mechanism or None;
    it must be fast and non-blocking (an in-memory table). ``dummy_iterations`` is the PBKDF2
    count spent on an unknown PLAIN user, so that it costs what a real one does: set it to the
    count credentials are usually made with. ``server_nonce`` fixes SCRAM's server nonce (tests).
    """

    def __init__(
        self,
        mechanism: str,
        lookup: Lookup,
        *,
        reauthentication: bool = False,
        dummy_iterations: int = MIN_ITERATIONS,
        server_nonce: str | None = None,
        token_lookup: TokenLookup | None = None,
    ) -> None:
        if mechanism not in SUPPORTED_MECHANISMS:
            raise UnsupportedMechanism(f"Unsupported SASL mechanism {mechanism!r}; supported: {', '.join(SUPPORTED_MECHANISMS)}")
        self.mechanism = mechanism
        self._lookup = lookup
        self._generic = generic_failure_message(mechanism, reauthentication)
        self._dummy_iterations = dummy_iterations
        self._server_nonce = server_nonce
        self._state = _State.INITIAL
        self._username: str | None = None
        self._scram_user: str | None = None
        self._scram: Any = None  # scramp's ScramServer (scramp has no type hints)
        # For the librdkafka < 2.6.1 client-final (below): what the proof is computed over.
        self._client_first_bare = ""
        self._server_first = ""
        self._credential: ScramCredential | None = None
        self._token_lookup = token_lookup
        self._token: TokenCredential | None = None  # a delegation token's exchange
        self._gs2_header = ""

    # -- results -------------------------------------------------------------------------

    @property
    def complete(self) -> bool:
        """True once the client is authenticated (for PLAIN: after the check returned)."""
        return self._state is _State.COMPLETE

    @property
    def username(self) -> str:
        """The authenticated user name; RuntimeError before completion."""
        if self._state is not _State.COMPLETE or self._username is None:
            raise RuntimeError("SASL authentication has not completed")
        return self._username

    @property
    def principal(self) -> str:
        """Kafka's default principal for a SASL user: ``User:<name>``; for a delegation token,
        ``User:<the owner's name>`` (DefaultKafkaPrincipalBuilder)."""
        if self._token is not None and self.complete:
            return f"User:{self._token.owner.partition(':')[2]}"
        return f"User:{self.username}"

    @property
    def token_authenticated(self) -> bool:
        """Authenticated by a delegation token (Kafka's KafkaPrincipal.tokenAuthenticated)."""
        return self._token is not None and self.complete

    @property
    def credential_expiry_ms(self) -> int | None:
        """When the credential stops being valid (a token's expiry), epoch ms; None: never."""
        return self._token.expiry_ms if self._token is not None else None

    # -- the exchange --------------------------------------------------------------------

    def step(self, token: bytes) -> SaslStep:
        """Consume one client token; raises SaslAuthenticationFailed (the exchange is then over)."""
        state = self._state
        if state is _State.INITIAL:
            if self.mechanism == PLAIN:
                return self._plain(token)
            return self._scram_first(token)
        if state is _State.SCRAM_FINAL:
            return self._scram_final(token)
        self._state = _State.FAILED
        raise IllegalSaslState(
            f"Unexpected SASL token in state {state.value}",
            reason=f"{self.mechanism}: token received while {state.value}",
        )

    def _fail(self, message: str, reason: str) -> SaslAuthenticationFailed:
        self._state = _State.FAILED
        self._scram = None
        return SaslAuthenticationFailed(message, reason=f"{self.mechanism}: {reason}")

    # -- PLAIN ---------------------------------------------------------------------------

    def _plain(self, token: bytes) -> SaslStep:
        # message = [authzid] NUL authcid NUL passwd (RFC 4616). Kafka's parser folds a third NUL
        # into the password; RFC 4616 forbids NUL in every field, so we refuse it. Malformed
        # tokens get the generic message, as Kafka's SaslException does.
        try:
            text = bytes(token).decode("utf-8")
        except UnicodeDecodeError:
            raise self._fail(self._generic, "PLAIN token is not UTF-8") from None
        parts = text.split("\0")
        if len(parts) != 3:
            raise self._fail(self._generic, f"PLAIN token has {len(parts)} fields, expected 3")
        authzid, username, password = parts
        if not username:
            raise self._fail(self._generic, "PLAIN username not specified")
        if not password:
            raise self._fail(self._generic, "PLAIN password not specified")

        mechanism, credential = SCRAM_SHA_512, None
        try:
            for candidate in _PLAIN_CREDENTIAL_ORDER:
                credential = self._lookup(username, candidate)
                if credential is not None:
                    mechanism = candidate
                    break
        except Exception as e:
            raise self._fail(CREDENTIALS_NOT_VERIFIED, f"credential lookup for {username!r} failed: {e!r}") from e

        self._state = _State.PLAIN_CHECK
        return SaslStep(challenge=b"", complete=True, check=self._plain_check(authzid, username, password, mechanism, credential))

    def _plain_check(
        self, authzid: str, username: str, password: str, mechanism: str, credential: ScramCredential | None
    ) -> Callable[[], None]:
        dummy_iterations = self._dummy_iterations

        def check() -> None:
            """BLOCKING (PBKDF2): run in a thread, never on the event loop."""
            if self._state is not _State.PLAIN_CHECK:
                raise IllegalSaslState("SASL/PLAIN check run twice or after a failure", reason="PLAIN check reused")
            if credential is None:
                # Spend the same PBKDF2 time as a real user so that the delay does not say
                # whether the user exists; the dummy's random key never matches, and it fails anyway.
                dummy = ScramCredential(
                    salt=secrets.token_bytes(32),
                    stored_key=secrets.token_bytes(64),
                    server_key=secrets.token_bytes(64),
                    iterations=dummy_iterations,
                )
                password_matches(mechanism, dummy, password)
                raise self._fail(INVALID_USERNAME_OR_PASSWORD, f"unknown user {username!r}")
            if credential.iterations < MIN_ITERATIONS:
                raise self._fail(INVALID_USERNAME_OR_PASSWORD, f"{username!r}'s {mechanism} credential has too few iterations")
            if not password_matches(mechanism, credential, password):
                raise self._fail(INVALID_USERNAME_OR_PASSWORD, f"wrong password for {username!r}")
            # Kafka checks the authorization id after the password, with its own message.
            if authzid and authzid != username:
                raise self._fail(AUTHZID_MISMATCH, f"{username!r} asked for authorization id {authzid!r}")
            self._username = username
            self._state = _State.COMPLETE

        return check

    # -- SCRAM ---------------------------------------------------------------------------

    def _scram_text(self, token: bytes, which: str) -> str:
        if len(token) > MAX_SCRAM_MESSAGE_BYTES:
            raise self._fail(self._generic, f"SCRAM {which} of {len(token)} bytes")
        # Kafka's grammar (ScramMessages) is ASCII-only for the whole message, user name included.
        # Refusing anything else also keeps scramp's SASLprep (NFKC) from mapping a non-ASCII name
        # onto another user's ASCII name.
        try:
            return bytes(token).decode("ascii")
        except UnicodeDecodeError:
            raise self._fail(self._generic, f"SCRAM {which} is not ASCII") from None

    def _scram_first(self, token: bytes) -> SaslStep:
        text = self._scram_text(token, "client-first")
        # Kafka's client-first may carry extensions after the nonce (",tokenauth=true" for delegation
        # tokens). scramp only knows one-letter attributes, so it would refuse them as malformed
        # anyway; we look first to refuse delegation tokens by name (we have none) and to log why.
        bare = text.split(",", 2)[2] if text.count(",") >= 2 else ""
        for attribute in bare.split(",")[2:]:
            name, _, value = attribute.partition("=")
            if name == "tokenauth":
                if self._token_lookup is None:
                    raise self._fail(self._generic, "delegation token authentication (tokenauth) while tokens are disabled")
                if value.lower() == "true":  # Java's Boolean.parseBoolean
                    return self._token_first(text, bare)
                continue
            if len(name) != 1:
                raise self._fail(self._generic, f"unsupported SCRAM extension {name!r}")

        def auth_fn(name: str) -> tuple[bytes, bytes, bytes, int] | None:
            # scramp hands over the unescaped (=2C, =3D) and SASLprep'ed name; for an ASCII name
            # without control characters (the only kind that gets this far), SASLprep is the identity.
            self._scram_user = name
            credential = self._lookup(name, self.mechanism)
            if credential is None:
                return None
            self._credential = credential
            return credential.salt, credential.stored_key, credential.server_key, credential.iterations

        try:
            server = ScramMechanism(self.mechanism).make_server(auth_fn, s_nonce=self._server_nonce)
            server.set_client_first(text)
            challenge = server.get_server_first()
        except ScramException as e:
            # An unknown user fails here, with the same message as any other failure. (The
            # answer's shape still differs from a known user's, as it does in Kafka.)
            cause = f" ({e.__cause__!r})" if e.__cause__ is not None else ""
            raise self._fail(self._generic, f"client-first refused for {self._scram_user!r}: {e}{cause}") from None
        self._scram = server
        self._client_first_bare = bare
        self._server_first = challenge
        self._state = _State.SCRAM_FINAL
        return SaslStep(challenge=challenge.encode("ascii"), complete=False)

    def _token_first(self, text: str, bare: str) -> SaslStep:
        """A delegation token's client-first: n,[a=<authzid>],n=<tokenId>,r=<nonce>[,extensions]
        (Kafka's ClientFirstMessage grammar)."""
        assert self._token_lookup is not None
        gs2_flag, authzid, _rest = text.split(",", 2)
        fields = bare.split(",")
        if gs2_flag != "n" or (authzid and not authzid.startswith("a=")) or len(fields) < 2 \
                or not fields[0].startswith("n=") or not fields[1].startswith("r="):
            raise self._fail(self._generic, "malformed client-first for a delegation token")
        token_id = fields[0][2:].replace("=2C", ",").replace("=3D", "=")
        client_nonce = fields[1][2:]
        self._scram_user = token_id
        if not token_id or not client_nonce or not client_nonce.isprintable():
            raise self._fail(self._generic, "malformed client-first for a delegation token")
        try:
            token = self._token_lookup(token_id, self.mechanism)
        except Exception as e:
            raise self._fail(self._generic, f"token lookup for {token_id!r} failed: {e!r}") from e
        if token is None:
            raise self._fail(self._generic, f"Token Authentication failed: Invalid tokenId : {token_id}")
        if authzid and authzid[2:] != token_id:
            raise self._fail(AUTHZID_MISMATCH, f"token {token_id!r} asked for authorization id {authzid[2:]!r}")
        if token.expiry_ms < now_ms():
            raise self._fail(self._generic, f"delegation token {token_id!r} has expired")
        credential = token.credentials[self.mechanism]
        server_nonce = self._server_nonce or secrets.token_urlsafe(24)
        self._token = token
        self._credential = credential
        self._gs2_header = f"{gs2_flag},{authzid},"
        self._client_first_bare = bare
        self._server_first = (f"r={client_nonce}{server_nonce},s={base64.b64encode(credential.salt).decode('ascii')},"
                              f"i={credential.iterations}")
        self._state = _State.SCRAM_FINAL
        return SaslStep(challenge=self._server_first.encode("ascii"), complete=False)

    def _token_final(self, text: str) -> SaslStep:
        """c=<base64 gs2 header>,r=<nonce>[,extensions],p=<proof>: checked as RFC 5802 says."""
        fields = dict(part.split("=", 1) for part in text.split(",") if "=" in part)
        nonce = self._server_first.split(",", 1)[0][2:]
        if not text.startswith("c=") or fields.get("r") != nonce or "p" not in fields \
                or not text.endswith(",p=" + fields["p"]):
            raise self._fail(self._generic, f"client-final refused for token {self._scram_user!r}: malformed or wrong nonce")
        if fields.get("c") != base64.b64encode(self._gs2_header.encode("ascii")).decode("ascii"):
            raise self._fail(self._generic, "client-final channel binding does not repeat the GS2 header")
        challenge = self._verify_proof(text[:-len(",p=" + fields["p"])], fields["p"])
        self._username = self._scram_user
        self._state = _State.COMPLETE
        return SaslStep(challenge=challenge.encode("ascii"), complete=True)

    def _verify_proof(self, final_without_proof: str, proof_text: str) -> str:
        """The server-final for a client proof over this exchange's messages; raises unless
        H(ClientSignature XOR ClientProof) == StoredKey (compared in constant time)."""
        credential = self._credential
        assert credential is not None
        hash_factory = MECHANISMS[self.mechanism]
        auth_message = f"{self._client_first_bare},{self._server_first},{final_without_proof}".encode()
        try:
            proof = base64.b64decode(proof_text, validate=True)
        except ValueError:
            raise self._fail(self._generic, "client-final proof is not base64") from None
        signature = hmac.new(credential.stored_key, auth_message, hash_factory).digest()
        if len(proof) != len(signature):
            raise self._fail(self._generic, "client-final proof of the wrong length")
        client_key = bytes(a ^ b for a, b in zip(signature, proof))
        if not hmac.compare_digest(hash_factory(client_key).digest(), credential.stored_key):
            raise self._fail(self._generic, f"client-final refused for {self._scram_user!r}: invalid proof")
        server_signature = hmac.new(credential.server_key, auth_message, hash_factory).digest()
        return "v=" + base64.b64encode(server_signature).decode("ascii")

    def _scram_final(self, token: bytes) -> SaslStep:
        text = self._scram_text(token, "client-final")
        if self._token is not None:
            return self._token_final(text)
        server = self._scram
        assert server is not None
        legacy = self._librdkafka_final(text)
        if legacy is not None:
            self._scram = None
            self._username = self._scram_user
            self._state = _State.COMPLETE
            return SaslStep(challenge=legacy.encode("ascii"), complete=True)
        try:
            # scramp checks, in _set_client_final: the channel binding (hmac.compare_digest), the
            # nonce (plain ==: not secret, the server sent it in the clear in server-first) and the
            # proof, by recomputing H(ClientSignature XOR ClientProof) and comparing it with
            # StoredKey through hmac.compare_digest, i.e. in constant time; a proof of the wrong
            # length fails in xor() before any comparison, which reveals only the hash's length.
            server.set_client_final(text)
            challenge = server.get_server_final()
        except ScramException as e:
            raise self._fail(self._generic, f"client-final refused for {self._scram_user!r}: {e}") from None
        self._scram = None
        self._username = self._scram_user
        self._state = _State.COMPLETE
        return SaslStep(challenge=challenge.encode("ascii"), complete=True)


    def _librdkafka_final(self, text: str) -> str | None:
        """The server-final for a client-final whose nonce repeats the client's part, as
        librdkafka before 2.6.1 sends it (r=<client nonce><client nonce><server nonce>,
        confluentinc/librdkafka#4895; Debian's kcat is built on 2.0.2); None for any other
        message, which scramp checks. Kafka 3.8.1-3.9 accept these clients too. scramp cannot
        be given the message: the proof covers it as sent, so it is checked here, by RFC 5802's
        rule (H(ClientSignature XOR ClientProof) == StoredKey, compared in constant time)."""
        fields = dict(part.split("=", 1) for part in text.split(",") if "=" in part)
        nonce = dict(part.split("=", 1) for part in self._server_first.split(",") if "=" in part).get("r", "")
        client_nonce = dict(part.split("=", 1) for part in self._client_first_bare.split(",") if "=" in part).get("r", "")
        credential = self._credential
        if (credential is None or not client_nonce or fields.get("r") != client_nonce + nonce or "p" not in fields
                or not text.endswith(",p=" + fields["p"])):
            return None
        if fields.get("c") != "biws":  # base64("n,,"): no channel binding, no authorization id
            raise self._fail(self._generic, "client-final channel binding is not n,,")
        return self._verify_proof(text[:-len(",p=" + fields["p"])], fields["p"])


assert set(SUPPORTED_MECHANISMS) == {PLAIN, *MECHANISMS}
