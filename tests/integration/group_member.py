"""A consumer-group member as its own process, so a test can kill -9 it.

    python -m tests.integration.group_member CLIENT BOOTSTRAP GROUP TOPIC [SECONDS]

CLIENT is confluent, kafka-python or aiokafka (the classic protocol, the range assignor),
or confluent-consumer (librdkafka with group.protocol=consumer, KIP-848: the broker assigns,
incrementally). The member consumes, and commits synchronously after every poll that
returned records (a commit the coordinator refuses is reported, not fatal).
It prints one JSON object per line on stdout (flushed at once, so a killed member's
output is complete up to its death):

    {"event": "assigned", "partitions": [0, 1]}
    {"event": "record", "partition": 0, "offset": 5, "value": "..."}
    {"event": "committed", "offsets": {"0": 6}}       # next offsets, as committed
    {"event": "commit_failed", "error": "..."}        # confluent-consumer: e.g. STALE_MEMBER_EPOCH
    {"event": "closed"}

It stops after SECONDS (default 60) or on SIGTERM, leaving the group cleanly. Its
stderr holds the client's log (kafka-python and aiokafka at INFO, or at the level in
CASTLE_MEMBER_LOG_LEVEL).
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
import time
from typing import Any

from loadtest.children import emit  # the child's side of loadtest.children.ChildProcess

SESSION_TIMEOUT_MS = 6000
HEARTBEAT_MS = 500

stop = False


def _on_term(_signum: int, _frame: Any) -> None:
    global stop
    stop = True


def report(batches: dict[Any, list[Any]], assignment: list[int], last_assignment: list[int] | None) -> dict[Any, int]:
    """Emit a changed assignment and the records of one poll (kafka-python and aiokafka
    shape: {TopicPartition: [messages]}); the next offset to commit per partition."""
    if assignment != last_assignment:
        emit(event="assigned", partitions=assignment)
    positions = {}
    for tp, messages in batches.items():
        for message in messages:
            emit(event="record", partition=tp.partition, offset=message.offset, value=message.value.decode())
            positions[tp] = message.offset + 1
    return positions


def run_confluent(bootstrap: str, group: str, topic: str, deadline: float, protocol: str = "classic") -> None:
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    held: set[int] = set()

    # Each call names the partitions given or taken away (all of them under the classic
    # protocol, only the change under the consumer protocol): the member reports what it
    # then holds.
    def on_assign(_consumer: Any, partitions: list[Any]) -> None:
        held.update(p.partition for p in partitions)
        emit(event="assigned", partitions=sorted(held))

    def on_revoke(_consumer: Any, partitions: list[Any]) -> None:
        held.difference_update(p.partition for p in partitions)
        emit(event="assigned", partitions=sorted(held))

    config = {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
              "enable.auto.commit": False}
    if protocol == "consumer":  # the broker owns sessions, heartbeats and assignment
        config["group.protocol"] = "consumer"
    else:
        config.update({"session.timeout.ms": SESSION_TIMEOUT_MS, "heartbeat.interval.ms": HEARTBEAT_MS,
                       "partition.assignment.strategy": "range"})
    consumer = Consumer(config)
    consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_revoke)
    while not stop and time.time() < deadline:
        messages = consumer.consume(100, 0.2)
        positions: dict[int, int] = {}
        for message in messages:
            if message.error():
                continue
            emit(event="record", partition=message.partition(), offset=message.offset(), value=message.value().decode())
            positions[message.partition()] = message.offset() + 1
        if positions:
            try:
                consumer.commit(offsets=[TopicPartition(topic, p, o) for p, o in positions.items()], asynchronous=False)
            except KafkaException as exc:
                emit(event="commit_failed", error=str(exc))
                continue
            emit(event="committed", offsets={str(p): o for p, o in positions.items()})
    consumer.close()
    emit(event="closed")


def _finish_stalled_join(consumer: Any) -> None:
    """Work around a kafka-python 3.0.12 bug that leaves a member half-joined for good.

    When the leader rejoins because its metadata changed (it first assigned with no
    partitions known), only the consumer's metadata snapshots ask for the rejoin; the
    base rejoin flag stays false. The JoinGroup/SyncGroup round trip runs as a task, and
    consumer.poll() re-awaits that task on its next call only while need_rejoin() is
    true. The leader's own assignment step makes the snapshots equal, so if the
    JoinGroup answer arrives after poll's timer ran out, need_rejoin() turns false
    before anyone awaits the task: the SyncGroup answer arrives and is dropped, the
    member stays REBALANCING with heartbeats off, its session expires, and it never
    rejoins (test_three_members_* failed this way about once in 40 runs under CPU
    contention; the member's DEBUG log showed the answer received and never applied).
    Setting the rejoin flag in exactly that state makes the next poll finish the join
    (or join afresh)."""
    coordinator = consumer._coordinator
    if coordinator.rebalance_in_progress() and not coordinator.need_rejoin():
        logging.getLogger("group_member").warning("kafka-python left its join unfinished: asking for a rejoin")
        coordinator.request_rejoin()


def run_kafka_python(bootstrap: str, group: str, topic: str, deadline: float) -> None:
    from kafka import KafkaConsumer, OffsetAndMetadata
    from kafka.coordinator.assignors.range import RangePartitionAssignor

    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                             enable_auto_commit=False, session_timeout_ms=SESSION_TIMEOUT_MS,
                             heartbeat_interval_ms=HEARTBEAT_MS, partition_assignment_strategy=[RangePartitionAssignor])
    last_assignment: list[int] | None = None
    while not stop and time.time() < deadline:
        batches = consumer.poll(200)
        _finish_stalled_join(consumer)
        assignment = sorted(tp.partition for tp in consumer.assignment())
        positions = report(batches, assignment, last_assignment)
        last_assignment = assignment
        if positions:
            consumer.commit({tp: OffsetAndMetadata(o, "", -1) for tp, o in positions.items()})
            emit(event="committed", offsets={str(tp.partition): o for tp, o in positions.items()})
    consumer.close()
    emit(event="closed")


def run_aiokafka(bootstrap: str, group: str, topic: str, deadline: float) -> None:
    async def main() -> None:
        from aiokafka import AIOKafkaConsumer
        from aiokafka.coordinator.assignors.range import RangePartitionAssignor

        consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                                    enable_auto_commit=False, session_timeout_ms=SESSION_TIMEOUT_MS,
                                    heartbeat_interval_ms=HEARTBEAT_MS,
                                    partition_assignment_strategy=(RangePartitionAssignor,))
        await consumer.start()
        last_assignment: list[int] | None = None
        while not stop and time.time() < deadline:
            batches = await consumer.getmany(timeout_ms=200)
            assignment = sorted(tp.partition for tp in consumer.assignment())
            positions = report(batches, assignment, last_assignment)
            last_assignment = assignment
            if positions:
                await consumer.commit(positions)
                emit(event="committed", offsets={str(tp.partition): o for tp, o in positions.items()})
        await consumer.stop()
        emit(event="closed")

    asyncio.run(main())


RUNNERS = {"confluent": run_confluent, "kafka-python": run_kafka_python, "aiokafka": run_aiokafka,
           "confluent-consumer": lambda *args: run_confluent(*args, protocol="consumer")}


def main(argv: list[str]) -> int:
    client, bootstrap, group, topic = argv[:4]
    seconds = float(argv[4]) if len(argv) > 4 else 60.0
    signal.signal(signal.SIGTERM, _on_term)
    # The Python clients' join, sync and heartbeat decisions go to stderr (INFO and up),
    # which a failing test attaches to its report: a member that falls out of a
    # group is otherwise seen only from the coordinator's side.
    logging.basicConfig(level=os.environ.get("CASTLE_MEMBER_LOG_LEVEL", "INFO"), stream=sys.stderr,
                        format="%(asctime)s.%(msecs)03d %(name)s %(levelname)s %(message)s", datefmt="%H:%M:%S")
    RUNNERS[client](bootstrap, group, topic, time.time() + seconds)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
