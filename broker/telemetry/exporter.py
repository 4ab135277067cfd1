"""What clients pushed, on the Prometheus endpoint: Kafka's ClientTelemetryExporter
plugin interface, with Prometheus behind it.

Each worker keeps the latest value of every series its clients pushed (``TelemetryTable``)
and writes them, when they changed, to ``<run.dir>/worker-<n>.telemetry.json`` (as it writes
its stats file); the scrape (broker/process/metrics.py) reads every worker's file
(``telemetry_families``). Files, not prometheus_client's multiprocess values, because
client instances come and go: a series of a client that stopped pushing must disappear,
which multiprocess values cannot do.

A series is named after the OTLP metric (``org.apache.kafka.producer.record.send.total`` ->
``org_apache_kafka_producer_record_send_total``), labelled with ``client_instance_id`` (Kafka's
text of it, as the client's ``clientInstanceId()`` prints it) and the point's attributes. A monotonic Sum is a counter: the deltas the clients send (Kafka
asks for delta temporality) are added up here; gauges keep the last value. Bounded: at most
``max_instances`` client instances (the least recently pushed go first) and
``MAX_SERIES_PER_INSTANCE`` series each; an instance silent for longer than
max(1 minute, 3 push intervals) is dropped, as Kafka drops it from its cache.
"""

from __future__ import annotations

import glob
import math
import os
import re
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import orjson

from broker.telemetry.otlp import Point
from storage import files
from storage.releaser import RELEASER

MAX_INSTANCES = 1000
MAX_SERIES_PER_INSTANCE = 2000
MIN_STALE_SECONDS = 60.0
INSTANCE_LABEL = "client_instance_id"
_NOT_NAME = re.compile(r"[^a-zA-Z0-9_]")

SeriesKey = tuple[str, tuple[tuple[str, str], ...]]  # (metric name, attributes)


def prometheus_name(name: str) -> str:
    out = _NOT_NAME.sub("_", name)
    return "_" + out if not out or out[0].isdigit() else out


@dataclass(slots=True)
class _Instance:
    stale_after: float
    last_push: float
    series: dict[SeriesKey, list[Any]] = field(default_factory=dict)  # -> [counter, value, time_ns]


class TelemetryTable:
    """One worker's latest pushed values. Runs on the worker's loop."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, max_instances: int = MAX_INSTANCES) -> None:
        self._clock = clock
        self._max = max_instances
        self._instances: OrderedDict[str, _Instance] = OrderedDict()
        self.dirty = True  # the file is written once at start, empty

    def record(self, instance_id: str, interval_ms: int, points: list[Point]) -> None:
        now = self._clock()
        entry = self._instances.pop(instance_id, None)
        if entry is None:
            entry = _Instance(max(MIN_STALE_SECONDS, 3 * interval_ms / 1000.0), now)
        entry.last_push, entry.stale_after = now, max(MIN_STALE_SECONDS, 3 * interval_ms / 1000.0)
        self._instances[instance_id] = entry
        for point in points:
            key = (point.name, point.attributes)
            found = entry.series.get(key)
            if found is None:
                if len(entry.series) >= MAX_SERIES_PER_INSTANCE:
                    continue
                entry.series[key] = [point.counter, point.value, point.time_ns]
            elif point.counter and point.delta:
                if not math.isnan(point.value):  # a NaN delta would poison the total for good
                    found[1] += point.value
                found[2] = point.time_ns
            else:
                found[0], found[1], found[2] = point.counter, point.value, point.time_ns
        while len(self._instances) > self._max:
            self._instances.popitem(last=False)
        self.dirty = True

    def evict_stale(self) -> None:
        now = self._clock()
        stale = [iid for iid, entry in self._instances.items() if now - entry.last_push > entry.stale_after]
        for iid in stale:
            del self._instances[iid]
        self.dirty = self.dirty or bool(stale)

    def instances(self) -> list[str]:
        return list(self._instances)

    def snapshot(self) -> list[list[Any]]:
        return [[iid, name, counter, dict(attributes), value, time_ns]
                for iid, entry in self._instances.items()
                for (name, attributes), (counter, value, time_ns) in entry.series.items()]

    def write(self, run_dir: str, worker: int) -> None:
        """Write the file if anything changed (off the loop, as the stats file)."""
        self.evict_stale()
        if not self.dirty:
            return
        self.dirty = False
        data = orjson.dumps({"worker": worker, "series": self.snapshot()})
        RELEASER.submit(files.replace_file, telemetry_path(run_dir, worker), data)


def telemetry_path(run_dir: str, worker: int) -> str:
    return os.path.join(run_dir, f"worker-{worker}.telemetry.json")


def _read_all(run_dir: str) -> Iterator[list[Any]]:
    for path in sorted(glob.glob(os.path.join(run_dir, "worker-*.telemetry.json"))):
        try:
            with open(path, "rb") as handle:
                doc = orjson.loads(handle.read())
        except (OSError, ValueError):
            continue
        for row in doc.get("series", ()) if isinstance(doc, dict) else ():
            if isinstance(row, list) and len(row) == 6 and isinstance(row[3], dict):
                # JSON has no NaN (a client's average with no samples yet): it comes back null.
                row[4] = math.nan if row[4] is None else float(row[4])
                yield row


def telemetry_families(run_dir: str) -> Iterator[Any]:
    """Every worker's series as Prometheus metric families: counters summed over the workers
    (a client whose connection moved pushed deltas to both), gauges the latest."""
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

    merged: dict[tuple[str, bool, str, tuple[tuple[str, str], ...]], tuple[float, int]] = {}
    for instance, name, counter, attributes, value, time_ns in _read_all(run_dir):
        labels = {prometheus_name(k): str(v) for k, v in attributes.items()}
        labels[INSTANCE_LABEL] = instance
        key = (prometheus_name(name), bool(counter), instance, tuple(sorted(labels.items())))
        previous = merged.get(key)
        if previous is None:
            merged[key] = (value, time_ns)
        elif counter:
            merged[key] = (previous[0] + value, max(previous[1], time_ns))
        elif time_ns >= previous[1]:
            merged[key] = (value, time_ns)
    by_family: dict[tuple[str, bool], list[tuple[dict[str, str], float]]] = {}
    for (name, counter, _instance, label_pairs), (value, _time) in merged.items():
        by_family.setdefault((name, counter), []).append((dict(label_pairs), value))
    for (name, counter), samples in sorted(by_family.items()):
        label_names = sorted({label for labels, _ in samples for label in labels})
        what = "A counter a client pushed (KIP-714)" if counter else "A gauge a client pushed (KIP-714)"
        family = (CounterMetricFamily if counter else GaugeMetricFamily)(name, what, labels=label_names)
        for labels, value in samples:
            family.add_metric([labels.get(label, "") for label in label_names], value)
        yield family
