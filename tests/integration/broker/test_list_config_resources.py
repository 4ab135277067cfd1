"""ListConfigResources (key 74) against a real broker: v1 lists groups with configs,
client-metrics subscriptions, brokers (as BROKER_LOGGER and BROKER) and topics, in Kafka's
order; a resource type the version does not support fails the request with
UNSUPPORTED_VERSION; v0 lists only subscriptions; Kafka 4.4's kafka-configs.sh lists every
group with configs through it."""

from __future__ import annotations

from typing import Any

import pytest
from kio.schema.incremental_alter_configs.v1.request import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)
from kio.schema.list_config_resources.v0.request import ListConfigResourcesRequest as ListV0
from kio.schema.list_config_resources.v1.request import ListConfigResourcesRequest as ListV1
from kio.static.primitive import i8

from tests.integration.broker.test_metrics import create_topic
from tests.integration.conftest import shared_broker
from tests.integration.kio_client import KioClient
from tests.kafka_cli import kafka_configs, missing_tools

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32
UNSUPPORTED_VERSION = 35


@pytest.fixture(scope="module")
def broker(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    request.param = {"workers": 2}  # type: ignore[attr-defined]
    yield from shared_broker(request, tmp_path_factory)


def set_config(client: KioClient, resource_type: int, name: str, key: str, value: str) -> None:
    request = IncrementalAlterConfigsRequest(resources=(AlterConfigsResource(
        resource_type=i8(resource_type), resource_name=name,
        configs=(AlterableConfig(name=key, config_operation=i8(0), value=value),)),), validate_only=False)
    [response] = client.call(44, 1, request).responses
    assert response.error_code == 0, response


def listed(client: KioClient, version: int, types: tuple[int, ...] = ()) -> tuple[int, list[tuple[int, str]]]:
    request = ListV0() if version == 0 else ListV1(resource_types=tuple(i8(t) for t in types))
    answer = client.call(74, version, request)
    return answer.error_code, [(int(getattr(r, "resource_type", CLIENT_METRICS)), r.resource_name)
                               for r in answer.config_resources]


def test_every_type_is_listed_in_kafkas_order_and_unsupported_types_refused(broker: Any) -> None:
    create_topic(broker.bootstrap, "lcr-topic", 1)
    with KioClient(broker.bootstrap) as client:
        set_config(client, GROUP, "lcr-group", "consumer.session.timeout.ms", "50000")
        set_config(client, CLIENT_METRICS, "lcr-subscription", "interval.ms", "60000")

        code, every = listed(client, 1)
        assert code == 0
        assert [t for t, _ in every] == sorted((t for t, _ in every),
                                               key=[GROUP, CLIENT_METRICS, BROKER_LOGGER, BROKER, TOPIC].index)
        assert (GROUP, "lcr-group") in every and (CLIENT_METRICS, "lcr-subscription") in every
        assert (BROKER, "0") in every and (BROKER_LOGGER, "0") in every and (TOPIC, "lcr-topic") in every

        code, topics = listed(client, 1, (TOPIC,))
        assert code == 0 and {t for t, _ in topics} == {TOPIC} and (TOPIC, "lcr-topic") in topics
        code, groups = listed(client, 1, (GROUP, BROKER))
        assert code == 0 and groups == [(GROUP, "lcr-group"), (BROKER, "0")]

        assert listed(client, 1, (TOPIC, 99)) == (UNSUPPORTED_VERSION, [])
        code, v0 = listed(client, 0)
        assert code == 0 and v0 == [(CLIENT_METRICS, "lcr-subscription")]


@pytest.mark.kafka_cli
def test_kafka_configs_describes_every_group_with_configs(broker: Any) -> None:
    if missing_tools("4.4.0"):
        pytest.skip("Kafka 4.4 tools not available")
    with KioClient(broker.bootstrap) as client:
        set_config(client, GROUP, "lcr-cli-group", "consumer.heartbeat.interval.ms", "6000")
    done = kafka_configs(broker.bootstrap, "--describe", "--entity-type", "groups")
    assert done.returncode == 0, done.stderr
    assert "Dynamic configs for group lcr-cli-group are:" in done.stdout
    assert "consumer.heartbeat.interval.ms=6000" in done.stdout
