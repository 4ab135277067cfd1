"""The options of ``format("castle")``: Spark's Kafka source and sink option names, read
and checked on the driver so that a mistake is one clear message before any task runs.

Spark hands a data source its options as a case-insensitive dict of strings; the names
here are matched in lower case. ``kafka.<name>`` options go to the Kafka client as
``<name>``, except those Spark's Kafka source also refuses because the source itself
must control them.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Mapping

from pipeline.offsets import EARLIEST, LATEST, OffsetsError, PartitionOffsets, parse_offsets_json, parse_timestamps_json

# Spark's Kafka source refuses these: the source decides where to read and never commits.
REFUSED_CLIENT_OPTIONS = {
    "group.id": "the source reads with assign(): no group is joined (Spark's groupIdPrefix is not needed)",
    "auto.offset.reset": "use startingOffsets / endingOffsets",
    "enable.auto.commit": "the source never commits offsets: its checkpoint holds them",
    "key.deserializer": "keys are always read as binary; cast them in the query",
    "value.deserializer": "values are always read as binary; cast them in the query",
    "key.serializer": "write a string or binary key column",
    "value.serializer": "write a string or binary value column",
    "interceptor.classes": "JVM interceptors do not apply to a Python client",
}

# Spark's names for the client address; bootstrap.servers alone is accepted too (issue 7).
BOOTSTRAP_KEYS = ("kafka.bootstrap.servers", "bootstrap.servers")


class OptionsError(ValueError):
    """An option that cannot be used; the message names it."""


def lower_keys(options: Mapping[str, str]) -> dict[str, str]:
    return {str(key).lower(): str(value) for key, value in options.items()}


def bootstrap_servers(options: Mapping[str, str]) -> str:
    for key in BOOTSTRAP_KEYS:
        if options.get(key, "").strip():
            return options[key].strip()
    raise OptionsError("option kafka.bootstrap.servers is required (e.g. .option(\"kafka.bootstrap.servers\", "
                       "\"127.0.0.1:9092\"))")


def client_config(options: Mapping[str, str]) -> dict[str, str]:
    """The ``kafka.*`` options as librdkafka settings (confluent-kafka)."""
    config: dict[str, str] = {}
    for key, value in options.items():
        if not key.startswith("kafka."):
            continue
        name = key[len("kafka."):]
        if name in REFUSED_CLIENT_OPTIONS:
            raise OptionsError(f"option kafka.{name} is not supported: {REFUSED_CLIENT_OPTIONS[name]}")
        config[name] = value
    config["bootstrap.servers"] = bootstrap_servers(options)
    return config


def parse_bool(options: Mapping[str, str], name: str, default: bool) -> bool:
    text = options.get(name.lower())
    if text is None:
        return default
    if text.strip().lower() in ("true", "false"):
        return text.strip().lower() == "true"
    raise OptionsError(f"option {name} must be true or false, got {text!r}")


def parse_positive(options: Mapping[str, str], name: str) -> int | None:
    text = options.get(name.lower())
    if text is None:
        return None
    try:
        number = int(text.strip())
    except ValueError:
        raise OptionsError(f"option {name} must be a positive integer, got {text!r}") from None
    if number <= 0:
        raise OptionsError(f"option {name} must be a positive integer, got {text!r}")
    return number


@dataclass(frozen=True)
class Subscription:
    """Which topics a read covers: exactly one of assign, subscribe, subscribePattern."""

    kind: str  # "assign" | "subscribe" | "subscribePattern"
    topics: tuple[str, ...] = ()
    partitions: tuple[tuple[str, int], ...] = ()
    pattern: str = ""


def parse_subscription(options: Mapping[str, str]) -> Subscription:
    given = [name for name in ("assign", "subscribe", "subscribepattern") if options.get(name, "").strip()]
    if len(given) != 1:
        what = f"got {len(given)}" + (f" ({', '.join(given)})" if given else "")
        raise OptionsError(f"exactly one of the options assign, subscribe, subscribePattern must be given, {what}")
    kind = given[0]
    text = options[kind].strip()
    if kind == "subscribe":
        topics = tuple(t.strip() for t in text.split(",") if t.strip())
        if not topics:
            raise OptionsError(f"option subscribe names no topic: {text!r}")
        return Subscription("subscribe", topics=topics)
    if kind == "subscribepattern":
        try:
            re.compile(text)
        except re.error as exc:
            raise OptionsError(f"option subscribePattern is not a valid regular expression ({exc}): {text!r}") from None
        return Subscription("subscribePattern", pattern=text)
    return Subscription("assign", partitions=parse_assign_json(text))


def parse_assign_json(text: str) -> tuple[tuple[str, int], ...]:
    """``{"topicA":[0,1],"topicB":[2]}`` → (("topicA", 0), ("topicA", 1), ("topicB", 2)), sorted."""
    try:
        parsed = json.loads(text)
    except ValueError as exc:
        raise OptionsError(f"assign is not valid JSON ({exc}): {text!r}; expected e.g. "
                           '{"topicA":[0,1],"topicB":[2,4]}') from None
    if not isinstance(parsed, dict) or not all(isinstance(p, list) for p in parsed.values()):
        raise OptionsError(f'assign must be a JSON object of topic to partition list, e.g. {{"topicA":[0,1]}}, got {text!r}')
    for topic, partitions in parsed.items():
        for partition in partitions:
            if isinstance(partition, bool) or not isinstance(partition, int) or partition < 0:
                raise OptionsError(f"assign: partition {partition!r} of topic {topic!r} is not a partition number")
    assigned = {(topic, partition) for topic, partitions in parsed.items() for partition in partitions}
    if not assigned:
        raise OptionsError(f"option assign names no partition: {text!r}")
    return tuple(sorted(assigned))


@dataclass(frozen=True)
class StartingPoint:
    """Where a read starts: "earliest", "latest", per-partition offsets, one timestamp for
    every partition, or per-partition timestamps."""

    kind: str  # "earliest" | "latest" | "offsets" | "timestamp" | "timestamps"
    offsets: PartitionOffsets = field(default_factory=dict)
    timestamp: int = 0
    # What a timestamp with no record at or after it gives: "error" or "latest".
    no_match: str = "error"


def parse_starting(options: Mapping[str, str], streaming: bool) -> StartingPoint:
    """startingTimestamp wins over startingOffsetsByTimestamp over startingOffsets."""
    strategy = options.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise OptionsError(f"option startingOffsetsByTimestampStrategy must be error or latest, got {strategy!r}")
    if options.get("startingtimestamp", "").strip():
        text = options["startingtimestamp"].strip()
        try:
            stamp = int(text)
        except ValueError:
            raise OptionsError(f"option startingTimestamp must be milliseconds since the epoch, got {text!r}") from None
        if stamp < 0:
            raise OptionsError(f"option startingTimestamp must be >= 0, got {text!r}")
        return StartingPoint("timestamp", timestamp=stamp, no_match=strategy)
    if options.get("startingoffsetsbytimestamp", "").strip():
        try:
            stamps = parse_timestamps_json(options["startingoffsetsbytimestamp"], "startingOffsetsByTimestamp")
        except OffsetsError as exc:
            raise OptionsError(str(exc)) from None
        return StartingPoint("timestamps", offsets=stamps, no_match=strategy)
    text = options.get("startingoffsets", "").strip()
    if not text:
        return StartingPoint("latest" if streaming else "earliest")
    if text.lower() in ("earliest", "latest"):
        if text.lower() == "latest" and not streaming:
            raise OptionsError("startingOffsets=latest is for streaming queries; a batch read starts at earliest "
                               "or at given offsets")
        return StartingPoint(text.lower())
    try:
        offsets = parse_offsets_json(text, "startingOffsets")
    except OffsetsError as exc:
        raise OptionsError(str(exc)) from None
    if not streaming and any(offset == LATEST for offset in offsets.values()):
        raise OptionsError("startingOffsets: -1 (latest) is not allowed in a batch read")
    return StartingPoint("offsets", offsets=offsets)


@dataclass(frozen=True)
class EndingPoint:
    kind: str  # "latest" | "offsets"
    offsets: PartitionOffsets = field(default_factory=dict)


def parse_ending(options: Mapping[str, str], streaming: bool) -> EndingPoint:
    text = options.get("endingoffsets", "").strip()
    for name in ("endingoffsets", "endingtimestamp", "endingoffsetsbytimestamp"):
        if streaming and options.get(name, "").strip():
            raise OptionsError(f"option {name} is for batch reads; a streaming query has no end")
    if options.get("endingtimestamp", "").strip() or options.get("endingoffsetsbytimestamp", "").strip():
        raise OptionsError("endingTimestamp / endingOffsetsByTimestamp are not supported; use endingOffsets")
    if not text or text.lower() == "latest":
        return EndingPoint("latest")
    if text.lower() == "earliest":
        raise OptionsError("endingOffsets=earliest is not allowed (the read would be empty); use latest or offsets")
    try:
        offsets = parse_offsets_json(text, "endingOffsets")
    except OffsetsError as exc:
        raise OptionsError(str(exc)) from None
    if any(offset == EARLIEST for offset in offsets.values()):
        raise OptionsError("endingOffsets: -2 (earliest) is not allowed")
    return EndingPoint("offsets", offsets=offsets)


@dataclass(frozen=True)
class SourceOptions:
    """Everything a read needs, checked. Picklable: executors get it in each partition."""

    client: dict[str, str]
    subscription: Subscription
    starting: StartingPoint
    ending: EndingPoint
    max_offsets_per_trigger: int | None
    min_partitions: int | None
    fail_on_data_loss: bool
    include_headers: bool
    # Seconds an executor waits for records it knows exist before failing the task
    # (Spark's kafkaConsumer.pollTimeoutMs, default 120 s = spark.network.timeout).
    poll_timeout: float
    # Seconds the driver waits for metadata and offsets before calling the broker
    # unreachable (Castle's own option, metadataTimeoutMs).
    metadata_timeout: float

    @property
    def bootstrap(self) -> str:
        return self.client["bootstrap.servers"]

    @classmethod
    def parse(cls, raw: Mapping[str, str], streaming: bool) -> "SourceOptions":
        options = lower_keys(raw)
        poll_ms = parse_positive(options, "kafkaConsumer.pollTimeoutMs") or 120_000
        metadata_ms = parse_positive(options, "metadataTimeoutMs") or 30_000
        return cls(
            client=client_config(options),
            subscription=parse_subscription(options),
            starting=parse_starting(options, streaming),
            ending=parse_ending(options, streaming),
            max_offsets_per_trigger=parse_positive(options, "maxOffsetsPerTrigger"),
            min_partitions=parse_positive(options, "minPartitions"),
            fail_on_data_loss=parse_bool(options, "failOnDataLoss", True),
            include_headers=parse_bool(options, "includeHeaders", False),
            poll_timeout=poll_ms / 1000.0,
            metadata_timeout=metadata_ms / 1000.0,
        )


@dataclass(frozen=True)
class SinkOptions:
    client: dict[str, str]
    topic: str | None
    metadata_timeout: float

    @classmethod
    def parse(cls, raw: Mapping[str, str]) -> "SinkOptions":
        options = lower_keys(raw)
        client = client_config(options)
        client.setdefault("acks", "all")  # issue 7: acks=all unless kafka.acks says otherwise
        topic = options.get("topic", "").strip() or None
        metadata_ms = parse_positive(options, "metadataTimeoutMs") or 30_000
        return cls(client=client, topic=topic, metadata_timeout=metadata_ms / 1000.0)
