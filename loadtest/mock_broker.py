"""librdkafka's in-memory mock cluster, run as a standalone broker to benchmark against.

    .venv/bin/python -m loadtest.mock_broker                         # one broker
    .venv/bin/python -m loadtest.mock_broker --topic perf --partitions 4

Prints two lines on stdout, then holds the cluster open until SIGTERM or SIGINT:

    PID=12345
    BOOTSTRAP=127.0.0.1:40123

BOOTSTRAP comes last and only once a client has fetched metadata from it, so a reader
may connect as soon as it sees that line.

Why ctypes and not a confluent_kafka.Producer with ``test.mock.num.brokers``: that
Producer starts the same mock, but confluent_kafka does not expose the mock cluster
handle, and without it topics cannot be pre-created with a chosen partition count.
The mock answers CreateTopics with UNSUPPORTED_FEATURE and auto-creates unknown
topics with 4 partitions. So we create the client handle ourselves through the C API
of the very librdkafka that confluent_kafka loaded, with the same
``test.mock.num.brokers`` setting, and call ``rd_kafka_mock_topic_create``.

What the mock is, as a baseline: a single-threaded C event loop (one thread for the
whole cluster) that keeps record batches in memory, as they arrived, and serves them back
as they are. Per partition it retains 5 MiB or 100,000 batches (fixed in librdkafka's
rdkafka_mock.c), deleting the oldest batches beyond that, so a consumer of a large topic
starts past offset 0 (a workload that needs more sets ``compare = false``: runner/workload.py). Its CPU is this process's CPU, which
also includes the idle cost of the client handle that holds it open.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import signal
import sys

import confluent_kafka  # loads the bundled librdkafka into this process

RD_KAFKA_PRODUCER = 0


def _loaded_librdkafka() -> ctypes.CDLL:
    """The librdkafka shared object confluent_kafka already mapped into this process.

    Taking the mapped file (rather than ctypes.util.find_library) guarantees the mock
    and the clients are the same librdkafka build, whatever is installed system-wide.
    """
    with open("/proc/self/maps") as maps:
        for line in maps:
            path = line.split()[-1]
            if "librdkafka" in os.path.basename(path):
                return ctypes.CDLL(path)
    raise SystemExit("librdkafka is not mapped into this process; is confluent_kafka importable?")


def _declare(lib: ctypes.CDLL) -> None:
    """Argument and result types; ctypes would otherwise truncate pointers to int."""
    vp, cp = ctypes.c_void_p, ctypes.c_char_p
    lib.rd_kafka_conf_new.restype = vp
    lib.rd_kafka_conf_set.argtypes = [vp, cp, cp, cp, ctypes.c_size_t]
    lib.rd_kafka_new.restype = vp
    lib.rd_kafka_new.argtypes = [ctypes.c_int, vp, cp, ctypes.c_size_t]
    lib.rd_kafka_destroy.argtypes = [vp]
    lib.rd_kafka_handle_mock_cluster.restype = vp
    lib.rd_kafka_handle_mock_cluster.argtypes = [vp]
    lib.rd_kafka_mock_cluster_bootstraps.restype = cp
    lib.rd_kafka_mock_cluster_bootstraps.argtypes = [vp]
    lib.rd_kafka_mock_topic_create.argtypes = [vp, cp, ctypes.c_int, ctypes.c_int]
    lib.rd_kafka_mock_set_controller_id.argtypes = [vp, ctypes.c_int32]


class MockCluster:
    """A client handle created with test.mock.num.brokers, which owns the mock cluster."""

    def __init__(self, rtt_ms: int) -> None:
        self._lib = _loaded_librdkafka()
        _declare(self._lib)
        errstr = ctypes.create_string_buffer(512)
        conf = self._lib.rd_kafka_conf_new()
        settings = {"test.mock.num.brokers": "1", "test.mock.broker.rtt": str(rtt_ms)}
        for key, value in settings.items():
            if self._lib.rd_kafka_conf_set(conf, key.encode(), value.encode(), errstr, len(errstr)) != 0:
                raise SystemExit(f"{key}={value}: {errstr.value.decode()}")
        # rd_kafka_new takes ownership of conf on success.
        self._rk = self._lib.rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, len(errstr))
        if not self._rk:
            raise SystemExit(f"rd_kafka_new: {errstr.value.decode()}")
        self._mcluster = self._lib.rd_kafka_handle_mock_cluster(self._rk)
        # The mock names no controller unless told, and an AdminClient then waits for
        # one until it times out. With broker 1 as controller, CreateTopics gets the
        # mock's prompt UNSUPPORTED_FEATURE answer instead.
        self._lib.rd_kafka_mock_set_controller_id(self._mcluster, 1)

    @property
    def bootstraps(self) -> str:
        return self._lib.rd_kafka_mock_cluster_bootstraps(self._mcluster).decode()

    def create_topic(self, topic: str, partitions: int) -> None:
        err = self._lib.rd_kafka_mock_topic_create(self._mcluster, topic.encode(), partitions, 1)
        if err != 0:
            raise SystemExit(f"creating {topic!r}: {confluent_kafka.KafkaError(err).str()}")

    def close(self) -> None:
        self._lib.rd_kafka_destroy(self._rk)


def broker_one_address(bootstraps: str, topics: list[str]) -> str:
    """host:port of broker 1 from a real metadata round trip, checking the topics exist."""
    client = confluent_kafka.Producer({"bootstrap.servers": bootstraps})
    md = client.list_topics(timeout=10)
    for topic in topics:
        if topic not in md.topics:
            raise SystemExit(f"pre-created topic {topic!r} missing from metadata")
    broker = md.brokers[1]
    return f"{broker.host}:{broker.port}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--topic", action="append", default=[], help="topic to pre-create (repeatable)")
    parser.add_argument("--partitions", type=int, default=1, help="partitions of each --topic (default 1)")
    parser.add_argument("--rtt-ms", type=int, default=0, help="test.mock.broker.rtt: added round-trip time (default 0)")
    args = parser.parse_args(argv)

    # Block the stop signals before librdkafka starts its threads (they inherit the
    # mask), so that sigwait below, in this thread, is the only one to receive them.
    stop_signals = {signal.SIGTERM, signal.SIGINT}
    signal.pthread_sigmask(signal.SIG_BLOCK, stop_signals)

    cluster = MockCluster(args.rtt_ms)
    for topic in args.topic:
        cluster.create_topic(topic, args.partitions)
    address = broker_one_address(cluster.bootstraps, args.topic)

    print(f"PID={os.getpid()}", flush=True)
    print(f"BOOTSTRAP={address}", flush=True)
    received = signal.sigwait(stop_signals)
    print(f"mock_broker: {signal.Signals(received).name}, exiting", file=sys.stderr, flush=True)
    cluster.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
