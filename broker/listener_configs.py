"""Dynamic per-listener TLS configs (Kafka's DynamicBrokerConfig for SslConfigs'
reconfigurable keys): ``listener.name.<listener>.ssl.keystore.location`` and its kin, set per
broker with kafka-configs, stored with the other dynamic broker configs, and taken by every
worker without a restart (connections already open keep their session).

Kafka's rules, in its order and words:
* a reconfigurable security config without the listener prefix is refused ("These security
  configs can be dynamically updated only per-listener using the listener prefix: [...]");
* one with the prefix at the cluster default is refused ("Cannot update these configs at
  default cluster level, broker id must be specified: [...]");
* a password config (``ssl.key.password``) is stored encoded with ``password.encoder.secret``
  (broker/security/password_encoder.py); without that secret it is refused ("Password encoder
  secret not configured");
* the new keystore must load and keep the subject and subject alternative names of the one
  it replaces (Kafka's SslFactory: clients pin neither, but a changed identity would break
  hostname checks silently); broker/security/tls_reload.py checks that.
Setting the same ``ssl.keystore.location`` again reloads the file (Kafka's ReloadableFileConfigs:
the way to rotate a certificate in place): every change notice rebuilds the TLS contexts of
the listeners that have dynamic values.

Castle's reconfigurable keys are the PEM keystore and truststore keys it reads
(broker/security/tls.py); Kafka's other ones (JKS passwords, the PEM texts) are named in the
per-listener refusal so the message matches Kafka's, and are otherwise unknown settings.
"""

from __future__ import annotations

import logging
from typing import Callable

from broker.config import SENSITIVE_SETTINGS, listener_prefixed
from broker.security.password_encoder import PasswordDecodeError, PasswordEncoder
from broker.security.tls_reload import TlsReconfigurationError, check_replacement

# The TLS keys Castle reads that Kafka lets change at run time, per listener.
RECONFIGURABLE_TLS = frozenset({"ssl.keystore.type", "ssl.keystore.location", "ssl.key.password",
                                "ssl.truststore.type", "ssl.truststore.location"})
# Kafka's SslConfigs.RECONFIGURABLE_CONFIGS: refused without the listener prefix.
KAFKA_RECONFIGURABLE_TLS = RECONFIGURABLE_TLS | {"ssl.keystore.password", "ssl.truststore.password",
                                                 "ssl.keystore.key", "ssl.keystore.certificate.chain",
                                                 "ssl.truststore.certificates"}
PASSWORDS = frozenset({"ssl.key.password"})

log = logging.getLogger(__name__)

ListenerValues = dict[str, dict[str, str]]  # LISTENER (upper case) -> {ssl key: value}


class ListenerConfigError(ValueError):
    """A listener-prefixed config Kafka would refuse, with Kafka's message."""


def split(name: str) -> tuple[str, str] | None:
    """(LISTENER, key) for a listener-prefixed reconfigurable TLS name; None otherwise."""
    found = listener_prefixed(name)
    if found is None or found[1] not in RECONFIGURABLE_TLS:
        return None
    return found[0].upper(), found[1]


def is_sensitive(name: str) -> bool:
    found = listener_prefixed(name)
    return (found[1] if found else name) in SENSITIVE_SETTINGS


def check_names(names: list[str], per_broker: bool) -> None:
    """Kafka's refusals of where security names are set (a whole new set of dynamic configs)."""
    unprefixed = sorted(name for name in names if name in KAFKA_RECONFIGURABLE_TLS)
    if unprefixed:
        raise ListenerConfigError("These security configs can be dynamically updated only per-listener using the "
                                  f"listener prefix: [{', '.join(unprefixed)}]")
    prefixed = sorted(name for name in names if split(name) is not None)
    if prefixed and not per_broker:
        raise ListenerConfigError("Cannot update these configs at default cluster level, broker id must be "
                                  f"specified: [{', '.join(prefixed)}]")


def prepare(current: dict[str, str], new: dict[str, str], encoder: PasswordEncoder | None,
            serving: Callable[[str], dict[str, str]] | None, static: Callable[[str], dict[str, str]],
            tls_listeners: set[str]) -> dict[str, str]:
    """``new`` (one broker's whole dynamic set, replacing ``current``) as it is to be stored,
    its new passwords encoded. For this broker (``serving``: a listener's TLS settings in use),
    each listener with dynamic TLS values must take them (tls_reload.check_replacement);
    ``static``: a listener's settings from the file."""
    ours = {name: parts for name in new if (parts := split(name)) is not None}
    if any(parts[1] in PASSWORDS for parts in ours.values()) and encoder is None:
        raise ListenerConfigError("Password encoder secret not configured")
    if serving is None:
        return encode_new(current, new, encoder)
    strangers = sorted(name for name, parts in ours.items() if parts[0] not in tls_listeners)
    if strangers:
        raise ListenerConfigError(f"No SSL listener of this broker is named in: [{', '.join(strangers)}]")
    decoded: ListenerValues = {}
    for name, (listener, key) in ours.items():
        value = new[name]
        if key in PASSWORDS and value == current.get(name):
            assert encoder is not None
            try:
                value = encoder.decode(value)
            except PasswordDecodeError as exc:
                raise ListenerConfigError(f"{name}: {exc}") from None
        decoded.setdefault(listener, {})[key] = value
    for listener, values in sorted(decoded.items()):
        try:
            check_replacement(serving(listener), {**static(listener), **values})
        except TlsReconfigurationError as exc:
            raise ListenerConfigError(str(exc)) from None
    return encode_new(current, new, encoder)


def encode_new(current: dict[str, str], new: dict[str, str], encoder: PasswordEncoder | None) -> dict[str, str]:
    """``new`` with the password values that changed from ``current`` (stored, encoded) encoded."""
    out = dict(new)
    for name, value in new.items():
        parts = split(name)
        if parts is not None and parts[1] in PASSWORDS and current.get(name) != value:
            if encoder is None:
                raise ListenerConfigError("Password encoder secret not configured")
            out[name] = encoder.encode(value)
    return out


def listener_values(stored: dict[str, str], encoder: PasswordEncoder | None) -> ListenerValues:
    """The stored per-listener TLS values of one broker, passwords decoded. A password that
    cannot be decoded (no secret here, or another one) leaves its listener out, so that
    listener keeps serving with what it has, and is logged."""
    out: ListenerValues = {}
    broken: set[str] = set()
    for name, value in stored.items():
        parts = split(name)
        if parts is None:
            continue
        listener, key = parts
        if key in PASSWORDS:
            try:
                if encoder is None:
                    raise PasswordDecodeError("Password encoder secret not configured")
                value = encoder.decode(value)
            except PasswordDecodeError as exc:
                log.error("ignoring the dynamic TLS configs of listener %s: %s: %s", listener, name, exc)
                broken.add(listener)
                continue
        out.setdefault(listener, {})[key] = value
    return {listener: values for listener, values in out.items() if listener not in broken}
