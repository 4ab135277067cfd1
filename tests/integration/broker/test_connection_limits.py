"""Kafka's connection limits on a real broker of two workers, over raw sockets from 127.0.0.1
(and 127.0.0.2, a second source address: Linux routes all of 127/8 to lo).

Each worker accepts its own connections (SO_REUSEPORT), so a limit that held per worker would
let twice as many through: the counts and rates are the broker's.
"""

from __future__ import annotations

import os
import signal
import socket
import struct
import time

import pytest

from tests.integration.broker.test_dynamic_broker_configs import SET, incremental
from tests.integration.conftest import Broker, wait_until
from tests.integration.kio_client import KioClient
from tests.kafka_cli import kafka_configs, kafka_configs_ok, missing_tools

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

CLI_VERSION = "4.4.0"


def _api_versions_frame(correlation_id: int) -> bytes:
    client = b"connection-limits-test"
    frame = struct.pack(">hhih", 18, 0, correlation_id, len(client)) + client
    return struct.pack(">i", len(frame)) + frame


def connect(broker: Broker, source: str = "127.0.0.1") -> socket.socket:
    sock = socket.create_connection((broker.host, broker.port), timeout=5, source_address=(source, 0))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # no TIME_WAIT pile-up
    return sock


def answered(sock: socket.socket, timeout: float, correlation_id: int = 7) -> bool:
    """An ApiVersions request on ``sock`` is answered (the whole frame read) within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout

    def read(size: int) -> bytes | None:
        data = b""
        while len(data) < size:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            sock.settimeout(left)
            chunk = sock.recv(size - len(data))
            if not chunk:
                return None
            data += chunk
        return data

    try:
        sock.sendall(_api_versions_frame(correlation_id))
        prefix = read(4)
        frame = None if prefix is None else read(struct.unpack(">i", prefix)[0])
        return frame is not None and struct.unpack(">i", frame[:4])[0] == correlation_id
    except OSError:  # reset by the broker, or timed out
        return False


def closed_by_broker(sock: socket.socket, within: float) -> bool:
    sock.settimeout(within)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True
    except (TimeoutError, socket.timeout):
        return False


def survivors(broker: Broker, count: int, source: str = "127.0.0.1") -> tuple[int, list[socket.socket]]:
    """Open ``count`` connections at once, then ask each for ApiVersions: how many answer, and the sockets."""
    socks = [connect(broker, source) for _ in range(count)]
    alive = sum(answered(sock, 3.0) for sock in socks)
    return alive, socks


def close_all(socks: list[socket.socket]) -> None:
    for sock in socks:
        sock.close()


def open_connections(broker: Broker) -> int:
    """The broker's open client connections, as its workers' stats files report them."""
    return sum(int(stats.get("open_connections", 0)) for stats in broker.stats())


def need_kafka_tools() -> None:
    missing = missing_tools(CLI_VERSION)
    if missing:
        pytest.fail(f"Kafka's CLI needs {', '.join(missing)} on PATH (apt-get install default-jre-headless maven)")


def usable_connections(broker: Broker, count: int, source: str = "127.0.0.1") -> int:
    alive, socks = survivors(broker, count, source)
    close_all(socks)
    wait_until(lambda: open_connections(broker) == 0, 10, "the test's connections to close")
    return alive


# ---------------------------------------------------------------------------- per ip
@pytest.mark.parametrize("broker", [{"workers": 2, "max.connections.per.ip": 5}], indirect=True)
def test_max_connections_per_ip_holds_across_workers(broker: Broker) -> None:
    wait_until(lambda: open_connections(broker) == 0, 10, "the readiness probe's connection to close")
    alive, socks = survivors(broker, 10)
    try:
        assert alive == 5, f"{alive} of 10 connections from 127.0.0.1 were served, not 5"
        for sock in socks:  # the refused ones were closed at once; the five still serve
            if answered(sock, 2.0, correlation_id=8):
                continue
            assert closed_by_broker(sock, 2.0)
        time.sleep(0.6)  # the stats files are written every 0.5 s
        assert open_connections(broker) == 5
    finally:
        close_all(socks)
    # Another address has its own count.
    assert usable_connections(broker, 7, source="127.0.0.2") == 5


@pytest.mark.parametrize("broker", [{"workers": 2, "max.connections.per.ip": 10}], indirect=True)
def test_a_killed_worker_s_connections_stop_counting_when_its_successor_starts(broker: Broker) -> None:
    wait_until(lambda: open_connections(broker) == 0, 10, "the readiness probe's connection to close")
    alive, socks = survivors(broker, 10)
    try:
        assert alive == 10
        victim = broker.stats()[1]["pid"]
        os.kill(victim, signal.SIGKILL)
        wait_until(lambda: len(broker.stats()) == 2 and broker.stats()[1]["pid"] != victim
                   and broker.stats()[1]["pid"] in broker.worker_pids(), 30, "worker 1 to be replaced")
        kept = [sock for sock in socks if answered(sock, 2.0, correlation_id=8)]  # worker 0's
        assert len(kept) < 10, "the killed worker held none of the connections"
        more, others = survivors(broker, 10)
        close_all(others)
        assert more == 10 - len(kept)  # the dead worker's connections no longer count
    finally:
        close_all(socks)


@pytest.mark.parametrize("broker", [{"workers": 2, "max.connections.per.ip": 3,
                                     "max.connections.per.ip.overrides": "127.0.0.1:8"}], indirect=True)
def test_an_override_raises_one_address_limit(broker: Broker) -> None:
    wait_until(lambda: open_connections(broker) == 0, 10, "the readiness probe's connection to close")
    assert usable_connections(broker, 12) == 8
    assert usable_connections(broker, 6, source="127.0.0.2") == 3


# ---------------------------------------------------------------------------- broker-wide
@pytest.mark.parametrize("broker", [{"workers": 2, "max.connections": 4}], indirect=True)
def test_max_connections_makes_the_next_connection_wait_for_a_slot(broker: Broker) -> None:
    wait_until(lambda: open_connections(broker) == 0, 10, "the readiness probe's connection to close")
    first = [connect(broker) for _ in range(4)]
    waiting: socket.socket | None = None
    try:
        assert all(answered(sock, 3.0) for sock in first)
        waiting = connect(broker, source="127.0.0.2")  # another address: the broker's bound, not the ip's
        assert not answered(waiting, 1.5), "a fifth connection was served over max.connections=4"
        first.pop().close()
        data = b""
        waiting.settimeout(5.0)
        while len(data) < 10:  # the request sent while it waited is answered once a slot frees
            chunk = waiting.recv(4096)
            assert chunk, "the waiting connection was closed instead of served"
            data += chunk
        assert struct.unpack(">i", data[4:8])[0] == 7
    finally:
        close_all(first)
        if waiting is not None:
            waiting.close()


@pytest.mark.parametrize("broker", [{"workers": 2}], indirect=True)
def test_lowering_max_connections_closes_connections_down_to_the_new_bound(broker: Broker) -> None:
    """Kafka's closeExcessConnections: over a max.connections lowered at run time, connections
    close (each worker's least recently active first), across the workers, down to the new bound
    and no further."""
    wait_until(lambda: open_connections(broker) == 0, 10, "the readiness probe's connection to close")
    held = [connect(broker, source="127.0.0.2") for _ in range(6)]
    try:
        assert all(answered(sock, 3.0, correlation_id=n + 1) for n, sock in enumerate(held))
        with KioClient(broker.bootstrap) as admin:  # the seventh connection
            assert incremental(admin, "", [("max.connections", SET, "3")]).error_code == 0
            everyone = [*held, admin.sock]
            wait_until(lambda: sum(closed_by_broker(sock, 0.01) for sock in everyone) >= 4, 15,
                       "four connections to be closed")
            time.sleep(1.0)  # a few more housekeeping rounds close nothing more
            alive = [sock for sock in everyone if not closed_by_broker(sock, 0.01)]
            assert len(alive) == 3
            assert all(answered(sock, 3.0, correlation_id=9) for sock in alive if sock is not admin.sock)
    finally:
        close_all(held)


@pytest.mark.parametrize("broker", [{"workers": 2, "quota.window.num": 2, "max.connection.creation.rate": 5}],
                         indirect=True)
def test_the_broker_creation_rate_delays_accepts_without_refusing_any(broker: Broker) -> None:
    """Over max.connection.creation.rate the acceptors wait (Kafka's acceptor sleeps the
    throttle time): a burst of 15 at 5/s is served whole, over more than a second."""
    time.sleep(2.0)  # the readiness probe's connection leaves the measured window
    started = time.monotonic()
    socks = [connect(broker) for _ in range(15)]
    try:
        assert all(answered(sock, 10.0) for sock in socks)
        assert time.monotonic() - started >= 1.0
    finally:
        close_all(socks)


# ---------------------------------------------------------------------------- live changes (kafka-configs)
@pytest.mark.kafka_cli
@pytest.mark.parametrize("broker", [{"workers": 2}], indirect=True)
def test_kafka_configs_changes_the_limits_live(broker: Broker) -> None:
    need_kafka_tools()
    out = kafka_configs_ok(broker.bootstrap, "--describe", "--entity-type", "brokers", "--entity-name", "0", "--all")
    for line in ("max.connections=2147483647", "max.connections.per.ip=2147483647",
                 "max.connections.per.ip.overrides=", "max.connection.creation.rate=2147483647"):
        assert f"  {line} sensitive=false synonyms={{DEFAULT_CONFIG:{line}}}" in out, (line, out)
    assert usable_connections(broker, 8) == 8

    kafka_configs_ok(broker.bootstrap, "--alter", "--entity-type", "brokers", "--entity-default", "--add-config", "max.connections.per.ip=3")
    wait_until(lambda: usable_connections(broker, 6) == 3, 15, "max.connections.per.ip=3 to hold")
    out = kafka_configs_ok(broker.bootstrap, "--describe", "--entity-type", "brokers", "--entity-name", "0", "--all")
    assert "max.connections.per.ip=3 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:max.connections.per.ip=3, " \
           "DEFAULT_CONFIG:max.connections.per.ip=2147483647}" in out, out

    kafka_configs_ok(broker.bootstrap, "--alter", "--entity-type", "brokers", "--entity-name", "0", "--add-config",
               "max.connections.per.ip.overrides=[127.0.0.1:6]")
    wait_until(lambda: usable_connections(broker, 9) == 6, 15, "the override 127.0.0.1:6 to hold")
    assert usable_connections(broker, 6, source="127.0.0.2") == 3

    # Bad values are refused whole: nothing of the request is applied.
    for bad in ("max.connections.per.ip=7,max.connections=-1", "max.connections.per.ip=7,"
                "max.connections.per.ip.overrides=[127.0.0.1]", "max.connection.creation.rate=x"):
        done = kafka_configs(broker.bootstrap, "--alter", "--entity-type", "brokers", "--entity-default", "--add-config", bad)
        assert done.returncode != 0 and "InvalidRequestException" in done.stdout + done.stderr, (bad, done.stdout)
    out = kafka_configs_ok(broker.bootstrap, "--describe", "--entity-type", "brokers", "--entity-default")
    assert "  max.connections.per.ip=3 " in out and "  max.connections=" not in out, out

    kafka_configs_ok(broker.bootstrap, "--alter", "--entity-type", "brokers", "--entity-default", "--delete-config", "max.connections.per.ip")
    kafka_configs_ok(broker.bootstrap, "--alter", "--entity-type", "brokers", "--entity-name", "0", "--delete-config",
               "max.connections.per.ip.overrides")
    kafka_configs_ok(broker.bootstrap, "--alter", "--entity-type", "brokers", "--entity-default", "--add-config", "max.connections=2")
    wait_until(lambda: usable_connections(broker, 5, source="127.0.0.2") == 2, 15, "max.connections=2 to hold")
    kafka_configs_ok(broker.bootstrap, "--alter", "--entity-type", "brokers", "--entity-default", "--delete-config", "max.connections")
    wait_until(lambda: usable_connections(broker, 8) == 8, 15, "the limits to be lifted")

    # A listener's own limit, set at run time with Kafka's listener prefix.
    kafka_configs_ok(broker.bootstrap, "--alter", "--entity-type", "brokers", "--entity-default", "--add-config",
               "listener.name.plaintext.max.connections=2")
    wait_until(lambda: usable_connections(broker, 5, source="127.0.0.2") == 2, 15, "the listener's limit to hold")
    out = kafka_configs_ok(broker.bootstrap, "--describe", "--entity-type", "brokers", "--entity-name", "0", "--all")
    assert "listener.name.plaintext.max.connections=2 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:" \
           "listener.name.plaintext.max.connections=2, DEFAULT_CONFIG:max.connections=2147483647}" in out, out
    kafka_configs_ok(broker.bootstrap, "--alter", "--entity-type", "brokers", "--entity-default", "--delete-config",
               "listener.name.plaintext.max.connections")
    wait_until(lambda: usable_connections(broker, 8) == 8, 15, "the listener's limit to be lifted")


# ---------------------------------------------------------------------------- the ips quota
@pytest.mark.kafka_cli
@pytest.mark.parametrize("broker", [{"workers": 2, "quota.window.num": 2}], indirect=True)
def test_ip_connection_creation_rate_throttles_a_burst(broker: Broker) -> None:
    """With two samples of one second, Kafka's rate of a burst is its count over one second:
    at 5/s the sixth connection of a burst is over the quota, taken back out of the rate and
    closed unanswered once its throttle time (about 200 ms) passed."""
    need_kafka_tools()
    kafka_configs_ok(broker.bootstrap, "--alter", "--entity-type", "ips", "--entity-name", "127.0.0.1", "--add-config",
               "connection_creation_rate=5")
    time.sleep(2.5)  # the quota reaches the workers, and the tool's own connections leave the measured window
    started = time.monotonic()
    socks = [connect(broker) for _ in range(30)]
    try:
        served, closed_late = 0, 0
        for sock in socks:
            if answered(sock, 3.0):
                served += 1
            elif closed_by_broker(sock, 3.0):
                closed_late += 1
        assert 5 <= served <= 6, f"{served} of a burst of 30 were served at connection_creation_rate=5"
        assert served + closed_late == 30, (served, closed_late)
        assert time.monotonic() - started >= 0.15  # the throttled ones were closed after a delay, not at once
    finally:
        close_all(socks)
    # An address without the quota is not throttled.
    alive, others = survivors(broker, 30, source="127.0.0.2")
    close_all(others)
    assert alive == 30
