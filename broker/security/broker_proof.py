"""CASTLE-BROKER: how a broker proves it is one, on any listener, with the cluster's secret.

Why: a few requests are for brokers only — appending to ``__consumer_offsets`` (the
coordinator writes partitions led by other brokers over the Kafka protocol) and fetching as
a follower (which moves the leader's high watermark and ISR). A client id proves nothing
(anyone can send ``castle-coordinator/7``), and on a PLAINTEXT cluster without an authorizer
there is no principal to check either. So brokers share a secret, kept where the cluster
keeps its id (ZooKeeper's ``/castle/broker_secret``, or a 0600 file with the local backend),
and prove they know it with a SASL exchange under a mechanism no client is offered:

    client -> server   SaslHandshake(CASTLE-BROKER), then the node id, as decimal text
    server -> client   32 random bytes (the nonce)
    client -> server   HMAC-SHA256(secret, "castle-broker\\0" + nonce + node id)
    server -> client   empty: the principal is CastleBroker:<node id>

The nonce makes a recorded answer useless on another connection; the answer is compared
in constant time. With an authorizer, CLUSTER_ACTION granted to a principal works as in
Kafka; a broker whose inter-broker listener has SASL authenticates with Kafka's settings
instead, and its configured principal counts as a broker's (BrokerSecurity.is_broker).
"""

from __future__ import annotations

import hashlib
import hmac
import os

from broker.security.sasl_server import SaslAuthenticationFailed, SaslStep

MECHANISM = "CASTLE-BROKER"
# A principal type of its own: no SASL user ("User:<name>") or certificate ("User:CN=...") can
# be named like it, so a user called "castle-broker-1" gets no broker's rights.
PRINCIPAL_PREFIX = "CastleBroker:"
_CONTEXT = b"castle-broker\0"
NONCE_BYTES = 32


def proof(secret: bytes, nonce: bytes, node_id: int) -> bytes:
    return hmac.new(secret, _CONTEXT + nonce + str(node_id).encode(), hashlib.sha256).digest()


class BrokerProofServer:
    mechanism = MECHANISM

    def __init__(self, secret: bytes) -> None:
        self._secret = secret
        self._nonce: bytes | None = None
        self._node_id = -1
        self._done = False
        self.principal = ""

    def step(self, token: bytes) -> SaslStep:
        if self._done:
            raise SaslAuthenticationFailed("Unexpected token after authentication")
        if self._nonce is None:
            text = token.decode("ascii", "replace")
            if not text.isdigit() or len(text) > 10:
                raise SaslAuthenticationFailed("Authentication failed")
            self._node_id = int(text)
            self._nonce = os.urandom(NONCE_BYTES)
            return SaslStep(self._nonce, False)
        self._done = True
        if not hmac.compare_digest(token, proof(self._secret, self._nonce, self._node_id)):
            raise SaslAuthenticationFailed("Authentication failed")
        self.principal = f"{PRINCIPAL_PREFIX}{self._node_id}"
        return SaslStep(b"", True)


class BrokerProofClient:
    def __init__(self, secret: bytes, node_id: int) -> None:
        self._secret = secret
        self._node_id = node_id
        self._answered = False

    def first(self) -> bytes:
        return str(self._node_id).encode()

    def step(self, challenge: bytes) -> bytes | None:
        if self._answered:
            return None
        self._answered = True
        return proof(self._secret, challenge, self._node_id)
