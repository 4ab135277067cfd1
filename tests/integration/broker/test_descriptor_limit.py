"""Running out of file descriptors: the broker raises its soft limit to the hard one at
start, and a worker that still runs out stops accepting for a moment instead of spinning
on a listener that stays readable (found by the 5,000-connection benchmark)."""

from __future__ import annotations

import socket
import sys
import time

import pytest

from loadtest.common import proc_cpu_ticks
from tests.integration.conftest import round_trip, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def _with_limits(broker, soft: int, hard: int) -> None:
    """Start the broker through a tiny exec wrapper that sets RLIMIT_NOFILE first."""
    original = broker.command
    wrapper = [sys.executable, "-c",
               "import os, resource, sys; resource.setrlimit(resource.RLIMIT_NOFILE, (int(sys.argv[1]), int(sys.argv[2])));"
               " os.execv(sys.argv[3], sys.argv[3:])", str(soft), str(hard)]
    broker.command = lambda: wrapper + original()


def _open_files_limit(pid: int) -> tuple[int, int]:
    with open(f"/proc/{pid}/limits") as handle:
        for line in handle:
            if line.startswith("Max open files"):
                soft, hard = line.split()[3:5]
                return int(soft), int(hard)
    raise AssertionError("no 'Max open files' line")


def test_the_soft_open_files_limit_is_raised_to_the_hard_one(broker_factory):
    broker = broker_factory(workers=1, start=False)
    _with_limits(broker, 512, 4096)
    broker.start()
    for pid in [broker.pid, *broker.worker_pids()]:
        assert _open_files_limit(pid) == (4096, 4096)


def test_a_worker_out_of_descriptors_backs_off_and_serves_again(broker_factory):
    broker = broker_factory(workers=1, start=False)
    _with_limits(broker, 1024, 1024)
    broker.start()
    [worker] = broker.worker_pids()
    clients = []
    try:
        for _ in range(1500):  # more than the worker can hold: the rest wait in the accept queue
            clients.append(socket.create_connection((broker.host, broker.port), timeout=5))
        wait_until(lambda: "accept failed" in broker.stderr(), 20, "the worker to run out of descriptors")
        ticks_before = proc_cpu_ticks(worker)
        time.sleep(2.0)
        cpu_s = (proc_cpu_ticks(worker) - ticks_before) / 100
        failures = broker.stderr(tail=100_000).count("accept failed")
        # A spinning worker burns a whole core and writes this line ~50,000 times a second.
        assert cpu_s < 0.5, f"worker used {cpu_s:.2f} CPU-s in 2 s while out of descriptors"
        assert failures < 200, f"{failures} 'accept failed' lines"
    finally:
        for sock in clients:
            sock.close()
    # Descriptors free again: new clients are served, by the same worker.
    wait_until(lambda: round_trip(broker.host, broker.port), 20, "a round trip after the clients closed")
    assert broker.worker_pids() == [worker]
