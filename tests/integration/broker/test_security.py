"""TLS and SASL listeners from the outside: every client over every security protocol,
the failures that must fail cleanly, the pre-authentication limits, re-authentication
(KIP-368), and SCRAM credentials managed online and offline.

One module-scoped broker (two workers, so partitions of the other worker are reached
over the rings) listens on PLAINTEXT, SSL (``ssl.client.auth=requested`` for that
listener only), SASL_PLAINTEXT and SASL_SSL; its first user is written offline with
``castle users set --broker-config`` before it starts, as an operator would. A second,
one-worker broker holds the settings that must differ: ``ssl.client.auth=required`` and
``connections.max.reauth.ms=3000``. Both are stopped by PID by the harness.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import secrets
import shutil
import socket
import ssl
import struct
import subprocess
import time
import urllib.request
from dataclasses import dataclass
from typing import Any, Iterator

import pytest

from broker.protocol import codec
from broker.protocol.build import build
from storage.records import Record, encode_batch, iter_batches
from tests.certs import ClientFiles, Pki, make_pki
from tests.integration.clients import (
    Got,
    Rec,
    aiokafka_consume,
    aiokafka_produce,
    assert_same,
    confluent_produce,
    kafka_python_consume,
    kafka_python_produce,
    make_records,
)
from tests.integration.conftest import Broker, castle_command, free_port, stop_all, wait_until
from tests.integration.kio_client import decode_response, encode_request, read_frame

pytestmark = [pytest.mark.integration, pytest.mark.security, pytest.mark.timeout(120)]

HOST = "127.0.0.1"
PARTITIONS = 4
ALICE, ALICE_PASSWORD = "alice", "alice-Secret-1"
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")  # sasl.enabled.mechanisms' default, in order
DEFAULT_ITERATIONS = 8192  # castle users set's default

# Kafka's error codes
UNSUPPORTED_SASL_MECHANISM = 33
ILLEGAL_SASL_STATE = 34
SASL_AUTHENTICATION_FAILED = 58
RESOURCE_NOT_FOUND = 91
UNACCEPTABLE_CREDENTIAL = 93

MAX_RECEIVE = 512 * 1024  # sasl.server.max.receive.size's default
FLOOD_CONNECTIONS = 50
FLOOD_RSS_BOUND = 64 * 1024 * 1024  # what 50 half-MiB frames may cost both workers together
REAUTH_MS = 3000


# ---------------------------------------------------------------------- brokers
@dataclass
class Secure:
    """A running broker and the port of each of its listeners, by listener name."""

    broker: Broker
    ports: dict[str, int]
    pki: Pki

    def bootstrap(self, listener: str) -> str:
        return f"{HOST}:{self.ports[listener]}"


def _free_ports(count: int, taken: set[int]) -> list[int]:
    ports: list[int] = []
    while len(ports) < count:
        port = free_port()
        if port not in taken and port not in ports:
            ports.append(port)
    return ports


def _prepare_secure(base: str, pki: Pki, workers: int, listeners: tuple[str, ...], settings: dict[str, Any]) -> Secure:
    """A broker (not started yet) whose settings are in a .properties file, the one
    ``castle users set --broker-config`` reads."""
    broker = Broker(base, workers, {})
    ports = dict(zip(listeners, _free_ports(len(listeners), {broker.port, broker.metrics_port})))
    ports["PLAINTEXT"] = broker.port  # the harness checks readiness on broker.port in plaintext
    listener_text = ",".join(f"{name}://{HOST}:{port}" for name, port in ports.items())
    config = {"listeners": listener_text, "ssl.keystore.location": pki.server_keystore,
              "ssl.truststore.location": pki.ca, "num.partitions": PARTITIONS,
              "group.initial.rebalance.delay.ms": 0, "offsets.topic.num.partitions": 4, **settings}
    broker.config_file = os.path.join(base, "server.properties")
    with open(broker.config_file, "w") as handle:
        handle.write("".join(f"{key}={value}\n" for key, value in config.items()))
    broker.overrides["listeners"] = listener_text  # else the harness's PLAINTEXT-only default wins over the file
    return Secure(broker, ports, pki)


def _run_secure(secure: Secure) -> Iterator[Secure]:
    """alice is written offline, then the broker starts; stopped by PID whatever happens."""
    try:
        set_user_offline(secure.broker, ALICE, ALICE_PASSWORD)
        secure.broker.start()
        yield secure
    finally:
        unclean = stop_all([secure.broker])
        assert not unclean, f"broker did not stop cleanly: {unclean}"


def set_user_offline(broker: Broker, user: str, password: str) -> None:
    assert broker.config_file is not None
    done = subprocess.run(castle_command() + ["users", "set", user, "--broker-config", broker.config_file,
                                              "--override", f"log.dirs={broker.log_dir}", "--password-stdin"],
                          input=password + "\n", capture_output=True, text=True, timeout=60, stdin=None)
    assert done.returncode == 0, f"castle users set (offline) exited {done.returncode}: {done.stderr}"
    assert os.path.exists(os.path.join(broker.log_dir, "scram-credentials.json"))


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(str(tmp_path_factory.mktemp("pki")))


@pytest.fixture(scope="module")
def secure_broker(tmp_path_factory: pytest.TempPathFactory, pki: Pki) -> Iterator[Secure]:
    yield from _run_secure(_prepare_secure(str(tmp_path_factory.mktemp("secure")), pki, 2,
                                           ("SSL", "SASL_PLAINTEXT", "SASL_SSL"),
                                           {"listener.name.ssl.ssl.client.auth": "requested"}))


@pytest.fixture(scope="module")
def strict_broker(tmp_path_factory: pytest.TempPathFactory, pki: Pki) -> Iterator[Secure]:
    """Client certificates required on SSL; SASL sessions last 3 s."""
    yield from _run_secure(_prepare_secure(str(tmp_path_factory.mktemp("strict")), pki, 1, ("SSL", "SASL_PLAINTEXT"),
                                           {"ssl.client.auth": "required", "connections.max.reauth.ms": REAUTH_MS}))


@pytest.fixture
def secure(request: pytest.FixtureRequest, secure_broker: Secure) -> Secure:
    request.node._castle_brokers = [secure_broker.broker]  # its stderr goes into a failed test's report
    return secure_broker


@pytest.fixture
def strict(request: pytest.FixtureRequest, strict_broker: Secure) -> Secure:
    request.node._castle_brokers = [strict_broker.broker]
    return strict_broker


# ---------------------------------------------------------------------- client settings
def confluent_settings(s: Secure, listener: str, mechanism: str = "", user: str = ALICE, password: str = ALICE_PASSWORD,
                       cert: ClientFiles | None = None) -> dict[str, Any]:
    """librdkafka settings for ``listener`` (bootstrap.servers included)."""
    out: dict[str, Any] = {"bootstrap.servers": s.bootstrap(listener), "security.protocol": listener}
    if listener in ("SSL", "SASL_SSL"):
        out["ssl.ca.location"] = s.pki.ca
    if listener.startswith("SASL"):
        out.update({"sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password})
    if cert is not None:
        out.update({"ssl.certificate.location": cert.crt, "ssl.key.location": cert.key})
    return out


def without_bootstrap(settings: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in settings.items() if k != "bootstrap.servers"}


def tls_context(pki: Pki, cert: ClientFiles | None = None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=pki.ca)
    if cert is not None:
        context.load_cert_chain(cert.crt, cert.key)
    return context


def auth_outcome(settings: dict[str, Any], timeout: float = 15.0) -> Any:
    """None once a Metadata request is answered, or the first authentication error
    librdkafka reported (a KafkaError); fails when neither happens in ``timeout`` s."""
    from confluent_kafka import KafkaError, KafkaException, Producer

    errors: list[Any] = []
    producer = Producer({**settings, "error_cb": errors.append, "reconnect.backoff.ms": 200})
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        producer.poll(0.1)  # serves error_cb
        failed = [e for e in errors if e.code() == KafkaError._AUTHENTICATION]
        if failed:
            return failed[0]
        try:
            producer.list_topics(timeout=1.0)
            return None
        except KafkaException:
            continue
    raise AssertionError(f"neither a Metadata answer nor an authentication error in {timeout} s: {errors}")


def assert_serves(s: Secure) -> None:
    """A good client still works: SCRAM over SASL_SSL, and a plaintext Metadata."""
    assert auth_outcome(confluent_settings(s, "SASL_SSL", "SCRAM-SHA-512")) is None
    with Raw(s.ports["PLAINTEXT"]) as raw:
        assert raw.call(3, 1, {"topics": []}).brokers[0].port == s.ports["PLAINTEXT"]


# ---------------------------------------------------------------------- raw frames
def request(api_key: int, version: int, data: dict[str, Any]) -> Any:
    entity = codec.request_class(api_key, version)
    assert entity is not None, f"no request class for api {api_key} v{version}"
    return build(entity, data)


API_VERSIONS_V3 = {"client_software_name": "castle-tests", "client_software_version": "1"}


class Raw:
    """One raw connection (TLS when a context is given): kio-encoded requests, kio-decoded answers."""

    def __init__(self, port: int, context: ssl.SSLContext | None = None, timeout: float = 10.0) -> None:
        sock = socket.create_connection((HOST, port), timeout=timeout)
        if context is not None:
            sock = context.wrap_socket(sock, server_hostname=HOST)
        self.sock = sock
        self._next = 0

    def send(self, api_key: int, version: int, data: dict[str, Any]) -> int:
        self._next += 1
        self.sock.sendall(encode_request(api_key, version, self._next, request(api_key, version, data)))
        return self._next

    def call(self, api_key: int, version: int, data: dict[str, Any]) -> Any:
        correlation_id = self.send(api_key, version, data)
        got, entity = decode_response(api_key, version, read_frame(self.sock))
        assert got == correlation_id
        return entity

    def plain(self, user: str, password: str, authenticate_version: int = 1) -> Any:
        """SaslHandshake v1 PLAIN then one SaslAuthenticate: its answer."""
        handshake = self.call(17, 1, {"mechanism": "PLAIN"})
        assert handshake.error_code == 0, handshake
        return self.call(36, authenticate_version, {"auth_bytes": f"\0{user}\0{password}".encode()})

    def closed(self, timeout: float = 5.0) -> bool:
        """True once the broker closed the connection (EOF or reset) within ``timeout`` s,
        False when it is still open; any answer fails the test."""
        self.sock.settimeout(timeout)
        try:
            data = self.sock.recv(65536)
        except TimeoutError:
            return False
        except (ConnectionResetError, ssl.SSLError):
            return True
        assert data == b"", f"expected the connection to be closed, got {data[:80]!r}"
        return True

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> "Raw":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def plain_login_works(port: int, user: str, password: str) -> bool:
    """A fresh connection authenticates with PLAIN and is then served a Metadata request."""
    with Raw(port) as raw:
        answer = raw.plain(user, password)
        if answer.error_code != 0:
            assert answer.error_code == SASL_AUTHENTICATION_FAILED, answer
            assert raw.closed(), "a failed authentication must close the connection"
            return False
        return bool(raw.call(3, 1, {"topics": []}).brokers[0].port == port)


def read_to_eof(sock: socket.socket, timeout: float = 5.0) -> bytes:
    """Everything the peer sends until it closes; fails if it is still open after ``timeout`` s."""
    sock.settimeout(timeout)
    data = bytearray()
    deadline = time.monotonic() + timeout
    while True:
        assert time.monotonic() < deadline, f"connection still open after {timeout} s ({bytes(data[:40])!r})"
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            return bytes(data)
        except TimeoutError:
            raise AssertionError(f"connection still open after {timeout} s ({bytes(data[:40])!r})") from None
        if not chunk:
            return bytes(data)
        data += chunk


def rss(pid: int) -> int:
    with open(f"/proc/{pid}/status") as handle:
        for line in handle:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for {pid}")


# ---------------------------------------------------------------------- records
def confluent_group_consume(settings: dict[str, Any], topic: str, group: str, count: int,
                            timeout: float = 45.0) -> tuple[list[Got], dict[int, int]]:
    """A group member subscribes, reads ``count`` records, commits, and asks the broker
    what the group committed; returns the records and partition -> committed offset."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({**settings, "group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "session.timeout.ms": 6000})
    got: list[Got] = []
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + timeout
        while len(got) < count:
            assert time.monotonic() < deadline, f"group {group} read {len(got)} of {count} records"
            for msg in consumer.consume(num_messages=1000, timeout=0.5):
                assert msg.error() is None, msg.error()
                raw_headers: Any = msg.headers() or ()
                headers = tuple((str(k), bytes(v)) for k, v in raw_headers)
                partition, offset = msg.partition(), msg.offset()
                assert partition is not None and offset is not None
                got.append(Got(partition, offset, msg.key(), msg.value() or b"", headers, msg.timestamp()[1]))
        consumer.commit(asynchronous=False)
        committed = consumer.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=15)
    finally:
        consumer.close()
    return got, {tp.partition: tp.offset for tp in committed}


def per_partition(records: list[Rec]) -> dict[int, int]:
    counts = {p: 0 for p in range(PARTITIONS)}
    for r in records:
        counts[r.partition] += 1
    return counts


# ====================================================================== real clients
@pytest.mark.parametrize("listener,mechanism", [("SSL", ""), ("SASL_PLAINTEXT", "SCRAM-SHA-512"), ("SASL_SSL", "PLAIN")])
def test_confluent_produce_and_group_consume(secure: Secure, listener: str, mechanism: str) -> None:
    """confluent-kafka produces to a 4-partition topic (two owned by each worker) and a
    consumer group reads it back byte-equal and commits; OffsetFetch returns the commits."""
    settings = confluent_settings(secure, listener, mechanism)
    topic = f"confluent-{listener.lower()}"
    records = make_records(400, PARTITIONS, tag=topic)
    delivered = confluent_produce(settings["bootstrap.servers"], topic, records, codec="lz4",
                                  **without_bootstrap(settings))
    assert [p for p, _o in delivered] == [r.partition for r in records]
    got, committed = confluent_group_consume(settings, topic, f"group-{listener.lower()}", len(records))
    assert_same(records, got)
    assert committed == per_partition(records)


@pytest.mark.parametrize("listener,mechanism", [("SASL_SSL", "SCRAM-SHA-256"), ("SSL", "")])
def test_kafka_python_round_trip(secure: Secure, listener: str, mechanism: str) -> None:
    settings: dict[str, Any] = {"security_protocol": listener}
    if listener.endswith("SSL"):
        settings["ssl_cafile"] = secure.pki.ca
    if mechanism:
        settings.update({"sasl_mechanism": mechanism, "sasl_plain_username": ALICE, "sasl_plain_password": ALICE_PASSWORD})
    topic = f"kafka-python-{listener.lower()}"
    records = make_records(300, PARTITIONS, tag=topic)
    kafka_python_produce(secure.bootstrap(listener), topic, records, codec="gzip", **settings)
    got = kafka_python_consume(secure.bootstrap(listener), topic, range(PARTITIONS), len(records), timeout=45, **settings)
    assert_same(records, got)


@pytest.mark.parametrize("listener,mechanism", [("SASL_PLAINTEXT", "PLAIN"), ("SSL", "")])
def test_aiokafka_round_trip(secure: Secure, listener: str, mechanism: str) -> None:
    from aiokafka.helpers import create_ssl_context

    settings: dict[str, Any] = {"security_protocol": listener}
    if listener.endswith("SSL"):
        settings["ssl_context"] = create_ssl_context(cafile=secure.pki.ca)
    if mechanism:
        settings.update({"sasl_mechanism": mechanism, "sasl_plain_username": ALICE, "sasl_plain_password": ALICE_PASSWORD})
    topic = f"aiokafka-{listener.lower()}"
    records = make_records(300, PARTITIONS, tag=topic)
    aiokafka_produce(secure.bootstrap(listener), topic, records, codec="zstd", **settings)
    got = aiokafka_consume(secure.bootstrap(listener), topic, range(PARTITIONS), len(records), timeout=45, **settings)
    assert_same(records, got)


def kcat(*args: str, stdin: bytes | None = None, timeout: float = 30) -> bytes:
    done = subprocess.run(["kcat", *args], input=stdin, capture_output=True, timeout=timeout)
    assert done.returncode == 0, f"kcat {' '.join(args)} exited {done.returncode}: {done.stderr.decode()}"
    return done.stdout


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed")
@pytest.mark.parametrize("listener", ["SASL_SSL", "SSL"])
def test_kcat_round_trip(secure: Secure, listener: str) -> None:
    """kcat produces keyed lines and reads them back; on SSL it presents alice's client
    certificate (the listener requests one)."""
    # SCRAM even with Debian's kcat (librdkafka 2.0.2), whose client-final repeats the client
    # nonce (confluentinc/librdkafka#4895): Castle accepts that form, as Kafka 3.8.1-3.9 do.
    mechanism = "SCRAM-SHA-256" if listener == "SASL_SSL" else ""
    settings = confluent_settings(secure, listener, mechanism,
                                  cert=secure.pki.client(ALICE) if listener == "SSL" else None)
    options: list[str] = ["-b", settings.pop("bootstrap.servers")]
    for key, value in settings.items():
        options += ["-X", f"{'sasl.mechanisms' if key == 'sasl.mechanism' else key}={value}"]
    topic = f"kcat-{listener.lower()}"
    lines = [f"k{i}\tvalue {i} {'x' * (i % 37)} \u00e9" for i in range(500)]
    kcat("-P", *options, "-t", topic, "-p", "1", "-K", "\t", stdin=("\n".join(lines) + "\n").encode())
    out = kcat("-C", *options, "-t", topic, "-p", "1", "-o", "beginning", "-e", "-q", "-f", r"%o\t%k\t%s\n")
    rows = [line.split("\t", 2) for line in out.decode().splitlines()]
    assert [int(r[0]) for r in rows] == list(range(len(lines)))
    assert [f"{r[1]}\t{r[2]}" for r in rows] == lines


def test_large_fetch_over_ssl(secure: Secure) -> None:
    """20 MB of incompressible records produced over SSL (large frames through TLS), then
    ONE raw Fetch over SSL answers all of them (file ranges encrypted in chunks), and
    confluent-kafka reads them back over SSL too; every value byte-equal."""
    from confluent_kafka import Consumer, TopicPartition

    settings = confluent_settings(secure, "SSL")
    topic = "big-over-ssl"
    values = [secrets.token_bytes(1_000_000) for _ in range(20)]
    records = [Rec(0, b"big-%d" % i, v, (), 1_700_000_000_000 + i) for i, v in enumerate(values)]
    producer_settings: dict[str, Any] = {**without_bootstrap(settings), "message.max.bytes": 1_100_000}
    confluent_produce(settings["bootstrap.servers"], topic, records, **producer_settings)

    with Raw(secure.ports["SSL"], tls_context(secure.pki), timeout=30) as raw:
        metadata = raw.call(3, 1, {"topics": [{"name": topic}]})
        assert metadata.topics[0].error_code == 0
        answer = raw.call(1, 12, {
            "replica_id": -1, "max_wait": 0, "min_bytes": 1, "max_bytes": 64 << 20, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "forgotten_topics_data": (), "rack_id": "",
            "topics": [{"topic": topic, "partitions": [
                {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0, "last_fetched_epoch": -1,
                 "log_start_offset": -1, "partition_max_bytes": 64 << 20}]}]})
    partition = answer.responses[0].partitions[0]
    assert (partition.error_code, partition.high_watermark) == (0, len(values))
    assert len(partition.records) > 20_000_000
    fetched = [(r.key, r.value) for _header, batch in iter_batches(partition.records) for r in batch]
    assert fetched == [(r.key, r.value) for r in records]

    consumer = Consumer({**settings, "group.id": "big-unused", "enable.auto.commit": False,
                         "max.partition.fetch.bytes": 32 << 20, "fetch.max.bytes": 48 << 20,
                         "receive.message.max.bytes": 64 << 20})
    got: list[bytes] = []
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + 30
        while len(got) < len(values):
            assert time.monotonic() < deadline, f"read {len(got)} of {len(values)} big records"
            for msg in consumer.consume(num_messages=100, timeout=0.5):
                assert msg.error() is None, msg.error()
                got.append(msg.value() or b"")
    finally:
        consumer.close()
    assert got == values


@pytest.mark.parametrize("listener,mechanism", [("PLAINTEXT", ""), ("SSL", ""), ("SASL_PLAINTEXT", "SCRAM-SHA-256"),
                                                ("SASL_SSL", "SCRAM-SHA-512")])
def test_metadata_names_the_listener_asked(secure: Secure, listener: str, mechanism: str) -> None:
    """A client bootstrapped on one listener is told that listener's port, never another's."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(confluent_settings(secure, listener, mechanism))
    metadata = admin.list_topics(timeout=15)
    assert [(b.id, b.host, b.port) for b in metadata.brokers.values()] == [(0, HOST, secure.ports[listener])]


# ====================================================================== failures
@pytest.mark.parametrize("listener,mechanism,user,password", [
    ("SASL_PLAINTEXT", "PLAIN", ALICE, "wrong-password"),
    ("SASL_SSL", "SCRAM-SHA-256", ALICE, "wrong-password"),
    ("SASL_PLAINTEXT", "SCRAM-SHA-512", "nobody", ALICE_PASSWORD),
    ("SASL_SSL", "PLAIN", "nobody", ALICE_PASSWORD),
], ids=["plain-wrong-password", "scram256-wrong-password", "scram512-unknown-user", "plain-unknown-user"])
def test_bad_credentials_fail_cleanly(secure: Secure, listener: str, mechanism: str, user: str, password: str) -> None:
    from confluent_kafka import KafkaError

    error = auth_outcome(confluent_settings(secure, listener, mechanism, user=user, password=password))
    assert error is not None and error.code() == KafkaError._AUTHENTICATION, error
    if mechanism == "PLAIN":
        assert "Invalid username or password" in error.str(), error.str()
    # The raw answer: SASL_AUTHENTICATION_FAILED, then the connection closes.
    if mechanism == "PLAIN" and listener == "SASL_PLAINTEXT":
        with Raw(secure.ports[listener]) as raw:
            answer = raw.plain(user, password)
            assert answer.error_code == SASL_AUTHENTICATION_FAILED
            assert answer.error_message == "Authentication failed: Invalid username or password"
            assert raw.closed()
    assert_serves(secure)


@pytest.mark.parametrize("listener", ["SSL", "SASL_SSL"])
def test_plaintext_client_on_a_tls_port_is_refused(secure: Secure, listener: str) -> None:
    with socket.create_connection((HOST, secure.ports[listener]), timeout=5) as sock:
        sock.sendall(encode_request(18, 3, 4242, request(18, 3, API_VERSIONS_V3)))
        data = read_to_eof(sock)
    # At most a TLS alert record (content type 21), never a Kafka answer.
    assert data == b"" or data[0] == 0x15, data[:40]
    assert_serves(secure)


@pytest.mark.parametrize("listener", ["PLAINTEXT", "SASL_PLAINTEXT"])
def test_tls_client_on_a_plaintext_port_is_refused(secure: Secure, listener: str) -> None:
    """The ClientHello reads as a frame of ~369 MB: above any limit, so the connection
    closes at once and the client's handshake fails (it does not hang)."""
    with socket.create_connection((HOST, secure.ports[listener]), timeout=5) as sock:
        with pytest.raises((ssl.SSLError, ConnectionResetError)):
            tls_context(secure.pki).wrap_socket(sock, server_hostname=HOST)
    assert_serves(secure)


def test_tls_close_notify_closes_the_connection(secure: Secure) -> None:
    """A client ending its TLS session (close_notify: what asyncio's SSL transport sends on
    close, so every aiokafka client) gets the connection closed at once; otherwise the
    client waits for an answer that never comes (asyncio: ssl_shutdown_timeout, 30 s)."""
    with Raw(secure.ports["SSL"], tls_context(secure.pki), timeout=5) as raw:
        assert raw.call(18, 3, API_VERSIONS_V3).error_code == 0
        assert isinstance(raw.sock, ssl.SSLSocket)
        try:
            raw.sock.unwrap()  # close_notify; returns on the broker's close_notify, raises on its EOF
        except TimeoutError:
            pytest.fail("the broker kept the connection open for 5 s after the client's TLS close_notify")
        except OSError:
            pass  # EOF or reset instead of a close_notify of its own: closed, as wanted
    assert_serves(secure)


@pytest.mark.parametrize("cert", ["expired", "untrusted", "none"])
def test_client_certificate_required(strict: Secure, cert: str) -> None:
    """ssl.client.auth=required: an expired, untrusted or missing client certificate is
    refused without an answer; alice's certificate is served (confluent-kafka produces)."""
    pki = strict.pki
    client = {"expired": pki.expired_client, "untrusted": pki.untrusted_client, "none": None}[cert]
    refused = ""
    try:
        with Raw(strict.ports["SSL"], tls_context(pki, client), timeout=5) as raw:
            raw.send(18, 3, API_VERSIONS_V3)
            assert raw.closed(), "the broker neither answered nor closed the connection"
            refused = "closed"
    except ssl.SSLError as exc:
        refused = str(exc.reason)
    except ConnectionResetError:
        refused = "reset"
    assert refused
    if cert == "expired" and refused not in ("closed", "reset"):
        assert "EXPIRED" in refused.upper(), refused

    good = confluent_settings(strict, "SSL", cert=pki.client(ALICE))
    confluent_produce(good["bootstrap.servers"], f"required-{cert}", make_records(20, 1, tag=cert),
                      **without_bootstrap(good))


def test_before_authentication_only_sasl_is_served(secure: Secure) -> None:
    port = secure.ports["SASL_PLAINTEXT"]
    # ApiVersions is answered (with the SASL APIs in it); then Metadata closes the connection.
    with Raw(port) as raw:
        versions = raw.call(18, 3, API_VERSIONS_V3)
        assert versions.error_code == 0 and {17, 36} <= {k.api_key for k in versions.api_keys}
        raw.send(3, 1, {"topics": []})
        assert raw.closed()
    # Produce as the first request: closed without an answer.
    batch = encode_batch([Record(0, int(time.time() * 1000), b"k", b"v", ())])
    with Raw(port) as raw:
        raw.send(0, 8, {"transactional_id": None, "acks": 1, "timeout": 1000, "topic_data": [
            {"name": "pre-auth", "partition_data": [{"index": 0, "records": batch}]}]})
        assert raw.closed()
    # The same gate on the TLS one.
    with Raw(secure.ports["SASL_SSL"], tls_context(secure.pki)) as raw:
        raw.send(3, 1, {"topics": []})
        assert raw.closed()
    # A frame declaring 600 KiB: closed on its size alone (the body is never sent).
    with Raw(port) as raw:
        raw.sock.sendall(struct.pack(">i", 600 * 1024) + b"\x00\x12\x00\x03")
        assert raw.closed(), "a 600 KiB frame before authentication must close the connection at once"
    # The pre-auth Produce left nothing behind: the topic was not even created.
    with Raw(secure.ports["PLAINTEXT"]) as raw:
        answer = raw.call(3, 4, {"topics": [{"name": "pre-auth"}], "allow_auto_topic_creation": False})
        assert answer.topics[0].error_code == 3  # UNKNOWN_TOPIC_OR_PARTITION
    assert_serves(secure)


def test_sasl_handshake_state_machine(secure: Secure) -> None:
    port = secure.ports["SASL_PLAINTEXT"]
    # SaslAuthenticate without SaslHandshake: ILLEGAL_SASL_STATE, then closed.
    with Raw(port) as raw:
        answer = raw.call(36, 1, {"auth_bytes": f"\0{ALICE}\0{ALICE_PASSWORD}".encode()})
        assert answer.error_code == ILLEGAL_SASL_STATE
        assert raw.closed()
    # An unknown mechanism: UNSUPPORTED_SASL_MECHANISM and the enabled list.
    with Raw(port) as raw:
        answer = raw.call(17, 1, {"mechanism": "GSSAPI"})
        assert answer.error_code == UNSUPPORTED_SASL_MECHANISM
        assert tuple(answer.mechanisms) == MECHANISMS
    # SaslHandshake v0: the PLAIN token travels as a bare frame, answered by an empty one;
    # the connection then serves Metadata (the SASL_PLAINTEXT port).
    with Raw(port) as raw:
        answer = raw.call(17, 0, {"mechanism": "PLAIN"})
        assert answer.error_code == 0 and tuple(answer.mechanisms) == MECHANISMS
        token = f"\0{ALICE}\0{ALICE_PASSWORD}".encode()
        raw.sock.sendall(struct.pack(">i", len(token)) + token)
        assert read_frame(raw.sock) == b""
        metadata = raw.call(3, 1, {"topics": []})
        assert [(b.node_id, b.host, b.port) for b in metadata.brokers] == [(0, HOST, port)]
    # v0 with a wrong password: closed, no answer (as Kafka).
    with Raw(port) as raw:
        assert raw.call(17, 0, {"mechanism": "PLAIN"}).error_code == 0
        token = f"\0{ALICE}\0not-it".encode()
        raw.sock.sendall(struct.pack(">i", len(token)) + token)
        assert raw.closed()
    # SaslHandshake v1 + SaslAuthenticate v0 (no session lifetime field), then Metadata.
    with Raw(port) as raw:
        answer = raw.plain(ALICE, ALICE_PASSWORD, authenticate_version=0)
        assert answer.error_code == 0 and answer.auth_bytes == b""
        assert raw.call(3, 1, {"topics": []}).brokers[0].port == port
    # SaslHandshake v1 + SaslAuthenticate v2 (flexible) + Metadata over SASL_SSL.
    with Raw(secure.ports["SASL_SSL"], tls_context(secure.pki)) as raw:
        answer = raw.plain(ALICE, ALICE_PASSWORD, authenticate_version=2)
        assert answer.error_code == 0 and answer.session_lifetime == datetime.timedelta(0)
        assert raw.call(3, 1, {"topics": []}).brokers[0].port == secure.ports["SASL_SSL"]


def test_unauthenticated_flood_stays_bounded(secure: Secure) -> None:
    """50 unauthenticated connections each send a frame header of 512 KiB - 1 (just under
    sasl.server.max.receive.size) and 500 KiB of junk, half at once, half slowly: the
    workers' RSS grows by less than 64 MiB together; once the frames complete, each is
    closed (junk is no SASL request); then a good client is served."""
    broker = secure.broker
    workers = broker.worker_pids()
    assert len(workers) == 2
    before = sum(rss(pid) for pid in workers)
    size = MAX_RECEIVE - 1
    sent = 500 * 1024
    junk = b"\xa5" * (sent // 10)
    conns = [socket.create_connection((HOST, secure.ports["SASL_PLAINTEXT"]), timeout=10) for _ in range(FLOOD_CONNECTIONS)]
    try:
        at_once, slowly = conns[: FLOOD_CONNECTIONS // 2], conns[FLOOD_CONNECTIONS // 2:]
        for sock in at_once:
            sock.sendall(struct.pack(">i", size) + b"\xa5" * sent)
        for sock in slowly:
            sock.sendall(struct.pack(">i", size))
        for _ in range(10):
            for sock in slowly:
                sock.sendall(junk)
            time.sleep(0.05)
        peak = 0
        for _ in range(10):  # the broker holds 50 x 500 KiB now: sample for a second
            peak = max(peak, sum(rss(pid) for pid in workers))
            time.sleep(0.1)
        growth = peak - before
        assert growth < FLOOD_RSS_BOUND, f"workers' RSS grew by {growth / 2**20:.1f} MiB under the flood"
        assert broker.worker_pids() == workers, "a worker died under the flood"
        for sock in conns:
            sock.sendall(b"\xa5" * (size - sent))
        for index, sock in enumerate(conns):
            sock.settimeout(10)
            try:
                data = sock.recv(65536)
            except ConnectionResetError:
                data = b""
            assert data == b"", f"connection {index}: junk was answered: {data[:40]!r}"
    finally:
        for sock in conns:
            sock.close()
    assert_serves(secure)


# ====================================================================== re-authentication
def scrape_sasl_authenticate(broker: Broker) -> float:
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(f"http://{HOST}:{broker.metrics_port}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    return sum(sample.value for family in text_string_to_metric_families(text) for sample in family.samples
               if sample.name == "castle_requests_total" and sample.labels.get("api") == "SaslAuthenticate")


def test_reauthentication_keeps_a_producer_going(strict: Secure) -> None:
    """Sessions last 3 s: librdkafka re-authenticates on its own connections (KIP-368) and
    keeps producing for 8.5 s without an error or a disconnect."""
    from confluent_kafka import Producer

    before = scrape_sasl_authenticate(strict.broker)
    errors: list[Any] = []
    stats: list[dict[str, Any]] = []
    failed: list[str] = []
    delivered: list[int] = []
    settings = confluent_settings(strict, "SASL_PLAINTEXT", "SCRAM-SHA-256")
    producer = Producer({**settings, "error_cb": errors.append, "stats_cb": lambda text: stats.append(json.loads(text)),
                         "statistics.interval.ms": 1000, "acks": "all", "linger.ms": 0})

    def done(err: Any, msg: Any) -> None:
        if err is not None:
            failed.append(str(err))
        else:
            delivered.append(msg.offset())

    end = time.monotonic() + 8.5
    count = 0
    while time.monotonic() < end:
        producer.produce("reauth", value=b"reauth-%d" % count, partition=0, on_delivery=done)
        count += 1
        producer.poll(0.1)
    assert producer.flush(15) == 0
    producer.poll(1.5)  # one more statistics callback
    assert not failed, failed[:5]
    assert not errors, errors[:5]
    assert len(delivered) == count and count > 40
    assert stats, "no statistics from librdkafka"
    brokers = stats[-1]["brokers"].values()
    connects = sum(b["connects"] for b in brokers)
    assert sum(b["disconnects"] for b in brokers) == 0, [(b["name"], b["disconnects"]) for b in brokers]
    # SCRAM takes two SaslAuthenticate requests; 8.5 s of 3 s sessions need more than one
    # authentication per connection. (Metrics reach the endpoint within a few seconds.)
    wait_until(lambda: scrape_sasl_authenticate(strict.broker) - before >= 2 * connects + 2, 10,
               f"re-authentications beyond the {connects} first ones")


def test_an_expired_session_is_closed(strict: Secure) -> None:
    """SaslAuthenticate v1 answers session_lifetime_ms=3000; after 3.5 s a Metadata
    request closes the connection, unless the client re-authenticated in time."""
    port = strict.ports["SASL_PLAINTEXT"]
    with Raw(port) as stale, Raw(port) as renewed:
        started = time.monotonic()
        for raw in (stale, renewed):
            answer = raw.plain(ALICE, ALICE_PASSWORD, authenticate_version=1)
            assert answer.error_code == 0
            assert answer.session_lifetime == datetime.timedelta(milliseconds=REAUTH_MS)
            assert raw.call(3, 1, {"topics": []}).brokers[0].port == port
        time.sleep(max(0.0, started + 2.0 - time.monotonic()))
        again = renewed.plain(ALICE, ALICE_PASSWORD, authenticate_version=1)
        assert again.error_code == 0 and again.session_lifetime == datetime.timedelta(milliseconds=REAUTH_MS)
        time.sleep(max(0.0, started + 3.5 - time.monotonic()))
        assert renewed.call(3, 1, {"topics": []}).brokers[0].port == port
        stale.send(3, 1, {"topics": []})
        assert stale.closed(), "a request after the session expired must close the connection"
    # Re-authentication keeps the mechanism: another one is ILLEGAL_SASL_STATE.
    with Raw(port) as raw:
        assert raw.plain(ALICE, ALICE_PASSWORD).error_code == 0
        assert raw.call(17, 1, {"mechanism": "SCRAM-SHA-256"}).error_code == ILLEGAL_SASL_STATE


# ====================================================================== credentials
def castle_users(*args: str, stdin: str | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(castle_command() + ["users", *args], input=stdin, capture_output=True, text=True,
                          timeout=timeout, stdin=None if stdin is not None else subprocess.DEVNULL)


def test_users_cli_over_sasl_ssl(secure: Secure, tmp_path: Any) -> None:
    """castle users list|set|delete with an AdminClient on SASL_SSL (SCRAM-SHA-512, the
    password in a --command-config file): bob set online can log in on every worker,
    deleted he cannot."""
    from confluent_kafka import KafkaError

    properties = tmp_path / "admin.properties"
    properties.write_text(f"sasl.username={ALICE}\nsasl.password={ALICE_PASSWORD}\nssl.ca.location={secure.pki.ca}\n")
    online = ["--bootstrap-server", secure.bootstrap("SASL_SSL"), "--property", "security.protocol=SASL_SSL",
              "--property", "sasl.mechanism=SCRAM-SHA-512", "--command-config", str(properties), "--timeout", "20"]

    listed = castle_users("list", *online, "--json")
    assert listed.returncode == 0, listed.stderr
    rows = {(u["user"], u["mechanism"], u["iterations"]) for u in json.loads(listed.stdout)}
    assert {(ALICE, "SCRAM-SHA-256", DEFAULT_ITERATIONS), (ALICE, "SCRAM-SHA-512", DEFAULT_ITERATIONS)} <= rows, rows

    bob = ("bob", "bob-Password-2")
    done = castle_users("set", bob[0], *online, "--password-stdin", "--mechanism", "SCRAM-SHA-256", stdin=bob[1] + "\n")
    assert done.returncode == 0, done.stderr
    bob_scram = confluent_settings(secure, "SASL_PLAINTEXT", "SCRAM-SHA-256", user=bob[0], password=bob[1])
    wait_until(lambda: auth_outcome(bob_scram) is None, 15, "bob to log in with SCRAM-SHA-256")
    port = secure.ports["SASL_PLAINTEXT"]
    # Like Kafka's brokers, each worker learns of the credential from the store's watch, a
    # moment after the one that took the login above: wait for all, then ask them again.
    wait_until(lambda: all(plain_login_works(port, *bob) for _ in range(8)), 15, "every worker to know bob")
    assert all(plain_login_works(port, *bob) for _ in range(8)), "a worker forgot bob's credential"
    listed = castle_users("list", *online, "--json", "bob")
    assert listed.returncode == 0, listed.stderr
    assert [(u["user"], u["mechanism"]) for u in json.loads(listed.stdout)] == [("bob", "SCRAM-SHA-256")]

    done = castle_users("delete", bob[0], *online, "--mechanism", "SCRAM-SHA-256")
    assert done.returncode == 0, done.stderr
    wait_until(lambda: not plain_login_works(port, *bob), 15, "bob's credential to disappear")
    time.sleep(1.0)  # the store's watch polls every 0.25 s: both workers have read it by now
    assert not any(plain_login_works(port, *bob) for _ in range(8)), "a worker still accepts bob"
    error = auth_outcome(bob_scram)
    assert error is not None and error.code() == KafkaError._AUTHENTICATION
    listed = castle_users("list", *online, "--json")
    assert "bob" not in {u["user"] for u in json.loads(listed.stdout)}
    assert_serves(secure)


def _upsertion(user: str, mechanism: int, iterations: int, password: str = "pw") -> dict[str, Any]:
    salt = secrets.token_bytes(32)
    digest = "sha256" if mechanism == 1 else "sha512"
    return {"name": user, "mechanism": mechanism, "iterations": iterations, "salt": salt,
            "salted_password": hashlib.pbkdf2_hmac(digest, password.encode(), salt, max(1, iterations))}


def test_scram_credential_apis_refuse_bad_changes(secure: Secure) -> None:
    with Raw(secure.ports["PLAINTEXT"]) as raw:
        def alter(deletions: list[dict[str, Any]], upsertions: list[dict[str, Any]]) -> list[tuple[str, int]]:
            answer = raw.call(51, 0, {"deletions": deletions, "upsertions": upsertions})
            return [(r.user, int(r.error_code)) for r in answer.results]

        def describe(*users: str) -> Any:
            return raw.call(50, 0, {"users": [{"name": u} for u in users]})

        assert alter([], [_upsertion("dave", 1, 1000)]) == [("dave", UNACCEPTABLE_CREDENTIAL)]
        assert alter([], [_upsertion("dave", 7, 4096)]) == [("dave", UNSUPPORTED_SASL_MECHANISM)]
        assert alter([{"name": "dave", "mechanism": 2}], []) == [("dave", RESOURCE_NOT_FOUND)]
        answer = describe("dave")
        assert answer.error_code == 0
        assert [(r.user, int(r.error_code)) for r in answer.results] == [("dave", RESOURCE_NOT_FOUND)]
        # Alice (written offline) is described: mechanisms and iterations only.
        [alice] = describe(ALICE).results
        assert int(alice.error_code) == 0
        assert sorted((int(c.mechanism), c.iterations) for c in alice.credential_infos) == \
            [(1, DEFAULT_ITERATIONS), (2, DEFAULT_ITERATIONS)]


def test_a_credential_set_online_reaches_every_worker(secure: Secure) -> None:
    """carol is created with a raw AlterUserScramCredentials; then a batch of fresh
    connections, which the kernel spreads over both workers (their accept counters say
    so), all log in as carol."""
    port = secure.ports["SASL_PLAINTEXT"]
    password = "carol-Password-3"
    with Raw(secure.ports["PLAINTEXT"]) as raw:
        answer = raw.call(51, 0, {"deletions": [], "upsertions": [_upsertion("carol", 2, 4096, password)]})
        assert [(r.user, int(r.error_code)) for r in answer.results] == [("carol", 0)]
    wait_until(lambda: all(plain_login_works(port, "carol", password) for _ in range(4)), 15, "carol to log in")

    broker = secure.broker

    def accepted() -> list[int]:
        stats = broker.stats()
        assert len(stats) == 2
        return [int(s["connections"]) for s in sorted(stats, key=lambda s: int(s["worker"]))]

    time.sleep(1.2)  # stats files are written every 0.5 s: these show every connection made so far
    before = accepted()
    logins = [plain_login_works(port, "carol", password) for _ in range(16)]
    assert all(logins), f"carol's logins: {logins}"
    wait_until(lambda: all(a > b for a, b in zip(accepted(), before)), 5,
               f"both workers to have accepted some of the 16 connections (before: {before})")
