"""The keys of Kafka 4.4's GroupConfig and how Kafka validates a group's overrides.

Each key has Kafka's type, its own default, its broker synonym (the broker setting that is its
value for a group without an override: ``consumer.session.timeout.ms`` ->
``group.consumer.session.timeout.ms``) and its documentation. A group's effective value is its
override, else the synonym's value on this broker, else the key's own default (keys without a
synonym: ``share.auto.offset.reset``, ``share.isolation.level``, ...).

Validation is Kafka's GroupConfig.validate, applied to the group's whole override set after a
change: unknown names, values the key's type or validator refuses, values outside the broker's
bounds (``group.consumer.min.session.timeout.ms`` .. ``group.consumer.max.session.timeout.ms``
and the like, read from the broker), a session timeout not above the heartbeat interval (either
side the override or the broker's value), and the few special rules (the streams assignor must
be one the broker has, a dead-letter topic must not be internal, rack tags must not repeat).
Every failure is ``InvalidGroupConfig``, answered as INVALID_CONFIG with Kafka's message.

What a group runs with is ``evaluate``d (Kafka's GroupConfig.evaluate): an override the broker's
bounds no longer admit (they were changed after it was set) is capped to them, with a warning;
DescribeConfigs still shows the stored value, as Kafka does.

The broker's values come in as ``BrokerValues``: what Castle declares (broker/config.py) is
passed in; a bound Castle does not declare has Kafka's default (``KAFKA_BROKER_DEFAULTS``), so
a new broker setting takes effect here once the broker passes it, with no change to this table.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Mapping

log = logging.getLogger(__name__)

INT_MAX = 2**31 - 1
LONG_MAX = 2**63 - 1

# Kafka's ConfigDef types, by DescribeConfigs' ConfigType ids.
TYPE_BOOLEAN, TYPE_STRING, TYPE_INT, TYPE_LONG, TYPE_LIST = 1, 2, 3, 5, 7

Value = int | str  # bool is an int: BOOLEAN keys are bool


class InvalidGroupConfig(ValueError):
    """A group config Kafka refuses (INVALID_CONFIG); the message is Kafka's."""


@dataclass(frozen=True, slots=True)
class GroupKey:
    name: str
    config_type: int
    default: str | None            # Kafka's GroupConfig default, as text
    doc: str
    broker_key: str | None = None  # GroupConfig.brokerSynonym
    at_least: int | None = None    # the ConfigDef Range.atLeast
    at_most: int | None = None
    choices: tuple[str, ...] = ()  # ValidString
    internal: bool = False         # described only when set


def _k(name: str, config_type: int, default: str | None, doc: str, broker_key: str | None = None,
       at_least: int | None = None, choices: tuple[str, ...] = (), internal: bool = False) -> GroupKey:
    return GroupKey(name, config_type, default, doc, broker_key, at_least, None, choices, internal)


_AUTO_OFFSET_RESET_DOC = (
    "The strategy to initialize the share-partition start offset. <ul><li>earliest: automatically reset the offset "
    "to the earliest offset</li><li>latest: automatically reset the offset to the latest offset</li>"
    "<li>by_duration:&lt;duration&gt;: automatically reset the offset to a configured duration from the current "
    "timestamp. &lt;duration&gt; must be specified in ISO8601 format (PnDTnHnMn.nS). Negative duration is not "
    "allowed.</li><li>anything else: throw exception to the share consumer.</li></ul>")
_ISOLATION_DOC = (
    "Controls how to read records written transactionally. If set to \"read_committed\", the share group will only "
    "deliver transactional records which have been committed. If set to \"read_uncommitted\", the share group will "
    "return all messages, even transactional messages which have been aborted. Non-transactional records will be "
    "returned unconditionally in either mode.")
_STREAMS_ASSIGNOR_DOC = (
    "The task assignor to use for this streams group, selected by short name from the assignors registered via the "
    "broker configuration group.streams.assignors. When unset, the group defaults to the first assignor configured "
    "in the broker's group.streams.assignors setting. Changing the assignor does not trigger a rebalance for the "
    "group; the new assignor takes effect on the next rebalance.")

# In Kafka's declaration order (DescribeConfigs lists them so).
KEYS: dict[str, GroupKey] = {key.name: key for key in (
    _k("consumer.session.timeout.ms", TYPE_INT, "45000",
       "The timeout to detect client failures when using the consumer group protocol.",
       "group.consumer.session.timeout.ms", 1),
    _k("consumer.heartbeat.interval.ms", TYPE_INT, "5000",
       "The heartbeat interval given to the members of a consumer group.",
       "group.consumer.heartbeat.interval.ms", 1),
    _k("consumer.assignment.interval.ms", TYPE_INT, "1000",
       "The interval between assignment updates for a consumer group.",
       "group.consumer.assignment.interval.ms", 0),
    _k("consumer.assignor.offload.enable", TYPE_BOOLEAN, "true",
       "Whether to offload consumer group assignment to a group coordinator background thread.",
       "group.consumer.assignor.offload.enable", internal=True),
    _k("share.session.timeout.ms", TYPE_INT, "45000",
       "The timeout to detect client failures when using the share group protocol.",
       "group.share.session.timeout.ms", 1),
    _k("share.heartbeat.interval.ms", TYPE_INT, "5000",
       "The heartbeat interval given to the members of a share group.",
       "group.share.heartbeat.interval.ms", 1),
    _k("share.record.lock.duration.ms", TYPE_INT, "30000",
       "The record acquisition lock duration in milliseconds for share groups.",
       "group.share.record.lock.duration.ms", 1000),
    _k("share.delivery.count.limit", TYPE_INT, "5",
       "The maximum number of delivery attempts for a record delivered to a share group.",
       "group.share.delivery.count.limit", 2),
    _k("share.partition.max.record.locks", TYPE_INT, "2000",
       "Share-group record lock limit per share-partition.",
       "group.share.partition.max.record.locks", 100),
    _k("share.auto.offset.reset", TYPE_STRING, "latest", _AUTO_OFFSET_RESET_DOC),
    _k("share.isolation.level", TYPE_STRING, "read_uncommitted", _ISOLATION_DOC,
       choices=("read_committed", "read_uncommitted")),
    _k("share.renew.acknowledge.enable", TYPE_BOOLEAN, "true",
       "Whether the renew acknowledge type is enabled for the share group."),
    _k("share.assignment.interval.ms", TYPE_INT, "1000",
       "The interval between assignment updates for a share group.",
       "group.share.assignment.interval.ms", 0),
    _k("share.assignor.offload.enable", TYPE_BOOLEAN, "true",
       "Whether to offload share group assignment to a group coordinator background thread.",
       "group.share.assignor.offload.enable", internal=True),
    _k("streams.session.timeout.ms", TYPE_INT, "45000",
       "The timeout to detect client failures when using the streams group protocol.",
       "group.streams.session.timeout.ms", 1),
    _k("streams.heartbeat.interval.ms", TYPE_INT, "5000", "The heartbeat interval given to the members.",
       "group.streams.heartbeat.interval.ms", 1),
    _k("streams.num.standby.replicas", TYPE_INT, "0", "The number of standby replicas for each task.",
       "group.streams.num.standby.replicas", 0),
    _k("streams.initial.rebalance.delay.ms", TYPE_INT, "3000",
       "The amount of time the group coordinator will wait for more streams clients to join a new group before "
       "performing the first rebalance. A longer delay means potentially fewer rebalances.",
       "group.streams.initial.rebalance.delay.ms", 0),
    _k("streams.assignment.interval.ms", TYPE_INT, "1000",
       "The interval between assignment updates for a streams group.",
       "group.streams.assignment.interval.ms", 0),
    _k("streams.assignor.offload.enable", TYPE_BOOLEAN, "true",
       "Whether to offload streams group assignment to a group coordinator background thread.",
       "group.streams.assignor.offload.enable", internal=True),
    _k("streams.task.offset.interval.ms", TYPE_INT, "60000",
       "The interval in which the warmup task changelog offsets on a client are updated on the broker. The offsets "
       "are sent with the next heartbeat after this time has passed.",
       "group.streams.task.offset.interval.ms", 1, internal=True),
    _k("streams.num.warmup.replicas", TYPE_INT, "2", "The maximum number of warmup task replicas.",
       "group.streams.num.warmup.replicas", 0, internal=True),
    _k("streams.rack.aware.assignment.tags", TYPE_LIST, "",
       "List of client tag keys used to distribute standby replicas across Kafka Streams instances. When "
       "configured, and the used broker-side assignor supports it, it will make a best-effort to distribute standby "
       "tasks over each client tag dimension.",
       "group.streams.rack.aware.assignment.tags"),
    _k("streams.acceptable.recovery.lag", TYPE_LONG, "10000",
       "The maximum acceptable lag (number of offsets to catch up) for a client to be considered caught-up enough "
       "to receive an active task assignment.",
       "group.streams.acceptable.recovery.lag", 0, internal=True),
    _k("streams.assignor.name", TYPE_STRING, None, _STREAMS_ASSIGNOR_DOC, "group.streams.assignors"),
    _k("errors.deadletterqueue.topic.name", TYPE_STRING, "",
       "The name of the topic to be used as the dead-letter queue (DLQ) topic for this share group. If blank (the "
       "default), the group does not have a DLQ topic."),
    _k("errors.deadletterqueue.copy.record.enable", TYPE_BOOLEAN, "false",
       "When writing onto the dead-letter queue topic, whether to copy the original record onto the DLQ topic, or "
       "just write a record containing the context information headers."),
)}

# The broker settings group configs read, with Kafka 4.4's defaults: the synonyms, and the
# bounds GroupConfig.validate checks overrides against.
KAFKA_BROKER_DEFAULTS: dict[str, Value] = {
    "group.consumer.session.timeout.ms": 45_000,
    "group.consumer.min.session.timeout.ms": 45_000,
    "group.consumer.max.session.timeout.ms": 60_000,
    "group.consumer.heartbeat.interval.ms": 5_000,
    "group.consumer.min.heartbeat.interval.ms": 5_000,
    "group.consumer.max.heartbeat.interval.ms": 15_000,
    "group.consumer.assignment.interval.ms": 1_000,
    "group.consumer.min.assignment.interval.ms": 0,
    "group.consumer.max.assignment.interval.ms": 15_000,
    "group.consumer.assignor.offload.enable": True,
    "group.share.session.timeout.ms": 45_000,
    "group.share.min.session.timeout.ms": 45_000,
    "group.share.max.session.timeout.ms": 60_000,
    "group.share.heartbeat.interval.ms": 5_000,
    "group.share.min.heartbeat.interval.ms": 5_000,
    "group.share.max.heartbeat.interval.ms": 15_000,
    "group.share.record.lock.duration.ms": 30_000,
    "group.share.min.record.lock.duration.ms": 15_000,
    "group.share.max.record.lock.duration.ms": 60_000,
    "group.share.delivery.count.limit": 5,
    "group.share.min.delivery.count.limit": 2,
    "group.share.max.delivery.count.limit": 10,
    "group.share.partition.max.record.locks": 2_000,
    "group.share.min.partition.max.record.locks": 100,
    "group.share.max.partition.max.record.locks": 4_000,
    "group.share.assignment.interval.ms": 1_000,
    "group.share.min.assignment.interval.ms": 0,
    "group.share.max.assignment.interval.ms": 15_000,
    "group.share.assignor.offload.enable": True,
    "group.streams.session.timeout.ms": 45_000,
    "group.streams.min.session.timeout.ms": 45_000,
    "group.streams.max.session.timeout.ms": 60_000,
    "group.streams.heartbeat.interval.ms": 5_000,
    "group.streams.min.heartbeat.interval.ms": 5_000,
    "group.streams.max.heartbeat.interval.ms": 15_000,
    "group.streams.num.standby.replicas": 0,
    "group.streams.max.standby.replicas": 2,
    "group.streams.initial.rebalance.delay.ms": 3_000,
    "group.streams.assignment.interval.ms": 1_000,
    "group.streams.min.assignment.interval.ms": 0,
    "group.streams.max.assignment.interval.ms": 15_000,
    "group.streams.assignor.offload.enable": True,
    "group.streams.task.offset.interval.ms": 60_000,
    "group.streams.min.task.offset.interval.ms": 15_000,
    "group.streams.num.warmup.replicas": 2,
    "group.streams.max.warmup.replicas": 20,
    "group.streams.rack.aware.assignment.tags": "",
    "group.streams.acceptable.recovery.lag": 10_000,
    "group.streams.assignors": "sticky",
}

# GroupConfig.validateValues: key -> (broker minimum, broker maximum), either may be absent.
_BOUNDS: dict[str, tuple[str | None, str | None]] = {
    "consumer.heartbeat.interval.ms": ("group.consumer.min.heartbeat.interval.ms", "group.consumer.max.heartbeat.interval.ms"),
    "consumer.session.timeout.ms": ("group.consumer.min.session.timeout.ms", "group.consumer.max.session.timeout.ms"),
    "consumer.assignment.interval.ms": ("group.consumer.min.assignment.interval.ms",
                                        "group.consumer.max.assignment.interval.ms"),
    "share.heartbeat.interval.ms": ("group.share.min.heartbeat.interval.ms", "group.share.max.heartbeat.interval.ms"),
    "share.session.timeout.ms": ("group.share.min.session.timeout.ms", "group.share.max.session.timeout.ms"),
    "share.record.lock.duration.ms": ("group.share.min.record.lock.duration.ms", "group.share.max.record.lock.duration.ms"),
    "share.delivery.count.limit": ("group.share.min.delivery.count.limit", "group.share.max.delivery.count.limit"),
    "share.partition.max.record.locks": ("group.share.min.partition.max.record.locks",
                                         "group.share.max.partition.max.record.locks"),
    "share.assignment.interval.ms": ("group.share.min.assignment.interval.ms", "group.share.max.assignment.interval.ms"),
    "streams.heartbeat.interval.ms": ("group.streams.min.heartbeat.interval.ms", "group.streams.max.heartbeat.interval.ms"),
    "streams.session.timeout.ms": ("group.streams.min.session.timeout.ms", "group.streams.max.session.timeout.ms"),
    "streams.num.standby.replicas": (None, "group.streams.max.standby.replicas"),
    "streams.assignment.interval.ms": ("group.streams.min.assignment.interval.ms",
                                       "group.streams.max.assignment.interval.ms"),
    "streams.task.offset.interval.ms": ("group.streams.min.task.offset.interval.ms", None),
    "streams.num.warmup.replicas": (None, "group.streams.max.warmup.replicas"),
}

# (session key, heartbeat key): the session must outlast the heartbeat interval.
_SESSION_PAIRS = (("consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"),
                  ("share.session.timeout.ms", "share.heartbeat.interval.ms"),
                  ("streams.session.timeout.ms", "streams.heartbeat.interval.ms"))

# java.time.Duration.parse's text (by_duration:PnDTnHnMn.nS), without a sign: negative is refused.
_DURATION = re.compile(r"P(?:\d+D)?(?:T(?:\d+H)?(?:\d+M)?(?:\d+(?:\.\d{1,9})?S)?)?", re.IGNORECASE)
_DURATION_PARTS = re.compile(r"P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d{1,9})?)S)?)?", re.IGNORECASE)


def reset_duration_ms(reset: str) -> int | None:
    """The duration of a ``by_duration:PnDTnHnMn.nS`` offset reset, in milliseconds (None:
    not one)."""
    if not reset.lower().startswith("by_duration:"):
        return None
    found = _DURATION_PARTS.fullmatch(reset[len("by_duration:"):].strip())
    if found is None:
        return None
    days, hours, minutes, seconds = (float(g) if g else 0.0 for g in found.groups())
    return int((((days * 24 + hours) * 60 + minutes) * 60 + seconds) * 1000)


class BrokerValues:
    """The broker settings group configs read: ``values`` (what the broker declares; the rest
    keep Kafka's defaults) and which of them were set rather than left at their default
    (DescribeConfigs' STATIC_BROKER_CONFIG)."""

    def __init__(self, values: Mapping[str, Value] | None = None, set_names: frozenset[str] = frozenset()) -> None:
        self._values = {**KAFKA_BROKER_DEFAULTS, **(values or {})}
        self.set_names = set_names

    def value(self, name: str) -> Value:
        return self._values[name]

    def is_set(self, name: str) -> bool:
        return name in self.set_names


def _invalid(key: GroupKey, text: str, why: str) -> InvalidGroupConfig:
    return InvalidGroupConfig(f"Invalid value {text} for configuration {key.name}: {why}")


def _list_items(text: str) -> list[str]:
    stripped = text.strip()
    return [] if not stripped else [item.strip() for item in stripped.split(",")]


def parse(name: str, text: str) -> Value:
    """The typed value of one override (ConfigDef.parse then the key's validator)."""
    key = KEYS.get(name)
    if key is None:
        raise InvalidGroupConfig(f"Unknown group config name: {name}")
    trimmed = text.strip()
    if key.config_type in (TYPE_INT, TYPE_LONG):
        kind, top = ("INT", INT_MAX) if key.config_type == TYPE_INT else ("LONG", LONG_MAX)
        if not re.fullmatch(r"[+-]?\d+", trimmed) or not -top - 1 <= int(trimmed) <= top:
            raise _invalid(key, text, f"Not a number of type {kind}")
        number = int(trimmed)
        if key.at_least is not None and number < key.at_least:
            raise _invalid(key, text, f"Value must be at least {key.at_least}")
        return number
    if key.config_type == TYPE_BOOLEAN:
        if trimmed.lower() not in ("true", "false"):
            raise _invalid(key, text, "Expected value to be either true or false")
        return trimmed.lower() == "true"
    if key.config_type == TYPE_LIST:
        return ",".join(_list_items(trimmed))
    if key.choices and trimmed not in key.choices:
        raise _invalid(key, text, f"String must be one of: {', '.join(key.choices)}")
    if name == "share.auto.offset.reset":
        _check_auto_offset_reset(key, text, trimmed)
    return trimmed


def _check_auto_offset_reset(key: GroupKey, text: str, value: str) -> None:
    lowered = value.lower()
    if lowered in ("latest", "earliest"):
        return
    if lowered.startswith("by_duration:"):
        duration = value[len("by_duration:"):].strip()
        if duration.startswith("-"):
            raise _invalid(key, text, "Negative duration is not supported.")
        if _DURATION.fullmatch(duration) and duration.upper() not in ("P", "PT"):
            return
        raise _invalid(key, text, f"Unable to parse the specified duration: {duration}")
    raise _invalid(key, text, "Invalid value `" + value + "` for configuration share.auto.offset.reset."
                   " The value must be either 'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS.>'.")


def text_of(value: Value) -> str:
    """ConfigDef.convertToString: how DescribeConfigs writes a value."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def broker_default(name: str, broker: BrokerValues) -> Value | None:
    """The value a group without an override has: the broker synonym's, else Kafka's default."""
    key = KEYS[name]
    if key.broker_key is not None:
        value = broker.value(key.broker_key)
        if name == "streams.assignor.name":  # the synonym is a list; its first name is the default
            items = _list_items(str(value))
            return items[0] if items else None
        return value
    return None if key.default is None else parse(name, key.default)


def validate(overrides: Mapping[str, str], broker: BrokerValues) -> dict[str, Value]:
    """Kafka's GroupConfig.validate of a group's whole override set; the typed values.
    Raises InvalidGroupConfig."""
    for name in overrides:
        if name not in KEYS:
            raise InvalidGroupConfig(f"Unknown group config name: {name}")
    tags = overrides.get("streams.rack.aware.assignment.tags")
    if tags is not None:
        items = _list_items(tags)
        if len(set(items)) != len(items):
            raise InvalidGroupConfig("streams.rack.aware.assignment.tags must not contain duplicate tag keys.")
    values = {name: parse(name, text) for name, text in overrides.items()}
    for name, (low, high) in _BOUNDS.items():
        if name not in values:
            continue
        number = int(values[name])
        if low is not None and high is not None:
            lo, hi = int(broker.value(low)), int(broker.value(high))
            if not lo <= number <= hi:
                raise InvalidGroupConfig(f"{name} must be in the range {lo} to {hi} inclusive.")
        elif high is not None and number > int(broker.value(high)):
            raise InvalidGroupConfig(f"{name} must be less than or equal to {broker.value(high)}")
        elif low is not None and number < int(broker.value(low)):
            raise InvalidGroupConfig(f"{name} must be greater than or equal to {broker.value(low)}")
    assignor = values.get("streams.assignor.name")
    if assignor is not None:
        registered = _list_items(str(broker.value("group.streams.assignors")))
        if assignor not in registered:
            raise InvalidGroupConfig(f"streams.assignor.name '{assignor}' is not a registered task assignor. "
                                     f"Registered assignors are: [{', '.join(registered)}].")
    for session, heartbeat in _SESSION_PAIRS:
        if session in values or heartbeat in values:
            session_ms = values.get(session, broker_default(session, broker))
            heartbeat_ms = values.get(heartbeat, broker_default(heartbeat, broker))
            if int(session_ms or 0) <= int(heartbeat_ms or 0):
                raise InvalidGroupConfig(f"{session} must be greater than {heartbeat}")
    dlq = values.get("errors.deadletterqueue.topic.name")
    if isinstance(dlq, str) and dlq.startswith("__"):
        raise InvalidGroupConfig("errors.deadletterqueue.topic.name: DLQ topic name must not start with '__'")
    return values


def evaluate(group_id: str, values: Mapping[str, Value], broker: BrokerValues) -> dict[str, Value]:
    """Kafka's GroupConfig.evaluate: a group's parsed overrides as the coordinator uses them,
    each bounded value capped to the broker's current bounds (logged); a session not above
    the heartbeat interval is only logged."""
    out = dict(values)
    for name, (low, high) in _BOUNDS.items():
        if name not in out:
            continue
        number = int(out[name])
        if low is not None and number < int(broker.value(low)):
            capped = int(broker.value(low))
            log.warning("The group config '%s' for group '%s' has value %d which is below the broker's allowed "
                        "minimum %d. The effective value will be capped to %d.", name, group_id, number, capped, capped)
            out[name] = capped
        elif high is not None and number > int(broker.value(high)):
            capped = int(broker.value(high))
            log.warning("The group config '%s' for group '%s' has value %d which exceeds the broker's allowed "
                        "maximum %d. The effective value will be capped to %d.", name, group_id, number, capped, capped)
            out[name] = capped
    for session, heartbeat in _SESSION_PAIRS:
        if session in out or heartbeat in out:
            session_ms = int(out.get(session, broker_default(session, broker)) or 0)
            heartbeat_ms = int(out.get(heartbeat, broker_default(heartbeat, broker)) or 0)
            if session_ms <= heartbeat_ms:
                log.warning("The effective %s (%d) for group '%s' is not greater than %s (%d). Check that the "
                            "broker-level min/max bounds for session timeout and heartbeat interval do not overlap.",
                            session, session_ms, group_id, heartbeat, heartbeat_ms)
    return out
