"""Delegation tokens on a real broker (two workers, ACLs on): the four APIs over raw frames
with Kafka's codes, SCRAM token authentication (the owner's ACLs apply, a token cannot ask for
tokens, an expired token stops authenticating), tokens surviving a restart; and Kafka 4.4's
kafka-delegation-tokens.sh with its console producer, consumer and kafka-topics.sh
authenticating with the token it made.

Users (SCRAM credentials written offline, as an operator would): admin (a super user),
alice, bob and carol, none with any ACL; ``allow.everyone.if.no.acl.found`` is off, so what a
principal may do is what its ACLs say. Raw clients log in with PLAIN; tokens with SCRAM.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import re
import socket
import ssl
import struct
import subprocess
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from broker.protocol import codec
from broker.protocol.build import build
from broker.security.scram_credentials import MECHANISMS, salted_password
from tests.integration.conftest import Broker, castle_command, stop_all, wait_until
from tests.integration.kio_client import decode_response, encode_request, read_frame

pytestmark = [pytest.mark.integration, pytest.mark.security, pytest.mark.timeout(300)]

HOST = "127.0.0.1"
SECRET = "castle-token-secret"
PASSWORD = "pw-Secret-1"
USERS = ("admin", "alice", "bob", "carol")
EXPIRY_TIME_MS = 3_600_000      # delegation.token.expiry.time.ms, for the test
MAX_LIFETIME_MS = 86_400_000    # delegation.token.max.lifetime.ms, for the test

# Kafka's error codes
TOPIC_AUTHORIZATION_FAILED = 29
SASL_AUTHENTICATION_FAILED = 58
TOKEN_AUTH_DISABLED, TOKEN_NOT_FOUND, OWNER_MISMATCH, REQUEST_NOT_ALLOWED, TOKEN_AUTHORIZATION_FAILED = 61, 62, 63, 64, 65
TOKEN_EXPIRED, INVALID_PRINCIPAL_TYPE = 66, 67
# Kafka's ACL codes
USER_RESOURCE, TOKEN_RESOURCE, LITERAL, ALLOW = 7, 6, 3, 3
DESCRIBE, CREATE_TOKENS, DESCRIBE_TOKENS = 8, 13, 14


class Raw:
    """One raw connection: kio-encoded requests, kio-decoded answers."""

    def __init__(self, port: int, context: ssl.SSLContext | None = None) -> None:
        sock = socket.create_connection((HOST, port), timeout=10.0)
        self.sock = context.wrap_socket(sock, server_hostname=HOST) if context is not None else sock
        self._next = 0

    def call(self, api_key: int, version: int, data: dict[str, Any]) -> Any:
        self._next += 1
        entity = codec.request_class(api_key, version)
        assert entity is not None
        self.sock.sendall(encode_request(api_key, version, self._next, build(entity, data)))
        got, answer = decode_response(api_key, version, read_frame(self.sock))
        assert got == self._next
        return answer

    def code(self, api_key: int, version: int, data: dict[str, Any]) -> int:
        """The error code an answer of the token APIs starts with. Read from the frame: kio's
        decoder refuses the -1 timestamps Kafka answers along with an error."""
        self._next += 1
        entity = codec.request_class(api_key, version)
        assert entity is not None
        self.sock.sendall(encode_request(api_key, version, self._next, build(entity, data)))
        frame = read_frame(self.sock)
        assert struct.unpack_from(">i", frame, 0)[0] == self._next
        flexible = version >= 2  # all four APIs
        return int(struct.unpack_from(">h", frame, 5 if flexible else 4)[0])

    def plain(self, user: str, password: str = PASSWORD) -> None:
        answer = self.try_plain(user, password)
        assert answer.error_code == 0, answer

    def try_plain(self, user: str, password: str = PASSWORD) -> Any:
        assert self.call(17, 1, {"mechanism": "PLAIN"}).error_code == 0
        return self.call(36, 2, {"auth_bytes": f"\0{user}\0{password}".encode()})

    def scram_token(self, token_id: str, hmac_bytes: bytes, mechanism: str = "SCRAM-SHA-256") -> Any:
        """SCRAM with Kafka's tokenauth extension (as ScramSaslClient sends it); the final
        SaslAuthenticate answer (or the first one, when that failed)."""
        assert self.call(17, 1, {"mechanism": mechanism}).error_code == 0
        hf = MECHANISMS[mechanism]
        first_bare = f"n={token_id},r=c1i3nt+n0nce,tokenauth=true"
        first = self.call(36, 2, {"auth_bytes": f"n,,{first_bare}".encode()})
        if first.error_code != 0:
            return first
        server_first = bytes(first.auth_bytes).decode()
        fields = dict(part.split("=", 1) for part in server_first.split(","))
        salted = salted_password(mechanism, base64.b64encode(hmac_bytes).decode(), base64.b64decode(fields["s"]),
                                 int(fields["i"]))
        client_key = hmac.new(salted, b"Client Key", hf).digest()
        without_proof = f"c=biws,r={fields['r']}"
        signature = hmac.new(hf(client_key).digest(), f"{first_bare},{server_first},{without_proof}".encode(), hf).digest()
        proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, signature))).decode()
        return self.call(36, 2, {"auth_bytes": f"{without_proof},p={proof}".encode()})

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> "Raw":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    base = str(tmp_path_factory.mktemp("tokens"))
    b = Broker(base, 2, {})
    sasl_port = _other_port(b)
    listeners = f"PLAINTEXT://{HOST}:{b.port},SASL_PLAINTEXT://{HOST}:{sasl_port}"
    config = {"listeners": listeners, "delegation.token.secret.key": SECRET,
              "delegation.token.expiry.time.ms": EXPIRY_TIME_MS, "delegation.token.max.lifetime.ms": MAX_LIFETIME_MS,
              "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
              "super.users": "User:admin", "num.partitions": 2, "offsets.topic.num.partitions": 2,
              "group.initial.rebalance.delay.ms": 0}
    b.config_file = os.path.join(base, "server.properties")
    Path(b.config_file).write_text("".join(f"{k}={v}\n" for k, v in config.items()))
    b.overrides["listeners"] = listeners
    b.sasl_port = sasl_port  # type: ignore[attr-defined]
    try:
        for user in USERS:
            done = subprocess.run(castle_command() + ["users", "set", user, "--broker-config", b.config_file,
                                                      "--override", f"log.dirs={b.log_dir}", "--password-stdin"],
                                  input=PASSWORD + "\n", capture_output=True, text=True, timeout=60)
            assert done.returncode == 0, done.stderr
        b.start()
        yield b
    finally:
        assert not stop_all([b])


def _other_port(b: Broker) -> int:
    from tests.integration.conftest import free_port

    while True:
        port = free_port()
        if port not in (b.port, b.metrics_port):
            return port


def sasl(broker: Broker, user: str) -> Raw:
    raw = Raw(broker.sasl_port)  # type: ignore[attr-defined]
    raw.plain(user)
    return raw


def create_data(renewers: tuple[str, ...] = (), max_lifetime: int = -1, owner: str | None = None,
                version: int = 3) -> dict[str, Any]:
    data: dict[str, Any] = {"renewers": [{"principal_type": r.split(":")[0], "principal_name": r.split(":", 1)[1]}
                                         for r in renewers], "max_lifetime": max_lifetime}
    if version >= 3:
        data["owner_principal_type"] = "User" if owner else None
        data["owner_principal_name"] = owner
    return data


def create(raw: Raw, renewers: tuple[str, ...] = (), max_lifetime: int = -1, owner: str | None = None,
           version: int = 3) -> Any:
    return raw.call(38, version, create_data(renewers, max_lifetime, owner, version))


def create_code(raw: Raw, **kwargs: Any) -> int:
    return raw.code(38, 3, create_data(**kwargs))


def describe_data(owners: list[str] | None) -> dict[str, Any]:
    return {"owners": None if owners is None else [{"principal_type": "User", "principal_name": o} for o in owners]}


def describe(raw: Raw, owners: list[str] | None = None, version: int = 3) -> Any:
    return raw.call(41, version, describe_data(owners))


def ms(instant: Any) -> int:
    return int(instant.timestamp() * 1000)


def add_acl(broker: Broker, resource_type: int, name: str, principal: str, operation: int) -> None:
    with sasl(broker, "admin") as raw:
        answer = raw.call(30, 3, {"creations": [{
            "resource_type": resource_type, "resource_name": name, "resource_pattern_type": LITERAL,
            "principal": principal, "host": "*", "operation": operation, "permission_type": ALLOW}]})
        assert answer.results[0].error_code == 0, answer


def token_ids(answer: Any) -> set[str]:
    assert answer.error_code == 0, answer
    return {t.token_id for t in answer.tokens}


# ---------------------------------------------------------------------- raw protocol
def test_token_requests_are_refused_on_plaintext(broker: Broker) -> None:
    with Raw(broker.port) as raw:
        assert create_code(raw) == REQUEST_NOT_ALLOWED
        assert raw.code(39, 2, {"hmac": b"x", "renew_period": 1000}) == REQUEST_NOT_ALLOWED
        assert raw.code(40, 2, {"hmac": b"x", "expiry_time_period": -1}) == REQUEST_NOT_ALLOWED
        assert raw.code(41, 2, describe_data(None)) == REQUEST_NOT_ALLOWED


def test_create_renew_expire_describe_with_kafkas_rules(broker: Broker) -> None:
    with sasl(broker, "alice") as alice, sasl(broker, "bob") as bob, sasl(broker, "carol") as carol:
        created = create(alice, renewers=("User:bob",), max_lifetime=10 * EXPIRY_TIME_MS)
        assert created.error_code == 0, created
        assert (created.principal_type, created.principal_name) == ("User", "alice")
        assert (created.token_requester_principal_type, created.token_requester_principal_name) == ("User", "alice")
        issue = ms(created.issue_timestamp)
        assert ms(created.max_timestamp) == issue + 10 * EXPIRY_TIME_MS
        assert ms(created.expiry_timestamp) == issue + EXPIRY_TIME_MS
        assert bytes(created.hmac) == hmac.new(SECRET.encode(), created.token_id.encode(), hashlib.sha512).digest()
        # The request's max lifetime is capped by the broker's; -1 takes the broker's.
        capped = create(alice, max_lifetime=10 * MAX_LIFETIME_MS)
        assert ms(capped.max_timestamp) - ms(capped.issue_timestamp) == MAX_LIFETIME_MS

        # Describe: the owner and a renewer see it; carol (neither, no ACL) does not.
        assert created.token_id in token_ids(describe(alice))
        described = [t for t in describe(bob).tokens if t.token_id == created.token_id]
        assert [(r.principal_type, r.principal_name) for r in described[0].renewers] == [("User", "bob")]
        assert bytes(described[0].hmac) == bytes(created.hmac)
        assert created.token_id not in token_ids(describe(carol))
        assert token_ids(describe(alice, owners=[])) == set()
        assert created.token_id in token_ids(describe(bob, owners=["alice"]))
        assert created.token_id not in token_ids(describe(alice, owners=["carol"]))
        # v1 (no requester fields) still answers.
        assert created.token_id in token_ids(describe(alice, version=1))

        renew = {"hmac": bytes(created.hmac), "renew_period": 60_000}
        renewed = bob.call(39, 2, renew)
        assert renewed.error_code == 0
        assert abs(ms(renewed.expiry_timestamp) - (int(time.time() * 1000) + 60_000)) < 10_000
        assert carol.code(39, 2, renew) == OWNER_MISMATCH
        assert carol.code(40, 2, {"hmac": bytes(created.hmac), "expiry_time_period": -1}) == OWNER_MISMATCH
        assert alice.code(39, 2, {"hmac": b"no such token", "renew_period": 1}) == TOKEN_NOT_FOUND
        assert alice.code(40, 1, {"hmac": b"no such token", "expiry_time_period": -1}) == TOKEN_NOT_FOUND
        # A negative renew period takes the default expiry time, capped by the max.
        renewed = alice.call(39, 1, {"hmac": bytes(created.hmac), "renew_period": -5})
        assert abs(ms(renewed.expiry_timestamp) - (int(time.time() * 1000) + EXPIRY_TIME_MS)) < 10_000
        # Expire with a period moves the expiry; once past it, renew is refused as expired.
        expired = alice.call(40, 2, {"hmac": bytes(created.hmac), "expiry_time_period": 0})
        assert expired.error_code == 0
        time.sleep(0.05)
        assert alice.code(39, 2, renew) == TOKEN_EXPIRED
        # Expire with a negative period deletes it at once, whatever its state.
        gone = alice.call(40, 2, {"hmac": bytes(created.hmac), "expiry_time_period": -1})
        assert gone.error_code == 0 and abs(ms(gone.expiry_timestamp) - int(time.time() * 1000)) < 10_000
        assert created.token_id not in token_ids(describe(alice))
        assert alice.code(39, 2, renew) == TOKEN_NOT_FOUND


def test_renewers_must_be_users_and_other_owners_need_create_tokens(broker: Broker) -> None:
    with sasl(broker, "alice") as alice, sasl(broker, "admin") as admin:
        assert create_code(alice, renewers=("Group:ops",)) == INVALID_PRINCIPAL_TYPE
        assert create_code(alice, owner="carol") == TOKEN_AUTHORIZATION_FAILED
        for_carol = create(admin, owner="carol")  # a super user may
        assert for_carol.error_code == 0
        assert (for_carol.principal_name, for_carol.token_requester_principal_name) == ("carol", "admin")
        assert for_carol.token_id not in token_ids(describe(alice))
        # ACLs reach every worker through the ACL store's watch: each grant is awaited.
        add_acl(broker, USER_RESOURCE, "User:carol", "User:alice", CREATE_TOKENS)
        wait_until(lambda: create_code(alice, owner="carol") == 0, 10, "CREATE_TOKENS on User:carol to apply")
        # Describe grants: DESCRIBE on the token, or DESCRIBE_TOKENS on its owner.
        with sasl(broker, "bob") as bob:
            assert for_carol.token_id not in token_ids(describe(bob))
            add_acl(broker, TOKEN_RESOURCE, for_carol.token_id, "User:bob", DESCRIBE)
            wait_until(lambda: for_carol.token_id in token_ids(describe(bob)), 10, "DESCRIBE on the token to apply")
        add_acl(broker, USER_RESOURCE, "User:carol", "User:alice", DESCRIBE_TOKENS)
        wait_until(lambda: for_carol.token_id in token_ids(describe(alice)), 10, "DESCRIBE_TOKENS to apply")


def test_a_token_authenticates_as_its_owner_on_every_worker_and_stops_once_expired(broker: Broker) -> None:
    with sasl(broker, "admin") as admin, sasl(broker, "alice") as alice:
        admins = create(admin)
        alices = create(alice)
    # Every worker hears of a new token within the store's notice time; connections land on both.
    def all_authenticate() -> bool:
        for _ in range(6):
            with Raw(broker.sasl_port) as raw:  # type: ignore[attr-defined]
                if raw.scram_token(admins.token_id, bytes(admins.hmac)).error_code != 0:
                    return False
        return True

    wait_until(all_authenticate, 10, "every worker to accept the new token")
    topic = f"tok-{os.urandom(3).hex()}"
    create_topic = {"topics": [{"name": topic, "num_partitions": 1, "replication_factor": 1, "assignments": [],
                                "configs": []}], "timeout": 10_000, "validate_only": False}
    for mechanism in sorted(MECHANISMS):
        with Raw(broker.sasl_port) as raw:  # type: ignore[attr-defined]
            assert raw.scram_token(alices.token_id, bytes(alices.hmac), mechanism).error_code == 0
            # alice's ACLs apply: she may not create topics.
            assert raw.call(19, 7, create_topic).topics[0].error_code != 0
            # A token-authenticated connection may not ask for tokens.
            assert create_code(raw) == REQUEST_NOT_ALLOWED
            assert raw.code(41, 3, describe_data(None)) == REQUEST_NOT_ALLOWED
    with Raw(broker.sasl_port) as raw:  # type: ignore[attr-defined]
        assert raw.scram_token(admins.token_id, bytes(admins.hmac)).error_code == 0
        assert raw.call(19, 7, create_topic).topics[0].error_code == 0  # admin's token: admin's rights
    with Raw(broker.sasl_port) as raw:  # type: ignore[attr-defined]
        wrong = raw.scram_token(admins.token_id, bytes(alices.hmac))
        assert wrong.error_code == SASL_AUTHENTICATION_FAILED

    with sasl(broker, "admin") as admin:
        assert admin.call(40, 2, {"hmac": bytes(admins.hmac), "expiry_time_period": -1}).error_code == 0

    def refused() -> bool:
        for _ in range(6):
            with Raw(broker.sasl_port) as raw:  # type: ignore[attr-defined]
                if raw.scram_token(admins.token_id, bytes(admins.hmac)).error_code != SASL_AUTHENTICATION_FAILED:
                    return False
        return True

    wait_until(refused, 10, "every worker to refuse the expired token")


def test_tokens_survive_a_restart_and_expired_ones_are_deleted(broker: Broker) -> None:
    with sasl(broker, "alice") as alice:
        created = create(alice)
    broker.stop()
    # From now on expired tokens are looked for every half second.
    broker.overrides["delegation.token.expiry.check.interval.ms"] = "500"
    broker.start()
    with sasl(broker, "alice") as alice:
        assert created.token_id in token_ids(describe(alice))
    with Raw(broker.sasl_port) as raw:  # type: ignore[attr-defined]
        assert raw.scram_token(created.token_id, bytes(created.hmac)).error_code == 0
    with sasl(broker, "alice") as alice:
        assert alice.call(40, 2, {"hmac": bytes(created.hmac), "expiry_time_period": 0}).error_code == 0
        wait_until(lambda: created.token_id not in token_ids(describe(alice)), 10, "the expired token to be deleted")


def test_without_a_secret_key_tokens_are_disabled(broker_factory: Callable[..., Broker]) -> None:
    plain = broker_factory(workers=1, start=False)
    port = _other_port(plain)
    plain.overrides["listeners"] = f"PLAINTEXT://{plain.bootstrap},SASL_PLAINTEXT://{HOST}:{port}"
    plain.start()
    salt = os.urandom(16)
    with Raw(plain.port) as raw:  # no authorizer: anyone may set a credential
        made = raw.call(51, 0, {"deletions": [], "upsertions": [{
            "name": "dora", "mechanism": 2, "iterations": 4096, "salt": salt,
            "salted_password": salted_password("SCRAM-SHA-512", PASSWORD, salt, 4096)}]})
        assert made.results[0].error_code == 0, made

    def logs_in() -> bool:
        with Raw(port) as raw:
            return bool(raw.try_plain("dora").error_code == 0)

    wait_until(logs_in, 10, "dora's credential to reach the worker")
    with Raw(port) as raw:
        raw.plain("dora")
        assert create_code(raw) == TOKEN_AUTH_DISABLED
        assert raw.code(39, 2, {"hmac": b"x", "renew_period": 1}) == TOKEN_AUTH_DISABLED
        assert raw.code(40, 2, {"hmac": b"x", "expiry_time_period": -1}) == TOKEN_AUTH_DISABLED
        assert raw.code(41, 3, describe_data(None)) == TOKEN_AUTH_DISABLED
    with Raw(port) as raw:  # and SCRAM refuses tokenauth
        assert raw.scram_token("any-token-id", b"any-hmac").error_code == SASL_AUTHENTICATION_FAILED


def test_over_ssl_only_a_client_certificate_may_ask_for_tokens(broker_factory: Callable[..., Broker],
                                                               tmp_path: Path) -> None:
    """Kafka refuses one-way SSL (the ANONYMOUS principal); a certificate's principal may."""
    from tests.certs import make_pki

    pki = make_pki(str(tmp_path / "pki"))
    client = pki.add_client("tokens", "CN=tokens,O=Castle")
    tls = broker_factory(workers=1, start=False, overrides={
        "delegation.token.secret.key": SECRET, "ssl.keystore.location": pki.server_keystore,
        "ssl.truststore.location": pki.ca, "listener.name.ssl.ssl.client.auth": "requested"})
    port = _other_port(tls)
    tls.overrides["listeners"] = f"PLAINTEXT://{tls.bootstrap},SSL://{HOST}:{port}"
    tls.start()
    anonymous = ssl.create_default_context(cafile=pki.ca)
    with Raw(port, anonymous) as raw:
        assert create_code(raw) == REQUEST_NOT_ALLOWED
    certified = ssl.create_default_context(cafile=pki.ca)
    certified.load_cert_chain(client.crt, client.key)
    with Raw(port, certified) as raw:
        created = create(raw)
        assert created.error_code == 0, created
        assert (created.principal_type, created.principal_name) == ("User", "CN=tokens,O=Castle")
        assert created.token_id in token_ids(describe(raw))


def test_describe_configs_never_shows_the_secret(broker: Broker) -> None:
    with sasl(broker, "admin") as admin:
        answer = admin.call(32, 4, {"resources": [{"resource_type": 4, "resource_name": "0", "configuration_keys": [
            "delegation.token.secret.key", "delegation.token.max.lifetime.ms"]}], "include_synonyms": True,
            "include_documentation": False})
    entries = {c.name: c for c in answer.results[0].configs}
    secret = entries["delegation.token.secret.key"]
    assert secret.is_sensitive and secret.value is None
    assert secret.synonyms and all(s.value is None for s in secret.synonyms)
    lifetime = entries["delegation.token.max.lifetime.ms"]
    assert not lifetime.is_sensitive and lifetime.value == str(MAX_LIFETIME_MS)


# ---------------------------------------------------------------------- Kafka 4.4's tools
TOKENS_COMMAND = "org.apache.kafka.tools.DelegationTokenCommand"  # kafka-delegation-tokens.sh
PRODUCER = "org.apache.kafka.tools.ConsoleProducer"
CONSUMER = "org.apache.kafka.tools.consumer.ConsoleConsumer"
TOPIC_COMMAND = "org.apache.kafka.tools.TopicCommand"
TOOLS_VERSION = "4.4.0"


def _properties(path: Path, username: str, password: str, token: bool, mechanism: str = "SCRAM-SHA-512") -> str:
    extension = ' tokenauth="true"' if token else ""
    path.write_text("security.protocol=SASL_PLAINTEXT\n"
                    f"sasl.mechanism={mechanism}\n"
                    "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
                    f'username="{username}" password="{password}"{extension};\n')
    return str(path)


@pytest.mark.kafka_cli
def test_kafka_delegation_tokens_sh_and_clients_that_authenticate_with_the_token(broker: Broker,
                                                                                 tmp_path: Path) -> None:
    from tests.kafka_cli import missing_tools, run_tool

    missing = missing_tools(TOOLS_VERSION)
    if missing:
        pytest.fail(f"Kafka's CLI needs {', '.join(missing)} on PATH")
    bootstrap = f"{HOST}:{broker.sasl_port}"  # type: ignore[attr-defined]
    admin_config = _properties(tmp_path / "admin.properties", "admin", PASSWORD, token=False)

    def tool(main: str, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        if stdin is None:
            return run_tool(main, ["--bootstrap-server", bootstrap, *args], version=TOOLS_VERSION)
        from tests.kafka_cli import ensure_jars

        lib = ensure_jars(TOOLS_VERSION)
        return subprocess.run(["java", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp", f"{lib}/*", main,
                               "--bootstrap-server", bootstrap, *args], input=stdin, capture_output=True, text=True,
                              timeout=120)

    def ok(main: str, *args: str, stdin: str | None = None) -> str:
        done = tool(main, *args, stdin=stdin)
        assert done.returncode == 0, f"{main} {' '.join(args)}: {done.returncode}\n{done.stdout}\n{done.stderr}"
        return done.stdout

    out = ok(TOKENS_COMMAND, "--command-config", admin_config, "--create", "--max-life-time-period", "-1",
             "--renewer-principal", "User:bob")
    # "TOKENID  HMAC  OWNER  REQUESTER  RENEWERS  ISSUEDATE  EXPIRYDATE  MAXDATE", then the token's row.
    row = [line.split() for line in out.splitlines() if "User:admin" in line]
    assert row, out
    token_id, token_hmac = row[0][0], row[0][1]
    assert base64.b64decode(token_hmac) == hmac.new(SECRET.encode(), token_id.encode(), hashlib.sha512).digest()

    out = ok(TOKENS_COMMAND, "--command-config", admin_config, "--describe", "--owner-principal", "User:admin")
    assert token_id in out and "User:bob" in out, out
    # Without --owner-principal the tool sends an empty owner list, which Kafka answers with no token.
    out = ok(TOKENS_COMMAND, "--command-config", admin_config, "--describe")
    assert "Total number of tokens : 0" in out and token_id not in out, out
    out = ok(TOKENS_COMMAND, "--command-config", admin_config, "--renew", "--hmac", token_hmac,
             "--renew-time-period", "600000")
    assert "Completed renew operation" in out, out

    # The token authenticates Kafka's own clients: a producer, a consumer, an AdminClient.
    token_config = _properties(tmp_path / "token.properties", token_id, token_hmac, token=True)
    topic = f"tokens-{os.urandom(3).hex()}"
    ok(TOPIC_COMMAND, "--command-config", token_config, "--create", "--topic", topic, "--partitions", "1")
    lines = [f"record-{i}" for i in range(20)]
    ok(PRODUCER, "--topic", topic, "--command-config", token_config, stdin="\n".join(lines) + "\n")
    out = ok(CONSUMER, "--topic", topic, "--from-beginning", "--max-messages", str(len(lines)),
             "--command-config", token_config, "--timeout-ms", "30000")
    assert out.split() == lines, out
    assert topic in ok(TOPIC_COMMAND, "--command-config", token_config, "--list")

    out = ok(TOKENS_COMMAND, "--command-config", admin_config, "--expire", "--hmac", token_hmac,
             "--expiry-time-period", "-1")
    assert "Completed expire operation" in out, out

    # Expired: the token no longer authenticates (every worker, within the notice time).
    def refused() -> bool:
        done = tool(TOPIC_COMMAND, "--command-config", token_config, "--list")
        return done.returncode != 0 and re.search(r"SaslAuthenticationException|Authentication failed",
                                                  done.stdout + done.stderr) is not None

    wait_until(refused, 60, "the expired token to stop authenticating", interval=1.0)
