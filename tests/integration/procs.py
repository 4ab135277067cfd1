"""Processes of a test, read from /proc, and child processes that report as JSON lines.

* ``process_tree``: a broker's supervisor and all its descendants (its workers and
  coordinator), from the ppid links of /proc/*/stat.
* ``proc_cpu_ticks``: the CPU of one process, in clock ticks.
* ``ChildProcess``: a child (a group member, tests/integration/group_member.py) that writes
  one JSON object per line on stdout; a reader thread collects them as events.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
from typing import Any

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _stat_fields(pid: int) -> list[bytes]:
    """Fields 3.. of /proc/<pid>/stat (state first): the command name (field 2) is in
    parentheses and may itself hold spaces or ')', so the split starts after the last ')'."""
    with open(f"/proc/{pid}/stat", "rb") as handle:
        raw = handle.read()
    return raw[raw.rindex(b")") + 2:].split()


def proc_cpu_ticks(pid: int) -> int:
    """utime + stime + cutime + cstime of a process (all its threads), in clock ticks."""
    utime, stime, cutime, cstime = (int(x) for x in _stat_fields(pid)[11:15])  # fields 14..17
    return utime + stime + cutime + cstime


def process_tree(root: int) -> list[int]:
    """root and all its descendants."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                ppid = int(_stat_fields(int(name))[1])  # field 4
            except OSError:  # exited between listdir and open
                continue
            children.setdefault(ppid, []).append(int(name))
    tree, todo = [], [root]
    while todo:
        pid = todo.pop()
        tree.append(pid)
        todo.extend(children.get(pid, ()))
    return tree


class ChildProcess:
    """A child process in its own session, its JSON lines collected as events, its stderr
    in a file under log_dir."""

    def __init__(self, command: list[str], name: str, log_dir: str) -> None:
        self.name = name
        self.events: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self.stderr_path = os.path.join(log_dir, f"{name}.stderr")
        with open(self.stderr_path, "wb") as err:
            self.process = subprocess.Popen(command, cwd=REPO_ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                            stderr=err, start_new_session=True)
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
                self.kill()
                code = None
        else:
            code = self.process.returncode
        self._reader.join(10)
        if self.process.stdout is not None:
            self.process.stdout.close()
        return code

    def stderr_tail(self, lines: int = 20) -> str:
        """The last lines of the child's stderr ('' if it cannot be read)."""
        try:
            with open(self.stderr_path, "rb") as handle:
                return "\n".join(handle.read().decode(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""
