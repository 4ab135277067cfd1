"""A test's client program running as a child process (Kafka's Java clients, franz-go): its
stdout and stderr go to files (read while it runs, kept for the failure report), one event a
line on stdout, and it is stopped by its own PID.

    member = ClientProcess(["prog", "name=value"], log_dir=tmp_path, name="member-1")
    member.wait_for_line(r"^ASSIGNED \\S", timeout=60)
    member.stop()  # SIGTERM (the program closes its client), SIGKILL after a timeout
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path
from typing import IO


def lines_with(stdout: str, first_word: str) -> list[list[str]]:
    """The words of every line of ``stdout`` whose first word is ``first_word`` (that word left out)."""
    found = []
    for line in stdout.splitlines():
        words = line.split()
        if words and words[0] == first_word:
            found.append(words[1:])
    return found


class ClientProcess:
    def __init__(self, command: list[str], log_dir: Path, name: str, env: dict[str, str] | None = None) -> None:
        log_dir.mkdir(parents=True, exist_ok=True)
        self.stdout_path = log_dir / f"{name}.out"
        self.stderr_path = log_dir / f"{name}.err"
        self._stdout: IO[bytes] = open(self.stdout_path, "wb")
        self._stderr: IO[bytes] = open(self.stderr_path, "wb")
        self.process = subprocess.Popen(command, stdout=self._stdout, stderr=self._stderr, stdin=subprocess.DEVNULL,
                                        env=env)
        self.pid = self.process.pid
        self.name = name

    def stdout(self) -> str:
        return self.stdout_path.read_text(errors="replace")

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def lines_with(self, first_word: str) -> list[list[str]]:
        return lines_with(self.stdout(), first_word)

    def wait_for_line(self, pattern: str, timeout: float) -> re.Match[str]:
        """The first stdout line matching the regular expression ``pattern``; fails after ``timeout``
        seconds, or at once when the process exits without printing one."""
        regex = re.compile(pattern)
        deadline = time.monotonic() + timeout
        while True:
            exited = self.process.poll() is not None
            for line in self.stdout().splitlines():
                match = regex.search(line)
                if match:
                    return match
            if exited:
                raise AssertionError(f"{self.name} exited {self.process.returncode} before printing /{pattern}/:\n"
                                     f"{self.report()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.name}: no line /{pattern}/ in {timeout} s:\n{self.report()}")
            time.sleep(0.1)

    def wait(self, timeout: float) -> int:
        """The exit code; fails (and kills the process) after ``timeout`` seconds."""
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"{self.name} still running after {timeout} s:\n{self.report()}") from None

    def kill(self) -> None:
        """SIGKILL (an unclean stop: no close, no flush, no transaction ended) and reap."""
        if self.process.poll() is None:
            os.kill(self.pid, signal.SIGKILL)
        self.process.wait(30)
        self._close_files()

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM (the program closes its clients), SIGKILL after ``timeout`` s."""
        if self.process.poll() is None:
            os.kill(self.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                os.kill(self.pid, signal.SIGKILL)
                self.process.wait(30)
        self._close_files()
        return self.process.returncode

    def _close_files(self) -> None:
        self._stdout.close()
        self._stderr.close()

    def report(self, tail: int = 6000) -> str:
        return f"--- stdout\n{self.stdout()[-tail:]}\n--- stderr\n{self.stderr()[-tail:]}"
