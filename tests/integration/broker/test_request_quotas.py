"""request_percentage on a real broker of two workers (KIP-124): a client over its share of
the broker's handler time gets throttle_time_ms in its answers and its connection is held,
while a client without a quota beside it keeps its pace; ApiVersions is never throttled; a
quota changed while the client runs holds within a window, no restart.

Clients are raw (kio) connections sending one request at a time, so a held connection shows
as a lower request rate: the broker mutes it (KIP-219), whatever the client does with the hint.
"""

from __future__ import annotations

import datetime
import threading
import time
import uuid
from typing import Any

import pytest

from tests.integration.broker.test_client_quotas import alter, throttled_on_each_worker
from tests.integration.conftest import Broker
from tests.integration.coordination.test_group_protocol import request
from tests.integration.kio_client import KioClient

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

METADATA, API_VERSIONS = 3, 18


def throttle_of(answer: Any) -> int:
    return int(answer.throttle_time / datetime.timedelta(milliseconds=1))


class Pacer:
    """Metadata requests (every topic) one after the other on one connection, for ``seconds``:
    how many were answered, and their throttle times."""

    def __init__(self, broker: Broker, client_id: str) -> None:
        self.client = KioClient(broker.bootstrap, timeout=20, client_id=client_id)
        self.body = request(METADATA, 12, topics=None, allow_auto_topic_creation=False,
                            include_topic_authorized_operations=False)

    def run(self, seconds: float) -> tuple[float, list[int]]:
        throttles = []
        start = time.monotonic()
        while time.monotonic() - start < seconds:
            throttles.append(throttle_of(self.client.call(METADATA, 12, self.body)))
        return len(throttles) / (time.monotonic() - start), throttles

    def close(self) -> None:
        self.client.sock.close()


def test_request_percentage_holds_a_client_and_not_its_neighbour(broker: Broker) -> None:
    busy_id, free_id = f"busy-{uuid.uuid4().hex[:6]}", f"free-{uuid.uuid4().hex[:6]}"
    busy, free = Pacer(broker, busy_id), Pacer(broker, free_id)
    try:
        before, before_throttles = busy.run(2.0)  # no quota yet
        with KioClient(broker.bootstrap) as admin:
            # 1% of one thread: 10 ms of handler time a second
            assert alter(admin, {"client-id": busy_id}, {"request_percentage": 1.0})[0] == 0
        time.sleep(1.5)  # the workers' quota watch (the local store is polled every 250 ms)

        results: dict[str, tuple[float, list[int]]] = {}

        def pace(name: str, pacer: Pacer) -> None:
            pacer.run(3.0)  # Kafka lets a new measure take (samples - 1) windows' worth at once
            results[name] = pacer.run(6.0)

        threads = [threading.Thread(target=pace, args=("busy", busy)), threading.Thread(target=pace, args=("free", free))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        (held, held_throttles), (neighbour, neighbour_throttles) = results["busy"], results["free"]
        print(f"busy before {before:.0f}/s, held {held:.0f}/s (throttles up to {max(held_throttles)} ms), "
              f"free {neighbour:.0f}/s")
        assert not any(before_throttles)
        assert sum(1 for t in held_throttles if t > 0) >= len(held_throttles) // 2, held_throttles[:50]
        assert all(0 < t <= 1000 for t in held_throttles if t), max(held_throttles)  # at most one window
        assert held < before / 4, (held, before)
        assert held < neighbour / 4, (held, neighbour)
        assert not any(neighbour_throttles)
        assert sum(throttled_on_each_worker(broker, "quota_throttled_request")) > 0

        # ApiVersions on the held client's own connection: answered at once, never throttled
        started = time.monotonic()
        for _ in range(100):
            answer = busy.client.call(API_VERSIONS, 3, request(API_VERSIONS, 3, client_software_name="t",
                                                                client_software_version="1"))
            assert answer.error_code == 0 and throttle_of(answer) == 0
        api_versions_rate = 100 / (time.monotonic() - started)
        assert api_versions_rate > 4 * held, (api_versions_rate, held)

        # Raised while it runs: the client is let go within a window or two of the change
        with KioClient(broker.bootstrap) as admin:
            assert alter(admin, {"client-id": busy_id}, {"request_percentage": 1000.0})[0] == 0
        time.sleep(1.5)
        released, released_throttles = busy.run(3.0)
        print(f"released {released:.0f}/s")
        assert not any(released_throttles[len(released_throttles) // 2:]), released_throttles
        assert released > 4 * held, (released, held)
    finally:
        busy.close()
        free.close()


def test_librdkafka_reads_the_throttle_in_produce_and_fetch_answers(broker: Broker) -> None:
    """The field written into encoded Produce and Fetch answers reaches a real client intact:
    librdkafka's per-broker throttle statistics show it, and every record still goes and comes."""
    import json

    from confluent_kafka import Consumer, Producer

    from tests.integration.broker.test_client_quotas import create_topic

    client_id, topic = f"rd-{uuid.uuid4().hex[:6]}", f"rq-{uuid.uuid4().hex[:6]}"
    create_topic(broker.bootstrap, topic, 2)
    with KioClient(broker.bootstrap) as admin:
        assert alter(admin, {"client-id": client_id}, {"request_percentage": 0.2})[0] == 0
    time.sleep(1.5)
    throttles: dict[str, int] = {"producer": 0, "consumer": 0}

    def stats_of(role: str) -> Any:
        def seen(text: str) -> None:
            for broker_stats in json.loads(text).get("brokers", {}).values():
                throttles[role] = max(throttles[role], int(broker_stats.get("throttle", {}).get("max", 0)))
        return seen

    producer = Producer({"bootstrap.servers": broker.bootstrap, "client.id": client_id, "linger.ms": 20,
                         "statistics.interval.ms": 200, "stats_cb": stats_of("producer")})
    acked: list[Any] = []
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not throttles["producer"]:  # small batches until one is throttled
        for _ in range(20):
            producer.produce(topic, b"r" * 100, on_delivery=lambda err, _msg: acked.append(err))
        producer.flush(10)
    assert producer.flush(30) == 0
    assert acked and not any(acked), [e for e in acked if e][:3]
    assert throttles["producer"] > 0, throttles

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "client.id": client_id, "group.id": f"g-{client_id}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False, "fetch.wait.max.ms": 10,
                         "statistics.interval.ms": 200, "stats_cb": stats_of("consumer")})
    consumer.subscribe([topic])
    received = 0
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline and (received < len(acked) or not throttles["consumer"]):
            for message in consumer.consume(100, 0.2):
                assert message.error() is None, message.error()
                received += 1
    finally:
        consumer.close()
    print(f"acked {len(acked)}, received {received}, throttles {throttles}")
    assert received >= len(acked)
    assert throttles["consumer"] > 0, throttles
