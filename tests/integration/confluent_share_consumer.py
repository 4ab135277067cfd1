"""A confluent-kafka (librdkafka) share consumer (KIP-932's ``ShareConsumer``), run on a thread of
the test, that answers each record as tests/java/castle/ShareGroupConsumer.java does and prints
the same JSON lines (tests/integration/share_consumer_lines.py).

``share.acknowledgement.mode=explicit``: each record is acknowledged by its value
(``release-once-``: RELEASE at its first delivery; ``release-always-``: RELEASE always;
``reject-``: REJECT; else ACCEPT), then ``commit_sync`` sends the poll's acknowledgements
(ShareAcknowledge); the broker's answers come back through the acknowledgement commit callback.

    member = ConfluentShareConsumer(bootstrap, "g", ["t"], name="c1")
    member.wait_for_line('"event": "record"', timeout=60)
    member.stop()  # closes the consumer (it leaves the share group) on its own thread
"""

from __future__ import annotations

import json
import re
import threading
import time
from typing import Any

POLL_S = 0.2
STOP_TIMEOUT_S = 60.0


def answer(value: str, delivery_count: int) -> str:
    if value.startswith("reject-"):
        return "REJECT"
    if value.startswith("release-always-") or (value.startswith("release-once-") and delivery_count == 1):
        return "RELEASE"
    return "ACCEPT"


class ConfluentShareConsumer:
    """Polls until ``stop()`` (or ``idle_s`` without a record); the consumer is made, used and
    closed on its own thread, so no librdkafka handle is freed on another."""

    def __init__(self, bootstrap: str, group: str, topics: list[str], name: str, idle_s: float | None = None,
                 configs: dict[str, Any] | None = None, work_s: float = 0.0) -> None:
        """``work_s``: how long each poll's records are worked on (held, acknowledged but not
        yet sent) before commit_sync; a consumer killed meanwhile dies holding them."""
        self.name = name
        self._work_s = work_s
        self._lines: list[str] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._idle_s = idle_s
        self._configs = {"bootstrap.servers": bootstrap, "group.id": group, "client.id": name,
                         "share.acknowledgement.mode": "explicit", **(configs or {})}
        self._topics = topics
        self._thread = threading.Thread(target=self._run, name=f"confluent-share-{name}", daemon=True)
        self._thread.start()

    def _line(self, event: dict[str, Any]) -> None:
        with self._lock:
            self._lines.append(json.dumps(event))

    def _acknowledged(self, offsets: dict[Any, set[int]], error: Any) -> None:
        for partition, acked in offsets.items():
            self._line({"event": "acknowledged", "topic": partition.topic, "partition": partition.partition,
                        "offsets": sorted(acked), "error": None if error is None else str(error)})

    def _run(self) -> None:
        from confluent_kafka import AcknowledgeType, ShareConsumer

        count = 0
        try:
            consumer = ShareConsumer(self._configs)
        except Exception as exc:  # a refused config: the test reads it in the report
            self._line({"event": "error", "error": repr(exc)})
            self._line({"event": "done", "records": 0})
            return
        try:
            consumer.set_acknowledgement_commit_callback(self._acknowledged)
            consumer.subscribe(self._topics)
            self._line({"event": "subscribed"})
            last = time.monotonic()
            while not self._stopping.is_set():
                if self._idle_s is not None and time.monotonic() - last > self._idle_s:
                    break
                batch = consumer.poll(POLL_S)
                delivered = 0
                for message in batch:
                    if message.error() is not None:
                        self._line({"event": "error", "error": str(message.error())})
                        continue
                    value = (message.value() or b"").decode()
                    key = message.key()
                    delivery_count = message.delivery_count()
                    ack = answer(value, delivery_count or 1)
                    self._line({"event": "record", "topic": message.topic(), "partition": message.partition(),
                                "offset": message.offset(), "key": None if key is None else key.decode(),
                                "value": value, "delivery_count": delivery_count, "ack": ack})
                    consumer.acknowledge(message, getattr(AcknowledgeType, ack))
                    delivered += 1
                if delivered:
                    if self._work_s:
                        time.sleep(self._work_s)
                    count += delivered
                    last = time.monotonic()
                    for partition, failure in consumer.commit_sync(30).items():
                        if failure is not None:
                            self._line({"event": "error", "error": f"commit {partition.topic}:{partition.partition}: "
                                                                   f"{failure}"})
        except Exception as exc:
            self._line({"event": "error", "error": repr(exc)})
        finally:
            try:
                consumer.close()
            except Exception as exc:
                self._line({"event": "error", "error": f"close: {exc!r}"})
            del consumer
            self._line({"event": "done", "records": count})

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

    def running(self) -> bool:
        return self._thread.is_alive()

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> None:
        """Ends the poll loop and waits for the close (its acknowledgements sent, the group left)."""
        self._stopping.set()
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise AssertionError(f"{self.name} did not close in {timeout} s:\n{self.report()}")

    def report(self, tail: int = 6000) -> str:
        return f"--- lines\n{self.stdout()[-tail:]}"
