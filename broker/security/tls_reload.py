"""Whether a listener may take new TLS settings at run time: Kafka's SslFactory
validateReconfiguration. The new settings must build a server context (the keystore and
truststore load, the key password opens the key), and the new certificate must name the
same subject and subject alternative names as the one it replaces: a renewal, not a new
identity (Kafka's ``ssl.allow.dn.changes`` / ``ssl.allow.san.changes`` are off by default;
Castle has no such switches).
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping

from cryptography import x509

from broker.security.tls import KEYSTORE_LOCATION, build_server_context


class TlsReconfigurationError(ValueError):
    """New TLS settings a listener cannot take; the message says why, as Kafka's does."""


def _identity(settings: Mapping[str, str]) -> tuple[str, list[str]] | None:
    """(subject, sorted SANs) of the keystore's leaf certificate; None without a keystore file."""
    location = settings.get(KEYSTORE_LOCATION) or ""
    if not location:
        return None
    with open(location, "rb") as handle:
        leaf = x509.load_pem_x509_certificates(handle.read())[0]
    try:
        names = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        sans = sorted(str(name.value) for name in names)
    except x509.ExtensionNotFound:
        sans = []
    return leaf.subject.rfc4514_string(), sans


def check_replacement(old: Mapping[str, str], new: Mapping[str, str]) -> ssl.SSLContext:
    """The server context of ``new``, if a listener serving ``old`` may take it."""
    try:
        context = build_server_context(new)
        fresh = _identity(new)
    except (OSError, ValueError, ssl.SSLError) as exc:
        raise TlsReconfigurationError(f"Validation of dynamic config update of SSLFactory failed: {exc}") from None
    try:
        before = _identity(old)
    except (OSError, ValueError):
        before = None  # the old file is gone or broken: nothing to stay compatible with
    if before is not None and fresh is not None and before != fresh:
        raise TlsReconfigurationError(
            "Validation of dynamic config update of SSLFactory failed: Keystore DistinguishedName or "
            f"SubjectAltNames do not match: existingDN = {before[0]}, newDN = {fresh[0]}, "
            f"existingSAN = {before[1]}, newSAN = {fresh[1]}")
    return context
