"""TLS contexts from Kafka's SSL settings, and Kafka's principal of an SSL client.

Operators configure Castle's SSL listeners with Kafka's own keys (``ssl.keystore.location``,
``ssl.client.auth``, ``ssl.enabled.protocols``...) so that a Kafka ``server.properties`` carries
over. Java reads JKS and PKCS#12 keystores; Python's ``ssl`` (OpenSSL) reads PEM, so Castle
supports exactly Kafka's PEM keystores (KIP-651):

* ``ssl.keystore.type=PEM`` with ``ssl.keystore.location`` naming ONE file that holds the
  certificate chain (leaf first) and the PKCS#8 private key, the key possibly encrypted with
  ``ssl.key.password``; or, also from KIP-651, the PEM text itself in ``ssl.keystore.key`` and
  ``ssl.keystore.certificate.chain``;
* ``ssl.truststore.type=PEM`` with ``ssl.truststore.location`` naming a PEM CA bundle, or the
  bundle's text in ``ssl.truststore.certificates``.

A missing key means Kafka's default (``KAFKA_DEFAULTS``), with one exception: Kafka's default
store type is JKS, which Castle cannot read, so a missing or empty store type means PEM; an
explicit ``JKS`` or ``PKCS12`` is refused, with a message saying to convert to PEM.

Every configuration error is a ``TlsConfigError`` (a ``ValueError``) naming the key and, for
files, the file, so a broker can refuse to start (exit 2) with a message an operator can act on.

Choices where Kafka (Java's JSSE) and Python's ``ssl`` differ:

* ``ssl.enabled.protocols`` accepts TLSv1.2 and TLSv1.3 (in any case). TLSv1, TLSv1.1, SSLv3 and
  SSLv2Hello are REFUSED as insecure rather than silently dropped: Java 17+ and OpenSSL 3 disable
  them anyway, and a broker that says it enabled them would be lying.
* ``ssl.protocol`` (the JSSE SSLContext algorithm) accepts TLS, TLSv1.2 and TLSv1.3. As Kafka
  documents, ``TLSv1.2`` stops a *client* from using TLS 1.3; on the server side it changes
  nothing (JSSE's server contexts accept every enabled protocol).
* ``ssl.cipher.suites`` takes IANA names (Java's). They are translated to OpenSSL's names through
  ``IANA_TO_OPENSSL`` for ``SSLContext.set_ciphers``. TLS 1.3 suites (``TLS_AES_128_GCM_SHA256``,
  ``TLS_AES_256_GCM_SHA384``, ``TLS_CHACHA20_POLY1305_SHA256``) are accepted but CANNOT be
  restricted: Python 3.11 has no ``set_ciphersuites``, so all three stay enabled whenever TLS 1.3
  is negotiated. What JSSE does with a list is kept at the protocol level: a list with no TLS 1.3
  suite disables TLS 1.3 (Java cannot negotiate a protocol with no suite for it), and a list with
  only TLS 1.3 suites disables TLS 1.2.
* DHE suites map, but a Python server context has no Diffie-Hellman parameters unless someone
  loads them, so a Castle server never negotiates them; ECDHE is what clients use.
"""

from __future__ import annotations

import os
import shutil
import ssl
import tempfile
from collections.abc import Callable, Mapping
from typing import NamedTuple

from cryptography import x509

# Kafka's keys, by name, so callers (config validation, docs) share one spelling.
KEYSTORE_TYPE = "ssl.keystore.type"
KEYSTORE_LOCATION = "ssl.keystore.location"
KEYSTORE_KEY = "ssl.keystore.key"
KEYSTORE_CERTIFICATE_CHAIN = "ssl.keystore.certificate.chain"
KEY_PASSWORD = "ssl.key.password"
TRUSTSTORE_TYPE = "ssl.truststore.type"
TRUSTSTORE_LOCATION = "ssl.truststore.location"
TRUSTSTORE_CERTIFICATES = "ssl.truststore.certificates"
CLIENT_AUTH = "ssl.client.auth"
PROTOCOL = "ssl.protocol"
ENABLED_PROTOCOLS = "ssl.enabled.protocols"
CIPHER_SUITES = "ssl.cipher.suites"
ENDPOINT_IDENTIFICATION_ALGORITHM = "ssl.endpoint.identification.algorithm"

PEM_KEYSTORE_KEYS: tuple[str, ...] = (KEYSTORE_TYPE, KEYSTORE_LOCATION, KEYSTORE_KEY, KEYSTORE_CERTIFICATE_CHAIN, KEY_PASSWORD)
PEM_TRUSTSTORE_KEYS: tuple[str, ...] = (TRUSTSTORE_TYPE, TRUSTSTORE_LOCATION, TRUSTSTORE_CERTIFICATES)
SSL_KEYS: tuple[str, ...] = (
    *PEM_KEYSTORE_KEYS,
    *PEM_TRUSTSTORE_KEYS,
    CLIENT_AUTH,
    PROTOCOL,
    ENABLED_PROTOCOLS,
    CIPHER_SUITES,
    ENDPOINT_IDENTIFICATION_ALGORITHM,
)
# Values that hold secrets (Kafka's PASSWORD-typed configs): never log them.
SECRET_KEYS: frozenset[str] = frozenset({KEY_PASSWORD, KEYSTORE_KEY})

# Kafka's defaults for the keys above (store types: see the module docstring).
KAFKA_DEFAULTS: Mapping[str, str] = {
    KEYSTORE_TYPE: "JKS",
    TRUSTSTORE_TYPE: "JKS",
    CLIENT_AUTH: "none",
    PROTOCOL: "TLSv1.3",
    ENABLED_PROTOCOLS: "TLSv1.2,TLSv1.3",
    CIPHER_SUITES: "",
    ENDPOINT_IDENTIFICATION_ALGORITHM: "https",
}

ANONYMOUS_PRINCIPAL = "User:ANONYMOUS"


class TlsConfigError(ValueError):
    """A Kafka SSL setting Castle cannot use; the message names the key (and file)."""


# IANA (Java) cipher suite name -> OpenSSL name, TLS 1.2 suites. OpenSSL's scheme: the key
# exchange prefix (ECDHE-ECDSA-, ECDHE-RSA-, DHE-RSA-, none for plain RSA key transport), the
# cipher without separators (AES128-GCM, CHACHA20-POLY1305), then the MAC/PRF hash; CBC suites
# drop "CBC" and keep the hash ("-SHA" for SHA-1). CHACHA20 suites drop the SHA256 suffix.
IANA_TO_OPENSSL: Mapping[str, str] = {
    # AEAD suites, the ones worth using.
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256": "ECDHE-ECDSA-AES128-GCM-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384": "ECDHE-ECDSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256": "ECDHE-RSA-AES128-GCM-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384": "ECDHE-RSA-AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-ECDSA-CHACHA20-POLY1305",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-RSA-CHACHA20-POLY1305",
    "TLS_DHE_RSA_WITH_AES_128_GCM_SHA256": "DHE-RSA-AES128-GCM-SHA256",
    "TLS_DHE_RSA_WITH_AES_256_GCM_SHA384": "DHE-RSA-AES256-GCM-SHA384",
    "TLS_DHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "DHE-RSA-CHACHA20-POLY1305",
    "TLS_RSA_WITH_AES_128_GCM_SHA256": "AES128-GCM-SHA256",
    "TLS_RSA_WITH_AES_256_GCM_SHA384": "AES256-GCM-SHA384",
    # CBC with SHA-256/384 (TLS 1.2 only).
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256": "ECDHE-ECDSA-AES128-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA384": "ECDHE-ECDSA-AES256-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256": "ECDHE-RSA-AES128-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA384": "ECDHE-RSA-AES256-SHA384",
    "TLS_DHE_RSA_WITH_AES_128_CBC_SHA256": "DHE-RSA-AES128-SHA256",
    "TLS_DHE_RSA_WITH_AES_256_CBC_SHA256": "DHE-RSA-AES256-SHA256",
    "TLS_RSA_WITH_AES_128_CBC_SHA256": "AES128-SHA256",
    "TLS_RSA_WITH_AES_256_CBC_SHA256": "AES256-SHA256",
    # CBC with SHA-1 MAC: legacy, still in JSSE's default list, so old configs name them.
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA": "ECDHE-ECDSA-AES128-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA": "ECDHE-ECDSA-AES256-SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA": "ECDHE-RSA-AES128-SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA": "ECDHE-RSA-AES256-SHA",
    "TLS_DHE_RSA_WITH_AES_128_CBC_SHA": "DHE-RSA-AES128-SHA",
    "TLS_DHE_RSA_WITH_AES_256_CBC_SHA": "DHE-RSA-AES256-SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA": "AES128-SHA",
    "TLS_RSA_WITH_AES_256_CBC_SHA": "AES256-SHA",
}
# TLS 1.3 suites have the same name in IANA and OpenSSL, and cannot be restricted (docstring).
TLS13_SUITES: frozenset[str] = frozenset({"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256"})
# Java's "SCSV" pseudo-suites appear in some copied lists; they are signalling values, not suites.
_IGNORED_SUITES = frozenset({"TLS_EMPTY_RENEGOTIATION_INFO_SCSV", "TLS_FALLBACK_SCSV"})

_PROTOCOLS: Mapping[str, ssl.TLSVersion] = {"tlsv1.2": ssl.TLSVersion.TLSv1_2, "tlsv1.3": ssl.TLSVersion.TLSv1_3}
_INSECURE_PROTOCOLS = frozenset({"tlsv1", "tlsv1.1", "sslv3", "sslv2hello", "ssl"})
_CLIENT_AUTH: Mapping[str, ssl.VerifyMode] = {
    "none": ssl.CERT_NONE,
    "requested": ssl.CERT_OPTIONAL,
    "required": ssl.CERT_REQUIRED,
}


class CipherSelection(NamedTuple):
    """``ssl.cipher.suites`` split by protocol: OpenSSL names for TLS 1.2, IANA names for TLS 1.3."""

    tls12: tuple[str, ...]
    tls13: tuple[str, ...]


def _setting(settings: Mapping[str, str], key: str) -> str:
    value = settings.get(key)
    if value is None:
        return KAFKA_DEFAULTS.get(key, "")
    return value.strip()


def _comma_list(value: str) -> list[str]:
    return [item.strip() for item in value.split(",") if item.strip()]


def map_cipher_suites(value: str) -> CipherSelection:
    """Translates Kafka's comma list of IANA suite names; an unknown name is a TlsConfigError."""
    tls12: list[str] = []
    tls13: list[str] = []
    for name in _comma_list(value):
        upper = name.upper()
        if upper in TLS13_SUITES:
            tls13.append(upper)
        elif upper in IANA_TO_OPENSSL:
            tls12.append(IANA_TO_OPENSSL[upper])
        elif upper in _IGNORED_SUITES:
            continue
        else:
            raise TlsConfigError(
                f"{CIPHER_SUITES}: unknown or unsupported cipher suite {name!r} "
                f"(use IANA names such as TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 or TLS_AES_128_GCM_SHA256)"
            )
    return CipherSelection(tuple(tls12), tuple(tls13))


def _protocol_range(settings: Mapping[str, str], *, client: bool) -> tuple[ssl.TLSVersion, ssl.TLSVersion]:
    enabled: list[ssl.TLSVersion] = []
    for name in _comma_list(_setting(settings, ENABLED_PROTOCOLS)):
        lowered = name.lower()
        if lowered in _INSECURE_PROTOCOLS:
            raise TlsConfigError(f"{ENABLED_PROTOCOLS}: {name} is insecure and not supported; use TLSv1.2 and/or TLSv1.3")
        if lowered not in _PROTOCOLS:
            raise TlsConfigError(f"{ENABLED_PROTOCOLS}: unknown protocol {name!r} (supported: TLSv1.2, TLSv1.3)")
        enabled.append(_PROTOCOLS[lowered])
    if not enabled:
        raise TlsConfigError(f"{ENABLED_PROTOCOLS} is empty; list TLSv1.2 and/or TLSv1.3")
    low, high = min(enabled), max(enabled)

    protocol = _setting(settings, PROTOCOL)
    lowered = protocol.lower()
    if lowered in _INSECURE_PROTOCOLS:
        raise TlsConfigError(f"{PROTOCOL}: {protocol} is insecure and not supported; use TLSv1.3, TLSv1.2 or TLS")
    if lowered not in ("tls", "tlsv1.2", "tlsv1.3"):
        raise TlsConfigError(f"{PROTOCOL}: unknown protocol {protocol!r} (supported: TLSv1.3, TLSv1.2, TLS)")
    # Kafka: with ssl.protocol=TLSv1.2 "clients will not use TLSv1.3 even if it is one of the
    # values in ssl.enabled.protocols"; JSSE server contexts are not capped that way.
    if client and lowered == "tlsv1.2":
        high = min(high, ssl.TLSVersion.TLSv1_2)
        if high < low:
            raise TlsConfigError(f"{PROTOCOL}=TLSv1.2 leaves no protocol of {ENABLED_PROTOCOLS} for a client")
    return low, high


def _apply_protocols_and_ciphers(context: ssl.SSLContext, settings: Mapping[str, str], *, client: bool) -> None:
    low, high = _protocol_range(settings, client=client)
    selection = map_cipher_suites(_setting(settings, CIPHER_SUITES))
    if selection.tls12 or selection.tls13:
        # As in JSSE, a protocol none of the listed suites can serve is not negotiated.
        if not selection.tls13:
            high = min(high, ssl.TLSVersion.TLSv1_2)
        if not selection.tls12:
            low = max(low, ssl.TLSVersion.TLSv1_3)
        if high < low:
            raise TlsConfigError(f"{CIPHER_SUITES} has no suite for any protocol of {ENABLED_PROTOCOLS}")
    if selection.tls12:
        try:
            context.set_ciphers(":".join(selection.tls12))
        except ssl.SSLError as exc:
            raise TlsConfigError(
                f"{CIPHER_SUITES}: this OpenSSL ({ssl.OPENSSL_VERSION}) supports none of {list(selection.tls12)}"
            ) from exc
    # Order matters: setting a minimum above the current maximum is refused by OpenSSL.
    context.maximum_version = ssl.TLSVersion.MAXIMUM_SUPPORTED
    context.minimum_version = low
    context.maximum_version = high


def _check_store_type(settings: Mapping[str, str], key: str) -> None:
    # Missing or empty means PEM, not Kafka's JKS default: PEM is all Castle reads.
    value = (settings.get(key) or "").strip()
    if value and value.upper() != "PEM":
        raise TlsConfigError(
            f"{key}={value} is not supported; Castle reads only PEM stores (KIP-651): set {key}=PEM and convert the store"
        )


def _no_password(path: str) -> Callable[[], str]:
    # A callback, so OpenSSL never prompts on the terminal for an encrypted key.
    def refuse() -> str:
        raise TlsConfigError(f"keystore {path}: the private key is encrypted but {KEY_PASSWORD} is not set")

    return refuse


def _load_keystore(context: ssl.SSLContext, settings: Mapping[str, str], *, required: bool) -> bool:
    """Loads the PEM keystore into ``context``; False when none is configured (and not required)."""
    _check_store_type(settings, KEYSTORE_TYPE)
    location = _setting(settings, KEYSTORE_LOCATION)
    key_text = _setting(settings, KEYSTORE_KEY)
    chain_text = _setting(settings, KEYSTORE_CERTIFICATE_CHAIN)
    if location and (key_text or chain_text):
        raise TlsConfigError(f"set either {KEYSTORE_LOCATION} or {KEYSTORE_KEY} with {KEYSTORE_CERTIFICATE_CHAIN}, not both")
    if bool(key_text) != bool(chain_text):
        raise TlsConfigError(f"{KEYSTORE_KEY} and {KEYSTORE_CERTIFICATE_CHAIN} go together; one is missing")
    if not location and not key_text:
        if required:
            raise TlsConfigError(f"an SSL listener needs a keystore: set {KEYSTORE_LOCATION} (PEM: chain and key in one file)")
        return False
    password = settings.get(KEY_PASSWORD) or ""
    if location:
        if not os.path.isfile(location):
            raise TlsConfigError(f"{KEYSTORE_LOCATION}={location}: no such file")
        _load_chain(context, location, location, password)
        return True
    # Inline PEM (KIP-651): OpenSSL loads keys only from files, so the text goes to a private
    # temporary file (directory mode 0700) that is removed as soon as it is loaded.
    directory = tempfile.mkdtemp(prefix="castle-keystore-")
    try:
        path = os.path.join(directory, "keystore.pem")
        with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as f:
            f.write(chain_text.strip() + "\n" + key_text.strip() + "\n")
        _load_chain(context, path, f"{KEYSTORE_KEY}/{KEYSTORE_CERTIFICATE_CHAIN}", password)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    return True


def _load_chain(context: ssl.SSLContext, path: str, where: str, password: str) -> None:
    # load_cert_chain(certfile) with no keyfile reads the key from the same file: exactly
    # Kafka's one-file PEM keystore. PEM blocks of other types are skipped, so order is free.
    # OpenSSL's own error for a missing part is a bare "PEM lib": say which part is missing.
    try:
        with open(path, encoding="ascii", errors="replace") as f:
            text = f.read()
    except OSError as exc:
        raise TlsConfigError(f"cannot read keystore {where}: {exc}") from exc
    for marker, part in (("CERTIFICATE-----", "certificate"), ("PRIVATE KEY-----", "private key")):
        if marker not in text:
            raise TlsConfigError(f"keystore {where} holds no PEM {part} (a PEM keystore holds the chain and the key in one file)")
    try:
        context.load_cert_chain(path, password=password if password else _no_password(where))
    except TlsConfigError:
        raise
    except (ssl.SSLError, OSError, ValueError) as exc:
        hint = f" (wrong {KEY_PASSWORD}?)" if password else ""
        raise TlsConfigError(f"cannot load keystore {where}: {exc}{hint}") from exc


def _load_truststore(context: ssl.SSLContext, settings: Mapping[str, str]) -> bool:
    """Loads the PEM CA bundle into ``context``; False when none is configured."""
    _check_store_type(settings, TRUSTSTORE_TYPE)
    location = _setting(settings, TRUSTSTORE_LOCATION)
    certificates = _setting(settings, TRUSTSTORE_CERTIFICATES)
    if location and certificates:
        raise TlsConfigError(f"set either {TRUSTSTORE_LOCATION} or {TRUSTSTORE_CERTIFICATES}, not both")
    try:
        if location:
            if not os.path.isfile(location):
                raise TlsConfigError(f"{TRUSTSTORE_LOCATION}={location}: no such file")
            context.load_verify_locations(cafile=location)
            return True
        if certificates:
            context.load_verify_locations(cadata=certificates)
            return True
    except (ssl.SSLError, OSError) as exc:
        where = f"{TRUSTSTORE_LOCATION}={location}" if location else TRUSTSTORE_CERTIFICATES
        raise TlsConfigError(f"cannot load truststore {where}: {exc}") from exc
    return False


def build_server_context(settings: Mapping[str, str]) -> ssl.SSLContext:
    """The SSLContext of an SSL listener, from Kafka's ``ssl.*`` settings (module docstring).

    Needs a keystore. ``ssl.client.auth`` requested/required need a truststore to verify the
    client's certificate against; an invalid certificate (unknown CA, expired) fails the
    handshake in both modes, "requested" only lets a client send none.
    """
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    # Kafka never renegotiates; refusing it closes a CPU-exhaustion hole in TLS 1.2.
    context.options |= ssl.OP_NO_RENEGOTIATION
    _apply_protocols_and_ciphers(context, settings, client=False)
    _load_keystore(context, settings, required=True)

    client_auth = _setting(settings, CLIENT_AUTH).lower() or "none"
    if client_auth not in _CLIENT_AUTH:
        raise TlsConfigError(f"{CLIENT_AUTH}={client_auth}: expected none, requested or required")
    has_truststore = _load_truststore(context, settings)
    if client_auth != "none" and not has_truststore:
        raise TlsConfigError(f"{CLIENT_AUTH}={client_auth} needs a truststore to verify clients: set {TRUSTSTORE_LOCATION}")
    context.verify_mode = _CLIENT_AUTH[client_auth]
    return context


def build_client_context(settings: Mapping[str, str]) -> ssl.SSLContext:
    """The SSLContext for Castle's own outgoing connections (broker to broker), same keys.

    The server is always verified: against the truststore, or the system's CAs when none is
    set (as Java falls back to its cacerts). ``ssl.endpoint.identification.algorithm`` "https"
    (Kafka's default) also checks the host name against the certificate; "" does not. The
    keystore, when given, is the certificate presented to servers that ask for one.
    """
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.options |= ssl.OP_NO_RENEGOTIATION
    _apply_protocols_and_ciphers(context, settings, client=True)
    _load_keystore(context, settings, required=False)
    if not _load_truststore(context, settings):
        context.load_default_certs(ssl.Purpose.SERVER_AUTH)

    algorithm = _setting(settings, ENDPOINT_IDENTIFICATION_ALGORITHM)
    if algorithm.lower() == "https":
        context.check_hostname = True
    elif algorithm == "":
        context.check_hostname = False
    else:
        raise TlsConfigError(f"{ENDPOINT_IDENTIFICATION_ALGORITHM}={algorithm}: expected https or empty")
    context.verify_mode = ssl.CERT_REQUIRED
    return context


# --- Kafka's principal of an SSL client -------------------------------------------------
#
# Kafka's DefaultKafkaPrincipalBuilder names an SSL client "User:" + the peer's
# X500Principal.getName(), Java's RFC 2253 form, and User:ANONYMOUS without a certificate.
# cryptography's Name.rfc4514_string() is close but not equal (it does not escape "=" or a
# "#" inside a value, escapes only one leading/trailing space, and prints attributes without
# an RFC 2253 keyword as OID=text where Java prints OID=#hex of the DER value), and ACLs
# compare these strings byte for byte, so the DN is rendered here from the DER, following
# Java 17's sun.security.x509.AVA.toRFC2253String (checked against it by hand).

# The only keywords Java uses in RFC 2253 form; every other attribute is printed by OID.
_RFC2253_KEYWORDS: Mapping[str, str] = {
    "2.5.4.3": "CN",
    "2.5.4.6": "C",
    "2.5.4.7": "L",
    "2.5.4.8": "ST",
    "2.5.4.10": "O",
    "2.5.4.11": "OU",
    "2.5.4.9": "STREET",
    "0.9.2342.19200300.100.1.25": "DC",
    "0.9.2342.19200300.100.1.1": "UID",
}
# DER tags Java prints as text: UTF8String, PrintableString, T61String, IA5String,
# GeneralString, BMPString. Others (UniversalString, VisibleString, ...) are printed as #hex.
_TEXT_TAGS = frozenset({0x0C, 0x13, 0x14, 0x16, 0x1B, 0x1E})
_ESCAPED = frozenset(',=+<>#;"\\')


def _tlv(data: bytes, pos: int) -> tuple[int, int, int]:
    """(tag, start of contents, end) of the DER element at ``pos``."""
    if pos + 2 > len(data):
        raise ValueError("truncated DER")
    tag = data[pos]
    length = data[pos + 1]
    start = pos + 2
    if length & 0x80:
        count = length & 0x7F
        if count == 0 or count > 4 or start + count > len(data):
            raise ValueError("bad DER length")
        length = int.from_bytes(data[start : start + count], "big")
        start += count
    end = start + length
    if end > len(data):
        raise ValueError("truncated DER")
    return tag, start, end


def _children(data: bytes, start: int, end: int) -> list[tuple[int, int, int, int]]:
    """(tag, contents start, end, element start) of each element in data[start:end]."""
    items = []
    pos = start
    while pos < end:
        tag, content, stop = _tlv(data, pos)
        items.append((tag, content, stop, pos))
        pos = stop
    return items


def _oid(content: bytes) -> str:
    arcs: list[int] = []
    value = 0
    for byte in content:
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            arcs.append(value)
            value = 0
    first = arcs[0]
    head = [0, first] if first < 40 else [1, first - 40] if first < 80 else [2, first - 80]
    return ".".join(str(arc) for arc in head + arcs[1:])


def _escape(text: str) -> str:
    out: list[str] = []
    for char in text:
        if char in _ESCAPED:
            out.append("\\" + char)
        elif char == "\0":
            out.append("\\00")
        else:
            out.append(char)
    chars = "".join(out)
    # Java then escapes every leading and trailing space or CR of the escaped string.
    lead = len(chars) - len(chars.lstrip(" \r"))
    trail = len(chars.rstrip(" \r"))
    return "".join("\\" + c if i < lead or i >= trail else c for i, c in enumerate(chars))


def rfc2253_name(name_der: bytes) -> str:
    """A DER X.500 Name as Java's X500Principal.getName() prints it (RFC 2253)."""
    _, start, end = _tlv(name_der, 0)
    rdns: list[str] = []
    for _, rdn_start, rdn_end, _ in _children(name_der, start, end):
        avas: list[str] = []
        for _, ava_start, ava_end, _ in _children(name_der, rdn_start, rdn_end):
            (oid_tag, oid_start, oid_end, _), (value_tag, value_start, value_end, value_pos) = _children(
                name_der, ava_start, ava_end
            )
            oid = _oid(name_der[oid_start:oid_end])
            keyword = _RFC2253_KEYWORDS.get(oid)
            if keyword is not None and value_tag in _TEXT_TAGS:
                # Java 17 decodes every text type's bytes as UTF-8 (even BMPString).
                avas.append(keyword + "=" + _escape(name_der[value_start:value_end].decode("utf-8", "replace")))
            else:
                avas.append((keyword or oid) + "=#" + name_der[value_pos:value_end].hex())
        # Java keeps a multi-valued RDN's encoded order, joined by "+".
        rdns.append("+".join(avas))
    # RFC 2253 prints the RDN sequence last first: the CN of a leaf comes first.
    return ",".join(reversed(rdns))


def principal_of_certificate(der: bytes | None) -> str:
    """Kafka's default principal of an SSL client: ``User:`` + the subject DN (RFC 2253, Java's form).

    ``der`` is the client's leaf certificate (``SSLObject.getpeercert(binary_form=True)``);
    None or empty (no client certificate) gives ``User:ANONYMOUS``.
    """
    if not der:
        return ANONYMOUS_PRINCIPAL
    certificate = x509.load_der_x509_certificate(der)
    return "User:" + rfc2253_name(certificate.subject.public_bytes())
