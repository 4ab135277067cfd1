"""kafka-configs.sh of Kafka 4.4 manages client quotas on a real Castle broker
(AlterClientQuotas, DescribeClientQuotas): users, client ids, (user, client id) pairs, their
defaults; and a user's quotas sit beside its SCRAM credentials without either losing the other.

Each assertion reads the tool's own output, as an operator would.
"""

from __future__ import annotations

import uuid

import pytest

from tests.integration.conftest import Broker
from tests.kafka_cli import GROUP_CONFIGS_VERSION, kafka_configs, kafka_configs_ok, missing_tools

pytestmark = [pytest.mark.integration, pytest.mark.kafka_cli, pytest.mark.timeout(600)]


@pytest.fixture(autouse=True)
def kafka_tools_present() -> None:
    missing = missing_tools(GROUP_CONFIGS_VERSION)
    if missing:
        pytest.fail(f"Kafka's CLI needs {', '.join(missing)} on PATH (apt-get install default-jre-headless maven)")


def test_kafka_configs_sets_describes_and_deletes_quotas_of_every_entity_kind(broker: Broker) -> None:
    user, client = f"u{uuid.uuid4().hex[:8]}", f"c{uuid.uuid4().hex[:8]}"
    out = kafka_configs_ok(broker.bootstrap, "--alter", "--entity-type", "users", "--entity-name", user,
             "--add-config", "producer_byte_rate=1048576,consumer_byte_rate=2097152")
    assert f"Completed updating config for user {user}." in out, out
    out = kafka_configs_ok(broker.bootstrap, "--alter", "--entity-type", "clients", "--entity-name", client,
             "--add-config", "request_percentage=50.5")
    assert f"Completed updating config for client {client}." in out, out
    kafka_configs_ok(broker.bootstrap, "--alter", "--entity-type", "users", "--entity-name", user, "--entity-type", "clients",
       "--entity-name", client, "--add-config", "producer_byte_rate=4096")
    kafka_configs_ok(broker.bootstrap, "--alter", "--entity-type", "users", "--entity-default", "--add-config", "consumer_byte_rate=8192")
    kafka_configs_ok(broker.bootstrap, "--alter", "--entity-type", "clients", "--entity-default", "--add-config", "controller_mutation_rate=10")

    out = kafka_configs_ok(broker.bootstrap, "--describe", "--entity-type", "users", "--entity-name", user)
    assert f"Quota configs for user-principal '{user}' are" in out, out
    assert "producer_byte_rate=1048576.0" in out and "consumer_byte_rate=2097152.0" in out, out
    out = kafka_configs_ok(broker.bootstrap, "--describe", "--entity-type", "clients", "--entity-name", client)
    assert f"Quota configs for client-id '{client}' are request_percentage=50.5" in out, out
    out = kafka_configs_ok(broker.bootstrap, "--describe", "--entity-type", "users", "--entity-name", user, "--entity-type", "clients",
             "--entity-name", client)
    assert f"Quota configs for user-principal '{user}', client-id '{client}' are producer_byte_rate=4096.0" in out, out
    out = kafka_configs_ok(broker.bootstrap, "--describe", "--entity-type", "users", "--entity-default")
    assert "Quota configs for the default user-principal are consumer_byte_rate=8192.0" in out, out
    out = kafka_configs_ok(broker.bootstrap, "--describe", "--entity-type", "clients", "--entity-default")
    assert "Quota configs for the default client-id are controller_mutation_rate=10.0" in out, out

    kafka_configs_ok(broker.bootstrap, "--alter", "--entity-type", "users", "--entity-name", user, "--delete-config", "consumer_byte_rate")
    out = kafka_configs_ok(broker.bootstrap, "--describe", "--entity-type", "users", "--entity-name", user)
    assert "producer_byte_rate=1048576.0" in out and "consumer_byte_rate" not in out, out


def test_kafka_configs_refuses_bad_quotas_and_changes_nothing(broker: Broker) -> None:
    client = f"c{uuid.uuid4().hex[:8]}"
    kafka_configs_ok(broker.bootstrap, "--alter", "--entity-type", "clients", "--entity-name", client, "--add-config", "producer_byte_rate=1000")
    for bad in ("producer_byte_rate=2000,consumer_byte_rate=-5", "producer_byte_rate=2000,consumer_byte_rate=1.5",
                "producer_byte_rate=2000,connection_creation_rate=10"):
        done = kafka_configs(broker.bootstrap, "--alter", "--entity-type", "clients", "--entity-name", client, "--add-config", bad)
        assert done.returncode != 0, (bad, done.stdout)
    out = kafka_configs_ok(broker.bootstrap, "--describe", "--entity-type", "clients", "--entity-name", client)
    assert f"Quota configs for client-id '{client}' are producer_byte_rate=1000.0" in out, out


def test_kafka_configs_ip_quota(broker: Broker) -> None:
    kafka_configs_ok(broker.bootstrap, "--alter", "--entity-type", "ips", "--entity-name", "127.0.0.7", "--add-config",
       "connection_creation_rate=20")
    out = kafka_configs_ok(broker.bootstrap, "--describe", "--entity-type", "ips", "--entity-name", "127.0.0.7")
    assert "Quota configs for ip '127.0.0.7' are connection_creation_rate=20.0" in out, out
    done = kafka_configs(broker.bootstrap, "--alter", "--entity-type", "ips", "--entity-name", "127.0.0.7", "--add-config",
                   "producer_byte_rate=10")
    assert done.returncode != 0, done.stdout


def test_users_describe_shows_quotas_and_scram_credentials_side_by_side(broker: Broker) -> None:
    user = f"u{uuid.uuid4().hex[:8]}"
    kafka_configs_ok(broker.bootstrap, "--alter", "--entity-type", "users", "--entity-name", user, "--add-config",
       "SCRAM-SHA-256=[iterations=8192,password=secret-1]")
    kafka_configs_ok(broker.bootstrap, "--alter", "--entity-type", "users", "--entity-name", user, "--add-config", "producer_byte_rate=1024")
    kafka_configs_ok(broker.bootstrap, "--alter", "--entity-type", "users", "--entity-name", user, "--add-config",
       "SCRAM-SHA-512=[password=secret-2]")
    out = kafka_configs_ok(broker.bootstrap, "--describe", "--entity-type", "users", "--entity-name", user)
    assert f"Quota configs for user-principal '{user}' are producer_byte_rate=1024.0" in out, out
    assert f"SCRAM credential configs for user-principal '{user}' are SCRAM-SHA-256=iterations=8192, " \
           f"SCRAM-SHA-512=iterations=4096" in out, out
