"""TLS contexts from Kafka's SSL settings (broker/security/tls.py), over real handshakes.

Handshakes run in memory (two ssl.SSLObject over MemoryBIOs, bytes shuttled by hand): real
OpenSSL on both sides, no sockets, no threads, deterministic. The certificates come from
tests/certs.py, made once per module.
"""

from __future__ import annotations

import ssl
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.name import _ASN1Type
from cryptography.x509.oid import NameOID

from broker.security.tls import (
    ANONYMOUS_PRINCIPAL,
    IANA_TO_OPENSSL,
    TlsConfigError,
    build_client_context,
    build_server_context,
    map_cipher_suites,
    principal_of_certificate,
    rfc2253_name,
)
from tests.certs import Pki, make_ca, make_pki, sign_leaf


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pki]:
    yield make_pki(str(tmp_path_factory.mktemp("pki")))


def _server_settings(pki: Pki, **extra: str) -> dict[str, str]:
    settings = {"ssl.keystore.type": "PEM", "ssl.keystore.location": pki.server_keystore, "ssl.truststore.location": pki.ca}
    settings.update({key.replace("_", "."): value for key, value in extra.items()})
    return settings


def _client(pki: Pki, cert: str | None = None, key: str | None = None, maximum: ssl.TLSVersion | None = None) -> ssl.SSLContext:
    """A plain Python client, standing in for a Kafka client: trusts ca.pem, maybe presents a certificate."""
    context = ssl.create_default_context(cafile=pki.ca)
    if cert:
        context.load_cert_chain(cert, key)
    if maximum is not None:
        context.maximum_version = maximum
    return context


def _handshake(
    server_ctx: ssl.SSLContext, client_ctx: ssl.SSLContext, hostname: str = "localhost"
) -> tuple[ssl.SSLObject, ssl.SSLObject]:
    """Runs a full handshake, then one round trip of application data; returns (server, client)."""
    s_in, s_out, c_in, c_out = ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO()
    server = server_ctx.wrap_bio(s_in, s_out, server_side=True)
    client = client_ctx.wrap_bio(c_in, c_out, server_side=False, server_hostname=hostname)

    def shuttle() -> None:
        s_in.write(c_out.read())
        c_in.write(s_out.read())

    done = {id(server): False, id(client): False}
    for _ in range(10):
        for side in (client, server):
            if not done[id(side)]:
                try:
                    side.do_handshake()
                    done[id(side)] = True
                except ssl.SSLWantReadError:
                    pass
        shuttle()
        if all(done.values()):
            break
    assert all(done.values()), "handshake did not finish"
    # With TLS 1.3 the server checks the client's certificate after the client is done:
    # a round trip surfaces a refusal on both sides.
    client.write(b"ping")
    shuttle()
    assert server.read(4) == b"ping"
    server.write(b"pong")
    shuttle()
    assert client.read(4) == b"pong"
    return server, client


# --- keystores ------------------------------------------------------------------------


def test_a_pem_keystore_serves_a_client_trusting_the_ca(pki: Pki) -> None:
    server, client = _handshake(build_server_context(_server_settings(pki)), _client(pki))
    assert server.version() == "TLSv1.3"  # Kafka's default ssl.protocol and enabled protocols allow it
    assert server.getpeercert(binary_form=True) is None  # ssl.client.auth=none: no certificate asked
    assert principal_of_certificate(server.getpeercert(binary_form=True)) == ANONYMOUS_PRINCIPAL
    peer = client.getpeercert()
    assert peer is not None and peer["subject"] == ((("organizationName", "Castle"),), (("commonName", "localhost"),))


def test_a_missing_keystore_type_means_pem(pki: Pki) -> None:
    settings = _server_settings(pki)
    del settings["ssl.keystore.type"]
    server, _ = _handshake(build_server_context(settings), _client(pki))
    assert server.version() is not None


def test_an_encrypted_key_needs_the_right_password(pki: Pki) -> None:
    settings = _server_settings(pki, ssl_keystore_location=pki.server_keystore_encrypted)
    with pytest.raises(TlsConfigError, match="encrypted but ssl.key.password is not set"):
        build_server_context(settings)
    with pytest.raises(TlsConfigError, match="server-encrypted.pem"):
        build_server_context({**settings, "ssl.key.password": "not-the-password"})
    server, _ = _handshake(build_server_context({**settings, "ssl.key.password": pki.key_password}), _client(pki))
    assert server.version() == "TLSv1.3"


@pytest.mark.parametrize("store_type", ["JKS", "PKCS12"])
def test_keystore_types_other_than_pem_are_refused(pki: Pki, store_type: str) -> None:
    with pytest.raises(TlsConfigError, match=f"ssl.keystore.type={store_type} is not supported"):
        build_server_context(_server_settings(pki, ssl_keystore_type=store_type))
    with pytest.raises(TlsConfigError, match=f"ssl.truststore.type={store_type} is not supported"):
        build_server_context(_server_settings(pki, ssl_truststore_type=store_type))


def test_load_errors_name_the_file(pki: Pki, tmp_path: Path) -> None:
    missing = str(tmp_path / "nope.pem")
    with pytest.raises(TlsConfigError, match="nope.pem: no such file"):
        build_server_context(_server_settings(pki, ssl_keystore_location=missing))
    with pytest.raises(TlsConfigError, match="keystore .*ca.pem holds no PEM private key"):
        build_server_context(_server_settings(pki, ssl_keystore_location=pki.ca))
    empty = tmp_path / "empty.pem"
    empty.write_text("")
    with pytest.raises(TlsConfigError, match="truststore.*empty.pem"):
        build_server_context(_server_settings(pki, ssl_truststore_location=str(empty)))
    with pytest.raises(TlsConfigError, match="needs a keystore"):
        build_server_context({})


def test_inline_pem_keystore_and_truststore(pki: Pki) -> None:
    text = Path(pki.server_keystore).read_text()
    key_start = text.index("-----BEGIN PRIVATE KEY-----")
    settings = {
        "ssl.keystore.type": "PEM",
        "ssl.keystore.certificate.chain": text[:key_start],
        "ssl.keystore.key": text[key_start:],
        "ssl.truststore.certificates": Path(pki.ca).read_text(),
        "ssl.client.auth": "required",
    }
    alice = pki.client("alice")
    server, _ = _handshake(build_server_context(settings), _client(pki, alice.crt, alice.key))
    assert principal_of_certificate(server.getpeercert(binary_form=True)) == "User:CN=alice,OU=eng,O=Castle"


# --- client authentication -----------------------------------------------------------


def test_client_auth_required_refuses_a_client_without_a_certificate(pki: Pki) -> None:
    server_ctx = build_server_context(_server_settings(pki, ssl_client_auth="required"))
    assert server_ctx.verify_mode == ssl.CERT_REQUIRED
    with pytest.raises(ssl.SSLError, match="PEER_DID_NOT_RETURN_A_CERTIFICATE|CERTIFICATE_REQUIRED"):
        _handshake(server_ctx, _client(pki))


def test_client_auth_required_accepts_a_certificate_and_names_kafkas_principal(pki: Pki) -> None:
    alice = pki.client("alice")
    server_ctx = build_server_context(_server_settings(pki, ssl_client_auth="required"))
    server, _ = _handshake(server_ctx, _client(pki, alice.crt, alice.key))
    # Java's X500Principal.getName(): the CN first although the certificate encodes O first.
    assert principal_of_certificate(server.getpeercert(binary_form=True)) == "User:CN=alice,OU=eng,O=Castle"
    # The combined file (Kafka's PEM keystore form) works as well as crt + key.
    server, _ = _handshake(server_ctx, _client(pki, alice.pem))
    assert principal_of_certificate(server.getpeercert(binary_form=True)) == "User:CN=alice,OU=eng,O=Castle"


def test_client_auth_requested_lets_a_client_without_a_certificate_in(pki: Pki) -> None:
    server_ctx = build_server_context(_server_settings(pki, ssl_client_auth="requested"))
    assert server_ctx.verify_mode == ssl.CERT_OPTIONAL
    server, _ = _handshake(server_ctx, _client(pki))
    assert principal_of_certificate(server.getpeercert(binary_form=True)) == "User:ANONYMOUS"


@pytest.mark.parametrize("mode", ["required", "requested"])
def test_an_expired_client_certificate_fails_the_handshake(pki: Pki, mode: str) -> None:
    server_ctx = build_server_context(_server_settings(pki, ssl_client_auth=mode))
    expired = pki.expired_client
    with pytest.raises(ssl.SSLCertVerificationError, match="certificate has expired"):
        _handshake(server_ctx, _client(pki, expired.crt, expired.key))


def test_a_client_certificate_from_another_ca_fails_the_handshake(pki: Pki) -> None:
    server_ctx = build_server_context(_server_settings(pki, ssl_client_auth="required"))
    other = pki.untrusted_client
    with pytest.raises(ssl.SSLCertVerificationError, match="unable to get local issuer certificate"):
        _handshake(server_ctx, _client(pki, other.crt, other.key))


def test_client_auth_needs_a_truststore_and_a_known_mode(pki: Pki) -> None:
    settings = _server_settings(pki, ssl_client_auth="required")
    del settings["ssl.truststore.location"]
    with pytest.raises(TlsConfigError, match="needs a truststore"):
        build_server_context(settings)
    with pytest.raises(TlsConfigError, match="ssl.client.auth=sometimes"):
        build_server_context(_server_settings(pki, ssl_client_auth="sometimes"))
    assert build_server_context(_server_settings(pki, ssl_client_auth="REQUIRED")).verify_mode == ssl.CERT_REQUIRED


# --- protocols and cipher suites ---------------------------------------------------------


def test_tls13_only_refuses_a_tls12_only_client(pki: Pki) -> None:
    # The same client gets in when TLS 1.2 is enabled: the refusal is the setting's doing.
    server, _ = _handshake(build_server_context(_server_settings(pki)), _client(pki, maximum=ssl.TLSVersion.TLSv1_2))
    assert server.version() == "TLSv1.2"
    server_ctx = build_server_context(_server_settings(pki, ssl_enabled_protocols="TLSv1.3"))
    assert server_ctx.minimum_version == ssl.TLSVersion.TLSv1_3
    with pytest.raises(ssl.SSLError, match="(?i)protocol"):
        _handshake(server_ctx, _client(pki, maximum=ssl.TLSVersion.TLSv1_2))


@pytest.mark.parametrize("protocols", ["TLSv1.1,TLSv1.2", "TLSv1", "SSLv3", "TLSv9", ""])
def test_insecure_unknown_or_no_protocols_are_refused(pki: Pki, protocols: str) -> None:
    with pytest.raises(TlsConfigError, match="ssl.enabled.protocols"):
        build_server_context(_server_settings(pki, ssl_enabled_protocols=protocols))


def test_ssl_protocol_tls12_caps_a_client_only(pki: Pki) -> None:
    settings = {"ssl.truststore.location": pki.ca, "ssl.protocol": "TLSv1.2"}
    assert build_client_context(settings).maximum_version == ssl.TLSVersion.TLSv1_2
    assert build_server_context(_server_settings(pki, ssl_protocol="TLSv1.2")).maximum_version == ssl.TLSVersion.TLSv1_3
    with pytest.raises(TlsConfigError, match="ssl.protocol"):
        build_server_context(_server_settings(pki, ssl_protocol="SSLv3"))


def test_iana_cipher_names_map_to_openssl_names() -> None:
    selection = map_cipher_suites(
        " TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, TLS_AES_256_GCM_SHA384,TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256"
    )
    assert selection.tls12 == ("ECDHE-RSA-AES128-GCM-SHA256", "ECDHE-ECDSA-CHACHA20-POLY1305")
    assert selection.tls13 == ("TLS_AES_256_GCM_SHA384",)
    assert map_cipher_suites("") == ((), ())


def test_every_mapped_cipher_is_known_to_this_openssl() -> None:
    # OpenSSL's description line starts with the suite's OpenSSL name: the table's right-hand
    # side names real suites, each accepted alone by set_ciphers.
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.set_ciphers("ALL:@SECLEVEL=0")
    known = {cipher["name"] for cipher in context.get_ciphers()}
    assert set(IANA_TO_OPENSSL.values()) <= known


def test_an_unknown_cipher_name_is_refused_by_name(pki: Pki) -> None:
    with pytest.raises(TlsConfigError, match="TLS_MADE_UP_WITH_ROT13"):
        map_cipher_suites("TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,TLS_MADE_UP_WITH_ROT13")
    with pytest.raises(TlsConfigError, match="ECDHE-RSA-AES128-GCM-SHA256"):  # OpenSSL's name is not Kafka's
        build_server_context(_server_settings(pki, ssl_cipher_suites="ECDHE-RSA-AES128-GCM-SHA256"))


def test_a_tls12_suite_list_is_what_the_server_negotiates(pki: Pki) -> None:
    settings = _server_settings(pki, ssl_cipher_suites="TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384")
    server, _ = _handshake(build_server_context(settings), _client(pki))
    # No TLS 1.3 suite listed: TLS 1.3 is off, as in JSSE, and the one listed suite is used.
    assert server.version() == "TLSv1.2"
    assert (server.cipher() or ("",))[0] == "ECDHE-RSA-AES256-GCM-SHA384"


def test_tls13_suite_names_are_accepted_and_leave_tls13_on(pki: Pki) -> None:
    settings = _server_settings(pki, ssl_cipher_suites="TLS_AES_128_GCM_SHA256")
    server_ctx = build_server_context(settings)
    assert server_ctx.minimum_version == ssl.TLSVersion.TLSv1_3  # no TLS 1.2 suite listed
    server, _ = _handshake(server_ctx, _client(pki))
    assert server.version() == "TLSv1.3"
    assert (server.cipher() or ("",))[0] in {"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256"}
    with pytest.raises(TlsConfigError, match="no suite"):
        build_server_context({**settings, "ssl.enabled.protocols": "TLSv1.2"})


# --- broker-to-broker client context -----------------------------------------------------


def test_client_context_verifies_the_server_and_its_name(pki: Pki) -> None:
    alice = pki.client("alice")
    settings: Mapping[str, str] = {"ssl.truststore.location": pki.ca, "ssl.keystore.location": alice.pem}
    client_ctx = build_client_context(settings)
    assert client_ctx.check_hostname and client_ctx.verify_mode == ssl.CERT_REQUIRED
    server_ctx = build_server_context(_server_settings(pki, ssl_client_auth="required"))
    server, _ = _handshake(server_ctx, client_ctx, hostname="127.0.0.1")  # SAN IP
    assert principal_of_certificate(server.getpeercert(binary_form=True)) == "User:CN=alice,OU=eng,O=Castle"
    with pytest.raises(ssl.SSLCertVerificationError, match="(?i)hostname"):
        _handshake(server_ctx, client_ctx, hostname="broker.example.com")
    # ssl.endpoint.identification.algorithm="" skips the name check, not the chain check.
    lax = build_client_context({**settings, "ssl.endpoint.identification.algorithm": ""})
    assert not lax.check_hostname and lax.verify_mode == ssl.CERT_REQUIRED
    server, _ = _handshake(server_ctx, lax, hostname="broker.example.com")
    assert server.version() == "TLSv1.3"


def test_client_context_refuses_a_server_from_an_unknown_ca(pki: Pki) -> None:
    untrusted = pki.untrusted_client  # any certificate from another CA will do as a server's
    server_ctx = build_server_context({"ssl.keystore.location": untrusted.pem})
    client_ctx = build_client_context({"ssl.truststore.location": pki.ca, "ssl.endpoint.identification.algorithm": ""})
    with pytest.raises(ssl.SSLCertVerificationError, match="self-signed certificate in certificate chain"):
        _handshake(server_ctx, client_ctx)


# --- principals ------------------------------------------------------------------------


def _subject_der(*attributes: x509.NameAttribute) -> bytes:
    return x509.Name(list(attributes)).public_bytes()


def test_principal_of_a_certificate_matches_javas_rfc2253_order(pki: Pki) -> None:
    ca_key, ca_cert = make_ca()
    subject = x509.Name.from_rfc4514_string("CN=alice,OU=eng,O=Castle,L=Oslo,ST=Oslo,C=NO")
    cert = sign_leaf(subject, ec.generate_private_key(ec.SECP256R1()), ca_key, ca_cert, server=False)
    assert (
        principal_of_certificate(cert.public_bytes(serialization.Encoding.DER))
        == "User:CN=alice,OU=eng,O=Castle,L=Oslo,ST=Oslo,C=NO"
    )
    assert principal_of_certificate(None) == principal_of_certificate(b"") == "User:ANONYMOUS"


A = x509.NameAttribute


# Expected strings printed by Java 17's X500Principal.getName() for the same DER names.
# The first five are where cryptography's rfc4514_string() differs from Java; the BMPString
# case is Java 17 decoding the bytes as UTF-8 (Java 25 decodes UTF-16 and prints "CN=bmp é").


@pytest.mark.parametrize(
    ("attributes", "java"),
    [
        ([A(NameOID.COMMON_NAME, "a=b#c")], "CN=a\\=b\\#c"),
        ([A(NameOID.COMMON_NAME, "  sp  ")], "CN=\\ \\ sp\\ \\ "),
        (
            [A(NameOID.EMAIL_ADDRESS, "alice@example.com"), A(NameOID.COMMON_NAME, "alice")],
            "CN=alice,1.2.840.113549.1.9.1=#1611616c696365406578616d706c652e636f6d",
        ),
        ([A(NameOID.SERIAL_NUMBER, "1234"), A(NameOID.COMMON_NAME, "x")], "CN=x,2.5.4.5=#130431323334"),
        ([A(NameOID.COMMON_NAME, "\r lead")], "CN=\\\r\\ lead"),
        ([A(NameOID.COMMON_NAME, "Smith, John")], "CN=Smith\\, John"),
        ([A(NameOID.COMMON_NAME, "#hash")], "CN=\\#hash"),
        ([A(NameOID.COMMON_NAME, 'p+s;l<g>q"b\\e')], 'CN=p\\+s\\;l\\<g\\>q\\"b\\\\e'),
        ([A(NameOID.COMMON_NAME, "Ålesund æøå_@*&")], "CN=Ålesund æøå_@*&"),
        ([A(NameOID.COMMON_NAME, "a\x00b")], "CN=a\\00b"),
        ([A(NameOID.COMMON_NAME, " ")], "CN=\\ "),
        (
            [
                A(NameOID.DOMAIN_COMPONENT, "com"),
                A(NameOID.DOMAIN_COMPONENT, "example"),
                A(NameOID.STREET_ADDRESS, "Main st 1"),
                A(NameOID.USER_ID, "u1"),
            ],
            "UID=u1,STREET=Main st 1,DC=example,DC=com",
        ),
        ([A(NameOID.COMMON_NAME, "u\U0001f600", _type=_ASN1Type.UniversalString)], "CN=#1c08000000750001f600"),
        ([A(NameOID.COMMON_NAME, "bmp é", _type=_ASN1Type.BMPString)], "CN=\\00b\\00m\\00p\\00 \\00\ufffd"),
    ],
)
def test_distinguished_names_are_printed_as_java_prints_them(attributes: list[x509.NameAttribute], java: str) -> None:
    assert rfc2253_name(_subject_der(*attributes)) == java


def test_a_multi_valued_rdn_keeps_its_encoded_order() -> None:
    name = x509.Name.from_rfc4514_string("CN=a+UID=b,O=Castle")
    assert rfc2253_name(name.public_bytes()) == "CN=a+UID=b,O=Castle"
