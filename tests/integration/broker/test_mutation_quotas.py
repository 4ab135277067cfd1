"""controller_mutation_rate on a real broker of two workers (KIP-599): partitions created,
added and deleted are counted against the client's token bucket (burst = 11 one-second
samples x the rate), one per broker across its workers. Strict versions refuse the topics
over it with THROTTLING_QUOTA_EXCEEDED and the time to wait; older versions apply them and
throttle; kafka-python's AdminClient sees the refusals, and Kafka 4.4's own AdminClient
(kafka-topics.sh) waits them out and creates its topic.
"""

from __future__ import annotations

import datetime
import time
import uuid
from typing import Any

import pytest

from tests.integration.broker.test_client_quotas import alter
from tests.integration.conftest import Broker
from tests.integration.coordination.test_group_protocol import request
from tests.integration.kio_client import KioClient

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

CREATE, DELETE, PARTITIONS, METADATA = 19, 20, 37, 3
THROTTLING_QUOTA_EXCEEDED = 89


def throttle_of(answer: Any) -> int:
    return int(answer.throttle_time / datetime.timedelta(milliseconds=1))


def new_topic(name: str, partitions: int) -> dict[str, Any]:
    return {"name": name, "num_partitions": partitions, "replication_factor": 1, "assignments": [], "configs": []}


def create(client: KioClient, version: int, topics: dict[str, int]) -> Any:
    return client.call(CREATE, version, request(CREATE, version, topics=[new_topic(n, p) for n, p in topics.items()],
                                                timeout=30_000, validate_only=False))


def codes(answer: Any) -> dict[str, int]:
    return {t.name: int(t.error_code) for t in answer.topics}


def existing(broker: Broker, names: list[str]) -> dict[str, int]:
    """Partitions of each named topic that exists."""
    with KioClient(broker.bootstrap) as client:
        answer = client.call(METADATA, 12, request(METADATA, 12, topics=[{"name": n, "topic_id": None} for n in names],
                                                   allow_auto_topic_creation=False,
                                                   include_topic_authorized_operations=False))
    return {t.name: len(t.partitions) for t in answer.topics if t.error_code == 0}


def set_rate(broker: Broker, client_id: str, rate: float) -> None:
    with KioClient(broker.bootstrap) as admin:
        assert alter(admin, {"client-id": client_id}, {"controller_mutation_rate": rate})[0] == 0
    time.sleep(1.5)  # the workers' quota watch (the local store is polled every 250 ms)


def test_strict_create_topics_refuses_what_is_over_the_rate(broker: Broker) -> None:
    """Rate 2/s: a burst of 22. Four topics of 10: the first three are taken (the third from 2
    tokens, leaving -8: a request may go over once), the fourth is refused with the time to
    refill (-8 / 2 = 4 s); another connection of the client (any worker) is refused too; a
    quota raised live holds at once."""
    client_id, tag = f"creator-{uuid.uuid4().hex[:6]}", uuid.uuid4().hex[:6]
    names = [f"m-{tag}-{i}" for i in range(5)]
    set_rate(broker, client_id, 2.0)
    with KioClient(broker.bootstrap, client_id=client_id) as client:
        answer = create(client, 7, {name: 10 for name in names[:4]})
    assert codes(answer) == {names[0]: 0, names[1]: 0, names[2]: 0, names[3]: THROTTLING_QUOTA_EXCEEDED}
    refused = next(t for t in answer.topics if t.name == names[3])
    assert refused.error_message == "The throttling quota has been exceeded."
    assert 3000 <= throttle_of(answer) <= 4000, throttle_of(answer)
    for _ in range(3):  # new connections: the kernel spreads them over the workers
        with KioClient(broker.bootstrap, client_id=client_id) as other:
            again = create(other, 6, {names[4]: 1})
        assert codes(again) == {names[4]: THROTTLING_QUOTA_EXCEEDED} and throttle_of(again) > 2000
    assert existing(broker, names) == {names[0]: 10, names[1]: 10, names[2]: 10}
    # Raised while the bucket is still below zero (at 2/s it would be for 2 s more): the
    # bucket refills at the new rate, and the client creates again at once, no restart.
    set_rate(broker, client_id, 1000.0)
    with KioClient(broker.bootstrap, client_id=client_id) as client:
        later = create(client, 7, {names[4]: 1})
    assert codes(later) == {names[4]: 0} and throttle_of(later) == 0


def test_old_versions_apply_every_topic_and_throttle(broker: Broker) -> None:
    """CreateTopics v5 is permissive: all 30 partitions are created, the answer says wait 4 s,
    and the connection is held that long."""
    client_id, tag = f"old-{uuid.uuid4().hex[:6]}", uuid.uuid4().hex[:6]
    names = [f"p-{tag}-{i}" for i in range(3)]
    set_rate(broker, client_id, 2.0)
    with KioClient(broker.bootstrap, client_id=client_id) as client:
        answer = create(client, 5, {name: 10 for name in names})
        assert codes(answer) == {name: 0 for name in names}
        # 30 taken from a full burst of 24 at 2/s: 3 s, less what the bucket refilled while the
        # topics were being created (the throttle is reckoned when the answer is made).
        assert 2500 <= throttle_of(answer) <= 4000, throttle_of(answer)
        started = time.monotonic()
        client.call(METADATA, 12, request(METADATA, 12, topics=[], allow_auto_topic_creation=False,
                                          include_topic_authorized_operations=False))
        assert time.monotonic() - started >= 2.5  # muted (KIP-219)
    assert existing(broker, names) == {name: 10 for name in names}


def test_delete_topics_and_create_partitions_count_their_partitions(broker: Broker) -> None:
    """DeleteTopics v6 counts the partitions a topic had; CreatePartitions v3 those it adds."""
    tag = uuid.uuid4().hex[:6]
    deleter, grower = f"deleter-{tag}", f"grower-{tag}"
    names = [f"d-{tag}-{i}" for i in range(3)]
    with KioClient(broker.bootstrap) as client:
        assert set(codes(create(client, 7, {names[0]: 8, names[1]: 8, names[2]: 1, f"g-{tag}": 1, f"h-{tag}": 1})
                         ).values()) == {0}
    set_rate(broker, deleter, 1.0)  # a burst of 11
    set_rate(broker, grower, 1.0)
    with KioClient(broker.bootstrap, client_id=deleter) as client:
        answer = client.call(DELETE, 6, request(DELETE, 6, topics=[{"name": n, "topic_id": None} for n in names],
                                                timeout=30_000))
    assert {r.name: int(r.error_code) for r in answer.responses} == {names[0]: 0, names[1]: 0,
                                                                     names[2]: THROTTLING_QUOTA_EXCEEDED}
    assert existing(broker, names) == {names[2]: 1}

    def grow(client: KioClient, topic: str, count: int) -> Any:
        return client.call(PARTITIONS, 3, request(PARTITIONS, 3, topics=[{"name": topic, "count": count,
                                                                          "assignments": None}],
                                                  timeout=30_000, validate_only=False))

    with KioClient(broker.bootstrap, client_id=grower) as client:
        first = grow(client, f"g-{tag}", 13)  # adds 12 of 11: taken, leaves -1
    assert int(first.results[0].error_code) == 0 and throttle_of(first) == 0
    with KioClient(broker.bootstrap, client_id=grower) as client:
        second = grow(client, f"h-{tag}", 2)
    assert int(second.results[0].error_code) == THROTTLING_QUOTA_EXCEEDED and 0 < throttle_of(second) <= 1000
    assert existing(broker, [f"g-{tag}", f"h-{tag}"]) == {f"g-{tag}": 13, f"h-{tag}": 1}


def test_kafka_python_admin_client_sees_the_refusals(broker: Broker) -> None:
    from kafka.admin import KafkaAdminClient

    client_id, tag = f"kp-{uuid.uuid4().hex[:6]}", uuid.uuid4().hex[:6]
    names = [f"kp-{tag}-{i}" for i in range(3)]
    set_rate(broker, client_id, 1.0)  # a burst of 11
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, client_id=client_id)
    try:
        result = admin.create_topics({name: {"num_partitions": 6, "replication_factor": 1} for name in names},
                                     raise_errors=False)
    finally:
        admin.close()
    assert {t["name"]: t["error_code"] for t in result["topics"]} == {names[0]: 0, names[1]: 0,
                                                                      names[2]: THROTTLING_QUOTA_EXCEEDED}
    assert existing(broker, names) == {names[0]: 6, names[1]: 6}


@pytest.mark.java_clients
def test_kafka_admin_client_retries_until_its_topics_are_created(broker: Broker) -> None:
    """Kafka 4.4's AdminClient (default options: retryOnQuotaViolation) retries the topics
    refused for the quota after the throttle time until they are created: at 1 partition a
    second, after another topic took the whole burst and 8 more (8 s to refill), two topics
    of 4 partitions are taken one at a time, each when the bucket is back at zero: 12 s."""
    from tests.java_clients import ensure_classes, missing_tools, run_java

    missing = missing_tools()
    if missing:
        pytest.fail(f"Kafka's Java clients need {', '.join(missing)} on PATH")
    ensure_classes()  # compiled before the clock starts
    client_id, tag = f"java-{uuid.uuid4().hex[:6]}", uuid.uuid4().hex[:6]
    names = [f"j-{tag}-{i}" for i in range(2)]
    set_rate(broker, client_id, 1.0)  # a burst of 11
    started = time.monotonic()
    with KioClient(broker.bootstrap, client_id=client_id) as client:
        assert codes(create(client, 7, {f"j-{tag}-x": 19})) == {f"j-{tag}-x": 0}  # leaves -8
    done = run_java("castle.TopicCreator", [f"bootstrap={broker.bootstrap}", f"topics={','.join(names)}",
                                            "partitions=4", f"client.id={client_id}"], timeout=120)
    took = time.monotonic() - started
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr[-3000:]}"
    created = [line.split()[1] for line in done.stdout.splitlines() if line.startswith("CREATED ")]
    print(f"created after {took:.1f} s:", done.stdout)
    assert created == names, done.stdout
    assert took >= 11.0, took  # held by the quota (refused, retried), not refused for good
    assert existing(broker, names) == {name: 4 for name in names}
