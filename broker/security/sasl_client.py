"""The client side of SASL PLAIN and SCRAM-SHA-256/512, for the broker's own connections to other brokers.

Sans-I/O: ``first()`` gives the initial token, ``step(challenge)`` the answer to each server
token, None once the exchange is over; the caller moves the bytes (SaslHandshake +
SaslAuthenticate). SCRAM's messages and the check of the server's signature are scramp's.

The credentials come from Kafka's JAAS line (``sasl.jaas.config``, e.g.
``org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="s";``),
parsed by :func:`parse_jaas_config`: the same tokens Kafka's JaasConfig accepts for these two
login modules (double- or single-quoted values with backslash escapes, or bare words), one
login module, terminated by ``;``.

Blocking: the SCRAM step that answers server-first runs PBKDF2 with the server's iteration
count (milliseconds at 4096). The count is capped at Kafka's maximum, so a hostile or broken
peer cannot make it spin for long; still, run that step in a thread if milliseconds matter.
"""

from __future__ import annotations

from typing import Any

from scramp import ScramClient, ScramException

from broker.security.scram_credentials import MAX_ITERATIONS, MECHANISMS

PLAIN = "PLAIN"

PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
_LOGIN_MODULES = {PLAIN_LOGIN_MODULE: PLAIN, SCRAM_LOGIN_MODULE: "SCRAM"}
_CONTROL_FLAGS = ("required", "requisite", "sufficient", "optional")
# What Java's StreamTokenizer (Kafka's JaasConfig tokenizer) makes of a backslash escape in a quoted string.
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "a": "\a", "v": "\v"}
_SPECIAL = set(";=\"'/")


class SaslClientError(Exception):
    """The server's answer is wrong (bad signature, malformed message) or the exchange is misused."""


def _tokens(text: str) -> list[tuple[str, str]]:
    """Split a JAAS line into ("word"|"quoted"|"punct", value) tokens, like Kafka's JaasConfig."""
    tokens: list[tuple[str, str]] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c <= " ":  # Kafka: every char from 0 to 32 is whitespace
            i += 1
        elif c in ";=":
            tokens.append(("punct", c))
            i += 1
        elif c in "\"'":
            quote, i, out = c, i + 1, []
            while True:
                if i >= n:
                    raise ValueError("unterminated quoted value in JAAS config")
                c = text[i]
                if c == quote:
                    i += 1
                    break
                if c == "\\":
                    if i + 1 >= n:
                        raise ValueError("unterminated escape in JAAS config")
                    nxt = text[i + 1]
                    out.append(_ESCAPES.get(nxt, nxt))
                    i += 2
                    continue
                if c in "\n\r":  # a quoted string ends at the end of the line in StreamTokenizer
                    raise ValueError("quoted value in JAAS config crosses a line end")
                out.append(c)
                i += 1
            tokens.append(("quoted", "".join(out)))
        elif c == "/":
            # Kafka's tokenizer takes '/' as the start of a comment; we accept none.
            raise ValueError("comments are not supported in JAAS config")
        else:
            start = i
            while i < n and text[i] > " " and text[i] not in _SPECIAL:
                i += 1
            tokens.append(("word", text[start:i]))
    return tokens


def parse_jaas_config(text: str, mechanism: str | None = None) -> tuple[str, str]:
    """(username, password) from a PlainLoginModule or ScramLoginModule JAAS line; ValueError otherwise.

    With ``mechanism`` (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) the login module must fit it.
    Unknown options are ignored, as Kafka's login modules ignore them; ``tokenauth=true``
    (delegation tokens) is refused, since the broker has none.
    """
    tokens = _tokens(text)
    if not tokens:
        raise ValueError("login module not specified in JAAS config")
    if tokens[0][0] != "word" or tokens[0][1] not in _LOGIN_MODULES:
        raise ValueError(f"unsupported login module in JAAS config (expected {PLAIN_LOGIN_MODULE} or {SCRAM_LOGIN_MODULE})")
    module = tokens[0][1]
    if len(tokens) < 2 or tokens[1][0] != "word" or tokens[1][1].lower() not in _CONTROL_FLAGS:
        raise ValueError(
            f"login module control flag missing or invalid in JAAS config (expected one of {', '.join(_CONTROL_FLAGS)})"
        )
    options: dict[str, str] = {}
    i = 2
    while True:
        if i >= len(tokens):
            raise ValueError("JAAS config entry not terminated by ';'")
        kind, value = tokens[i]
        if (kind, value) == ("punct", ";"):
            i += 1
            break
        if kind == "punct":
            raise ValueError(f"unexpected {value!r} in JAAS config")
        key = value
        if i + 2 >= len(tokens) or tokens[i + 1] != ("punct", "=") or tokens[i + 2][0] == "punct":
            raise ValueError(f"value not specified for key {key!r} in JAAS config")
        options[key] = tokens[i + 2][1]
        i += 3
    if i != len(tokens):
        raise ValueError("only one login module may be specified in JAAS config")

    family = _LOGIN_MODULES[module]
    if mechanism is not None:
        wanted = PLAIN if mechanism == PLAIN else "SCRAM" if mechanism in MECHANISMS else None
        if wanted is None:
            raise ValueError(f"unsupported SASL mechanism {mechanism!r}")
        if wanted != family:
            raise ValueError(f"JAAS login module {module} does not fit SASL mechanism {mechanism}")
    if family == "SCRAM" and options.get("tokenauth", "false").lower() == "true":
        raise ValueError("delegation token authentication (tokenauth=true) is not supported")
    username, password = options.get("username"), options.get("password")
    if not username:
        raise ValueError("JAAS config has no username")
    if not password:
        raise ValueError("JAAS config has no password")
    return username, password


class SaslClient:
    """One SASL exchange, client side: ``first()``, then ``step(challenge)`` until it returns None."""

    def __init__(self, mechanism: str, username: str, password: str) -> None:
        if mechanism != PLAIN and mechanism not in MECHANISMS:
            raise ValueError(f"unsupported SASL mechanism {mechanism!r}")
        if not username or not password:
            raise ValueError("username and password must not be empty")
        self.mechanism = mechanism
        self._username = username
        self._password = password
        self._scram: Any = None  # scramp's ScramClient (scramp has no type hints)
        self._stage = 0  # 0: before first(), then one per token sent/received
        self.complete = False
        self._failed = False

    def first(self) -> bytes:
        """The initial token (PLAIN's whole message; SCRAM's client-first)."""
        if self._stage != 0:
            raise SaslClientError("first() already called")
        self._stage = 1
        if self.mechanism == PLAIN:
            if "\0" in self._username or "\0" in self._password:
                raise ValueError("PLAIN user names and passwords cannot contain NUL")
            # Empty authzid, as Kafka's (the JDK's) PLAIN client sends: the server derives it.
            return b"\0" + self._username.encode("utf-8") + b"\0" + self._password.encode("utf-8")
        try:
            # scramp SASLpreps user name and password (Kafka's client does not): identical for
            # ASCII without control characters, which is what broker credentials are.
            self._scram = ScramClient([self.mechanism], self._username, self._password)
            return self._scram.get_client_first().encode("utf-8")
        except ScramException as e:
            raise SaslClientError(f"cannot start {self.mechanism}: {e}") from None

    def step(self, challenge: bytes) -> bytes | None:
        """The answer to the server's token, or None when the exchange is complete (nothing to send).

        Raises SaslClientError on a wrong or malformed server message; the exchange is then over.
        """
        if self._stage == 0:
            raise SaslClientError("first() must be called before step()")
        if self.complete or self._failed:
            raise SaslClientError("SASL exchange already over")
        try:
            return self._step(challenge)
        except BaseException:
            self._failed = True
            raise

    def _step(self, challenge: bytes) -> bytes | None:
        if self.mechanism == PLAIN:
            if challenge:
                raise SaslClientError("unexpected SASL/PLAIN challenge from the server")
            self.complete = True
            return None
        try:
            text = bytes(challenge).decode("utf-8")
        except UnicodeDecodeError:
            raise SaslClientError(f"{self.mechanism} server message is not UTF-8") from None
        scram = self._scram
        try:
            if self._stage == 1:
                scram.set_server_first(text)
                # scramp accepts up to 10,000,000 iterations; Kafka never issues more than its maximum.
                iterations = int(scram.iterations)
                if iterations > MAX_ITERATIONS:
                    raise SaslClientError(f"{self.mechanism} server asks for {iterations} iterations (max {MAX_ITERATIONS})")
                final = scram.get_client_final()  # PBKDF2 runs here
                self._stage = 2
                return final.encode("utf-8")
            # The server's signature is compared with hmac.compare_digest by scramp.
            scram.set_server_final(text)
        except ScramException as e:
            raise SaslClientError(f"{self.mechanism} exchange with the server failed: {e}") from None
        self.complete = True
        return None
