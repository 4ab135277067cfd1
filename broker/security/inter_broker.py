"""How this broker's own clients (the coordinator reaching offsets partitions led elsewhere,
the replica fetchers) connect to other brokers: on ``inter.broker.listener.name``, with TLS
when that listener's protocol has it, and SASL with Kafka's settings when it has that:

    sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512     (empty: the listener's first mechanism)
    listener.name.internal.scram-sha-512.sasl.jaas.config=\\
        org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" password="...";

The TLS client context trusts ``ssl.truststore.location`` (the listener's own or the
broker-wide one), presents the keystore's certificate (so ``ssl.client.auth=required``
works between brokers) and checks the other broker's host name unless
``ssl.endpoint.identification.algorithm`` is empty.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass

from broker.config import BrokerConfig
from broker.listeners import SASL_PLAINTEXT, SASL_SSL, SSL
from broker.security.sasl_client import parse_jaas_config
from broker.security.tls import build_client_context


@dataclass(frozen=True, slots=True)
class ClientSecurity:
    ssl_context: ssl.SSLContext | None
    mechanism: str | None  # None: no Kafka SASL; then CASTLE-BROKER with ``proof`` when given
    username: str = ""
    password: str = ""
    proof: tuple[bytes, int] | None = None  # (the cluster's broker secret, this node's id)


def inter_broker_security(config: BrokerConfig, secret: bytes | None = None) -> ClientSecurity | None:
    """How to connect: TLS and Kafka's SASL as the inter-broker listener says; without SASL
    the connection proves with ``secret`` that it comes from a broker (CASTLE-BROKER). None:
    plain, unproven (a check before start, or no secret). Raises ValueError when a setting
    is missing or wrong (``castle serve`` checks it before starting: exit code 2)."""
    listeners = config.listeners
    name = listeners.inter_broker
    protocol = listeners.protocol_map[name]
    proof = (secret, config.node_id) if secret is not None else None
    context = build_client_context(config.tls_settings(name)) if protocol in (SSL, SASL_SSL) else None
    if protocol not in (SASL_PLAINTEXT, SASL_SSL):
        return ClientSecurity(context, None, proof=proof) if context is not None or proof is not None else None
    enabled = [m for m in str(config.for_listener(name, "sasl.enabled.mechanisms")).split(",") if m]
    mechanism = config.get_str("sasl.mechanism.inter.broker.protocol") or (enabled[0] if enabled else "")
    if mechanism not in enabled:
        raise ValueError(f"sasl.mechanism.inter.broker.protocol {mechanism or '(none)'} is not enabled on listener {name}")
    jaas = config.jaas_config(name, mechanism)
    if not jaas:
        raise ValueError(f"listener.name.{name.lower()}.{mechanism.lower()}.sasl.jaas.config is needed: brokers "
                         f"authenticate to each other on {name} ({protocol})")
    username, password = parse_jaas_config(jaas, mechanism)
    return ClientSecurity(context, mechanism, username, password)

