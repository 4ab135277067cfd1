"""connections.max.idle.ms: a connection with nothing in flight and no traffic for that
long is closed by the broker, as Kafka does; one that keeps talking stays open."""

from __future__ import annotations

import socket
import time

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

IDLE_MS = 1000


def _api_versions(sock: socket.socket, correlation_id: int) -> None:
    from broker.protocol import codec
    from broker.protocol.build import build
    from tests.integration.kio_client import decode_response, encode_request, read_frame

    body = build(codec.request_class(18, 3), {"client_software_name": "idle-test", "client_software_version": "1"})
    sock.sendall(encode_request(18, 3, correlation_id, body))
    assert decode_response(18, 3, read_frame(sock))[0] == correlation_id


def _closed_by_peer(sock: socket.socket, within: float) -> bool:
    sock.settimeout(within)
    try:
        return sock.recv(1) == b""
    except TimeoutError:
        return False


@pytest.mark.parametrize("broker", [{"connections.max.idle.ms": IDLE_MS}], indirect=True)
def test_idle_connection_is_closed_and_a_busy_one_is_not(broker):
    host, port = broker.bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as idle, \
            socket.create_connection((host, int(port)), timeout=10) as busy:
        _api_versions(idle, 1)
        _api_versions(busy, 1)
        started = time.monotonic()
        for i in range(2, 12):  # ~2.5 s of requests every 0.25 s: never idle for a whole second
            time.sleep(0.25)
            _api_versions(busy, i)
        assert _closed_by_peer(idle, within=5), "the idle connection was not closed"
        assert time.monotonic() - started >= IDLE_MS / 1000
        _api_versions(busy, 99)  # still served
