"""A confluent-kafka (librdkafka) member of a consumer group, run on a thread of the test, that
prints the same lines as the Java and Go group consumers (tests/integration/group_consumer_lines.py).

With ``group.protocol=consumer`` (KIP-848) librdkafka refuses ``session.timeout.ms``,
``heartbeat.interval.ms``, ``partition.assignment.strategy`` and ``group.protocol.type`` (the
group coordinator owns those: "It is defined broker side"); the server-side assignor is asked
for with ``group.remote.assignor`` (uniform or range; unset, the broker's default). Rebalances
are then incremental: the callbacks get the partitions that changed, and the binding does the
incremental assign/unassign after them.

    member = ConfluentGroupConsumer(bootstrap, "g", ["t"], name="c1", configs={"group.remote.assignor": "range"})
    member.wait_for_line(r"^ASSIGNED \\S", timeout=60)
    member.stop()  # closes the consumer (it leaves the group) on its own thread
"""

from __future__ import annotations

import re
import threading
import time
from typing import Any

POLL_S = 0.2
STOP_TIMEOUT_S = 60.0


def _words(partitions: list[Any]) -> str:
    return "".join(f" {tp.topic}:{tp.partition}" for tp in sorted(partitions, key=lambda tp: (tp.topic, tp.partition)))


class ConfluentGroupConsumer:
    """Subscribes ``topics`` (a name starting with ``^`` is a regex to librdkafka), commits each
    batch synchronously before the next poll, until ``stop()``. The consumer is made, used and
    closed on its own thread, so no librdkafka handle is freed on another."""

    def __init__(self, bootstrap: str, group: str, topics: list[str], name: str, protocol: str = "consumer",
                 configs: dict[str, Any] | None = None) -> None:
        self.name = name
        self.errors: list[str] = []
        self._lines: list[str] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._configs = {"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": protocol,
                         "enable.auto.commit": False, "auto.offset.reset": "earliest", **(configs or {})}
        self._topics = topics
        self._thread = threading.Thread(target=self._run, name=f"confluent-{name}", daemon=True)
        self._thread.start()

    def _line(self, text: str) -> None:
        with self._lock:
            self._lines.append(text)

    def _run(self) -> None:
        from confluent_kafka import Consumer, TopicPartition

        count = 0
        try:
            consumer = Consumer({**self._configs, "error_cb": lambda error: self.errors.append(str(error))})
        except Exception as exc:  # a refused config: the test reads it in the report
            self.errors.append(repr(exc))
            self._line("DONE 0")
            return
        try:
            consumer.subscribe(self._topics, on_assign=lambda _c, ps: self._line("ASSIGNED" + _words(ps)),
                               on_revoke=lambda _c, ps: self._line("REVOKED" + _words(ps)),
                               on_lost=lambda _c, ps: self._line("LOST" + _words(ps)))
            self._line("SUBSCRIBED")
            while not self._stopping.is_set():
                batch = consumer.consume(500, POLL_S)
                nexts: dict[tuple[str, int], int] = {}
                for message in batch:
                    if message.error() is not None:
                        self.errors.append(str(message.error()))
                        continue
                    topic, partition, offset = str(message.topic()), int(message.partition() or 0), int(message.offset() or 0)
                    key, value = message.key(), message.value()
                    self._line(f"RECORD {topic} {partition} {offset} {'null' if key is None else key.decode()} "
                               f"{(value or b'').decode()}")
                    nexts[(topic, partition)] = offset + 1
                    count += 1
                if nexts:
                    consumer.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in nexts.items()], asynchronous=False)
                    self._line("COMMITTED" + "".join(f" {t}:{p}={o}" for (t, p), o in sorted(nexts.items())))
        except Exception as exc:
            self.errors.append(repr(exc))
        finally:
            consumer.close()
            del consumer
            self._line(f"DONE {count}")

    def stdout(self) -> str:
        with self._lock:
            return "".join(line + "\n" for line in self._lines)

    def wait_for_line(self, pattern: str, timeout: float) -> re.Match[str]:
        regex = re.compile(pattern)
        deadline = time.monotonic() + timeout
        while True:
            for line in self.stdout().splitlines():
                match = regex.search(line)
                if match:
                    return match
            if not self._thread.is_alive():
                raise AssertionError(f"{self.name} closed before printing /{pattern}/:\n{self.report()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.name}: no line /{pattern}/ in {timeout} s:\n{self.report()}")
            time.sleep(0.1)

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> None:
        """Ends the poll loop and waits for the close (a clean leave of the group)."""
        self._stopping.set()
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise AssertionError(f"{self.name} did not close in {timeout} s:\n{self.report()}")

    def report(self, tail: int = 6000) -> str:
        return f"--- lines\n{self.stdout()[-tail:]}\n--- errors\n{self.errors[-20:]}"
