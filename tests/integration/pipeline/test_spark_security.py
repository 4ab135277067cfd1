"""``format("castle")`` over SASL_SSL with the Java client's option names only, as a Spark
user writes them for ``format("kafka")``: ``kafka.sasl.jaas.config``,
``kafka.ssl.truststore.*``, ``kafka.ssl.keystore.*``, ``kafka.ssl.key.password``,
``kafka.ssl.endpoint.identification.algorithm`` (pipeline/options.py translates them to
librdkafka's).

One broker for the module (one worker) with a PLAINTEXT listener (the harness's
readiness check only) and a SASL_SSL listener that *requires* a client certificate
(``listener.name.sasl_ssl.ssl.client.auth=required``): a read or write that gets through
has really presented the keystore, so the combined PEM keystore (chain and encrypted key
in one file, used as both librdkafka's ``ssl.certificate.location`` and
``ssl.key.location``) is checked by a real handshake. alice is written offline with
``castle users set --broker-config`` before the broker starts. The broker is stopped by
PID by the harness; the Spark session is the package's shared one.
"""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass
from typing import Any, Iterator

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import pkcs12

from pipeline.options import client_config
from tests.certs import Pki, make_pki
from tests.integration.clients import assert_same, confluent_consume, confluent_produce, make_records
from tests.integration.conftest import Broker, castle_command, free_port, stop_all
from tests.integration.pipeline.spark_rows import got_rows

pytestmark = [pytest.mark.integration, pytest.mark.security, pytest.mark.timeout(180)]

HOST = "127.0.0.1"
PARTITIONS = 3
ALICE, ALICE_PASSWORD = "alice", "alice-secret"
KEY_PASSWORD = "alice-key-secret"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
METADATA_TIMEOUT_MS = 5000  # the refused read's planner gives up after this
FAILURE_BOUND = 30.0  # seconds the refused read may take to fail, Spark's planning included


@dataclass
class SecureCastle:
    broker: Broker
    sasl_ssl: str  # bootstrap of the SASL_SSL listener
    pki: Pki
    keystore_pem: str  # client chain + key encrypted with KEY_PASSWORD, one file
    keystore_p12: str  # the same as PKCS#12, store password KEY_PASSWORD

    def librdkafka(self) -> dict[str, Any]:
        """librdkafka's own settings (separate certificate and key files): the reference
        client that produces and checks, independent of the translation under test."""
        alice = self.pki.client("alice")
        return {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": ALICE,
                "sasl.password": ALICE_PASSWORD, "ssl.ca.location": self.pki.ca,
                "ssl.certificate.location": alice.crt, "ssl.key.location": alice.key}

    def java_options(self, mechanism: str = "SCRAM-SHA-512", password: str = ALICE_PASSWORD) -> dict[str, str]:
        """The Java client's names only, as for Spark's format("kafka")."""
        module = PLAIN_MODULE if mechanism == "PLAIN" else SCRAM_MODULE
        return {
            "kafka.bootstrap.servers": self.sasl_ssl,
            "kafka.security.protocol": "SASL_SSL",
            "kafka.sasl.mechanism": mechanism,
            "kafka.sasl.jaas.config": f'{module} required username="{ALICE}" password="{password}";',
            "kafka.ssl.truststore.type": "PEM",
            "kafka.ssl.truststore.location": self.pki.ca,
            "kafka.ssl.keystore.type": "PEM",
            "kafka.ssl.keystore.location": self.keystore_pem,
            "kafka.ssl.key.password": KEY_PASSWORD,
            "kafka.ssl.endpoint.identification.algorithm": "",
        }


def write_client_keystores(pki: Pki, directory: str) -> tuple[str, str]:
    """alice's chain with her key encrypted (PKCS#8) in one PEM file, and as PKCS#12."""
    alice = pki.client("alice")
    with open(alice.key, "rb") as handle:
        key = serialization.load_pem_private_key(handle.read(), password=None)
    with open(alice.crt, "rb") as handle:
        cert = x509.load_pem_x509_certificate(handle.read())
    with open(pki.ca, "rb") as handle:
        ca_pem = handle.read()
    encryption = serialization.BestAvailableEncryption(KEY_PASSWORD.encode())
    pem = os.path.join(directory, "alice-keystore.pem")
    with open(pem, "wb") as handle:
        handle.write(cert.public_bytes(serialization.Encoding.PEM) + ca_pem
                     + key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption))
    p12 = os.path.join(directory, "alice-keystore.p12")
    with open(p12, "wb") as handle:
        handle.write(pkcs12.serialize_key_and_certificates(b"alice", key, cert,  # type: ignore[arg-type]
                                                           [x509.load_pem_x509_certificate(ca_pem)], encryption))
    return pem, p12


@pytest.fixture(scope="module")
def secure_castle(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureCastle]:
    base = str(tmp_path_factory.mktemp("castle-sasl-ssl"))
    pki = make_pki(os.path.join(base, "pki"))
    keystore_pem, keystore_p12 = write_client_keystores(pki, pki.directory)
    broker = Broker(base, 1, {})
    port = free_port()
    while port in (broker.port, broker.metrics_port):
        port = free_port()
    listeners = f"PLAINTEXT://{HOST}:{broker.port},SASL_SSL://{HOST}:{port}"
    settings = {"listeners": listeners, "ssl.keystore.location": pki.server_keystore, "ssl.truststore.location": pki.ca,
                "listener.name.sasl_ssl.ssl.client.auth": "required", "num.partitions": PARTITIONS}
    broker.config_file = os.path.join(base, "server.properties")
    with open(broker.config_file, "w") as handle:
        handle.write("".join(f"{key}={value}\n" for key, value in settings.items()))
    broker.overrides["listeners"] = listeners  # else the harness's PLAINTEXT-only default wins over the file
    try:
        done = subprocess.run(castle_command() + ["users", "set", ALICE, "--password-stdin", "--broker-config",
                                                  broker.config_file, "--override", f"log.dirs={broker.log_dir}"],
                              input=ALICE_PASSWORD + "\n", capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, f"castle users set exited {done.returncode}: {done.stderr}"
        broker.start()
        yield SecureCastle(broker, f"{HOST}:{port}", pki, keystore_pem, keystore_p12)
    finally:
        unclean = stop_all([broker])
        assert not unclean, f"broker did not stop cleanly: {unclean}"


@pytest.fixture
def secure(request: pytest.FixtureRequest, secure_castle: SecureCastle) -> SecureCastle:
    request.node._castle_brokers = [secure_castle.broker]  # its stderr goes into a failed test's report
    return secure_castle


def create_topic(secure: SecureCastle, topic: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": secure.sasl_ssl, **secure.librdkafka()})
    futures = admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS, replication_factor=1)],
                                  operation_timeout=10, request_timeout=15)
    futures[topic].result(timeout=20)


def handshake_outcome(settings: dict[str, Any], timeout: float = 15.0) -> Any:
    """None once a Metadata request is answered, else the first error librdkafka reports
    (a KafkaError: a failed TLS handshake, a failed authentication)."""
    from confluent_kafka import KafkaException, Producer

    errors: list[Any] = []
    producer = Producer({**settings, "error_cb": errors.append, "reconnect.backoff.ms": 200})
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        producer.poll(0.1)  # serves error_cb
        if errors:
            return errors[0]
        try:
            producer.list_topics(timeout=1.0)
            return None
        except KafkaException:
            continue
    raise AssertionError(f"neither a Metadata answer nor an error in {timeout} s")


def castle_read(spark: Any, options: dict[str, str], **more: str) -> Any:
    reader = spark.read.format("castle")
    for name, value in {**options, **more}.items():
        reader = reader.option(name, value)
    return reader.load()


# ---------------------------------------------------------------------- the tests
def test_the_keystore_is_really_needed_and_each_form_passes_the_handshake(secure: SecureCastle) -> None:
    """The listener refuses a client without a certificate; the PEM keystore (one file,
    encrypted key) and a PKCS#12 keystore, translated from the Java names, get through."""
    java = secure.java_options()
    without_keystore = {k: v for k, v in java.items() if not k.startswith(("kafka.ssl.keystore", "kafka.ssl.key."))}
    assert handshake_outcome(client_config(without_keystore), timeout=10.0) is not None
    assert handshake_outcome(client_config(java)) is None
    p12 = {**without_keystore, "kafka.ssl.keystore.type": "PKCS12", "kafka.ssl.keystore.location": secure.keystore_p12,
           "kafka.ssl.keystore.password": KEY_PASSWORD}
    assert handshake_outcome(client_config(p12)) is None


def test_spark_batch_read_over_sasl_ssl_with_java_options(spark: Any, secure: SecureCastle, topic_name: str) -> None:
    create_topic(secure, topic_name)
    records = make_records(300, PARTITIONS, topic_name)
    confluent_produce(secure.sasl_ssl, topic_name, records, **secure.librdkafka())
    df = castle_read(spark, secure.java_options(), subscribe=topic_name, startingOffsets="earliest",
                     includeHeaders="true")
    assert_same(records, got_rows(df))


def test_spark_batch_write_over_sasl_ssl_with_java_options(spark: Any, secure: SecureCastle, topic_name: str) -> None:
    create_topic(secure, topic_name)
    rows = [(f"key-{i % 11}", f"value-{i}", i % PARTITIONS) for i in range(120)]
    df = spark.createDataFrame(rows, "key string, value string, partition int")
    # PLAIN this time, the truststore's type left to its .pem name, and host names checked.
    options = {**secure.java_options("PLAIN"), "kafka.ssl.endpoint.identification.algorithm": "https"}
    del options["kafka.ssl.truststore.type"]
    writer = df.write.format("castle").option("topic", topic_name).mode("append")
    for name, value in options.items():
        writer = writer.option(name, value)
    writer.save()
    got = confluent_consume(secure.sasl_ssl, topic_name, range(PARTITIONS), len(rows), timeout=30,
                            **secure.librdkafka())
    assert sorted((g.key, g.value, g.partition) for g in got) == \
        sorted((k.encode(), v.encode(), p) for k, v, p in rows)


def test_a_wrong_password_fails_the_read_naming_authentication(spark: Any, secure: SecureCastle,
                                                               topic_name: str) -> None:
    create_topic(secure, topic_name)
    started = time.monotonic()
    with pytest.raises(Exception) as caught:
        castle_read(spark, secure.java_options(password="not-alice-secret"), subscribe=topic_name,
                    metadataTimeoutMs=str(METADATA_TIMEOUT_MS)).collect()
    elapsed = time.monotonic() - started
    message = str(caught.value)
    assert elapsed < FAILURE_BOUND, f"the refused read took {elapsed:.1f} s"
    assert ALICE_PASSWORD not in message and "not-alice-secret" not in message
    # librdkafka reports the refused login only through error_cb; pipeline/cluster.py names it.
    assert "authentication to the brokers" in message and "failed" in message, message[-2000:]
