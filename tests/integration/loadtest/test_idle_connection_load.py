"""loadtest/runner/idle_connections.py against a real Castle: 1,000 connections through
ApiVersions + Metadata, held idle while the broker keeps serving, closed on SIGTERM with
a clean summary; a broker that closes idle connections (connections.max.idle.ms) has
every one of them reported as closed by the peer."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest

from loadtest.runner.idle_connections import IdleConnectionsChild
from tests.integration.conftest import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
COUNT = 1000


def _api_versions(bootstrap: str, correlation_id: int = 7) -> None:
    from broker.protocol import codec
    from broker.protocol.build import build
    from tests.integration.kio_client import decode_response, encode_request, read_frame

    host, port = bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.settimeout(10)
        request_class = codec.request_class(18, 3)
        assert request_class is not None
        body = build(request_class, {"client_software_name": "idle-load-test", "client_software_version": "1"})
        sock.sendall(encode_request(18, 3, correlation_id, body))
        got, response = decode_response(18, 3, read_frame(sock))
        assert got == correlation_id and int(response.error_code) == 0


def _stderr(tmp_path) -> str:
    with open(os.path.join(str(tmp_path), "idle_connections.stderr"), "rb") as handle:
        return handle.read().decode(errors="replace")[-4000:]


def test_thousand_idle_connections_are_held_and_closed_cleanly(broker, tmp_path):
    with open(os.path.join(str(tmp_path), "idle_connections.stderr"), "wb") as err, \
            IdleConnectionsChild(broker.bootstrap, COUNT, report_interval_s=0.5, stderr=err) as child:
        established = child.wait_established(timeout=60)
        assert established["open"] == COUNT and established["failed"] == 0, (established, _stderr(tmp_path))
        assert established["errors"] == {} and established["closed_by_peer"] == 0
        # The broker accepted them all and still answers a new client while they are held.
        wait_until(lambda: sum(s.get("connections", 0) for s in broker.stats()) >= COUNT, 10, "the broker's connection count")
        _api_versions(broker.bootstrap)
        held = child.wait_for("held", timeout=10)
        assert held["open"] == COUNT and held["closed_by_peer"] == 0 and held["unasked_bytes"] == 0
        _api_versions(broker.bootstrap, correlation_id=8)
        summary = child.stop(timeout=30)
    assert summary["exit_code"] == 0, _stderr(tmp_path)
    assert summary["stopped_by"] == "signal SIGTERM"
    assert summary["closed_by_peer"] == 0 and summary["open_at_stop"] == COUNT
    assert summary["established"] == COUNT and summary["failed"] == 0
    _api_versions(broker.bootstrap, correlation_id=9)  # and after they are gone


@pytest.mark.parametrize("broker", [{"connections.max.idle.ms": 1000}], indirect=True)
def test_connections_the_broker_closes_as_idle_are_reported(broker, tmp_path):
    count = COUNT
    with open(os.path.join(str(tmp_path), "idle_connections.stderr"), "wb") as err, \
            IdleConnectionsChild(broker.bootstrap, count, hold_s=3.0, report_interval_s=1.0, stderr=err) as child:
        established = child.wait_established(timeout=60)
        assert established["failed"] == 0, (established, _stderr(tmp_path))
        assert established["open"] + established["closed_by_peer"] == count
        summary = child.wait_done(timeout=30)
    assert summary["exit_code"] == 0, _stderr(tmp_path)
    assert summary["stopped_by"] == "hold elapsed"
    assert summary["closed_by_peer"] == count, summary
    assert summary["open_at_stop"] == 0
    assert set(summary["closed_by_peer_reasons"]) <= {"eof", "ConnectionResetError"}
    assert any(e["event"] == "held" and e["closed_by_peer"] > 0 for e in child.events), "not seen while held"


def test_a_count_beyond_the_descriptor_limit_fails_at_once():
    completed = subprocess.run([sys.executable, "-m", "loadtest.runner.idle_connections", "--bootstrap", "127.0.0.1:9",
                                "--count", "10000000", "--json"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert completed.returncode == 2
    assert "RLIMIT_NOFILE" in completed.stderr and completed.stdout == ""


def test_nothing_to_connect_to_is_reported():
    with socket.socket() as holder:  # a port with nothing listening on it
        holder.bind(("127.0.0.1", 0))
        port = holder.getsockname()[1]
        completed = subprocess.run([sys.executable, "-m", "loadtest.runner.idle_connections", "--bootstrap",
                                    f"127.0.0.1:{port}", "--count", "20", "--json", "--quiet"],
                                   cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert completed.returncode == 1, completed.stderr
    lines = [line for line in completed.stdout.splitlines() if line]
    established, summary = (json.loads(line) for line in lines)
    assert established["event"] == "established" and established["open"] == 0 and established["failed"] == 20
    assert established["errors"] == {"connect: ConnectionRefusedError (errno 111)": 20}
    assert summary["event"] == "summary" and summary["stopped_by"] == "nothing established"
