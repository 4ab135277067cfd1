"""SASL building blocks (broker/security): SCRAM credentials in Kafka's string form, the sans-I/O
SASL server (PLAIN, SCRAM-SHA-256/512) checked against RFC 7677's worked exchange and against our
own client, every refusal with the message Kafka would send, and the JAAS line parser."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest

import broker.security.sasl_server as sasl_server
from broker.security.sasl_client import SaslClient, SaslClientError, parse_jaas_config
from broker.security.sasl_server import (
    AUTHZID_MISMATCH,
    INVALID_USERNAME_OR_PASSWORD,
    IllegalSaslState,
    SaslAuthenticationFailed,
    SaslServer,
    UnsupportedMechanism,
    generic_failure_message,
)
from broker.security.scram_credentials import (
    MAX_ITERATIONS,
    MIN_ITERATIONS,
    ScramCredential,
    from_kafka_string,
    from_password,
    from_salted_password,
    password_matches,
    to_kafka_string,
)

# RFC 7677 section 3: user "user", password "pencil", SCRAM-SHA-256.
RFC_SALT_B64 = "W22ZaJ0SNY7soEsUEjb6gQ=="
RFC_CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
RFC_SERVER_FIRST = b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
RFC_CLIENT_FINAL = b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
RFC_SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
# That user's credential as Kafka's ScramCredentialUtils.credentialToString writes it; the keys were
# computed by hand (PBKDF2-HMAC-SHA-256, then RFC 5802's HMAC/H), see test_rfc_credential_keys_by_hand.
RFC_KAFKA_STRING = (
    "salt=W22ZaJ0SNY7soEsUEjb6gQ==,"
    "stored_key=WG5d8oPm3OtcPnkdi4Uo7BkeZkBFzpcXkuLmtbsT4qY=,"
    "server_key=wfPLwcE6nTWhTAmQ7tl2KeoiWGPlZqQxSrmfPwDl2dU=,"
    "iterations=4096"
)

SALT = b"0123456789abcdef"


def rfc_credential() -> ScramCredential:
    return from_kafka_string(RFC_KAFKA_STRING)


def table(**users: dict[str, ScramCredential]):
    """lookup(user, mechanism) over {user: {mechanism: credential}}, recording its calls."""
    calls: list[tuple[str, str]] = []

    def lookup(user: str, mechanism: str) -> ScramCredential | None:
        calls.append((user, mechanism))
        return users.get(user, {}).get(mechanism)

    lookup.calls = calls  # type: ignore[attr-defined]
    return lookup


@pytest.fixture(scope="module")
def alice() -> dict[str, ScramCredential]:
    return {mech: from_password(mech, "alice-secret", MIN_ITERATIONS) for mech in ("SCRAM-SHA-256", "SCRAM-SHA-512")}


def run(client: SaslClient, server: SaslServer) -> None:
    """Drive a whole exchange, running the off-loop check where the server asks for one."""
    token: bytes | None = client.first()
    while token is not None:
        step = server.step(token)
        if step.check is not None:
            step.check()
        token = client.step(step.challenge)
        if step.complete:
            assert token is None
            break


# -- credentials ------------------------------------------------------------------------------


def test_rfc_credential_keys_by_hand():
    salted = hashlib.pbkdf2_hmac("sha256", b"pencil", base64.b64decode(RFC_SALT_B64), 4096)
    client_key = hmac.new(salted, b"Client Key", "sha256").digest()
    credential = rfc_credential()
    assert credential.salt == base64.b64decode(RFC_SALT_B64)
    assert credential.stored_key == hashlib.sha256(client_key).digest()
    assert credential.server_key == hmac.new(salted, b"Server Key", "sha256").digest()
    assert credential.iterations == 4096


def test_kafka_written_string_matches_our_derivation_and_round_trips():
    ours = from_password("SCRAM-SHA-256", "pencil", 4096, salt=base64.b64decode(RFC_SALT_B64))
    assert ours == rfc_credential()
    assert to_kafka_string(ours) == RFC_KAFKA_STRING
    reordered = ",".join(reversed(RFC_KAFKA_STRING.split(",")))
    assert from_kafka_string(reordered) == ours


def test_round_trip_with_random_salt(alice):
    for credential in alice.values():
        assert from_kafka_string(to_kafka_string(credential)) == credential
    assert alice["SCRAM-SHA-256"].salt != alice["SCRAM-SHA-512"].salt  # random, per credential
    assert len(alice["SCRAM-SHA-512"].stored_key) == 64


@pytest.mark.parametrize(
    "text",
    [
        "",
        "salt=W22ZaJ0SNY7soEsUEjb6gQ==",
        RFC_KAFKA_STRING + ",extra=1",
        RFC_KAFKA_STRING.replace("iterations=4096", "salt=W22ZaJ0SNY7soEsUEjb6gQ=="),
        RFC_KAFKA_STRING.replace("iterations=4096", "iterations=4k"),
        RFC_KAFKA_STRING.replace("iterations=4096", "iterations=-4096"),
        RFC_KAFKA_STRING.replace("iterations=4096", "iterations=0"),
        RFC_KAFKA_STRING.replace("salt=W22ZaJ0SNY7soEsUEjb6gQ==", "salt=W22ZaJ0SNY7soEsUEjb6gQ"),
        RFC_KAFKA_STRING.replace("salt=W22ZaJ0SNY7soEsUEjb6gQ==", "salt=W22Z*J0SNY7soEsUEjb6gQ=="),
        RFC_KAFKA_STRING.replace("salt=W22ZaJ0SNY7soEsUEjb6gQ==", "salt="),
        RFC_KAFKA_STRING.replace(",stored_key=", ",=x,stored_key="),
        RFC_KAFKA_STRING.replace(",stored_key=", ",stored_key"),
    ],
)
def test_bad_kafka_strings_refused(text):
    with pytest.raises(ValueError):
        from_kafka_string(text)


def test_salted_password_gives_the_same_credential_as_the_password():
    salted = hashlib.pbkdf2_hmac("sha512", b"s3cret", SALT, 8192)
    assert from_salted_password("SCRAM-SHA-512", salted, SALT, 8192) == from_password("SCRAM-SHA-512", "s3cret", 8192, salt=SALT)


@pytest.mark.parametrize("iterations", [MIN_ITERATIONS - 1, MAX_ITERATIONS + 1, 0])
def test_iterations_out_of_bounds_refused(iterations):
    with pytest.raises(ValueError, match="iterations"):
        from_password("SCRAM-SHA-256", "pw", iterations, salt=SALT)
    with pytest.raises(ValueError, match="iterations"):
        from_salted_password("SCRAM-SHA-256", b"x" * 32, SALT, iterations)


def test_bounds_themselves_accepted():
    assert from_salted_password("SCRAM-SHA-256", b"x" * 32, SALT, MIN_ITERATIONS).iterations == MIN_ITERATIONS
    assert from_salted_password("SCRAM-SHA-256", b"x" * 32, SALT, MAX_ITERATIONS).iterations == MAX_ITERATIONS


def test_unknown_mechanism_and_short_salt_refused():
    with pytest.raises(ValueError, match="mechanism"):
        from_password("SCRAM-SHA-1", "pw", 4096)
    with pytest.raises(ValueError, match="mechanism"):
        from_salted_password("PLAIN", b"x" * 32, SALT, 4096)
    with pytest.raises(ValueError, match="salt"):
        from_salted_password("SCRAM-SHA-256", b"x" * 32, b"short", 4096)


def test_password_matches():
    credential = rfc_credential()
    assert password_matches("SCRAM-SHA-256", credential, "pencil")
    assert not password_matches("SCRAM-SHA-256", credential, "pencil ")
    assert not password_matches("SCRAM-SHA-512", credential, "pencil")


def test_credential_repr_hides_keys():
    text = repr(rfc_credential())
    assert "WG5d8" not in text and str(rfc_credential().stored_key) not in text


# -- the server against RFC 7677's exchange -----------------------------------------------------


def rfc_server(lookup=None) -> SaslServer:
    return SaslServer("SCRAM-SHA-256", lookup or table(user={"SCRAM-SHA-256": rfc_credential()}), server_nonce=RFC_SERVER_NONCE)


def test_rfc7677_exchange_step_by_step():
    lookup = table(user={"SCRAM-SHA-256": rfc_credential()})
    server = rfc_server(lookup)
    first = server.step(RFC_CLIENT_FIRST)
    assert first.challenge == RFC_SERVER_FIRST
    assert not first.complete and first.check is None
    assert not server.complete
    with pytest.raises(RuntimeError):
        server.principal
    final = server.step(RFC_CLIENT_FINAL)
    assert final.challenge == RFC_SERVER_FINAL
    assert final.complete and final.check is None
    assert server.complete and server.username == "user" and server.principal == "User:user"
    assert lookup.calls == [("user", "SCRAM-SHA-256")]
    with pytest.raises(IllegalSaslState):
        server.step(RFC_CLIENT_FINAL)


def test_tampered_client_final_nonce_refused():
    server = rfc_server()
    server.step(RFC_CLIENT_FIRST)
    tampered = RFC_CLIENT_FINAL.replace(b"hNlF$k0,", b"hNlF$k1,")
    assert tampered != RFC_CLIENT_FINAL
    with pytest.raises(SaslAuthenticationFailed) as failed:
        server.step(tampered)
    assert failed.value.message == generic_failure_message("SCRAM-SHA-256")
    assert not server.complete
    with pytest.raises(IllegalSaslState):  # no second chance
        server.step(RFC_CLIENT_FINAL)


def test_tampered_proof_refused():
    server = rfc_server()
    server.step(RFC_CLIENT_FIRST)
    proof = base64.b64decode(RFC_CLIENT_FINAL.rpartition(b"p=")[2])
    bad = RFC_CLIENT_FINAL.rpartition(b"p=")[0] + b"p=" + base64.b64encode(bytes([proof[0] ^ 1]) + proof[1:])
    with pytest.raises(SaslAuthenticationFailed, match="invalid credentials with SASL mechanism SCRAM-SHA-256"):
        server.step(bad)


def test_credential_under_the_minimum_iterations_refused():
    weak = ScramCredential(rfc_credential().salt, rfc_credential().stored_key, rfc_credential().server_key, 4095)
    with pytest.raises(SaslAuthenticationFailed):
        rfc_server(table(user={"SCRAM-SHA-256": weak})).step(RFC_CLIENT_FIRST)


@pytest.mark.parametrize(
    "client_first", [b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO,tokenauth=true", b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO,tokenauth=false"]
)
def test_tokenauth_extension_refused(client_first):
    lookup = table(user={"SCRAM-SHA-256": rfc_credential()})
    with pytest.raises(SaslAuthenticationFailed) as failed:
        rfc_server(lookup).step(client_first)
    assert failed.value.message == generic_failure_message("SCRAM-SHA-256")
    assert "tokenauth" in failed.value.reason and "tokenauth" not in failed.value.message
    assert lookup.calls == []  # refused before any credential is looked at


@pytest.mark.parametrize(
    "client_first",
    [
        b"",
        b"n,,",
        b"n,,r=abc",
        b"x,,n=user,r=abc",
        b"p=tls-unique,,n=user,r=abc",  # channel binding: we offer none
        "n,,n=us\u00e9r,r=abc".encode(),  # Kafka's grammar is ASCII
        b"n,,n=user,r=" + b"a" * 9000,
    ],
)
def test_malformed_client_first_refused(client_first):
    with pytest.raises(SaslAuthenticationFailed, match="invalid credentials"):
        rfc_server().step(client_first)


def test_unsupported_mechanism():
    with pytest.raises(UnsupportedMechanism):
        SaslServer("GSSAPI", table())
    assert issubclass(UnsupportedMechanism, ValueError)


# -- our client against our server ----------------------------------------------------------------


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_client_against_server(mechanism, alice):
    server = SaslServer(mechanism, table(alice=alice))
    client = SaslClient(mechanism, "alice", "alice-secret")
    run(client, server)
    assert client.complete
    assert server.complete and server.principal == "User:alice" and server.username == "alice"


def test_plain_uses_the_sha512_credential_when_there_is_one(alice):
    lookup = table(alice=alice)
    step = SaslServer("PLAIN", lookup).step(b"\0alice\0alice-secret")
    assert lookup.calls == [("alice", "SCRAM-SHA-512")]
    assert step.complete and step.check is not None and step.challenge == b""
    only_256 = table(alice={"SCRAM-SHA-256": alice["SCRAM-SHA-256"]})
    server = SaslServer("PLAIN", only_256)
    check = server.step(b"\0alice\0alice-secret").check
    assert check is not None
    assert not server.complete  # not before the check ran
    check()
    assert only_256.calls == [("alice", "SCRAM-SHA-512"), ("alice", "SCRAM-SHA-256")]
    assert server.complete


def test_plain_wrong_password_fails_in_the_check(alice):
    server = SaslServer("PLAIN", table(alice=alice))
    step = server.step(b"\0alice\0wrong")
    assert step.check is not None
    with pytest.raises(SaslAuthenticationFailed) as failed:
        step.check()
    assert failed.value.message == INVALID_USERNAME_OR_PASSWORD
    assert not server.complete
    with pytest.raises(IllegalSaslState):
        step.check()


def test_plain_unknown_user_spends_pbkdf2_and_fails_like_a_wrong_password(alice, monkeypatch):
    spent: list[tuple[str, int]] = []
    real = sasl_server.password_matches

    def spy(mechanism: str, credential: ScramCredential, password: str) -> bool:
        spent.append((mechanism, credential.iterations))
        return real(mechanism, credential, password)

    monkeypatch.setattr(sasl_server, "password_matches", spy)
    messages = []
    for user, password in (("alice", "wrong"), ("mallory", "alice-secret")):
        step = SaslServer("PLAIN", table(alice=alice), dummy_iterations=MIN_ITERATIONS).step(
            b"\0" + user.encode() + b"\0" + password.encode()
        )
        assert step.check is not None
        with pytest.raises(SaslAuthenticationFailed) as failed:
            step.check()
        messages.append(failed.value.message)
        assert "mallory" not in failed.value.message
    assert messages == [INVALID_USERNAME_OR_PASSWORD, INVALID_USERNAME_OR_PASSWORD]
    assert spent == [("SCRAM-SHA-512", MIN_ITERATIONS), ("SCRAM-SHA-512", MIN_ITERATIONS)]


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_wrong_password_and_unknown_user_fail_alike(mechanism, alice):
    wrong = SaslClient(mechanism, "alice", "wrong")
    server = SaslServer(mechanism, table(alice=alice))
    challenge = server.step(wrong.first()).challenge
    final = wrong.step(challenge)
    assert final is not None
    with pytest.raises(SaslAuthenticationFailed) as bad_password:
        server.step(final)
    assert not server.complete

    with pytest.raises(SaslAuthenticationFailed) as unknown:
        SaslServer(mechanism, table(alice=alice)).step(SaslClient(mechanism, "mallory", "x").first())
    assert bad_password.value.message == unknown.value.message == generic_failure_message(mechanism)


def test_scram_user_without_a_credential_for_that_mechanism_fails(alice):
    server = SaslServer("SCRAM-SHA-512", table(alice={"SCRAM-SHA-256": alice["SCRAM-SHA-256"]}))
    with pytest.raises(SaslAuthenticationFailed):
        server.step(SaslClient("SCRAM-SHA-512", "alice", "alice-secret").first())


def test_plain_authzid_equal_accepted_different_refused(alice):
    server = SaslServer("PLAIN", table(alice=alice))
    check = server.step(b"alice\0alice\0alice-secret").check
    assert check is not None
    check()
    assert server.principal == "User:alice"

    server = SaslServer("PLAIN", table(alice=alice))
    check = server.step(b"admin\0alice\0alice-secret").check
    assert check is not None
    with pytest.raises(SaslAuthenticationFailed) as failed:
        check()
    assert failed.value.message == AUTHZID_MISMATCH
    assert not server.complete


@pytest.mark.parametrize(
    "token",
    [b"", b"alice\0alice-secret", b"\0\0alice-secret", b"\0alice\0", b"\0alice\0alice-secret\0", b"\0al\xffice\0alice-secret"],
)
def test_malformed_plain_token_refused(token, alice):
    lookup = table(alice=alice)
    server = SaslServer("PLAIN", lookup)
    with pytest.raises(SaslAuthenticationFailed) as failed:
        server.step(token)
    assert failed.value.message == generic_failure_message("PLAIN")
    assert lookup.calls == []
    with pytest.raises(IllegalSaslState):
        server.step(b"\0alice\0alice-secret")


def test_reauthentication_message():
    with pytest.raises(SaslAuthenticationFailed, match="during re-authentication"):
        SaslServer("PLAIN", table(), reauthentication=True).step(b"garbage")


def test_lookup_failure_is_an_authentication_failure():
    def broken(user: str, mechanism: str) -> ScramCredential | None:
        raise OSError("store unavailable")

    with pytest.raises(SaslAuthenticationFailed) as failed:
        SaslServer("SCRAM-SHA-256", broken).step(b"n,,n=user,r=abc")
    assert "store unavailable" not in failed.value.message and "store unavailable" in failed.value.reason
    with pytest.raises(SaslAuthenticationFailed) as failed:
        SaslServer("PLAIN", broken).step(b"\0user\0pw")
    assert "store unavailable" not in failed.value.message


# -- the client's own checks ------------------------------------------------------------------------


def test_client_refuses_a_bad_server_signature(alice):
    client = SaslClient("SCRAM-SHA-256", "alice", "alice-secret")
    server = SaslServer("SCRAM-SHA-256", table(alice=alice))
    final = client.step(server.step(client.first()).challenge)
    assert final is not None
    signature = base64.b64decode(server.step(final).challenge[2:])
    forged = b"v=" + base64.b64encode(bytes([signature[0] ^ 1]) + signature[1:])
    with pytest.raises(SaslClientError):
        client.step(forged)
    assert not client.complete
    with pytest.raises(SaslClientError):  # over, even with the right signature now
        client.step(b"v=" + base64.b64encode(signature))


def test_client_refuses_too_many_iterations():
    client = SaslClient("SCRAM-SHA-256", "alice", "pw")
    nonce = client.first().decode().rpartition("r=")[2]
    with pytest.raises(SaslClientError, match="iterations"):
        client.step(f"r={nonce}xyz,s={RFC_SALT_B64},i={MAX_ITERATIONS + 1}".encode())


def test_client_refuses_a_server_nonce_not_extending_its_own():
    client = SaslClient("SCRAM-SHA-256", "alice", "pw")
    client.first()
    with pytest.raises(SaslClientError):
        client.step(f"r=someoneelses,s={RFC_SALT_B64},i=4096".encode())


def test_plain_client_token():
    client = SaslClient("PLAIN", "admin", "admin-secret")
    assert client.first() == b"\0admin\0admin-secret"
    assert client.step(b"") is None and client.complete


# -- JAAS -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "line, expected",
    [
        (
            'org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret";',
            ("admin", "admin-secret"),
        ),
        ('org.apache.kafka.common.security.scram.ScramLoginModule required username="x" password="y";', ("x", "y")),
        (
            'org.apache.kafka.common.security.scram.ScramLoginModule REQUIRED\n  username="a b"\n  password="q\\"uo\\\\te" ;',
            ("a b", 'q"uo\\te'),
        ),
        (
            "org.apache.kafka.common.security.plain.PlainLoginModule optional username='admin' password=admin-secret;",
            ("admin", "admin-secret"),
        ),
        (
            'org.apache.kafka.common.security.scram.ScramLoginModule required username="x" password="p=;,w" tokenauth="false";',
            ("x", "p=;,w"),
        ),
    ],
)
def test_parse_jaas_config(line, expected):
    assert parse_jaas_config(line) == expected


@pytest.mark.parametrize(
    "line",
    [
        "",
        'org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret"',  # no ;
        'org.apache.kafka.common.security.plain.PlainLoginModule required username="admin";',  # no password
        'org.apache.kafka.common.security.plain.PlainLoginModule username="admin" password="p";',  # no flag
        'org.apache.kafka.common.security.plain.PlainLoginModule mandatory username="admin" password="p";',
        'com.example.OtherLoginModule required username="admin" password="p";',
        'org.apache.kafka.common.security.plain.PlainLoginModule required username="admin password="p";',
        'org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password=;',
        'org.apache.kafka.common.security.plain.PlainLoginModule required username "admin" password="p";',
        'org.apache.kafka.common.security.plain.PlainLoginModule required username="a" password="p"; '
        'org.apache.kafka.common.security.plain.PlainLoginModule required username="b" password="q";',
        'org.apache.kafka.common.security.scram.ScramLoginModule required username="t" password="h" tokenauth="true";',
        'org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="unterminated;',
    ],
)
def test_parse_jaas_config_refuses(line):
    with pytest.raises(ValueError):
        parse_jaas_config(line)


def test_parse_jaas_config_checks_the_mechanism():
    scram = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="x" password="y";'
    assert parse_jaas_config(scram, "SCRAM-SHA-512") == ("x", "y")
    with pytest.raises(ValueError):
        parse_jaas_config(scram, "PLAIN")
    with pytest.raises(ValueError):
        parse_jaas_config(scram, "GSSAPI")


def _legacy_client_final(mechanism: str, user: str, password: str, server: "SaslServer", client_nonce: str,
                         repeat: str) -> tuple[bytes, bytes]:
    """librdkafka < 2.6.1's exchange: its client-final repeats ``repeat`` before the whole nonce
    and signs that message as sent. (client-final token, the server signature it expects)."""
    import base64
    import hashlib
    import hmac as hmac_module

    digest = {"SCRAM-SHA-256": hashlib.sha256, "SCRAM-SHA-512": hashlib.sha512}[mechanism]
    bare = f"n={user},r={client_nonce}"
    server_first = server.step(f"n,,{bare}".encode()).challenge.decode()
    fields = dict(part.split("=", 1) for part in server_first.split(","))
    salted = hashlib.pbkdf2_hmac(digest().name, password.encode(), base64.b64decode(fields["s"]), int(fields["i"]))
    client_key = hmac_module.new(salted, b"Client Key", digest).digest()
    stored_key = digest(client_key).digest()
    without_proof = f"c=biws,r={repeat}{fields['r']}"
    auth_message = f"{bare},{server_first},{without_proof}".encode()
    proof = bytes(a ^ b for a, b in zip(client_key, hmac_module.new(stored_key, auth_message, digest).digest()))
    server_key = hmac_module.new(salted, b"Server Key", digest).digest()
    expected = b"v=" + base64.b64encode(hmac_module.new(server_key, auth_message, digest).digest())
    return f"{without_proof},p={base64.b64encode(proof).decode()}".encode(), expected


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_librdkafka_before_2_6_1_repeating_its_nonce_is_accepted_and_nothing_else(mechanism: str) -> None:
    """Debian's kcat (librdkafka 2.0.2) sends r=<client nonce><client nonce><server nonce>
    (confluentinc/librdkafka#4895), as Kafka 3.8.1-3.9 accept; any other nonce still fails."""
    from broker.security.sasl_server import SaslAuthenticationFailed, SaslServer
    from broker.security.scram_credentials import from_password

    credential = from_password(mechanism, "pencil", 4096)
    lookup = lambda user, m: credential if (user, m) == ("user", mechanism) else None  # noqa: E731
    server = SaslServer(mechanism, lookup)
    token, expected = _legacy_client_final(mechanism, "user", "pencil", server, "fyko+d2lbbFgONRv9qkxdawL", "fyko+d2lbbFgONRv9qkxdawL")
    step = server.step(token)
    assert step.complete and step.challenge == expected and server.principal == "User:user"

    other = SaslServer(mechanism, lookup)
    forged, _ = _legacy_client_final(mechanism, "user", "pencil", other, "fyko+d2lbbFgONRv9qkxdawL", "somethingelse")
    with pytest.raises(SaslAuthenticationFailed):
        other.step(forged)
    wrong = SaslServer(mechanism, lookup)
    bad_password, _ = _legacy_client_final(mechanism, "user", "not-pencil", wrong, "abcdefgh", "abcdefgh")
    with pytest.raises(SaslAuthenticationFailed):
        wrong.step(bad_password)
