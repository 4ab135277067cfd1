"""Delegation tokens in a ZooKeeper cluster: two real brokers on a real ZooKeeper. A token
created on one is kept where Kafka 3.9 keeps it (/delegation_token/tokens/<id>, announced under
/delegation_token/token_changes) and authenticates on the other within the notice time; expired
on the second, it stops authenticating on the first."""

from __future__ import annotations

import os
import subprocess
from typing import Callable

import orjson
import pytest

from tests.integration.broker.test_delegation_tokens import PASSWORD, SASL_AUTHENTICATION_FAILED, Raw, create
from tests.integration.conftest import Broker, castle_command, free_port, wait_until
from tests.integration.coordination.test_cluster import cluster_settings, zk

pytestmark = [pytest.mark.integration, pytest.mark.zookeeper, pytest.mark.security, pytest.mark.timeout(180)]


def test_a_token_made_on_one_broker_authenticates_on_the_other(broker_factory: Callable[..., Broker],
                                                                zk_connect: str, tmp_path: str) -> None:
    empty = os.path.join(str(tmp_path), "empty.properties")
    open(empty, "w").close()
    made = subprocess.run(castle_command() + ["users", "set", "alice", "--password-stdin", "--broker-config", empty,
                                              "--override", f"zookeeper.connect={zk_connect}"],
                          input=PASSWORD + "\n", capture_output=True, text=True, timeout=60)
    assert made.returncode == 0, made.stderr
    ports = {}
    brokers = []
    for node_id in (1, 2):
        broker = broker_factory(workers=1, start=False, overrides={
            **cluster_settings(zk_connect, node_id), "delegation.token.secret.key": "cluster-secret"})
        ports[node_id] = free_port()
        broker.overrides["listeners"] = f"PLAINTEXT://{broker.bootstrap},SASL_PLAINTEXT://127.0.0.1:{ports[node_id]}"
        brokers.append(broker.start())

    with Raw(ports[1]) as alice:
        alice.plain("alice")
        token = create(alice)
        assert token.error_code == 0, token
    client = zk(zk_connect)
    try:
        stored = orjson.loads(client.get(f"/delegation_token/tokens/{token.token_id}")[0])
        assert stored["owner"] == "User%3Aalice" and stored["tokenId"] == token.token_id and stored["version"] == 3
        changes = client.get_children("/delegation_token/token_changes")
        assert any(client.get(f"/delegation_token/token_changes/{c}")[0] == token.token_id.encode() for c in changes)
    finally:
        client.stop()
        client.close()

    def authenticates_on(node_id: int) -> bool:
        with Raw(ports[node_id]) as raw:
            return bool(raw.scram_token(token.token_id, bytes(token.hmac)).error_code == 0)

    wait_until(lambda: authenticates_on(2), 10, "broker 2 to accept the token made on broker 1")
    with Raw(ports[2]) as alice:
        alice.plain("alice")
        assert alice.call(40, 2, {"hmac": bytes(token.hmac), "expiry_time_period": -1}).error_code == 0

    def refused_on_1() -> bool:
        with Raw(ports[1]) as raw:
            return bool(raw.scram_token(token.token_id, bytes(token.hmac)).error_code == SASL_AUTHENTICATION_FAILED)

    wait_until(refused_on_1, 10, "broker 1 to refuse the token expired on broker 2")
