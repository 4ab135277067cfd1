"""Child processes that report as JSON lines on stdout, and the child's side (emit).

The benchmark tools run each client (producer, group member, consumer) in a process of
its own, so one client's GIL never slows another and a client can be SIGKILLed alone.
A child writes one JSON object per line with ``emit``; the parent's ``ChildProcess``
collects them in a list that the parent reads with ``snapshot``. The integration tests
run their group members with the same pair (tests/integration/group_member.py): one
copy, here, since loadtest/ may not import tests/.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from typing import Any

from loadtest.brokers import REPO_ROOT
from loadtest.common import file_tail, info

_emit_lock = threading.Lock()


def emit(**fields: Any) -> None:
    """One JSON line on stdout, whole (threads of the child may emit concurrently)."""
    line = json.dumps(fields) + "\n"
    with _emit_lock:
        sys.stdout.write(line)
        sys.stdout.flush()


class ChildProcess:
    """A child process whose JSON lines on stdout a reader thread collects as events.

    It runs in its own session (a terminal's Ctrl-C reaches only the parent, which stops
    its children in order) with stderr in a file under log_dir.
    """

    def __init__(self, command: list[str], name: str, log_dir: str, stdin: bool = False) -> None:
        self.name = name
        self.events: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self.stderr_path = os.path.join(log_dir, f"{name}.stderr")
        with open(self.stderr_path, "wb") as err:
            self.process = subprocess.Popen(
                command, cwd=REPO_ROOT,
                stdin=subprocess.PIPE if stdin else subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err,
                start_new_session=True)  # fmt: skip
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    @property
    def pid(self) -> int:
        return self.process.pid

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            with self._lock:
                self.events.append(event)

    def snapshot(self, kind: str | None = None) -> list[dict[str, Any]]:
        with self._lock:
            return [e for e in self.events if kind is None or e["event"] == kind]

    def send(self, line: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line.encode())
        self.process.stdin.flush()

    def kill(self) -> None:
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(10)
        self._reader.join(10)

    def stop(self, timeout: float = 30.0) -> int | None:
        """SIGTERM, wait, SIGKILL if it did not exit; returns the exit code (None: killed)."""
        code: int | None
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGTERM)
            try:
                code = self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                info(f"WARNING: {self.name} (pid {self.pid}) did not exit {timeout} s after SIGTERM; SIGKILL")
                self.kill()
                code = None
        else:
            code = self.process.returncode
        self._reader.join(10)
        if self.process.stdin is not None:
            self.process.stdin.close()
        if self.process.stdout is not None:
            self.process.stdout.close()
        return code

    def stderr_tail(self, lines: int = 20) -> str:
        return file_tail(self.stderr_path, lines)
