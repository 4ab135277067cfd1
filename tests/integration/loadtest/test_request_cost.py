"""loadtest.micro.request_cost against a real broker: every request is answered, the offsets
move by exactly the records sent, and the broker's CPU is read from its processes."""

from __future__ import annotations

import json
import socket
from typing import Any

import pytest

from loadtest.micro import request_cost

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("window", [1, 8])
def test_rounds_report_broker_cpu_per_request(broker: Any, window: int, capsys: pytest.CaptureFixture[str]) -> None:
    code = request_cost.main(["--bootstrap", broker.bootstrap, "--broker-pid-tree", str(broker.pid),
                              "--topic", f"cost-{window}", "--requests", "300", "--window", str(window),
                              "--rounds", "2", "--warmup", "20", "--records", "3", "--record-size", "100", "--json"])
    assert code == 0
    result = json.loads(capsys.readouterr().out)
    assert result["window"] == window and result["records"] == 3
    assert len(result["rounds"]) == 2
    for r in result["rounds"]:
        assert r["requests"] == 300
        assert r["broker_cpu_s"] > 0  # 300 Produce requests cost the workers more than 0 ticks
        assert r["broker_cpu_us_per_request"] == pytest.approx(r["broker_cpu_s"] / 300 * 1e6, abs=0.1)
    # The leader is a worker's own listener or the shared port: an address of this host.
    assert result["leader"].startswith("127.0.0.1:")


def test_an_error_answer_stops_the_run(broker: Any) -> None:
    # Records of 2 MiB exceed the default max.message.bytes (1 MiB): the first answer is
    # MESSAGE_TOO_LARGE, and the tool says so instead of timing failures.
    with pytest.raises(SystemExit, match="error code 10"):
        request_cost.main(["--bootstrap", broker.bootstrap, "--broker-pid-tree", str(broker.pid),
                           "--topic", "cost-too-large", "--requests", "10", "--rounds", "1", "--warmup", "0",
                           "--records", "1", "--record-size", str(2 << 20)])


def test_the_floor_server_answers_like_a_broker_and_is_stopped(capsys: pytest.CaptureFixture[str]) -> None:
    code = request_cost.main(["--floor", "--requests", "200", "--window", "4", "--rounds", "2", "--warmup", "5",
                              "--records", "2", "--json"])
    assert code == 0
    result = json.loads(capsys.readouterr().out)
    assert result["floor"] is True and result["batch_bytes"] > 2 * 1024
    assert [r["requests"] for r in result["rounds"]] == [200, 200]  # each round's offsets checked, too
    port = int(result["leader"].rsplit(":", 1)[1])
    with pytest.raises(ConnectionRefusedError):  # the child was stopped by its PID
        socket.create_connection(("127.0.0.1", port), timeout=5).close()


def test_bootstrap_without_a_pid_to_measure_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        request_cost.main(["--bootstrap", "127.0.0.1:1"])
    assert "--broker-pid-tree" in capsys.readouterr().err
