"""What a client pushes: OpenTelemetry metrics (OTLP MetricsData, protobuf), maybe compressed.

Decoded with ``opentelemetry-proto`` (the OpenTelemetry project's generated classes over
Google's protobuf runtime): the format is theirs and evolves, so their schema is read rather
than a hand-written copy of it. Only number points are taken (Gauge; Sum, monotonic or not):
Kafka's clients send nothing else (their histograms and summaries are not part of KIP-714's
set), and Prometheus can show a number point as it is. Each point keeps its resource's and
its own attributes, which become labels.

Anything that does not decompress or parse raises ``UndecodableMetrics``: PushTelemetry
answers INVALID_RECORD, as Kafka does when its exporter plugin fails.
"""

from __future__ import annotations

from dataclasses import dataclass

from google.protobuf.message import DecodeError
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.metrics.v1.metrics_pb2 import AggregationTemporality, MetricsData, NumberDataPoint

from storage.compression import decompress
from storage.errors import CorruptRecordError, UnsupportedCompressionError

DELTA = AggregationTemporality.AGGREGATION_TEMPORALITY_DELTA
# Decompressed metrics larger than this are refused: the compressed size is bounded by
# telemetry.max.bytes, the expansion is not.
MAX_DECOMPRESSED = 64 * 1024 * 1024


class UndecodableMetrics(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class Point:
    name: str
    counter: bool        # a monotonic Sum: Prometheus's counter
    delta: bool          # the value is the increase since the previous push (else the total)
    attributes: tuple[tuple[str, str], ...]
    value: float
    time_ns: int


def _text(value: AnyValue) -> str:
    kind = value.WhichOneof("value")
    if kind is None:
        return ""
    return str(getattr(value, kind)) if kind in ("string_value", "bool_value", "int_value", "double_value") else kind


def _attributes(pairs: "list[KeyValue]") -> dict[str, str]:
    return {pair.key: _text(pair.value) for pair in pairs}


def _number(point: NumberDataPoint) -> float:
    return float(point.as_int) if point.WhichOneof("value") == "as_int" else float(point.as_double)


def decode(compression: int, payload: bytes) -> list[Point]:
    try:
        raw = decompress(compression, payload) if compression else payload
    except (CorruptRecordError, UnsupportedCompressionError, MemoryError) as exc:
        raise UndecodableMetrics(f"metrics do not decompress: {exc}") from None
    if len(raw) > MAX_DECOMPRESSED:
        raise UndecodableMetrics(f"metrics decompress to {len(raw)} bytes, more than {MAX_DECOMPRESSED}")
    data = MetricsData()
    try:
        data.ParseFromString(raw)
    except (DecodeError, RuntimeError, ValueError) as exc:
        raise UndecodableMetrics(f"metrics are not OTLP MetricsData: {exc}") from None
    points = []
    for resource_metrics in data.resource_metrics:
        resource = _attributes(list(resource_metrics.resource.attributes))
        for scope in resource_metrics.scope_metrics:
            for metric in scope.metrics:
                kind = metric.WhichOneof("data")
                if kind == "gauge":
                    numbers, counter, delta = metric.gauge.data_points, False, False
                elif kind == "sum":
                    numbers, counter = metric.sum.data_points, metric.sum.is_monotonic
                    delta = counter and metric.sum.aggregation_temporality == DELTA
                else:
                    continue
                for point in numbers:
                    attributes = dict(resource, **_attributes(list(point.attributes)))
                    points.append(Point(metric.name, counter, delta, tuple(sorted(attributes.items())), _number(point),
                                        point.time_unix_nano))
    return points
