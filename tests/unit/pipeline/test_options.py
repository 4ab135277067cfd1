"""The options of format("castle"), checked on the driver before anything runs."""

from __future__ import annotations

import pytest

from pipeline.options import OptionsError, SinkOptions, SourceOptions

BOOT = {"kafka.bootstrap.servers": "127.0.0.1:9092"}


def parse(streaming: bool = False, **options: str) -> SourceOptions:
    return SourceOptions.parse({**BOOT, **options}, streaming=streaming)


def test_defaults_are_spark_kafka_defaults() -> None:
    batch = parse(subscribe="a,b")
    assert batch.subscription.kind == "subscribe" and batch.subscription.topics == ("a", "b")
    assert batch.starting.kind == "earliest" and batch.ending.kind == "latest"
    assert batch.fail_on_data_loss is True and batch.include_headers is False
    assert batch.max_offsets_per_trigger is None and batch.min_partitions is None
    assert batch.poll_timeout == 120.0
    assert parse(streaming=True, subscribe="a").starting.kind == "latest"


def test_option_names_are_case_insensitive_and_kafka_options_reach_the_client() -> None:
    options = SourceOptions.parse({"KAFKA.BOOTSTRAP.SERVERS": "h:1", "Subscribe": "t", "IncludeHeaders": "TRUE",
                                   "kafka.fetch.max.bytes": "1000", "MaxOffsetsPerTrigger": "50"}, streaming=True)
    assert options.bootstrap == "h:1" and options.include_headers is True and options.max_offsets_per_trigger == 50
    assert options.client == {"bootstrap.servers": "h:1", "fetch.max.bytes": "1000"}


def test_plain_bootstrap_servers_is_accepted() -> None:
    assert SourceOptions.parse({"bootstrap.servers": "h:2", "subscribe": "t"}, streaming=False).bootstrap == "h:2"


def test_starting_timestamp_wins_over_the_others() -> None:
    options = parse(subscribe="t", startingTimestamp="1000", startingOffsets="earliest",
                    startingOffsetsByTimestamp='{"t":{"0":5}}')
    assert options.starting.kind == "timestamp" and options.starting.timestamp == 1000
    by_partition = parse(subscribe="t", startingOffsetsByTimestamp='{"t":{"0":5}}', startingOffsets="earliest")
    assert by_partition.starting.kind == "timestamps" and by_partition.starting.offsets == {("t", 0): 5}


def test_assign_parses_partitions() -> None:
    options = parse(assign='{"b":[1],"a":[0,2]}')
    assert options.subscription.partitions == (("a", 0), ("a", 2), ("b", 1))


@pytest.mark.parametrize("options, streaming, message", [
    ({"subscribe": "t", "endingOffsets": "latest"}, True, "option endingoffsets is for batch reads"),
    ({"subscribe": "t", "startingOffsets": '{"t":{"0":-1}}'}, False, "-1 (latest) is not allowed in a batch read"),
    ({"subscribe": "t", "endingOffsets": '{"t":{"0":-2}}'}, False, "-2 (earliest) is not allowed"),
    ({"subscribe": "t", "endingOffsets": "earliest"}, False, "endingOffsets=earliest is not allowed"),
    ({"subscribe": "t", "startingTimestamp": "soon"}, False, "startingTimestamp must be milliseconds"),
    ({"subscribe": "t", "maxOffsetsPerTrigger": "-5"}, True, "maxOffsetsPerTrigger must be a positive integer"),
    ({"subscribe": " , "}, False, "option subscribe names no topic"),
    ({"subscribe": " "}, False, "exactly one of the options assign, subscribe, subscribePattern must be given, got 0"),
    ({"subscribe": "t", "kafka.auto.offset.reset": "earliest"}, False, "use startingOffsets / endingOffsets"),
    ({"subscribe": "t", "kafka.enable.auto.commit": "true"}, False, "never commits offsets"),
    ({"assign": '{"t":[-1]}'}, False, "is not a partition number"),
    ({"subscribe": "t", "startingOffsetsByTimestampStrategy": "skip"}, False, "must be error or latest"),
])
def test_bad_options(options: dict[str, str], streaming: bool, message: str) -> None:
    with pytest.raises(OptionsError) as caught:
        parse(streaming=streaming, **options)
    assert message in str(caught.value)


def test_missing_bootstrap() -> None:
    with pytest.raises(OptionsError, match="kafka.bootstrap.servers is required"):
        SourceOptions.parse({"subscribe": "t"}, streaming=False)


def test_sink_defaults_to_acks_all_and_kafka_acks_overrides() -> None:
    assert SinkOptions.parse({**BOOT, "topic": "t"}).client["acks"] == "all"
    assert SinkOptions.parse({**BOOT, "kafka.acks": "1"}).client["acks"] == "1"
    assert SinkOptions.parse(BOOT).topic is None
