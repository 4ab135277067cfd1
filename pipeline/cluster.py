"""The driver's view of the brokers: which partitions a subscription covers and their
offsets, from Metadata and ListOffsets through confluent-kafka's AdminClient.

Everything here runs on the Spark driver while a query is planned, so that an unknown
topic or an unreachable broker is one clear error before any task starts.
"""

from __future__ import annotations

import logging
import re
import time
from typing import Any, Iterable

from pipeline.offsets import PartitionOffsets, TopicPartition
from pipeline.options import Subscription


class PlanError(RuntimeError):
    """The read cannot be planned (unknown topic, unreachable broker, …)."""


def kafka_error_text(exc: Exception) -> str:
    """The message of a confluent-kafka KafkaException (its KafkaError's text)."""
    error = exc.args[0] if exc.args else exc
    return str(error.str()) if hasattr(error, "str") else str(error)


class Cluster:
    """One AdminClient, made on first use (the data source object is pickled to the
    planner processes; a client is not picklable)."""

    def __init__(self, client_config: dict[str, str], timeout: float) -> None:
        self.client_config = dict(client_config)
        self.timeout = timeout
        self._admin: Any = None
        # librdkafka reports why it cannot connect (a refused login, a refused certificate)
        # only through error_cb; the request itself just fails with a transport error.
        self._errors: list[Any] = []

    def __getstate__(self) -> dict[str, Any]:
        return {"client_config": self.client_config, "timeout": self.timeout, "_admin": None, "_errors": []}

    @property
    def bootstrap(self) -> str:
        return self.client_config["bootstrap.servers"]

    def admin(self) -> Any:
        if self._admin is None:
            from confluent_kafka import KafkaException
            from confluent_kafka.admin import AdminClient

            # librdkafka's own log lines (connection refused, …) go through Python logging
            # instead of raw stderr; the error that matters is raised as a PlanError.
            try:
                settings: dict[str, Any] = {**self.client_config, "logger": logging.getLogger("pipeline.castle.client"),
                                            "error_cb": self._errors.append}
                self._admin = AdminClient(settings)
            except KafkaException as exc:
                raise PlanError(f"a kafka.* option is not a valid client setting: {kafka_error_text(exc)}") from None
        return self._admin

    def _raise_authentication_error(self) -> None:
        from confluent_kafka import KafkaError

        for error in self._errors:
            if error.code() == KafkaError._AUTHENTICATION:
                raise PlanError(f"authentication to the brokers at {self.bootstrap} failed: {kafka_error_text(error)}")

    def close(self) -> None:
        self._admin = None  # AdminClient has no close(); dropping it destroys the handle

    # ------------------------------------------------------------- metadata
    def topics(self) -> dict[str, int]:
        """Topic → partition count of every topic the brokers report (not internal)."""
        from confluent_kafka import KafkaException

        admin = self.admin()
        deadline = time.monotonic() + self.timeout
        while True:  # short tries, so that a refused login ends the wait at once with its reason
            try:
                metadata = admin.list_topics(timeout=min(1.0, max(0.1, deadline - time.monotonic())))
                break
            except KafkaException as exc:
                admin.poll(0)  # delivers error_cb
                self._raise_authentication_error()
                if time.monotonic() >= deadline:
                    raise PlanError(f"cannot reach the brokers at {self.bootstrap} within {self.timeout:g} s: "
                                    f"{kafka_error_text(exc)}") from None
        return {name: len(topic.partitions) for name, topic in metadata.topics.items()
                if topic.error is None and not name.startswith("__")}

    def partitions(self, subscription: Subscription) -> list[TopicPartition]:
        """The topic-partitions a subscription covers now, sorted. An assign or subscribe
        naming a topic (or partition) that does not exist is an error; a pattern that
        matches nothing is an empty read."""
        topics = self.topics()
        if subscription.kind == "subscribePattern":
            pattern = re.compile(subscription.pattern)
            return sorted((t, p) for t, count in topics.items() if pattern.fullmatch(t) for p in range(count))
        if subscription.kind == "subscribe":
            self._require_topics(subscription.topics, topics)
            return sorted((t, p) for t in subscription.topics for p in range(topics[t]))
        self._require_topics({t for t, _ in subscription.partitions}, topics)
        missing = [f"{t}-{p}" for t, p in subscription.partitions if p >= topics[t]]
        if missing:
            raise PlanError(f"assign names partitions that do not exist on {self.bootstrap}: {', '.join(missing)}")
        return sorted(subscription.partitions)

    def _require_topics(self, wanted: Iterable[str], topics: dict[str, int]) -> None:
        missing = sorted(set(wanted) - set(topics))
        if missing:
            raise PlanError(f"unknown topic{'s' if len(missing) > 1 else ''} {', '.join(missing)} "
                            f"on {self.bootstrap} (create {'them' if len(missing) > 1 else 'it'} first)")

    # -------------------------------------------------------------- offsets
    def earliest(self, partitions: Iterable[TopicPartition]) -> PartitionOffsets:
        from confluent_kafka.admin import OffsetSpec

        return self._list_offsets(partitions, OffsetSpec.earliest())

    def latest(self, partitions: Iterable[TopicPartition]) -> PartitionOffsets:
        from confluent_kafka.admin import OffsetSpec

        return self._list_offsets(partitions, OffsetSpec.latest())

    def for_timestamps(self, stamps: dict[TopicPartition, int]) -> PartitionOffsets:
        """The first offset whose timestamp is at or after each one; -1 where none is."""
        from confluent_kafka.admin import OffsetSpec

        found: PartitionOffsets = {}
        by_stamp: dict[int, list[TopicPartition]] = {}
        for tp, stamp in stamps.items():
            by_stamp.setdefault(stamp, []).append(tp)
        for stamp, partitions in by_stamp.items():
            found.update(self._list_offsets(partitions, OffsetSpec.for_timestamp(stamp)))
        return found

    def _list_offsets(self, partitions: Iterable[TopicPartition], spec: Any) -> PartitionOffsets:
        from confluent_kafka import KafkaException
        from confluent_kafka import TopicPartition as KafkaTopicPartition

        wanted = list(partitions)
        if not wanted:
            return {}
        futures = self.admin().list_offsets({KafkaTopicPartition(t, p): spec for t, p in wanted},
                                            request_timeout=self.timeout)
        offsets: PartitionOffsets = {}
        for tp, future in futures.items():
            try:
                offsets[(tp.topic, tp.partition)] = int(future.result(timeout=self.timeout + 5).offset)
            except KafkaException as exc:
                raise PlanError(f"cannot list offsets of {tp.topic}-{tp.partition} on {self.bootstrap}: "
                                f"{kafka_error_text(exc)}") from None
            except TimeoutError:
                raise PlanError(f"no ListOffsets answer from {self.bootstrap} within {self.timeout:g} s") from None
        return offsets
