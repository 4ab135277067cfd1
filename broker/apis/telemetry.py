"""GetTelemetrySubscriptions (key 71) v0 and PushTelemetry (key 72) v0: client telemetry (KIP-714).

Behaviour: Kafka's ClientMetricsManager (broker/telemetry/instances.py has the rules). The
answer to Get carries the client instance id (a new one when the client sent the zero
uuid), the subscription id, the requested metric prefixes, the push interval, the
compression types a push may use (zstd, lz4, gzip, snappy), ``telemetry.max.bytes`` and
delta temporality (true, as Kafka). A push that passes the checks is decoded
(broker/telemetry/otlp.py) and its points kept for the Prometheus endpoint
(broker/telemetry/exporter.py); metrics that do not decode are INVALID_RECORD, and the
instance stays usable. Both APIs are answered by the worker the connection is on: a client
instance is a worker's (Kafka: a broker's) until it goes quiet.

No ACL applies (Kafka checks none: telemetry concerns the client itself).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from broker.context import RequestContext, Response
from broker.dispatch import api
from broker.protocol import codec
from broker.protocol.build import build
from broker.protocol.errors import ErrorCode, KafkaError
from broker.telemetry.instances import ACCEPTED_COMPRESSION_TYPES, ZERO_UUID, kafka_uuid_text
from broker.telemetry.otlp import UndecodableMetrics, decode

if TYPE_CHECKING:  # ~200 kio classes, for mypy only: none is imported at run time (requests.py)
    from broker.protocol.requests import GetTelemetrySubscriptionsRequest, PushTelemetryRequest

log = logging.getLogger(__name__)

GET_KEY = 71
PUSH_KEY = 72


def client_attributes(ctx: RequestContext) -> dict[str, str | None]:
    """What a subscription's ``match`` patterns are matched against (Kafka's
    ClientMetricsInstanceMetadata)."""
    connection = ctx.connection
    name, version = connection.client_software
    address, _, port = connection.peer.rpartition(":")
    return {"client_id": ctx.client_id, "client_software_name": name, "client_software_version": version,
            "client_source_address": address.strip("[]") or None, "client_source_port": port or None}


def _get_error(_request: Any, version: int, code: int, message: str | None = None) -> Any:
    return build(codec.response_class(GET_KEY, version), {
        "throttle_time": 0, "error_code": code, "client_instance_id": ZERO_UUID, "subscription_id": 0,
        "accepted_compression_types": [], "push_interval": 0, "telemetry_max_bytes": 0, "delta_temporality": False,
        "requested_metrics": []})


@api(GET_KEY, "GetTelemetrySubscriptions", 0, 0, error_response=_get_error)
def handle_get_telemetry_subscriptions(ctx: RequestContext, request: GetTelemetrySubscriptionsRequest) -> Response:
    telemetry = ctx.node.telemetry
    try:
        instance = telemetry.instances.get_subscriptions(request.client_instance_id, client_attributes(ctx))
    except KafkaError as exc:
        return _get_error(request, ctx.api_version, exc.code)
    return build(codec.response_class(GET_KEY, ctx.api_version), {
        "throttle_time": 0,
        "error_code": 0,
        "client_instance_id": instance.instance_id,
        "subscription_id": instance.subscription_id,
        "accepted_compression_types": list(ACCEPTED_COMPRESSION_TYPES),
        "push_interval": instance.interval_ms,
        "telemetry_max_bytes": telemetry.max_bytes,
        "delta_temporality": True,
        "requested_metrics": list(instance.metrics),
    })


def _push_answer(version: int, code: int) -> Any:
    return build(codec.response_class(PUSH_KEY, version), {"throttle_time": 0, "error_code": code})


def _push_error(_request: Any, version: int, code: int) -> Any:
    return _push_answer(version, code)


@api(PUSH_KEY, "PushTelemetry", 0, 0, error_response=_push_error)
def handle_push_telemetry(ctx: RequestContext, request: PushTelemetryRequest) -> Response:
    telemetry = ctx.node.telemetry
    metrics = request.metrics or b""
    try:
        instance = telemetry.instances.check_push(request.client_instance_id, client_attributes(ctx),
                                                  request.subscription_id, bool(request.terminating),
                                                  request.compression_type, len(metrics), telemetry.max_bytes)
    except KafkaError as exc:
        log.debug("push from client instance %s refused: %s", request.client_instance_id, exc)
        return _push_answer(ctx.api_version, exc.code)
    if metrics:
        try:
            points = decode(request.compression_type, metrics)
        except UndecodableMetrics as exc:
            log.info("push from client instance %s (compression %d, %d bytes): %s", instance.instance_id,
                     request.compression_type, len(metrics), exc)
            instance.last_error = int(ErrorCode.invalid_record)
            return _push_answer(ctx.api_version, ErrorCode.invalid_record)
        telemetry.table.record(kafka_uuid_text(instance.instance_id), instance.interval_ms, points)
    instance.last_error = 0
    return _push_answer(ctx.api_version, 0)
