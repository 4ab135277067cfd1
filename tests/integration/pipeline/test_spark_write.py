"""Writing DataFrames to topics through Spark (local[2]), batch and streaming, and reading
them back both through Spark and with a plain confluent-kafka consumer."""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.clients import confluent_consume, confluent_create_topic, confluent_produce, make_records
from tests.integration.conftest import Broker, wait_until
from tests.integration.pipeline.spark_rows import castle_reader, got_rows

pytestmark = pytest.mark.integration

HEADERS = "array<struct<key:string,value:binary>>"


def test_batch_write_then_read_back(spark: Any, castle: Broker, topic_name: str) -> None:
    confluent_create_topic(castle.bootstrap, topic_name, 3)
    rows = [(f"key-{i % 17}", f"value-{i}".encode(), i % 3, [("n", str(i).encode())] if i % 2 else [])
            for i in range(600)]
    df = spark.createDataFrame(rows, f"key string, value binary, partition int, headers {HEADERS}")
    (df.write.format("castle").option("kafka.bootstrap.servers", castle.bootstrap).option("topic", topic_name)
     .mode("append").save())
    got = got_rows(castle_reader(spark, castle.bootstrap, subscribe=topic_name, includeHeaders="true").load())
    assert len(got) == 600
    by_value = {g.value: g for g in got}
    for key, value, partition, headers in rows:
        record = by_value[value]
        assert record.key == key.encode() and record.partition == partition
        assert record.headers == tuple((k, v) for k, v in headers)
    # Per partition, the rows of one task keep their order (one producer, acks=all).
    consumed = confluent_consume(castle.bootstrap, topic_name, range(3), 600)
    assert sorted(c.value for c in consumed) == sorted(r[1] for r in rows)


def test_topic_column_routes_rows_and_the_topic_option_overrides_it(spark: Any, castle: Broker,
                                                                    topic_name: str) -> None:
    for suffix in ("a", "b", "forced"):
        confluent_create_topic(castle.bootstrap, f"{topic_name}-{suffix}", 1)
    rows = [(f"{topic_name}-{'a' if i % 2 else 'b'}", f"v{i}") for i in range(100)]
    df = spark.createDataFrame(rows, "topic string, value string")
    df.write.format("castle").option("kafka.bootstrap.servers", castle.bootstrap).mode("append").save()
    for suffix in ("a", "b"):
        got = castle_reader(spark, castle.bootstrap, subscribe=f"{topic_name}-{suffix}").load()
        assert got.count() == 50
    (df.write.format("castle").option("kafka.bootstrap.servers", castle.bootstrap)
     .option("topic", f"{topic_name}-forced").mode("append").save())
    assert castle_reader(spark, castle.bootstrap, subscribe=f"{topic_name}-forced").load().count() == 100


def test_write_stream_copies_a_topic(spark: Any, castle: Broker, topic_name: str, tmp_path: Any) -> None:
    source, sink = f"{topic_name}-in", f"{topic_name}-out"
    confluent_create_topic(castle.bootstrap, source, 2)
    confluent_create_topic(castle.bootstrap, sink, 2)
    records = make_records(400, 2, "copy")
    confluent_produce(castle.bootstrap, source, records)
    query = (spark.readStream.format("castle").option("kafka.bootstrap.servers", castle.bootstrap)
             .option("subscribe", source).option("startingOffsets", "earliest").load()
             .selectExpr("key", "value", "partition")
             .writeStream.format("castle").option("kafka.bootstrap.servers", castle.bootstrap)
             .option("topic", sink).option("checkpointLocation", f"{tmp_path}/checkpoint")
             .trigger(processingTime="300 milliseconds").start())
    try:
        def copied() -> bool:
            if query.exception() is not None:
                raise AssertionError(f"the query failed: {query.exception()}")
            return castle_reader(spark, castle.bootstrap, subscribe=sink).load().count() >= len(records)

        wait_until(copied, 120, "the copy to reach the sink topic", interval=0.5)
    finally:
        query.stop()
    got = castle_reader(spark, castle.bootstrap, subscribe=sink).load().select("key", "value", "partition").collect()
    assert sorted((r["partition"], bytes(r["value"])) for r in got) == sorted((r.partition, r.value) for r in records)


def write_error(action: Any) -> str:
    with pytest.raises(Exception) as caught:
        action()
    return str(caught.value)


def test_a_dataframe_without_a_value_column_is_refused(spark: Any, castle: Broker, topic_name: str) -> None:
    df = spark.createDataFrame([("k",)], "key string")
    text = write_error(lambda: df.write.format("castle").option("kafka.bootstrap.servers", castle.bootstrap)
                       .option("topic", topic_name).mode("append").save())
    assert "the DataFrame has no value column" in text


def test_a_wrongly_typed_column_is_refused(spark: Any, castle: Broker, topic_name: str) -> None:
    df = spark.createDataFrame([(1, "v")], "partition string, value string")
    text = write_error(lambda: df.write.format("castle").option("kafka.bootstrap.servers", castle.bootstrap)
                       .option("topic", topic_name).mode("append").save())
    assert "column partition must be of type int, not string" in text


def test_no_topic_anywhere_is_refused(spark: Any, castle: Broker) -> None:
    df = spark.createDataFrame([("v",)], "value string")
    text = write_error(lambda: df.write.format("castle").option("kafka.bootstrap.servers", castle.bootstrap)
                       .mode("append").save())
    assert "no topic to write to" in text


@pytest.mark.parametrize("mode, expected", [
    (None, 'cannot be written in the "ErrorIfExists" mode'),  # Spark's own check, for every Python source
    ("overwrite", 'topics are append-only: mode("overwrite") cannot replace'),
])
def test_only_append_mode_is_accepted(spark: Any, castle: Broker, topic_name: str, mode: str | None,
                                      expected: str) -> None:
    confluent_create_topic(castle.bootstrap, topic_name, 1)
    writer = (spark.createDataFrame([("v",)], "value string").write.format("castle")
              .option("kafka.bootstrap.servers", castle.bootstrap).option("topic", topic_name))
    text = write_error(lambda: (writer.mode(mode) if mode else writer).save())
    assert expected in text
    assert castle_reader(spark, castle.bootstrap, subscribe=topic_name).load().count() == 0


def test_an_unknown_client_setting_is_refused_before_any_task(spark: Any, castle: Broker, topic_name: str) -> None:
    df = spark.createDataFrame([("v",)], "value string")
    text = write_error(lambda: df.write.format("castle").option("kafka.bootstrap.servers", castle.bootstrap)
                       .option("topic", topic_name).option("kafka.linger", "5").mode("append").save())
    assert 'a kafka.* option is not a valid client setting: No such configuration property: "linger"' in text


def test_an_unreachable_broker_fails_the_write_with_the_kafka_error(spark: Any) -> None:
    from tests.integration.conftest import free_port

    df = spark.createDataFrame([("v",)], "value string")
    nowhere = f"127.0.0.1:{free_port()}"
    text = write_error(lambda: df.write.format("castle").option("kafka.bootstrap.servers", nowhere)
                       .option("topic", "t").option("kafka.message.timeout.ms", "2000").mode("append").save())
    assert "could not write every row to Castle" in text and "Message timed out" in text
