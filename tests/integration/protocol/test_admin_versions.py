"""Every advertised version of the admin APIs (ListOffsets, CreateTopics, DeleteTopics,
DeleteRecords, InitProducerId, DescribeConfigs, AlterConfigs, CreatePartitions,
IncrementalAlterConfigs, DescribeCluster) over a real broker's socket: requests encoded
by kafka-python, answers decoded by kafka-python (an implementation independent of ours).
tests/unit/protocol/test_admin_apis.py checks their semantics on a WorkerNode."""

from __future__ import annotations

import copy
import struct
from typing import Any, Iterator

import pytest

from broker import apis, dispatch
from broker.protocol import codec
from tests.integration.conftest import Broker, shared_broker
from tests.integration.kio_client import KioClient, read_frame
from tests.integration.protocol.test_protocol_raw import _batch, _create_topic, _produce
from tests.unit.protocol.test_admin_apis import REQUESTS, _error_codes, _kafka_python, _kp_object

pytestmark = pytest.mark.integration

apis.load_all()


@pytest.fixture(scope="module")
def broker(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    """One broker for the module: each test keeps to topics of its own."""
    yield from shared_broker(request, tmp_path_factory)


def _call(client: KioClient, key: int, version: int, data: dict[str, Any]) -> Any:
    request_cls = _kafka_python(key, "request", version)
    response_cls = _kafka_python(key, "response", version)
    assert request_cls is not None and response_cls is not None
    message = _kp_object(request_cls, data, version)
    flexible = message.flexible_version_q(version)
    header = struct.pack(">hhih", key, version, version + 1000, 5) + b"tests" + (b"\x00" if flexible else b"")
    body = bytes(message.encode())
    client.sock.sendall(struct.pack(">i", len(header) + len(body)) + header + body)
    frame = read_frame(client.sock)
    assert struct.unpack_from(">i", frame)[0] == version + 1000
    return response_cls.decode(frame[5 if flexible else 4:], version=version)


def _versions(key: int) -> list[int]:
    """The versions kio carries (ListOffsets v0, which Kafka 4.0 dropped: test_old_clients.py)."""
    spec = dispatch.REGISTRY[key]
    return [v for v in range(spec.min_version, spec.max_version + 1) if codec.request_class(key, v) is not None]


def _named(key: int, name: str) -> dict[str, Any]:
    """REQUESTS[key] about topic ``name`` instead of "t"."""
    data = copy.deepcopy(REQUESTS[key])
    for topic in data.get("topics", []):
        topic["name"] = name
    if "topic_names" in data:
        data["topic_names"] = [name]
    for resource in data.get("resources", []):
        if resource["resource_type"] == 2:  # TOPIC
            resource["resource_name"] = name
    return data


@pytest.mark.parametrize("key", [2, 21, 22, 32, 33, 44, 60])
def test_every_version_on_an_existing_topic(broker: Any, key: int) -> None:
    topic = f"existing-{key}"  # one per API: AlterConfigs and DeleteRecords change theirs
    with KioClient(broker.bootstrap) as client:
        _create_topic(client, topic)
        for _ in range(2):
            assert _produce(client, 9, topic, _batch([b"x"])).responses[0].partition_responses[0].error_code == 0
        for version in _versions(key):
            answer = _call(client, key, version, _named(key, topic))
            codes = _error_codes(answer)
            # ListOffsets asks for partition 1 of a one-partition topic on purpose.
            assert codes <= ({0, 3} if key == 2 else {0}), (key, version, answer)


@pytest.mark.parametrize("version", _versions(19))
def test_create_grow_and_delete_topics_every_version(broker: Any, version: int) -> None:
    name = f"lifecycle-{version}"
    with KioClient(broker.bootstrap) as client:
        created = _call(client, 19, version, _named(19, name))
        assert _error_codes(created) == {0}
        assert _error_codes(_call(client, 19, version, _named(19, name))) == {36}  # TOPIC_ALREADY_EXISTS
        for partitions_version in _versions(37):
            grow = _named(37, name)
            grow["topics"][0]["count"] = 2 + partitions_version
            assert _error_codes(_call(client, 37, partitions_version, grow)) == {0}
        delete_version = version - 1  # CreateTopics 2-7 pairs with DeleteTopics 1-6: every version once
        data = _named(20, name)
        if delete_version >= 6:
            data["topics"] = [{"name": name, "topic_id": None}]
        assert _error_codes(_call(client, 20, delete_version, data)) == {0}
