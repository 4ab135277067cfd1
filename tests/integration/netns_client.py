"""Kafka clients for partition tests, run inside the client's network namespace.

    ip netns exec <client ns> python -m tests.integration.netns_client produce --bootstrap B --topic T --partitions 3
    ... consume | read-all | describe | create | ping | zk-ready | zk-wait | group-coordinator | group-watch

The test process lives in the root namespace and cannot reach the brokers' addresses, so
every client runs here, in a process of its own, and reports on stdout, one JSON object a
line, which the test feeds to a History (tests/integration/replication_history.py):

    {"type": "ack", "partition": 0, "offset": 12, "value": "w36"}   acknowledged (acks=all)
    {"type": "fail", "partition": 0, "value": "w37", "error": "..."} definitely not written
    {"type": "info", "partition": 0, "value": "w38", "error": "..."} timed out: may or may not be
    {"type": "read", "partition": 0, "offset": 12, "value": "w36"}   what the consumer polled
    {"type": "final", "partition": 0, "records": [[0, "w0"], ...]}  read-all: offset 0 to the high watermark

group-watch observes a consumer group (KIP-848) as a client sees it, from whichever broker
FindCoordinator names, and says which node answered:

    {"type": "describe", "at": 1.5, "node": 2, "error": 0, "state": "Stable", "group_epoch": 3,
     "assignment_epoch": 3, "members": [{"member_id": "m", "member_epoch": 3, "partitions": [0, 1]}]}
    {"type": "committed", "at": 1.6, "node": 2, "offsets": {"0": 41}}   OffsetFetch: partitions with an offset
    {"type": "no-coordinator", "at": 1.7}   no broker named a coordinator, or the one named did not answer

produce and consume run for --seconds or until SIGTERM, whichever is first; produce then
flushes (bounded by message.timeout.ms) before it exits.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
import time
import uuid
from typing import Any

stop = threading.Event()


def emit(**event: Any) -> None:
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


def produce(args: argparse.Namespace) -> int:
    from confluent_kafka import KafkaError, Producer

    producer = Producer({"bootstrap.servers": args.bootstrap, "enable.idempotence": True, "acks": "all",
                         "linger.ms": 2, "message.timeout.ms": args.message_timeout_ms, "request.timeout.ms": 5000,
                         "retry.backoff.ms": 100, "reconnect.backoff.max.ms": 500,
                         "topic.metadata.refresh.interval.ms": 1000})

    def report(err: Any, msg: Any) -> None:
        partition, value = msg.partition(), msg.value().decode()
        if err is None:
            emit(type="ack", partition=partition, offset=msg.offset(), value=value)
        elif err.code() == KafkaError._MSG_TIMED_OUT or err.retriable():
            emit(type="info", partition=partition, value=value, error=err.name())
        else:
            emit(type="fail", partition=partition, value=value, error=err.name())

    sent, deadline = 0, time.monotonic() + args.seconds
    while not stop.is_set() and time.monotonic() < deadline:
        value = f"w{sent}"
        try:
            producer.produce(args.topic, value=value.encode(), partition=sent % args.partitions, on_delivery=report)
            sent += 1
        except BufferError:
            pass
        producer.poll(args.interval)
    left = producer.flush(args.message_timeout_ms / 1000 + 15)
    print(f"produce: sent {sent}, {left} still in flight at exit", file=sys.stderr)
    return 0 if left == 0 else 1


def consume(args: argparse.Namespace) -> int:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": args.bootstrap, "group.id": f"reader-{uuid.uuid4().hex}",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "topic.metadata.refresh.interval.ms": 1000})
    consumer.assign([TopicPartition(args.topic, p, 0) for p in range(args.partitions)])  # from offset 0, no group
    deadline = time.monotonic() + args.seconds
    try:
        while not stop.is_set() and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is None or msg.error():
                continue
            emit(type="read", partition=msg.partition(), offset=msg.offset(), value=(msg.value() or b"").decode())
    finally:
        consumer.close()
    return 0


def read_all(args: argparse.Namespace) -> int:
    """Every record of every partition from offset 0 to the high watermark (as of the start)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": args.bootstrap, "group.id": f"check-{uuid.uuid4().hex}",
                         "enable.auto.commit": False})
    try:
        ends = {p: consumer.get_watermark_offsets(TopicPartition(args.topic, p), timeout=10)[1] for p in range(args.partitions)}
        consumer.assign([TopicPartition(args.topic, p, 0) for p in range(args.partitions)])
        out: dict[int, list[tuple[int, str]]] = {p: [] for p in range(args.partitions)}
        deadline = time.monotonic() + args.seconds
        while any((out[p][-1][0] + 1 if out[p] else 0) < ends[p] for p in out):
            if time.monotonic() > deadline:
                print(f"read-all: read {[len(v) for v in out.values()]} of {ends}", file=sys.stderr)
                return 1
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            out[int(msg.partition() or 0)].append((int(msg.offset() or 0), (msg.value() or b"").decode()))
        for p, records in out.items():
            emit(type="final", partition=p, records=records)
        return 0
    finally:
        consumer.close()


def describe(args: argparse.Namespace) -> int:
    """{"partition": [leader, replicas, isr]} as Metadata from these brokers says."""
    from confluent_kafka.admin import AdminClient

    meta = AdminClient({"bootstrap.servers": args.bootstrap}).list_topics(args.topic, timeout=args.seconds)
    emit(**{str(p.id): [p.leader, list(p.replicas), list(p.isrs)] for p in meta.topics[args.topic].partitions.values()})
    return 0


def create(args: argparse.Namespace) -> int:
    from confluent_kafka.admin import AdminClient, NewTopic

    configs = dict(item.split("=", 1) for item in args.config)
    admin = AdminClient({"bootstrap.servers": args.bootstrap})
    topic = NewTopic(args.topic, args.partitions, args.replication_factor, config=configs)
    admin.create_topics([topic], operation_timeout=30)[args.topic].result(args.seconds)
    return 0


def ping(args: argparse.Namespace) -> int:
    """Poll until a client round trip (ApiVersions, then Metadata) works, or --seconds pass."""
    from tests.integration.conftest import round_trip

    host, _, port = args.bootstrap.rpartition(":")
    deadline = time.monotonic() + args.seconds
    while time.monotonic() < deadline:
        if round_trip(host, int(port), timeout=1.0):
            return 0
        time.sleep(0.1)
    return 1


def zk_ready(args: argparse.Namespace) -> int:
    """Poll ZooKeeper's "srvr" four-letter word until it answers, or --seconds pass."""
    from tests.zookeeper_server import four_letter_word

    host, _, port = args.zk.partition("/")[0].rpartition(":")
    deadline = time.monotonic() + args.seconds
    while time.monotonic() < deadline:
        try:
            if b"Zookeeper version" in four_letter_word(host, int(port), b"srvr"):
                return 0
        except OSError:
            pass
        time.sleep(0.1)
    return 1


def zk_wait(args: argparse.Namespace) -> int:
    """Poll until the znode --path has --count children (e.g. registered brokers), or --seconds pass."""
    from kazoo.client import KazooClient

    client = KazooClient(hosts=args.zk)
    client.start(timeout=args.seconds)
    try:
        deadline = time.monotonic() + args.seconds
        while time.monotonic() < deadline:
            if client.exists(args.path) and len(client.get_children(args.path)) >= args.count:
                return 0
            time.sleep(0.1)
        return 1
    finally:
        client.stop()
        client.close()


class CoordinatorLink:
    """Raw requests to the broker FindCoordinator names for a group, found afresh on every
    call (the coordinator moves under faults), trying the broker that answered last first.
    Every socket operation is bounded, so a cut-off broker costs a timeout, never a hang."""

    def __init__(self, bootstraps: list[str], group: str, timeout: float = 2.0) -> None:
        self.bootstraps, self.group, self.timeout = bootstraps, group, timeout
        self.clients: dict[str, Any] = {}

    def _client(self, address: str) -> Any:
        from tests.integration.kio_client import KioClient

        if address not in self.clients:
            self.clients[address] = KioClient(address, timeout=self.timeout, client_id="group-watch")
        return self.clients[address]

    def _drop(self, address: str) -> None:
        client = self.clients.pop(address, None)
        if client is not None:
            client.close()

    def call(self, api_key: int, version: int, fields: dict[str, Any]) -> tuple[int, Any] | None:
        """(node id, answer) from the coordinator, or None if no broker named one that answered."""
        from kio.index import load_request_schema

        from broker.protocol.build import build

        for address in list(self.bootstraps):
            try:
                found = self._client(address).call(10, 4, build(load_request_schema(10, 4),
                                                                {"key_type": 0, "coordinator_keys": [self.group]}))
            except (OSError, ConnectionError):
                self._drop(address)
                continue
            named = found.coordinators[0]
            if named.error_code != 0:
                continue
            # The one that answered goes first next time.
            self.bootstraps.remove(address)
            self.bootstraps.insert(0, address)
            target = f"{named.host}:{named.port}"
            try:
                return int(named.node_id), self._client(target).call(api_key, version,
                                                                     build(load_request_schema(api_key, version), fields))
            except (OSError, ConnectionError):
                self._drop(target)
                return None
        return None

    def close(self) -> None:
        for address in list(self.clients):
            self._drop(address)


def group_coordinator(args: argparse.Namespace) -> int:
    """The node id FindCoordinator (key type 0) names for --group, asked of the --bootstrap
    brokers in turn until one names a coordinator or --seconds pass."""
    from kio.index import load_request_schema

    from broker.protocol.build import build
    from tests.integration.kio_client import KioClient

    deadline = time.monotonic() + args.seconds
    while time.monotonic() < deadline:
        for address in args.bootstrap.split(","):
            try:
                with KioClient(address, timeout=2) as client:
                    answer = client.call(10, 4, build(load_request_schema(10, 4),
                                                      {"key_type": 0, "coordinator_keys": [args.group]}))
            except (OSError, ConnectionError):
                continue
            if answer.coordinators[0].error_code == 0:
                emit(node_id=int(answer.coordinators[0].node_id))
                return 0
        time.sleep(0.3)
    return 1


def group_watch(args: argparse.Namespace) -> int:
    """ConsumerGroupDescribe and OffsetFetch of --group every --interval s, as the group's
    coordinator answers them, until --seconds pass or SIGTERM."""
    link = CoordinatorLink(args.bootstrap.split(","), args.group)
    deadline = time.monotonic() + args.seconds
    try:
        while not stop.is_set() and time.monotonic() < deadline:
            described = link.call(69, 1, {"group_ids": [args.group], "include_authorized_operations": False})
            if described is None:
                emit(type="no-coordinator", at=time.time())  # none named, or the one named did not answer
            else:
                node, answer = described
                group = answer.groups[0]
                emit(type="describe", at=time.time(), node=node, error=int(group.error_code), state=group.group_state,
                     group_epoch=int(group.group_epoch), assignment_epoch=int(group.assignment_epoch),
                     members=[{"member_id": m.member_id, "member_epoch": int(m.member_epoch),
                               "partitions": sorted(int(p) for t in m.assignment.topic_partitions for p in t.partitions)}
                              for m in group.members])
            fetched = link.call(9, 7, {"group_id": args.group, "require_stable": False, "topics": [
                {"name": args.topic, "partition_indexes": list(range(args.partitions))}]})
            if fetched is not None:
                node, answer = fetched
                if int(answer.error_code) == 0:
                    emit(type="committed", at=time.time(), node=node,
                         offsets={str(p.partition_index): int(p.committed_offset) for t in answer.topics
                                  for p in t.partitions if p.error_code == 0 and p.committed_offset >= 0})
            stop.wait(args.interval)
    finally:
        link.close()
    return 0


COMMANDS = {"produce": produce, "consume": consume, "read-all": read_all, "describe": describe, "create": create,
            "ping": ping, "zk-ready": zk_ready, "zk-wait": zk_wait,
            "group-coordinator": group_coordinator, "group-watch": group_watch}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="netns_client")
    parser.add_argument("command", choices=sorted(COMMANDS))
    parser.add_argument("--bootstrap", default="")
    parser.add_argument("--topic", default="")
    parser.add_argument("--partitions", type=int, default=1)
    parser.add_argument("--replication-factor", type=int, default=3)
    parser.add_argument("--config", action="append", default=[], help="key=value (create)")
    parser.add_argument("--seconds", type=float, default=30.0, help="how long to run, or to wait at most")
    parser.add_argument("--interval", type=float, default=0.01, help="produce: pause between sends")
    parser.add_argument("--message-timeout-ms", type=int, default=30000)
    parser.add_argument("--zk", default="")
    parser.add_argument("--path", default="/brokers/ids")
    parser.add_argument("--count", type=int, default=1)
    parser.add_argument("--group", default="", help="group-watch: the consumer group")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: stop.set())  # stop producing/reading, then flush and exit
    return COMMANDS[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
