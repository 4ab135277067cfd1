"""CASTLE-BROKER (broker/security/broker_proof.py): a broker proves it knows the cluster's
secret; nothing else (a name, a replayed answer, another secret) makes a connection a broker's."""

from __future__ import annotations

import pytest

from broker.config import load_config
from broker.security.broker_proof import BrokerProofClient, BrokerProofServer
from broker.security.broker_security import BrokerSecurity
from broker.security.inter_broker import ClientSecurity
from broker.security.sasl_server import SaslAuthenticationFailed

SECRET = bytes(range(32))


def exchange(server: BrokerProofServer, client: BrokerProofClient) -> None:
    token: bytes | None = client.first()
    while token is not None:
        step = server.step(token)
        token = client.step(step.challenge)
        if step.complete:
            break


def test_the_right_secret_makes_a_broker_principal_of_its_own_type() -> None:
    server = BrokerProofServer(SECRET)
    exchange(server, BrokerProofClient(SECRET, 7))
    assert server.principal == "CastleBroker:7"
    security = BrokerSecurity(load_config(None, {}))
    assert security.is_broker(server.principal, "127.0.0.1")
    # A SASL user or a certificate can never be named like it.
    assert not security.is_broker("User:castle-broker-7", "127.0.0.1")
    assert not security.is_broker("User:ANONYMOUS", "127.0.0.1")


def test_a_wrong_secret_fails() -> None:
    server = BrokerProofServer(SECRET)
    with pytest.raises(SaslAuthenticationFailed):
        exchange(server, BrokerProofClient(b"\x01" * 32, 7))
    assert server.principal == ""


def test_an_answer_recorded_on_one_connection_fails_on_another() -> None:
    first = BrokerProofServer(SECRET)
    client = BrokerProofClient(SECRET, 3)
    nonce = first.step(client.first()).challenge
    recorded = client.step(nonce)
    assert recorded is not None and first.step(recorded).complete
    second = BrokerProofServer(SECRET)
    second.step(b"3")  # a fresh nonce
    with pytest.raises(SaslAuthenticationFailed):
        second.step(recorded)


def test_a_malformed_node_id_fails_before_any_nonce() -> None:
    with pytest.raises(SaslAuthenticationFailed):
        BrokerProofServer(SECRET).step(b"-1")
    with pytest.raises(SaslAuthenticationFailed):
        BrokerProofServer(SECRET).step(b"12345678901")


def test_the_inter_broker_sasl_user_counts_as_a_broker() -> None:
    security = BrokerSecurity(load_config(None, {}))
    security.set_broker_secret(SECRET, ClientSecurity(None, "SCRAM-SHA-512", "broker", "secret"))
    assert security.is_broker("User:broker", "10.0.0.1")
    assert not security.is_broker("User:alice", "10.0.0.1")
