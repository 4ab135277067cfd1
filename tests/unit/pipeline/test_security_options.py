"""The Java client's security option names, as Spark users write them for format("kafka"),
translated to librdkafka's by pipeline/options.py (client_config); what librdkafka cannot
do is one clear OptionsError. The real handshakes are in
tests/integration/pipeline/test_spark_security.py."""

from __future__ import annotations

import pytest

from pipeline.options import OptionsError, SinkOptions, SourceOptions, client_config, jaas_credentials, parse_jaas

BOOT = {"kafka.bootstrap.servers": "127.0.0.1:9093"}
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
SASL_SSL = {"kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": "SCRAM-SHA-512"}


def config(**options: str) -> dict[str, str]:
    """client_config of kafka.<name> options given as name_with_underscores=value."""
    return client_config({**BOOT, **{"kafka." + k.replace("__", "."): v for k, v in options.items()}})


def translate(options: dict[str, str]) -> dict[str, str]:
    return client_config({**BOOT, **options})


def jaas(module: str = SCRAM, body: str = 'username="alice" password="alice-secret"') -> str:
    return f"{module} required {body};"


def refused(options: dict[str, str]) -> str:
    with pytest.raises(OptionsError) as caught:
        translate(options)
    return str(caught.value)


# ---------------------------------------------------------------------- the brief's example
def test_the_spark_kafka_example_translates_to_librdkafka() -> None:
    got = translate({
        "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": "SCRAM-SHA-512",
        "kafka.sasl.jaas.config": jaas(),
        "kafka.ssl.truststore.type": "PEM", "kafka.ssl.truststore.location": "/certs/ca.pem",
        "kafka.ssl.keystore.type": "PEM", "kafka.ssl.keystore.location": "/certs/client.pem",
        "kafka.ssl.key.password": "key-secret",
        "kafka.ssl.endpoint.identification.algorithm": "",
    })
    assert got == {
        "bootstrap.servers": "127.0.0.1:9093",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "alice", "sasl.password": "alice-secret",
        "ssl.ca.location": "/certs/ca.pem",
        "ssl.certificate.location": "/certs/client.pem", "ssl.key.location": "/certs/client.pem",
        "ssl.key.password": "key-secret",
        "ssl.endpoint.identification.algorithm": "none",
    }


def test_source_and_sink_options_translate_too() -> None:
    options = {**BOOT, **SASL_SSL, "kafka.sasl.jaas.config": jaas(), "subscribe": "t",
               "kafka.ssl.truststore.location": "/certs/ca.pem"}
    source = SourceOptions.parse(options, streaming=False).client
    sink = SinkOptions.parse(options).client
    for client in (source, sink):
        assert client["sasl.username"] == "alice" and client["ssl.ca.location"] == "/certs/ca.pem"
        assert "sasl.jaas.config" not in client and "ssl.truststore.location" not in client
    # Option names are case-insensitive (Spark's options are), values are not.
    mixed = SourceOptions.parse({**BOOT, "Kafka.SASL.JAAS.Config": jaas(body='username="Al" password="Pw"'),
                                 "kafka.security.protocol": "SASL_PLAINTEXT", "kafka.sasl.mechanism": "PLAIN",
                                 "subscribe": "t"}, streaming=False)
    assert (mixed.client["sasl.username"], mixed.client["sasl.password"]) == ("Al", "Pw")


# ---------------------------------------------------------------------- what stays
def test_security_protocol_mechanism_and_key_password_stay() -> None:
    got = translate({"kafka.security.protocol": "SSL", "kafka.sasl.mechanism": "PLAIN", "kafka.ssl.key.password": "p"})
    assert got == {**{"bootstrap.servers": "127.0.0.1:9093"}, "security.protocol": "SSL", "sasl.mechanism": "PLAIN",
                   "ssl.key.password": "p"}


def test_librdkafka_names_given_directly_keep_working() -> None:
    direct = {"kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanisms": "SCRAM-SHA-256",
              "kafka.sasl.username": "bob", "kafka.sasl.password": "pw", "kafka.ssl.ca.location": "/c/ca.pem",
              "kafka.ssl.certificate.location": "/c/bob.crt", "kafka.ssl.key.location": "/c/bob.key",
              "kafka.ssl.key.password": "kp", "kafka.ssl.endpoint.identification.algorithm": "none",
              "kafka.ssl.ca.pem": "-----BEGIN CERTIFICATE-----..."}
    assert translate(direct) == {"bootstrap.servers": "127.0.0.1:9093", **{k[len("kafka."):]: v for k, v in direct.items()}}


def test_a_java_name_and_the_same_librdkafka_setting_may_agree_but_not_disagree() -> None:
    same = translate({**SASL_SSL, "kafka.sasl.jaas.config": jaas(), "kafka.sasl.username": "alice",
                      "kafka.ssl.truststore.location": "/c/ca.pem", "kafka.ssl.ca.location": "/c/ca.pem"})
    assert same["sasl.username"] == "alice" and same["ssl.ca.location"] == "/c/ca.pem"
    for options, names in [
        ({**SASL_SSL, "kafka.sasl.jaas.config": jaas(), "kafka.sasl.username": "bob"}, "sasl.jaas.config and kafka.sasl.username"),
        ({**SASL_SSL, "kafka.sasl.jaas.config": jaas(), "kafka.sasl.password": "other"}, "kafka.sasl.password"),
        ({"kafka.ssl.truststore.location": "/c/ca.pem", "kafka.ssl.ca.location": "/d/ca.pem"},
         "ssl.truststore.location and kafka.ssl.ca.location"),
        ({"kafka.ssl.keystore.location": "/c/a.pem", "kafka.ssl.key.location": "/c/a.key"},
         "ssl.keystore.location and kafka.ssl.key.location"),
    ]:
        message = refused(options)
        assert names in message and "disagree" in message
        assert "alice-secret" not in message and "other" not in message


# ---------------------------------------------------------------------- sasl.jaas.config
@pytest.mark.parametrize("module", [SCRAM, PLAIN, "kafkashaded." + SCRAM, "kafkashaded." + PLAIN])
def test_jaas_plain_and_scram_become_username_and_password(module: str) -> None:
    got = translate({**SASL_SSL, "kafka.sasl.jaas.config": jaas(module)})
    assert (got["sasl.username"], got["sasl.password"]) == ("alice", "alice-secret")
    assert "sasl.jaas.config" not in got


@pytest.mark.parametrize("text, username, password", [
    # Backslash escapes as in Java's StreamTokenizer: \" \\ \n \t, octal, any other \x is x.
    (f'{SCRAM} required username="al\\"ice" password="p\\\\w\\n\\t\\101\\q";', 'al"ice', "p\\w\n\tAq"),
    # Single quotes, unquoted words, control flags in any case, newlines and comments.
    (f"{PLAIN}\n  REQUIRED\n  username='alice' // the user\n  /* her */ password=s3cr.et-x_$ ;", "alice", "s3cr.et-x_$"),
    (f'{SCRAM} optional password="a b;c=d" username="x";', "x", "a b;c=d"),
    (f'  {SCRAM} sufficient username="x" password="";', "x", ""),
    (f'{PLAIN} requisite username="ü" password="🔑" serviceName="kafka";', "ü", "🔑"),  # Plain ignores other keys
    (f'{SCRAM} required username="x" password="y" tokenauth="false";', "x", "y"),
])
def test_jaas_values_are_parsed_as_kafka_parses_them(text: str, username: str, password: str) -> None:
    _module, got_user, got_password = jaas_credentials(text)
    assert (got_user, got_password) == (username, password)


def test_parse_jaas_reads_every_entry() -> None:
    entries = parse_jaas(f'{PLAIN} required a="1" b=two; x.Y optional;')
    assert [(e.module, e.flag, e.options) for e in entries] == [(PLAIN, "required", {"a": "1", "b": "two"}),
                                                                ("x.Y", "optional", {})]


@pytest.mark.parametrize("module, names", [
    ("com.sun.security.auth.module.Krb5LoginModule", ["Kerberos (GSSAPI)", "kafka.sasl.kerberos."]),
    ("org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule", ["OAUTHBEARER", "kafka.sasl.oauthbearer."]),
    ("kafkashaded.org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule", ["OAUTHBEARER"]),
    ("com.example.MyLoginModule", ["another mechanism"]),
])
def test_other_login_modules_are_refused(module: str, names: list[str]) -> None:
    # Krb5's usual options do not even parse here (useKeyTab=true is fine, debug=1 is not
    # quoted): the module is named all the same.
    message = refused({**SASL_SSL, "kafka.sasl.jaas.config":
                       f'{module} required useKeyTab=true debug=1 keyTab="/etc/k.keytab" principal="p@R";'})
    assert f"login module {module} is not supported" in message
    assert "PlainLoginModule and ScramLoginModule" in message
    for name in names:
        assert name in message


@pytest.mark.parametrize("text, message", [
    ("", "names no login module"),
    ("  // nothing but a comment\n", "names no login module"),
    (f'{SCRAM} username="a" password="b";', "needs a control flag"),
    (f'{SCRAM} always username="a" password="b";', "needs a control flag"),
    (f'{SCRAM} required username="a" password="b"', "not terminated by a semicolon"),
    (f'{SCRAM} required username="a" password;', "option 'password' of"),
    (f'{SCRAM} required username="a" password=;', "has no value"),
    (f'{SCRAM} required username="a" password="b;', "is not closed"),
    (f'{SCRAM} required username="a" password="b\nc";', "is not closed"),
    (f'{SCRAM} required username="a" /* password="b";', "comment is not closed"),
    (f'{SCRAM} required username="a" password=123;', "unquoted number"),
    (f'{SCRAM} required username="a" ,password="b";', "unexpected character"),
    (f'{SCRAM} required username="a" password=b@c;', "unexpected character"),  # '@' is not echoed
    (f'{SCRAM} required username="a" password="b"; {PLAIN} required username="a" password="b";',
     "holds 2 login modules"),
    (f'{SCRAM} required password="b";', "(no username)"),
    (f'{PLAIN} required username="a";', "(no password)"),
    (f'{SCRAM} required username="" password="b";', "the username is empty"),
    (f'{SCRAM} required username="a" password="b" tokenauth="true";', "delegation token"),
    (f'{SCRAM} required username="a" password="b" ext="1";', "ext would be SCRAM extensions"),
])
def test_bad_jaas_lines_are_refused_without_echoing_secrets(text: str, message: str) -> None:
    got = refused({**SASL_SSL, "kafka.sasl.jaas.config": text})
    assert got.startswith("option kafka.sasl.jaas.config:"), got
    assert message in got
    assert '"b' not in got and "b;" not in got and "@" not in got  # the password's text never shows


@pytest.mark.parametrize("mechanism, said", [(None, "not given (the Java client's default is GSSAPI)"),
                                             ("GSSAPI", "is GSSAPI"), ("OAUTHBEARER", "is OAUTHBEARER")])
def test_a_jaas_username_needs_a_password_mechanism_on_sasl_listeners(mechanism: str | None, said: str) -> None:
    options = {"kafka.security.protocol": "SASL_PLAINTEXT", "kafka.sasl.jaas.config": jaas()}
    if mechanism:
        options["kafka.sasl.mechanism"] = mechanism
    message = refused(options)
    assert "PLAIN, SCRAM-SHA-256, SCRAM-SHA-512" in message and said in message


def test_jaas_mechanism_is_read_from_either_librdkafka_spelling() -> None:
    got = translate({"kafka.security.protocol": "sasl_ssl", "kafka.sasl.mechanisms": "PLAIN",
                     "kafka.sasl.jaas.config": jaas(PLAIN)})
    assert got["sasl.username"] == "alice" and got["sasl.mechanisms"] == "PLAIN"


# ---------------------------------------------------------------------- truststore
@pytest.mark.parametrize("options", [
    {"kafka.ssl.truststore.type": "PEM", "kafka.ssl.truststore.location": "/c/ca-bundle"},
    {"kafka.ssl.truststore.type": "pem", "kafka.ssl.truststore.location": "/c/ca.txt"},
    {"kafka.ssl.truststore.location": "/c/ca.pem"},
    {"kafka.ssl.truststore.location": "/c/CA.CRT"},
])
def test_a_pem_truststore_becomes_ssl_ca_location(options: dict[str, str]) -> None:
    got = translate(options)
    assert got["ssl.ca.location"] == options["kafka.ssl.truststore.location"]
    assert not any(name.startswith("ssl.truststore") for name in got)


def test_a_truststore_type_without_a_location_is_dropped() -> None:
    assert translate({"kafka.ssl.truststore.type": "PEM"}) == {"bootstrap.servers": "127.0.0.1:9093"}


@pytest.mark.parametrize("options, said", [
    ({"kafka.ssl.truststore.type": "JKS", "kafka.ssl.truststore.location": "/c/trust.jks"}, "a JKS truststore"),
    ({"kafka.ssl.truststore.type": "PKCS12", "kafka.ssl.truststore.location": "/c/trust.p12"}, "a PKCS12 truststore"),
    ({"kafka.ssl.truststore.location": "/c/trust.p12"}, "a PKCS12 truststore"),
    ({"kafka.ssl.truststore.location": "/c/kafka.client.truststore.jks"}, "default type JKS"),
    ({"kafka.ssl.truststore.location": "/c/truststore"}, "default type JKS"),
])
def test_jks_and_pkcs12_truststores_are_refused_saying_to_use_pem(options: dict[str, str], said: str) -> None:
    message = refused({**options, "kafka.ssl.truststore.password": "changeit"})
    assert message.startswith("option kafka.ssl.truststore.location:") and said in message
    assert "use PEM" in message and "kafka.ssl.truststore.type=PEM" in message
    assert "changeit" not in message


@pytest.mark.parametrize("options", [
    {"kafka.ssl.truststore.type": "PEM", "kafka.ssl.truststore.location": "/c/ca.pem"},
    {},
])
def test_a_truststore_password_is_refused_as_the_java_client_refuses_it_with_pem(options: dict[str, str]) -> None:
    message = refused({**options, "kafka.ssl.truststore.password": "changeit"})
    assert "kafka.ssl.truststore.password cannot be used" in message and "changeit" not in message


# ---------------------------------------------------------------------- keystore
@pytest.mark.parametrize("options", [
    {"kafka.ssl.keystore.type": "PEM", "kafka.ssl.keystore.location": "/c/client"},
    {"kafka.ssl.keystore.location": "/c/client.pem"},
])
def test_a_pem_keystore_is_both_certificate_and_key(options: dict[str, str]) -> None:
    got = translate({**options, "kafka.ssl.key.password": "kp"})
    location = options["kafka.ssl.keystore.location"]
    assert got["ssl.certificate.location"] == location and got["ssl.key.location"] == location
    assert got["ssl.key.password"] == "kp"
    assert not any(name.startswith("ssl.keystore") for name in got)


@pytest.mark.parametrize("options", [
    {"kafka.ssl.keystore.type": "PKCS12", "kafka.ssl.keystore.location": "/c/client.keystore"},
    {"kafka.ssl.keystore.location": "/c/client.p12"},
    {"kafka.ssl.keystore.location": "/c/client.PFX"},
])
def test_a_pkcs12_keystore_goes_to_librdkafkas_own_pkcs12_keystore(options: dict[str, str]) -> None:
    got = translate({**options, "kafka.ssl.keystore.password": "sp"})
    assert got["ssl.keystore.location"] == options["kafka.ssl.keystore.location"]
    assert got["ssl.keystore.password"] == "sp"
    assert "ssl.keystore.type" not in got and "ssl.certificate.location" not in got


@pytest.mark.parametrize("options, said", [
    ({"kafka.ssl.keystore.type": "JKS", "kafka.ssl.keystore.location": "/c/client.jks"}, "a JKS keystore"),
    ({"kafka.ssl.keystore.location": "/c/kafka.client.keystore.jks"}, "default type JKS"),
    ({"kafka.ssl.keystore.type": "BCFKS", "kafka.ssl.keystore.location": "/c/client.bcfks"}, "a BCFKS keystore"),
])
def test_jks_keystores_are_refused_saying_to_use_pem(options: dict[str, str], said: str) -> None:
    message = refused({**options, "kafka.ssl.keystore.password": "changeit"})
    assert message.startswith("option kafka.ssl.keystore.location:") and said in message
    assert "use PEM" in message and "kafka.ssl.keystore.type=PEM" in message and "changeit" not in message


def test_keystore_passwords_that_mean_nothing_are_refused() -> None:
    message = refused({"kafka.ssl.keystore.location": "/c/client.pem", "kafka.ssl.keystore.password": "sp"})
    assert "cannot be used with a PEM keystore" in message and "kafka.ssl.key.password" in message
    assert "no kafka.ssl.keystore.location" in refused({"kafka.ssl.keystore.password": "sp"})


# ---------------------------------------------------------------------- host name check
@pytest.mark.parametrize("given, translated", [("", "none"), ("  ", "none"), ("none", "none"),
                                               ("https", "https"), ("HTTPS", "https")])
def test_endpoint_identification(given: str, translated: str) -> None:
    assert config(ssl__endpoint__identification__algorithm=given)["ssl.endpoint.identification.algorithm"] == translated


def test_an_unknown_endpoint_identification_algorithm_is_refused() -> None:
    message = refused({"kafka.ssl.endpoint.identification.algorithm": "ldaps"})
    assert "must be https, or empty" in message and "'ldaps'" in message


# ---------------------------------------------------------------------- layering
def test_the_pipeline_does_not_import_the_broker_for_this() -> None:
    import ast
    import pathlib

    import pipeline.options

    tree = ast.parse(pathlib.Path(pipeline.options.__file__).read_text())
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert not any(name.split(".")[0] in ("broker", "coordination", "storage") for name in imported), imported
