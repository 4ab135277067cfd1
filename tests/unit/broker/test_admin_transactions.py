"""``castle transactions``' own Kafka client settings (broker/admin/wire.py: librdkafka's
security keys made into the connections' TLS and SASL) and the usage errors its commands
give before any broker is asked (exit code 2, one line)."""

from __future__ import annotations

import ssl

import pytest

from broker.admin import cli
from broker.admin.session import UsageError
from broker.admin.wire import client_security
from tests.certs import make_pki


def test_plaintext_needs_nothing_and_sasl_takes_librdkafkas_keys():
    assert client_security({}) is None
    assert client_security({"security.protocol": "plaintext"}) is None
    sasl = client_security({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "scram-sha-512",
                            "sasl.username": "admin", "sasl.password": "s3cret"})
    assert sasl is not None and (sasl.ssl_context, sasl.mechanism, sasl.username, sasl.password) == (
        None, "SCRAM-SHA-512", "admin", "s3cret")
    # librdkafka's older plural key works too.
    plain = client_security({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "PLAIN"})
    assert plain is not None and plain.mechanism == "PLAIN"


def test_tls_trusts_the_ca_given_and_checks_host_names_unless_told_not_to(tmp_path):
    pki = make_pki(str(tmp_path))
    checked = client_security({"security.protocol": "SSL", "ssl.ca.location": pki.ca})
    assert checked is not None and checked.mechanism is None
    context = checked.ssl_context
    assert isinstance(context, ssl.SSLContext) and context.check_hostname and context.verify_mode == ssl.CERT_REQUIRED
    assert len(context.get_ca_certs()) == 1, "the CA file given, not the system's"
    alice = pki.client("alice")
    with_certificate = client_security({"security.protocol": "SSL", "ssl.ca.location": pki.ca,
                                        "ssl.certificate.location": alice.crt, "ssl.key.location": alice.key})
    assert with_certificate is not None and with_certificate.ssl_context is not None
    unchecked = client_security({"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",
                                 "ssl.ca.location": pki.ca, "ssl.endpoint.identification.algorithm": "none"})
    assert unchecked is not None and unchecked.ssl_context is not None and not unchecked.ssl_context.check_hostname


@pytest.mark.parametrize("settings, message", [
    ({"security.protocol": "kerberos"}, "security.protocol=KERBEROS"),
    ({"security.protocol": "SASL_PLAINTEXT"}, "sasl.mechanism=GSSAPI"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER"}, "sasl.mechanism=OAUTHBEARER"),
    ({"security.protocol": "SSL", "ssl.ca.location": "/no/such/ca.pem"}, "TLS settings"),
    ({"security.protocol": "SSL", "ssl.endpoint.identification.algorithm": "ldap"}, "expected https or none"),
])
def test_settings_it_cannot_honour_are_usage_errors(settings, message):
    with pytest.raises(UsageError, match=message):
        client_security(settings)


@pytest.mark.parametrize("args, message", [
    (["find-hanging"], "needs --topic or --broker-id"),
    (["find-hanging", "--broker-id", "1", "--partition", "0"], "--partition needs --topic"),
    (["abort", "--topic", "t", "--partition", "0"], "named by --start-offset"),
    (["abort", "--topic", "t", "--partition", "0", "--producer-id", "7"], "needs --producer-epoch"),
])
def test_commands_refuse_what_names_nothing_before_asking_a_broker(args, message, capsys):
    # Port 1 answers nobody: a command that got as far as asking a broker would say "no answer".
    code = cli.main(["transactions", *args, "--bootstrap-server", "127.0.0.1:1", "--timeout", "2"])
    assert code == 2
    assert message in capsys.readouterr().err
