"""The client instances a worker has seen, and Kafka's rules for their telemetry requests
(Kafka's ClientMetricsManager and ClientMetricsInstance).

* GetTelemetrySubscriptions with the zero (or no) client instance id is given a new random
  one. A client instance's subscription is worked out when it is first seen and again after
  any subscription changed (``Subscriptions.version``): the metrics of every subscription it
  matches ("*" alone if one asks for every metric), and the shortest of their intervals (5
  minutes when none matches). Its subscription id is a CRC32C of those metrics and that
  interval, XORed with a hash of the instance id, so it changes when they change.
* Too early (Kafka's timestamps): a Get less than one push interval after the instance's last
  Get or push is THROTTLING_QUOTA_EXCEEDED; so is a push less than one interval after the
  last push, unless a Get came between (the client jitters its pushes) or it is terminating.
  After a terminating push, any push is INVALID_REQUEST. A push with another subscription id
  is UNKNOWN_SUBSCRIPTION_ID (the client then asks again), an unknown compression type
  UNSUPPORTED_COMPRESSION_TYPE, more than ``telemetry.max.bytes`` TELEMETRY_TOO_LARGE.
* A client instance seen by another worker (its connection moved) is simply created here:
  the subscription id is the same function of the same subscriptions, so its push is taken.
* At most ``MAX_INSTANCES`` are kept (least recently used out first), and one idle for
  longer than max(1 minute, 3 push intervals) is dropped, as Kafka's cache and its
  expiration timer do.
"""

from __future__ import annotations

import base64
import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Callable, Mapping

import crc32c

from broker.protocol.errors import ErrorCode, KafkaError
from broker.telemetry.subscriptions import ALL_METRICS, DEFAULT_INTERVAL_MS, Subscription

MAX_INSTANCES = 16384
MIN_EXPIRY_MS = 60_000
# CompressionType ids Kafka accepts for pushes, in its order of preference.
ACCEPTED_COMPRESSION_TYPES = (4, 3, 1, 2)  # zstd, lz4, gzip, snappy
KNOWN_COMPRESSION_TYPES = frozenset({0, 1, 2, 3, 4})
ZERO_UUID = uuid.UUID(int=0)
# Kafka's Uuid.RESERVED: the zero id and the metadata topic's id (1).
RESERVED_UUIDS = frozenset({ZERO_UUID, uuid.UUID(int=1)})


def kafka_uuid_text(value: uuid.UUID) -> str:
    """Kafka's Uuid.toString: URL-safe base64 of the 16 bytes, unpadded. Subscriptions match
    ``client_instance_id`` against it, and clients print it (``clientInstanceId()``)."""
    return base64.urlsafe_b64encode(value.bytes).rstrip(b"=").decode()


def subscription_id(metrics: tuple[str, ...], interval_ms: int, instance: uuid.UUID) -> int:
    digest = crc32c.crc32c(f"{list(metrics)}{interval_ms}".encode())
    value = (digest ^ (instance.int & 0xFFFFFFFF) ^ (instance.int >> 96)) & 0xFFFFFFFF
    return value - (1 << 32) if value >= (1 << 31) else value


@dataclass(slots=True)
class ClientInstance:
    instance_id: uuid.UUID
    attributes: dict[str, str | None]
    subscription_id: int
    subscription_version: int
    metrics: tuple[str, ...]
    interval_ms: int
    last_get_ms: float = 0.0
    last_push_ms: float = 0.0
    last_seen_ms: float = 0.0
    terminating: bool = False
    last_error: int = 0
    extra: dict[str, object] = field(default_factory=dict)

    def get_allowed(self, now_ms: float) -> bool:
        if now_ms - max(self.last_get_ms, self.last_push_ms) >= self.interval_ms:
            self.last_get_ms = now_ms
            return True
        return False

    def push_allowed(self, now_ms: float) -> bool:
        accept = self.last_get_ms > self.last_push_ms or now_ms - self.last_push_ms >= self.interval_ms
        if accept:
            self.last_push_ms = now_ms
        return accept


class ClientInstances:
    """One worker's client instances; every method runs on the worker's loop."""

    def __init__(self, subscriptions: Callable[[], tuple[int, Mapping[str, Subscription]]],
                 clock: Callable[[], float] = time.monotonic, max_instances: int = MAX_INSTANCES) -> None:
        self._subscriptions = subscriptions  # () -> (version, table)
        self._clock = clock
        self._max = max_instances
        self._instances: OrderedDict[uuid.UUID, ClientInstance] = OrderedDict()

    def now_ms(self) -> float:
        return self._clock() * 1000.0

    def __len__(self) -> int:
        return len(self._instances)

    def new_id(self) -> uuid.UUID:
        while True:
            candidate = uuid.uuid4()
            if candidate not in self._instances and candidate not in RESERVED_UUIDS:
                return candidate

    def _create(self, instance_id: uuid.UUID, attributes: dict[str, str | None]) -> ClientInstance:
        version, table = self._subscriptions()
        attributes = dict(attributes, client_instance_id=kafka_uuid_text(instance_id))
        metrics: list[str] = []
        interval = DEFAULT_INTERVAL_MS
        every = False
        for name in sorted(table):
            sub = table[name]
            if sub.matches(attributes):
                every = every or ALL_METRICS in sub.metrics
                metrics.extend(m for m in sub.metrics if m not in metrics)
                interval = min(interval, sub.interval_ms)
        chosen = (ALL_METRICS,) if every else tuple(sorted(metrics))
        return ClientInstance(instance_id, attributes, subscription_id(chosen, interval, instance_id), version,
                              chosen, interval)

    def instance(self, instance_id: uuid.UUID, attributes: dict[str, str | None]) -> ClientInstance:
        """The instance, created or worked out again when the subscriptions changed."""
        self.expire()
        found = self._instances.get(instance_id)
        version, _ = self._subscriptions()
        if found is None:
            found = self._create(instance_id, attributes)
        elif found.subscription_version != version:
            renewed = self._create(instance_id, found.attributes)
            renewed.last_get_ms, renewed.last_push_ms = found.last_get_ms, found.last_push_ms
            renewed.terminating, renewed.last_error, renewed.extra = found.terminating, found.last_error, found.extra
            found = renewed
        found.last_seen_ms = self.now_ms()
        self._instances[instance_id] = found
        self._instances.move_to_end(instance_id)
        while len(self._instances) > self._max:
            self._instances.popitem(last=False)
        return found

    def expire(self) -> list[uuid.UUID]:
        now = self.now_ms()
        gone = [iid for iid, inst in self._instances.items()
                if now - inst.last_seen_ms > max(MIN_EXPIRY_MS, 3 * inst.interval_ms)]
        for iid in gone:
            del self._instances[iid]
        return gone

    # ------------------------------------------------------------------ the two requests
    def get_subscriptions(self, requested: uuid.UUID | None, attributes: dict[str, str | None]) -> ClientInstance:
        """GetTelemetrySubscriptions: the instance to answer with, or KafkaError."""
        instance_id = requested if requested is not None and requested != ZERO_UUID else self.new_id()
        instance = self.instance(instance_id, attributes)
        # Kafka's check lets the error exemptions through only in name (its condition is
        # always true), so a Get too early is throttled whatever came before.
        if not instance.get_allowed(self.now_ms()):
            raise KafkaError(ErrorCode.throttling_quota_exceeded,
                             f"Request from the client [{requested}] arrived before the next push interval time")
        instance.last_error = 0
        return instance

    def check_push(self, requested: uuid.UUID | None, attributes: dict[str, str | None], sub_id: int, terminating: bool,
                   compression: int, size: int, max_bytes: int) -> ClientInstance:
        """PushTelemetry's checks, in Kafka's order; the instance whose metrics to take."""
        if requested is None or requested in RESERVED_UUIDS:
            raise KafkaError(ErrorCode.invalid_request,
                             f"Invalid request from the client [{requested}], invalid client instance id")
        instance = self.instance(requested, attributes)
        try:
            if instance.terminating:
                raise KafkaError(ErrorCode.invalid_request,
                                 f"Client [{requested}] sent the previous request with state terminating to TRUE, "
                                 "can not accept any requests after that")
            if not instance.push_allowed(self.now_ms()) and not terminating:
                raise KafkaError(ErrorCode.throttling_quota_exceeded,
                                 f"Request from the client [{requested}] arrived before the next push interval time")
            if sub_id != instance.subscription_id:
                raise KafkaError(ErrorCode.unknown_subscription_id,
                                 f"Unknown client subscription id for the client [{requested}]")
            if compression not in KNOWN_COMPRESSION_TYPES:
                raise KafkaError(ErrorCode.unsupported_compression_type,
                                 f"Unknown compression type [{compression}] is received in telemetry request from "
                                 f"[{requested}]")
            if size > max_bytes:
                raise KafkaError(ErrorCode.telemetry_too_large,
                                 f"Telemetry request from [{requested}] is larger than the maximum allowed size "
                                 f"[{max_bytes}]")
        except KafkaError as exc:
            instance.last_error = exc.code
            raise
        finally:
            instance.terminating = terminating
        return instance
