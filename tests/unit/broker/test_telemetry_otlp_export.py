"""What clients push: OTLP MetricsData built with the OpenTelemetry classes, compressed with
each codec Kafka accepts, decoded, kept per client instance and shown as Prometheus families
(parsed back with prometheus_client's own parser)."""

from __future__ import annotations

import math
from pathlib import Path

import orjson
import pytest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.metrics.v1.metrics_pb2 import (
    AggregationTemporality,
    Gauge,
    Metric,
    MetricsData,
    NumberDataPoint,
    ResourceMetrics,
    ScopeMetrics,
    Sum,
)
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from broker.telemetry.exporter import TelemetryTable, telemetry_families
from broker.telemetry.otlp import UndecodableMetrics, decode
from storage import files
from storage.compression import compress


def metrics_data(sent: float, latency: float) -> bytes:
    attrs = [KeyValue(key="client_id", value=AnyValue(string_value="app-1"))]
    send_total = Metric(name="org.apache.kafka.producer.record.send.total", sum=Sum(
        aggregation_temporality=AggregationTemporality.AGGREGATION_TEMPORALITY_DELTA, is_monotonic=True,
        data_points=[NumberDataPoint(as_double=sent, time_unix_nano=5, attributes=attrs)]))
    latency_avg = Metric(name="org.apache.kafka.producer.request.latency.avg", gauge=Gauge(
        data_points=[NumberDataPoint(as_double=latency, time_unix_nano=5,
                                     attributes=[KeyValue(key="node.id", value=AnyValue(int_value=1))])]))
    resource = ResourceMetrics(scope_metrics=[ScopeMetrics(metrics=[send_total, latency_avg])])
    resource.resource.attributes.append(KeyValue(key="client_software_name", value=AnyValue(string_value="java")))
    return MetricsData(resource_metrics=[resource]).SerializeToString()


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
def test_every_accepted_codec_decodes(codec: int) -> None:
    points = decode(codec, compress(codec, metrics_data(3, 12.5)))
    by_name = {p.name: p for p in points}
    send = by_name["org.apache.kafka.producer.record.send.total"]
    assert send.counter and send.delta and send.value == 3
    assert dict(send.attributes) == {"client_id": "app-1", "client_software_name": "java"}
    latency = by_name["org.apache.kafka.producer.request.latency.avg"]
    assert not latency.counter and latency.value == 12.5 and dict(latency.attributes)["node.id"] == "1"


@pytest.mark.parametrize("codec,payload", [(0, b"\xff\xff\xff garbage"), (4, b"not zstd at all"), (1, b"\x1f\x8b broken"),
                                           (3, b"\x04\x22\x4d\x18 truncated")])
def test_garbage_is_undecodable(codec: int, payload: bytes) -> None:
    with pytest.raises(UndecodableMetrics):
        decode(codec, payload)


def scrape(run_dir: Path) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    class Collector:
        def collect(self) -> object:
            return telemetry_families(str(run_dir))

    registry = CollectorRegistry(auto_describe=False)
    registry.register(Collector())  # type: ignore[arg-type]
    out = {}
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def test_deltas_add_up_gauges_keep_the_last_and_workers_merge(tmp_path: Path) -> None:
    now = [0.0]
    worker0, worker1 = TelemetryTable(lambda: now[0]), TelemetryTable(lambda: now[0])
    worker0.record("abc", 1000, decode(0, metrics_data(3, 10)))
    worker0.record("abc", 1000, decode(0, metrics_data(4, 20)))
    worker1.record("abc", 1000, decode(0, metrics_data(5, 30)))  # the client's connection moved
    for index, table in enumerate((worker0, worker1)):
        files.replace_file(str(tmp_path / f"worker-{index}.telemetry.json"),
                           orjson.dumps({"worker": index, "series": table.snapshot()}))
    samples = scrape(tmp_path)
    send = ("org_apache_kafka_producer_record_send_total",
            (("client_id", "app-1"), ("client_instance_id", "abc"), ("client_software_name", "java")))
    assert samples[send] == 12
    latency = [v for (name, labels), v in samples.items() if name == "org_apache_kafka_producer_request_latency_avg"]
    assert latency == [20] or latency == [30]


def test_stale_instances_are_evicted_and_the_count_is_bounded() -> None:
    now = [0.0]
    table = TelemetryTable(lambda: now[0], max_instances=2)
    for iid in ("a", "b", "c"):
        table.record(iid, 1000, decode(0, metrics_data(1, 1)))
    assert table.instances() == ["b", "c"]
    now[0] = 59.0
    table.record("c", 1000, decode(0, metrics_data(1, 1)))
    now[0] = 61.0
    table.evict_stale()
    assert table.instances() == ["c"]


def test_nan_values_survive_the_file_and_do_not_poison_counters(tmp_path: Path) -> None:
    table = TelemetryTable(lambda: 0.0)
    table.record("abc", 1000, decode(0, metrics_data(2, float("nan"))))
    table.record("abc", 1000, decode(0, metrics_data(float("nan"), float("nan"))))
    files.replace_file(str(tmp_path / "worker-0.telemetry.json"), orjson.dumps({"series": table.snapshot()}))
    samples = scrape(tmp_path)
    by_name = {name: value for (name, _labels), value in samples.items()}
    assert by_name["org_apache_kafka_producer_record_send_total"] == 2
    assert math.isnan(by_name["org_apache_kafka_producer_request_latency_avg"])
