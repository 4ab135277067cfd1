"""py-spy on a broker's processes while a benchmark runs, and where the time went.

``Profiles.start(label, pids)`` runs one ``py-spy record`` per process (``--format raw``:
collapsed stacks, one line per distinct stack with its sample count, ``--idle`` so that
time waiting in the event loop's select shows too); ``stop()`` ends them with SIGINT, which
makes py-spy write its file. ``summary(path)`` reads a collapsed file back: the share of
samples per function at the top of the stack (self time) and anywhere in it (total time),
the figures docs/BENCHMARKS.md quotes. py-spy is a benchmark dependency (pyproject's
``bench`` extra); without it the benchmark runs unprofiled and says so.
"""

from __future__ import annotations

import collections
import os
import shutil
import signal
import subprocess
import sys
from typing import Iterable

from loadtest.common import info

IDLE_FRAMES = ("select (selectors.py", "run_once (uvloop", "poll (selectors.py")
HELPER_THREAD_ROOT = "Thread._bootstrap "  # the outermost frame of every thread but the main one


class Profiles:
    def __init__(self, out_dir: str, rate_hz: int = 200) -> None:
        self.out_dir = out_dir
        self.rate_hz = rate_hz
        self._running: list[tuple[subprocess.Popen[bytes], str]] = []

    def start(self, label: str, pids: Iterable[int]) -> list[str]:
        """Profile each pid into ``<out_dir>/<label>-<pid>.txt``; the paths."""
        # Beside the interpreter first: a venv's scripts are not on PATH when it is run as .venv/bin/python.
        spy = shutil.which("py-spy", path=os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")]))
        if spy is None:
            info("py-spy not installed (pip install '.[bench]'): not profiling")
            return []
        os.makedirs(self.out_dir, exist_ok=True)
        paths = []
        for pid in pids:
            path = os.path.join(self.out_dir, f"{label}-{pid}.txt")
            process = subprocess.Popen([spy, "record", "--pid", str(pid), "--rate", str(self.rate_hz), "--idle",
                                        "--nonblocking", "--format", "raw", "--output", path],
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            self._running.append((process, path))
            paths.append(path)
        return paths

    def stop(self, timeout: float = 30.0) -> None:
        for process, _path in self._running:
            if process.poll() is None:
                process.send_signal(signal.SIGINT)
        for process, path in self._running:
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(5)
                info(f"py-spy for {path} did not stop: killed")
        self._running.clear()


def summary(path: str, top: int = 15) -> dict[str, list[tuple[str, float]]]:
    """Self and total shares (percent of the main thread's samples) of the ``top`` functions
    in a collapsed-stack file; a sample whose innermost frame is the event loop's wait counts
    as idle ("<idle>"). Only the main thread (the event loop) counts: py-spy samples every
    thread alike, so the idle helper threads (flusher, releaser, executor) would otherwise
    bury the loop's figures."""
    own: collections.Counter[str] = collections.Counter()
    anywhere: collections.Counter[str] = collections.Counter()
    samples = 0
    with open(path) as lines:
        for line in lines:
            stack, _, count_text = line.rstrip("\n").rpartition(" ")
            if not stack or not count_text.isdigit():
                continue
            count = int(count_text)
            frames = stack.split(";")
            if frames[0].startswith(HELPER_THREAD_ROOT):
                continue
            samples += count
            leaf = frames[-1]
            own["<idle>" if any(marker in leaf for marker in IDLE_FRAMES) else leaf] += count
            for frame in set(frames[1:]):  # the first is the process/thread name
                anywhere[frame] += count
    if not samples:
        return {"self": [], "total": []}

    def shares(counter: collections.Counter[str]) -> list[tuple[str, float]]:
        return [(name, round(100 * count / samples, 1)) for name, count in counter.most_common(top)]

    return {"self": shares(own), "total": shares(anywhere)}

