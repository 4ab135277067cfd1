"""Structured Streaming reads through Spark (local[2]) from a real broker, into Spark's
file sink (Parquet, exactly-once): records produced while the query runs arrive; a query
stopped and restarted from its checkpoint loses and repeats nothing; new partitions are
picked up; maxOffsetsPerTrigger bounds micro-batches; deleted data fails the query or is
skipped, per failOnDataLoss."""

from __future__ import annotations

import os
from typing import Any

import pytest

from tests.integration.clients import confluent_create_topic, confluent_produce, make_records
from tests.integration.conftest import Broker, wait_until

pytestmark = pytest.mark.integration

QUERY_TIMEOUT = 120.0
SINK_SCHEMA = "topic string, partition int, offset bigint, value binary"


def start_query(spark: Any, castle: Broker, out: str, **options: str) -> Any:
    reader = spark.readStream.format("castle").option("kafka.bootstrap.servers", castle.bootstrap)
    for name, value in options.items():
        reader = reader.option(name, value)
    return (reader.load().selectExpr("topic", "partition", "offset", "value")
            .writeStream.format("parquet").option("path", f"{out}/data")
            .option("checkpointLocation", f"{out}/checkpoint")
            .trigger(processingTime="300 milliseconds").start())


def sink_rows(spark: Any, out: str) -> list[tuple[str, int, int, bytes]]:
    """What the file sink committed (it lists only files of committed batches)."""
    if not os.path.isdir(f"{out}/data/_spark_metadata"):
        return []
    return [(r["topic"], r["partition"], r["offset"], bytes(r["value"]))
            for r in spark.read.schema(SINK_SCHEMA).parquet(f"{out}/data").collect()]


def wait_for_rows(spark: Any, out: str, count: int, query: Any) -> list[tuple[str, int, int, bytes]]:
    def enough() -> list[tuple[str, int, int, bytes]] | None:
        if query.exception() is not None:
            raise AssertionError(f"the query failed: {query.exception()}")
        rows = sink_rows(spark, out)
        return rows if len(rows) >= count else None

    return wait_until(enough, QUERY_TIMEOUT, f"{count} rows in the Parquet sink", interval=0.5)


def wait_started(query: Any) -> None:
    """Until the first micro-batch ran: the query's starting offsets are fixed then."""
    wait_until(lambda: query.lastProgress is not None or query.exception() is not None, QUERY_TIMEOUT,
               "the query's first trigger")
    assert query.exception() is None, query.exception()


def produced_values(records: list[Any]) -> list[bytes]:
    return sorted(r.value for r in records)


def test_records_produced_while_the_query_runs_arrive(spark: Any, castle: Broker, topic_name: str,
                                                     tmp_path: Any) -> None:
    confluent_create_topic(castle.bootstrap, topic_name, 3)
    before = make_records(60, 3, "before")
    confluent_produce(castle.bootstrap, topic_name, before)
    query = start_query(spark, castle, str(tmp_path), subscribe=topic_name)  # streams start at latest
    try:
        wait_started(query)
        during = make_records(900, 3, "during")
        confluent_produce(castle.bootstrap, topic_name, during[:450])
        confluent_produce(castle.bootstrap, topic_name, during[450:])
        rows = wait_for_rows(spark, str(tmp_path), len(during), query)
    finally:
        query.stop()
    assert sorted(value for *_, value in rows) == produced_values(during)


def test_restart_from_the_checkpoint_loses_and_repeats_nothing(spark: Any, castle: Broker, topic_name: str,
                                                               tmp_path: Any) -> None:
    confluent_create_topic(castle.bootstrap, topic_name, 3)
    first = make_records(700, 3, "first")
    confluent_produce(castle.bootstrap, topic_name, first)
    query = start_query(spark, castle, str(tmp_path), subscribe=topic_name, startingOffsets="earliest")
    try:
        wait_for_rows(spark, str(tmp_path), len(first), query)
        # More records while it runs, then stop without waiting for them.
        confluent_produce(castle.bootstrap, topic_name, make_records(300, 3, "second"))
    finally:
        query.stop()
    # And more while it is stopped.
    confluent_produce(castle.bootstrap, topic_name, make_records(500, 3, "third"))
    everything = first + make_records(300, 3, "second") + make_records(500, 3, "third")
    restarted = start_query(spark, castle, str(tmp_path), subscribe=topic_name, startingOffsets="earliest")
    try:
        rows = wait_for_rows(spark, str(tmp_path), len(everything), restarted)
    finally:
        restarted.stop()
    positions = [(t, p, o) for t, p, o, _ in rows]
    assert len(positions) == len(set(positions)), "a record was written twice"
    assert sorted(value for *_, value in rows) == produced_values(everything)
    for partition in range(3):
        offsets = sorted(o for _, p, o in positions if p == partition)
        assert offsets == list(range(len(offsets))), f"partition {partition}: a gap in the offsets"


def test_new_partitions_are_picked_up(spark: Any, castle: Broker, topic_name: str, tmp_path: Any) -> None:
    from confluent_kafka.admin import AdminClient, NewPartitions

    confluent_create_topic(castle.bootstrap, topic_name, 1)
    query = start_query(spark, castle, str(tmp_path), subscribe=topic_name, startingOffsets="earliest")
    try:
        confluent_produce(castle.bootstrap, topic_name, make_records(40, 1, "one"))
        wait_for_rows(spark, str(tmp_path), 40, query)
        admin = AdminClient({"bootstrap.servers": castle.bootstrap})
        admin.create_partitions([NewPartitions(topic_name, 3)])[topic_name].result(30)
        confluent_produce(castle.bootstrap, topic_name, make_records(90, 3, "three"))
        rows = wait_for_rows(spark, str(tmp_path), 130, query)
    finally:
        query.stop()
    counts = {p: sum(1 for _, q, _, _ in rows if q == p) for p in range(3)}
    assert counts == {0: 40 + 30, 1: 30, 2: 30}


def test_a_new_topic_matching_the_pattern_is_picked_up(spark: Any, castle: Broker, topic_name: str,
                                                       tmp_path: Any) -> None:
    confluent_create_topic(castle.bootstrap, f"{topic_name}-first", 2)
    query = start_query(spark, castle, str(tmp_path), subscribePattern=f"{topic_name}-.*", startingOffsets="earliest")
    try:
        confluent_produce(castle.bootstrap, f"{topic_name}-first", make_records(50, 2, "first"))
        wait_for_rows(spark, str(tmp_path), 50, query)
        confluent_create_topic(castle.bootstrap, f"{topic_name}-second", 1)
        confluent_produce(castle.bootstrap, f"{topic_name}-second", make_records(20, 1, "second"))
        rows = wait_for_rows(spark, str(tmp_path), 70, query)
    finally:
        query.stop()
    counts = {topic: sum(1 for t, *_ in rows if t == topic) for topic in {t for t, *_ in rows}}
    assert counts == {f"{topic_name}-first": 50, f"{topic_name}-second": 20}


def test_max_offsets_per_trigger_bounds_each_micro_batch(spark: Any, castle: Broker, topic_name: str,
                                                         tmp_path: Any) -> None:
    confluent_create_topic(castle.bootstrap, topic_name, 2)
    confluent_produce(castle.bootstrap, topic_name, make_records(1000, 2, "rate"))
    reader = (spark.readStream.format("castle").option("kafka.bootstrap.servers", castle.bootstrap)
              .option("subscribe", topic_name).option("startingOffsets", "earliest")
              .option("maxOffsetsPerTrigger", "150"))
    query = (reader.load().selectExpr("partition", "offset").writeStream.format("parquet")
             .option("path", f"{tmp_path}/data").option("checkpointLocation", f"{tmp_path}/checkpoint")
             .trigger(availableNow=True).start())
    try:
        assert query.awaitTermination(QUERY_TIMEOUT), "the availableNow query did not finish"
        assert query.exception() is None
        sizes = [progress["numInputRows"] for progress in query.recentProgress if progress["numInputRows"]]
    finally:
        query.stop()
    assert sum(sizes) == 1000
    assert max(sizes) <= 150 and len(sizes) >= 7, sizes
    assert spark.read.parquet(f"{tmp_path}/data").count() == 1000


@pytest.mark.parametrize("fail_on_data_loss", [True, False])
def test_data_deleted_before_it_was_read(spark: Any, castle: Broker, topic_name: str, tmp_path: Any,
                                         fail_on_data_loss: bool) -> None:
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient

    confluent_create_topic(castle.bootstrap, topic_name, 1)
    confluent_produce(castle.bootstrap, topic_name, make_records(100, 1, "kept"))
    options = {"subscribe": topic_name, "startingOffsets": "earliest", "failOnDataLoss": str(fail_on_data_loss).lower()}
    query = start_query(spark, castle, str(tmp_path), **options)
    try:
        wait_for_rows(spark, str(tmp_path), 100, query)
    finally:
        query.stop()
    # While the query is stopped: 200 more records, and the first 250 offsets deleted
    # (as retention would), so offsets 100..249 were never read.
    confluent_produce(castle.bootstrap, topic_name, make_records(200, 1, "later"))
    admin = AdminClient({"bootstrap.servers": castle.bootstrap})
    admin.delete_records([TopicPartition(topic_name, 0, 250)])[TopicPartition(topic_name, 0, 250)].result(30)
    restarted = start_query(spark, castle, str(tmp_path), **options)
    try:
        if fail_on_data_loss:
            with pytest.raises(Exception) as caught:
                restarted.awaitTermination(QUERY_TIMEOUT)
            assert "offsets 100 to 249 were deleted before they were read" in str(caught.value)
            assert "failOnDataLoss" in str(caught.value)
            return
        rows = wait_for_rows(spark, str(tmp_path), 150, restarted)
    finally:
        restarted.stop()
    offsets = sorted(o for _, _, o, _ in rows)
    assert offsets == list(range(100)) + list(range(250, 300))
