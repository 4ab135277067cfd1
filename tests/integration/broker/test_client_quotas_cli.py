"""kafka-configs.sh of Kafka 4.4 manages client quotas on a real Castle broker
(AlterClientQuotas, DescribeClientQuotas): users, client ids, (user, client id) pairs, their
defaults; and a user's quotas sit beside its SCRAM credentials without either losing the other.

Each assertion reads the tool's own output, as an operator would.
"""

from __future__ import annotations

import subprocess
import uuid

import pytest

from tests.integration.conftest import Broker
from tests.kafka_cli import GROUP_CONFIGS_VERSION, TOOLS_CONFIG_COMMAND, missing_tools, run_tool

pytestmark = [pytest.mark.integration, pytest.mark.kafka_cli, pytest.mark.timeout(600)]


@pytest.fixture(autouse=True)
def kafka_tools_present() -> None:
    missing = missing_tools(GROUP_CONFIGS_VERSION)
    if missing:
        pytest.fail(f"Kafka's CLI needs {', '.join(missing)} on PATH (apt-get install default-jre-headless maven)")


def configs(broker: Broker, *args: str) -> subprocess.CompletedProcess[str]:
    return run_tool(TOOLS_CONFIG_COMMAND, ["--bootstrap-server", broker.bootstrap, *args], version=GROUP_CONFIGS_VERSION)


def ok(broker: Broker, *args: str) -> str:
    done = configs(broker, *args)
    assert done.returncode == 0, f"kafka-configs {' '.join(args)}: {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done.stdout


def test_kafka_configs_sets_describes_and_deletes_quotas_of_every_entity_kind(broker: Broker) -> None:
    user, client = f"u{uuid.uuid4().hex[:8]}", f"c{uuid.uuid4().hex[:8]}"
    out = ok(broker, "--alter", "--entity-type", "users", "--entity-name", user,
             "--add-config", "producer_byte_rate=1048576,consumer_byte_rate=2097152")
    assert f"Completed updating config for user {user}." in out, out
    out = ok(broker, "--alter", "--entity-type", "clients", "--entity-name", client,
             "--add-config", "request_percentage=50.5")
    assert f"Completed updating config for client {client}." in out, out
    ok(broker, "--alter", "--entity-type", "users", "--entity-name", user, "--entity-type", "clients",
       "--entity-name", client, "--add-config", "producer_byte_rate=4096")
    ok(broker, "--alter", "--entity-type", "users", "--entity-default", "--add-config", "consumer_byte_rate=8192")
    ok(broker, "--alter", "--entity-type", "clients", "--entity-default", "--add-config", "controller_mutation_rate=10")

    out = ok(broker, "--describe", "--entity-type", "users", "--entity-name", user)
    assert f"Quota configs for user-principal '{user}' are" in out, out
    assert "producer_byte_rate=1048576.0" in out and "consumer_byte_rate=2097152.0" in out, out
    out = ok(broker, "--describe", "--entity-type", "clients", "--entity-name", client)
    assert f"Quota configs for client-id '{client}' are request_percentage=50.5" in out, out
    out = ok(broker, "--describe", "--entity-type", "users", "--entity-name", user, "--entity-type", "clients",
             "--entity-name", client)
    assert f"Quota configs for user-principal '{user}', client-id '{client}' are producer_byte_rate=4096.0" in out, out
    out = ok(broker, "--describe", "--entity-type", "users", "--entity-default")
    assert "Quota configs for the default user-principal are consumer_byte_rate=8192.0" in out, out
    out = ok(broker, "--describe", "--entity-type", "clients", "--entity-default")
    assert "Quota configs for the default client-id are controller_mutation_rate=10.0" in out, out

    ok(broker, "--alter", "--entity-type", "users", "--entity-name", user, "--delete-config", "consumer_byte_rate")
    out = ok(broker, "--describe", "--entity-type", "users", "--entity-name", user)
    assert "producer_byte_rate=1048576.0" in out and "consumer_byte_rate" not in out, out


def test_kafka_configs_refuses_bad_quotas_and_changes_nothing(broker: Broker) -> None:
    client = f"c{uuid.uuid4().hex[:8]}"
    ok(broker, "--alter", "--entity-type", "clients", "--entity-name", client, "--add-config", "producer_byte_rate=1000")
    for bad in ("producer_byte_rate=2000,consumer_byte_rate=-5", "producer_byte_rate=2000,consumer_byte_rate=1.5",
                "producer_byte_rate=2000,connection_creation_rate=10"):
        done = configs(broker, "--alter", "--entity-type", "clients", "--entity-name", client, "--add-config", bad)
        assert done.returncode != 0, (bad, done.stdout)
    out = ok(broker, "--describe", "--entity-type", "clients", "--entity-name", client)
    assert f"Quota configs for client-id '{client}' are producer_byte_rate=1000.0" in out, out


def test_kafka_configs_ip_quota(broker: Broker) -> None:
    ok(broker, "--alter", "--entity-type", "ips", "--entity-name", "127.0.0.7", "--add-config",
       "connection_creation_rate=20")
    out = ok(broker, "--describe", "--entity-type", "ips", "--entity-name", "127.0.0.7")
    assert "Quota configs for ip '127.0.0.7' are connection_creation_rate=20.0" in out, out
    done = configs(broker, "--alter", "--entity-type", "ips", "--entity-name", "127.0.0.7", "--add-config",
                   "producer_byte_rate=10")
    assert done.returncode != 0, done.stdout


def test_users_describe_shows_quotas_and_scram_credentials_side_by_side(broker: Broker) -> None:
    user = f"u{uuid.uuid4().hex[:8]}"
    ok(broker, "--alter", "--entity-type", "users", "--entity-name", user, "--add-config",
       "SCRAM-SHA-256=[iterations=8192,password=secret-1]")
    ok(broker, "--alter", "--entity-type", "users", "--entity-name", user, "--add-config", "producer_byte_rate=1024")
    ok(broker, "--alter", "--entity-type", "users", "--entity-name", user, "--add-config",
       "SCRAM-SHA-512=[password=secret-2]")
    out = ok(broker, "--describe", "--entity-type", "users", "--entity-name", user)
    assert f"Quota configs for user-principal '{user}' are producer_byte_rate=1024.0" in out, out
    assert f"SCRAM credential configs for user-principal '{user}' are SCRAM-SHA-256=iterations=8192, " \
           f"SCRAM-SHA-512=iterations=4096" in out, out
