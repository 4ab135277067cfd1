"""SCRAM credentials (RFC 5802): what a broker stores per user and mechanism, Kafka's string form.

A credential is what SCRAM's server needs and nothing from which the password can be
recovered cheaply: the salt, the iteration count, StoredKey = H(HMAC(SaltedPassword, "Client
Key")) and ServerKey = HMAC(SaltedPassword, "Server Key"), where SaltedPassword is
PBKDF2-HMAC(password, salt, iterations). Kafka keeps it, per user and mechanism, as
``salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=<n>`` (ScramCredentialUtils; in
ZooKeeper under ``/config/users/<user>``, key ``SCRAM-SHA-256`` / ``SCRAM-SHA-512``), and
AlterUserScramCredentials carries the client's own salt and SaltedPassword, never the password.

The key derivation is written here with hashlib/hmac rather than taken from scramp, on purpose:

* scramp's only public derivation, ``ScramMechanism.make_auth_info``, applies SASLprep to the
  password; Kafka does not (ScramFormatter.normalize is plain UTF-8), and a credential must
  verify the bytes a Kafka client actually hashed;
* scramp has no public way to derive the keys from a SaltedPassword, which is exactly what
  AlterUserScramCredentials delivers (its ``_c_key_stored_key_s_key`` is private).

It is three HMAC/hash calls; PBKDF2 itself is hashlib's.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from dataclasses import dataclass
from typing import Callable

HashFactory = Callable[..., "hashlib._Hash"]

MECHANISMS: dict[str, HashFactory] = {
    "SCRAM-SHA-256": hashlib.sha256,
    "SCRAM-SHA-512": hashlib.sha512,
}

# Kafka's bounds (ScramMechanism.minIterations/maxIterations; ScramControlManager refuses an
# AlterUserScramCredentials upsertion outside them with UNACCEPTABLE_CREDENTIAL).
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384

# scramp's Salt refuses salts shorter than 12 bytes when it serves SCRAM, so a credential with
# a shorter salt would verify over PLAIN but never over SCRAM. Kafka itself does not check the
# salt length; we refuse such salts when a credential is created rather than fail at login.
MIN_SALT_BYTES = 12

# Kafka's own salt (ScramFormatter.secureRandomBytes) is the UTF-8 of a 130-bit random number
# written in base 36 (~25 bytes). Any salt works for SCRAM; 32 random bytes carry more entropy.
DEFAULT_SALT_BYTES = 32

_KEYS = ("salt", "stored_key", "server_key", "iterations")


@dataclass(frozen=True)
class ScramCredential:
    """One user's credential for one SCRAM mechanism (Kafka's ScramCredential)."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def __repr__(self) -> str:  # keys are password-equivalent for SCRAM: keep them out of logs
        return f"ScramCredential(salt=<{len(self.salt)} bytes>, stored_key=<hidden>, server_key=<hidden>, iterations={self.iterations})"


def hash_factory(mechanism: str) -> HashFactory:
    """The hash of a SCRAM mechanism; ValueError for a mechanism Kafka does not have."""
    try:
        return MECHANISMS[mechanism]
    except KeyError:
        raise ValueError(f"unknown SCRAM mechanism {mechanism!r}; expected one of {sorted(MECHANISMS)}") from None


def check_iterations(iterations: int) -> None:
    """ValueError unless ``iterations`` is within Kafka's bounds."""
    if isinstance(iterations, bool) or not isinstance(iterations, int):
        raise ValueError(f"iterations must be an int, not {type(iterations).__name__}")
    if iterations < MIN_ITERATIONS:
        raise ValueError(f"too few iterations: {iterations} < {MIN_ITERATIONS}")
    if iterations > MAX_ITERATIONS:
        raise ValueError(f"too many iterations: {iterations} > {MAX_ITERATIONS}")


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    """SaltedPassword = PBKDF2-HMAC(UTF-8(password), salt, iterations), as Kafka computes it (no SASLprep).

    Slow on purpose: never call it on an event loop.
    """
    if iterations < 1:
        raise ValueError(f"iterations must be positive, not {iterations}")
    return hashlib.pbkdf2_hmac(hash_factory(mechanism)().name, password.encode("utf-8"), salt, iterations)


def _keys(hf: HashFactory, salted: bytes) -> tuple[bytes, bytes]:
    """(StoredKey, ServerKey) from SaltedPassword (RFC 5802 section 3)."""
    client_key = hmac.new(salted, b"Client Key", hf).digest()
    stored_key = hf(client_key).digest()
    server_key = hmac.new(salted, b"Server Key", hf).digest()
    return stored_key, server_key


def _check_salt(salt: bytes) -> None:
    if not isinstance(salt, bytes):
        raise ValueError(f"salt must be bytes, not {type(salt).__name__}")
    if len(salt) < MIN_SALT_BYTES:
        raise ValueError(f"salt too short: {len(salt)} bytes < {MIN_SALT_BYTES}")


def from_salted_password(mechanism: str, salted_password: bytes, salt: bytes, iterations: int) -> ScramCredential:
    """The credential an AlterUserScramCredentials upsertion describes (the client ran PBKDF2).

    Kafka's controller does the same (ScramControlManager.finishUpsertion): StoredKey and
    ServerKey from the SaltedPassword; the password never reaches the broker. Fast: no PBKDF2.
    """
    hf = hash_factory(mechanism)
    check_iterations(iterations)
    _check_salt(salt)
    if not isinstance(salted_password, bytes) or not salted_password:
        raise ValueError("salted password must be non-empty bytes")
    stored_key, server_key = _keys(hf, salted_password)
    return ScramCredential(salt=salt, stored_key=stored_key, server_key=server_key, iterations=iterations)


def from_password(mechanism: str, password: str, iterations: int, salt: bytes | None = None) -> ScramCredential:
    """A credential for ``password`` (a random salt unless one is given), as kafka-configs makes it.

    Runs PBKDF2: slow on purpose, never on an event loop.
    """
    hf = hash_factory(mechanism)
    check_iterations(iterations)
    if salt is None:
        salt = secrets.token_bytes(DEFAULT_SALT_BYTES)
    _check_salt(salt)
    stored_key, server_key = _keys(hf, salted_password(mechanism, password, salt, iterations))
    return ScramCredential(salt=salt, stored_key=stored_key, server_key=server_key, iterations=iterations)


def password_matches(mechanism: str, credential: ScramCredential, password: str) -> bool:
    """Whether ``password`` is the one ``credential`` was made from (SASL/PLAIN against SCRAM credentials).

    Slow on purpose: it runs PBKDF2 with the credential's iteration count (milliseconds at
    4096, more for SHA-512 and higher counts), so it must NEVER run on an event loop; run it in
    a thread. The final comparison is constant-time (``hmac.compare_digest``).
    """
    hf = hash_factory(mechanism)
    stored_key, _server_key = _keys(hf, salted_password(mechanism, password, credential.salt, credential.iterations))
    return hmac.compare_digest(stored_key, credential.stored_key)


def to_kafka_string(credential: ScramCredential) -> str:
    """Kafka's persisted form: ``salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=<n>``."""
    b64 = base64.b64encode
    return (
        f"salt={b64(credential.salt).decode('ascii')},"
        f"stored_key={b64(credential.stored_key).decode('ascii')},"
        f"server_key={b64(credential.server_key).decode('ascii')},"
        f"iterations={credential.iterations}"
    )


def from_kafka_string(text: str) -> ScramCredential:
    """Parse Kafka's persisted form (ScramCredentialUtils.credentialFromString); ValueError on bad input.

    Exactly the four keys, each once, in any order; base64 must be canonical-alphabet and
    padded; iterations a positive decimal. Iteration bounds are not enforced here (a stored
    credential is read as it is; the SASL server refuses counts under the minimum at login).
    """
    if not isinstance(text, str):
        raise ValueError(f"credential must be a str, not {type(text).__name__}")
    fields: dict[str, str] = {}
    for token in text.strip().split(","):
        key, sep, value = token.partition("=")
        if not sep or not key:
            raise ValueError("credential not valid: expected key=value pairs separated by ','")
        if key not in _KEYS:
            raise ValueError(f"credential not valid: unknown key {key!r}")
        if key in fields:
            raise ValueError(f"credential not valid: duplicate key {key!r}")
        fields[key] = value
    missing = [k for k in _KEYS if k not in fields]
    if missing:
        raise ValueError(f"credential not valid: missing {', '.join(missing)}")

    def b64(key: str) -> bytes:
        try:
            raw = base64.b64decode(fields[key], validate=True)
        except (binascii.Error, ValueError):
            raise ValueError(f"credential not valid: {key} is not base64") from None
        if not raw:
            raise ValueError(f"credential not valid: {key} is empty")
        return raw

    iterations_text = fields["iterations"]
    if not (iterations_text.isascii() and iterations_text.isdigit()):
        raise ValueError(f"credential not valid: iterations {iterations_text!r} is not a decimal number")
    iterations = int(iterations_text)
    if not 0 < iterations <= 2**31 - 1:  # Kafka's field is a Java int
        raise ValueError(f"credential not valid: iterations {iterations} out of range")
    return ScramCredential(salt=b64("salt"), stored_key=b64("stored_key"), server_key=b64("server_key"), iterations=iterations)
