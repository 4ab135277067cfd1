"""Batch reads through Spark (local[2]) from a real broker: what was produced comes back,
ranges and options as Spark's Kafka source reads them, and bad input is one clear error
from the planner."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.integration.clients import BASE_TIMESTAMP, assert_same, confluent_create_topic, confluent_produce, make_records
from tests.integration.conftest import Broker, free_port
from tests.integration.pipeline.spark_rows import castle_reader, got_rows

pytestmark = pytest.mark.integration

PARTITIONS = 3


@pytest.fixture
def filled(castle: Broker, topic_name: str) -> tuple[str, list[Any]]:
    confluent_create_topic(castle.bootstrap, topic_name, PARTITIONS)
    records = make_records(1500, PARTITIONS, topic_name)
    confluent_produce(castle.bootstrap, topic_name, records)
    return topic_name, records


def test_batch_read_equals_what_was_produced(spark: Any, castle: Broker, filled: tuple[str, list[Any]]) -> None:
    topic, records = filled
    df = castle_reader(spark, castle.bootstrap, subscribe=topic, includeHeaders="true").load()
    assert df.columns == ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers"]
    # One input partition per topic-partition.
    assert df.rdd.getNumPartitions() == PARTITIONS
    assert_same(records, got_rows(df))
    assert {row["topic"] for row in df.select("topic").distinct().collect()} == {topic}
    assert {row["timestampType"] for row in df.select("timestampType").distinct().collect()} == {0}  # CreateTime


def test_without_include_headers_there_is_no_headers_column(spark: Any, castle: Broker,
                                                            filled: tuple[str, list[Any]]) -> None:
    topic, records = filled
    df = castle_reader(spark, castle.bootstrap, subscribe=topic).load()
    assert "headers" not in df.columns
    assert df.count() == len(records)


def test_min_partitions_splits_ranges_and_loses_nothing(spark: Any, castle: Broker,
                                                        filled: tuple[str, list[Any]]) -> None:
    topic, records = filled
    df = castle_reader(spark, castle.bootstrap, subscribe=topic, minPartitions="10", includeHeaders="true").load()
    assert df.rdd.getNumPartitions() >= 9  # 3 ranges of 500 → 3 pieces each (Spark's rounding)
    assert_same(records, got_rows(df))


def test_offsets_json_bounds_the_read(spark: Any, castle: Broker, filled: tuple[str, list[Any]]) -> None:
    topic, _records = filled
    starting = f'{{"{topic}":{{"0":10,"1":-2,"2":490}}}}'
    ending = f'{{"{topic}":{{"0":20,"1":5,"2":-1}}}}'
    df = castle_reader(spark, castle.bootstrap, subscribe=topic, startingOffsets=starting, endingOffsets=ending).load()
    got = sorted((row["partition"], row["offset"]) for row in df.select("partition", "offset").collect())
    assert got == [(0, o) for o in range(10, 20)] + [(1, o) for o in range(0, 5)] + [(2, o) for o in range(490, 500)]


def test_assign_reads_only_the_assigned_partitions(spark: Any, castle: Broker, filled: tuple[str, list[Any]]) -> None:
    topic, _records = filled
    df = castle_reader(spark, castle.bootstrap, assign=f'{{"{topic}":[0,2]}}').load()
    counts = {row["partition"]: row["count"] for row in df.groupBy("partition").count().collect()}
    assert counts == {0: 500, 2: 500}


def test_subscribe_pattern_reads_every_matching_topic(spark: Any, castle: Broker, topic_name: str) -> None:
    for suffix in ("a", "b"):
        confluent_create_topic(castle.bootstrap, f"{topic_name}-{suffix}", 1)
        confluent_produce(castle.bootstrap, f"{topic_name}-{suffix}", make_records(7, 1, suffix))
    confluent_create_topic(castle.bootstrap, f"other-{topic_name}", 1)
    confluent_produce(castle.bootstrap, f"other-{topic_name}", make_records(3, 1, "other"))
    df = castle_reader(spark, castle.bootstrap, subscribePattern=f"{topic_name}-.*").load()
    counts = {row["topic"]: row["count"] for row in df.groupBy("topic").count().collect()}
    assert counts == {f"{topic_name}-a": 7, f"{topic_name}-b": 7}


def test_starting_timestamp_starts_at_the_first_record_at_or_after_it(spark: Any, castle: Broker,
                                                                      filled: tuple[str, list[Any]]) -> None:
    topic, records = filled
    # make_records stamps record i with BASE_TIMESTAMP + 3i, round-robin over partitions.
    stamp = BASE_TIMESTAMP + 3 * 900
    df = castle_reader(spark, castle.bootstrap, subscribe=topic, startingTimestamp=str(stamp)).load()
    got = sorted(bytes(row["value"]) for row in df.select("value").collect())
    assert got == sorted(r.value for r in records if r.timestamp >= stamp)


def test_starting_offsets_by_timestamp_per_partition(spark: Any, castle: Broker,
                                                    filled: tuple[str, list[Any]]) -> None:
    topic, records = filled
    stamps = {0: BASE_TIMESTAMP + 3 * 300, 1: BASE_TIMESTAMP, 2: BASE_TIMESTAMP + 3 * 1499}
    starting = json.dumps({topic: {str(p): stamp for p, stamp in stamps.items()}})
    df = castle_reader(spark, castle.bootstrap, subscribe=topic, startingOffsetsByTimestamp=starting).load()
    got = sorted(bytes(row["value"]) for row in df.select("value").collect())
    assert got == sorted(r.value for r in records if r.timestamp >= stamps[r.partition])


def test_a_timestamp_after_every_record_is_an_error_or_the_end(spark: Any, castle: Broker,
                                                               filled: tuple[str, list[Any]]) -> None:
    topic, _records = filled
    late = str(BASE_TIMESTAMP + 10**9)
    text = planner_error(lambda: castle_reader(spark, castle.bootstrap, subscribe=topic, startingTimestamp=late)
                         .load().count())
    assert "no record at or after the starting timestamp" in text and f"{topic}-0" in text
    df = castle_reader(spark, castle.bootstrap, subscribe=topic, startingTimestamp=late,
                       startingOffsetsByTimestampStrategy="latest").load()
    assert df.count() == 0


def test_a_split_read_of_an_empty_topic_is_empty(spark: Any, castle: Broker, topic_name: str) -> None:
    confluent_create_topic(castle.bootstrap, topic_name, 2)
    df = castle_reader(spark, castle.bootstrap, subscribe=topic_name, minPartitions="4").load()
    assert df.count() == 0


# ------------------------------------------------------------------ bad input
def planner_error(df_action: Any) -> str:
    """The error text of a planning failure; it must come from the driver's planner, not
    from a failed executor task."""
    with pytest.raises(Exception) as caught:
        df_action()
    text = str(caught.value)
    assert "Task" not in text or "failed" not in text.split("Task")[1][:40], f"an executor task failed:\n{text[:2000]}"
    return text


def test_unknown_topic_is_a_clear_planner_error(spark: Any, castle: Broker, topic_name: str) -> None:
    text = planner_error(lambda: castle_reader(spark, castle.bootstrap, subscribe=f"{topic_name}-missing").load().count())
    assert f"unknown topic {topic_name}-missing on {castle.bootstrap}" in text


def test_unreachable_broker_is_a_clear_planner_error(spark: Any, topic_name: str) -> None:
    nowhere = f"127.0.0.1:{free_port()}"
    text = planner_error(lambda: castle_reader(spark, nowhere, subscribe=topic_name,
                                               metadataTimeoutMs="2000").load().count())
    assert f"cannot reach the brokers at {nowhere} within 2 s" in text


@pytest.mark.parametrize("options, expected", [
    ({"startingOffsets": "{not json"}, "startingOffsets is not valid JSON"),
    ({"endingOffsets": '{"t": [1, 2]}'}, "topic 't' must map to an object of partitions"),
    ({"startingOffsets": '{"t": {"0": "x"}}'}, "must be an integer"),
    ({"assign": "[0]"}, "assign must be a JSON object of topic to partition list"),
    ({"subscribe": "a", "assign": '{"a":[0]}'}, "exactly one of the options assign, subscribe, subscribePattern"),
    ({"subscribePattern": "(unclosed"}, "subscribePattern is not a valid regular expression"),
    ({"minPartitions": "0"}, "minPartitions must be a positive integer"),
    ({"failOnDataLoss": "maybe"}, "failOnDataLoss must be true or false"),
    ({"kafka.group.id": "mine"}, "kafka.group.id is not supported"),
    ({"startingOffsets": "latest"}, "startingOffsets=latest is for streaming queries"),
    ({"kafka.no.such.setting": "1"}, 'a kafka.* option is not a valid client setting: No such configuration property: "no.such.setting"'),
])
def test_bad_options_are_clear_planner_errors(spark: Any, castle: Broker, options: dict[str, str],
                                              expected: str) -> None:
    options = {"subscribe": "t", **options} if not ({"assign", "subscribePattern"} & set(options)) else options
    text = planner_error(lambda: castle_reader(spark, castle.bootstrap, **options).load().count())
    assert expected in text


def test_offsets_json_must_cover_the_subscription(spark: Any, castle: Broker, filled: tuple[str, list[Any]]) -> None:
    topic, _records = filled
    text = planner_error(lambda: castle_reader(spark, castle.bootstrap, subscribe=topic,
                                               startingOffsets=f'{{"{topic}":{{"0":0}}}}').load().count())
    assert "startingOffsets must give an offset for every partition" in text and f"{topic}-1" in text


def test_an_ending_offset_past_the_end_is_a_clear_error(spark: Any, castle: Broker,
                                                        filled: tuple[str, list[Any]]) -> None:
    topic, _records = filled
    ending = f'{{"{topic}":{{"0":100000,"1":-1,"2":-1}}}}'
    text = planner_error(lambda: castle_reader(spark, castle.bootstrap, subscribe=topic,
                                               endingOffsets=ending).load().count())
    assert f"endingOffsets asks for {topic}-0 up to offset 100000, past its end offset 500" in text


def test_missing_bootstrap_is_a_clear_error(spark: Any) -> None:
    text = planner_error(lambda: spark.read.format("castle").option("subscribe", "t").load().count())
    assert "option kafka.bootstrap.servers is required" in text


def test_a_user_schema_is_refused(spark: Any, castle: Broker) -> None:
    text = planner_error(lambda: castle_reader(spark, castle.bootstrap, subscribe="t").schema("value string")
                         .load().count())
    assert "format castle has a fixed schema" in text
