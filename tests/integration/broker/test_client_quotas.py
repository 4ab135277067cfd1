"""Client quotas on a real broker of two workers: the wire answers of DescribeClientQuotas and
AlterClientQuotas, and producer_byte_rate / consumer_byte_rate held by real clients (several
connections of one client id, spread over both workers, share one quota), while a client
without a quota beside them keeps its pace; a changed quota holds at once, no restart.
"""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any, Iterator

import pytest

from tests.integration.conftest import Broker, shared_broker, wait_until
from tests.integration.coordination.test_group_protocol import request
from tests.integration.kio_client import KioClient

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

DESCRIBE, ALTER = 48, 49
INVALID_REQUEST, UNSUPPORTED_VERSION = 42, 35
MIB = 1024 * 1024


def alter(client: KioClient, entity: dict[str, str | None], ops: dict[str, float | None], version: int = 1,
          validate_only: bool = False) -> tuple[int, str | None]:
    answer = client.call(ALTER, version, request(ALTER, version, validate_only=validate_only, entries=[{
        "entity": [{"entity_type": kind, "entity_name": name} for kind, name in entity.items()],
        "ops": [{"key": key, "value": 0.0 if value is None else value, "remove": value is None}
                for key, value in ops.items()]}]))
    assert len(answer.entries) == 1
    return int(answer.entries[0].error_code), answer.entries[0].error_message


def describe(client: KioClient, components: list[tuple[str, int, str | None]], strict: bool = False,
             version: int = 1) -> Any:
    return client.call(DESCRIBE, version, request(DESCRIBE, version, strict=strict, components=[
        {"entity_type": kind, "match_type": match_type, "match": match} for kind, match_type, match in components]))


def described(answer: Any) -> dict[tuple[tuple[str, str | None], ...], dict[str, float]]:
    assert answer.error_code == 0, answer
    return {tuple((e.entity_type, e.entity_name) for e in entry.entity): {v.key: float(v.value) for v in entry.values}
            for entry in answer.entries}


@pytest.fixture(scope="module")
def broker(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    """One broker for the wire tests (each alters entities of its own names); the enforcement
    tests measure rates, so each starts a broker of its own."""
    yield from shared_broker(request, tmp_path_factory)


# ---------------------------------------------------------------------- the wire
@pytest.mark.parametrize("version", [0, 1])
def test_alter_and_describe_on_the_wire(broker: Broker, version: int) -> None:
    user, client_id = f"u-{uuid.uuid4().hex[:6]}", f"c-{uuid.uuid4().hex[:6]}"
    with KioClient(broker.bootstrap) as client:
        assert alter(client, {"user": user}, {"producer_byte_rate": 2048, "request_percentage": 12.5}, version) == (0, None)
        assert alter(client, {"user": user, "client-id": client_id}, {"consumer_byte_rate": 4096}, version)[0] == 0
        assert alter(client, {"user": None}, {"consumer_byte_rate": 1000}, version)[0] == 0
        # validate_only writes nothing
        assert alter(client, {"client-id": client_id}, {"producer_byte_rate": 5}, version, validate_only=True)[0] == 0

        exact = described(describe(client, [("user", 0, user)], version=version))
        assert exact == {(("user", user),): {"producer_byte_rate": 2048.0, "request_percentage": 12.5},
                         (("client-id", client_id), ("user", user)): {"consumer_byte_rate": 4096.0}}
        strict = described(describe(client, [("user", 0, user)], strict=True, version=version))
        assert list(strict) == [(("user", user),)]
        defaults = described(describe(client, [("user", 1, None)], strict=True, version=version))
        assert defaults == {(("user", None),): {"consumer_byte_rate": 1000.0}}
        assert described(describe(client, [("client-id", 0, client_id)], strict=True, version=version)) == {}
        anyone = described(describe(client, [("user", 2, None), ("client-id", 2, None)], version=version))
        assert (("client-id", client_id), ("user", user)) in anyone

        # removing one key keeps the others
        assert alter(client, {"user": user}, {"request_percentage": None}, version)[0] == 0
        assert described(describe(client, [("user", 0, user)], strict=True, version=version)) == {
            (("user", user),): {"producer_byte_rate": 2048.0}}


def test_refusals_leave_the_entity_unchanged(broker: Broker) -> None:
    client_id = f"c-{uuid.uuid4().hex[:6]}"
    with KioClient(broker.bootstrap) as client:
        assert alter(client, {"client-id": client_id}, {"producer_byte_rate": 1000})[0] == 0
        for entity, ops in [
            ({"client-id": client_id}, {"producer_byte_rate": 2000, "consumer_byte_rate": -1}),  # negative
            ({"client-id": client_id}, {"producer_byte_rate": 2000, "consumer_byte_rate": 0}),  # zero
            ({"client-id": client_id}, {"producer_byte_rate": 2000, "consumer_byte_rate": 1.5}),  # fractional LONG
            ({"client-id": client_id}, {"producer_byte_rate": 2000, "no_such_quota": 1}),  # unknown key
            ({"client-id": client_id}, {"producer_byte_rate": 2000, "connection_creation_rate": 5}),  # an ip key
            ({"client-id": client_id, "ip": "127.0.0.1"}, {"producer_byte_rate": 2000}),  # ip with others
            ({"ip": "127.0.0.1"}, {"producer_byte_rate": 2000}),  # ip with a non-ip key
            ({"ip": "not an address"}, {"connection_creation_rate": 5}),
            ({"group": "g"}, {"producer_byte_rate": 2000}),  # unknown entity type
            ({"client-id": ""}, {"producer_byte_rate": 2000}),  # empty name
        ]:
            code, message = alter(client, entity, ops)
            assert code == INVALID_REQUEST and message, (entity, ops, code, message)
        assert described(describe(client, [("client-id", 0, client_id)], strict=True)) == {
            (("client-id", client_id),): {"producer_byte_rate": 1000.0}}

        assert alter(client, {"ip": "127.0.0.9"}, {"connection_creation_rate": 7})[0] == 0
        assert described(describe(client, [("ip", 0, "127.0.0.9")])) == {(("ip", "127.0.0.9"),):
                                                                         {"connection_creation_rate": 7.0}}
        for components, code in [([("user", 2, None), ("ip", 2, None)], INVALID_REQUEST),
                                 ([("user", 0, None)], INVALID_REQUEST), ([("user", 1, "x")], INVALID_REQUEST),
                                 ([("user", 2, None), ("user", 2, None)], INVALID_REQUEST),
                                 ([("group", 2, None)], UNSUPPORTED_VERSION)]:
            answer = describe(client, components)
            assert answer.error_code == code and answer.entries is None, (components, answer)


# ---------------------------------------------------------------------- enforcement
class Meter:
    """Bytes acknowledged (or consumed) over time, from client callbacks on other threads."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.events: list[tuple[float, int]] = []

    def add(self, size: int) -> None:
        with self.lock:
            self.events.append((time.monotonic(), size))

    def rate(self, start: float, end: float) -> float:
        with self.lock:
            total = sum(size for at, size in self.events if start <= at < end)
        return total / (end - start)


def produce_flat_out(bootstrap: str, topic: str, client_id: str, meter: Meter, stop: threading.Event) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "client.id": client_id, "linger.ms": 5, "acks": 1,
                         "queue.buffering.max.kbytes": 4096, "batch.size": 16384})
    payload = b"x" * 16384

    def delivered(err: Any, msg: Any) -> None:
        if err is None:
            meter.add(len(msg.value()))

    try:
        while not stop.is_set():
            try:
                producer.produce(topic, payload, on_delivery=delivered)
            except BufferError:
                producer.poll(0.05)
                continue
            producer.poll(0)
    finally:
        # What is still queued is not measured: dropped, not flushed through the lowered
        # quota (up to 4 MiB a producer at 128 KiB/s shared took the whole 10 s flush).
        producer.purge(in_queue=True, in_flight=False)
        producer.flush(5)


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


def throttled_on_each_worker(broker: Broker, key: str) -> list[int]:
    return [stats.get(key, 0) for stats in broker.stats()]


def test_producer_byte_rate_holds_a_client_id_across_workers(broker_factory: Any) -> None:
    """Ten producers of one client id (their connections spread over both workers: the kernel
    picks, and ten all on one worker is a 1-in-512 chance) share
    1 MiB/s; measured over three of Kafka's quota cycles from the first acknowledgement (a new
    measure lets ``quota.window.num - 1`` windows' worth through at once, as Kafka's does)."""
    broker = broker_factory(workers=2)
    topic = f"quota-{uuid.uuid4().hex[:6]}"
    create_topic(broker.bootstrap, topic, 4)
    with KioClient(broker.bootstrap) as client:
        assert alter(client, {"client-id": "throttled"}, {"producer_byte_rate": MIB})[0] == 0
    time.sleep(1.5)  # the workers' quota watch: the local store is polled every 250 ms
    limited, free = Meter(), Meter()
    stop = threading.Event()
    threads = [threading.Thread(target=produce_flat_out, args=(broker.bootstrap, topic, "throttled", limited, stop))
               for _ in range(10)]
    threads.append(threading.Thread(target=produce_flat_out, args=(broker.bootstrap, topic, "free", free, stop)))
    for thread in threads:
        thread.start()
    try:
        first = wait_until(lambda: limited.events and limited.events[0][0], 30, "a first acknowledgement")
        time.sleep(max(0.0, first + MEASURE - time.monotonic()))
        limited_rate, free_rate = limited.rate(first, first + MEASURE), free.rate(first, first + MEASURE)
        throttled = throttled_on_each_worker(broker, "quota_throttled_produce")
        # Lowered while they run: the new quota holds from the next request on.
        with KioClient(broker.bootstrap) as client:
            assert alter(client, {"client-id": "throttled"}, {"producer_byte_rate": MIB / 8})[0] == 0
        time.sleep(1.5)
        changed_at = time.monotonic()
        time.sleep(10)
        lowered = limited.rate(changed_at, time.monotonic())
    finally:
        stop.set()
        for thread in threads:
            thread.join(30)
    print(f"limited {limited_rate / MIB:.3f} MiB/s, free {free_rate / MIB:.3f} MiB/s, "
          f"lowered {lowered / MIB:.3f}, throttled per worker {throttled}; per second",
          [round(limited.rate(first + i, first + i + 1) / MIB, 2) for i in range(int(MEASURE))])
    assert 0.9 * MIB <= limited_rate <= 1.1 * MIB, limited_rate / MIB
    assert free_rate > 5 * MIB, free_rate / MIB
    assert len(throttled) == 2 and all(count > 0 for count in throttled), throttled
    assert lowered < 0.2 * MIB, lowered / MIB


MEASURE = 32.0  # s: about three cycles of Kafka's 11 one-second samples


def consume_flat_out(bootstrap: str, topic: str, client_id: str, meter: Meter, stop: threading.Event) -> None:
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": bootstrap, "client.id": client_id, "group.id": f"g-{uuid.uuid4().hex[:6]}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "fetch.max.bytes": 524288, "message.max.bytes": 262144,
                         "max.partition.fetch.bytes": 131072})
    consumer.subscribe([topic])
    try:
        while not stop.is_set():
            for message in consumer.consume(100, 0.2):
                if message.error() is None:
                    meter.add(len(message.value()))
    finally:
        consumer.close()


def test_consumer_byte_rate_holds_a_client_id(broker_factory: Any) -> None:
    """A consumer with consumer_byte_rate 1 MiB/s reads a full topic at that pace, measured over
    three quota cycles from its first record; a consumer without a quota reads it all at once."""
    from confluent_kafka import Producer

    broker = broker_factory(workers=2)
    topic = f"quota-{uuid.uuid4().hex[:6]}"
    create_topic(broker.bootstrap, topic, 4)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    payload = b"y" * 16384
    for _ in range(64 * 48):  # 48 MiB: more than the slow reader can take in the test
        while True:
            try:
                producer.produce(topic, payload)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(60) == 0
    with KioClient(broker.bootstrap) as client:
        assert alter(client, {"client-id": "slow-reader"}, {"consumer_byte_rate": MIB})[0] == 0
    time.sleep(1.5)
    limited, free = Meter(), Meter()
    stop = threading.Event()
    threads = [threading.Thread(target=consume_flat_out, args=(broker.bootstrap, topic, "slow-reader", limited, stop)),
               threading.Thread(target=consume_flat_out, args=(broker.bootstrap, topic, "fast-reader", free, stop))]
    for thread in threads:
        thread.start()
    try:
        first = wait_until(lambda: limited.events and limited.events[0][0], 30, "a first record")
        free_first = wait_until(lambda: free.events and free.events[0][0], 30, "a first record")
        time.sleep(max(0.0, first + MEASURE - time.monotonic()))
        limited_rate = limited.rate(first, first + MEASURE)
        throttled = throttled_on_each_worker(broker, "quota_throttled_fetch")
        free_total = free.rate(free_first, time.monotonic()) * (time.monotonic() - free_first)
    finally:
        stop.set()
        for thread in threads:
            thread.join(30)
    print(f"limited {limited_rate / MIB:.3f} MiB/s, free read {free_total / MIB:.1f} MiB, throttled {throttled}; "
          "per second", [round(limited.rate(first + i, first + i + 1) / MIB, 2) for i in range(int(MEASURE))])
    assert 0.9 * MIB <= limited_rate <= 1.1 * MIB, limited_rate / MIB
    assert free_total >= 47 * MIB, free_total / MIB
    assert sum(throttled) > 0, throttled
