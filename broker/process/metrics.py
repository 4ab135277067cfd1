"""Prometheus metrics: what every worker counts, and the endpoint that shows it.

Two kinds of figures, kept two ways:

* **Counts and latencies** (requests per API and version, their latency, bytes and
  records in and out per topic, forwards, flush latency, how late each worker's loop
  runs, worker restarts) go through
  prometheus_client in multiprocess mode: each process writes its own mmap'd file under
  ``<run.dir>/metrics`` (PROMETHEUS_MULTIPROC_DIR, set by the supervisor before it forks),
  and a scrape sums them, so every worker counts and a restarted worker's totals stay.
  Workers do not call prometheus_client per request: an ``observe`` in multiprocess mode
  cost 2.7 µs (5.2 µs with ``labels``) on the benchmark machine, against ~50 µs for a whole
  small Produce request. ``WorkerMetrics`` adds into plain dicts on the hot path and
  moves the sums into prometheus_client's values once a second (``flush``).
* **State** (each partition's log start and end offsets and size, open connections) is
  read at scrape time from the workers' stats files (broker/process/node.py writes them every
  0.5 s), so a deleted partition disappears from the next scrape, which prometheus_client's
  multiprocess gauges cannot do. Consumer-group lag joins those log end offsets with the
  committed offsets the coordinator holds, at scrape time too. What clients push (KIP-714)
  rides in the workers' telemetry files the same way (broker/telemetry/exporter.py).

The endpoint (``metrics.listener``, default 127.0.0.1:9308, empty = off) is served by the
coordinator process, off the data path, with prometheus_client's WSGI app on a socket the
supervisor bound (so a port in use stops the start with a message, and a restarted
coordinator serves the same port).
"""

from __future__ import annotations

import bisect
import glob
import logging
import os
import shutil
import socket
import threading
from typing import Any, Callable, Iterable, Iterator

import orjson

from broker.network.tcp_bind import bind_exclusive
from broker.telemetry.exporter import telemetry_families
from storage.log import FlushTimes

log = logging.getLogger(__name__)

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
# Request latency buckets (seconds): from a local append (~0.1 ms) to a long-poll Fetch
# or a JoinGroup that waits out a rebalance.
LATENCY_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                   1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
FLUSH_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
# How late a worker's loop ran its probe timer (broker/process/loop_lag.py): the timer's own
# resolution is 1 ms, so the first bucket holds "on time".
LOOP_LAG_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


def metrics_dir(run_dir: str) -> str:
    return os.path.join(run_dir, "metrics")


def prepare_multiprocess_dir(run_dir: str) -> str:
    """Empty ``<run.dir>/metrics`` and point prometheus_client at it, before any fork or
    import of prometheus_client (it reads the variable when its values are created)."""
    path = metrics_dir(run_dir)
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path, mode=0o700)
    os.environ[MULTIPROC_ENV] = path
    return path


def mark_process_dead(pid: int) -> None:
    """A child ended: drop its live gauges (its counters stay counted)."""
    if os.environ.get(MULTIPROC_ENV):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(pid)


def enabled() -> bool:
    return bool(os.environ.get(MULTIPROC_ENV))


class _LatencySums:
    __slots__ = ("buckets", "total")

    def __init__(self, bounds: tuple[float, ...] = LATENCY_BUCKETS) -> None:
        self.buckets = [0] * (len(bounds) + 1)
        self.total = 0.0


class WorkerMetrics:
    """A worker's counters: cheap adds on the hot path, moved to prometheus_client by
    ``flush`` (called once a second from housekeeping). Inert when metrics are off."""

    def __init__(self, worker: int) -> None:
        self.worker = str(worker)
        self.on = enabled()
        self.requests: dict[tuple[str, int], _LatencySums] = {}
        self.topic_in: dict[str, list[int]] = {}  # topic -> [bytes, records]
        self.topic_out: dict[str, int] = {}
        self.loop_lag = _LatencySums(LOOP_LAG_BUCKETS)
        if not self.on:
            return
        from prometheus_client import Counter, Histogram

        self._requests = Counter("castle_requests", "Requests answered, by API and version", ["api", "version"])
        self._latency = Histogram("castle_request_duration_seconds",
                                  "Time from a request's arrival to its answer being queued", ["api", "version"],
                                  buckets=LATENCY_BUCKETS)
        self._bytes_in = Counter("castle_topic_bytes_in", "Record bytes appended by Produce, by topic", ["topic"])
        self._records_in = Counter("castle_topic_records_in", "Records appended by Produce, by topic", ["topic"])
        self._bytes_out = Counter("castle_topic_bytes_out", "Record bytes sent by Fetch, by topic", ["topic"])
        self._flush = Histogram("castle_log_flush_duration_seconds", "Time of one partition log flush (fdatasync)",
                                buckets=FLUSH_BUCKETS)
        self._loop_lag = Histogram("castle_worker_loop_lag_seconds",
                                   "How late a worker's event loop ran a timer due every 100 ms: the wait a request "
                                   "arriving then had before the worker could read it", ["worker"],
                                   buckets=LOOP_LAG_BUCKETS)
        self._counted: dict[str, int] = {}
        self._stat_counters = {
            "connections": Counter("castle_connections_accepted", "Client connections accepted", ["worker"]),
            "forwards": Counter("castle_forwards", "Per-owner calls sent to another worker over the shared-memory rings", ["worker"]),
        }

    # ------------------------------------------------------------------ hot path
    def request_done(self, api: str, version: int, seconds: float) -> None:
        if not self.on:
            return
        sums = self.requests.get((api, version))
        if sums is None:
            sums = self.requests[(api, version)] = _LatencySums()
        sums.buckets[bisect.bisect_left(LATENCY_BUCKETS, seconds)] += 1
        sums.total += seconds

    def loop_late(self, seconds: float) -> None:
        """The loop-lag probe's sample (broker/process/loop_lag.py), ten a second."""
        if not self.on:
            return
        lag = self.loop_lag
        lag.buckets[bisect.bisect_left(LOOP_LAG_BUCKETS, seconds)] += 1
        lag.total += seconds

    def appended(self, topic: str, size: int, records: int) -> None:
        if not self.on:
            return
        counts = self.topic_in.get(topic)
        if counts is None:
            counts = self.topic_in[topic] = [0, 0]
        counts[0] += size
        counts[1] += records

    def sent(self, topic: str, size: int) -> None:
        if self.on and size:
            self.topic_out[topic] = self.topic_out.get(topic, 0) + size

    # ------------------------------------------------------------------ once a second
    def flush(self, stats: dict[str, int]) -> None:
        if not self.on:
            return
        requests, self.requests = self.requests, {}
        for (api, version), sums in requests.items():
            labels = (api, str(version))
            self._requests.labels(*labels).inc(sum(sums.buckets))
            _add_to_histogram(self._latency.labels(*labels), sums.buckets, sums.total)
        topic_in, self.topic_in = self.topic_in, {}
        for topic, (size, records) in topic_in.items():
            self._bytes_in.labels(topic).inc(size)
            self._records_in.labels(topic).inc(records)
        topic_out, self.topic_out = self.topic_out, {}
        for topic, size in topic_out.items():
            self._bytes_out.labels(topic).inc(size)
        for seconds in FlushTimes.drain():
            self._flush.observe(seconds)
        lag, self.loop_lag = self.loop_lag, _LatencySums(LOOP_LAG_BUCKETS)
        _add_to_histogram(self._loop_lag.labels(self.worker), lag.buckets, lag.total)
        for key, counter in self._stat_counters.items():
            now = stats.get(key, 0)
            delta = now - self._counted.get(key, 0)
            if delta > 0:
                counter.labels(self.worker).inc(delta)
            self._counted[key] = now


def _add_to_histogram(child: Any, buckets: list[int], total: float) -> None:
    """Add pre-bucketed observations to a prometheus_client Histogram child.

    Uses the child's ``_buckets`` (one value per bucket, not cumulative; the exposition
    accumulates them) and ``_sum``: prometheus_client has no public bulk observe, and one
    ``observe`` per request is what this module avoids. tests/integration/broker/test_metrics.py
    checks the scraped count against the requests made, so a change of those internals
    fails a test rather than the figures."""
    for index, count in enumerate(buckets):
        if count:
            child._buckets[index].inc(count)
    child._sum.inc(total)


class SupervisorMetrics:
    """Worker and coordinator restarts, counted by the supervisor."""

    def __init__(self) -> None:
        self.on = enabled()
        if self.on:
            from prometheus_client import Counter

            self._restarts = Counter("castle_process_restarts", "Worker or coordinator processes restarted after dying",
                                     ["process"])

    def restarted(self, name: str) -> None:
        if self.on:
            self._restarts.labels(name).inc()


# ---------------------------------------------------------------------------- scraping
def read_worker_stats(run_dir: str) -> list[dict[str, Any]]:
    out = []
    for path in sorted(glob.glob(os.path.join(run_dir, "worker-*.stats.json"))):
        try:
            with open(path, "rb") as handle:
                out.append(orjson.loads(handle.read()))
        except (OSError, ValueError):
            continue  # being replaced, or a worker that never wrote one
    return out


class CastleCollector:
    """Everything one scrape shows: the multiprocess counters, then the state read from the
    workers' stats files, then consumer-group lag."""

    def __init__(self, run_dir: str, committed: Callable[[], Iterable[tuple[str, str, int, int]]]) -> None:
        from prometheus_client import multiprocess

        self.run_dir = run_dir
        self.committed = committed  # () -> (group, topic, partition, committed offset)
        self.multiprocess = multiprocess.MultiProcessCollector(None, path=metrics_dir(run_dir))

    def _process_files(self) -> list[str]:
        """The processes' metric files, without any a process is creating right now: it is
        empty until prometheus_client sizes it, and reading an empty one raised
        struct.error, which answered the whole scrape with HTTP 500 (seen in CI just after
        the workers started)."""
        files = []
        for path in glob.glob(os.path.join(metrics_dir(self.run_dir), "*.db")):
            try:
                if os.path.getsize(path) > 0:
                    files.append(path)
            except OSError:
                continue  # gone between the listing and the look
        return files

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        yield from self.multiprocess.merge(self._process_files(), accumulate=True)
        stats = read_worker_stats(self.run_dir)
        connections = GaugeMetricFamily("castle_connections", "Open client connections", labels=["worker"])
        end = GaugeMetricFamily("castle_log_end_offset", "Next offset to be written", labels=["topic", "partition"])
        start = GaugeMetricFamily("castle_log_start_offset", "First offset still in the log", labels=["topic", "partition"])
        size = GaugeMetricFamily("castle_log_size_bytes", "Bytes of the partition's segments", labels=["topic", "partition"])
        log_end: dict[tuple[str, int], int] = {}
        for worker in stats:
            connections.add_metric([str(worker.get("worker", "?"))], worker.get("open_connections", 0))
            for topic, partition, log_start, log_end_offset, size_bytes in worker.get("partitions", ()):
                labels = [topic, str(partition)]
                end.add_metric(labels, log_end_offset)
                start.add_metric(labels, log_start)
                size.add_metric(labels, size_bytes)
                log_end[(topic, partition)] = log_end_offset
        yield from (connections, end, start, size)
        committed_gauge = GaugeMetricFamily("castle_consumer_group_committed_offset",
                                            "A group's committed offset (groups this broker coordinates)",
                                            labels=["group", "topic", "partition"])
        lag = GaugeMetricFamily("castle_consumer_group_lag",
                                "Log end offset minus the group's committed offset (partitions this broker holds)",
                                labels=["group", "topic", "partition"])
        for group, topic, partition, offset in self.committed():
            labels = [group, topic, str(partition)]
            committed_gauge.add_metric(labels, offset)
            if (topic, partition) in log_end:
                lag.add_metric(labels, max(0, log_end[(topic, partition)] - offset))
        yield committed_gauge
        yield lag
        yield from telemetry_families(self.run_dir)  # what clients pushed (KIP-714)


def bind_metrics_listener(address: str, backlog: int = 64) -> socket.socket | None:
    """The supervisor binds ``metrics.listener`` (host:port) before forking; None when empty."""
    if not address:
        return None
    host, _, port = address.rpartition(":")
    sock = bind_exclusive(host.strip("[]") or "127.0.0.1", int(port), "metrics")
    sock.listen(backlog)
    return sock


def serve_metrics(sock: socket.socket, collector: CastleCollector) -> threading.Thread:
    """Serve /metrics on ``sock`` from a daemon thread (prometheus_client's WSGI app on
    wsgiref, one thread per scrape)."""
    from socketserver import ThreadingMixIn
    from wsgiref.simple_server import WSGIRequestHandler, WSGIServer

    from prometheus_client import CollectorRegistry, make_wsgi_app

    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    app = make_wsgi_app(registry)

    class Quiet(WSGIRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (wsgiref's name)
            log.debug("metrics: " + format, *args)

    class Server(ThreadingMixIn, WSGIServer):
        daemon_threads = True

    server = Server(sock.getsockname()[:2], Quiet, bind_and_activate=False)
    server.socket.close()
    server.socket = sock
    server.server_address = sock.getsockname()[:2]
    host, port = server.server_address[:2]
    server.server_name, server.server_port = str(host), int(port)
    server.setup_environ()  # what server_bind would have done
    server.set_app(app)
    thread = threading.Thread(target=server.serve_forever, name="metrics-http", daemon=True)
    thread.start()
    return thread
