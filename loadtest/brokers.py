"""The brokers a benchmark runs against, as child processes stopped by their PIDs.

* ``OwnBroker``: ``castle serve`` on a free port with a temporary log dir and run dir.
* ``MockBroker``: librdkafka's in-memory mock cluster (``python -m loadtest.mock_broker``).
* ``process_role``: what a process of Castle's tree is (supervisor, worker, coordinator),
  from the process title the broker sets.
"""

from __future__ import annotations

import os
import random
import select
import signal
import socket
import subprocess
import sys
import time
from typing import Any, Callable

from loadtest.common import file_tail, info, process_tree

PYTHON = sys.executable
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
now = time.monotonic


def wait_until(condition: Callable[[], Any], timeout: float, what: str, interval: float = 0.02) -> Any:
    """Poll condition until it returns something truthy; TimeoutError after timeout s."""
    deadline = now() + timeout
    while True:
        value = condition()
        if value:
            return value
        if now() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)


def process_role(pid: int, root: int) -> str:
    if pid == root:
        return "supervisor"
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            cmdline = handle.read()
    except OSError:
        return "gone"
    if b": coordinator" in cmdline:
        return "coordinator"
    if b": worker" in cmdline:
        return "worker"
    return "other"


def castle_command() -> list[str]:
    script = os.path.join(os.path.dirname(PYTHON), "castle")
    return [script] if os.path.exists(script) else [PYTHON, "-m", "broker"]


def ephemeral_range_start() -> int:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as handle:
            return int(handle.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port(claim: Callable[[int], bool] = lambda port: True) -> int:
    """A port free now, chosen below the kernel's ephemeral range: a port the OS hands out
    for bind(0) or connect() (a broker's own worker ports, any client's source port) could
    otherwise be taken between this choice and the server's bind (seen: a benchmark's
    broker failing with EADDRINUSE on a bind(0)-chosen port while tests ran beside it).
    ``claim`` may refuse a port (the tests' cross-process reservation)."""
    low = ephemeral_range_start()
    chooser = random.Random(os.urandom(8))
    for _ in range(200):
        port = chooser.randrange(max(1024, low - 12000), low)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        if claim(port):
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class OwnBroker:
    """``castle serve`` as a child, on a free port, with a temporary log dir and run dir."""

    def __init__(self, base_dir: str, overrides: dict[str, str]) -> None:
        self.port = free_port()
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.log_dir = os.path.join(base_dir, "data")
        self.run_dir = os.path.join(base_dir, "run")  # short: IPC socket paths (sun_path <= 108 bytes)
        self.stderr_path = os.path.join(base_dir, "broker.stderr")
        # Its own metrics port: a benchmark broker must not collide with a Castle already
        # serving the default 127.0.0.1:9308 on this machine.
        self.settings = {"log.dirs": self.log_dir, "listeners": f"PLAINTEXT://{self.bootstrap}", "run.dir": self.run_dir,
                         "metrics.listener": f"127.0.0.1:{free_port()}"}
        self.settings.update(overrides)
        self.command = castle_command() + ["serve"]
        for key, value in self.settings.items():
            self.command += ["--override", f"{key}={value}"]
        self.known_pids: set[int] = set()
        with open(self.stderr_path, "wb") as err:
            self.process = subprocess.Popen(self.command, stdin=subprocess.DEVNULL, stdout=err, stderr=err,
                                            start_new_session=True)

    @property
    def pid(self) -> int:
        return self.process.pid

    def children(self) -> list[int]:
        return [p for p in process_tree(self.pid) if p != self.pid]

    def wait_ready(self, timeout: float = 30.0) -> None:
        def ready() -> bool:
            if self.process.poll() is not None:
                raise SystemExit(f"castle serve exited with {self.process.returncode} while starting:\n{self.stderr_tail()}")
            kids = self.children()
            self.known_pids.update(kids)
            if not any(process_role(p, self.pid) == "coordinator" for p in kids):
                return False
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return True
            except OSError:
                return False

        wait_until(ready, timeout, f"castle serve on {self.bootstrap}", interval=0.1)

    def stop(self, timeout: float = 45.0) -> int | None:
        self.known_pids.update(self.children())
        code: int | None = self.process.poll()
        if code is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                code = self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                info(f"WARNING: castle serve (pid {self.pid}) did not stop {timeout} s after SIGTERM; SIGKILL")
                self.process.kill()
                self.process.wait(10)
                code = None
        # Workers and the coordinator exit with the supervisor; any left over is killed by PID.
        deadline = now() + 10
        for pid in sorted(self.known_pids):
            while _alive_castle(pid) and now() < deadline:
                time.sleep(0.05)
            if _alive_castle(pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        return code

    def stderr_tail(self, lines: int = 40) -> str:
        return file_tail(self.stderr_path, lines)


def _alive_castle(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            cmdline = handle.read()
    except OSError:
        return False
    return stat[stat.rindex(b")") + 2:][:1] != b"Z" and b"castle" in cmdline


class MockBroker:
    """python -m loadtest.mock_broker as a child process, stopped by PID on exit."""

    def __init__(self, topics: list[str], partitions: int, ready_timeout_s: float = 30.0) -> None:
        cmd = [PYTHON, "-m", "loadtest.mock_broker", "--partitions", str(partitions)]
        for topic in topics:
            cmd += ["--topic", topic]
        self.proc = subprocess.Popen(cmd, cwd=REPO_ROOT, stdout=subprocess.PIPE)
        try:
            self.bootstrap = self._read_bootstrap(ready_timeout_s)
        except BaseException:
            self.stop()
            raise

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _read_bootstrap(self, timeout_s: float) -> str:
        """Waits for the BOOTSTRAP= line. Reads the raw pipe: select() on a buffered
        reader would miss lines already pulled into the buffer by a previous read."""
        assert self.proc.stdout is not None
        fd, seen = self.proc.stdout.fileno(), b""
        deadline = time.monotonic() + timeout_s
        while (left := deadline - time.monotonic()) > 0:
            if not select.select([fd], [], [], left)[0]:
                continue
            chunk = os.read(fd, 4096)
            if not chunk:
                break  # EOF: the child died
            seen += chunk
            for line in seen.split(b"\n")[:-1]:  # complete lines only
                if line.startswith(b"BOOTSTRAP="):
                    return line.split(b"=", 1)[1].decode().strip()
        raise SystemExit(f"mock broker gave no BOOTSTRAP line (exit code {self.proc.poll()})")

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
