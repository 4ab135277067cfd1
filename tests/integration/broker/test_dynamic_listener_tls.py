"""Dynamic per-listener TLS configs, as Kafka lets operators rotate certificates: a new
keystore set with kafka-configs (``listener.name.ssl.ssl.keystore.location``) is served by
every worker's new connections without a restart; a keystore of another identity, a wrong
key password, a name without the listener prefix or at the cluster default are refused with
Kafka's messages and nothing changes; a key password is stored encoded with
``password.encoder.secret`` (Kafka's encoding) and never shown; after a restart the broker
serves what was set."""

from __future__ import annotations

import glob
import json
import os
import socket
import ssl
import subprocess
from typing import Any, Callable

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID
from kio.schema.describe_configs.v4.request import DescribeConfigsRequest, DescribeConfigsResource
from kio.schema.incremental_alter_configs.v1.request import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)
from kio.static.primitive import i8

from broker.security.password_encoder import PasswordEncoder
from tests.certs import KEY_PASSWORD, make_ca, make_pki, sign_leaf
from tests.integration.conftest import Broker, free_port, wait_until
from tests.integration.kio_client import KioClient
from tests.kafka_cli import kafka_configs, missing_tools

pytestmark = [pytest.mark.integration, pytest.mark.security, pytest.mark.timeout(300)]

BROKER, SET, DELETE = 4, 0, 1
INVALID_REQUEST = 42
SECRET = "castle-encoder-secret"
KEYSTORE = "listener.name.ssl.ssl.keystore.location"
KEY_PASS = "listener.name.ssl.ssl.key.password"


def served_by(port: int, ca: str, connections: int = 16) -> bool:
    """Every one of several TLS handshakes (the kernel spreads them over the workers) trusts ``ca``."""
    context = ssl.create_default_context(cafile=ca)
    for _ in range(connections):
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
                with context.wrap_socket(raw, server_hostname="127.0.0.1"):
                    pass
        except (ssl.SSLError, OSError):
            return False
    return True


def stranger_keystore(directory: str) -> str:
    """A keystore for CN=elsewhere: valid, but not this broker's identity."""
    ca_key, ca_cert = make_ca("Stranger CA")
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    cert = sign_leaf(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "elsewhere")]), key, ca_key, ca_cert, server=True)
    path = os.path.join(directory, "stranger.pem")
    with open(path, "wb") as handle:
        handle.write(cert.public_bytes(serialization.Encoding.PEM) + key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    return path


def alter(client: KioClient, entity: str, *ops: tuple[str, int, str | None]) -> Any:
    request = IncrementalAlterConfigsRequest(resources=(AlterConfigsResource(
        resource_type=i8(BROKER), resource_name=entity,
        configs=tuple(AlterableConfig(name=n, config_operation=i8(op), value=v) for n, op, v in ops)),),
        validate_only=False)
    [response] = client.call(44, 1, request).responses
    return response


def described(client: KioClient, *keys: str) -> dict[str, Any]:
    request = DescribeConfigsRequest(resources=(DescribeConfigsResource(
        resource_type=i8(BROKER), resource_name="0", configuration_keys=keys),),
        include_synonyms=True, include_documentation=False)
    [result] = client.call(32, 4, request).results
    return {entry.name: entry for entry in result.configs}


def stored(broker: Broker) -> dict[str, str]:
    [path] = glob.glob(os.path.join(broker.log_dir, "**", "broker-configs.json"), recursive=True)
    with open(path) as handle:
        return dict(json.load(handle)["brokers"].get("0", {}))


def configs_tool(broker: Broker, *args: str) -> subprocess.CompletedProcess[str]:
    return kafka_configs(broker.bootstrap, "--entity-type", "brokers", "--entity-name", "0", *args)


def test_a_keystore_is_rotated_live_and_bad_ones_refused(broker_factory: Callable[..., Broker], tmp_path: Any) -> None:
    first = make_pki(os.path.join(str(tmp_path), "first"), clients={})
    renewed = make_pki(os.path.join(str(tmp_path), "renewed"), clients={})  # another CA, the same identity
    stranger = stranger_keystore(str(tmp_path))
    broker = broker_factory(workers=2, start=False)
    tls_port = free_port()
    broker.overrides.update({"listeners": f"PLAINTEXT://{broker.bootstrap},SSL://127.0.0.1:{tls_port}",
                             "ssl.keystore.location": first.server_keystore, "password.encoder.secret": SECRET})
    broker.start()
    assert served_by(tls_port, first.ca) and not served_by(tls_port, renewed.ca, 1)

    with KioClient(broker.bootstrap) as client:
        # The renewed keystore, live, in every worker; an open connection keeps its session.
        answer = alter(client, "0", (KEYSTORE, SET, renewed.server_keystore))
        assert answer.error_code == 0, answer.error_message
        wait_until(lambda: served_by(tls_port, renewed.ca), 20, "the renewed certificate served by every worker")
        wait_until(lambda: not served_by(tls_port, first.ca, 1), 20, "the first certificate no longer served")

        refusals = [
            ((KEYSTORE, SET, stranger), "Keystore DistinguishedName or SubjectAltNames do not match"),
            (("ssl.keystore.location", SET, renewed.server_keystore),
             "These security configs can be dynamically updated only per-listener using the listener prefix: "
             "[ssl.keystore.location]"),
            (("listener.name.plaintext.ssl.keystore.location", SET, renewed.server_keystore), "No SSL listener"),
            ((KEYSTORE, SET, os.path.join(str(tmp_path), "missing.pem")), "Validation of dynamic config update"),
            ((KEYSTORE, SET, renewed.server_keystore_encrypted), "Validation of dynamic config update"),  # no password
        ]
        for op, message in refusals:
            answer = alter(client, "0", op)
            assert (answer.error_code, message in (answer.error_message or "")) == (INVALID_REQUEST, True), (op, answer)
        answer = alter(client, "", (KEYSTORE, SET, renewed.server_keystore))
        assert answer.error_code == INVALID_REQUEST
        assert answer.error_message.startswith("Cannot update these configs at default cluster level, broker id must be "
                                               "specified: [listener.name.ssl.ssl.keystore.location]"), answer
        assert stored(broker) == {KEYSTORE: renewed.server_keystore}  # nothing applied half
        assert served_by(tls_port, renewed.ca)

        # An encrypted key with its password: stored encoded (Kafka's encoder), never shown.
        answer = alter(client, "0", (KEYSTORE, SET, renewed.server_keystore_encrypted), (KEY_PASS, SET, KEY_PASSWORD))
        assert answer.error_code == 0, answer.error_message
        kept = stored(broker)
        assert kept[KEY_PASS] != KEY_PASSWORD and PasswordEncoder(SECRET).decode(kept[KEY_PASS]) == KEY_PASSWORD
        entries = described(client, KEYSTORE, KEY_PASS, "ssl.key.password", "ssl.keystore.location")
        assert (entries[KEY_PASS].value, entries[KEY_PASS].is_sensitive, entries[KEY_PASS].config_source) == (
            None, True, 2)
        assert all(s.value is None for s in entries[KEY_PASS].synonyms)
        assert (entries[KEYSTORE].value, entries[KEYSTORE].read_only) == (renewed.server_keystore_encrypted, False)
        assert [(s.name, s.source) for s in entries[KEYSTORE].synonyms] == [
            (KEYSTORE, 2), ("ssl.keystore.location", 4), ("ssl.keystore.location", 5)]
        assert entries["ssl.key.password"].is_sensitive and entries["ssl.key.password"].value is None
        assert served_by(tls_port, renewed.ca)
        answer = alter(client, "0", (KEY_PASS, SET, "not-the-password"))
        assert answer.error_code == INVALID_REQUEST, answer

    # What was set is served after a restart (the password decoded with the same secret).
    broker.restart()
    assert served_by(tls_port, renewed.ca)

    # Without the secret, a password cannot be stored, and the stored one cannot be read: that
    # listener keeps its file's keystore (and says so).
    broker.stop()
    del broker.overrides["password.encoder.secret"]
    broker.start()
    wait_until(lambda: served_by(tls_port, first.ca), 20, "the file's keystore served")
    with open(broker.stderr_path, encoding="utf-8", errors="replace") as err:
        assert "ignoring the dynamic TLS configs of listener SSL" in err.read()
    with KioClient(broker.bootstrap) as client:
        answer = alter(client, "0", (KEY_PASS, SET, KEY_PASSWORD))
        assert (answer.error_code, answer.error_message) == (INVALID_REQUEST, "Password encoder secret not configured")


@pytest.mark.kafka_cli
def test_kafka_configs_rotates_a_listeners_keystore(broker_factory: Callable[..., Broker], tmp_path: Any) -> None:
    if missing_tools("4.4.0"):
        pytest.skip("Kafka 4.4 tools not available")
    first = make_pki(os.path.join(str(tmp_path), "first"), clients={})
    renewed = make_pki(os.path.join(str(tmp_path), "renewed"), clients={})
    broker = broker_factory(workers=2, start=False)
    tls_port = free_port()
    broker.overrides.update({"listeners": f"PLAINTEXT://{broker.bootstrap},SSL://127.0.0.1:{tls_port}",
                             "ssl.keystore.location": first.server_keystore})
    broker.start()
    done = configs_tool(broker, "--alter", "--add-config", f"{KEYSTORE}={renewed.server_keystore}")
    assert done.returncode == 0, done.stderr
    wait_until(lambda: served_by(tls_port, renewed.ca), 20, "the renewed certificate served")
    done = configs_tool(broker, "--describe")
    assert f"{KEYSTORE}={renewed.server_keystore} sensitive=false synonyms={{DYNAMIC_BROKER_CONFIG:{KEYSTORE}=" in done.stdout, \
        done.stdout
    done = configs_tool(broker, "--alter", "--add-config", f"ssl.keystore.location={renewed.server_keystore}")
    assert done.returncode != 0 and "only per-listener using the listener prefix" in done.stderr + done.stdout
