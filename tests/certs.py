"""A throwaway PKI for TLS tests, made with the ``cryptography`` package.

``make_pki(directory)`` writes, into ``directory``:

* ``ca.pem``: a self-signed CA certificate (the truststore: ``ssl.truststore.location``,
  librdkafka's ``ssl.ca.location``, kafka-python's ``ssl_cafile``);
* ``server.pem``: Kafka's PEM keystore form (KIP-651): the server certificate chain (leaf, CA)
  and its unencrypted PKCS#8 key in one file; the leaf is valid for ``localhost`` and
  ``127.0.0.1`` (SAN DNS and IP);
* ``server-encrypted.pem``: the same with the key encrypted (PKCS#8) by ``Pki.key_password``;
* per client ``client-<name>.crt`` and ``client-<name>.key`` (plain PEM, for librdkafka's
  ``ssl.certificate.location``/``ssl.key.location`` and kafka-python's
  ``ssl_certfile``/``ssl_keyfile``) and ``client-<name>.pem`` (both in one file, the Kafka
  keystore form); ``alice`` (``CN=alice,OU=eng,O=Castle``) by default, an ``expired``
  client whose certificate is out of date, and an ``untrusted`` client signed by another CA.

Keys are EC P-256 (fast to make) except the server's, which is RSA 2048 so that the
``TLS_ECDHE_RSA_*`` suites Kafka's documentation uses can be negotiated.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

KEY_PASSWORD = "castle-key-secret"
DEFAULT_CLIENTS: Mapping[str, str] = {"alice": "CN=alice,OU=eng,O=Castle"}

PrivateKey = rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey


@dataclass(frozen=True)
class ClientFiles:
    """A client's certificate and key, apart (crt, key) and together (pem)."""

    crt: str
    key: str
    pem: str
    subject: str


@dataclass
class Pki:
    directory: str
    ca: str
    server_keystore: str
    server_keystore_encrypted: str
    key_password: str
    expired_client: ClientFiles
    untrusted_client: ClientFiles
    clients: dict[str, ClientFiles] = field(default_factory=dict)
    # Kept to sign further clients (add_client); never written to disk.
    _ca_key: PrivateKey | None = field(default=None, repr=False)
    _ca_cert: x509.Certificate | None = field(default=None, repr=False)

    def client(self, name: str) -> ClientFiles:
        return self.clients[name]

    def add_client(self, name: str, subject: str) -> ClientFiles:
        """Signs one more client certificate for ``subject`` (RFC 4514, e.g. "CN=bob,O=Castle")."""
        assert self._ca_key is not None and self._ca_cert is not None
        files = _write_client(self.directory, name, subject, self._ca_key, self._ca_cert)
        self.clients[name] = files
        return files


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)


def _ec_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _pem_key(key: PrivateKey, password: str | None = None) -> bytes:
    encryption: serialization.KeySerializationEncryption = (
        serialization.BestAvailableEncryption(password.encode()) if password else serialization.NoEncryption()
    )
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption)


def _pem_cert(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _write(path: str, data: bytes) -> str:
    with open(path, "wb") as f:
        f.write(data)
    os.chmod(path, 0o600)
    return path


def make_ca(common_name: str = "Castle Test CA") -> tuple[PrivateKey, x509.Certificate]:
    key = _ec_key()
    name = x509.Name(
        [x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Castle"), x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    )
    now = _now()
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=3650))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return key, cert


def sign_leaf(
    subject: x509.Name,
    key: PrivateKey,
    ca_key: PrivateKey,
    ca_cert: x509.Certificate,
    *,
    server: bool,
    san: list[x509.GeneralName] | None = None,
    not_before: datetime.datetime | None = None,
    not_after: datetime.datetime | None = None,
) -> x509.Certificate:
    now = _now()
    usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before or now - datetime.timedelta(days=1))
        .not_valid_after(not_after or now + datetime.timedelta(days=365))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
    )
    if san:
        builder = builder.add_extension(x509.SubjectAlternativeName(san), critical=False)
    return builder.sign(ca_key, hashes.SHA256())


def _write_client(
    directory: str,
    name: str,
    subject: str,
    ca_key: PrivateKey,
    ca_cert: x509.Certificate,
    *,
    not_before: datetime.datetime | None = None,
    not_after: datetime.datetime | None = None,
) -> ClientFiles:
    key = _ec_key()
    cert = sign_leaf(
        x509.Name.from_rfc4514_string(subject), key, ca_key, ca_cert, server=False, not_before=not_before, not_after=not_after
    )
    base = os.path.join(directory, f"client-{name}")
    return ClientFiles(
        crt=_write(base + ".crt", _pem_cert(cert)),
        key=_write(base + ".key", _pem_key(key)),
        pem=_write(base + ".pem", _pem_cert(cert) + _pem_cert(ca_cert) + _pem_key(key)),
        subject=subject,
    )


def make_pki(directory: str, clients: Mapping[str, str] = DEFAULT_CLIENTS) -> Pki:
    """Writes the files listed in the module docstring; ``clients`` maps a name to its subject."""
    os.makedirs(directory, exist_ok=True)
    ca_key, ca_cert = make_ca()
    ca = _write(os.path.join(directory, "ca.pem"), _pem_cert(ca_cert))

    server_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    server_cert = sign_leaf(
        x509.Name(
            [x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Castle"), x509.NameAttribute(NameOID.COMMON_NAME, "localhost")]
        ),
        server_key,
        ca_key,
        ca_cert,
        server=True,
        san=[x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))],
    )
    chain = _pem_cert(server_cert) + _pem_cert(ca_cert)
    server_keystore = _write(os.path.join(directory, "server.pem"), chain + _pem_key(server_key))
    server_keystore_encrypted = _write(
        os.path.join(directory, "server-encrypted.pem"), chain + _pem_key(server_key, KEY_PASSWORD)
    )

    now = _now()
    expired = _write_client(
        directory,
        "expired",
        "CN=expired,OU=eng,O=Castle",
        ca_key,
        ca_cert,
        not_before=now - datetime.timedelta(days=30),
        not_after=now - datetime.timedelta(days=1),
    )
    other_ca_key, other_ca_cert = make_ca("Somebody Else's CA")
    untrusted = _write_client(directory, "untrusted", "CN=mallory,O=Elsewhere", other_ca_key, other_ca_cert)

    pki = Pki(
        directory=directory,
        ca=ca,
        server_keystore=server_keystore,
        server_keystore_encrypted=server_keystore_encrypted,
        key_password=KEY_PASSWORD,
        expired_client=expired,
        untrusted_client=untrusted,
        _ca_key=ca_key,
        _ca_cert=ca_cert,
    )
    for name, subject in clients.items():
        pki.add_client(name, subject)
    return pki
