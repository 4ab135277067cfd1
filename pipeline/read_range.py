"""Reading one offset range on an executor: a confluent-kafka consumer assigned to the
partition (no group is joined, nothing is committed), records turned into Arrow record
batches with the source's columns.

Arrow batches, not rows: PySpark takes them as they are, where tuples would be converted
to Arrow again in Python, record by record.
"""

from __future__ import annotations

import logging
import time
import uuid
from typing import Any, Iterator

from pipeline.offsets import OffsetRange

ROWS_PER_BATCH = 10_000

# confluent-kafka's timestamp types (1 CreateTime, 2 LogAppendTime) → Spark's (0, 1).
SPARK_TIMESTAMP_TYPE = {1: 0, 2: 1}


class RangeReadError(RuntimeError):
    """A range could not be read in full (the task fails; Spark retries it)."""


def consumer_config(client: dict[str, str]) -> dict[str, Any]:
    config: dict[str, Any] = {
        # librdkafka wants a group id even for assign(); none is joined, nothing committed.
        "group.id": f"castle-spark-reader-{uuid.uuid4().hex[:12]}",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        # A fetch of deleted offsets must fail, not jump silently: failOnDataLoss decides.
        "auto.offset.reset": "error",
        "enable.partition.eof": True,
        # Large fetches: a task reads one partition from a known start to a known end.
        "fetch.max.bytes": 64 * 1024 * 1024,
        "max.partition.fetch.bytes": 16 * 1024 * 1024,
        "queued.min.messages": 200_000,
        # Once its local queue holds queued.min.messages, librdkafka stops fetching for
        # fetch.queue.backoff.ms (1,000 ms by default) and does not resume early when the
        # queue drains: a task that empties it in 0.2 s would idle the rest of the second.
        "fetch.queue.backoff.ms": 10,
    }
    config.update(client)
    return config


class RangeReader:
    """Reads ``OffsetRange`` records in order, yielding Arrow record batches."""

    def __init__(self, client: dict[str, str], arrow_schema: Any, include_headers: bool,
                 fail_on_data_loss: bool, poll_timeout: float) -> None:
        self.client = client
        self.schema = arrow_schema
        self.include_headers = include_headers
        self.fail_on_data_loss = fail_on_data_loss
        self.poll_timeout = poll_timeout

    def read(self, piece: OffsetRange) -> Iterator[Any]:
        if piece.size <= 0:
            return
        from confluent_kafka import Consumer

        consumer = Consumer({**consumer_config(self.client), "logger": logging.getLogger("pipeline.castle.client")})
        try:
            yield from self._read(consumer, piece)
        finally:
            consumer.close()

    def _read(self, consumer: Any, piece: OffsetRange) -> Iterator[Any]:
        from confluent_kafka import KafkaError, KafkaException, TopicPartition

        name = f"{piece.topic}-{piece.partition}"
        consumer.assign([TopicPartition(piece.topic, piece.partition, piece.start)])
        columns = Columns(self.include_headers)
        next_offset = piece.start
        waited_since = time.monotonic()
        while next_offset < piece.until:
            messages = consumer.consume(min(ROWS_PER_BATCH, piece.until - next_offset), 1.0)
            if not messages:
                if time.monotonic() - waited_since > self.poll_timeout:
                    raise RangeReadError(f"{name}: no records from offset {next_offset} (reading up to {piece.until}) "
                                         f"within kafkaConsumer.pollTimeoutMs ({self.poll_timeout:g} s)")
                continue
            waited_since = time.monotonic()
            for message in messages:
                error = message.error()
                if error is not None:
                    code = error.code()
                    if code == KafkaError._PARTITION_EOF:
                        if message.offset() < piece.until:
                            self._lost(f"{name}: the partition ends at {message.offset()}, before the planned end "
                                       f"{piece.until}")
                        next_offset = piece.until
                        break
                    if code in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE):
                        next_offset = self._skip_deleted(consumer, piece, next_offset)
                        break
                    raise KafkaException(error)
                offset = message.offset()
                if offset >= piece.until:
                    next_offset = piece.until
                    break
                columns.add(message)
                next_offset = offset + 1
            if len(columns) >= ROWS_PER_BATCH:
                yield columns.batch(self.schema, piece)
                columns = Columns(self.include_headers)
        if len(columns):
            yield columns.batch(self.schema, piece)

    def _skip_deleted(self, consumer: Any, piece: OffsetRange, next_offset: int) -> int:
        """The records from ``next_offset`` were deleted under the read: fail, or go on
        from the earliest offset still kept."""
        from confluent_kafka import TopicPartition

        low, _high = consumer.get_watermark_offsets(TopicPartition(piece.topic, piece.partition),
                                                    timeout=self.poll_timeout)
        name = f"{piece.topic}-{piece.partition}"
        self._lost(f"{name}: offsets {next_offset} to {min(low, piece.until) - 1} were deleted before they were read")
        if low >= piece.until:
            return piece.until
        consumer.assign([TopicPartition(piece.topic, piece.partition, low)])
        return low

    def _lost(self, message: str) -> None:
        from pipeline.plan import report_data_loss

        try:
            report_data_loss(message, self.fail_on_data_loss)
        except Exception as exc:
            raise RangeReadError(str(exc)) from None


class Columns:
    """One record batch being filled, column by column."""

    def __init__(self, include_headers: bool) -> None:
        self.keys: list[bytes | None] = []
        self.values: list[bytes | None] = []
        self.offsets: list[int] = []
        self.timestamps: list[int | None] = []
        self.timestamp_types: list[int | None] = []
        self.headers: list[list[dict[str, Any]] | None] | None = [] if include_headers else None

    def __len__(self) -> int:
        return len(self.offsets)

    def add(self, message: Any) -> None:
        self.keys.append(message.key())
        self.values.append(message.value())
        self.offsets.append(message.offset())
        kind, stamp = message.timestamp()
        if kind in SPARK_TIMESTAMP_TYPE:
            self.timestamps.append(stamp * 1000)  # ms → µs
            self.timestamp_types.append(SPARK_TIMESTAMP_TYPE[kind])
        else:
            self.timestamps.append(None)
            self.timestamp_types.append(None)
        if self.headers is not None:
            pairs = message.headers()
            self.headers.append([{"key": key, "value": value} for key, value in pairs] if pairs else None)

    def batch(self, schema: Any, piece: OffsetRange) -> Any:
        import pyarrow as pa

        count = len(self.offsets)
        arrays = [
            pa.array(self.keys, type=schema.field("key").type),
            pa.array(self.values, type=schema.field("value").type),
            pa.repeat(pa.scalar(piece.topic, type=schema.field("topic").type), count),
            pa.repeat(pa.scalar(piece.partition, type=schema.field("partition").type), count),
            pa.array(self.offsets, type=schema.field("offset").type),
            pa.array(self.timestamps, type=schema.field("timestamp").type),
            pa.array(self.timestamp_types, type=schema.field("timestampType").type),
        ]
        if self.headers is not None:
            arrays.append(pa.array(self.headers, type=schema.field("headers").type))
        return pa.RecordBatch.from_arrays(arrays, schema=schema)
