"""Writing DataFrame rows to topics (batch and streaming share this): each task produces
its rows with one confluent-kafka producer, acks=all unless the options say otherwise,
and succeeds only when every record is acknowledged.

At-least-once: a task that fails part-way is run again by Spark and produces all of its
rows again, so records acknowledged in the failed attempt are written twice.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Iterator

from pipeline.options import SinkOptions

# The sink's columns and the Spark types each may have (Spark's Kafka sink rules).
STRING_OR_BINARY = ("string", "binary")
HEADERS_TYPE = "array<struct<key:string,value:binary>>"
FLUSH_TIMEOUT = 300.0


class SinkSchemaError(ValueError):
    """The DataFrame cannot be written: the message says which column is wrong."""


@dataclass(frozen=True)
class SinkColumns:
    """Where each sink column sits in a row (None: absent)."""

    value: int
    key: int | None
    topic: int | None
    partition: int | None
    headers: int | None


def sink_columns(schema: Any, options: SinkOptions) -> SinkColumns:
    """Check a DataFrame's schema (a pyspark StructType) against the sink's columns."""
    fields = {field.name.lower(): (index, field.dataType.simpleString()) for index, field in enumerate(schema.fields)}

    def column(name: str, allowed: tuple[str, ...], required: bool = False) -> int | None:
        if name not in fields:
            if required:
                raise SinkSchemaError(f"the DataFrame has no {name} column: a Castle sink needs value "
                                      f"({' or '.join(allowed)}); key, topic, partition and headers are optional")
            return None
        index, kind = fields[name]
        if kind not in allowed:
            raise SinkSchemaError(f"column {name} must be of type {' or '.join(allowed)}, not {kind}")
        return index

    value = column("value", STRING_OR_BINARY, required=True)
    assert value is not None
    topic = column("topic", ("string",))
    if topic is None and options.topic is None:
        raise SinkSchemaError("no topic to write to: give the option topic, or a topic column")
    return SinkColumns(value=value, key=column("key", STRING_OR_BINARY), topic=topic,
                       partition=column("partition", ("int",)), headers=column("headers", (HEADERS_TYPE,)))


def as_bytes(value: Any) -> bytes | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value.encode("utf-8")
    return bytes(value)


class RowProducer:
    """Produces rows; raises on the first delivery error once all are settled."""

    def __init__(self, options: SinkOptions, columns: SinkColumns) -> None:
        self.options = options
        self.columns = columns

    def produce_all(self, rows: Iterable[Any]) -> int:
        from confluent_kafka import KafkaException, Producer

        producer = Producer(producer_config(self.options))
        failures: list[str] = []

        def delivered(error: Any, message: Any) -> None:
            if error is not None and len(failures) < 5:
                failures.append(f"{message.topic()}[{message.partition()}]: {error.str()}")

        count = 0
        for row in rows:
            self._produce(producer, row, delivered)
            count += 1
            if count % 1000 == 0:
                producer.poll(0)
            if failures:
                break
        remaining = producer.flush(FLUSH_TIMEOUT)
        if failures:
            raise KafkaException(f"could not write every row to Castle: {'; '.join(failures)}")
        if remaining:
            raise TimeoutError(f"{remaining} records were not acknowledged within {FLUSH_TIMEOUT:g} s")
        return count

    def _produce(self, producer: Any, row: Any, delivered: Any) -> None:
        columns = self.columns
        topic = self.options.topic or (row[columns.topic] if columns.topic is not None else None)
        if not topic:
            raise ValueError("a row has no topic (its topic column is null and no topic option is set)")
        kwargs: dict[str, Any] = {"value": as_bytes(row[columns.value]), "on_delivery": delivered}
        if columns.key is not None:
            kwargs["key"] = as_bytes(row[columns.key])
        if columns.partition is not None and row[columns.partition] is not None:
            kwargs["partition"] = int(row[columns.partition])
        if columns.headers is not None and row[columns.headers]:
            kwargs["headers"] = [(header[0], as_bytes(header[1])) for header in row[columns.headers]]
        while True:
            try:
                producer.produce(topic, **kwargs)
                return
            except BufferError:
                producer.poll(0.1)  # the local queue is full: let deliveries drain it


def producer_config(options: SinkOptions) -> dict[str, Any]:
    return {"linger.ms": 5, "enable.idempotence": False, **options.client}


def check_producer_config(options: SinkOptions) -> None:
    """On the driver: a kafka.* option librdkafka does not know fails here, once, instead
    of in every task."""
    from confluent_kafka import KafkaException, Producer

    try:
        Producer(producer_config(options)).flush(0)
    except KafkaException as exc:
        from pipeline.cluster import kafka_error_text

        raise SinkSchemaError(f"a kafka.* option is not a valid client setting: {kafka_error_text(exc)}") from None


def produce_rows(options: SinkOptions, columns: SinkColumns, rows: Iterator[Any]) -> int:
    return RowProducer(options, columns).produce_all(rows)
